"""Gravity fits on long records without materialising the regressor.

An hour of 1 kHz data from a 6-joint arm is 3.6 million samples; its gravity
base regressor (12 columns) alone would take 3.6e6 × 6 × 12 doubles = 1.7 GB.
Weighted least squares only needs the normal equations

    A = Σ_k Y_kᵀ W Y_k,   b = Σ_k Y_kᵀ W τ_k,

which :func:`gravity_normal_equations` accumulates chunk by chunk from the
vectorised regressor (:meth:`RobotModel.gravity_regressor`), optionally on
several threads (NumPy releases the GIL in its array kernels). Per-joint moments
are kept too, so the residual RMS per joint comes out of the moments without a
second pass: ``Σ r_j² = Σ τ_j² - 2 βᵀ b_j + βᵀ A_j β``.

:func:`fit_normal_equations` solves them the way :func:`estimation.fit_wls`
does (column scaling, the same identifiability check and covariance), and
returns an :class:`~arm_dyn_id.identification.estimators.IdentificationResult` whose
``residuals`` are not kept (shape (0, n)); ``noise_std`` holds the per-joint
residual RMS.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError, RankDeficientError
from arm_dyn_id.identification.estimators import IdentificationResult, solve_normal_equations


@dataclass(frozen=True)
class NormalEquations:
    """Accumulated moments of a weighted linear least-squares problem.

    Attributes
    ----------
    A : ndarray, (r, r)
        Σ Yᵀ W Y.
    b : ndarray, (r,)
        Σ Yᵀ W τ.
    A_joint : ndarray, (n, r, r)
        Σ over samples of ``Y[j]ᵀ Y[j]`` per joint j (unweighted).
    b_joint : ndarray, (n, r)
    tau_sq : ndarray, (n,)
        Σ τ_j².
    count : int
        Samples accumulated.
    weights : ndarray, (n,)
    """

    A: np.ndarray
    b: np.ndarray
    A_joint: np.ndarray
    b_joint: np.ndarray
    tau_sq: np.ndarray
    count: int
    weights: np.ndarray

    def __add__(self, other):
        return NormalEquations(self.A + other.A, self.b + other.b,
                               self.A_joint + other.A_joint, self.b_joint + other.b_joint,
                               self.tau_sq + other.tau_sq, self.count + other.count,
                               self.weights)


def _chunk_moments(robot, base, q, tau, weights):
    Yn = robot.gravity_regressor_joint_major(q)[:, base.independent, :]     # (n, r, c)
    A_joint = Yn @ Yn.transpose(0, 2, 1)                               # (n, r, r)
    b_joint = (Yn @ np.ascontiguousarray(tau.T)[:, :, None])[..., 0]   # (n, r)
    A = np.einsum('j,jrs->rs', weights, A_joint)
    b = weights @ b_joint
    return NormalEquations(A, b, A_joint, b_joint, np.sum(tau ** 2, axis=0), len(q), weights)


def gravity_normal_equations(robot, base, q, tau, weights=None, chunk=16384, workers=1):
    """Normal equations of the gravity fit, accumulated in chunks.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
        Gravity base parameters of ``robot``.
    q : ndarray, (M, n)
        Joint angles (rad).
    tau : ndarray, (M, n)
        Gravity torques (N·m), e.g. forward/backward averages; rows with NaN are
        skipped.
    weights : array_like, (n,), optional
        Per-joint weights 1/σ² (default 1).
    chunk : int
        Samples per chunk; a few thousand keep each block in cache
        (memory ≈ chunk × n × 4·nb × 8 bytes × ~3 per worker).
    workers : int
        Threads working on chunks in parallel.

    Returns
    -------
    NormalEquations
    """
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if q.ndim != 2 or q.shape != tau.shape or q.shape[1] != robot.n_joints:
        raise DataError(f'positions {q.shape} and torques {tau.shape} must both be '
                        f'(M, {robot.n_joints})')
    n = robot.n_joints
    weights = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (n,) or np.any(~(weights > 0)):
        raise DataError(f'weights {weights.tolist()} must be one positive value per joint')
    bounds = [(lo, min(lo + chunk, len(q))) for lo in range(0, len(q), chunk)]

    def work(span):
        lo, hi = span
        qc, tc = q[lo:hi], tau[lo:hi]
        ok = np.all(np.isfinite(qc), axis=1) & np.all(np.isfinite(tc), axis=1)
        if not ok.all():
            qc, tc = qc[ok], tc[ok]
        return _chunk_moments(robot, base, qc, tc, weights)

    if workers > 1 and len(bounds) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(work, bounds))
    else:
        parts = [work(span) for span in bounds]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    if total.count == 0:
        raise DataError('no finite samples to fit')
    return total


def fit_normal_equations(neq, names, method='wls_normal_equations', t0=None):
    """Weighted least squares from accumulated normal equations.

    Same scaling, identifiability check and covariance as
    :func:`arm_dyn_id.identification.estimators.fit_wls`.

    Raises
    ------
    RankDeficientError
        Naming the parameters the data cannot identify.
    """
    t0 = time.perf_counter() if t0 is None else t0
    beta, cov_unit, condition = solve_normal_equations(neq.A, neq.b, names)
    rss = _row_rss(neq, beta)
    n = len(neq.tau_sq)
    dof = max(neq.count * n - len(beta), 1)
    cov = cov_unit * float(neq.weights @ rss / dof)
    return IdentificationResult(
        method=method, names=tuple(names), beta=beta, std_errors=np.sqrt(np.diag(cov)),
        covariance=cov, residuals=np.empty((0, n)), condition_number=condition,
        rank=len(beta), n_samples=int(neq.count), inliers=np.empty(0, dtype=bool),
        noise_std=np.sqrt(rss / neq.count), seconds=time.perf_counter() - t0,
        info={'weights': neq.weights.tolist(), 'residuals_kept': False})


def _row_rss(neq, beta):
    """Per-joint residual sum of squares Σ (τ_j - Y_j β)² from the moments, (n,)."""
    rss = (neq.tau_sq - 2 * neq.b_joint @ beta
           + np.einsum('r,jrs,s->j', beta, neq.A_joint, beta))
    return np.clip(rss, 0.0, None)


def fit_joint_by_joint_normal_equations(neq, names, t0=None):
    """Seed 000 eq. 10 from accumulated per-joint moments.

    The same estimator as :func:`arm_dyn_id.identification.estimators.fit_joint_by_joint`: joint
    i's own parameters are fitted on row i after subtracting what the distal
    parameters explain, ``b_own = Σ H_ownᵀ τ_i - Σ H_ownᵀ H_distal β_distal``.
    """
    t0 = time.perf_counter() if t0 is None else t0
    n, r = neq.b_joint.shape
    diag = np.diagonal(neq.A_joint, axis1=1, axis2=2)          # (n, r)
    active = diag > 1e-12 * max(float(diag.max()), 1e-300)
    owners = np.array([np.flatnonzero(active[:, k]).max() if active[:, k].any() else -1
                       for k in range(r)])
    if np.any(owners < 0):
        unexcited = [names[k] for k in np.flatnonzero(owners < 0)]
        raise RankDeficientError(f'the data cannot identify {", ".join(unexcited)}: '
                                 'no torque depends on them in these samples')
    beta = np.zeros(r)
    cov = np.zeros((r, r))
    conditions = []
    for i in range(n - 1, -1, -1):
        own = np.flatnonzero(owners == i)
        if own.size == 0:
            continue
        distal = np.flatnonzero(owners > i)
        Ai = neq.A_joint[i]
        A = Ai[np.ix_(own, own)]
        b = neq.b_joint[i][own] - Ai[np.ix_(own, distal)] @ beta[distal]
        beta[own], cov_i, condition = solve_normal_equations(
            A, b, [names[k] for k in own], context=f' (joint {i + 1})')
        rss_i = _row_rss(neq, beta)[i]
        cov[np.ix_(own, own)] = cov_i * rss_i / max(neq.count - len(own), 1)
        conditions.append(condition)
    rss = _row_rss(neq, beta)
    return IdentificationResult(
        method='joint_by_joint', names=tuple(names), beta=beta,
        std_errors=np.sqrt(np.diag(cov)), covariance=cov, residuals=np.empty((0, n)),
        condition_number=max(conditions), rank=r, n_samples=int(neq.count),
        inliers=np.empty(0, dtype=bool), noise_std=np.sqrt(rss / neq.count),
        seconds=time.perf_counter() - t0,
        info={'owners': owners.tolist(), 'residuals_kept': False})


def fit_gravity_chunked(robot, base, q, tau, noise=None, chunk=16384, workers=1):
    """Chunked WLS gravity fit: :func:`gravity_normal_equations` + solve.

    Parameters
    ----------
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m); weights 1/σ².

    Returns
    -------
    IdentificationResult
    """
    t0 = time.perf_counter()
    weights = None if noise is None else 1.0 / np.asarray(noise, dtype=float) ** 2
    neq = gravity_normal_equations(robot, base, q, tau, weights, chunk=chunk, workers=workers)
    return fit_normal_equations(neq, base.names, t0=t0)


__all__ = ['NormalEquations', 'gravity_normal_equations', 'fit_normal_equations',
           'fit_joint_by_joint_normal_equations', 'fit_gravity_chunked']
