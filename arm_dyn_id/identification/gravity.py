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


def _choose(robot, base, q, tau, noise, methods, groups, strata, folds, seed, validation,
            still=None):
    """Fit every method and choose one on held-out groups (samples or moments);
    ``still`` (M, n): rows with a free offset per group (:func:`without_held_offsets`)."""
    if len(q) > MOMENTS_THRESHOLD and validation is None and \
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
    val = None
    if validation is not None:
        qv, tv = validation
        val = (base.reduce(robot.gravity_regressor(np.asarray(qv))), np.asarray(tv))
    return fit_best(Yb, tau, base.names, noise=noise, methods=tuple(methods), groups=groups,
                    strata=strata, folds=folds, seed=seed, validation=val)


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
                     folds=HOLDOUT_FOLDS, seed=0, free_offsets=True):
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
    choice = _choose(robot, base, q_fit, tau_fit, noise, methods, groups, strata, folds, seed,
                     validation,
                     None if paired is None or not free_offsets else still_joints(paired))
    result, candidates = choice.result, choice.candidates
    friction = None
    if paired is not None:
        coulomb, viscous = coulomb_viscous_from_pairs(paired, robot.n_joints)
        friction = {'coulomb': coulomb, 'viscous': viscous}
    metadata = {
        'fit': {
            'method': result.method,
            'averaged_forward_backward': bool(average),
            'condition_number': float(result.condition_number),
            'n_samples': int(result.n_samples),
            'residual_rms': result.residual_rms().tolist(),
            'noise_std': result.noise_std.tolist(),
            'seconds': float(result.seconds),
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
