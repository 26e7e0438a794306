"""From recorded low-speed data to an identified gravity model (seed 000).

``identify_gravity`` chains: sweeps from the segment markers -> forward/backward
averaging (eq. 5) -> base regressor (eqs. 7-8) -> estimators (eq. 10 and WLS,
optionally robust) -> :class:`~arm_dyn_id.model.gravity.GravityModel`.
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import DataError
from arm_dyn_id.identification.estimators import (ESTIMATORS, HOLDOUT_FOLDS, MOMENT_ESTIMATORS,
                                                  fit_best, fit_best_moments,
                                                  gravity_normal_equations_parts, time_blocks)
from arm_dyn_id.identification.pairing import (average_pairs, coulomb_viscous_from_pairs,
                                               sweeps_from_markers)
from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.model.gravity import GravityModel

DEFAULT_METHODS = ('wls', 'joint_by_joint')

#: Above this many samples, WLS and joint-by-joint run from per-joint moments
#: accumulated in chunks (same estimates; the regressor is never held whole).
MOMENTS_THRESHOLD = 100_000


def still_joints(paired):
    """(M, n) bool: the joints each averaged sample's pair holds still (all but the one
    it sweeps)."""
    still = np.ones(np.shape(paired.tau), dtype=bool)
    moving = np.asarray(paired.moving_joint, dtype=int)
    rows = np.flatnonzero(moving >= 0)
    still[rows, moving[rows]] = False
    return still


def without_held_offsets(Yb, tau, groups, still):
    """Yb, τ with each group's mean taken out of the rows ``still`` (M, n) marks: a free
    torque offset per group and still joint (what its friction holds), eliminated."""
    Yb, tau = Yb.copy(), tau.copy()
    order = np.argsort(groups, kind='stable')
    _, starts = np.unique(groups[order], return_index=True)
    for rows in np.split(order, starts[1:]):
        joints = np.flatnonzero(still[rows[0]])
        if len(joints) == 0 or len(rows) < 2:
            continue
        tau[np.ix_(rows, joints)] -= tau[np.ix_(rows, joints)].mean(axis=0)
        Yb[rows[:, None], joints[None, :], :] -= Yb[rows][:, joints, :].mean(axis=0)
    return Yb, tau


def without_swept_constants(Yb, tau, mask):
    """Yb, τ with each swept joint's constant over all its pairs taken out of its rows
    (``mask`` (M, n): :func:`offset_mask`): one free offset per swept joint, eliminated
    (:func:`without_held_offsets` grouped by the joint each sample sweeps)."""
    if not np.any(mask):
        return Yb, tau
    swept = np.where(mask.any(axis=1), np.argmax(mask, axis=1), -1)
    return without_held_offsets(Yb, tau, swept, mask)


def without_pair_constants(Yb, tau, paired, swept):
    """Yb, τ of sweep pairs (``paired``) with what no gravity explains eliminated as free
    unknowns: each held joint's offset over each pair (:func:`without_held_offsets`) and
    the constant of each swept joint ``swept`` (M, n) marks over its pairs
    (:func:`without_swept_constants`)."""
    Yb, tau = without_held_offsets(Yb, tau, paired.pair_id, still_joints(paired))
    return without_swept_constants(Yb, tau, swept)


#: ``pair_offsets`` of :func:`identify_gravity`: ``'auto'`` fits the gravity as seed 000
#: does and reads it again with each swept joint's constant free
#: (:func:`pair_offsets`: the gate says how far that moves it); ``'yes'`` fits it with
#: them free; ``'no'`` neither.
PAIR_OFFSET_MODES = ('auto', 'yes', 'no')


def offset_mask(paired):
    """(M, n) bool: the joint each averaged sample's pair sweeps, where that joint is swept
    at two poses of the others or more (:func:`sweep_poses`)."""
    mask = ~still_joints(paired)
    for j in range(mask.shape[1]):
        if sweep_poses(paired, j) < 2:
            mask[:, j] = False
    return mask


def pair_offsets(robot, base, paired, noise=None, plain=False):
    """The gravity base parameters fitted with each swept joint's constant in its pairs'
    forward/backward averages free, and those constants.

    The average of a forward and a backward pass cancels friction that is the same both
    ways (seed 000 eq. 5). Coulomb friction stronger one way (a harmonic drive's, a
    cable's) or an offset in the effort leaves a constant on the swept joint, the same in
    every pair that sweeps it, which a fit without it takes into the gravity parameters
    (over a 40° sweep it is much like the gravity's own constant part): simulated sweeps
    with Coulomb friction 20 % stronger one way were fitted 2-16 % off, within 1.3 % (3
    poses a joint) with the constants free. Freed on friction the same both ways, they
    cost 0.1-2.6 points: the data cannot tell the two apart, only say how much the choice
    moves the model. Weighted least squares on the swept joints' samples and the held
    joints' variation within each pair (:func:`without_held_offsets`), with one constant
    column per swept joint (``noise``: the fit's σ per joint, 1/σ² weights).

    Only a joint swept at two poses of the others or more gets its constant: swept at
    one, the constant is its own gravity's (simulated UR5s swept once a joint moved 3-9 %
    with it free, on friction the same both ways).

    Returns
    -------
    beta : ndarray, (r,) or None
        The base parameters with the constants free; None when they cannot be told from
        the gravity parameters (a rank-deficient design) or no joint is swept.
    offsets : ndarray, (n,)
        N·m; NaN for a joint no pair sweeps (and all NaN with ``beta`` None).
    without : ndarray, (r,)
        With ``plain``: the same fit without the constants (third value; None when
        ``beta`` is None).
    """
    n = robot.n_joints
    offsets = np.full(n, np.nan)
    swept = list(np.flatnonzero(offset_mask(paired).any(axis=0)))
    moving = np.asarray(paired.moving_joint, dtype=int)
    if not swept:
        return (None, offsets, None) if plain else (None, offsets)
    Yb = base.reduce(robot.gravity_regressor(paired.q))
    Yb, tau = without_held_offsets(Yb, paired.tau, paired.pair_id, still_joints(paired))
    columns = np.zeros(Yb.shape[:2] + (len(swept),))
    for k, j in enumerate(swept):
        columns[moving == j, j, k] = 1.0
    w = 1.0 / np.maximum(np.asarray(noise if noise is not None else np.ones(n), dtype=float),
                         1e-12)
    A = np.concatenate([Yb, columns], axis=2) * w[None, :, None]
    y = tau * w
    rows = np.all(np.isfinite(y), axis=1) & np.all(np.isfinite(A), axis=(1, 2))
    flat, target = A[rows].reshape(-1, A.shape[2]), y[rows].ravel()
    # the rank of the columns scaled to unit norm: the joints' weights differ by orders of
    # magnitude (a joint whose torque is friction alone has a tiny noise)
    norms = np.linalg.norm(flat, axis=0)
    if not np.all(norms > 0) or \
            np.linalg.matrix_rank(flat / norms, tol=1e-9 * np.sqrt(len(flat))) < flat.shape[1]:
        return (None, offsets, None) if plain else (None, offsets)
    coef = np.linalg.lstsq(flat, target, rcond=None)[0]
    offsets[swept] = coef[base.count:]
    if plain:
        # the same samples, weights and held-joint offsets without the constants
        without = np.linalg.lstsq(flat[:, :base.count], target, rcond=None)[0]
        return coef[:base.count], offsets, without
    return coef[:base.count], offsets


def _choose(robot, base, q, tau, noise, methods, groups, strata, folds, seed, validation,
            still=None, moving=None):
    """Fit every method and choose one on held-out groups (samples or moments);
    ``still`` (M, n): rows with a free offset per group (:func:`without_held_offsets`);
    ``moving`` (M, n, optional): the swept joints' rows, with one free offset per joint
    over all its pairs (:func:`pair_offsets`; the sample path only)."""
    if len(q) > MOMENTS_THRESHOLD and validation is None and moving is None and \
            set(methods) <= set(MOMENT_ESTIMATORS):
        weights = None if noise is None else 1.0 / np.asarray(noise, dtype=float) ** 2
        # the samples of each group from one stable sort (not one mask per group)
        order = np.argsort(groups, kind='stable')
        ids, starts = np.unique(groups[order], return_index=True)
        runs = np.split(order, starts[1:])
        # samples outside every group are always fitted: one more part, its own stratum
        outside = [run for g, run in zip(ids, runs) if g < 0]
        members = [run for g, run in zip(ids, runs) if g >= 0] + \
            ([np.sort(np.concatenate(outside))] if outside else [])
        ids = ids[ids >= 0]
        labels = [strata.get(int(g), 0) if strata else 0 for g in ids]
        labels += [-1] * (len(members) - len(ids))
        free = None if still is None else [still[run[0]] for run in members]
        parts = gravity_normal_equations_parts(robot, base, q, tau, members, weights,
                                               workers=2, free_offsets=free)
        return fit_best_moments(parts, base.names, methods, strata=labels, folds=folds,
                                seed=seed)
    Yb = base.reduce(robot.gravity_regressor(q))
    if still is not None:
        Yb, tau = without_held_offsets(Yb, tau, groups, still)
    if moving is not None:
        # the swept joint's offset, one per joint over all its pairs
        Yb, tau = without_swept_constants(Yb, tau, moving)
    val = None
    if validation is not None:
        qv, tv = validation
        val = (base.reduce(robot.gravity_regressor(np.asarray(qv))), np.asarray(tv))
    return fit_best(Yb, tau, base.names, noise=noise, methods=tuple(methods), groups=groups,
                    strata=strata, folds=folds, seed=seed, validation=val)


#: A joint's gravity moved by at least this fraction of the URDF's (RMS over the
#: workspace poses, on a joint that carries gravity) when the pair offsets are freed is
#: said as the model is written. Simulated sweeps of three arms at 2-3 poses a joint:
#: with friction the same both ways 1 of 48 was said (5.3 %); with Coulomb friction 20 %
#: stronger one way or an effort offset 87 of 96, every model more than 2.3 % off
#: (docs/benchmarks.md).
PAIR_OFFSET_SHIFT = 0.05
#: The warning advises sweeping each joint at this many poses or more before fitting
#: the constants: at 2, simulated sweeps were fitted up to 28-40 % off with them (the
#: humanoid arm), at 3 at most 1.3 % (docs/benchmarks.md).
RELIABLE_POSES = 3


def every_pair(cases):
    """Every averaged pair of a gravity fit (held out and fitted: ``cases`` of a
    :class:`~arm_dyn_id.identification.pipeline.GravityPipelineFit`) as one
    :class:`~arm_dyn_id.identification.pairing.PairedData`, every k-th sample beyond
    :data:`MOMENTS_THRESHOLD`; None without cases."""
    from arm_dyn_id.identification.pairing import join_paired, thinned
    if not cases:
        return None
    return thinned(join_paired([case[0] for case in cases.values()]), MOMENTS_THRESHOLD)


#: The averaged pairs are dealt into this many blocks (whole pairs, in turn) for the
#: jackknife of :func:`pair_effort_scales`.
PAIR_SCALE_BLOCKS = 8
#: ... on every k-th averaged sample beyond this many (sweeps at 1 kHz are oversampled
#: many times over; the pairs, not the samples, carry the scales' errors).
PAIR_SCALE_ROWS = 20_000


def pair_effort_scales(base, joined, robot, noise=None, blocks=PAIR_SCALE_BLOCKS,
                       limit=None):
    """Each joint's effort scale against the other joints' (:func:`arm_dyn_id.
    identification.effort_scales.relative_effort_scales`), read from a gravity fit's
    averaged pairs (``joined``: :func:`every_pair`).

    A joint's gravity torque shares the parameters of the links beyond it with every joint
    before it, so a torque constant off on one joint bends the fit of the others: sweeps
    of a UR5, the humanoid arm and a Panda with one constant 0.8x or 1.2x were written
    9-17 % off, where the gravity path had no reading of it (the URDF's checks judge
    scales of 1.6x or more, and only on joints whose torque the URDF's errors leave
    clear). Read on the fit's own regressor, with the held joints' offsets over each pair
    and each swept joint's constant over its pairs (:func:`offset_mask`) eliminated as
    free unknowns: friction stronger one way, held friction and effort offsets then move
    no scale (every k-th averaged sample beyond :data:`PAIR_SCALE_ROWS`). ``noise``: the
    fit's σ per joint (1/σ² weights); the standard error is the jackknife over ``blocks``
    blocks of whole pairs, computed for a joint whose scale reads beyond ``limit`` (or
    below its inverse; every joint's when None) and None for the others (the gate passes
    the nearest it judges).

    Returns
    -------
    dict
        joint -> the keys of ``relative_effort_scales``; None when there are fewer than
        two pairs.
    """
    from arm_dyn_id.identification.effort_scales import relative_effort_scales
    from arm_dyn_id.identification.estimators import sample_moments
    from arm_dyn_id.identification.pairing import thinned
    joined = thinned(joined, PAIR_SCALE_ROWS)
    ids = np.unique(joined.pair_id)
    if len(ids) < 2:
        return None
    n = robot.n_joints
    Yb, tau = without_pair_constants(base.reduce(robot.gravity_regressor(joined.q)),
                                     joined.tau, joined, offset_mask(joined))
    sigma = np.asarray(noise if noise is not None else np.ones(n), dtype=float)
    w = 1.0 / np.maximum(sigma, 1e-12) ** 2
    block = np.searchsorted(ids, joined.pair_id) % min(int(blocks), len(ids))
    ok = np.all(np.isfinite(tau), axis=1) & np.all(np.isfinite(Yb), axis=(1, 2))
    parts = [sample_moments(Yb, tau, np.ones(n), ok & (block == b))
             for b in range(min(int(blocks), len(ids)))]
    return relative_effort_scales(parts, w, list(robot.joint_names), limit=limit)


def pair_offset_reading(model, joined, robot, noise=None):
    """The data of a gravity fit (every averaged pair, held out and fitted: ``joined``,
    :func:`every_pair`) fitted with and without each swept joint's constant
    (:func:`pair_offsets`): ``{beta, without, offsets, poses}`` or None when no joint is
    swept at two poses or the constants cannot be told from gravity."""
    beta, offsets, without = pair_offsets(robot, model.base, joined, noise, plain=True)
    if beta is None:
        return None
    return {'beta': beta, 'without': without, 'offsets': offsets,
            'poses': [sweep_poses(joined, j) for j in range(robot.n_joints)]}


def pair_offset_warning(model, read, robot, poses):
    """The warning of a gravity fit whose model moves by :data:`PAIR_OFFSET_SHIFT` or more
    on a loaded joint when refitted with the pair offsets free (``read``:
    :func:`pair_offset_reading`, the same data fitted with and without them), and the
    numbers behind it: ``(text or None, checks)``."""
    from arm_dyn_id.model.robot import carries_gravity
    fitted, freed = (_gravity_of(model.robot, model.base, read[key], poses)
                     for key in ('without', 'beta'))
    urdf = np.sqrt(np.mean(robot.gravity_torques(poses) ** 2, axis=0))
    loaded = carries_gravity(urdf)
    shift = np.sqrt(np.mean((freed - fitted) ** 2, axis=0)) / np.maximum(urdf, 1e-12)
    joints = list(model.joint_names)
    checks = {'shift': {j: float(v) for j, v, ok in zip(joints, shift, loaded) if ok},
              'offsets_nm': {j: float(v) for j, v in zip(joints, read['offsets'])
                             if np.isfinite(v)},
              'limit': PAIR_OFFSET_SHIFT}
    moved = sorted(((v, j) for j, v in checks['shift'].items() if v >= PAIR_OFFSET_SHIFT),
                   reverse=True)
    if not moved:
        return None, checks
    which = ', '.join(f'{j} by {100 * v:.0f} %' for v, j in moved)
    held = ', '.join(f'{j} {checks["offsets_nm"][j]:+.3g}' for _, j in moved
                     if j in checks['offsets_nm'])
    poses = [p for p in read.get('poses', []) if p >= 2]
    few = bool(poses) and min(poses) < RELIABLE_POSES
    checks['poses'] = {j: int(p) for j, p in zip(joints, read.get('poses', []))}
    return (f'the model\'s gravity moves ({which} of the URDF\'s, over the joints\' range) '
            'when each swept joint\'s constant in its forward/backward averages is fitted '
            f'beside it ({held} N·m): Coulomb friction stronger one way, or an offset in '
            'the effort, leaves such a constant, and these sweeps cannot tell it from '
            'gravity. The model written assumes friction the same both ways and no effort '
            'offset; if the arm\'s friction differs by direction or its effort has an '
            'offset, fit again with `arm-dyn-id fit --pair-offsets yes` (or set '
            'current_offsets)' +
            (f', after sweeping each joint at {RELIABLE_POSES} poses of the others or more '
             f'(some are swept at {min(poses)}: fitted with so few, the constants can be '
             'off as much the other way)' if few else '')), checks


#: Two sweeps of a joint are at different poses when another joint's mean angle differs
#: by this much (rad) or more (the poses grouped by that distance, not rounded: a review
#: found two sweeps 0.2 mrad apart counted as two poses across a rounding edge).
POSE_STEP = 0.05


def sweep_poses(paired, joint):
    """How many distinct poses of the other joints (:data:`POSE_STEP` apart) ``joint``'s
    pairs sweep it at; 0 when fewer than 3 samples sweep it."""
    moving = np.asarray(paired.moving_joint, dtype=int)
    rows = moving == joint
    if np.count_nonzero(rows) < 3:
        return 0
    ids = np.asarray(paired.pair_id)
    others = [k for k in range(paired.q.shape[1]) if k != joint]
    kept = []
    for pair in np.unique(ids[rows]):
        mean = np.nanmean(paired.q[np.ix_(rows & (ids == pair), others)], axis=0)
        if all(np.max(np.abs(mean - other)) >= POSE_STEP for other in kept):
            kept.append(mean)
    return len(kept)


def _gravity_of(robot, base, beta, q):
    """G(q) (N, n) of the base values ``beta`` (zeros on the parameters they leave out)."""
    theta = np.zeros(4 * robot.n_bodies)
    theta[base.independent] = beta
    return robot.gravity_torques_batch(q, theta)


def _offsets_of(beta, base, robot, paired):
    """(n,) N·m: each swept joint's mean residual of the gravity ``beta`` over its own
    pairs' samples (the offset fitted beside it); NaN for a joint no pair sweeps."""
    moving = np.asarray(paired.moving_joint, dtype=int)
    residual = paired.tau - _gravity_of(robot, base, beta, paired.q)
    out = np.full(robot.n_joints, np.nan)
    for j in range(robot.n_joints):
        rows = moving == j
        if rows.any():
            out[j] = float(np.nanmean(residual[rows, j]))
    return out


def as_record(t, q, tau):
    """Times (N,), positions (N, n) and torques (N, n) as float arrays, or DataError."""
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if t.ndim != 1 or q.shape != tau.shape or q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape}, positions {q.shape} and torques {tau.shape} '
                        'must be (N,), (N, n), (N, n)')
    return t, q, tau


@dataclass
class GravityFit:
    """Outcome of :func:`identify_gravity`."""

    model: GravityModel
    result: object                 # IdentificationResult of the chosen method
    candidates: dict               # method -> IdentificationResult or error text
    paired: object = None          # PairedData (None without averaging)
    info: dict = field(default_factory=dict)
    selection: object = None       # estimators.Selection: how the method was chosen


def identify_gravity(robot, t, q, tau, markers=None, noise=None, methods=DEFAULT_METHODS,
                     average=True, base=None, validation=None, provenance=None,
                     folds=HOLDOUT_FOLDS, seed=0, free_offsets=True, pair_offsets_mode='auto'):
    """Identify the gravity base parameters from reciprocating data.

    Parameters
    ----------
    robot : RobotModel
        Kinematics, with gravity set to the value the data was taken at.
    t : ndarray, (N,)
        Sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    tau : ndarray, (N, n)
        Measured joint torques (N·m).
    markers : list of dict, optional
        Segment markers; needed for averaging.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    methods : sequence of str
        Estimators to run (``wls``, ``joint_by_joint``, ``threshold``, ``irls``,
        ``pso``); the one with the smallest weighted residual on held-out
        forward/backward pairs (sweeps without averaging, blocks of time without
        markers) is kept and refitted on all of them; all are reported. When no
        pair can be held out (one pair per joint) the in-sample residual decides,
        and the model's ``selection`` metadata says so.
    average : bool
        Average forward/backward passes to cancel friction (seed 000 eq. 5).
        Without it, only the sweep samples are used as they are. With it, the joints a
        pair holds still get a free torque offset over the pair: the friction a still
        geared joint holds (anything within its breakaway friction) is not cancelled by
        the averaging, and only their torque's variation along the sweep is fitted.
    validation : (q_val, tau_val), optional
        Held-out data used to choose between methods instead of the folds.
    folds : int
        At most this many cross-validation folds over the pairs.
    seed : int
        Seed of the deal of pairs into folds.
    free_offsets : bool
        With averaging, a free torque offset per pair on the joints it holds still
        (default); False fits their averaged torque as it is (exact only for an arm whose
        joints hold no friction at rest).
    pair_offsets_mode : {'auto', 'yes', 'no'}
        The constant each swept joint keeps in its pair averages (:func:`pair_offsets`):
        ``'yes'`` fits it beside the gravity for the joints swept at two poses or more
        (kept as the model's ``pair_offset`` friction, not served; beyond
        :data:`MOMENTS_THRESHOLD` averaged samples on every k-th); ``'auto'`` and
        ``'no'`` fit without it (the data gate reads it for ``'auto'``:
        :func:`pair_offset_reading`). Averaged pairs only.

    Returns
    -------
    GravityFit
    """
    t, q, tau = as_record(t, q, tau)
    if q.shape[1] != robot.n_joints:
        raise DataError(f'data has {q.shape[1]} joints, the model {robot.n_joints} '
                        f'({list(robot.joint_names)})')
    base = base or gravity_base_parameters(robot)
    paired = None
    if average:
        if not markers:
            raise DataError('forward/backward averaging needs segment markers; record the '
                            'excitation_segments topic or pass average=False')
        paired = average_pairs(t, q, tau, sweeps_from_markers(t, markers))
        q_fit, tau_fit = paired.q, paired.tau
        # a pair is held out whole; a joint is the stratum that keeps pairs in training
        groups = paired.pair_id
        ids, first = np.unique(groups, return_index=True)     # one entry per pair
        strata = dict(zip(ids.tolist(), paired.moving_joint[first].tolist()))
    else:
        sweeps = sweeps_from_markers(t, markers) if markers else []
        if sweeps:
            idx = np.concatenate([np.arange(s.start, s.stop) for s in sweeps])
            groups = np.concatenate([np.full(s.stop - s.start, k)
                                     for k, s in enumerate(sweeps)])
            strata = {k: s.joint_index for k, s in enumerate(sweeps)}
        else:
            idx = np.arange(len(t))
            groups, strata = time_blocks(len(t), folds), None
        q_fit, tau_fit = q[idx], tau[idx]
    unknown = [m for m in methods if m not in ESTIMATORS]
    if unknown:
        raise ValueError(f'unknown estimator {unknown[0]!r}; choose from {sorted(ESTIMATORS)}')
    if pair_offsets_mode not in PAIR_OFFSET_MODES:
        raise ValueError(f'pair_offsets {pair_offsets_mode!r}: choose from '
                         f'{", ".join(PAIR_OFFSET_MODES)}')
    still = None if paired is None or not free_offsets else still_joints(paired)
    mask = offset_mask(paired) if still is not None and pair_offsets_mode == 'yes' \
        else None
    free = mask is not None and bool(mask.any())
    stride = 1
    if free and len(q_fit) > MOMENTS_THRESHOLD:
        # the constants need the samples path: every k-th averaged sample (slow sweeps
        # at a high rate are oversampled many times over)
        stride = -(-len(q_fit) // MOMENTS_THRESHOLD)
        keep = slice(None, None, stride)
        q_fit, tau_fit, groups, still, mask = (q_fit[keep], tau_fit[keep], groups[keep],
                                               still[keep], mask[keep])
    choice = _choose(robot, base, q_fit, tau_fit, noise, methods, groups, strata, folds, seed,
                     validation, still, mask if free else None)
    result, candidates = choice.result, choice.candidates
    friction = None
    if paired is not None:
        coulomb, viscous = coulomb_viscous_from_pairs(paired, robot.n_joints)
        friction = {'coulomb': coulomb, 'viscous': viscous}
        if free:
            friction['pair_offset'] = np.where(mask.any(axis=0),
                                               _offsets_of(result.beta, base, robot, paired),
                                               np.nan)
    metadata = {
        'fit': {
            'method': result.method,
            'averaged_forward_backward': bool(average),
            'condition_number': float(result.condition_number),
            'n_samples': int(result.n_samples),
            'residual_rms': result.residual_rms().tolist(),
            'noise_std': result.noise_std.tolist(),
            'seconds': float(result.seconds),
            'pair_offsets': None if paired is None else {
                'mode': pair_offsets_mode,
                'fitted': [robot.joint_names[j] for j in range(robot.n_joints)
                           if free and mask[:, j].any()],
                'stride': stride},
            'candidates': {m: (r if isinstance(r, str) else {
                'residual_rms': r.residual_rms().tolist(), 'seconds': float(r.seconds)})
                for m, r in candidates.items()},
        },
        'selection': choice.selection.to_dict(),
        'provenance': dict(provenance or {}),
    }
    model = GravityModel(robot.copy(), base, result.beta, result.std_errors, friction, metadata)
    return GravityFit(model=model, result=result, candidates=candidates, paired=paired,
                      info={'n_raw_samples': int(len(t))}, selection=choice.selection)
