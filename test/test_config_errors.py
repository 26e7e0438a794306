"""Configuration errors at start-up, across processes (issue 9 b).

Each node is started as a real process with one bad arm config and must refuse it
with a message naming the parameter and the offending value:

* recorder_node and identifier_node log it as one FATAL line and exit with code 2
  (nodes/executors.py ``run_node``, the same in every node), no traceback;
* excitation_node stays up refusing to work: it logs the error, and ``~/start``
  answers ``success=False`` with the same message (it commands nothing).
"""

import copy

import pytest
import yaml

from arm_dyn_id.paths import share_dir
from ros_utils import RosHarness, node_output, start_node, stop, wait_for

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

JOINTS = [f'joint_{i}' for i in range(1, 7)]
GOOD = {
    'robot_name': 'humanoid_arm', 'urdf': str(share_dir() / 'urdf' / 'humanoid_arm.urdf'),
    'joints': JOINTS, 'gravity': 9.81, 'torque_constants': [1.5, 1.5, 0.8, 0.8, 0.2, 0.1],
    'position_limits_lower': [-1.0, -0.5, -1.6, -0.1, -1.6, -1.2],
    'position_limits_upper': [3.0, 2.8, 1.6, 2.6, 1.6, 1.2],
    'velocity_limits': [2.0, 2.0, 2.0, 2.0, 2.0, 0.5],
    'acceleration_limits': [5.0] * 6,
}
PER_JOINT = ('torque_constants', 'position_limits_lower', 'position_limits_upper',
             'velocity_limits', 'acceleration_limits')
MISSING_URDF = '/nonexistent/arm_dyn_id_test/no_such_arm.urdf'


def _set(**values):
    def edit(params, node_params):
        params.update(values)
    return edit


def _drop(key):
    def edit(params, node_params):
        del params[key]
    return edit


def _node_param(**values):
    def edit(params, node_params):
        node_params.update(values)
    return edit


# case -> (edit of the config, nodes it applies to, texts the message must contain)
CASES = {
    'urdf_missing': (_set(urdf=MISSING_URDF), ('recorder', 'identifier', 'excitation'),
                     ['parameter urdf', MISSING_URDF, 'does not exist']),
    'array_too_short': (_set(position_limits_upper=[3.0, 2.8, 1.6, 2.6, 1.6]),
                        ('recorder', 'identifier', 'excitation'),
                        ['parameter position_limits_upper', '5 values',
                         '[3.0, 2.8, 1.6, 2.6, 1.6]', 'one per joint (6)']),
    'joint_not_in_urdf': (_set(joints=JOINTS + ['joint_7'], **{
        key: GOOD[key] + GOOD[key][-1:] for key in PER_JOINT}),
        ('identifier', 'excitation'), ['parameter joints', "'joint_7'", 'humanoid_arm.urdf']),
    'torque_constants_missing': (_drop('torque_constants'), ('recorder',),
                                 ['parameter torque_constants is missing']),
    'torque_constants_zero': (_set(torque_constants=[1.5, 1.5, 0.0, 0.8, 0.2, 0.1]),
                              ('recorder',), ['parameter torque_constants[2] = 0.0', '> 0']),
    'torque_constants_negative': (_set(torque_constants=[1.5, 1.5, 0.8, 0.8, -0.2, 0.1]),
                                  ('recorder',), ['parameter torque_constants[4] = -0.2', '> 0']),
    'limits_inverted': (_set(position_limits_lower=[-1.0, -0.5, 1.6, -0.1, -1.6, -1.2],
                             position_limits_upper=[3.0, 2.8, -1.6, 2.6, 1.6, 1.2]),
                        ('recorder', 'identifier', 'excitation'),
                        ['joint_3', 'inverted', 'position_limits_lower[2] = 1.6',
                         'position_limits_upper[2] = -1.6']),
    'speed_above_velocity_limit': (_node_param(speed=1.0), ('excitation',),
                                   ['parameter speed = 1.0', 'joint_6',
                                    'velocity_limits[5] = 0.5']),
}
PARAMS = [pytest.param(node, case, id=f'{node}-{case}')
          for case, (_, nodes, _) in CASES.items() for node in nodes]


def _write_config(tmp_path, case):
    edit, _, needles = CASES[case]
    params, node_params = copy.deepcopy(GOOD), {}
    edit(params, node_params)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    return path, node_params, needles


def _assert_names(text, needles, output):
    missing = [n for n in needles if n not in text]
    assert not missing, f'{missing} not in the message {text!r}\n{output}'
    assert 'Traceback' not in output, output


@pytest.mark.parametrize('node, case', PARAMS)
def test_bad_config_refused_at_start_up(ros_env, tmp_path, node, case):
    config, node_params, needles = _write_config(tmp_path, case)
    params = {'config_file': str(config), **node_params}
    if node == 'recorder':
        params['output_dir'] = str(tmp_path / 'bags')
    if node == 'excitation':
        params['quick'] = True           # designs a plan at start-up (no plan_file)
    proc = start_node(f'arm_dyn_id.nodes.{node}_node', params, ros_env, name=node)
    if node in ('recorder', 'identifier'):
        # refuses: one FATAL line naming parameter and value, exit code 2
        code = proc.wait(60)
        output = node_output(proc)
        assert code == 2, output
        fatal = [line for line in output.splitlines() if '[FATAL]' in line]
        assert len(fatal) == 1, output
        _assert_names(fatal[0], needles, output)
        assert not (tmp_path / 'bags').exists(), 'the recorder created its output folder'
        return
    # excitation_node: stays up, logs the error, refuses ~/start with the same message
    wait_for(lambda: 'no plan to run' in node_output(proc) or proc.poll() is not None, 60,
             poll=0.05, what='the start-up error in the log')
    output = node_output(proc)
    assert proc.poll() is None, output
    logged = [line for line in output.splitlines() if 'no plan to run' in line]
    assert len(logged) == 1 and '[ERROR]' in logged[0], output
    _assert_names(logged[0], needles, output)
    with RosHarness(ros_env.domain_id) as ros:
        res = ros.trigger('/excitation_node/start', timeout=20)
    assert not res.success, res.message
    assert res.message.startswith('no plan loaded: '), res.message
    _assert_names(res.message, needles, node_output(proc))
    assert proc.poll() is None, node_output(proc)
    assert stop(proc) == 0, node_output(proc)
