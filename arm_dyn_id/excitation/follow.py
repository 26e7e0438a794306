"""Follow joint trajectories the way ros2_controllers' joint_trajectory_controller does.

ROS-free: times are floats (s) on the caller's clock, positions are arrays in the
order of the arm's joints.

Interpolation between consecutive points (per segment, from the fields both ends
carry):

- positions, velocities and accelerations: quintic polynomial;
- positions and velocities: cubic (Hermite) polynomial;
- positions only: linear, constant velocity.

Replace semantics: a trajectory that starts at ``start_time`` replaces the rest of
the current one from that time on (trajectories queued to start later are dropped).
At its start the follower samples the trajectory it replaces and interpolates from
that state to the first point (at ``start_time + times[0]``), so a new trajectory
never makes the reference jump unless its first point is due at once
(``time_from_start`` 0 jumps, as in JTC). A trajectory that arrives after its
``start_time`` (``now`` given to :meth:`replace`) starts at once, its points keeping
their times: the arm is not put behind the sender's plan by the delivery delay. Before the
first trajectory and after the last point, the follower holds position (velocity
and acceleration zero). Points already in the past when a trajectory becomes
active are skipped; if all are, the last one is held.
"""

import bisect

import numpy as np


def _poly_coefficients(dt, p0, v0, a0, p1, v1, a1, kind):
    """Coefficients c[0..5] (6, n) of p(s) = sum c_k s^k on s in [0, dt]."""
    c = np.zeros((6,) + p0.shape)
    if kind == 'linear' or dt <= 0:
        c[0] = p0 if dt > 0 else p1
        if dt > 0:
            c[1] = (p1 - p0) / dt
        return c
    if kind == 'cubic':
        c[0], c[1] = p0, v0
        c[2] = (3 * (p1 - p0) / dt - 2 * v0 - v1) / dt
        c[3] = (2 * (p0 - p1) / dt + v0 + v1) / dt ** 2
        return c
    # quintic with boundary positions, velocities and accelerations
    t2, t3, t4, t5 = dt ** 2, dt ** 3, dt ** 4, dt ** 5
    c[0], c[1], c[2] = p0, v0, a0 / 2
    c[3] = (20 * (p1 - p0) - (8 * v1 + 12 * v0) * dt - (3 * a0 - a1) * t2) / (2 * t3)
    c[4] = (30 * (p0 - p1) + (14 * v1 + 16 * v0) * dt + (3 * a0 - 2 * a1) * t2) / (2 * t4)
    c[5] = (12 * (p1 - p0) - 6 * (v1 + v0) * dt - (a0 - a1) * t2) / (2 * t5)
    return c


class _Trajectory:
    """One received trajectory, before and after activation."""

    def __init__(self, start_time, time_base, times, positions, velocities, accelerations,
                 mask):
        self.start_time = float(start_time)   # when it becomes active
        self.time_base = float(time_base)     # its points are due at time_base + times
        self.times = times
        self.positions = positions
        self.velocities = velocities
        self.accelerations = accelerations
        self.mask = mask          # (n,) bool: joints the message commands
        self.knots = None         # absolute knot times after activation
        self.coeffs = None        # (segments, 6, n)
        self.cursor = 0


class JointTrajectoryFollower:
    """Reference generator with joint_trajectory_controller semantics.

    Parameters
    ----------
    initial_positions : array_like, (n,)
        Held (rad) until the first trajectory or command.
    """

    def __init__(self, initial_positions):
        q0 = np.array(initial_positions, dtype=float)
        if q0.ndim != 1 or q0.size == 0 or not np.all(np.isfinite(q0)):
            raise ValueError(f'initial_positions = {q0.tolist()} must be finite, shape (n,)')
        self.n = q0.size
        self._hold_q = q0
        self._zero = np.zeros(self.n)
        self._queue = []          # _Trajectory objects sorted by start_time
        self._active = None

    # commands -----------------------------------------------------------
    def hold(self, positions):
        """Drop every trajectory and hold ``positions`` (rad, (n,)) from now on."""
        q = np.array(positions, dtype=float)
        if q.shape != (self.n,):
            raise ValueError(f'positions has shape {q.shape}, expected ({self.n},)')
        self._hold_q = q
        self._queue.clear()
        self._active = None

    def replace(self, start_time, times, positions, velocities=None, accelerations=None,
                joint_index=None, now=None):
        """Queue a trajectory; it replaces the current one from ``start_time`` (s).

        Parameters
        ----------
        start_time : float
            Absolute time (s) at which the trajectory begins (``header.stamp``).
        times : array_like, (m,)
            ``time_from_start`` of each point (s), strictly increasing, >= 0.
        positions : array_like, (m, k)
            rad; columns in the order of ``joint_index`` (default: all n joints).
        velocities, accelerations : array_like, (m, k), optional
            rad/s, rad/s². Give all points or none.
        joint_index : array_like of int, (k,), optional
            Joint (0..n-1) of each column. Joints not listed hold the position the
            reference has when the trajectory starts.
        now : float, optional
            The caller's time (s) at receipt. A trajectory whose ``start_time`` is
            already past starts at ``now``; its points stay due at ``start_time +
            times`` (those in the past are skipped), as in JTC.

        Raises
        ------
        ValueError
            Shapes, ordering or non-finite values, naming the field.
        """
        times = np.asarray(times, dtype=float).reshape(-1)
        idx = np.arange(self.n) if joint_index is None else np.asarray(joint_index, dtype=int)
        if idx.ndim != 1 or idx.size == 0 or len(set(idx.tolist())) != idx.size or \
                idx.min() < 0 or idx.max() >= self.n:
            raise ValueError(f'joint_index = {idx.tolist()} must list distinct joints '
                             f'0..{self.n - 1}')
        m = times.size
        if m == 0:
            raise ValueError('a trajectory needs at least one point')
        if not np.all(np.isfinite(times)) or times[0] < 0 or np.any(np.diff(times) <= 0):
            raise ValueError(f'time_from_start = {times.tolist()} must be >= 0 and strictly '
                             'increasing')
        fields = []
        for name, arr in (('positions', positions), ('velocities', velocities),
                          ('accelerations', accelerations)):
            if arr is None:
                fields.append(None)
                continue
            arr = np.asarray(arr, dtype=float)
            if arr.shape != (m, idx.size):
                raise ValueError(f'{name} has shape {arr.shape}, expected ({m}, {idx.size})')
            if not np.all(np.isfinite(arr)):
                raise ValueError(f'{name} contains NaN or inf')
            full = np.zeros((m, self.n))
            full[:, idx] = arr
            fields.append(full)
        if fields[0] is None:
            raise ValueError('positions are required')
        if fields[2] is not None and fields[1] is None:
            fields[1] = np.zeros((m, self.n))   # JTC: accelerations imply velocities
        mask = np.zeros(self.n, dtype=bool)
        mask[idx] = True
        begin = float(start_time) if now is None else max(float(start_time), float(now))
        traj = _Trajectory(begin, start_time, times, *fields, mask)
        # replace semantics: everything queued to start at or after it goes
        keep = bisect.bisect_left([t.start_time for t in self._queue], traj.start_time)
        del self._queue[keep:]
        self._queue.append(traj)

    # sampling -------------------------------------------------------------
    def sample(self, t):
        """Reference at time ``t`` (s): (q, dq, ddq), each (n,), new arrays.

        Call with non-decreasing ``t`` (trajectories are activated as time passes).
        """
        while self._queue and self._queue[0].start_time <= t:
            traj = self._queue.pop(0)
            start = traj.start_time
            state = self._sample_active(start) if self._active is not None else \
                (self._hold_q, self._zero, self._zero)
            self._activate(traj, start, state)
        if self._active is None:
            return self._hold_q.copy(), self._zero.copy(), self._zero.copy()
        return self._sample_active(t)

    def _activate(self, traj, start, state):
        q_b, dq_b, ddq_b = (np.array(a, dtype=float) for a in state)
        m = traj.times.size
        abs_times = traj.time_base + traj.times
        pos, vel, acc = traj.positions, traj.velocities, traj.accelerations
        free = ~traj.mask
        pos[:, free] = q_b[free]
        kind = 'quintic' if acc is not None else 'cubic' if vel is not None else 'linear'
        if vel is None:
            vel = np.zeros((m, self.n))
        if acc is None:
            acc = np.zeros((m, self.n))
        knots = [start]
        kp, kv, ka = [q_b], [dq_b], [ddq_b]
        for k in range(m):
            if abs_times[k] < start and k < m - 1:
                continue   # in the past: skipped (the last point is always kept)
            knots.append(max(abs_times[k], start))
            kp.append(pos[k])
            kv.append(vel[k])
            ka.append(acc[k])
        coeffs = []
        for k in range(len(knots) - 1):
            dt = knots[k + 1] - knots[k]
            coeffs.append(_poly_coefficients(dt, kp[k], kv[k], ka[k],
                                             kp[k + 1], kv[k + 1], ka[k + 1], kind))
        traj.knots = np.array(knots)
        traj.coeffs = coeffs
        traj.end_q = kp[-1].copy()
        traj.cursor = 0
        self._active = traj

    def _sample_active(self, t):
        traj = self._active
        knots = traj.knots
        if t >= knots[-1]:
            return traj.end_q.copy(), self._zero.copy(), self._zero.copy()
        k = traj.cursor
        if not (knots[k] <= t < knots[k + 1]):
            k = int(np.searchsorted(knots, t, side='right')) - 1
            k = min(max(k, 0), len(knots) - 2)
            traj.cursor = k
        s = max(t - knots[k], 0.0)
        s2 = s * s
        s3 = s2 * s
        # one small matrix product: rows are the basis of q, dq, ddq at s
        basis = np.array(((1.0, s, s2, s3, s2 * s2, s3 * s2),
                          (0.0, 1.0, 2 * s, 3 * s2, 4 * s3, 5 * s2 * s2),
                          (0.0, 0.0, 2.0, 6 * s, 12 * s2, 20 * s3)))
        out = basis @ traj.coeffs[k]
        return out[0], out[1], out[2]

    def end_time(self):
        """Time (s) of the last point of the newest trajectory, or None when holding."""
        if self._queue:
            last = self._queue[-1]
            return max(last.start_time, last.time_base + float(last.times[-1]))
        if self._active is not None:
            return float(self._active.knots[-1])
        return None
