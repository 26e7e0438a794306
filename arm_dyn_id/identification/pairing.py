"""Forward/backward pairing of reciprocating sweeps (seed 000 eqs. 3-5).

At very low speed ``τ = G(q) + τ_f(q̇)``. When one joint sweeps forward and then
backward over the same path while the others hold still, the two passes visit
the same q with opposite velocity; their mean cancels friction,

    (τ_fwd + τ_bwd) / 2 = G(q),

and half their difference is the friction torque of the moving joint.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError

SWEEP = 'sweep'


@dataclass(frozen=True)
class Sweep:
    """One constant-speed pass of one joint: sample index range and direction."""

    segment_id: int
    joint_index: int
    direction: int
    start: int
    stop: int       # exclusive


@dataclass(frozen=True)
class PairedData:
    """Gravity samples from paired sweeps.

    Attributes
    ----------
    q : ndarray, (M, n)
        Configurations (rad) of the forward pass.
    tau : ndarray, (M, n)
        Friction-free torque (τ_fwd + τ_bwd)/2 (N·m): G(q) plus noise.
    friction : ndarray, (M, n)
        (τ_fwd - τ_bwd)/2 (N·m); meaningful for the moving joint.
    dq : ndarray, (M, n)
        Velocity of the forward pass (rad/s).
    moving_joint : ndarray of int, (M,)
    pair_id : ndarray of int, (M,)
    """

    q: np.ndarray
    tau: np.ndarray
    friction: np.ndarray
    dq: np.ndarray
    moving_joint: np.ndarray
    pair_id: np.ndarray

    @property
    def n_samples(self):
        return self.q.shape[0]


def thinned(paired, rows):
    """``paired`` (:class:`PairedData`) on every k-th averaged sample, the smallest k that
    leaves at most ``rows`` (itself when it holds no more)."""
    stride = -(-len(paired.q) // int(rows))
    if stride <= 1:
        return paired
    return PairedData(**{k: v[::stride] for k, v in vars(paired).items()})


def join_paired(parts):
    """One :class:`PairedData` of several (a fit's held-out and training cases), their
    pairs kept apart (each part's ``pair_id`` shifted past the others')."""
    return PairedData(**{
        key: np.concatenate([np.asarray(getattr(p, key)) +
                             (np.int64(k) << 32 if key == 'pair_id' else 0)
                             for k, p in enumerate(parts)])
        for key in ('q', 'tau', 'friction', 'dq', 'moving_joint', 'pair_id')})


def on_swept_joint(paired, per_joint):
    """(M, n): ``per_joint`` (n,) on each averaged sample's swept joint, zero elsewhere and
    where it is not finite (a gravity model's ``pair_offset`` as torque)."""
    out = np.zeros(np.shape(paired.tau))
    value = np.nan_to_num(np.asarray(per_joint, dtype=float))
    moving = np.asarray(paired.moving_joint, dtype=int)
    rows = np.flatnonzero(moving >= 0)
    out[rows, moving[rows]] = value[moving[rows]]
    return out


def sweeps_from_markers(t, markers):
    """Sample ranges of the sweep phases given segment markers.

    Parameters
    ----------
    t : ndarray, (N,)
        Sample times (s), increasing.
    markers : sequence of dict
        Segment markers (docs/interfaces.md): ``t``, ``phase``, ``segment_id``,
        ``joint_index``, ``direction``; a marker's phase lasts until the next.

    Returns
    -------
    list of Sweep
    """
    markers = sorted(markers, key=lambda m: m['t'])
    sweeps = []
    for k, marker in enumerate(markers):
        if marker.get('phase') != SWEEP:
            continue
        t_end = markers[k + 1]['t'] if k + 1 < len(markers) else np.inf
        start, stop = np.searchsorted(t, [marker['t'], t_end])
        if stop - start >= 2:
            sweeps.append(Sweep(int(marker.get('segment_id', k)), int(marker['joint_index']),
                                int(marker['direction']), int(start), int(stop)))
    return sweeps


def phase_mask(t, markers, phases):
    """Boolean mask of the samples whose segment phase is one of ``phases``, (N,)."""
    markers = sorted(markers, key=lambda m: m['t'])
    mask = np.zeros(len(t), dtype=bool)
    for k, marker in enumerate(markers):
        if marker.get('phase') in phases:
            t_end = markers[k + 1]['t'] if k + 1 < len(markers) else np.inf
            mask |= (t >= marker['t']) & (t < t_end)
    return mask


#: Phases at the plan's low speed (<= 3 °/s), on which a gravity model is validated;
#: transfers between poses ('approach') move faster and carry dynamics.
QUASI_STATIC_PHASES = ('settle', 'sweep', 'reversal')


#: rad: the other joints' positions (medians over each pass) may differ by at most this
#: between the two passes of a pair: they hold one pose while the joint sweeps.
POSE_TOLERANCE = 0.05


#: Samples of a pass (evenly spaced) whose median gives the pose the others hold: they
#: are still, so a few tell it; every sample of an hour at 1 kHz cost 0.4 s per pairing.
POSE_SAMPLES = 64


def _pose(q, sweep):
    step = max(1, (sweep.stop - sweep.start) // POSE_SAMPLES)
    return np.nanmedian(q[sweep.start:sweep.stop:step], axis=0)


def same_pose(q, first, second, tolerance=POSE_TOLERANCE):
    """Do the joints other than the sweeping one hold the same pose in both passes?"""
    j = first.joint_index
    a, b = _pose(q, first), _pose(q, second)
    other = np.arange(q.shape[1]) != j
    # a whole turn apart is the same pose (a continuous joint held near ±π)
    d = np.mod(a[other] - b[other] + np.pi, 2 * np.pi) - np.pi
    return bool(np.all(np.abs(d) <= tolerance))


def pair_sweeps(sweeps, q=None):
    """Pair each forward sweep with the next backward sweep of the same joint.

    Parameters
    ----------
    sweeps : list of Sweep
    q : ndarray, (N, n), optional
        rad. When given, two passes pair only if the other joints hold the same pose in
        both (:data:`POSE_TOLERANCE`): with one sweep lost (not detected through encoder
        noise), its partner paired with the next pose's opposite pass, and the average of
        two poses' torques made the model 13-38 % off (a UR5 at 100 Hz, 5e-4 rad).

    Returns
    -------
    list of (Sweep, Sweep)
    """
    pairs = []
    pending = {}
    q = None if q is None else np.asarray(q, dtype=float)
    for sweep in sweeps:
        key = sweep.joint_index
        if key in pending and pending[key].direction == -sweep.direction and \
                (q is None or same_pose(q, pending[key], sweep)):
            first = pending.pop(key)
            fwd, bwd = (first, sweep) if first.direction > 0 else (sweep, first)
            pairs.append((fwd, bwd))
        else:
            pending[key] = sweep
    return pairs


def _interp_rows(x, xp, fp):
    """Linear interpolation of every column of fp (K, n) at x (M,), xp increasing."""
    idx = np.clip(np.searchsorted(xp, x), 1, len(xp) - 1)
    x0, x1 = xp[idx - 1], xp[idx]
    span = x1 - x0
    w = np.divide(x - x0, span, out=np.zeros_like(x), where=span > 0)
    w = np.clip(w, 0.0, 1.0)[:, None]
    return fp[idx - 1] * (1.0 - w) + fp[idx] * w


def average_pairs(t, q, tau, sweeps, trim=0.02, dq=None):
    """Average forward and backward passes at the same joint angle.

    Parameters
    ----------
    t : ndarray, (N,)
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n)
        Measured joint torque (N·m); NaN rows are ignored.
    sweeps : list of Sweep
    trim : float
        Fraction of each pass's angular range dropped at both ends (transients).
    dq : ndarray, (N, n), optional
        Measured velocity; estimated from q and t if not given, by a central difference
        over the span the encoder noise asks for
        (:func:`arm_dyn_id.data.segmentation.sweep_window`): a plain gradient of q at 1 kHz
        with 1e-4 rad of noise is 0.1 rad/s of noise on a 0.05 rad/s sweep, and the
        friction fitted on it came out 5x too low, with a viscous term of noise.

    Returns
    -------
    PairedData

    Raises
    ------
    DataError
        If no forward/backward pair overlaps.
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    pairs = pair_sweeps(sweeps, q)
    if dq is None:
        from arm_dyn_id.data.segmentation import smoothed_velocity, sweep_window
        window = sweep_window(q)
    # the result is written in place into arrays sized for every forward pass: an hour
    # at 1 kHz averages ~1.3M samples, and stacking per-pair pieces would copy them again
    capacity = sum(fwd.stop - fwd.start for fwd, _ in pairs)
    n = q.shape[1] if q.ndim == 2 else 0
    out = {k: np.empty((capacity, n)) for k in ('q', 'tau', 'friction', 'dq')}
    moving = np.empty(capacity, dtype=np.int64)
    pair = np.empty(capacity, dtype=np.int64)
    filled = 0

    def finite_rows(a, b):
        ok = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
        return slice(None) if ok.all() else ok   # a view, not a copy, when all are finite

    for pair_id, (fwd, bwd) in enumerate(pairs):
        j = fwd.joint_index
        f = slice(fwd.start, fwd.stop)
        b = slice(bwd.start, bwd.stop)
        ok_f = finite_rows(tau[f], q[f])
        ok_b = finite_rows(tau[b], q[b])
        qf, tf = q[f][ok_f], tau[f][ok_f]
        qb, tb = q[b][ok_b], tau[b][ok_b]
        if len(qf) < 2 or len(qb) < 2:
            continue
        lo = max(qf[:, j].min(), qb[:, j].min())
        hi = min(qf[:, j].max(), qb[:, j].max())
        span = hi - lo
        if span <= 0:
            continue
        lo, hi = lo + trim * span, hi - trim * span
        keep = (qf[:, j] >= lo) & (qf[:, j] <= hi)
        m = int(keep.sum())
        if m < 2:
            continue
        # velocity only where it is needed: the forward pass of this pair
        if dq is not None:
            vf = dq[f][ok_f]
        elif len(qf) >= 3:
            vf = smoothed_velocity(t[f][ok_f], qf, window)
        else:
            vf = np.gradient(qf, t[f][ok_f], axis=0)
        order = np.argsort(qb[:, j], kind='stable')
        tb_at_f = _interp_rows(qf[keep, j], qb[order, j], tb[order])
        rows = slice(filled, filled + m)
        out['q'][rows] = qf[keep]
        tk = tf[keep]
        np.add(tk, tb_at_f, out=out['tau'][rows])
        out['tau'][rows] *= 0.5
        np.subtract(tk, tb_at_f, out=out['friction'][rows])
        out['friction'][rows] *= 0.5
        out['dq'][rows] = vf[keep]
        moving[rows] = j
        pair[rows] = pair_id
        filled += m
    if not filled:
        raise DataError('no forward/backward sweep pair overlaps: the data needs each joint to '
                        'sweep forward and then back over the same range (segment markers with '
                        'phase "sweep" and direction +1/-1)')
    return PairedData(q=out['q'][:filled], tau=out['tau'][:filled],
                      friction=out['friction'][:filled], dq=out['dq'][:filled],
                      moving_joint=moving[:filled], pair_id=pair[:filled])


#: Sweeps whose |q̇| spreads by less than this fraction of its mean have a single speed:
#: their friction is fitted as Coulomb only.
SINGLE_SPEED = 0.2


def coulomb_viscous_from_pairs(paired, n_joints):
    """Per-joint Coulomb and viscous friction from the half differences.

    Fits ``friction_j = f_c sign(q̇_j) + f_v q̇_j`` on the samples where joint j
    moves (seed 001 eq. 2), with f_c, f_v ≥ 0 (non-negative least squares). Sweeps
    at a single speed (the spread of |q̇| below :data:`SINGLE_SPEED` of its mean)
    cannot separate the two: unbounded least squares then trades a negative viscous
    coefficient for a larger Coulomb one; the friction is taken as Coulomb only
    (f_v = 0). Joints that never move get NaN.

    Returns
    -------
    coulomb, viscous : ndarray, (n,)
        N·m and N·m·s/rad.
    """
    coulomb = np.full(n_joints, np.nan)
    viscous = np.full(n_joints, np.nan)
    for j in range(n_joints):
        sel = paired.moving_joint == j
        if sel.sum() < 3:
            continue
        v = paired.dq[sel, j]
        f = paired.friction[sel, j]
        ok = np.isfinite(v) & np.isfinite(f)
        v, f = v[ok], f[ok]
        if len(v) < 3:
            continue
        A = np.column_stack([np.sign(v), v])
        speed = np.abs(v)
        if np.linalg.matrix_rank(A) < 2 or \
                speed.std() < SINGLE_SPEED * max(speed.mean(), 1e-300):
            coulomb[j], viscous[j] = max(float(np.linalg.lstsq(A[:, :1], f, rcond=None)[0][0]),
                                         0.0), 0.0
            continue
        scale = np.maximum(np.abs(A).max(axis=0), 1e-300)
        from scipy.optimize import nnls     # here: single-speed sweeps never need it (0.4 s)
        x, _ = nnls(A / scale, f)
        coulomb[j], viscous[j] = x / scale
    return coulomb, viscous
