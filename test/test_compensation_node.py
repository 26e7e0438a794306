"""gravity_compensation_node across processes, fed by the simulated arm's joint_states.

The simulated arm (sim_arm_node, its own position drive holding a gravity-loaded
pose) publishes joint_states; the compensation node publishes effort (or current)
commands on <controller>/commands. The test compares them with the model's G(q) at
the arm's reported pose, switches the payload and the gravity vector at run time,
then stops the arm and waits for the zeros and the stale diagnostics.
"""

import threading

import numpy as np
import pytest

from ros_utils import RosHarness, node_output, refusal_line, start_node, stop

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.model.base_parameters import gravity_base_parameters  # noqa: E402
from arm_dyn_id.model.gravity import GravityModel  # noqa: E402
from arm_dyn_id.model.robot import Payload, RobotModel  # noqa: E402
from arm_dyn_id.nodes.qos import LATCHED_QOS  # noqa: E402
from arm_dyn_id.service.compensation import GravityTorques  # noqa: E402

NODE = 'arm_dyn_id.nodes.gravity_compensation_node'
SIM = 'arm_dyn_id.nodes.sim_arm_node'
POSE = [0.3, 1.2, -0.4, 0.9, 0.3, 0.2]          # rad, shoulder and elbow loaded
TIMEOUT = 60.0                                   # s, generous: a busy machine


class Listener:
    """Latest joint_states, every command array and diagnostics of the node."""

    def __init__(self, node, topic):
        self.lock = threading.Lock()
        self.state = None
        self.commands = []
        self.diagnostics = []
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(JointState, 'joint_states', self._on_state, qos)
        self.command_sub = node.create_subscription(Float64MultiArray, topic, self._on_command,
                                                    qos)
        node.create_subscription(DiagnosticArray, 'diagnostics', self._on_diag, 10)

    def _on_state(self, msg):
        with self.lock:
            self.state = (list(msg.name), np.array(msg.position))

    def _on_command(self, msg):
        with self.lock:
            self.commands.append(np.array(msg.data))
            del self.commands[:-50]

    def _on_diag(self, msg):
        for status in msg.status:
            if 'gravity compensation' in status.name:
                with self.lock:
                    self.diagnostics.append({kv.key: kv.value for kv in status.values})

    def last(self):
        with self.lock:
            return (self.commands[-1] if self.commands else None), self.state


def _model_file(tmp_path, config):
    robot = RobotModel.from_config(config)
    base = gravity_base_parameters(robot)
    scale = np.random.default_rng(7).uniform(0.85, 1.15, base.count)
    model = GravityModel(robot, base, base.beta(robot.parameters('gravity')) * scale)
    return model, model.save(tmp_path / 'model.yaml')


def _set(harness, node_name, **values):
    client = harness.node.create_client(SetParameters, f'/{node_name}/set_parameters')
    params = []
    for name, value in values.items():
        pv = ParameterValue()
        if isinstance(value, str):
            pv.type, pv.string_value = ParameterType.PARAMETER_STRING, value
        elif isinstance(value, list):
            pv.type, pv.double_array_value = ParameterType.PARAMETER_DOUBLE_ARRAY, value
        else:
            pv.type, pv.double_value = ParameterType.PARAMETER_DOUBLE, float(value)
        params.append(Parameter(name=name, value=pv))
    try:
        return harness.call(client, SetParameters.Request(parameters=params), timeout=TIMEOUT)
    finally:
        harness.node.destroy_client(client)


def _matches(listener, gravity, joints, gains=None, atol=2e-3):
    """The newest command equals the model's (clamped) G at the arm's newest pose."""
    def check():
        command, state = listener.last()
        if command is None or state is None:
            return False
        names, q = state
        q = q[[names.index(j) for j in joints]]
        tau = np.clip(gravity.torques(q), -gravity.effort_limits, gravity.effort_limits)
        expected = tau if gains is None else tau / gains
        return np.allclose(command, expected, atol=atol)
    return check


def test_commands_follow_the_model_switch_payload_and_gravity_and_go_to_zero(ros_env, tmp_path):
    config = load_arm_config('humanoid_arm.yaml')
    joints = list(config.joints)
    model, path = _model_file(tmp_path, config)
    sim = start_node(SIM, {'config_file': 'humanoid_arm.yaml', 'initial_positions': POSE},
                     ros_env, name='sim')
    comp = start_node(NODE, {'config_file': 'humanoid_arm.yaml', 'model_file': str(path),
                             'controller': 'effort_controller', 'stale_timeout': 0.2,
                             'diagnostics_period': 0.2}, ros_env, name='comp')
    current = start_node(NODE, {'config_file': 'humanoid_arm.yaml', 'nominal_urdf': True,
                                'output': 'current', 'controller': 'current_controller'},
                         ros_env, name='comp_current',
                         ros_args=['-r', '__node:=compensation_current'])
    # one node per name: the parameter services below must reach the first node only
    from_topic = start_node(NODE, {'config_file': 'humanoid_arm.yaml',
                                   'model_topic': '/identifier_node/model',
                                   'controller': 'topic_controller'}, ros_env, name='comp_topic',
                            ros_args=['-r', '__node:=compensation_topic'])
    try:
        with RosHarness(ros_env.domain_id) as ros:
            effort = Listener(ros.node, 'effort_controller/commands')
            amps = Listener(ros.node, 'current_controller/commands')
            served = GravityTorques.from_model(model)
            # the identifier's latched ~/model topic (YAML): a late subscriber still gets it
            model_pub = ros.node.create_publisher(String, '/identifier_node/model', LATCHED_QOS)
            model_pub.publish(String(data=model.to_yaml()))
            via_topic = Listener(ros.node, 'topic_controller/commands')
            ros.wait_for(_matches(via_topic, served, joints), TIMEOUT,
                         what=f'commands from the topic model\n{node_output(from_topic)}')
            ros.wait_for(_matches(effort, served, joints), TIMEOUT,
                         what=f'commands equal to the model G(q)\n{node_output(comp)}')
            assert np.abs(effort.last()[0]).max() > 1.0       # a loaded pose, not zeros
            # currents: nominal G / (sign k_e ratio efficiency)
            nominal = GravityTorques.from_robot(RobotModel.from_config(config))
            ros.wait_for(_matches(amps, nominal, joints, gains=config.joint_torque_gains),
                         TIMEOUT, what=f'currents = G / k_e\n{node_output(current)}')

            # payload switched at run time
            payload = Payload(mass=0.4, com=(0.0, 0.0, 0.05), frame='flange')
            result = _set(ros, 'gravity_compensation_node', payload_mass=0.4,
                          payload_com=[0.0, 0.0, 0.05])
            assert all(r.successful for r in result.results), result
            ros.wait_for(_matches(effort, served.with_payload(payload), joints), TIMEOUT,
                         what='commands with the payload')
            # ceiling mount: the same model, gravity turned over
            result = _set(ros, 'gravity_compensation_node', gravity_vector=[0.0, 0.0, 9.81])
            assert all(r.successful for r in result.results), result
            ceiling = served.with_payload(payload).with_gravity((0.0, 0.0, 9.81))
            ros.wait_for(_matches(effort, ceiling, joints), TIMEOUT,
                         what='commands for the ceiling mount')
            # a payload on a frame the URDF does not have is refused, the old one kept
            result = _set(ros, 'gravity_compensation_node', payload_frame='nowhere')
            assert not result.results[0].successful
            assert 'payload_frame' in result.results[0].reason
            ros.wait_for(_matches(effort, ceiling, joints), TIMEOUT, what='unchanged commands')

            # the arm goes away: zeros, said in the log and in diagnostics
            assert stop(sim) == 0
            ros.wait_for(lambda: effort.last()[0] is not None
                         and not np.any(effort.last()[0]), TIMEOUT, what='zero commands')
            ros.wait_for(lambda: effort.diagnostics
                         and effort.diagnostics[-1]['state'] == 'stale', TIMEOUT,
                         what='diagnostics saying stale')
            ros.wait_for(lambda: not np.any(amps.last()[0]), TIMEOUT, what='zero currents')
    finally:
        codes = [stop(p) for p in (comp, current, from_topic, sim)]
    log = node_output(comp)
    assert 'joint_states stale' in log and 'sending zeros' in log
    assert codes == [0, 0, 0, 0], log
    assert 'Traceback' not in log


@pytest.mark.parametrize('params, named', [
    ({'gravity_vector': [0.0, 0.0, 0.0]}, 'gravity_vector'),
    ({'model_file': '/nonexistent/model.yaml'}, 'model_file'),
    ({'output': 'torque', 'nominal_urdf': True}, 'output'),
    ({'nominal_urdf': True, 'payload_frame': 'nowhere', 'payload_mass': 1.0}, 'payload_frame'),
    ({}, 'model_topic'),
])
def test_bad_configuration_is_one_fatal_line_and_exit_2(ros_env, params, named):
    proc = start_node(NODE, {'config_file': 'humanoid_arm.yaml', **params}, ros_env,
                      name='comp_bad')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert named in fatal, node_output(proc)
