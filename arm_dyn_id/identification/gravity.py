"""From recorded low-speed data to an identified gravity model (seed 000).

``identify_gravity`` chains: sweeps from the segment markers -> forward/backward
averaging (eq. 5) -> base regressor (eqs. 7-8) -> estimators (eq. 10 and WLS,
optionally robust) -> :class:`~arm_dyn_id.model.gravity.GravityModel`.
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.errors import DataError, RankDeficientError
from arm_dyn_id.identification.estimators import ESTIMATORS, fit_best
from arm_dyn_id.identification.normal_equations import (fit_joint_by_joint_normal_equations, fit_normal_equations,
                       gravity_normal_equations)
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.identification.pairing import average_pairs, coulomb_viscous_from_pairs, sweeps_from_markers

DEFAULT_METHODS = ('wls', 'joint_by_joint')

#: Above this many samples, WLS and joint-by-joint run from per-joint moments
#: accumulated in chunks (same estimates; the regressor is never held whole).
MOMENTS_THRESHOLD = 100_000
MOMENT_ESTIMATORS = ('wls', 'joint_by_joint')


def _fit_samples(robot, base, q, tau, noise, methods, validation):
    Yb = base.reduce(robot.gravity_regressor(q))
    val = None
    if validation is not None:
        qv, tv = validation
        val = (base.reduce(robot.gravity_regressor(np.asarray(qv))), np.asarray(tv))
    return fit_best(Yb, tau, base.names, noise=noise, validation=val, methods=tuple(methods))


def _fit_from_moments(robot, base, q, tau, noise, methods):
    weights = None if noise is None else 1.0 / np.asarray(noise, dtype=float) ** 2
    neq = gravity_normal_equations(robot, base, q, tau, weights, workers=2)
    fitters = {'wls': lambda: fit_normal_equations(neq, base.names, method='wls'),
               'joint_by_joint': lambda: fit_joint_by_joint_normal_equations(neq, base.names)}
    candidates, scores = {}, {}
    for method in methods:
        try:
            result = fitters[method]()
        except RankDeficientError as exc:
            candidates[method] = str(exc)
            continue
        candidates[method] = result
        # the weighted mean squared residual, as fit_best scores candidates
        scores[method] = float(neq.weights @ result.noise_std ** 2) / len(neq.weights)
    if not scores:
        raise RankDeficientError('; '.join(f'{m}: {e}' for m, e in candidates.items()))
    return candidates[min(scores, key=scores.get)], candidates


@dataclass
class GravityFit:
    """Outcome of :func:`identify_gravity`."""

    model: GravityModel
    result: object                 # IdentificationResult of the chosen method
    candidates: dict               # method -> IdentificationResult or error text
    paired: object = None          # PairedData (None without averaging)
    info: dict = field(default_factory=dict)


def identify_gravity(robot, t, q, tau, markers=None, noise=None, methods=DEFAULT_METHODS,
                     average=True, base=None, validation=None, provenance=None):
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
        ``pso``); the one with the smallest weighted residual (or validation
        error) is kept, all are reported.
    average : bool
        Average forward/backward passes to cancel friction (seed 000 eq. 5).
        Without it, only the sweep samples are used as they are.
    validation : (q_val, tau_val), optional
        Held-out data used to choose between methods.

    Returns
    -------
    GravityFit
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if q.shape != tau.shape or q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape}, positions {q.shape} and torques {tau.shape} '
                        'must be (N,), (N, n), (N, n)')
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
    else:
        if markers:
            sweeps = sweeps_from_markers(t, markers)
            idx = np.concatenate([np.arange(s.start, s.stop) for s in sweeps]) if sweeps \
                else np.arange(len(t))
        else:
            idx = np.arange(len(t))
        q_fit, tau_fit = q[idx], tau[idx]
    unknown = [m for m in methods if m not in ESTIMATORS]
    if unknown:
        raise ValueError(f'unknown estimator {unknown[0]!r}; choose from {sorted(ESTIMATORS)}')
    if len(q_fit) > MOMENTS_THRESHOLD and validation is None and \
            set(methods) <= set(MOMENT_ESTIMATORS):
        result, candidates = _fit_from_moments(robot, base, q_fit, tau_fit, noise, methods)
    else:
        result, candidates = _fit_samples(robot, base, q_fit, tau_fit, noise, methods,
                                          validation)
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
        'provenance': dict(provenance or {}),
    }
    model = GravityModel(robot.copy(), base, result.beta, result.std_errors, friction, metadata)
    return GravityFit(model=model, result=result, candidates=candidates, paired=paired,
                      info={'n_raw_samples': int(len(t))})
