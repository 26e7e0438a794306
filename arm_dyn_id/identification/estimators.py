"""Estimators of the base parameters from torques: τ = Y_b(q) β + noise.

- :func:`fit_wls`: all joints at once by weighted least squares, with per-joint
  noise weights (equal weights would let the heavy proximal joints swamp the
  light wrist joints when noise differs per joint).
- :func:`fit_joint_by_joint`: seed 000 eq. 10, from the last joint to the first,
  each step subtracting what the distal parameters already explain.
- :func:`fit_threshold`: seed 001 eqs. 14-15, residual-threshold rejection of
  gross errors, refitting until the inlier set is stable.
- :func:`fit_irls`: iteratively reweighted least squares with Tukey's biweight.
- :func:`fit_pso`: seed 001 eqs. 16-17, a particle swarm whose particles also
  learn from a random other particle, minimising the trimmed residual.

Every estimator returns an :class:`IdentificationResult`.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import DataError, RankDeficientError

# A base parameter whose relative standard error exceeds this is reported as
# poorly identified; a condition number above MAX_CONDITION is refused.
MAX_CONDITION = 1e8


@dataclass(frozen=True)
class IdentificationResult:
    """What a fit produced and how trustworthy it is.

    Attributes
    ----------
    method : str
    names : tuple of str
        Base parameter names, (r,).
    beta : ndarray, (r,)
        Estimate (kg·m for gravity parameters).
    std_errors : ndarray, (r,)
        Standard errors from the weighted covariance.
    covariance : ndarray, (r, r)
    residuals : ndarray, (M, n)
        τ - Y_b β on the fitted samples (N·m), NaN for rejected samples.
    condition_number : float
        Of the column-scaled, weighted stacked base regressor.
    rank : int
    n_samples : int
    inliers : ndarray of bool, (M,)
        Samples used by the final fit (all True for non-robust methods).
    noise_std : ndarray, (n,)
        Residual standard deviation per joint (N·m).
    seconds : float
        Wall time of the fit.
    warnings : tuple of str
    info : dict
        Method-specific extras (iterations, weights, provenance).
    """

    method: str
    names: tuple
    beta: np.ndarray
    std_errors: np.ndarray
    covariance: np.ndarray
    residuals: np.ndarray
    condition_number: float
    rank: int
    n_samples: int
    inliers: np.ndarray
    noise_std: np.ndarray
    seconds: float
    warnings: tuple = ()
    info: dict = field(default_factory=dict)

    def residual_rms(self):
        """Per-joint RMS of the inlier residuals (N·m), (n,).

        Fits from accumulated moments keep no residuals; their RMS is
        ``noise_std``, computed from the same moments."""
        if self.residuals.shape[0] == 0:
            return np.asarray(self.noise_std)
        r = self.residuals[self.inliers]
        return np.sqrt(np.nanmean(r ** 2, axis=0))

    def predict(self, base_regressor):
        """Torques Y_b β for base regressor rows (..., n, r) -> (..., n)."""
        return np.asarray(base_regressor) @ self.beta


def _check_inputs(Yb, tau, names):
    Yb = np.asarray(Yb, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if Yb.ndim != 3 or tau.ndim != 2 or Yb.shape[:2] != tau.shape:
        raise DataError(f'regressor of shape {Yb.shape} does not match torques of shape '
                        f'{tau.shape}: expected (M, n, r) and (M, n)')
    if len(names) != Yb.shape[2]:
        raise DataError(f'{len(names)} parameter names for {Yb.shape[2]} regressor columns')
    finite = np.all(np.isfinite(tau), axis=1) & np.all(np.isfinite(Yb), axis=(1, 2))
    if not finite.any():
        raise DataError('no finite torque samples to fit')
    return Yb, tau, finite


def _weights(noise, n):
    if noise is None:
        return np.ones(n)
    noise = np.asarray(noise, dtype=float)
    if noise.shape != (n,) or np.any(~np.isfinite(noise)) or np.any(noise <= 0):
        raise DataError(f'noise levels {noise.tolist()} must be one positive value per joint')
    return 1.0 / noise ** 2


def _predict(Yb, beta):
    """Y_b β for stacked rows: (M, n, r) @ (r,) -> (M, n) through one BLAS product."""
    M, n, r = Yb.shape
    return (Yb.reshape(M * n, r) @ beta).reshape(M, n)


def _normal_equations(Yb, tau, w, mask):
    """Σ over samples of Yᵀ W Y and Yᵀ W τ with per-joint weights w (n,)."""
    # as (M·n, r) matrices: one BLAS product instead of an einsum over three axes
    Ym = Yb[mask].reshape(-1, Yb.shape[2])
    Yw = Ym * np.tile(w, int(mask.sum()))[:, None]
    return Yw.T @ Ym, Yw.T @ tau[mask].reshape(-1)


def identifiability(A, names):
    """Condition number of the scaled normal matrix and the badly excited parameters.

    Parameters
    ----------
    A : ndarray, (r, r)
        Yᵀ W Y.
    names : sequence of str

    Returns
    -------
    condition : float
        Condition number of the column-scaled regressor (sqrt of that of A).
    weak : list of str
        Parameters dominating the least-excited directions (empty when fine).
    """
    diag = np.diag(A).copy()
    zero = diag <= 0
    if np.any(zero):
        return np.inf, [names[i] for i in np.flatnonzero(zero)]
    s = 1.0 / np.sqrt(diag)
    As = A * s[:, None] * s[None, :]
    eigval, eigvec = np.linalg.eigh(As)
    eigval = np.clip(eigval, 0.0, None)
    condition = float(np.sqrt(eigval[-1] / eigval[0])) if eigval[0] > 0 else np.inf
    weak = []
    if not np.isfinite(condition) or condition > MAX_CONDITION:
        threshold = eigval[-1] / MAX_CONDITION ** 2
        for k in np.flatnonzero(eigval <= threshold):
            vec = np.abs(eigvec[:, k])
            weak += [names[i] for i in np.flatnonzero(vec > 0.3 * vec.max())]
    return condition, sorted(set(weak), key=list(names).index)


def solve_normal_equations(A, b, names, context=''):
    """Solve A β = b with column scaling after the identifiability check.

    Returns
    -------
    beta : ndarray, (r,)
    cov_unit : ndarray, (r, r)
        A⁻¹ (to be scaled by the residual variance).
    condition : float

    Raises
    ------
    RankDeficientError
        Naming the parameters the data cannot identify.
    """
    condition, weak = identifiability(A, names)
    if weak:
        raise RankDeficientError(
            f'the data cannot identify {", ".join(weak)}{context} (condition number '
            f'{condition:.3g}): excite the joints these parameters belong to in more '
            'poses, or fix them from the URDF')
    s = 1.0 / np.sqrt(np.diag(A))
    As = A * s[:, None] * s[None, :]
    beta = s * np.linalg.solve(As, b * s)
    cov_unit = (s[:, None] * np.linalg.inv(As) * s[None, :])
    return beta, cov_unit, condition


def _finish(method, names, Yb, tau, beta, cov_unit, condition, mask, w, t0, info=None,
            warnings=(), cov=None):
    residuals = tau - _predict(Yb, beta)
    residuals[~mask] = np.nan
    r = residuals[mask]
    if cov is None:
        # scale the unit-weight covariance by the weighted residual variance
        dof = max(r.size - len(beta), 1)
        cov = cov_unit * float(np.sum(w[None, :] * r ** 2) / dof)
    noise = np.sqrt(np.mean(r ** 2, axis=0)) if r.size else np.full(tau.shape[1], np.nan)
    return IdentificationResult(
        method=method, names=tuple(names), beta=beta, std_errors=np.sqrt(np.diag(cov)),
        covariance=cov, residuals=residuals, condition_number=condition, rank=len(beta),
        n_samples=int(mask.sum()), inliers=mask, noise_std=noise,
        seconds=time.perf_counter() - t0, warnings=tuple(warnings), info=info or {})


def fit_wls(Yb, tau, names, noise=None, mask=None, method='wls'):
    """All joints at once by weighted least squares.

    Parameters
    ----------
    Yb : ndarray, (M, n, r)
        Base regressor at each sample.
    tau : ndarray, (M, n)
        Torques (N·m); rows with NaN are skipped.
    names : sequence of str, (r,)
    noise : array_like, (n,), optional
        Noise σ per joint (N·m); weights are 1/σ². Default: equal weights.
    mask : ndarray of bool, (M,), optional
        Samples to use.

    Returns
    -------
    IdentificationResult

    Raises
    ------
    RankDeficientError
        Naming the parameters the data cannot identify.
    """
    t0 = time.perf_counter()
    Yb, tau, finite = _check_inputs(Yb, tau, names)
    w = _weights(noise, tau.shape[1])
    mask = finite if mask is None else (finite & mask)
    A, b = _normal_equations(Yb, tau, w, mask)
    beta, cov_unit, condition = solve_normal_equations(A, b, names)
    return _finish(method, names, Yb, tau, beta, cov_unit, condition, mask, w, t0,
                   info={'weights': w.tolist()})


def parameter_owners(Yb, tol=1e-12):
    """Last joint (row) whose torque depends on each base parameter, (r,).

    Seed 000 eq. 9: the gravity regressor is block upper triangular, so the
    parameters owned by joint i appear in rows 1..i only.
    """
    active = np.any(np.abs(Yb) > tol, axis=0)            # (n, r)
    owners = np.full(Yb.shape[2], -1)
    for k in range(Yb.shape[2]):
        rows = np.flatnonzero(active[:, k])
        if rows.size:
            owners[k] = rows.max()
    return owners


def fit_joint_by_joint(Yb, tau, names, noise=None, mask=None):
    """Seed 000 eq. 10: identify from the last joint to the first.

    For joint i, the parameters it owns are fitted on row i alone, after
    subtracting the torque that the already identified distal parameters
    explain: ``τ_i - Σ_{j>i} H_ij φ_j = H_ii φ_i``.

    Returns
    -------
    IdentificationResult
        ``std_errors`` come from each joint's own fit (the propagation of the
        distal errors is ignored, as in the paper).
    """
    t0 = time.perf_counter()
    Yb, tau, finite = _check_inputs(Yb, tau, names)
    n = tau.shape[1]
    w = _weights(noise, n)
    mask = finite if mask is None else (finite & mask)
    owners = parameter_owners(Yb[mask])
    if np.any(owners < 0):
        unexcited = [names[k] for k in np.flatnonzero(owners < 0)]
        raise RankDeficientError(f'the data cannot identify {", ".join(unexcited)}: '
                                 'no torque depends on them in these samples')
    beta = np.zeros(len(names))
    cov = np.zeros((len(names), len(names)))
    conditions = []
    for i in range(n - 1, -1, -1):
        own = np.flatnonzero(owners == i)
        if own.size == 0:
            continue
        distal = np.flatnonzero(owners > i)
        H = Yb[mask][:, i, :]
        y = tau[mask][:, i] - H[:, distal] @ beta[distal]
        A = H[:, own].T @ H[:, own]
        b = H[:, own].T @ y
        est, cov_i, cond = solve_normal_equations(A, b, [names[k] for k in own],
                                                  context=f' (joint {i + 1})')
        beta[own] = est
        resid = y - H[:, own] @ est
        cov[np.ix_(own, own)] = cov_i * float(resid @ resid / max(len(resid) - len(own), 1))
        conditions.append(cond)
    return _finish('joint_by_joint', names, Yb, tau, beta, None, max(conditions), mask, w, t0,
                   info={'owners': owners.tolist()}, cov=cov)


def fit_threshold(Yb, tau, names, noise=None, k=3.0, max_iter=20, mask=None):
    """Seed 001 eqs. 14-15: reject samples whose residual exceeds k·σ and refit.

    σ per joint is estimated robustly (1.4826·MAD of the residuals) so that the
    gross errors themselves do not inflate it.
    """
    t0 = time.perf_counter()
    Yb, tau, finite = _check_inputs(Yb, tau, names)
    w = _weights(noise, tau.shape[1])
    keep = finite if mask is None else (finite & mask)
    start = keep.copy()
    rejected = 0
    for iteration in range(max_iter):
        A, b = _normal_equations(Yb, tau, w, keep)
        beta, cov_unit, condition = solve_normal_equations(A, b, names)
        resid = tau - _predict(Yb, beta)
        scale = 1.4826 * np.nanmedian(np.abs(resid[start]), axis=0)
        scale[scale == 0] = np.finfo(float).tiny
        new_keep = start & np.all(np.abs(resid) <= k * scale, axis=1)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
        rejected = int(start.sum() - keep.sum())
    return _finish('threshold', names, Yb, tau, beta, cov_unit, condition, keep, w, t0,
                   info={'iterations': iteration + 1, 'rejected': rejected, 'k': k})


def fit_irls(Yb, tau, names, noise=None, c=4.685, max_iter=50, tol=1e-10, mask=None):
    """Iteratively reweighted least squares with Tukey's biweight.

    Each sample-joint residual gets weight ``(1 - (r/(c·s))²)²`` (0 beyond c·s),
    with s the per-joint robust scale (1.4826·MAD).
    """
    t0 = time.perf_counter()
    Yb, tau, finite = _check_inputs(Yb, tau, names)
    n = tau.shape[1]
    w = _weights(noise, n)
    use = finite if mask is None else (finite & mask)
    A, b = _normal_equations(Yb, tau, w, use)
    beta, cov_unit, condition = solve_normal_equations(A, b, names)
    Ym, tm = Yb[use], tau[use]
    Ym2 = Ym.reshape(-1, Ym.shape[2])
    for iteration in range(max_iter):
        resid = tm - (Ym2 @ beta).reshape(tm.shape)
        scale = 1.4826 * np.median(np.abs(resid), axis=0)
        scale[scale == 0] = np.finfo(float).tiny
        u = resid / (c * scale)
        rw = np.where(np.abs(u) < 1, (1 - u ** 2) ** 2, 0.0) * w[None, :]
        Yw = Ym2 * rw.reshape(-1, 1)
        A = Yw.T @ Ym2
        b = Yw.T @ tm.reshape(-1)
        new_beta, cov_unit, condition = solve_normal_equations(A, b, names)
        step = np.max(np.abs(new_beta - beta) / (np.abs(beta) + 1e-12))
        beta = new_beta
        if step < tol:
            break
    inliers = use.copy()
    inliers[use] = np.all(rw > 0, axis=1)
    return _finish('irls', names, Yb, tau, beta, cov_unit, condition, inliers, w, t0,
                   info={'iterations': iteration + 1,
                         'rejected': int(use.sum() - inliers.sum())})


def fit_pso(Yb, tau, names, noise=None, rng=None, particles=40, iterations=300, k=3.0,
            mask=None, start=None, rounds=3):
    """Seed 001 eqs. 16-17: robust particle swarm with learning from random others.

    The fitness is the sum of squared residuals, standardised per joint by a
    robust scale and capped at k² (samples beyond k robust standard deviations
    count as rejected, eqs. 14-15). Velocity
    update: inertia + personal best + global best + a random other particle's
    best, with linearly decreasing inertia. The swarm searches around ``start``
    (default: the least-squares estimate) within ±(|start| + 10·stderr).

    The swarm is :func:`arm_dyn_id.optimisers.particle_swarm` with ``c3 > 0``,
    ``iterations`` moves of the whole swarm per round.

    Much slower than :func:`fit_irls`; provided for comparison.
    """
    from arm_dyn_id.optimisers import particle_swarm
    t0 = time.perf_counter()
    rng = np.random.default_rng(0) if rng is None else rng
    Yb, tau, finite = _check_inputs(Yb, tau, names)
    w = _weights(noise, tau.shape[1])
    use = finite if mask is None else (finite & mask)
    ls = fit_wls(Yb, tau, names, noise=noise, mask=use)
    centre = ls.beta if start is None else np.asarray(start, dtype=float)
    half = np.abs(centre) + 10 * ls.std_errors + 1e-9
    lo, hi = centre - half, centre + half
    Ym, tm = Yb[use], tau[use]
    scale0 = 1.4826 * np.median(np.abs(ls.residuals[use]), axis=0)
    scale0[scale0 == 0] = 1.0

    # Fitness through the normal-equation moments would ignore rejection, so it
    # is evaluated on a fixed random subsample to keep the cost bounded.
    sub = rng.choice(len(tm), size=min(len(tm), 20000), replace=False)
    Ys = np.ascontiguousarray(Ym[sub]).reshape(-1, Ym.shape[2])        # (m·n, r)
    ts = tm[sub].reshape(-1)

    def swarm_fitness(X):
        # residuals standardised per joint, capped at k (eqs. 14-15): every joint
        # counts alike, and a gross error costs no more than k² however large;
        # the whole swarm (P, r) in one matrix product
        z = (ts[:, None] - Ys @ X.T) / np.tile(scale0, len(sub))[:, None]
        return np.sum(np.minimum(z ** 2, k * k), axis=0)

    dim = len(centre)
    spread = 3 * ls.std_errors + 1e-12
    beta = centre
    for _ in range(rounds):
        # particles start scattered around the current estimate, a few standard
        # errors wide, and may roam the whole box
        x = np.clip(beta + spread * rng.standard_normal((particles, dim)), lo, hi)
        x[0] = beta
        swarm = particle_swarm(swarm_fitness, x, iterations * particles, rng,
                               cost=swarm_fitness(x), bounds=(lo, hi), inertia=(0.9, 0.4),
                               c1=1.5, c2=1.5, c3=0.5, walls='clip', batch=True)
        beta = swarm.x
        # re-estimate the robust scale from the better fit for the next round
        scale0 = 1.4826 * np.median(np.abs(ts - Ys @ beta).reshape(-1, len(scale0)), axis=0)
        scale0[scale0 == 0] = np.finfo(float).tiny
        spread = spread / 3
    resid = tau - _predict(Yb, beta)
    inliers = use & np.all(np.abs(resid) <= k * scale0, axis=1)
    A, _ = _normal_equations(Yb, tau, w, inliers)
    _, cov_unit, condition = solve_normal_equations(A, np.zeros(dim), names)
    return _finish('pso', names, Yb, tau, beta, cov_unit, condition, inliers, w, t0,
                   info={'particles': particles, 'iterations': iterations, 'rounds': rounds,
                         'rejected': int(use.sum() - inliers.sum())})


ESTIMATORS = {
    'wls': fit_wls,
    'joint_by_joint': fit_joint_by_joint,
    'threshold': fit_threshold,
    'irls': fit_irls,
    'pso': fit_pso,
}


def fit_best(Yb, tau, names, noise=None, validation=None, methods=('wls', 'joint_by_joint')):
    """Fit with several estimators and keep the better one.

    Parameters
    ----------
    validation : (Yb_val, tau_val), optional
        Held-out data on which the candidates are compared (weighted RMS);
        without it, the weighted residual RMS on the fitting data decides.

    Returns
    -------
    best : IdentificationResult
    all_results : dict
        method -> IdentificationResult (or the error message if it failed).
    """
    results = {}
    scores = {}
    w = _weights(noise, np.asarray(tau).shape[1])
    for method in methods:
        try:
            result = ESTIMATORS[method](Yb, tau, names, noise=noise)
        except RankDeficientError as exc:
            results[method] = str(exc)
            continue
        results[method] = result
        if validation is not None:
            Yv, tv = validation
            r = np.asarray(tv) - _predict(np.asarray(Yv), result.beta)
        else:
            r = result.residuals[result.inliers]
        scores[method] = float(np.nanmean(w * r ** 2))
    if not scores:
        raise RankDeficientError('; '.join(f'{m}: {e}' for m, e in results.items()))
    best = min(scores, key=scores.get)
    return results[best], results
