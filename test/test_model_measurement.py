"""The model file's ``measurement`` section (issue 24 item 4): what joint_states.effort
carried in the fitted data and its conversion to torque, so that every node serves a model
fitted from currents with no config.

- the section round-trips through the gravity and the full model files, in the model's
  joint order; a file without it (older) still loads;
- the model gate refuses a bad section (reason ``measurement``) in one line naming the key;
- :func:`arm_dyn_id.data.motor.effort_reading`: what is given explicitly wins, else the
  model's section;
- ``arm-dyn-id fit`` writes it (currents with --torque-constants, or --effort torque);
- end to end: a bag of currents fitted by ``arm-dyn-id fit`` (a subprocess), then the real
  identifier node with only ``model_file`` serves the residual of joint_states carrying
  currents (near zero on free motion: the constants were applied), and the compensation
  node with ``output: current`` and no torque constants commands G(q) / k_e.
"""

import contextlib
import io
import subprocess
import sys
import threading

import numpy as np
import pytest
import yaml

from arm_dyn_id import cli
from arm_dyn_id.config import ArmConfig
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.data.motor import FROM_MODEL, CurrentToTorque, effort_reading
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.model import load_model
from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.model.dynamics import (DynamicsModel, FrictionModel, nominal_standard_parameters,
                                       rigid_base_parameters)
from arm_dyn_id.model.gate import REASONS, ModelRefused, admit_doc, admit_model
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.service.compensation import output_gains
from ros_utils import RosHarness, node_output, start_node, stop
from test_cli_fit import JOINTS, K_E, URDF, reciprocating_data, write_synthetic_bag
from test_cli_full import fourier_data, write_plain_bag

#: a conversion with every factor, in an order other than the model's
ORDER = [3, 0, 5, 1, 4, 2]
SIGNS = np.array([1.0, -1.0, 1.0, 1.0, -1.0, 1.0])
OFFSETS = np.array([0.01, -0.02, 0.0, 0.03, 0.0, -0.01])
RATIOS = np.array([1.0, 2.0, 1.0, 0.5, 1.0, 1.0])
TIMEOUT = 90.0          # s, generous: a loaded machine


def _conversion(order=None):
    idx = list(range(6)) if order is None else order
    return CurrentToTorque([JOINTS[i] for i in idx], K_E[idx], SIGNS[idx], OFFSETS[idx],
                           RATIOS[idx])


@pytest.fixture(scope='module')
def robot():
    return RobotModel.from_urdf(URDF, joints=JOINTS)


def _gravity_model(robot):
    base = gravity_base_parameters(robot)
    return GravityModel(robot, base, base.beta(robot.parameters('gravity')))


def _full_model(robot):
    base = rigid_base_parameters(robot)
    return DynamicsModel(robot, base, base.beta(nominal_standard_parameters(robot)),
                         FrictionModel(), np.tile([0.05, 0.02], 6))


# -- the section in the files -----------------------------------------------------------

@pytest.mark.parametrize('kind', ['gravity', 'full'])
def test_the_section_round_trips_in_the_models_joint_order(robot, tmp_path, kind):
    model = (_gravity_model if kind == 'gravity' else _full_model)(robot)
    # the conversion in another joint order: the file holds the model's order
    model.metadata['measurement'] = _conversion(ORDER).measurement(JOINTS)
    path = model.save(tmp_path / 'model.yaml')
    doc = yaml.safe_load(path.read_text())
    assert doc['measurement']['effort'] == 'current'
    np.testing.assert_allclose(doc['measurement']['torque_constants'], K_E)
    np.testing.assert_allclose(doc['measurement']['current_signs'], SIGNS)
    np.testing.assert_allclose(doc['measurement']['gear_ratios'], RATIOS)
    admitted = admit_model(path)
    assert 'measurement: effort current' in admitted.gate['checks']
    for loaded in (load_model(path), admitted):
        assert loaded.measurement == doc['measurement']
        reading = effort_reading(JOINTS, loaded.measurement)
        assert reading.effort == 'current' and reading.source == FROM_MODEL
        np.testing.assert_allclose(reading.gains, SIGNS * K_E * RATIOS)
        np.testing.assert_allclose(reading.offsets, OFFSETS)
    # saved again: the same section
    again = load_model(path).save(tmp_path / 'again.yaml')
    assert yaml.safe_load(again.read_text())['measurement'] == doc['measurement']


@pytest.mark.parametrize('kind', ['gravity', 'full'])
def test_torque_and_no_section(robot, tmp_path, kind):
    model = (_gravity_model if kind == 'gravity' else _full_model)(robot)
    old = model.save(tmp_path / 'old.yaml')
    assert 'measurement' not in yaml.safe_load(old.read_text())
    assert admit_model(old).measurement is None and load_model(old).measurement is None
    model.metadata['measurement'] = {'effort': 'torque'}
    path = model.save(tmp_path / 'torque.yaml')
    assert admit_model(path).measurement == {'effort': 'torque'}


def _bad(doc, **section):
    doc = yaml.safe_load(yaml.safe_dump(doc))
    doc['measurement'] = section if section.get('whole') is None else section['whole']
    return doc


GOOD = {'effort': 'current', 'torque_constants': K_E.tolist()}
BAD = {
    'short': (dict(GOOD, torque_constants=K_E[:5].tolist()),
              'measurement.torque_constants has 5 values for 6 joints'),
    'nan': (dict(GOOD, current_offsets=[0.0] * 5 + [float('nan')]),
            'measurement.current_offsets[5] = nan is not a finite number'),
    'zero_constant': (dict(GOOD, torque_constants=[0.5, 0.0, 0.3, 0.2, 0.1, 0.05]),
                      'measurement.torque_constants[1] = 0.0 must be > 0'),
    'negative_ratio': (dict(GOOD, gear_ratios=[1, 1, 1, -2, 1, 1]),
                       'measurement.gear_ratios[3] = -2 must be > 0'),
    'sign': (dict(GOOD, current_signs=[1, 1, 2, 1, 1, 1]),
             'measurement.current_signs[2] = 2 must be +1 or -1'),
    'effort': ({'effort': 'volts'}, "measurement.effort = 'volts' must be one of"),
    'no_constants': ({'effort': 'current'}, 'measurement.torque_constants is missing'),
    'text': ({'whole': 'current'}, 'measurement is a str, not a mapping'),
}


@pytest.mark.parametrize('name', list(BAD))
def test_the_gate_refuses_a_bad_section(robot, tmp_path, name):
    section, words = BAD[name]
    doc = _full_model(robot).to_dict()
    path = tmp_path / 'model.yaml'
    path.write_text(yaml.safe_dump(_bad(doc, **section), sort_keys=False))
    with pytest.raises(ModelRefused) as info:
        admit_model(path)
    message = str(info.value)
    assert info.value.reason == 'measurement' and 'measurement' in REASONS
    assert words in message and str(path) in message and '\n' not in message, message
    # a model received on a topic, likewise; and the loader alone refuses it too
    with pytest.raises(ModelRefused) as info:
        admit_doc(_bad(doc, **section), source='/identifier_node/model')
    assert info.value.reason == 'measurement'
    with pytest.raises(ConfigError, match='measurement'):
        load_model(path)


# -- which conversion applies -----------------------------------------------------------

def test_what_is_given_explicitly_wins_else_the_models_section(tmp_path):
    measured = _conversion().measurement()
    config = ArmConfig.from_params({'urdf': str(URDF), 'joints': JOINTS,
                                    'torque_constants': [2.0] * 6}, need_limits=False)
    # the model's section, in the consumer's order
    reading = effort_reading(list(reversed(JOINTS)), measured, model_joints=JOINTS)
    np.testing.assert_allclose(reading.gains, (SIGNS * K_E * RATIOS)[::-1])
    assert reading.describe() == ("current in joint_states.effort, converted by the model "
                                  "file's measurement section")
    # a config wins; effort torque wins
    reading = effort_reading(JOINTS, measured, config=config)
    np.testing.assert_allclose(reading.gains, 2.0)
    assert reading.source == 'the configured torque_constants'
    reading = effort_reading(JOINTS, measured, effort='torque', config=config)
    assert reading.effort == 'torque' and reading.gains is None
    # a model fitted from torques: torque by default, a refusal when told current
    assert effort_reading(JOINTS, {'effort': 'torque'}, effort='auto').effort == 'torque'
    with pytest.raises(ConfigError, match='fitted from joint torques'):
        effort_reading(JOINTS, {'effort': 'torque'}, effort='current')
    with pytest.raises(ConfigError, match='no measurement section'):
        effort_reading(JOINTS, None)
    # the compensation node's output current: the model's constants unless configured
    gains, source = output_gains('current', JOINTS, _ModelStub(measured))
    np.testing.assert_allclose(gains, SIGNS * K_E * RATIOS)
    assert source == f'torque constants of {FROM_MODEL}'
    assert output_gains('current', JOINTS, _ModelStub(measured), config)[0].tolist() == [2.0] * 6
    assert output_gains('effort', JOINTS, _ModelStub(None)) == (None, '')
    with pytest.raises(ConfigError, match='output current'):
        output_gains('current', JOINTS, _ModelStub({'effort': 'torque'}))


class _ModelStub:
    joint_names = tuple(JOINTS)

    def __init__(self, measurement):
        self.measurement = measurement


# -- arm-dyn-id fit writes it -----------------------------------------------------------

def _fit(*argv):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    assert code == 0, err.getvalue()


@pytest.mark.slow
def test_fit_writes_what_the_bag_carried(tmp_path):
    data = reciprocating_data(seed=1, rate=100.0, poses=1)
    bag = write_synthetic_bag(tmp_path / 'sweeps', data)
    _fit('fit', bag, '--urdf', URDF, '--torque-constants', ','.join(map(str, K_E)),
         '--dynamics', 'gravity', '--methods', 'wls', '--out', tmp_path / 'fit', '--no-report',
         '--quiet')
    measured = admit_model(tmp_path / 'fit' / 'model.yaml').measurement
    assert measured['effort'] == 'current'
    np.testing.assert_allclose(measured['torque_constants'], K_E)
    np.testing.assert_allclose(measured['current_signs'], 1.0)
    np.testing.assert_allclose(measured['current_offsets'], 0.0)
    # effort already torque: the section says so and carries no constants
    torque_bag = write_bag(tmp_path / 'torques', data['t'], JOINTS, data['q'], data['tau'],
                           markers=data['markers'])
    _fit('fit', torque_bag, '--urdf', URDF, '--effort', 'torque', '--dynamics', 'gravity',
         '--methods', 'wls', '--out', tmp_path / 'fit_torque', '--no-report', '--quiet')
    doc = yaml.safe_load((tmp_path / 'fit_torque' / 'model.yaml').read_text())
    assert doc['measurement'] == {'effort': 'torque'}


# -- end to end: the nodes serve a model fitted from currents from its folder alone -------

@pytest.fixture(scope='module')
def fitted_from_currents(tmp_path_factory):
    """``arm-dyn-id fit`` (a subprocess, as a user runs it) of a bag of motor currents:
    the folder it wrote."""
    root = tmp_path_factory.mktemp('measurement')
    bag = write_plain_bag(root / 'fourier', fourier_data(seed=0))
    out = root / 'fit'
    done = subprocess.run([sys.executable, '-m', 'arm_dyn_id', 'fit', str(bag), '--urdf',
                           str(URDF), '--torque-constants', ','.join(map(str, K_E)),
                           '--dynamics', 'full', '--methods', 'wls', '--out', str(out),
                           '--no-report'], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert yaml.safe_load((out / 'model.yaml').read_text())['measurement']['effort'] == \
        'current'
    return out


def _joint_state(t, names, q, dq, effort):
    from test_identifier_full import joint_state     # imports rclpy's messages: here only
    return joint_state(t, names, q, dq, effort)


def _identifier_diagnostics(harness):
    from test_identifier_full import diagnostics     # imports rclpy's messages: here only
    return diagnostics(harness)


@pytest.mark.ros
@pytest.mark.slow
def test_identifier_serves_the_residual_of_currents_from_the_model_folder_alone(
        ros_env, fitted_from_currents):
    pytest.importorskip('rclpy')
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from arm_dyn_id.nodes.gravity_client import ResidualMonitor
    from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics
    path = fitted_from_currents / 'model.yaml'
    proc = start_node('arm_dyn_id.nodes.identifier_node',
                      {'serve_only': True, 'model_file': str(path)}, ros_env, name='identifier')
    # free motion on another trajectory; joint_states carry the motor currents (A)
    data = fourier_data(seed=3, periods=1)
    t, q, dq, current = data['t'], data['q'], data['dq'], data['current']
    try:
        with RosHarness(ros_env.domain_id, name='measurement_probe') as h:
            residuals = []
            ResidualMonitor(h.node, callback=residuals.append, depth=1000)
            diags = _identifier_diagnostics(h)
            states = h.node.create_publisher(JointState, 'joint_states', QoSProfile(
                depth=1000, reliability=ReliabilityPolicy.RELIABLE))
            h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', TIMEOUT,
                       what=f'the full model served\n{node_output(proc)}')
            status = diags[-1].get('residual', '')
            assert status.startswith("on (current in joint_states.effort, converted by the "
                                     "model file's measurement section"), status
            h.wait_for_subscribers(states, timeout=TIMEOUT)
            chunk = 200
            for lo in range(0, len(t), chunk):
                for k in range(lo, min(lo + chunk, len(t))):
                    states.publish(_joint_state(t[k], JOINTS, q[k], dq[k], current[k]))
                sent = min(lo + chunk, len(t))
                h.wait_for(lambda: len(residuals) >= sent, TIMEOUT,
                           what=f'{sent} external_torques; diagnostics {diags[-1:]}')
    finally:
        code = stop(proc)
    assert code == 0, node_output(proc)
    got = np.array([np.asarray(m.effort) for m in residuals])
    assert [list(m.name) for m in residuals[:1]] == [JOINTS]
    # the node applied the file's constants: the library with them gives the same stream
    model = load_model(path)
    stream = ResidualStream(ServedDynamics(model), 25.0, None, torque_gains=K_E,
                            offsets=np.zeros(6))
    expected = [stream.update(JOINTS, t[k], q[k], dq[k], current[k])[3] for k in range(len(t))]
    np.testing.assert_allclose(got, expected, atol=1e-9)
    # free motion: the external torque is near zero next to the torques that moved the arm
    # (currents read as N·m would leave up to 95 % of them in the residual)
    settled = t - t[0] > 1.0
    rms = np.sqrt((got[settled] ** 2).mean(axis=0))
    scale = np.sqrt((data['tau'] ** 2).mean(axis=0))
    assert np.all(rms[:4] < 0.1 * scale[:4]), (rms / scale).round(3).tolist()


@pytest.mark.ros
@pytest.mark.slow
def test_compensation_commands_currents_with_the_models_constants(
        ros_env, fitted_from_currents):
    pytest.importorskip('rclpy')
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from arm_dyn_id.service.compensation import GravityTorques
    path = fitted_from_currents / 'model.yaml'
    # the arm's joints and URDF only: no config file, no torque constants
    proc = start_node('arm_dyn_id.nodes.gravity_compensation_node',
                      {'urdf': str(URDF), 'joints': JOINTS, 'model_file': str(path),
                       'output': 'current', 'controller': 'current_controller',
                       'stale_timeout': 5.0, 'diagnostics_period': 0.2}, ros_env,
                      name='compensation')
    pose = np.array([0.3, 1.2, -0.4, 0.9, 0.3, 0.2])
    lock, commands, diags = threading.Lock(), [], []

    def on_command(msg):
        with lock:
            commands.append(np.array(msg.data))

    def on_diag(msg):
        for status in msg.status:
            if 'gravity compensation' in status.name:
                diags.append({kv.key: kv.value for kv in status.values})
    try:
        with RosHarness(ros_env.domain_id, name='compensation_probe') as h:
            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            h.node.create_subscription(Float64MultiArray, 'current_controller/commands',
                                       on_command, qos)
            h.node.create_subscription(DiagnosticArray, 'diagnostics', on_diag, 10)
            states = h.node.create_publisher(JointState, 'joint_states', qos)
            h.node.create_timer(0.05, lambda: states.publish(
                _joint_state(0.0, JOINTS, pose, np.zeros(6), ())))
            h.wait_for(lambda: commands and diags, TIMEOUT,
                       what=f'current commands\n{node_output(proc)}')
            with lock:
                command = commands[-1]
            source = diags[-1]['torque_constants_from']
    finally:
        code = stop(proc)
    assert code == 0, node_output(proc)
    assert source == f'torque constants of {FROM_MODEL}'
    gravity = GravityTorques.from_model(load_model(path))
    tau = np.clip(gravity.torques(pose), -gravity.effort_limits, gravity.effort_limits)
    assert np.abs(tau).max() > 1.0          # a loaded pose
    np.testing.assert_allclose(command, tau / K_E, atol=1e-6)
