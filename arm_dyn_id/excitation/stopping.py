"""Safe motion: a plan streamed in short windows, and a stop that decelerates in limits.

ROS-free: times are floats (s) on the caller's clock (the node clock), positions are
arrays in the order of the arm's joints. The excitation node (nodes/excitation_node.py)
turns a :class:`Window` into one ``JointTrajectory`` and samples
:meth:`PlanStream.reference` for streamed position commands.

Stop ramp (:func:`stop_ramp`): from the commanded state (q, q̇), every joint decelerates
on its own at a constant rate until it rests; joint j brakes at ``stop_acceleration``
(default: its acceleration limit), raised up to the limit when a gentler stop would
pass a position limit. With the limit itself, a stop from any state of a plan that is
within the limits stays within them: the plan, too, has to bring the speed to zero
before the limit with at most that acceleration, and no motion stops in less distance
than constant braking at the limit (``v² / 2a``). Velocities only fall; the acceleration
steps from the plan's to the braking value (the limits bound q, q̇ and q̈, not the jerk).

Windows (:meth:`PlanStream.window`): a ``JointTrajectory`` carries the plan from its
start for ``lookahead`` seconds, then its own stop ramp to rest. A controller with
replace semantics (joint_trajectory_controller) follows the plan as long as new windows
arrive, each replacing the last from its start; when they stop arriving (the node
hung or died), the arm runs at most ``lookahead`` s of plan and then brakes to rest by
itself. Points lie on a grid of ``point_period`` aligned with the plan's time (finer in
fast pieces), plus the window's start, the plan's piece boundaries and the instants each
joint comes to rest, so that consecutive windows share their points (a window that
starts between two points of the last one differs from it there only by the cubic's
interpolation error, nm) and cubic (Hermite) interpolation between points reproduces
the stop ramp exactly (it is quadratic between them). Points carry positions and
velocities; accelerations are given for checks only: a point cannot carry the
acceleration step at the start of a ramp, and a quintic spline through it would
overshoot the limit.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import ConfigError

#: knots closer than this (s) are merged: they must stay distinct after rounding to the
#: nanosecond of a message and at the 2.4e-7 s resolution of node-clock times near 1.8e9 s
_TIME_EPS = 1e-6
#: points at least per ramp, move or period of the highest harmonic of a plan
POINTS_PER_PIECE = 32


@dataclass(frozen=True)
class StopRamp:
    """Constant per-joint braking from (q0, v0) at time t0 to rest.

    Attributes
    ----------
    t0 : float
        Start (s).
    q0, v0 : ndarray, (n,)
        Position (rad) and velocity (rad/s) at t0.
    acceleration : ndarray, (n,)
        Signed braking acceleration of each joint (rad/s², opposite to v0; 0 at rest).
    stop_times : ndarray, (n,)
        Time (s, after t0) at which each joint rests.
    """

    t0: float
    q0: np.ndarray
    v0: np.ndarray
    acceleration: np.ndarray
    stop_times: np.ndarray

    @property
    def duration(self):
        """Until the last joint rests (s)."""
        return float(np.max(self.stop_times)) if self.stop_times.size else 0.0

    @property
    def end_time(self):
        return self.t0 + self.duration

    @property
    def rest_position(self):
        """Where the arm rests (rad), (n,)."""
        return self.q0 + 0.5 * self.v0 * self.stop_times

    def sample(self, t):
        """q, q̇, q̈ at time(s) t (s, >= t0): (n,) each for a scalar, else (N, n) each."""
        scalar = np.ndim(t) == 0
        s = np.atleast_1d(np.asarray(t, dtype=float))[:, None] - self.t0
        s = np.maximum(s, 0.0)
        # node-clock times near 1.8e9 s are 2.4e-7 s apart: a knot placed at a joint's
        # rest instant must sample as at rest
        moving = s < self.stop_times - 8 * np.spacing(max(abs(self.t0), 1.0))
        sc = np.minimum(s, self.stop_times)
        q = self.q0 + self.v0 * sc + 0.5 * self.acceleration * sc ** 2
        dq = np.where(moving, self.v0 + self.acceleration * sc, 0.0)
        ddq = np.where(moving, self.acceleration, 0.0)
        if scalar:
            return q[0], dq[0], ddq[0]
        return q, dq, ddq

    def knots(self, t_from):
        """t_from and every instant after it at which a joint comes to rest (s), sorted."""
        ends = self.t0 + self.stop_times[self.stop_times > 0]
        return _merge(np.concatenate([[t_from], ends[ends > t_from + _TIME_EPS]]))


def braking_accelerations(q, dq, config, stop_acceleration=None):
    """Braking rate (rad/s², >= 0) of each joint for a stop from (q, q̇).

    ``stop_acceleration`` (scalar or (n,); None or <= 0: the acceleration limits) is
    capped at the acceleration limits and raised, up to them, where braking at it would
    carry the joint past its position limit.
    """
    limit = np.asarray(config.acceleration_limits, dtype=float)
    if stop_acceleration is None:
        a = limit.copy()
    else:
        a = np.broadcast_to(np.asarray(stop_acceleration, dtype=float), limit.shape).copy()
        a = np.where(a > 0, np.minimum(a, limit), limit)
    q, dq = np.asarray(q, dtype=float), np.asarray(dq, dtype=float)
    room = np.where(dq > 0, config.position_limits_upper - q, q - config.position_limits_lower)
    with np.errstate(divide='ignore', invalid='ignore'):
        needed = np.where(room > 0, dq ** 2 / (2.0 * room), np.inf)
    return np.where(dq != 0, np.minimum(np.maximum(a, needed), limit), a)


def stop_ramp(t0, q, dq, config, stop_acceleration=None):
    """The stop from (q, q̇) at time t0 (see the module docstring).

    Parameters
    ----------
    t0 : float
        When braking begins (s).
    q, dq : array_like, (n,)
        Commanded position (rad) and velocity (rad/s) at t0.
    config : ArmConfig
        Position and acceleration limits.
    stop_acceleration : float or array_like (n,), optional
        Preferred braking rate (rad/s²); default the acceleration limits.

    Returns
    -------
    StopRamp
    """
    q, dq = np.array(q, dtype=float), np.array(dq, dtype=float)
    a = braking_accelerations(q, dq, config, stop_acceleration)
    with np.errstate(divide='ignore', invalid='ignore'):
        times = np.where(dq != 0, np.abs(dq) / a, 0.0)
    # a joint that would rest within a microsecond (|q̇| < a·1e-6) is at rest already:
    # its rest instant could not be a separate point of a message
    tiny = times < _TIME_EPS
    dq[tiny], times[tiny] = 0.0, 0.0
    return StopRamp(float(t0), q, dq, -np.sign(dq) * a, times)


@dataclass(frozen=True)
class Window:
    """One ``JointTrajectory`` of the stream.

    Attributes
    ----------
    start : float
        Absolute time (s) of the first point (``header.stamp``).
    times : ndarray, (m,)
        ``time_from_start`` of each point (s), the first 0.
    q, dq, ddq : ndarray, (m, n)
        rad, rad/s, rad/s² (ddq: the reference's acceleration just after each point,
        for checks; not sent).
    plan_end : float
        Absolute time (s) after which the window's reference is its stop ramp (the end
        of the look-ahead).
    rest_time : float
        Absolute time (s) from which the window's reference rests.
    """

    start: float
    times: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    plan_end: float
    rest_time: float

    @property
    def absolute_times(self):
        return self.start + self.times


def _time_scale(piece):
    """The time (s) over which a piece's acceleration changes: its duration (a ramp or a
    move), the period of its highest harmonic (Fourier), or inf (constant speed)."""
    if piece.kind == 'fourier':
        return 2.0 * np.pi / (piece.omega * np.atleast_2d(piece.a).shape[1])
    if piece.kind == 'blend' and np.array_equal(piece.v0, piece.v1):
        return np.inf
    return piece.duration


def _merge(times):
    """Sorted times with clusters closer than _TIME_EPS merged into their LAST member (a
    joint's rest instant just after another knot must stay: the window ends at rest)."""
    times = np.unique(np.asarray(times, dtype=float))
    keep = np.concatenate([np.diff(times) > _TIME_EPS, [True]])
    return times[keep]


class PlanStream:
    """What the node commands during a run: the plan, cut short by a stop ramp.

    Parameters
    ----------
    plan : Plan
        The run (approach included), plan time 0 at ``t0``.
    t0 : float
        Absolute start time (s).
    config : ArmConfig
    point_period : float
        Spacing of window points (s), > 0.
    lookahead : float
        Plan time (s) each window carries before its stop ramp, >= point_period.
    stop_acceleration : float or array_like, optional
        Preferred braking rate (rad/s²; default the acceleration limits).
    """

    def __init__(self, plan, t0, config, point_period, lookahead, stop_acceleration=None):
        if not point_period > 0:
            raise ConfigError(f'point period {point_period} s must be > 0')
        if not lookahead >= point_period:
            raise ConfigError(f'look-ahead {lookahead} s must be at least the point period '
                              f'{point_period} s')
        self.plan = plan
        self.t0 = float(t0)
        self.config = config
        self.point_period = float(point_period)
        self.lookahead = float(lookahead)
        self.stop_acceleration = stop_acceleration
        self.end = self.t0 + plan.duration
        self._bounds = np.array([p.t0 for p in plan.pieces] + [plan.duration]) + self.t0
        self._scales = [_time_scale(p) for p in plan.pieces]
        self.tail = None        # the stop ramp of the last window sent
        self.ramp = None        # the stop, once decided

    # time grid --------------------------------------------------------------
    def grid_after(self, t):
        """The first point of the grid at or after t (s); the plan end at most."""
        k = np.ceil((t - self.t0) / self.point_period - 1e-9)
        return float(min(self.t0 + max(k, 0.0) * self.point_period, self.end))

    def _plan_knots(self, t_from, t_to):
        k0 = np.ceil((t_from - self.t0) / self.point_period - 1e-9)
        k1 = np.floor((t_to - self.t0) / self.point_period + 1e-9)
        grid = self.t0 + np.arange(k0, k1 + 1) * self.point_period
        inside = self._bounds[(self._bounds > t_from) & (self._bounds < t_to)]
        parts = [[t_from], grid[(grid > t_from) & (grid < t_to)], inside, [t_to]]
        # a fast piece gets POINTS_PER_PIECE points (on its own grid): the cubic
        # between points then overshoots its peak acceleration by < 0.1 %
        for piece, scale in zip(self.plan.pieces, self._scales):
            a, b = self.t0 + piece.t0, self.t0 + piece.t1
            h = scale / POINTS_PER_PIECE
            if h >= self.point_period or b <= t_from or a >= t_to:
                continue
            k = np.arange(np.ceil((max(a, t_from) - a) / h), np.floor((min(b, t_to) - a) / h) + 1)
            fine = a + k * h
            parts.append(fine[(fine > t_from) & (fine < t_to)])
        return _merge(np.concatenate(parts))

    # the reference ------------------------------------------------------------
    def plan_state(self, t):
        """The plan at absolute time(s) t: q, q̇, q̈."""
        return self.plan.sample(np.asarray(t, dtype=float) - self.t0)

    def reference(self, t):
        """What is commanded at absolute time t (s): the plan, the stop ramp once it has
        begun, or the last window's own ramp after its look-ahead. (n,) each."""
        for ramp in (self.ramp, self.tail):
            if ramp is not None and t >= ramp.t0:
                return ramp.sample(t)
        return self.plan_state(float(t))

    @property
    def stopping(self):
        return self.ramp is not None

    def rest_time(self):
        """Absolute time (s) from which the reference rests for good: the stop's end, or
        the plan's end (or the end of the last window's ramp, if earlier)."""
        if self.ramp is not None:
            return self.ramp.end_time
        if self.tail is not None:
            return self.tail.end_time
        return self.end

    # windows ------------------------------------------------------------------------
    def window(self, t_from):
        """The window from ``t_from`` (s; any time, or a grid point: :meth:`grid_after`).

        Raises
        ------
        ValueError
            If the stream is stopping, or ``t_from`` lies past the look-ahead of the
            last window (the arm is already braking on its ramp: the plan cannot be
            resumed without a jump).
        """
        if self.ramp is not None:
            raise ValueError('the stream is stopping')
        if self.tail is not None and t_from > self.tail.t0 + _TIME_EPS:
            raise ValueError(f'the look-ahead ran out at {self.tail.t0:.3f} s, before '
                             f'{t_from:.3f} s')
        t_to = min(t_from + self.lookahead, self.end)
        knots = self._plan_knots(t_from, t_to)
        q, dq, ddq = self.plan_state(knots)
        ramp = stop_ramp(t_to, q[-1], dq[-1], self.config, self.stop_acceleration)
        rk = ramp.knots(t_to)[1:]
        if not rk.size:
            # at rest within a microsecond: the last point says so exactly
            q, dq = q.copy(), dq.copy()
            q[-1], dq[-1] = ramp.rest_position, 0.0
        else:
            rq, rdq, rddq = ramp.sample(rk)
            ddq = ddq.copy()
            ddq[-1] = ramp.sample(t_to)[2]     # braking from here on
            knots = np.concatenate([knots, rk])
            q, dq, ddq = (np.vstack([a, b]) for a, b in ((q, rq), (dq, rdq), (ddq, rddq)))
        self.tail = ramp
        return Window(float(knots[0]), knots - knots[0], q, dq, ddq, float(t_to),
                      float(ramp.end_time))

    def stop(self, t_stop):
        """Decide to stop from absolute time ``t_stop`` (s): the window that brakes.

        The ramp starts from the reference at ``t_stop``; if that is already on the last
        window's ramp, the stop is that ramp. Calling it again returns the remaining
        part of the first stop.
        """
        if self.ramp is None:
            if self.tail is not None and t_stop >= self.tail.t0:
                self.ramp = self.tail
            else:
                q, dq, _ = self.plan_state(float(t_stop))
                self.ramp = stop_ramp(t_stop, q, dq, self.config, self.stop_acceleration)
        ramp = self.ramp
        t_from = max(float(t_stop), ramp.t0)
        knots = ramp.knots(t_from)
        q, dq, ddq = ramp.sample(knots)
        return Window(float(knots[0]), knots - knots[0], q, dq, ddq, float(ramp.t0),
                      float(ramp.end_time))


def held_time_rate(previous, d_node, d_wall, decay=0.98, low=1.0, high=1000.0):
    """Node-clock seconds per wall second for the look-ahead of a sim-time run, held at
    its peak.

    The rate over the last interval (``d_node`` node-clock s in ``d_wall`` wall s), or
    ``previous`` decayed by ``decay`` per interval, whichever is higher, within
    ``[low, high]``. A simulator that pauses (in lockstep with a busy recorder) and then
    runs on at x4 must not shrink the look-ahead to 1x in between: the windows would run
    out before the next one arrives. An interval without wall time keeps ``previous``.
    """
    if not d_wall > 0 or d_node < 0:
        return previous
    return float(np.clip(max(d_node / d_wall, decay * previous), low, high))
