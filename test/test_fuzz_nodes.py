"""Property-based bad input into live nodes (issue 9).

Random JointState messages (random joint names, duplicates and unknown joints,
independent array lengths, NaN, inf, huge values, empty messages, odd stamps)
go to recorder_node and identifier_node (gravity stream and gravity queries),
each running in its own process. Whatever arrives: no node crashes, no
non-finite torque is ever published, every query gets an answer (values or an
explicit error reply), and the nodes still work afterwards.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import RobotModel
from ros_utils import RosHarness, node_output, ros_environment, start_node, stop

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / 'config' / 'humanoid_arm.yaml'
JOINTS = [f'joint_{k}' for k in range(1, 7)]
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)

values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, 1e308, -1e308, float('nan'), float('inf')]),
    st.floats(-3.0, 3.0))
arrays = st.lists(values, max_size=9)
names = st.lists(st.sampled_from(JOINTS + ['gripper', '', 'joint_7', 'JOINT_1']), max_size=9)


@st.composite
def joint_states(draw):
    msg = JointState()
    msg.header.stamp.sec = draw(st.integers(0, 2 ** 31 - 1))
    msg.header.stamp.nanosec = draw(st.integers(0, 999_999_999))
    if draw(st.booleans()):
        # well-formed but possibly reordered, with extra joints and odd values
        order = draw(st.permutations(JOINTS + draw(st.lists(st.just('gripper'), max_size=1))))
        k = len(order)
        msg.name = list(order)
        msg.position = draw(st.lists(values, min_size=k, max_size=k))
        msg.velocity = draw(st.lists(values, min_size=k, max_size=k))
        msg.effort = draw(st.lists(values, min_size=k, max_size=k))
    else:
        msg.name = draw(names)
        msg.position, msg.velocity, msg.effort = draw(arrays), draw(arrays), draw(arrays)
    return msg


@pytest.fixture(scope='module')
def nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp('fuzz')
    robot = RobotModel.from_urdf(REPO / 'urdf' / 'humanoid_arm.urdf', joints=JOINTS)
    base = gravity_base_parameters(robot)
    model_file = root / 'model.yaml'
    GravityModel(robot, base, base.beta(robot.parameters())).save(model_file)
    with ros_environment(root / 'ros') as env:
        recorder = start_node('arm_dyn_id.nodes.recorder_node', {
            'config_file': str(CONFIG), 'record_on_start': True,
            'output_dir': str(root / 'bags')}, env, name='recorder')
        identifier = start_node('arm_dyn_id.nodes.identifier_node', {
            'config_file': str(CONFIG), 'serve_only': True,
            'model_file': str(model_file)}, env, name='identifier')
        env.procs += [recorder, identifier]
        with RosHarness(env.domain_id) as ros:
            outputs = {'joint_torques': [], 'gravity_torques': [], 'gravity_result': []}
            for topic, store in outputs.items():
                ros.node.create_subscription(JointState, topic, store.append, QOS)
            diags = []
            ros.node.create_subscription(DiagnosticArray, 'diagnostics', diags.append, 10)
            states = ros.node.create_publisher(JointState, 'joint_states', QOS)
            queries = ros.node.create_publisher(JointState, 'gravity_query', QOS)
            ros.wait_for_subscribers(states, count=2, timeout=30)
            ros.wait_for_subscribers(queries, timeout=30)
            # the identifier has its model when a valid query is answered
            probe = JointState(name=JOINTS, position=[0.0] * 6)
            probe.header.frame_id = 'probe'

            def answered():
                queries.publish(probe)
                return any(m.header.frame_id == 'probe' and m.effort
                           for m in outputs['gravity_result'])
            ros.wait_for(answered, 30, poll=0.2, what='a model-backed answer')
            yield {'ros': ros, 'states': states, 'queries': queries, 'outputs': outputs,
                   'diags': diags, 'procs': (recorder, identifier)}
        for proc in (recorder, identifier):
            assert stop(proc) == 0, node_output(proc)


def _overflowing_current():
    """Finite currents whose torques are not: 1.7e308 A times the 1.5 N·m/A of joint_1
    (CI's fuzzing once found the recorder publishing inf for such a sample)."""
    msg = JointState(name=JOINTS, position=[0.0] * 6, velocity=[0.0] * 6,
                     effort=[1.7e308] * 6)
    msg.header.stamp.sec = 1634928
    return msg


# 30-60 messages per example: at 60-120, Hypothesis overran its data buffer on almost
# every draw (1 valid example of 560 tried, 90 s of generation for one example)
@settings(max_examples=6, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(messages=st.lists(joint_states(), min_size=30, max_size=60))
@example(messages=[_overflowing_current()])
def test_random_joint_states_never_crash_or_publish_non_finite_torque(nodes, messages):
    ros, outputs = nodes['ros'], nodes['outputs']
    start = {k: len(v) for k, v in outputs.items()}
    ids = []
    for k, msg in enumerate(messages):
        nodes['states'].publish(msg)
        query = JointState(name=list(msg.name), position=list(msg.position))
        query.header.frame_id = f'fuzz-{id(messages)}-{k}'
        ids.append(query.header.frame_id)
        nodes['queries'].publish(query)
    # every query is answered: torques or an explicit error reply
    ros.wait_for(lambda: {m.header.frame_id for m in outputs['gravity_result']} >= set(ids),
                 30, poll=0.05, what='an answer to every query')
    for proc in nodes['procs']:
        assert proc.poll() is None, node_output(proc)
    # the nodes still convert and serve a plain message afterwards; its outputs come after
    # everything the fuzzing produced (one stream, in order), so all of that is judged
    good = JointState(name=JOINTS, position=[0.1] * 6, velocity=[0.0] * 6, effort=[0.5] * 6)
    good.header.stamp.sec = 2 ** 31 - 2
    nodes['states'].publish(good)

    def good_one_out(topic):
        return any(m.header.stamp.sec == 2 ** 31 - 2 and list(m.position) == [0.1] * 6
                   for m in outputs[topic][start[topic]:])
    ros.wait_for(lambda: good_one_out('joint_torques') and good_one_out('gravity_torques'),
                 10, what='outputs for a valid message after the fuzzing')
    for topic, received in outputs.items():
        for msg in received[start[topic]:]:
            if msg.name and msg.name[0].startswith('error:'):
                assert len(msg.effort) == 0, msg
                continue
            assert len(msg.effort) == len(msg.name), (topic, msg)
            assert np.all(np.isfinite(msg.effort)), (topic, msg)


def test_rejections_are_counted_and_reported(nodes):
    """After the fuzzing, the recorder's diagnostics count what it refused."""
    ros = nodes['ros']
    bad = JointState(name=['joint_1'], position=[0.0, 1.0], effort=[])
    nodes['states'].publish(bad)

    def counted():
        for d in nodes['diags']:
            for status in d.status:
                kv = {v.key: v.value for v in status.values}
                if 'rejected' in kv and kv['rejected'] not in ('{}', ''):
                    return True
        return False
    ros.wait_for(counted, 10, poll=0.1, what='rejections in the recorder diagnostics')
