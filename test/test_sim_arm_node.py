"""sim_arm_node across processes: joint_states, /clock, trajectories, commands, payload."""

import time

import numpy as np
import pytest

from ros_utils import node_output, refusal_line, start_node, stop

rclpy = pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

NODE = 'arm_dyn_id.nodes.sim_arm_node'
JOINTS = [f'joint_{i}' for i in range(1, 7)]


class Client:
    """In-test node spun from the test thread (entities are created before spinning)."""

    def __init__(self, domain_id):
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node('sim_test_client', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.states = []
        self.clocks = []
        self.node.create_subscription(JointState, 'joint_states', self.states.append,
                                      QoSProfile(depth=1000))
        self.node.create_subscription(Clock, '/clock', self.clocks.append, QoSProfile(depth=1000))
        self.traj = self.node.create_publisher(JointTrajectory, 'arm_controller/joint_trajectory',
                                               10)
        self.cmd = self.node.create_publisher(Float64MultiArray, 'arm_controller/commands', 10)
        self.attach = self.node.create_client(Trigger, 'sim_arm_node/attach_payload')

    def spin_until(self, predicate, timeout, what='condition'):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f'timed out after {timeout} s waiting for {what}')
            self.executor.spin_once(timeout_sec=0.01)

    def spin_for(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def call(self, client, timeout=10.0):
        self.spin_until(lambda: client.service_is_ready(), timeout, client.srv_name)
        future = client.call_async(Trigger.Request())
        self.spin_until(future.done, timeout, f'response of {client.srv_name}')
        return future.result()

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def stamp(msg):
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


@pytest.fixture
def client(ros_env):
    c = Client(ros_env.domain_id)
    yield c
    c.close()


def start_sim(ros_env, **params):
    base = {'config_file': 'humanoid_arm.yaml'}
    base.update(params)
    return start_node(NODE, base, ros_env, name='sim_arm')


def test_a_rate_that_does_not_divide_the_step_rate_is_refused(ros_env):
    """clock_rate:=7 was taken as 6.99 Hz without a word (under ros2 launch): one FATAL
    line naming the parameter and the nearest rates that work, exit code 2."""
    proc = start_sim(ros_env, use_sim_time=True, clock_rate=7.0)
    fatal = refusal_line(proc, 60)
    assert 'clock_rate: 7 Hz is not a divisor of the 1000 Hz step rate' in fatal, fatal
    assert '6.99301 Hz (every 143 steps) and 7.04225 Hz (every 142 steps)' in fatal, fatal
    proc = start_sim(ros_env, publish_rate=300.0)
    assert 'publish_rate: 300 Hz is not a divisor' in refusal_line(proc, 60)


def test_sim_time_fast_mode_publishes_every_step_and_follows_trajectory(ros_env, client):
    """joint_states every 1 ms step; /clock at clock_rate (100 Hz: every 10th step, as the
    demo runs it: each /clock message wakes every node on sim time)."""
    proc = start_sim(ros_env, use_sim_time=True, real_time_factor=0.0, clock_rate=100.0)
    try:
        client.spin_until(lambda: len(client.states) > 200 and len(client.clocks) > 20, 30,
                          'joint_states and /clock')
    except TimeoutError:
        pytest.fail(node_output(proc))
    msg = client.states[-1]
    assert list(msg.name) == JOINTS
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 6
    # consecutive stamps 1 ms apart in simulated time, /clock published too
    stamps = np.array([stamp(m) for m in client.states[-200:]])
    steps = np.round(np.diff(stamps) / 1e-3)
    assert np.all(steps >= 1) and np.median(steps) == 1
    clocks = np.array([c.clock.sec + 1e-9 * c.clock.nanosec for c in client.clocks[-20:]])
    clock_steps = np.diff(clocks) / 1e-3
    np.testing.assert_allclose(clock_steps, np.round(clock_steps / 10) * 10, atol=1e-3)
    assert np.median(clock_steps) == pytest.approx(10.0)
    # a trajectory (header stamp zero = now): joint 2 to 0.3 rad in 2 s of sim time
    traj = JointTrajectory()
    traj.joint_names = ['joint_2', 'joint_1', 'joint_3', 'joint_4', 'joint_5', 'joint_6']
    target = [0.3, 0.2, 0.0, 0.5, 0.0, 0.0]
    point = JointTrajectoryPoint(positions=target, velocities=[0.0] * 6)
    point.time_from_start.sec = 2
    traj.points = [point]
    client.spin_until(lambda: client.traj.get_subscription_count() > 0, 15, 'trajectory topic')
    t_sent = stamp(client.states[-1])
    client.traj.publish(traj)
    expected = np.array([0.2, 0.3, 0.0, 0.5, 0.0, 0.0])
    # "now" is when the node takes the message: in fast mode simulated time runs on while
    # it travels (a busy machine delayed it by about 1 s of sim time and the arm was still
    # 4 mrad short 3 s after sending), so wait for the arm to arrive, within 30 s of sim time

    def arrived():
        return bool(np.all(np.abs(np.asarray(client.states[-1].position) - expected) < 2e-3)) \
            or stamp(client.states[-1]) > t_sent + 30.0
    client.spin_until(arrived, 120, 'the arm at the trajectory\'s end')
    np.testing.assert_allclose(client.states[-1].position, expected, atol=2e-3)
    assert stop(proc) == 0, node_output(proc)


def test_a_trajectory_stamped_in_the_past_keeps_its_points_on_their_times(ros_env, client):
    """A window that reaches the arm late (a busy machine delayed it) is followed on the
    sender's time line, as joint_trajectory_controller does: the arm is on the plan once
    it has caught up, not behind it by the delay."""
    proc = start_sim(ros_env, use_sim_time=True, real_time_factor=1.0)
    try:
        # past 1.5 s of simulated time: the stamp below lies 1 s back
        client.spin_until(lambda: client.states and stamp(client.states[-1]) > 1.5, 60,
                          'joint_states')
        client.spin_until(lambda: client.traj.get_subscription_count() > 0, 15,
                          'trajectory topic')
    except TimeoutError:
        pytest.fail(node_output(proc))
    from arm_dyn_id.nodes.excitation_node import _duration
    q0 = np.array(client.states[-1].position)
    # a 0.1 rad/s ramp of joint_1 over 6 s, stamped 1 s before the newest sample
    t_stamp = stamp(client.states[-1]) - 1.0
    traj = JointTrajectory()
    traj.joint_names = JOINTS
    times = np.arange(0.0, 6.001, 0.1)
    for t in times:
        q = q0.copy()
        q[0] += 0.1 * t
        point = JointTrajectoryPoint(positions=q.tolist(),
                                     velocities=[0.1] + [0.0] * 5 if t < 6.0 else [0.0] * 6)
        point.time_from_start = _duration(t)     # whole-second rounding done right
        traj.points.append(point)
    stamp_as_duration = _duration(t_stamp)
    traj.header.stamp.sec = stamp_as_duration.sec
    traj.header.stamp.nanosec = stamp_as_duration.nanosec
    client.traj.publish(traj)
    client.spin_until(lambda: stamp(client.states[-1]) > t_stamp + 4.0, 60, '4 s of plan')
    msg = next(m for m in client.states if stamp(m) >= t_stamp + 4.0)
    # on the plan at stamp + 4 s (0.4 rad); a shifted window would be about 0.1 rad short
    assert msg.position[0] - q0[0] == pytest.approx(0.4, abs=0.02), node_output(proc)
    assert stop(proc) == 0, node_output(proc)
    assert 'trajectories after their stamp' in node_output(proc)


def test_wall_time_commands_and_payload(ros_env, client):
    proc = start_sim(ros_env, use_sim_time=False, publish_rate=500.0)
    try:
        client.spin_until(lambda: len(client.states) > 100, 30, 'joint_states')
    except TimeoutError:
        pytest.fail(node_output(proc))
    assert not client.clocks
    now = time.time()
    assert abs(stamp(client.states[-1]) - now) < 1.0        # wall-clock stamps
    # streamed position commands, in the order of `joints`
    client.spin_until(lambda: client.cmd.get_subscription_count() > 0, 15, 'command topic')
    start = np.array(client.states[-1].position)
    goal = np.array([0.0, 0.1, 0.0, 0.2, 0.0, 0.0])
    for k in range(1, 201):
        msg = Float64MultiArray()
        msg.data = list(start + (goal - start) * k / 200)
        client.cmd.publish(msg)
        client.spin_for(0.005)
    client.spin_for(1.0)
    np.testing.assert_allclose(client.states[-1].position, goal, atol=2e-3)
    # attach the payload (0.3 kg from the config): the elbow current changes
    before = np.mean([m.effort for m in client.states[-100:]], axis=0)
    reply = client.call(client.attach)
    assert reply.success, reply.message
    client.spin_for(2.0)
    after = np.mean([m.effort for m in client.states[-100:]], axis=0)
    assert abs(after[3] - before[3]) > 0.05, (before, after)
    assert stop(proc) == 0, node_output(proc)


def _quiet(client, seconds_without_news=0.3, timeout=30.0):
    """Spin until no joint_states arrived for ``seconds_without_news`` (the arm waits)."""
    last = {'n': -1, 't': time.monotonic()}

    def settled():
        if len(client.states) != last['n']:
            last['n'], last['t'] = len(client.states), time.monotonic()
        return time.monotonic() - last['t'] >= seconds_without_news
    client.spin_until(settled, timeout, 'joint_states to pause')


def _ack_publisher(client, proc):
    """A consumer on consumer_acks: ack(t) acknowledges stamp t (s). Returns once the sim
    publishes joint_states and has subscribed to the acks (fails with its output if not)."""
    acks = client.node.create_publisher(JointState, 'consumer_acks', QoSProfile(depth=10))

    def ack(t):
        msg = JointState()
        msg.header.stamp.sec = int(t)
        msg.header.stamp.nanosec = int(round((t - int(t)) * 1e9))
        acks.publish(msg)
    ack.publisher = acks
    try:
        client.spin_until(lambda: len(client.states) > 10 and acks.get_subscription_count(),
                          60, 'joint_states and the lockstep subscription')
    except TimeoutError:
        pytest.fail(node_output(proc))
    return ack


def test_lockstep_never_runs_ahead_of_the_consumer(ros_env, client):
    """As fast as possible (real_time_factor 0), but never more than lockstep_window of
    simulated time ahead of the stamps on lockstep_topic (issue 16 item 8): a recorder
    that cannot keep up slows the arm down instead of losing samples."""
    window = 0.05
    # a consumer silent for lockstep_timeout counts as gone: long here, so that a busy
    # test process does not look like one (the release has its own test below)
    proc = start_sim(ros_env, use_sim_time=True, real_time_factor=0.0,
                     lockstep_topic='consumer_acks', lockstep_window=window,
                     lockstep_timeout=120.0)
    ack = _ack_publisher(client, proc)
    # the first stamp heard starts the lock: the free-running arm stops where it is
    ack(stamp(client.states[-1]))
    _quiet(client, timeout=60)
    for lead in (0.3, 1.2):
        acked = stamp(client.states[-1]) + lead
        ack(acked)
        # within 5 ms of the window: in 1 of 4 runs the newest sample the test saw was
        # 2 ms short of it (2e-3 here was too tight); the upper bound below is the point
        try:
            client.spin_until(lambda: stamp(client.states[-1]) >= acked + window - 5e-3, 60,
                              f'the arm to reach {acked + window:.3f} s')
        except TimeoutError as exc:
            pytest.fail(f'{exc}; last stamp {stamp(client.states[-1]):.4f}\n'
                        f'{node_output(proc)}')
        _quiet(client, timeout=60)
        # it waits right at the window: not a step further while the consumer is silent
        assert stamp(client.states[-1]) <= acked + window + 1.5e-3, (stamp(client.states[-1]),
                                                                     acked)
    assert stop(proc) == 0, node_output(proc)
    output = node_output(proc)
    assert 'in lock with consumer_acks' in output
    assert 'waited' in output and 'real time' in output     # the summary at the end


def test_lockstep_waits_for_a_slow_consumer_and_lets_go_of_a_gone_one(ros_env, client):
    """A consumer silent for lockstep_timeout that still publishes the topic is slow (a
    busy machine): the arm keeps waiting, and says so. Once the topic has no publisher
    left, the consumer is gone: the arm runs on, and says so."""
    proc = start_sim(ros_env, use_sim_time=True, real_time_factor=0.0,
                     lockstep_topic='consumer_acks', lockstep_timeout=1.0)
    ack = _ack_publisher(client, proc)
    # the first stamp heard starts the lock: the free-running arm stops where it is (the
    # stamp acknowledged next is then ahead of it: acknowledging the newest sample seen
    # while the arm still ran free let it run past that stamp + window on a busy machine)
    ack(stamp(client.states[-1]))
    _quiet(client, timeout=60)
    held = stamp(client.states[-1])
    ack(held)
    client.spin_until(lambda: 'waiting for consumer_acks: silent for' in node_output(proc),
                      60, 'the warning that the arm waits for a slow consumer')
    _quiet(client, timeout=60)
    assert stamp(client.states[-1]) <= held + 0.5 + 1.5e-3      # lockstep_window
    client.node.destroy_publisher(ack.publisher)
    client.spin_until(lambda: stamp(client.states[-1]) > held + 2.0, 60,
                      'the arm running on without the consumer')
    assert stop(proc) == 0, node_output(proc)
    assert 'has no publisher any more' in node_output(proc)
    assert 'running on without waiting' in node_output(proc)
