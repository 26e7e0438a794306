"""Safe motion (arm_dyn_id/excitation/stopping.py): windows of plan with a stop ramp, and
a stop from any state of any plan, never outside the position, velocity or acceleration
limits.

The property test plays the excitation node's part without ROS: it sends the windows of
a random run (reciprocating or Fourier plan with its approach from a random start, on
random limits) at random instants, stops at a random instant (or stops sending, as a
hung node would), and follows the messages with JointTrajectoryFollower, the
joint_trajectory_controller semantics the simulated arm uses (replace from the start,
cubic between points). It checks every point sent, the streamed position commands
(finite differences) and the controller's reference every millisecond, through the end
at rest.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from arm_dyn_id.config import ArmConfig
from arm_dyn_id.excitation.follow import JointTrajectoryFollower
from arm_dyn_id.excitation.plans import (fourier_plan, fourier_series, reciprocating_plan,
                                         rest_fourier_coefficients)
from arm_dyn_id.excitation.stopping import (PlanStream, braking_accelerations,
                                            held_time_rate, stop_ramp)
from arm_dyn_id.paths import share_dir

JOINTS = [f'joint_{i}' for i in range(1, 7)]
ARM_LOWER = np.array([-1.0, -0.5, -1.6, -0.1, -1.6, -1.2])
ARM_UPPER = np.array([3.0, 2.8, 1.6, 2.6, 1.6, 1.2])
EPS = 1e-6          # rad, and relative on velocities: exact arithmetic up to rounding
# a cubic through exact plan points exceeds the plan's peak acceleration a little
# (measured < 0.1 % at 10 ms points with the plan at its limit); the stop ramp is exact
SPLINE_ACC = 0.01


def make_config(lower=ARM_LOWER, upper=ARM_UPPER, vel=2.0, acc=5.0):
    return ArmConfig.from_params(dict(
        robot_name='humanoid_arm', urdf=str(share_dir() / 'urdf' / 'humanoid_arm.urdf'),
        joints=JOINTS, torque_constants=[1.0] * 6,
        position_limits_lower=[float(x) for x in lower],
        position_limits_upper=[float(x) for x in upper],
        velocity_limits=np.broadcast_to(vel, (6,)).astype(float).tolist(),
        acceleration_limits=np.broadcast_to(acc, (6,)).astype(float).tolist()))


def _within(cfg, q, dq=None, ddq=None, acc_tol=EPS, what=''):
    q = np.atleast_2d(q)
    assert np.all(q >= cfg.position_limits_lower - EPS), f'{what}: position below the limit'
    assert np.all(q <= cfg.position_limits_upper + EPS), f'{what}: position above the limit'
    if dq is not None:
        ratio = np.max(np.abs(np.atleast_2d(dq)) / cfg.velocity_limits)
        assert ratio <= 1 + EPS, f'{what}: velocity at {ratio:.6f} of its limit'
    if ddq is not None:
        ratio = np.max(np.abs(np.atleast_2d(ddq)) / cfg.acceleration_limits)
        assert ratio <= 1 + acc_tol, f'{what}: acceleration at {ratio:.6f} of its limit'


# ---------------------------------------------------------------------------
# the stop ramp
# ---------------------------------------------------------------------------
def test_stop_ramp_brakes_each_joint_at_its_limit_to_rest():
    cfg = make_config(acc=[5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    q0 = np.array([0.5, 0.5, 0.0, 1.0, 0.0, 0.0])
    v0 = np.array([1.0, -1.0, 0.5, 0.0, -0.2, 0.1])
    ramp = stop_ramp(2.0, q0, v0, cfg)
    assert np.allclose(ramp.stop_times, np.abs(v0) / cfg.acceleration_limits)
    t = np.linspace(2.0, ramp.end_time + 0.1, 2001)
    q, dq, ddq = ramp.sample(t)
    _within(cfg, q, dq, ddq, what='ramp')
    # braking only: every speed falls, never changes sign, and ends at zero
    assert np.all(np.diff(np.abs(dq), axis=0) <= 1e-12)
    assert np.all(dq * v0 >= -1e-12)
    assert np.allclose(dq[-1], 0.0) and np.allclose(ddq[-1], 0.0)
    assert np.allclose(q[-1], q0 + v0 * np.abs(v0) / (2 * cfg.acceleration_limits))
    assert np.allclose(q[-1], ramp.rest_position)
    # the knots are where a joint comes to rest: q is quadratic between them
    knots = ramp.knots(2.0)
    assert knots[0] == 2.0 and np.allclose(knots[1:], 2.0 + np.unique(ramp.stop_times[v0 != 0]))


def test_gentle_stop_is_raised_where_a_position_limit_needs_it():
    cfg = make_config(acc=4.0)
    q0 = ARM_UPPER - np.array([0.5, 0.05, 0.5, 0.5, 0.5, 0.5])
    v0 = np.array([0.5, 0.5, -0.5, 0.0, 0.5, 0.5])
    a = braking_accelerations(q0, v0, cfg, stop_acceleration=0.5)
    # joint 2 has 0.05 rad of room: 0.5²/(2·0.05) = 2.5 rad/s², above the gentle 0.5
    assert a[1] == pytest.approx(2.5) and a[0] == pytest.approx(0.5)
    ramp = stop_ramp(0.0, q0, v0, cfg, stop_acceleration=0.5)
    assert np.all(ramp.rest_position <= cfg.position_limits_upper + EPS)
    # a request above the limit is capped at it
    assert np.all(braking_accelerations(q0, v0, cfg, 100.0) == cfg.acceleration_limits)


# ---------------------------------------------------------------------------
# windows
# ---------------------------------------------------------------------------
def _run(cfg, kind, seed, speed=0.3):
    rng = np.random.default_rng(seed)
    if kind == 'fourier':
        omega, L = 2 * np.pi * 0.5, 3
        a, b = rest_fourier_coefficients(rng.normal(0, 0.3, (6, L)), rng.normal(0, 0.3, (6, L)))
        t = np.linspace(0, 2 * np.pi / omega, 400, endpoint=False)
        p, dq, ddq = fourier_series(t, omega, a, b, np.zeros(6))
        lo, hi = cfg.position_limits_lower + 0.02, cfg.position_limits_upper - 0.02
        # scaled up to the limits (0.99), so that a stop meets them where they bind
        s = np.minimum.reduce([np.full(6, 10.0), 0.99 * cfg.velocity_limits / np.abs(dq).max(0),
                               0.99 * cfg.acceleration_limits / np.abs(ddq).max(0),
                               (hi - lo) / np.maximum(p.max(0) - p.min(0), 1e-9)])
        a, b, p = a * s[:, None], b * s[:, None], p * s
        q0 = (lo + hi) / 2 - (p.max(0) + p.min(0)) / 2
        plan = fourier_plan(cfg, a, b, q0, omega, periods=1)
    else:
        joint = int(rng.integers(0, 6))
        pose = cfg.position_limits_lower + rng.uniform(0.2, 0.8, 6) * (
            cfg.position_limits_upper - cfg.position_limits_lower)
        # ramps at the acceleration limit, short enough to leave a constant-speed span
        speed = min(speed, 0.5 * np.sqrt(cfg.acceleration_limits[joint]))
        plan = reciprocating_plan(None, cfg, poses=[(joint, pose)], speed=speed,
                                  sweep_range=0.6, settle_time=0.1,
                                  ramp_acceleration=float(cfg.acceleration_limits[joint]))
    start = cfg.position_limits_lower + rng.uniform(0, 1, 6) * (
        cfg.position_limits_upper - cfg.position_limits_lower)
    return plan.with_approach(start, cfg, speed=float(np.min(cfg.velocity_limits)),
                              acceleration=float(np.min(cfg.acceleration_limits)))


def _follow(stream, cfg, sends, t_stop, hung, t_end, dt=0.001):
    """Play the node (windows at ``sends``, a stop at ``t_stop`` unless ``hung``) against a
    JointTrajectoryFollower; returns times, reference, the windows sent and when the stop
    was decided (None if it was not)."""
    follower = JointTrajectoryFollower(stream.plan_state(stream.t0)[0])
    windows = []
    ts = np.arange(stream.t0 - 0.05, t_end, dt)
    out = np.empty((3, ts.size, 6))
    sends = list(sends)
    stopped = None
    for k, t in enumerate(ts):
        while sends and sends[0] <= t:
            now = sends.pop(0)
            if hung and now > t_stop:
                sends.clear()
                break
            if not hung and now >= t_stop and stopped is None:
                stopped = now
                windows.append(stream.stop(now + 0.01))      # one tick ahead, as the node
                sends.clear()
            elif stopped is None:
                tail = stream.tail
                if tail is None or now + 0.01 >= tail.t0 - stream.lookahead / 2:
                    if tail is not None and tail.t0 >= stream.end:
                        continue
                    t_from = min(now + 0.01, stream.end)     # one tick ahead, as the node
                    try:
                        windows.append(stream.window(t_from))
                    except ValueError:
                        # late: the arm brakes on the last window's ramp; so does the node
                        windows.append(stream.stop(t_from))
                        stopped = now
                        assert stream.ramp is stream.tail
            else:
                continue
            w = windows[-1]
            follower.replace(w.start, w.times, w.q, w.dq)
        out[:, k] = follower.sample(t)
    return ts, out, windows, stopped


@st.composite
def stop_cases(draw):
    vel = [round(draw(st.floats(0.2, 3.0)), 3) for _ in range(6)]
    acc = [round(draw(st.floats(0.5, 8.0)), 3) for _ in range(6)]
    return dict(kind=draw(st.sampled_from(['reciprocating', 'fourier'])),
                vel=vel, acc=acc, seed=draw(st.integers(0, 10 ** 6)),
                speed=round(draw(st.floats(0.05, 1.0)) * min(vel), 3),
                point_period=draw(st.sampled_from([0.005, 0.01, 0.02])),
                lookahead=draw(st.sampled_from([0.05, 0.1, 0.25, 0.5])),
                stop_fraction=draw(st.floats(0.0, 1.0)),
                jitter=draw(st.floats(0.0, 1.0)), hung=draw(st.booleans()),
                gentle=draw(st.sampled_from([None, 0.2, 1.0])))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),      # no shrinking: slow, and verbose
          suppress_health_check=[HealthCheck.too_slow])
@given(c=stop_cases())
def test_windows_and_stop_never_leave_the_limits(c):
    cfg = make_config(vel=c['vel'], acc=c['acc'])
    run = _run(cfg, c['kind'], c['seed'], c['speed'])
    t0 = 10.0
    stream = PlanStream(run, t0, cfg, c['point_period'], c['lookahead'], c['gentle'])
    # the node's ticks, late by up to a quarter of the look-ahead now and then
    rng = np.random.default_rng(c['seed'])
    period = 0.01
    ticks = t0 - 0.2 + np.cumsum(period + rng.uniform(0, c['jitter'] * c['lookahead'] / 4,
                                                      int(run.duration / period) + 400))
    t_stop = t0 + c['stop_fraction'] * run.duration
    braking = cfg.acceleration_limits if c['gentle'] is None else \
        np.minimum(c['gentle'], cfg.acceleration_limits)
    end = min(t_stop, t0 + run.duration) + c['lookahead'] + 0.5 + \
        float(np.max(cfg.velocity_limits / braking))
    ts, (q, dq, ddq), windows, decided = _follow(stream, cfg, ticks[ticks < end], t_stop,
                                                 c['hung'], end)
    assert windows
    for w in windows:
        # every point sent, exactly within the limits; each window ends at rest
        _within(cfg, w.q, w.dq, w.ddq, what='points')
        assert np.allclose(w.dq[-1], 0.0, atol=1e-9), 'a window that does not end at rest'
        assert w.plan_end - w.start <= c['lookahead'] + 1e-9
        assert np.all(np.diff(w.times) > 0) and w.times[0] == 0.0
    # what the controller makes of them, every millisecond, through the stop
    _within(cfg, q, dq, ddq, acc_tol=SPLINE_ACC, what='controller reference')
    assert np.allclose(dq[-1], 0.0, atol=1e-9) and np.allclose(ddq[-1], 0.0, atol=1e-9), \
        'the arm is not at rest at the end'
    braking = ts >= stream.rest_time() - 1e-9
    assert braking.any() and np.allclose(q[braking], q[-1], atol=1e-9)
    if stream.ramp is not None:
        # from the start of the stop, no joint speeds up again
        after = ts >= stream.ramp.t0 + 1e-9
        speed = np.abs(dq[after])
        assert np.all(np.diff(speed, axis=0) <= 1e-9)
        # and braking begins one tick (10 ms) after the decision, as in the node
        assert stream.ramp.t0 - decided <= 0.01 + 1e-9 or \
            stream.ramp is stream.tail


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate))
@given(c=stop_cases(), rate=st.sampled_from([50.0, 100.0, 500.0]))
def test_streamed_commands_and_their_stop_never_leave_the_limits(c, rate):
    """The ``commands`` output: the node publishes reference(now) at each tick and, after
    a stop, the ramp from now. Finite differences of what it publishes stay within the
    velocity and acceleration limits."""
    cfg = make_config(vel=c['vel'], acc=c['acc'])
    run = _run(cfg, c['kind'], c['seed'], c['speed'])
    stream = PlanStream(run, 0.0, cfg, c['point_period'], c['lookahead'], c['gentle'])
    t_stop = c['stop_fraction'] * run.duration
    dt = 1.0 / rate
    braking = cfg.acceleration_limits if c['gentle'] is None else \
        np.minimum(c['gentle'], cfg.acceleration_limits)
    ts = np.arange(0.0, t_stop + 0.1 + float(np.max(cfg.velocity_limits / braking)), dt)
    sent = []
    for t in ts:
        if t >= t_stop and stream.ramp is None:
            stream.stop(t)
        sent.append(stream.reference(t))
    q, dq, ddq = (np.array(x) for x in zip(*sent))
    _within(cfg, q, dq, ddq, what='commands')
    v = np.diff(q, axis=0) / dt
    a = np.diff(q, n=2, axis=0) / dt ** 2
    _within(cfg, q, v, a, what='finite differences of the commands')
    assert np.allclose(dq[-1], 0.0) and np.allclose(q[-1], stream.ramp.rest_position)


def test_window_structure_and_replacement_without_jumps():
    """Windows lie on one grid: the part of a window that the next replaces equals the
    next one's start, point for point."""
    cfg = make_config()
    run = _run(cfg, 'reciprocating', 3)
    stream = PlanStream(run, 5.0, cfg, 0.01, 0.2)
    w1 = stream.window(5.0)
    assert w1.plan_end == pytest.approx(5.2)
    w2 = stream.window(stream.grid_after(5.093))
    assert w2.start == pytest.approx(5.1)
    shared = (w1.absolute_times >= w2.start - 1e-9) & (w1.absolute_times <= w1.plan_end + 1e-9)
    k = np.searchsorted(w2.absolute_times, w1.absolute_times[shared] - 1e-9)
    assert np.allclose(w2.q[k], w1.q[shared]) and np.allclose(w2.dq[k], w1.dq[shared])
    # a window sent after the look-ahead of the last one ran out is refused
    with pytest.raises(ValueError, match='look-ahead ran out'):
        stream.window(stream.grid_after(w2.plan_end + 0.05))
    # stopping inside the look-ahead brakes from the plan's state there
    w3 = stream.stop(5.25)
    q, dq, _ = run.sample(0.25)
    assert np.allclose(w3.q[0], q) and np.allclose(w3.dq[0], dq)
    assert np.allclose(w3.dq[-1], 0.0)


def test_time_rate_holds_its_peak_through_a_pause():
    """A sim at x4 that pauses for 3 s (lockstep) keeps the look-ahead rate near x4, and
    decays to the new rate only slowly; never below 1 or above 1000."""
    rate = 1.0
    for _ in range(10):
        rate = held_time_rate(rate, 2.0, 0.5)          # x4
    assert rate == pytest.approx(4.0)
    for _ in range(6):
        rate = held_time_rate(rate, 0.0, 0.5)          # paused 3 s
    assert rate == pytest.approx(4.0 * 0.98 ** 6)
    assert rate > 3.5
    for _ in range(200):
        rate = held_time_rate(rate, 0.5, 0.5)          # x1 for 100 s
    assert rate == pytest.approx(1.0)
    assert held_time_rate(2.0, 1e6, 0.5) == 1000.0
    assert held_time_rate(2.0, 1.0, 0.0) == 2.0        # no wall time: unchanged
