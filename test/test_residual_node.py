"""``arm-dyn-id residual`` and identifier_node give the same contact episodes on the same
bag (issue 24): the model folder of a fit from currents, thresholds calibrated into it by
the command, the node started with that folder's model file alone (no config, no
thresholds given), the push recording played into the node as joint_states."""

import json

import numpy as np
import pytest

from arm_dyn_id.service import contact
from ros_utils import RosHarness, node_output, start_node, stop
from test_cli_full import fourier_data, write_plain_bag
from test_cli_full import run as run_cli
from test_cli_fit import JOINTS, write_config
from test_residual import PUSH_N, free_run, write_run

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402

from test_identifier_full import diagnostics, joint_state, stamp_of  # noqa: E402

NODE = 'arm_dyn_id.nodes.identifier_node'
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def test_the_node_and_the_residual_command_give_the_same_episodes(ros_env, tmp_path,
                                                                  capsys):
    config = write_config(tmp_path / 'arm.yaml')
    bag = write_plain_bag(tmp_path / 'fourier', fourier_data(seed=0))
    code, _, err = run_cli(capsys, 'fit', bag, '--config', config, '--out', tmp_path / 'fit',
                           '--methods', 'wls', '--dynamics', 'full', '--no-report', '--quiet')
    assert code == 0, err
    model_file = tmp_path / 'fit' / 'model.yaml'
    free = [write_run(tmp_path / f'free_{s}', free_run(s, segments=3)) for s in (21, 22)]
    code, _, err = run_cli(capsys, 'residual', model_file, *free, '--config', config,
                           '--calibrate', '--quiet')
    assert code == 0, err
    assert (model_file.parent / contact.FILE_NAME).is_file()
    data = free_run(23, segments=2, pushes=[(1.0, 0.6, (PUSH_N, 0.0, 0.0))])
    push = write_run(tmp_path / 'push', data)
    code, _, err = run_cli(capsys, 'residual', model_file, push, '--config', config,
                           '--json', tmp_path / 'push.json', '--quiet')
    assert code == 0, err
    expected = json.loads((tmp_path / 'push.json').read_text())['bags'][0]['episodes']
    assert len(expected) == 1, expected

    # the node: the model file alone (its measurement: currents and their constants; the
    # folder's calibrated thresholds)
    proc = start_node(NODE, {'serve_only': True, 'model_file': str(model_file)}, ros_env,
                      name='identifier')
    t, n = data['t'], len(data['t'])
    with RosHarness(ros_env.domain_id, name='residual_probe') as h:
        external, flags, order = {}, {}, []
        outputs = [h.node.create_subscription(
            JointState, 'external_torques',
            lambda m: external.__setitem__(round(stamp_of(m), 6), np.asarray(m.effort)), QOS)]
        # the contact flags, matched to their inputs by order (a Bool has no stamp): the
        # node publishes contact after external_torques for each input, in order
        outputs.append(h.node.create_subscription(
            Bool, 'contact', lambda m: order.append(bool(m.data)), QOS))
        states = h.node.create_publisher(JointState, 'joint_states', QOS)
        diags = diagnostics(h)
        h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', 60.0,
                   what='the full model loaded')
        status = diags[-1].get('residual', '')
        assert 'calibrated thresholds' in status and 'current' in status, status
        h.wait_for_subscribers(states, timeout=20.0)
        for sub in outputs:     # matched both ways before the first input
            h.wait_for_publishers(sub, timeout=20.0)
        h.publish_paced(
            states, (joint_state(t[k], JOINTS, data['q'][k], data['dq'][k],
                                 data['current'][k]) for k in range(n)),
            lambda: min(len(external), len(order)),
            why=lambda: (f'{len(external)} external_torques, {len(order)} contact; '
                         f'{diags[-1:]}\n{node_output(proc)}'))
        flags.update(zip(range(n), order))
    assert stop(proc) == 0, node_output(proc)
    residual = np.array([external[round(float(s), 6)] for s in t])
    mine = contact.episodes(t, np.array([flags[k] for k in range(n)]), residual,
                            joints=JOINTS)
    assert [(e['start'], e['end'], e['samples'], e['peak_joint']) for e in mine] == \
        [(e['start'], e['end'], e['samples'], e['peak_joint']) for e in expected]
    for a, b in zip(mine, expected):
        assert a['peak'] == pytest.approx(b['peak'], rel=1e-9)
