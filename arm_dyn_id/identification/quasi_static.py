"""Gravity from the quasi-static parts of any recording (no reciprocating sweeps needed).

Where a recording holds no forward/backward sweep pairs (hand-made slow moves,
static poses, a mixed run), the gravity base parameters are fitted from the
samples where the arm barely moves, so that τ ≈ G(q) + friction:

1. quasi-static samples: every joint under ``max_speed`` and ``max_acceleration``
   (:func:`arm_dyn_id.data.segmentation.quasi_static_mask`, q̇ and q̈ from a
   zero-phase filtered derivative of q);
2. static holds (:func:`arm_dyn_id.data.segmentation.static_holds`) are averaged
   into one sample each: noise falls as 1/√k, but the friction at rest is not
   cancelled, only bounded (``rest_friction``);
3. the remaining slow moving samples are averaged in short bins; for a joint that
   moves both ways, Coulomb and viscous friction columns are fitted with the
   gravity parameters; otherwise its friction is bounded like friction at rest;
4. weighted least squares, each row weighted by 1 / (σ²/k + s²): σ the torque
   noise, k the samples averaged, s the friction not modelled on that row;
5. base parameters the data cannot identify are named, with a motion that would
   identify them (:func:`motion_advice`).

Held-out validation uses whole holds and whole moving segments
(:func:`choose_held_out`).
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.data.segmentation import (QUASI_STATIC_ACCELERATION, QUASI_STATIC_DURATION,
                                          QUASI_STATIC_SPEED, filtered_derivatives,
                                          static_holds)
from arm_dyn_id.errors import RankDeficientError
from arm_dyn_id.identification.estimators import identifiability

#: A base parameter whose regressor column is independent of the others by less
#: than this (:func:`excitation`) is reported as not identified: a joint held at
#: one angle leaves its columns collinear up to encoder noise (~1e-5), which a
#: condition-number test alone accepts.
MIN_EXCITATION = 1e-3

#: Fewest quasi-static samples (holds + bins of slow motion) a fit accepts.
MIN_QUASI_STATIC_SAMPLES = 20

#: |q̇| (rad/s) under which a joint counts as at rest (its friction is not modelled).
REST_SPEED = 2e-3

#: Default bound on friction at rest as a fraction of the joint's largest |τ|,
#: used when the data gives no Coulomb estimate and ``rest_friction`` is not given.
REST_FRICTION_FRACTION = 0.02

#: A recording is *rich* (full dynamics applies) when more than this fraction of
#: its samples move faster than the quasi-static speed, with on average at least
#: RICH_JOINTS joints moving at once (on an arm of fewer joints, RICH_SHARE of them: a
#: double pendulum's Fourier motion moved 1.8 joints at once and was fitted, and refused,
#: as gravity).
RICH_FRACTION = 0.5
RICH_JOINTS = 2.0
RICH_SHARE = 0.75


@dataclass(frozen=True)
class QuasiStaticSamples:
    """Quasi-static samples of a recording, holds averaged and slow motion binned.

    Attributes
    ----------
    q : ndarray, (M, n)
        Pose of each sample (rad).
    tau : ndarray, (M, n)
        Mean measured torque (N·m).
    dq : ndarray, (M, n)
        Mean velocity (rad/s); 0 for holds.
    count : ndarray of int, (M,)
        Raw samples averaged into each.
    group : ndarray of int, (M,)
        Hold or moving segment each sample belongs to (the unit held out).
    is_hold : ndarray of bool, (M,)
    holds : list of (int, int)
        Raw index ranges of the holds.
    n_raw : int
        Raw samples in the recording.
    n_quasi_static : int
        Raw samples under the thresholds.
    motion : dict
        How the recording moves (:func:`motion_profile`).
    thresholds : dict
        ``max_speed`` (rad/s), ``max_acceleration`` (rad/s²), ``min_duration`` (s).
    """

    q: np.ndarray
    tau: np.ndarray
    dq: np.ndarray
    count: np.ndarray
    group: np.ndarray
    is_hold: np.ndarray
    holds: list
    n_raw: int
    n_quasi_static: int
    motion: dict
    thresholds: dict

    @property
    def n_samples(self):
        return self.q.shape[0]


def motion_profile(v, max_speed=QUASI_STATIC_SPEED):
    """How much of a recording moves fast, and with how many joints at once.

    Parameters
    ----------
    v : ndarray, (N, n)
        Joint velocities (rad/s).
    max_speed : float
        rad/s above which a joint counts as moving fast.

    Returns
    -------
    dict
        ``fast_fraction`` (samples with some joint above ``max_speed``),
        ``joints_moving`` (mean count of fast joints over those samples),
        ``peak_speed`` (per joint, rad/s) and ``rich`` (full dynamics applies).
    """
    fast = np.abs(v) > max_speed
    any_fast = fast.any(axis=1)
    frac = float(any_fast.mean()) if len(v) else 0.0
    joints = float(fast[any_fast].sum(axis=1).mean()) if any_fast.any() else 0.0
    at_once = min(RICH_JOINTS, RICH_SHARE * v.shape[1]) if v.ndim == 2 else RICH_JOINTS
    return {'fast_fraction': frac, 'joints_moving': joints,
            'peak_speed': np.abs(v).max(axis=0).tolist() if len(v) else [],
            'rich': bool(frac > RICH_FRACTION and joints >= at_once)}


def quasi_static_samples(t, q, tau, dq=None, max_speed=QUASI_STATIC_SPEED,
                         max_acceleration=QUASI_STATIC_ACCELERATION,
                         min_duration=QUASI_STATIC_DURATION, bin_seconds=0.05,
                         segment_seconds=2.0, window=0.25):
    """Holds averaged and slow motion binned, from any recording.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s), uneven steps allowed.
    q : ndarray, (N, n)
        Joint angles (rad).
    tau : ndarray, (N, n)
        Measured torques (N·m).
    dq : ndarray, (N, n), optional
        Measured velocities (rad/s); estimated from q when absent.
    max_speed, max_acceleration, min_duration : float
        Thresholds of :func:`arm_dyn_id.data.segmentation.quasi_static_mask`.
    bin_seconds : float
        Slow moving samples are averaged over bins of this length (s).
    segment_seconds : float
        Moving runs are cut into segments of this length (s), the units of hold-out.
    window : float
        Derivative filter span (s).

    Returns
    -------
    QuasiStaticSamples
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    _, v, a = filtered_derivatives(t, q, window, dq)
    n = q.shape[1]
    slow = np.all(np.abs(v) <= max_speed, axis=1) & np.all(np.abs(a) <= max_acceleration,
                                                           axis=1)
    slow &= np.all(np.isfinite(tau), axis=1)
    mask = np.zeros_like(slow)
    for a0, b0 in _runs(slow):
        if t[b0 - 1] - t[a0] >= min_duration:
            mask[a0:b0] = True
    holds = static_holds(t, q, mask)
    in_hold = np.zeros(len(t), dtype=bool)
    rows_q, rows_tau, rows_dq, counts, groups, is_hold = [], [], [], [], [], []
    for g, (lo, hi) in enumerate(holds):
        in_hold[lo:hi] = True
        rows_q.append(q[lo:hi].mean(axis=0))
        rows_tau.append(tau[lo:hi].mean(axis=0))
        rows_dq.append(np.zeros(n))
        counts.append(hi - lo)
        groups.append(g)
        is_hold.append(True)
    # the settling trimmed off a hold is neither hold nor motion
    moving = mask & ~in_hold
    for lo, hi in holds:
        lo0 = lo
        while lo0 > 0 and mask[lo0 - 1] and not in_hold[lo0 - 1] and \
                t[lo] - t[lo0 - 1] < 0.1:
            lo0 -= 1
        moving[lo0:lo] = False
        hi0 = hi
        while hi0 < len(t) and mask[hi0] and t[hi0] - t[hi - 1] < 0.1:
            hi0 += 1
        moving[hi:hi0] = False
    g = len(holds)
    for a0, b0 in _runs(moving):
        seg_start = t[a0]
        bin_start = a0
        for i in range(a0, b0 + 1):
            if i < b0 and t[i] - t[bin_start] < bin_seconds:
                continue
            if i - bin_start >= 2:
                rows_q.append(q[bin_start:i].mean(axis=0))
                rows_tau.append(tau[bin_start:i].mean(axis=0))
                rows_dq.append(v[bin_start:i].mean(axis=0))
                counts.append(i - bin_start)
                groups.append(g)
                is_hold.append(False)
            if i < b0 and t[i] - seg_start >= segment_seconds:
                g += 1
                seg_start = t[i]
            bin_start = i
        g += 1
    shape = (0, n)
    return QuasiStaticSamples(
        q=np.array(rows_q).reshape(-1, n) if rows_q else np.empty(shape),
        tau=np.array(rows_tau).reshape(-1, n) if rows_tau else np.empty(shape),
        dq=np.array(rows_dq).reshape(-1, n) if rows_dq else np.empty(shape),
        count=np.asarray(counts, dtype=int), group=np.asarray(groups, dtype=int),
        is_hold=np.asarray(is_hold, dtype=bool), holds=holds, n_raw=int(len(t)),
        n_quasi_static=int(mask.sum()), motion=motion_profile(v, max_speed),
        thresholds={'max_speed': float(max_speed), 'max_acceleration': float(max_acceleration),
                    'min_duration': float(min_duration)})


def _runs(mask):
    edges = np.diff(np.concatenate([[0], np.asarray(mask).view(np.int8), [0]]))
    return np.column_stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)])


def friction_joints(samples, min_bins=5):
    """Joints whose slow motion goes both ways often enough to fit Coulomb and viscous.

    Returns
    -------
    list of int
    """
    out = []
    for j in range(samples.q.shape[1]):
        v = samples.dq[~samples.is_hold, j]
        if np.sum(v > REST_SPEED) >= min_bins and np.sum(v < -REST_SPEED) >= min_bins:
            out.append(j)
    return out


def design(robot, base, samples, fjoints):
    """Stacked regressor of the quasi-static samples: gravity base columns then friction.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
    samples : QuasiStaticSamples
    fjoints : list of int
        Joints with Coulomb (sign q̇) and viscous (q̇) columns.

    Returns
    -------
    Y : ndarray, (M, n, r + 2·len(fjoints))
    names : list of str
    """
    Yb = base.reduce(robot.gravity_regressor(samples.q))
    M, n, r = Yb.shape
    F = np.zeros((M, n, 2 * len(fjoints)))
    names = list(base.names)
    for k, j in enumerate(fjoints):
        v = samples.dq[:, j]
        F[:, j, 2 * k] = np.where(np.abs(v) > REST_SPEED, np.sign(v), 0.0)
        F[:, j, 2 * k + 1] = v
        names += [f'coulomb_{robot.joint_names[j]}', f'viscous_{robot.joint_names[j]}']
    return np.concatenate([Yb, F], axis=2), names


def row_weights(samples, noise, bound, fjoints):
    """Weights 1 / (σ²/k + s²) per sample and joint.

    s is the friction not modelled on that row: ``bound``/√3 for a joint at
    rest (friction anywhere in ±bound), ``bound`` for a joint moving without
    friction columns, 10 % of ``bound`` for one moving with them.

    Returns
    -------
    ndarray, (M, n)
    """
    noise = np.asarray(noise, dtype=float)
    bound = np.asarray(bound, dtype=float)
    moving = np.abs(samples.dq) > REST_SPEED
    modelled = np.zeros_like(moving)
    modelled[:, fjoints] = True
    s = np.where(~moving, bound / np.sqrt(3.0), np.where(modelled, 0.1 * bound, bound))
    var = noise[None, :] ** 2 / samples.count[:, None] + s ** 2
    return 1.0 / np.maximum(var, 1e-12)


def normal_equations(Y, tau, w):
    """A = Σ Yᵀ W Y and b = Σ Yᵀ W τ over rows with per-row, per-joint weights w (M, n)."""
    Yw = Y * w[:, :, None]
    p = Y.shape[2]
    return (np.einsum('mjp,mjq->pq', Yw, Y).reshape(p, p),
            np.einsum('mjp,mj->p', Yw, tau))


def excitation(A):
    """Per column, how independent it is of the others: 1/√((Â⁻¹)ₖₖ) of the scaled A.

    1 for a column orthogonal to all others, 0 for one the others explain.

    Returns
    -------
    ndarray, (p,)
    """
    d = np.diag(A).copy()
    out = np.zeros(len(d))
    ok = d > 0
    if not ok.any():
        return out
    s = 1.0 / np.sqrt(d[ok])
    As = A[np.ix_(ok, ok)] * s[:, None] * s[None, :]
    try:
        inv = np.linalg.pinv(As, rcond=1e-14, hermitian=True)
        out[ok] = 1.0 / np.sqrt(np.clip(np.diag(inv), 1.0, None))
    except np.linalg.LinAlgError:
        pass
    return out


def weak_parameters(A, names):
    """Condition number and the parameters the normal matrix A does not identify.

    The union of :func:`arm_dyn_id.identification.estimators.identifiability`
    and the columns with :func:`excitation` under MIN_EXCITATION.

    Returns
    -------
    condition : float
    weak : list of str
    """
    condition, weak = identifiability(A, names)
    low = excitation(A) < MIN_EXCITATION
    weak = set(weak) | {names[i] for i in np.flatnonzero(low)}
    return condition, [nm for nm in names if nm in weak]


def _dependence(robot, base, poses, k, h=1e-4):
    """RMS over poses of ∂Y_b[:, :, k]/∂q_j for each joint j, (n,)."""
    Y0 = base.reduce(robot.gravity_regressor(poses))[:, :, k]
    out = np.zeros(robot.n_joints)
    for j in range(robot.n_joints):
        qp = poses.copy()
        qp[:, j] += h
        Yp = base.reduce(robot.gravity_regressor(qp))[:, :, k]
        out[j] = np.sqrt(np.mean(((Yp - Y0) / h) ** 2))
    return out


def motion_advice(robot, base, q, weak, amplitude=np.radians(60.0), seed=0):
    """For each base parameter the data cannot identify, a motion that would.

    The joints a parameter involves are those whose motion changes its
    regressor column (finite differences over the data poses and random poses).
    Candidate motions (one involved joint through ±``amplitude`` about the
    median pose, with another involved joint at one or two poses 45° apart) are
    added to the data poses in turn; the first after which the parameter is
    identifiable is advised. Joints the data hardly moves are tried first.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
    q : ndarray, (M, n)
        Poses of the data (rad).
    weak : sequence of str
        Base parameter names to advise on.
    amplitude : float
        Half range of the advised motion (rad).
    seed : int

    Returns
    -------
    dict
        name -> advice (str).
    """
    q = np.asarray(q, dtype=float)
    rng = np.random.default_rng(seed)
    names = list(base.names)
    n = robot.n_joints
    joints = list(robot.joint_names)
    pick = q[rng.choice(len(q), size=min(len(q), 40), replace=False)] if len(q) else \
        np.zeros((0, n))
    poses = np.vstack([pick, rng.uniform(-np.pi, np.pi, size=(40, n))])
    span = np.ptp(q, axis=0) if len(q) else np.zeros(n)
    q0 = np.median(q, axis=0) if len(q) else np.zeros(n)
    Yd = base.reduce(robot.gravity_regressor(q)) if len(q) else np.zeros((0, n, len(names)))
    sweep = amplitude * np.linspace(-1.0, 1.0, 9)
    advice = {}
    for name in weak:
        if name not in names:
            continue
        k = names.index(name)
        dep = _dependence(robot, base, poses, k)
        involved = [j for j in range(n) if dep[j] > 1e-6 * max(dep.max(), 1e-300)]
        if not involved:
            advice[name] = 'no joint motion changes its torque: fix it from the URDF'
            continue
        # joints the data moves least first, distal before proximal on ties
        order = sorted(involved, key=lambda j: (span[j] > np.radians(20.0), -j))
        found = None
        for p in order:
            seconds = [None] + sorted((j for j in involved if j != p),
                                      key=lambda j: (abs(j - p), -j)) + \
                [j for j in range(n) if j not in involved and j != p]
            for s in seconds:
                extra = []
                for offset in ((0.0,) if s is None else (0.0, np.radians(45.0))):
                    block = np.repeat(q0[None, :], len(sweep), axis=0)
                    block[:, p] += sweep
                    if s is not None:
                        block[:, s] += offset
                    extra.append(block)
                Ye = base.reduce(robot.gravity_regressor(np.vstack(extra)))
                Y = np.concatenate([Yd, Ye], axis=0).reshape(-1, len(names))
                _, still = weak_parameters(Y.T @ Y, names)
                if name not in still:
                    found = (p, s)
                    break
            if found:
                break
        involved_txt = ', '.join(joints[j] for j in involved)
        if found is None:
            advice[name] = (f'it depends on {involved_txt}; move them through wide ranges '
                            'in several combinations')
            continue
        p, s = found
        text = (f'move {joints[p]} through ±{np.degrees(amplitude):.0f}° '
                f'(the data moves it over {np.degrees(span[p]):.0f}°)')
        if s is not None:
            text += (f' with {joints[s]} at two poses about 45° apart '
                     f'(e.g. {np.degrees(q0[s]):.0f}° and {np.degrees(q0[s]) + 45:.0f}°)')
        advice[name] = text
    return advice


def check_identifiable(robot, base, q, A, names, context=''):
    """Raise RankDeficientError naming the weak base parameters and the motion for each.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
    q : ndarray, (M, n)
        Poses of the data (rad).
    A : ndarray, (p, p)
        Weighted normal matrix of the fit.
    names : list of str, (p,)
    context : str
        Appended to the parameter list (``' from the quasi-static samples of bag X'``).

    Returns
    -------
    float
        Condition number when every parameter is identifiable.

    Raises
    ------
    RankDeficientError
        With attributes ``parameters`` (names) and ``advice`` (name -> motion).
    """
    condition, weak = weak_parameters(A, names)
    if not weak:
        return condition
    gravity_weak = [w for w in weak if w in base.names]
    advice = motion_advice(robot, base, q, gravity_weak)
    for w in weak:
        if w not in advice and w.split('_', 1)[0] in ('coulomb', 'viscous'):
            advice[w] = f'move {w.split("_", 1)[1]} slowly both ways'
    parts = '; '.join(f'for {w}: {advice[w]}' for w in weak if w in advice)
    err = RankDeficientError(
        f'the data cannot identify {", ".join(weak)}{context} (condition number '
        f'{condition:.3g}): {parts}')
    err.parameters = list(weak)
    err.advice = advice
    raise err


@dataclass
class QuasiStaticFit:
    """Outcome of :func:`fit_quasi_static`.

    Attributes
    ----------
    beta : ndarray, (r,)
        Gravity base parameters.
    cov : ndarray, (r, r)
    friction : dict
        ``coulomb`` and ``viscous`` (n,), NaN for joints without friction columns.
    fjoints : list of int
    rest_friction : ndarray, (n,)
        The bound on friction at rest assumed (N·m).
    bound_source : list of str, (n,)
        Where each bound came from (``given``, ``coulomb``, ``fraction``).
    condition : float
    residuals : ndarray, (M, n)
        τ - Y β on the fitted samples (N·m).
    names : list of str
    excitation : dict
        base parameter -> independence of its column (0..1).
    """

    beta: np.ndarray
    cov: np.ndarray
    friction: dict
    fjoints: list
    rest_friction: np.ndarray
    bound_source: list
    condition: float
    residuals: np.ndarray
    names: list
    excitation: dict = field(default_factory=dict)


def _solve(A, b, r=None):
    """θ and the unit covariance; with ``r``, the friction columns after the r gravity
    ones (Coulomb, viscous) bounded at ≥ 0 (bounded least squares when needed)."""
    s = 1.0 / np.sqrt(np.diag(A))
    As = A * s[:, None] * s[None, :]
    inv = np.linalg.inv(As)
    theta = s * (inv @ (b * s))
    if r is not None and np.any(theta[r:] < 0):
        from arm_dyn_id.identification.estimators import bounded_solve
        bounded = np.zeros(len(theta), dtype=bool)
        bounded[r:] = True
        theta, _ = bounded_solve(A, b, bounded)
    return theta, s[:, None] * inv * s[None, :]


def fit_quasi_static(robot, base, samples, train, noise, rest_friction=None, where=''):
    """Weighted least squares of gravity (and slow-motion friction) on the training rows.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
    samples : QuasiStaticSamples
    train : ndarray of bool, (M,)
        Rows fitted.
    noise : ndarray, (n,)
        Torque noise σ per raw sample (N·m).
    rest_friction : float or array_like (n,), optional
        Bound on friction at rest (N·m); default the fitted Coulomb level of
        each joint that moves both ways, else REST_FRICTION_FRACTION of its
        largest |τ|.
    where : str
        Names the record in errors.

    Returns
    -------
    QuasiStaticFit

    Raises
    ------
    RankDeficientError
        Naming the parameters and the motion that would identify them.
    """
    n = robot.n_joints
    sub = _subset(samples, train)
    fj = friction_joints(sub)
    Y, names = design(robot, base, sub, fj)
    r = base.count
    tau_max = np.max(np.abs(sub.tau), axis=0)
    default = np.maximum(REST_FRICTION_FRACTION * tau_max, 1e-6)
    if rest_friction is not None:
        bound = np.broadcast_to(np.asarray(rest_friction, dtype=float), (n,)).copy()
        source = ['given'] * n
    else:
        bound, source = default.copy(), ['fraction'] * n
    noise = np.where(np.isfinite(noise) & (noise > 0), noise, 1e-3 * np.maximum(tau_max, 1))
    A, b = normal_equations(Y, sub.tau, row_weights(sub, noise, bound, fj))
    condition = check_identifiable(robot, base, sub.q, A, names, where)
    theta, cov_unit = _solve(A, b, r)
    if rest_friction is None and fj:
        for k, j in enumerate(fj):
            bound[j] = max(abs(theta[r + 2 * k]), 1e-6)
            source[j] = 'coulomb'
        w = row_weights(sub, noise, bound, fj)
        A, b = normal_equations(Y, sub.tau, w)
        condition = check_identifiable(robot, base, sub.q, A, names, where)
        theta, cov_unit = _solve(A, b, r)
    w = row_weights(sub, noise, bound, fj)
    res = sub.tau - np.einsum('mjp,p->mj', Y, theta)
    dof = max(res.size - len(theta), 1)
    cov = cov_unit * float(np.sum(w * res ** 2) / dof)
    coulomb, viscous = np.full(n, np.nan), np.full(n, np.nan)
    for k, j in enumerate(fj):
        coulomb[j], viscous[j] = theta[r + 2 * k], theta[r + 2 * k + 1]
    exc = excitation(A)
    return QuasiStaticFit(beta=theta[:r], cov=cov[:r, :r],
                          friction={'coulomb': coulomb, 'viscous': viscous}, fjoints=fj,
                          rest_friction=bound, bound_source=source, condition=condition,
                          residuals=res, names=names,
                          excitation={nm: float(e) for nm, e in zip(names[:r], exc[:r])})


def friction_torque(samples, fit):
    """Friction the fit attributes to each sample (N·m), (M, n); 0 where not modelled."""
    out = np.zeros_like(samples.tau)
    for j in fit.fjoints:
        v = samples.dq[:, j]
        out[:, j] = fit.friction['coulomb'][j] * np.where(np.abs(v) > REST_SPEED,
                                                          np.sign(v), 0.0) + \
            fit.friction['viscous'][j] * v
    return out


def _subset(samples, keep):
    keep = np.asarray(keep, dtype=bool)
    return QuasiStaticSamples(
        q=samples.q[keep], tau=samples.tau[keep], dq=samples.dq[keep],
        count=samples.count[keep], group=samples.group[keep], is_hold=samples.is_hold[keep],
        holds=samples.holds, n_raw=samples.n_raw, n_quasi_static=samples.n_quasi_static,
        motion=samples.motion, thresholds=samples.thresholds)


def choose_held_out(robot, base, samples, fraction, seed, noise):
    """Whole holds and moving segments kept out of the fit, training still identifiable.

    Groups are drawn in a seeded random order and held out while the count is
    under ``fraction`` of the groups and the remaining groups still identify
    every gravity base parameter.

    Returns
    -------
    ndarray of bool, (M,)
        True for held-out rows.
    """
    held = np.zeros(samples.n_samples, dtype=bool)
    ids = np.unique(samples.group)
    n_hold = 0 if fraction <= 0 or len(ids) < 2 else \
        min(len(ids) - 1, max(1, int(round(fraction * len(ids)))))
    if n_hold == 0:
        return held
    Yb = base.reduce(robot.gravity_regressor(samples.q))
    noise = np.where(np.isfinite(noise) & (noise > 0), noise, 1.0)
    w = samples.count[:, None] / noise[None, :] ** 2
    parts = {}
    for g in ids:
        m = samples.group == g
        parts[int(g)] = normal_equations(Yb[m], samples.tau[m], w[m])[0]
    A = sum(parts.values())
    if weak_parameters(A, list(base.names))[1]:
        return held          # the fit itself will name what is missing
    rng = np.random.default_rng(seed)
    chosen = 0
    for g in rng.permutation(ids):
        if chosen >= n_hold:
            break
        rest = A - parts[int(g)]
        if not weak_parameters(rest, list(base.names))[1]:
            A = rest
            held |= samples.group == g
            chosen += 1
    return held


def joint_coverage(robot, samples):
    """Range of each joint over the quasi-static samples, ``{joint: {min, max, range}}`` (rad)."""
    out = {}
    for j, name in enumerate(robot.joint_names):
        col = samples.q[:, j]
        lo, hi = (float(col.min()), float(col.max())) if len(col) else (np.nan, np.nan)
        out[name] = {'min': lo, 'max': hi, 'range': hi - lo}
    return out


__all__ = ['MIN_QUASI_STATIC_SAMPLES', 'QuasiStaticFit', 'QuasiStaticSamples',
           'check_identifiable', 'choose_held_out', 'excitation', 'fit_quasi_static',
           'friction_torque', 'joint_coverage', 'motion_advice', 'motion_profile',
           'quasi_static_samples']
