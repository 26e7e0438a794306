"""Excitation trajectories: reciprocating sweeps (seed 000) and Fourier series (seed 001).

A :class:`Plan` is a sequence of analytic *pieces* (q, q̇, q̈ in closed form at any
time) and a list of :class:`Segment` s that label what happens when (the segment
markers the excitation node publishes, docs/interfaces.md).

Piece kinds (time τ = (t - t0) / T in [0, 1] inside a piece of duration T):

- ``blend``: velocity goes from ``v0`` to ``v1`` along a cycloid,
  ``q̇ = v0 + (v1 - v0)(τ - sin 2πτ / 2π)``, so the acceleration
  ``(v1 - v0)/T · (1 - cos 2πτ)`` starts and ends at zero (peak ``2|v1 - v0|/T``).
  ``v0 = v1`` is constant speed (a sweep), ``v0 = v1 = 0`` a hold (settle).
- ``move``: rest-to-rest motion by ``delta`` along a cycloid,
  ``q = q0 + delta (τ - sin 2πτ / 2π)`` (peak speed ``2|delta|/T``, peak
  acceleration ``2π|delta|/T²``). Transfers between static poses and approaches.
- ``fourier``: finite Fourier series of seed 001 eq. 7 with offset ``q0``.

Reciprocating plan (seed 000 eq. 11; decided here: one joint moves, every other
joint holds its static pose). Joints are visited from the last to the first; each
joint gets one or more static poses, and at each pose the joint runs ``cycles`` times
forward from ``lower`` to ``upper`` and back, at constant speed, with cycloidal
ramps (``reversal`` segments) so that the acceleration stays bounded and continuous.
The forward and backward constant-speed spans cover exactly the same angles, so the
mean of the two cancels friction (seed 000 eq. 5).
"""

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.model import files

TWO_PI = 2.0 * np.pi

#: Defaults of the reciprocating plan (SI units).
DEFAULT_SPEED = np.deg2rad(3.0)          # rad/s, seed 000: ≤ 3 °/s
DEFAULT_SWEEP_RANGE = 1.2                # rad
QUICK_SWEEP_RANGE = 0.5                  # rad
DEFAULT_SETTLE_TIME = 2.0                # s
DEFAULT_RAMP_ACCELERATION = 0.1          # rad/s², peak, at reversals
DEFAULT_TRANSFER_SPEED = 0.5             # rad/s, peak, between poses
DEFAULT_TRANSFER_ACCELERATION = 0.5      # rad/s², peak
DEFAULT_POSITION_MARGIN = 0.05           # rad kept from every position limit
START_TOLERANCE = 0.01                   # rad a measured start may lie outside (clipped)

PHASES = ('start', 'approach', 'settle', 'sweep', 'reversal', 'done', 'stopped')


class PlanLimitError(ConfigError):
    """A plan exceeds a position, velocity or acceleration limit (names joint, time, value)."""


# ---------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Piece:
    """One analytic stretch of a plan (see the module docstring).

    Attributes
    ----------
    kind : {'blend', 'move', 'fourier'}
    t0, duration : float
        Start time and length (s).
    q0 : ndarray, (n,)
        Position at the start (``blend``, ``move``) or Fourier offset q_i0 (rad).
    v0, v1 : ndarray, (n,)
        ``blend`` start and end velocity (rad/s).
    delta : ndarray, (n,)
        ``move`` displacement (rad).
    omega : float
        ``fourier`` base frequency ω_f (rad/s).
    a, b : ndarray, (n, L)
        ``fourier`` coefficients of seed 001 eq. 7 (rad/s).
    """

    kind: str
    t0: float
    duration: float
    q0: np.ndarray
    v0: np.ndarray = None
    v1: np.ndarray = None
    delta: np.ndarray = None
    omega: float = 0.0
    a: np.ndarray = None
    b: np.ndarray = None

    @property
    def t1(self):
        return self.t0 + self.duration

    def evaluate(self, t):
        """q, q̇, q̈ at times t (N,) inside the piece -> three (N, n) arrays."""
        t = np.asarray(t, dtype=float)[:, None] - self.t0
        if self.kind == 'fourier':
            return fourier_series(t[:, 0], self.omega, self.a, self.b, self.q0)
        T = self.duration
        tau = np.clip(t / T, 0.0, 1.0) if T > 0 else np.zeros_like(t)
        s = np.sin(TWO_PI * tau)
        c = np.cos(TWO_PI * tau)
        if self.kind == 'blend':
            dv = self.v1 - self.v0
            q = self.q0 + T * (self.v0 * tau + dv * (tau ** 2 / 2 + (c - 1) / (TWO_PI ** 2)))
            dq = self.v0 + dv * (tau - s / TWO_PI)
            ddq = dv / T * (1 - c) if T > 0 else np.zeros_like(q)
            return q, dq, ddq
        if self.kind == 'move':
            q = self.q0 + self.delta * (tau - s / TWO_PI)
            dq = self.delta / T * (1 - c) if T > 0 else np.zeros_like(q)
            ddq = self.delta * TWO_PI / T ** 2 * s if T > 0 else np.zeros_like(q)
            return q, dq, ddq
        raise ValueError(f'unknown piece kind {self.kind!r}')

    def end_position(self):
        return self.evaluate(np.array([self.t1]))[0][0]

    def to_dict(self):
        out = {'kind': self.kind, 't0': float(self.t0), 'duration': float(self.duration),
               'q0': np.asarray(self.q0).tolist()}
        if self.kind == 'blend':
            out.update(v0=np.asarray(self.v0).tolist(), v1=np.asarray(self.v1).tolist())
        elif self.kind == 'move':
            out.update(delta=np.asarray(self.delta).tolist())
        else:
            out.update(omega=float(self.omega), a=np.asarray(self.a).tolist(),
                       b=np.asarray(self.b).tolist())
        return out

    @classmethod
    def from_dict(cls, d):
        arr = {k: np.asarray(d[k], dtype=float) for k in ('q0', 'v0', 'v1', 'delta', 'a', 'b')
               if d.get(k) is not None}
        return cls(kind=str(d['kind']), t0=float(d['t0']), duration=float(d['duration']),
                   omega=float(d.get('omega', 0.0)), **arr)


def fourier_series(t, omega, a, b, q0):
    """Finite Fourier series of seed 001 eq. 7.

    Parameters
    ----------
    t : ndarray, (N,)
        Time (s).
    omega : float
        Base frequency ω_f (rad/s).
    a, b : ndarray, (n, L)
        Coefficients a_l^i, b_l^i (rad/s).
    q0 : ndarray, (n,)
        Offsets q_i0 (rad).

    Returns
    -------
    q, dq, ddq : ndarray, (N, n) each
        rad, rad/s, rad/s².
    """
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    ell = np.arange(1, a.shape[1] + 1)
    phase = np.asarray(t, dtype=float)[:, None] * omega * ell[None, :]     # (N, L)
    s, c = np.sin(phase), np.cos(phase)
    q = (s @ (a / (omega * ell)).T) - (c @ (b / (omega * ell)).T) + q0
    dq = c @ a.T + s @ b.T
    ddq = -(s @ (a * omega * ell).T) + c @ (b * omega * ell).T
    return q, dq, ddq


def rest_fourier_coefficients(a, b):
    """Make a Fourier trajectory start and end (after whole periods) at rest.

    Sets the first harmonic so that q̇(0) = Σ a_l = 0 and q̈(0) = ω Σ l b_l = 0;
    the plan can then begin and end with a smooth stop. (n, L) -> (n, L) each.
    """
    a, b = np.array(a, dtype=float), np.array(b, dtype=float)
    ell = np.arange(1, a.shape[1] + 1)
    a[:, 0] = -a[:, 1:].sum(axis=1)
    b[:, 0] = -(b[:, 1:] * ell[1:]).sum(axis=1)
    return a, b


# ---------------------------------------------------------------------------
# segments and plans
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """A labelled stretch of a plan: what the segment markers announce.

    ``joint`` is None and ``joint_index`` -1 when no single joint is the subject
    (Fourier motion). ``pose_index`` numbers the static poses of a reciprocating plan
    (forward and backward sweeps of one pose share it), -1 otherwise.
    """

    segment_id: int
    joint: str
    joint_index: int
    direction: int
    phase: str
    t_start: float
    t_end: float
    pose_index: int = -1

    def marker(self, t):
        """The marker dict (docs/interfaces.md) for this segment beginning at node time t."""
        return {'segment_id': int(self.segment_id), 'joint': self.joint,
                'joint_index': int(self.joint_index), 'direction': int(self.direction),
                'phase': self.phase, 't': float(t), 'pose_index': int(self.pose_index)}

    def to_dict(self):
        return {'segment_id': int(self.segment_id), 'joint': self.joint,
                'joint_index': int(self.joint_index), 'direction': int(self.direction),
                'phase': self.phase, 't_start': float(self.t_start),
                't_end': float(self.t_end), 'pose_index': int(self.pose_index)}

    @classmethod
    def from_dict(cls, d):
        return cls(segment_id=int(d['segment_id']), joint=d.get('joint'),
                   joint_index=int(d.get('joint_index', -1)),
                   direction=int(d.get('direction', 0)), phase=str(d['phase']),
                   t_start=float(d['t_start']), t_end=float(d['t_end']),
                   pose_index=int(d.get('pose_index', -1)))


@dataclass(frozen=True)
class Plan:
    """An excitation plan: analytic pieces plus labelled segments.

    Attributes
    ----------
    name : str
    kind : {'reciprocating', 'fourier'}
    joints : tuple of str
        Order of every per-joint array.
    pieces : tuple of Piece
        Contiguous, starting at t = 0.
    segments : tuple of Segment
    poses : ndarray, (P, n)
        Static poses (reciprocating; the sweeping joint's entry is its sweep centre).
    info : dict
        Design data: criteria (``range_objective``, ``condition_number``),
        ``min_clearance`` (m), speeds, the optimiser's report.
    """

    name: str
    kind: str
    joints: tuple
    pieces: tuple
    segments: tuple
    poses: np.ndarray = None
    info: dict = field(default_factory=dict, compare=False)

    @property
    def n_joints(self):
        return len(self.joints)

    @property
    def duration(self):
        """Total length (s)."""
        return float(self.pieces[-1].t1) if self.pieces else 0.0

    @property
    def top_harmonic_hz(self):
        """The highest harmonic of the plan's Fourier pieces, L ω_f / 2π (Hz; seed 001
        eq. 7), or None for a plan without one: the band a fit of its recording needs."""
        tops = [p.omega * np.atleast_2d(p.a).shape[1] / (2 * np.pi)
                for p in self.pieces if p.kind == 'fourier' and p.a is not None]
        return float(max(tops)) if tops else None

    @property
    def start_position(self):
        return self.sample(0.0)[0]

    @property
    def end_position(self):
        return self.sample(self.duration)[0]

    def sample(self, t):
        """q, q̇, q̈ at time(s) t (s from the plan start).

        Before the start the plan holds its first position, after the end its last
        (zero velocity and acceleration).

        Parameters
        ----------
        t : float or ndarray, (N,)

        Returns
        -------
        q, dq, ddq : ndarray, (n,) each for scalar t, else (N, n) each
        """
        scalar = np.ndim(t) == 0
        t = np.atleast_1d(np.asarray(t, dtype=float))
        starts = np.array([p.t0 for p in self.pieces])
        tc = np.clip(t, 0.0, self.duration)
        idx = np.clip(np.searchsorted(starts, tc, side='right') - 1, 0, len(self.pieces) - 1)
        n = self.n_joints
        q, dq, ddq = (np.empty((t.size, n)) for _ in range(3))
        for k in np.unique(idx):
            sel = idx == k
            q[sel], dq[sel], ddq[sel] = self.pieces[k].evaluate(tc[sel])
        outside = (t < 0.0) | (t > self.duration)
        dq[outside] = 0.0
        ddq[outside] = 0.0
        if scalar:
            return q[0], dq[0], ddq[0]
        return q, dq, ddq

    def times(self, dt):
        """Sample times every ``dt`` s plus every piece boundary, sorted, (N,)."""
        t = np.arange(0.0, self.duration, dt)
        bounds = [p.t0 for p in self.pieces] + [self.duration]
        return np.unique(np.concatenate([t, bounds]))

    def segment_at(self, t):
        """The segment running at time t (s), or None outside the plan."""
        for seg in self.segments:
            if seg.t_start <= t < seg.t_end:
                return seg
        return None

    def shifted(self, dt):
        """The same plan delayed by dt seconds (pieces and segments)."""
        pieces = tuple(replace(p, t0=p.t0 + dt) for p in self.pieces)
        segments = tuple(replace(s, t_start=s.t_start + dt, t_end=s.t_end + dt)
                         for s in self.segments)
        return replace(self, pieces=pieces, segments=segments)

    def with_approach(self, q_from, config, speed=DEFAULT_TRANSFER_SPEED,
                      acceleration=DEFAULT_TRANSFER_ACCELERATION, tolerance=START_TOLERANCE):
        """This plan preceded by a slow rest-to-rest approach from ``q_from``.

        The approach is segment ``approach`` (id -1); velocity and acceleration are
        bounded by ``speed``/``acceleration`` and by the config's limits.

        Raises
        ------
        PlanLimitError
            If ``q_from`` lies outside the position limits by more than ``tolerance``.
        """
        q_from = np.asarray(q_from, dtype=float)
        lower, upper = config.position_limits_lower, config.position_limits_upper
        out = np.flatnonzero((q_from < lower - tolerance) | (q_from > upper + tolerance))
        if out.size:
            i = int(out[0])
            raise PlanLimitError(
                f'measured position of {config.joints[i]} = {q_from[i]:.4f} rad is outside its '
                f'limits [{lower[i]}, {upper[i]}]; move it inside by hand first')
        q_from = np.clip(q_from, lower, upper)
        move = transfer_piece(q_from, self.start_position, 0.0, config, speed, acceleration)
        body = self.shifted(move.duration)
        seg = Segment(-1, None, -1, 0, 'approach', 0.0, move.duration)
        return replace(body, pieces=(move,) + body.pieces, segments=(seg,) + body.segments,
                       info=dict(self.info, approach_duration=move.duration))

    # serialisation -------------------------------------------------------
    def to_dict(self):
        return {
            'name': self.name, 'kind': self.kind, 'joints': list(self.joints),
            'duration': self.duration,
            'info': files.plain(self.info),
            'poses': None if self.poses is None else np.asarray(self.poses).tolist(),
            'segments': [s.to_dict() for s in self.segments],
            'pieces': [p.to_dict() for p in self.pieces],
        }

    @classmethod
    def from_dict(cls, d):
        try:
            return cls(name=str(d.get('name', 'plan')), kind=str(d['kind']),
                       joints=tuple(d['joints']),
                       pieces=tuple(Piece.from_dict(p) for p in d['pieces']),
                       segments=tuple(Segment.from_dict(s) for s in d['segments']),
                       poses=None if d.get('poses') is None else np.asarray(d['poses'], float),
                       info=dict(d.get('info') or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f'plan is malformed: {exc!r}') from exc

    def to_yaml(self, path=None):
        """YAML text of the plan; also written to ``path`` when given."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_yaml(cls, source):
        """Read a plan from a YAML file path or YAML text.

        Raises
        ------
        ConfigError
            If the file is missing or the plan malformed.
        """
        text = str(source)
        if '\n' not in text and not text.lstrip().startswith('{'):
            path = Path(text)
            if not path.is_file():
                raise ConfigError(f'plan file {path} does not exist')
            text = path.read_text()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f'plan is not valid YAML: {exc}') from exc
        if not isinstance(data, dict):
            raise ConfigError('plan YAML must be a mapping with pieces and segments')
        plan = cls.from_dict(data)
        if not plan.pieces:
            raise ConfigError('plan has no pieces')
        return plan


# ---------------------------------------------------------------------------
# limits
# ---------------------------------------------------------------------------
def check_limits(plan, config, dt=None, tolerance=1e-9):
    """Check a plan against the config's position, velocity and acceleration limits.

    Parameters
    ----------
    plan : Plan
    config : ArmConfig
    dt : float, optional
        Sampling step (s); default: fine enough for the plan's fastest piece.
    tolerance : float
        Relative slack on velocity/acceleration, absolute (rad) on positions.

    Returns
    -------
    dict
        Peak |q̇|/limit and |q̈|/limit ratios (``velocity_ratio``, ``acceleration_ratio``).

    Raises
    ------
    PlanLimitError
        Naming the joint, the sample time and the value.
    ConfigError
        If the plan's joints differ from the config's.
    """
    if tuple(plan.joints) != tuple(config.joints):
        raise ConfigError(f'plan joints {list(plan.joints)} differ from the config joints '
                          f'{list(config.joints)}')
    if dt is None:
        shortest = min((p.duration for p in plan.pieces if p.duration > 0), default=1.0)
        fastest = max((p.omega * p.a.shape[1] for p in plan.pieces if p.kind == 'fourier'),
                      default=0.0)
        dt = min(0.05, shortest / 20.0, (TWO_PI / fastest / 40.0) if fastest else 0.05)
        dt = max(dt, plan.duration / 2e6)
    t = plan.times(dt)
    peaks = {'velocity_ratio': 0.0, 'acceleration_ratio': 0.0}
    for lo in range(0, t.size, 100000):
        tt = t[lo:lo + 100000]
        q, dq, ddq = plan.sample(tt)
        _check_arrays(tt, q, dq, ddq, config, tolerance)
        peaks['velocity_ratio'] = max(peaks['velocity_ratio'],
                                      float(np.max(np.abs(dq) / config.velocity_limits)))
        peaks['acceleration_ratio'] = max(peaks['acceleration_ratio'],
                                          float(np.max(np.abs(ddq) / config.acceleration_limits)))
    return peaks


def _check_arrays(t, q, dq, ddq, config, tolerance):
    checks = (
        ('position', q, config.position_limits_lower - tolerance,
         config.position_limits_upper + tolerance, 'rad'),
        ('velocity', dq, -config.velocity_limits * (1 + tolerance),
         config.velocity_limits * (1 + tolerance), 'rad/s'),
        ('acceleration', ddq, -config.acceleration_limits * (1 + tolerance),
         config.acceleration_limits * (1 + tolerance), 'rad/s²'),
    )
    for what, x, lo, hi, unit in checks:
        if not np.all(np.isfinite(x)):
            k, i = np.argwhere(~np.isfinite(x))[0]
            raise PlanLimitError(f'plan {what} of {config.joints[i]} at t = {t[k]:.3f} s is '
                                 f'{x[k, i]}')
        bad = (x < lo) | (x > hi)
        if bad.any():
            k, i = np.argwhere(bad)[0]
            raise PlanLimitError(
                f'plan {what} of {config.joints[i]} at t = {t[k]:.3f} s is {x[k, i]:.6g} {unit}, '
                f'outside the limits [{lo[i]:.6g}, {hi[i]:.6g}] {unit}')


def check_point(q, dq, ddq, config, tolerance=1e-6, t=None):
    """Check command points against the limits (the node's last check).

    Parameters
    ----------
    q, dq, ddq : ndarray, (n,) for one point or (N, n) for several
    t : ndarray, (N,), optional
        Their times, named in the message.

    Returns
    -------
    str or None
        None when every point is within every limit, else what is wrong.
    """
    q, dq, ddq = np.atleast_2d(q), np.atleast_2d(dq), np.atleast_2d(ddq)
    t = np.zeros(len(q)) if t is None else np.asarray(t, dtype=float)
    try:
        _check_arrays(t, q, dq, ddq, config, tolerance)
    except PlanLimitError as exc:
        return str(exc).replace('plan ', 'command ', 1)
    return None


# ---------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------
def transfer_piece(q_from, q_to, t0, config, speed=DEFAULT_TRANSFER_SPEED,
                   acceleration=DEFAULT_TRANSFER_ACCELERATION, min_duration=0.5):
    """Rest-to-rest cycloidal move whose peak speed and acceleration respect the
    limits: per joint ``2|Δ|/T ≤ min(speed, v_max)`` and ``2π|Δ|/T² ≤ min(acc, a_max)``."""
    q_from, q_to = np.asarray(q_from, float), np.asarray(q_to, float)
    delta = q_to - q_from
    v = np.minimum(speed, config.velocity_limits)
    a = np.minimum(acceleration, config.acceleration_limits)
    dist = np.abs(delta)
    duration = max(min_duration, float(np.max(2 * dist / v)),
                   float(np.max(np.sqrt(TWO_PI * dist / a))))
    return Piece('move', t0, duration, q_from, delta=delta)


@dataclass(frozen=True)
class Sweep:
    """One static pose of a reciprocating plan: ``joint_index`` sweeps between
    ``lower`` and ``upper`` (rad) while the others hold ``pose`` (n,)."""

    joint_index: int
    pose: np.ndarray
    lower: float
    upper: float

    def start(self):
        q = np.array(self.pose, dtype=float)
        q[self.joint_index] = self.lower
        return q

    def samples(self, count):
        """``count`` configurations evenly along the sweep, (count, n)."""
        q = np.repeat(self.start()[None, :], count, axis=0)
        q[:, self.joint_index] = np.linspace(self.lower, self.upper, count)
        return q


def sweep_limits(config, joint_index, sweep_range, margin=DEFAULT_POSITION_MARGIN):
    """Allowed (lowest centre, highest centre, half range) of a sweep of one joint (rad)."""
    lo = config.position_limits_lower[joint_index] + margin
    hi = config.position_limits_upper[joint_index] - margin
    half = min(sweep_range, hi - lo) / 2.0
    if half <= 0:
        raise ConfigError(f'joint {config.joints[joint_index]} has no room to sweep: limits '
                          f'[{config.position_limits_lower[joint_index]}, '
                          f'{config.position_limits_upper[joint_index]}] with margin {margin} rad')
    return lo + half, hi - half, half


def pose_bounds(config, margin=DEFAULT_POSITION_MARGIN):
    """Range (lower, upper), (n,) each, of a static joint angle: the limits minus
    ``margin``, or the middle of the limits for a joint narrower than twice the margin."""
    lower = config.position_limits_lower + margin
    upper = config.position_limits_upper - margin
    middle = (config.position_limits_lower + config.position_limits_upper) / 2.0
    narrow = lower > upper
    return np.where(narrow, middle, lower), np.where(narrow, middle, upper)


def make_sweeps(config, spec, sweep_range, margin=DEFAULT_POSITION_MARGIN):
    """Build :class:`Sweep` s from ``(joint_index, pose)`` pairs, with the sweep centred on
    ``pose[joint_index]`` (clipped so the sweep stays inside the limits) and the other
    entries clipped to :func:`pose_bounds`."""
    sweeps = []
    lower, upper = pose_bounds(config, margin)
    for j, pose in spec:
        pose = np.clip(np.asarray(pose, dtype=float), lower, upper)
        c_lo, c_hi, half = sweep_limits(config, j, sweep_range, margin)
        centre = float(np.clip(pose[j], c_lo, c_hi))
        pose[j] = centre
        sweeps.append(Sweep(int(j), pose, centre - half, centre + half))
    return sweeps


def default_poses(config, poses_per_joint=2, joint_order=None, checker=None,
                  sweep_range=DEFAULT_SWEEP_RANGE, margin=DEFAULT_POSITION_MARGIN):
    """Unoptimised static poses: for pose k of P, every joint (and the sweep centre) at
    fraction (k+1)/(P+1) of its range. With a ``checker``, a pose whose sweep collides is
    replaced by the next fraction of 0.5, 0.4, 0.6, 0.3, 0.7, ... that is free, and
    when none is, by a seeded random free pose.

    Returns
    -------
    list of (joint_index, ndarray (n,))
    """
    n = config.n_joints
    order = list(range(n - 1, -1, -1)) if joint_order is None else list(joint_order)
    lo, hi = config.position_limits_lower, config.position_limits_upper
    fallback = [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.1, 0.9]
    spec = []
    for j in order:
        used = []
        for k in range(poses_per_joint):
            for frac in [(k + 1) / (poses_per_joint + 1)] + fallback:
                if any(abs(frac - u) < 1e-9 for u in used):
                    continue
                pose = lo + frac * (hi - lo)
                if checker is None:
                    break
                sw = make_sweeps(config, [(j, pose)], sweep_range, margin)[0]
                if checker.clearance(sw.samples(9)).min() > checker.min_clearance + 0.01:
                    break
            else:
                # no shared fraction is free: a seeded random free pose
                rng = np.random.default_rng(1000 * j + k)
                pose = random_feasible_poses(config, [j], 1, rng, checker, sweep_range,
                                             margin)[0][1]
            used.append(frac)
            spec.append((j, pose))
    return spec


def reciprocating_plan(robot=None, config=None, poses=None, speed=DEFAULT_SPEED,
                       sweep_range=None, settle_time=None, cycles=1,
                       poses_per_joint=None, joint_order=None,
                       ramp_acceleration=DEFAULT_RAMP_ACCELERATION,
                       transfer_speed=DEFAULT_TRANSFER_SPEED,
                       transfer_acceleration=DEFAULT_TRANSFER_ACCELERATION,
                       margin=DEFAULT_POSITION_MARGIN, quick=False, name='identification',
                       checker=None):
    """Reciprocating constant-speed plan (seed 000 eq. 11).

    Parameters
    ----------
    robot : RobotModel, optional
        When given, the design criteria (range objective of seed 000 eq. 12 and the
        condition number of the stacked gravity base regressor) go into ``plan.info``.
    config : ArmConfig
        Joint names and limits.
    poses : list of (joint_index, ndarray (n,)) or list of Sweep, optional
        Static poses in the order they are visited; the sweeping joint's entry is the
        sweep centre. Default :func:`default_poses` (last joint to first).
    speed : float
        Constant sweep speed (rad/s), default 3 °/s.
    sweep_range : float
        Angle swept per pose (rad), clipped to each joint's limits minus ``margin``;
        default 1.2 rad (0.5 with ``quick``).
    settle_time : float
        Hold (s) before each pose's first sweep; default 2 s (1 s with ``quick``).
    cycles : int
        Forward + backward pairs per pose.
    poses_per_joint : int
        Poses per joint when ``poses`` is None (default 2, 1 with ``quick``).
    ramp_acceleration : float
        Peak acceleration (rad/s²) of the cycloidal ramps at reversals.
    transfer_speed, transfer_acceleration : float
        Peak speed (rad/s) and acceleration (rad/s²) of moves between poses.
    quick : bool
        Short plan (≈ 3 min at 3 °/s for six joints).
    checker : ClearanceChecker, optional
        Record the minimum clearance in ``plan.info`` (raises CollisionError below ε).

    Returns
    -------
    Plan

    Raises
    ------
    ConfigError
        If the speed exceeds a velocity limit or the ramps an acceleration limit.
    """
    if config is None:
        raise ConfigError('reciprocating_plan needs an ArmConfig (limits and joint names)')
    n = config.n_joints
    if sweep_range is None:
        sweep_range = QUICK_SWEEP_RANGE if quick else DEFAULT_SWEEP_RANGE
    if poses_per_joint is None:
        poses_per_joint = 1 if quick else 2
    if settle_time is None:
        settle_time = DEFAULT_SETTLE_TIME / 2 if quick else DEFAULT_SETTLE_TIME
    if not (speed > 0 and np.isfinite(speed)):
        raise ConfigError(f'sweep speed {speed} rad/s must be > 0')
    if cycles < 1:
        raise ConfigError(f'cycles = {cycles} must be >= 1')
    if poses is None:
        poses = default_poses(config, poses_per_joint, joint_order, checker, sweep_range, margin)
    sweeps = [p if isinstance(p, Sweep) else None for p in poses]
    if any(s is None for s in sweeps):
        sweeps = make_sweeps(config, poses, sweep_range, margin)
    pieces, segments = [], []
    t = 0.0
    q_prev = None
    zero = np.zeros(n)

    def add_segment(joint_index, direction, phase, t0, t1, pose_index):
        joint = config.joints[joint_index] if joint_index >= 0 else None
        segments.append(Segment(len(segments), joint, joint_index, direction, phase, t0, t1,
                                pose_index))

    for k, sw in enumerate(sweeps):
        j = sw.joint_index
        if speed > config.velocity_limits[j]:
            raise ConfigError(f'parameter speed = {speed} rad/s (the sweep speed) exceeds the '
                              f'velocity limit of {config.joints[j]} '
                              f'(velocity_limits[{j}] = {config.velocity_limits[j]} rad/s)')
        acc = min(ramp_acceleration, config.acceleration_limits[j])
        ramp_t = 2.0 * speed / acc                    # cycloid: peak acc = 2 v / T
        ramp_d = speed * ramp_t / 2.0
        span = sw.upper - sw.lower - 2 * ramp_d
        if span <= 0:
            width = sw.upper - sw.lower
            # a sweep narrower than sweep_range is held by the joint's limits (less the
            # margin): a larger sweep_range cannot widen it
            room = (f'raise sweep_range (now {sweep_range:.4g} rad)'
                    if width >= sweep_range - 1e-9 else
                    f'not sweep_range: its limits [{config.position_limits_lower[j]:.4g}, '
                    f'{config.position_limits_upper[j]:.4g}] rad less the margin {margin:g} '
                    'rad leave no wider sweep')
            ramps = ('lower the speed or raise ramp_acceleration'
                     if ramp_acceleration < config.acceleration_limits[j] else
                     f'lower the speed (the ramps already use {config.joints[j]}\'s '
                     f'acceleration limit, {config.acceleration_limits[j]:.4g} rad/s²)')
            raise ConfigError(f'sweep of {config.joints[j]} over {width:.4f} rad is too short '
                              f'for ramps of {ramp_d:.4f} rad at each end; {ramps}, or {room}')
        start = sw.start()
        if q_prev is not None and np.max(np.abs(start - q_prev)) > 1e-12:
            move = transfer_piece(q_prev, start, t, config, transfer_speed, transfer_acceleration)
            pieces.append(move)
            add_segment(j, 0, 'approach', t, move.t1, k)
            t = move.t1
        if settle_time > 0:
            pieces.append(Piece('blend', t, settle_time, start, v0=zero, v1=zero))
            add_segment(j, 0, 'settle', t, t + settle_time, k)
            t += settle_time
        e = np.zeros(n)
        e[j] = 1.0
        q = start.copy()
        const_t = span / speed
        for cycle in range(cycles):
            for direction in (1, -1):
                first = cycle == 0 and direction == 1
                v_from = zero if first else -direction * speed * e
                v_to = direction * speed * e
                # ramp up (from rest) or the turn (from the opposite direction)
                ramp_len = ramp_t if first else 2 * ramp_t
                piece = Piece('blend', t, ramp_len, q, v0=v_from, v1=v_to)
                pieces.append(piece)
                add_segment(j, 0, 'reversal', t, piece.t1, k)
                t, q = piece.t1, piece.end_position()
                piece = Piece('blend', t, const_t, q, v0=v_to, v1=v_to)
                pieces.append(piece)
                add_segment(j, direction, 'sweep', t, piece.t1, k)
                t, q = piece.t1, piece.end_position()
        piece = Piece('blend', t, ramp_t, q, v0=-speed * e, v1=zero)
        pieces.append(piece)
        add_segment(j, 0, 'reversal', t, piece.t1, k)
        t, q_prev = piece.t1, piece.end_position()
    # a final hold lets the last sweep's data end at rest
    hold = max(settle_time, 0.5)
    pieces.append(Piece('blend', t, hold, q_prev, v0=zero, v1=zero))
    last_j = sweeps[-1].joint_index
    add_segment(last_j, 0, 'settle', t, t + hold, len(sweeps) - 1)
    plan = Plan(name=name, kind='reciprocating', joints=tuple(config.joints),
                pieces=tuple(pieces), segments=tuple(segments),
                poses=np.array([s.pose for s in sweeps]),
                info={'speed': float(speed), 'sweep_range': float(sweep_range),
                      'settle_time': float(settle_time), 'cycles': int(cycles),
                      'ramp_acceleration': float(ramp_acceleration),
                      'sweeps': [{'joint': config.joints[s.joint_index],
                                  'joint_index': s.joint_index, 'lower': float(s.lower),
                                  'upper': float(s.upper)} for s in sweeps]})
    if robot is not None:
        plan.info.update(gravity_criteria(robot, plan))
    if checker is not None:
        plan.info['min_clearance'] = plan_clearance(plan, checker)
    return plan


def plan_clearance(plan, checker, max_step=0.02):
    """Minimum clearance (m) over the plan, checked so that no joint moves more than
    ``max_step`` rad between samples; raises CollisionError below ε."""
    t = plan.times(max(plan.duration / 2e5, 1e-3))
    q = plan.sample(t)[0]
    # thin out: keep a sample whenever some joint moved max_step since the last kept
    keep = [0]
    for k in range(1, len(q)):
        if np.max(np.abs(q[k] - q[keep[-1]])) >= max_step or k == len(q) - 1:
            keep.append(k)
    keep = np.array(keep)
    return checker.check(q[keep], t[keep], what=f'plan {plan.name!r}')


def gravity_criteria(robot, plan_or_q, base=None):
    """Both design criteria of a set of configurations.

    Parameters
    ----------
    robot : RobotModel
    plan_or_q : Plan or ndarray (N, n)
        For a plan, the constant-speed sweep samples are used.
    base : BaseParameters, optional
        Gravity base parameters (computed when not given).

    Returns
    -------
    dict
        ``range_objective``: Q of seed 000 eq. 12, the sum over entries of the stacked
        gravity base regressor (divided by g, so in m and 1) of max - min over the
        samples; ``condition_number``: of the stacked base regressor.
    """
    from arm_dyn_id.model.base_parameters import condition_number, gravity_base_parameters
    if base is None:
        base = gravity_base_parameters(robot)
    if isinstance(plan_or_q, Plan):
        plan = plan_or_q
        ts = [np.linspace(s.t_start, s.t_end, 20) for s in plan.segments if s.phase == 'sweep']
        q = plan.sample(np.concatenate(ts))[0] if ts else plan.sample(plan.times(1.0))[0]
    else:
        q = np.atleast_2d(plan_or_q)
    Y = base.reduce(robot.gravity_regressor(q)) / robot.gravity_magnitude
    return {'range_objective': float(np.sum(Y.max(axis=0) - Y.min(axis=0))),
            'condition_number': condition_number(Y)}


def random_feasible_poses(config, joint_order, poses_per_joint, rng, checker=None,
                          sweep_range=DEFAULT_SWEEP_RANGE, margin=DEFAULT_POSITION_MARGIN,
                          tries=200):
    """Random static poses (uniform within the limits), each sweep collision-free."""
    lo, hi = pose_bounds(config, margin)
    spec = []
    for j in joint_order:
        for _ in range(poses_per_joint):
            for _ in range(tries):
                pose = rng.uniform(lo, hi)
                sw = make_sweeps(config, [(j, pose)], sweep_range, margin)[0]
                if checker is None or checker.clearance(sw.samples(9)).min() > \
                        checker.min_clearance + 0.01:
                    break
            else:
                raise ConfigError(f'no collision-free pose found for a sweep of '
                                  f'{config.joints[j]} in {tries} tries')
            spec.append((j, sw.pose))
    return spec


def validation_plan(robot, config, seed=1, speed=DEFAULT_SPEED, sweep_range=None, quick=False,
                    checker=None, **kwargs):
    """A held-out reciprocating plan: one random collision-free pose per joint (seeded),
    different from the identification poses."""
    rng = np.random.default_rng(seed)
    if sweep_range is None:
        sweep_range = QUICK_SWEEP_RANGE if quick else 0.8
    if checker is None:
        from arm_dyn_id.excitation.collision import ClearanceChecker
        checker = ClearanceChecker.from_config(config)
    order = list(range(config.n_joints - 1, -1, -1))
    spec = random_feasible_poses(config, order, 1, rng, checker, sweep_range)
    return reciprocating_plan(robot, config, poses=spec, speed=speed, sweep_range=sweep_range,
                              name='validation', checker=checker, **kwargs)


def fourier_plan(config, a, b, q0, omega, periods=1, name='fourier'):
    """Fourier plan (seed 001 eq. 7) over whole periods.

    Parameters
    ----------
    config : ArmConfig
    a, b : ndarray, (n, L)
        Coefficients (rad/s); use :func:`rest_fourier_coefficients` to start and end
        at rest.
    q0 : ndarray, (n,)
        Offsets (rad).
    omega : float
        Base frequency ω_f (rad/s).
    periods : int
        Number of periods 2π/ω_f.

    Returns
    -------
    Plan
        One ``fourier`` piece; one segment ``sweep`` (joint None, direction 0) per period.
    """
    a, b = np.atleast_2d(np.asarray(a, float)), np.atleast_2d(np.asarray(b, float))
    q0 = np.asarray(q0, dtype=float)
    n = config.n_joints
    if a.shape != b.shape or a.shape[0] != n or q0.shape != (n,):
        raise ConfigError(f'Fourier coefficients have shapes a {a.shape}, b {b.shape}, q0 '
                          f'{q0.shape}; expected ({n}, L) and ({n},)')
    if not omega > 0:
        raise ConfigError(f'Fourier base frequency {omega} rad/s must be > 0')
    ell = np.arange(1, a.shape[1] + 1)
    if np.max(np.abs(a.sum(axis=1))) > 1e-9 or np.max(np.abs((b * ell).sum(axis=1))) > 1e-9:
        raise ConfigError('Fourier coefficients do not start at rest (sum of a_l and of l*b_l '
                          'must be 0 per joint); pass them through rest_fourier_coefficients')
    period = TWO_PI / omega
    piece = Piece('fourier', 0.0, periods * period, q0, omega=float(omega), a=a, b=b)
    segments = tuple(Segment(k, None, -1, 0, 'sweep', k * period, (k + 1) * period, k)
                     for k in range(periods))
    return Plan(name=name, kind='fourier', joints=tuple(config.joints), pieces=(piece,),
                segments=segments, info={'harmonics': a.shape[1], 'omega': float(omega),
                                         'periods': int(periods)})
