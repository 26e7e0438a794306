"""Random configurations and plans: the excitation node never commands outside the limits
(issue 9), also while it brakes.

Hypothesis draws an arm config (joint position limits: the arm's own, a sub-range, narrow
ones, now and then inverted; velocity and acceleration limits), a plan (designed at
start-up: reciprocating, Fourier, or the unsupported ``plan_kind`` validation; or a plan
file: reciprocating, validation or Fourier, designed for the arm's full range or for the
drawn one, so that its poses may lie outside), a sweep speed (sometimes above the
velocity limits), approach speed and acceleration, the output (``trajectory`` windows or
streamed ``commands``) and where the fake arm stands (inside, just outside within the
approach tolerance, or well outside its limits). Then a real ``excitation_node`` runs in
its own process, and:

(a) a config or plan it cannot run ends the node at start-up: exit code 2 and one FATAL
    line naming the joint or parameter and the value (it never publishes a command);
(b) an arm outside its limits: ``~/start`` is refused with such a message and nothing
    is published; a ``~/stop`` afterwards commands nothing (never a jump to the limit);
(c) otherwise every JointTrajectory window (approach from the measured position
    included) and every streamed command lies within the position limits, trajectory
    velocities within the velocity limits, and the braking of a later ``~/stop`` too
    (it ends at rest).

Cases the node must refuse are recognised independently of the node (inverted limits,
a designed sweep faster than a velocity limit, a plan file that leaves the limits, an
arm outside its limits), and the node's message must also contain what the core library
says for the same inputs. Streamed commands run on simulated time driven by the test
(20x real time) so that the whole approach is seen in well under a second.
arm_dyn_id/excitation/stopping.py's own property test (test/test_safe_stop.py) covers
stops from any state of random plans without processes.

Each example starts its own node (a config is read once, at start-up): about 3.5 s
each, about 50 s for the 14 examples (7 explicit, 7 drawn) on a busy 2-core machine.
Hypothesis is derandomized (the same examples every run) and does not shrink.
"""

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import (Plan, check_limits, fourier_plan, fourier_series,
                                         reciprocating_plan, rest_fourier_coefficients,
                                         validation_plan)
from ros_utils import (
    RosHarness, node_output, refusal_line, ros_environment, start_node, stop, wait_quiet)

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
URDF = REPO / 'urdf' / 'humanoid_arm.urdf'
JOINTS = [f'joint_{i}' for i in range(1, 7)]
ARM_LOWER = np.array([-1.0, -0.5, -1.6, -0.1, -1.6, -1.2])     # the URDF's limits
ARM_UPPER = np.array([3.0, 2.8, 1.6, 2.6, 1.6, 1.2])
APPROACH_TOLERANCE = 0.01      # documented: a start this far outside is clipped
EPS = 1e-6                     # the node's own check (check_point) allows this much
SIM_STEP = 0.05                # s of simulated time per /clock message ...
SIM_PERIOD = 0.0025            # ... every this many s of wall time (20x real time)
NODE = 'arm_dyn_id.nodes.excitation_node'
RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
MARKER_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
PLANS = ('reciprocating', 'fourier', 'validation',
         'file_reciprocating', 'file_validation', 'file_fourier')


# ---------------------------------------------------------------------------
# drawing a case
# ---------------------------------------------------------------------------
def _r(x):
    return round(float(x), 3)


@st.composite
def joint_limits(draw, i):
    lo0, hi0 = ARM_LOWER[i], ARM_UPPER[i]
    kind = draw(st.sampled_from(['arm', 'arm', 'arm', 'sub', 'sub', 'narrow']))
    if kind == 'arm':
        return _r(lo0), _r(hi0)
    if kind == 'sub':      # a reduced range of at least 0.4 rad
        a = draw(st.floats(0.0, 0.6))
        b = draw(st.floats(a + 0.4 / (hi0 - lo0), 1.0))
        return _r(lo0 + a * (hi0 - lo0)), _r(lo0 + b * (hi0 - lo0))
    centre = draw(st.floats(lo0 + 0.2, hi0 - 0.2))
    width = draw(st.floats(0.02, 0.3))
    return _r(centre - width / 2), _r(centre + width / 2)


@st.composite
def cases(draw):
    limits = [draw(joint_limits(i)) for i in range(6)]
    lower, upper = [lo for lo, _ in limits], [hi for _, hi in limits]
    if draw(st.integers(0, 7)) == 0:            # inverted or empty limits on one joint
        i = draw(st.integers(0, 5))
        lower[i], upper[i] = upper[i], draw(st.sampled_from([upper[i], lower[i]]))
    velocity = [_r(draw(st.floats(0.1, 3.0))) for _ in range(6)]
    plan = draw(st.sampled_from(PLANS))
    if draw(st.integers(0, 3)) == 0:            # sweep faster than some velocity limit
        speed = _r(min(velocity) * draw(st.floats(1.05, 3.0)))
    else:
        speed = _r(draw(st.floats(0.02, 0.09)))
    arm = draw(st.sampled_from(['inside', 'inside', 'edge', 'outside']))
    return dict(
        lower=lower, upper=upper, velocity=velocity,
        acceleration=[_r(draw(st.floats(0.2, 6.0))) for _ in range(6)],
        plan=plan, design=draw(st.sampled_from(['arm', 'config'])), speed=speed,
        seed=draw(st.integers(0, 1000)),
        output=draw(st.sampled_from(['trajectory', 'commands'])),
        arm=arm, arm_fraction=[_r(draw(st.floats(0.0, 1.0))) for _ in range(6)],
        arm_joint=draw(st.integers(0, 5)),
        arm_offset=_r(draw(st.floats(0.0, 0.005) if arm == 'edge' else st.floats(0.05, 1.0))
                      * draw(st.sampled_from([-1, 1]))),
        approach_speed=_r(draw(st.floats(0.3, 3.0))),
        approach_acceleration=_r(draw(st.floats(0.5, 6.0))),
        point_period=_r(draw(st.floats(0.02, 0.5))),
        command_rate=float(draw(st.sampled_from([20, 50, 100]))))


def case(**changes):
    """An explicit example: the arm's own limits, a quick reciprocating plan, arm inside."""
    base = dict(lower=ARM_LOWER.tolist(), upper=ARM_UPPER.tolist(), velocity=[2.0] * 6,
                acceleration=[5.0] * 6, plan='reciprocating', design='arm', speed=0.05,
                seed=1, output='trajectory', arm='inside', arm_fraction=[0.3] * 6,
                arm_joint=0, arm_offset=0.0, approach_speed=1.0, approach_acceleration=2.0,
                point_period=0.1, command_rate=50.0)
    base.update(changes)
    return base


def arm_position(c):
    lo, hi = np.array(c['lower']), np.array(c['upper'])
    q = lo + np.array(c['arm_fraction']) * (hi - lo)
    if c['arm'] != 'inside':
        i, off = c['arm_joint'], c['arm_offset']
        q[i] = hi[i] + abs(off) if off >= 0 else lo[i] - abs(off)
    return q


# ---------------------------------------------------------------------------
# files for the node, and what it must do
# ---------------------------------------------------------------------------
def write_config(path, lower, upper, velocity, acceleration):
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': dict(
        robot_name='humanoid_arm', urdf=str(URDF), joints=JOINTS, gravity=9.81,
        torque_constants=[1.0] * 6, position_limits_lower=[float(x) for x in lower],
        position_limits_upper=[float(x) for x in upper],
        velocity_limits=[float(x) for x in velocity],
        acceleration_limits=[float(x) for x in acceleration])}}))
    return path


def _fourier_file_plan(cfg, rng):
    """Random rest-to-rest Fourier coefficients scaled to fit ``cfg`` (0.05 rad margin)."""
    omega, L = 2 * np.pi * 0.2, 3
    a, b = rest_fourier_coefficients(rng.normal(0, 0.3, (6, L)), rng.normal(0, 0.3, (6, L)))
    t = np.linspace(0, 2 * np.pi / omega, 400, endpoint=False)
    p, dq, ddq = fourier_series(t, omega, a, b, np.zeros(6))
    lo, hi = cfg.position_limits_lower + 0.05, cfg.position_limits_upper - 0.05
    width = np.maximum(p.max(0) - p.min(0), 1e-9)
    s = np.minimum.reduce([np.ones(6), 0.9 * cfg.velocity_limits / np.abs(dq).max(0),
                           0.9 * cfg.acceleration_limits / np.abs(ddq).max(0),
                           np.maximum(hi - lo, 0) / width])
    a, b, p = a * s[:, None], b * s[:, None], p * s
    q0 = (lo + hi) / 2 - (p.max(0) + p.min(0)) / 2
    return fourier_plan(cfg, a, b, q0, omega, periods=2, name='random_fourier')


def write_plan_file(c, path, checker):
    """A plan file designed for the arm's full range, or for the drawn config (when
    that config can be loaded); it may well leave the drawn limits."""
    cfg = None
    if c['design'] == 'config':
        try:
            cfg = load_arm_config(write_config(path.with_suffix('.design.yaml'), c['lower'],
                                               c['upper'], c['velocity'], c['acceleration']))
        except ConfigError:
            cfg = None
    if cfg is None:
        cfg = load_arm_config(write_config(path.with_suffix('.design.yaml'), ARM_LOWER,
                                           ARM_UPPER, [3.0] * 6, [6.0] * 6))
    kind = c['plan'][len('file_'):]
    try:
        # steep ramps and long sweeps: a fast sweep still fits the arm's range
        kw = dict(speed=min(c['speed'], 1.0), sweep_range=1.0, settle_time=0.5,
                  ramp_acceleration=4.0)
        if kind == 'reciprocating':
            plan = reciprocating_plan(None, cfg, poses_per_joint=1, **kw)
        elif kind == 'validation':
            plan = validation_plan(None, cfg, seed=c['seed'], checker=checker, **kw)
        else:
            plan = _fourier_file_plan(cfg, np.random.default_rng(c['seed']))
    except ConfigError:
        # the drawn limits admit no such plan: design one for the arm's full range
        if c['design'] == 'arm':
            raise
        return write_plan_file(dict(c, design='arm'), path, checker)
    plan.to_yaml(path)
    return plan


def node_params(c, config_path, plan_path, controller):
    params = {'config_file': str(config_path), 'controller': controller,
              'output': c['output'], 'command_rate': c['command_rate'],
              'trajectory_point_period': c['point_period'],
              'lookahead': max(0.25, 2 * c['point_period']),
              'approach_speed': c['approach_speed'],
              'approach_acceleration': c['approach_acceleration'],
              'speed': c['speed'], 'seed': c['seed'], 'quick': True,
              'optimiser_budget': 30, 'joint_state_timeout': 0.5}
    if plan_path is not None:
        params['plan_file'] = str(plan_path)
    else:
        params['plan_kind'] = c['plan']
    if c['output'] == 'commands':
        # simulated time driven by the test; the fake arm lags one clock step behind
        params.update(use_sim_time=True, tracking_error_threshold=1.0)
    return params


def must_refuse(c, file_plan):
    """Why the node must refuse this case, judged without the node's own checks, or None."""
    lo, hi = np.array(c['lower']), np.array(c['upper'])
    vel, acc = np.array(c['velocity']), np.array(c['acceleration'])
    if np.any(lo >= hi):
        return 'inverted limits'
    if c['plan'] == 'validation':
        return 'plan_kind validation is not designed at start-up'
    if c['plan'] == 'reciprocating' and c['speed'] > vel.min():
        return 'sweep speed above a velocity limit'
    if file_plan is not None:
        t = np.arange(0.0, file_plan.duration, 0.005)
        q, dq, ddq = file_plan.sample(t)
        if np.any(q < lo - 1e-3) or np.any(q > hi + 1e-3) or \
                np.any(np.abs(dq) > vel * (1 + 1e-3)) or np.any(np.abs(ddq) > acc * (1 + 1e-3)):
            return 'plan file outside the limits'
    if c['arm'] == 'outside':
        return 'arm outside its limits'
    return None


def core_verdict(c, config_path, plan_path, q_arm):
    """What the core library says about the same inputs: (start-up error, ~/start error),
    each the refusal text or None."""
    from arm_dyn_id.nodes.excitation_node import design_plan
    try:
        cfg = load_arm_config(config_path, node_name='excitation_node')
        if plan_path is not None:
            plan = Plan.from_yaml(plan_path)
        else:
            plan = design_plan(cfg, c['plan'], True, False, 30, c['seed'], c['speed'])
        check_limits(plan, cfg)
    except (ConfigError, ValueError) as exc:
        return str(exc), None
    try:
        run = plan.with_approach(q_arm, cfg, c['approach_speed'], c['approach_acceleration'])
        check_limits(run, cfg)
    except (ConfigError, ValueError) as exc:
        return None, str(exc)
    return None, None


# ---------------------------------------------------------------------------
# the test's side of ROS: a fake arm, a clock, recorders
# ---------------------------------------------------------------------------
class Bench:
    """One RosHarness for all examples: joint_states of a fake arm that follows streamed
    commands, a /clock for sim-time examples, and the node's outputs per example."""

    def __init__(self, ros):
        self.ros = ros
        self.q = np.zeros(6)
        self.sim_time = 1.0
        self.sim_on = False             # publish /clock (examples on simulated time)
        self.sim_running = False        # and advance it
        self.trajectories, self.commands, self.markers = [], [], []
        self._subs = []
        self.js_pub = ros.node.create_publisher(JointState, 'joint_states', 10)
        self.clock_pub = ros.node.create_publisher(Clock, '/clock', 10)
        ros.node.create_subscription(String, 'excitation_segments',
                                     lambda m: self.markers.append(json.loads(m.data)),
                                     MARKER_QOS)
        self.node_times = {}            # node name -> stamp of its last diagnostics (s)
        ros.node.create_subscription(DiagnosticArray, 'diagnostics', self._on_diagnostics, 50)
        self._stop = False
        self._threads = [threading.Thread(target=self._states, daemon=True),
                         threading.Thread(target=self._clock, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _states(self):
        while not self._stop:
            # stamp 0: the node takes the receipt time on its own clock (wall or sim)
            self.js_pub.publish(JointState(name=JOINTS, position=self.q.tolist()))
            time.sleep(0.005)   # paces joint_states at 200 Hz

    def _clock(self):
        while not self._stop:
            if not self.sim_on:
                time.sleep(0.01)    # idle poll: no /clock in a wall-time example
                continue
            if self.sim_running:
                self.sim_time += SIM_STEP
            sec, nsec = divmod(int(round(self.sim_time * 1e9)), 1_000_000_000)
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = sec, nsec
            self.clock_pub.publish(msg)
            time.sleep(SIM_PERIOD)  # paces /clock (20x real time)

    def begin(self, controller, q_arm, sim):
        """New example: the arm stands at q_arm; record what goes to ``controller``;
        publish a (held) /clock when ``sim``."""
        for sub in self._subs:
            self.ros.node.destroy_subscription(sub)
        self.q = np.array(q_arm, dtype=float)
        self.trajectories, self.commands, self.markers[:] = [], [], []
        self.sim_running = False
        self.sim_on = sim
        self._subs = [
            self.ros.node.create_subscription(JointTrajectory, f'{controller}/joint_trajectory',
                                              self.trajectories.append, RELIABLE),
            self.ros.node.create_subscription(Float64MultiArray, f'{controller}/commands',
                                              self._on_command, QoSProfile(depth=1000))]

    def _on_diagnostics(self, msg):
        # stamped on the node's own clock: > 0 once a sim-time node has heard /clock
        for status in msg.status:
            name = status.name.split(':')[0]
            self.node_times[name] = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

    def _on_command(self, msg):
        self.commands.append(np.array(msg.data))
        self.q = np.array(msg.data)           # follows perfectly

    def close(self):
        self._stop = True
        for thread in self._threads:
            thread.join(60.0)   # they use the harness node: gone before it is


@pytest.fixture(scope='module')
def bench(tmp_path_factory):
    from arm_dyn_id.excitation.collision import ClearanceChecker
    root = tmp_path_factory.mktemp('limits')
    cfg = load_arm_config(write_config(root / 'arm.yaml', ARM_LOWER, ARM_UPPER, [2.0] * 6,
                                       [5.0] * 6))
    with ros_environment(root / 'ros') as env:
        with RosHarness(env.domain_id) as ros:
            b = Bench(ros)
            b.env, b.root, b.count = env, root, 0
            b.checker = ClearanceChecker.from_config(cfg)
            try:
                yield b
            finally:
                b.close()


def _trigger(bench, service, timeout=20.0):
    return bench.ros.trigger(service, timeout=timeout)


def _start(bench, name, proc):
    """~/start, retried while the node has no joint_states yet; the response."""
    deadline = time.monotonic() + 30.0
    if bench.sim_on:        # the node must have the held clock before it stamps the start
        bench.ros.wait_for_subscribers(bench.clock_pub, timeout=30.0)
        bench.ros.wait_for(lambda: bench.node_times.get(name, 0.0) > 0.0, 30.0,
                           what=f'diagnostics of {name} stamped on the simulated clock')
    while True:
        assert proc.poll() is None, node_output(proc)
        res = _trigger(bench, f'/{name}/start')
        if res.success or not res.message.startswith('not ready') or \
                time.monotonic() > deadline:
            return res
        time.sleep(0.1)     # poll interval of a retry bounded by the deadline above


def _within(q, c, what, tol=EPS):
    q = np.atleast_2d(q)
    lo, hi = np.array(c['lower']) - tol, np.array(c['upper']) + tol
    bad = np.argwhere((q < lo) | (q > hi))
    assert bad.size == 0, (f'{what}: position of {JOINTS[bad[0][1]]} = {q[tuple(bad[0])]} '
                           f'outside [{lo[bad[0][1]]}, {hi[bad[0][1]]}]')


def _check_trajectory(msg, c, what):
    assert list(msg.joint_names) == JOINTS, what
    q = np.array([p.positions for p in msg.points])
    _within(q, c, what)
    vel = np.array(c['velocity'])
    # the mean speed between two points is at most the peak speed between them
    t = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9
                  for p in msg.points])
    if len(t) > 1:
        step = np.abs(np.diff(q, axis=0))
        allowed = vel * np.diff(t)[:, None] * (1 + EPS) + 1e-8
        assert np.all(step <= allowed), f'{what}: a step between points is too fast'
    for k, p in enumerate(msg.points):
        if len(p.velocities):
            v = np.abs(np.array(p.velocities))
            assert np.all(v <= vel * (1 + EPS)), f'{what}: point {k} velocity {v} > {vel}'
    return q


def _check_refusal(bench, c, name, res, core, q_arm):
    """(b): ~/start says what is wrong, with the value, and nothing is commanded."""
    assert core in res.message, (res.message, core)
    assert re.search(r'joint_\d|parameter \w+|speed', res.message), res.message
    assert re.search(r"\d|'[^']+'", res.message), res.message     # and a value
    time.sleep(0.25)    # a window to watch, not a wait: nothing may arrive in it
    assert not bench.trajectories and not bench.commands, \
        f'commands published after a refusal: {res.message}'
    # matched before ~/stop, so that a hold it sends cannot be missed
    bench.ros.wait_for(lambda: all(sub.get_publisher_count() > 0 for sub in bench._subs),
                       30.0, what=f'the controller topics of {name}')
    # a ~/stop now holds where the arm is, or publishes nothing when it is
    # outside its limits: never a jump to the nearest limit
    res = _trigger(bench, f'/{name}/stop')
    assert res.success
    outside = np.any(q_arm < np.array(c['lower']) - APPROACH_TOLERANCE) or \
        np.any(q_arm > np.array(c['upper']) + APPROACH_TOLERANCE)
    assert not outside or 'no hold command sent' in res.message, res.message
    if res.message.startswith('holding'):
        bench.ros.wait_for(lambda: bench.trajectories or bench.commands, 10.0,
                           what=f'the hold {name} says it sent')
    else:
        time.sleep(0.25)    # a window to watch: a hold that should not come would land here
    held = [np.array(m.points[0].positions) for m in bench.trajectories] + \
        bench.commands
    for q in held:
        _within(q, c, 'hold after a refusal')
        assert np.max(np.abs(q - q_arm)) <= APPROACH_TOLERANCE + EPS, \
            f'a hold after a refusal moves the arm from {q_arm} to {q}'


def _check_run(bench, c, name, res, q_arm):
    """(c): every command of the run, and the braking of a ~/stop, within the limits."""
    if c['output'] == 'trajectory':
        # windows of the run, the first from where the arm is (clipped into the limits)
        bench.ros.wait_for(lambda: len(bench.trajectories) >= 3, 10, what='windows')
        q = _check_trajectory(bench.trajectories[0], c, 'first window')
        assert np.max(np.abs(q[0] - q_arm)) <= APPROACH_TOLERANCE + EPS, (q[0], q_arm)
        assert re.search(r'approach ([\d.]+) s \+ ([\d.]+) s', res.message), res.message
    else:
        m = re.search(r'approach ([\d.]+) s', res.message)

        def start_marker():
            return [x for x in bench.markers if x['phase'] == 'start']
        t0 = bench.ros.wait_for(start_marker, 5, what='the start marker')[0]['t']
        assert abs(t0 - bench.sim_time - 0.2) < 1e-6, 'the node missed the held clock'
        end = t0 + float(m.group(1)) + 1.0            # the whole approach and a bit
        bench.sim_running = True
        bench.ros.wait_for(lambda: bench.sim_time > end, 60, what='the approach')
        bench.sim_running = False
        # the clock stands still, so the stream stops: let what is in flight land
        wait_quiet(bench.commands, quiet=0.2, what='streamed commands')
        assert bench.commands, 'no command streamed'
        _within(np.array(bench.commands), c, 'streamed commands')
        assert np.max(np.abs(bench.commands[0] - q_arm)) <= APPROACH_TOLERANCE + EPS
        assert any(x['segment_id'] >= 0 for x in bench.markers), bench.markers
    n_cmd, n_markers = len(bench.commands), len(bench.markers)
    res = _trigger(bench, f'/{name}/stop')
    assert res.success and res.message.startswith('braking to rest'), res.message
    stopped = bench.ros.wait_for(
        lambda: [x for x in bench.markers[n_markers:] if x['phase'] == 'stopped'], 5,
        what='the stopped marker')[0]
    if c['output'] == 'commands':
        # the ticks stream the braking as simulated time goes on
        until = stopped['rest_time'] + 0.5
        bench.sim_running = True
        bench.ros.wait_for(lambda: bench.sim_time > until, 60, what='the braking')
        bench.sim_running = False
        wait_quiet(bench.commands, quiet=0.2, what='braking commands')
        braking = np.array(bench.commands[n_cmd:])
        assert len(braking), 'no braking command'
        _within(braking, c, 'braking commands')
        assert np.allclose(braking[-1], bench.commands[-1])
    else:
        wait_quiet(bench.trajectories, quiet=0.2, what='windows in flight')
        last = bench.trajectories[-1]
        stamp = last.header.stamp.sec + 1e-9 * last.header.stamp.nanosec
        assert stamp == pytest.approx(stopped['braking_from'], abs=1e-6)
        assert not any(last.points[-1].velocities), 'the braking does not end at rest'
    for k, msg in enumerate(bench.trajectories):
        _check_trajectory(msg, c, f'window {k}')


@settings(max_examples=7, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),   # no shrinking: an example costs ~3 s
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(c=cases())
@example(c=case())
@example(c=case(speed=2.5))                                             # speed > limit
@example(c=case(plan='file_reciprocating', upper=[0.8, 2.8, 1.6, 2.6, 1.6, 1.2]))  # poses out
@example(c=case(arm='outside', arm_joint=2, arm_offset=0.4, output='commands'))
@example(c=case(lower=[-1.0, -0.5, 0.7, -0.1, -1.6, -1.2],
                upper=[3.0, 2.8, 0.5, 2.6, 1.6, 1.2]))                  # inverted joint_3
@example(c=case(plan='fourier', output='commands', arm='edge', arm_joint=5,
                arm_offset=-0.004, approach_speed=0.5, approach_acceleration=0.6))
@example(c=case(plan='file_validation', design='config', arm_fraction=[0.9] * 6,
                lower=[-1.0, 0.4, -1.6, -0.1, -0.3, -1.2],
                upper=[3.0, 0.6, 1.6, 2.6, 0.9, 1.2]))                  # narrow joint_2
def test_random_configs_and_plans_never_command_outside_the_limits(bench, c):
    bench.count += 1
    k = bench.count
    work = bench.root / f'case_{k}'
    work.mkdir()
    name, controller = f'excitation_{k}', f'arm_{k}'
    config_path = write_config(work / 'arm.yaml', c['lower'], c['upper'], c['velocity'],
                               c['acceleration'])
    file_plan = plan_path = None
    if c['plan'].startswith('file_'):
        plan_path = work / 'plan.yaml'
        file_plan = write_plan_file(c, plan_path, bench.checker)
    q_arm = arm_position(c)
    bench.begin(controller, q_arm, sim=c['output'] == 'commands')
    proc = start_node(NODE, node_params(c, config_path, plan_path, controller), bench.env,
                      name=name, ros_args=['-r', f'__node:={name}'])
    try:
        # while the node starts: what it must do
        required = must_refuse(c, file_plan)
        at_startup, at_start = core_verdict(c, config_path, plan_path, q_arm)
        core = at_startup or at_start
        assert required is None or core is not None, \
            f'the core library accepts a case that must be refused ({required})'
        if at_startup is not None:
            # (a) the node ends: one FATAL line with the core's reason, exit code 2
            fatal = refusal_line(proc, 60)
            assert at_startup in fatal, (at_startup, node_output(proc))
            assert re.search(r'joint_\d|parameter \w+|speed', fatal), fatal
            assert not bench.trajectories and not bench.commands, 'published, then exited'
            return
        res = _start(bench, name, proc)
        log = node_output(proc)
        if res.success:
            _check_run(bench, c, name, res, q_arm)
            assert core is None, f'accepted a case to refuse ({required or core}): {log}'
        else:
            assert core is not None, f'refused a safe case: {res.message}\n{log}'
            _check_refusal(bench, c, name, res, core, q_arm)
    finally:
        assert stop(proc) in (0, 2), node_output(proc)
