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

Long records (an hour at 1 kHz is 3.6 million samples, 1.7 GB of gravity
regressor for 6 joints) are fitted from accumulated normal equations instead:
:func:`gravity_normal_equations` sums ``A = Σ Y_kᵀ W Y_k`` and ``b = Σ Y_kᵀ W τ_k``
chunk by chunk (with per-joint moments, so the residual RMS per joint comes out
without a second pass: ``Σ r_j² = Σ τ_j² - 2 βᵀ b_j + βᵀ A_j β``), and
:func:`fit_normal_equations` / :func:`fit_joint_by_joint_normal_equations` solve
them exactly as :func:`fit_wls` / :func:`fit_joint_by_joint` do. Their results
keep no residuals (shape (0, n)); ``noise_std`` holds the per-joint residual RMS.

Every estimator returns an :class:`IdentificationResult`.

:func:`fit_best` (samples) and :func:`fit_best_moments` (accumulated moments)
run several estimators and keep one with the single selector :func:`select`:
candidates are scored on held-out groups of samples (forward/backward pairs,
sweeps or time blocks) by K-fold cross-validation, then every candidate is
refitted on all the data. Only when no group can be held out (e.g. one pair per
joint) does the in-sample residual decide, and the :class:`Selection` says so.
"""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

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
        from arm_dyn_id.model.dynamics import parameter_legend
        raise RankDeficientError(
            f'the data cannot identify {", ".join(weak)}{parameter_legend(weak)}{context} '
            f'(condition number '
            f'{condition:.3g}): excite the joints these parameters belong to in more '
            'poses, or fix them from the URDF')
    s = 1.0 / np.sqrt(np.diag(A))
    As = A * s[:, None] * s[None, :]
    beta = s * np.linalg.solve(As, b * s)
    cov_unit = (s[:, None] * np.linalg.inv(As) * s[None, :])
    return beta, cov_unit, condition


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

    @staticmethod
    def total(parts):
        """Sum of a non-empty sequence of NormalEquations."""
        parts = list(parts)
        out = parts[0]
        for part in parts[1:]:
            out = out + part
        return out


def _row_rss(neq, beta):
    """Per-joint residual sum of squares Σ (τ_j - Y_j β)² from the moments, (n,)."""
    rss = (neq.tau_sq - 2 * neq.b_joint @ beta
           + np.einsum('r,jrs,s->j', beta, neq.A_joint, beta))
    return np.clip(rss, 0.0, None)


def _joint_grams(H):
    """Σ over samples of ``H[:, j]ᵀ H[:, j]`` per joint j of stacked rows H (M, n, r):
    (n, r, r), unweighted."""
    return np.stack([H[:, j, :].T @ H[:, j, :] for j in range(H.shape[1])])


def sample_moments(Yb, tau, w, mask, keep=None):
    """:class:`NormalEquations` of stacked samples.

    Parameters
    ----------
    Yb : ndarray, (M, n, r)
    tau : ndarray, (M, n)
        N·m.
    w : ndarray, (n,)
        Per-joint weights 1/σ².
    mask : ndarray of bool, (M,)
        Samples to accumulate (finite ones).
    keep : ndarray, (M, n), optional
        0/1 per sample and joint: a 0 leaves that joint's equation of that sample out
        (its row zeroed). ``count`` still counts the samples: a joint's residual sum over
        ``count`` is low by the share it left out.

    Returns
    -------
    NormalEquations
    """
    H, y = Yb[mask], tau[mask]
    n = tau.shape[1]
    if keep is not None:
        k = keep[mask]
        H, y = H * k[:, :, None], y * k
    A_joint = _joint_grams(H)
    b_joint = np.stack([H[:, i, :].T @ y[:, i] for i in range(n)])
    return NormalEquations(np.einsum('j,jrs->rs', w, A_joint), w @ b_joint, A_joint, b_joint,
                           np.sum(y ** 2, axis=0), int(mask.sum()), w)


def _chunk_moments(robot, base, q, tau, weights):
    Yn = robot.gravity_regressor_joint_major(q)[:, base.independent, :]     # (n, r, c)
    A_joint = Yn @ Yn.transpose(0, 2, 1)                               # (n, r, r)
    b_joint = (Yn @ np.ascontiguousarray(tau.T)[:, :, None])[..., 0]   # (n, r)
    A = np.einsum('j,jrs->rs', weights, A_joint)
    b = weights @ b_joint
    neq = NormalEquations(A, b, A_joint, b_joint, np.sum(tau ** 2, axis=0), len(q), weights)
    return neq, (Yn.sum(axis=2), tau.sum(axis=0))          # Σ Y_j (n, r), Σ τ_j (n,)


def _without_offsets(neq, sums, free):
    """``neq`` of one part with a free torque offset on the joints ``free`` (n,) bool:
    their rows' means over the part eliminated (Σ (y − ȳ)(y − ȳ)ᵀ = Σ y yᵀ − c ȳ ȳᵀ)."""
    if not np.any(free) or neq.count < 2:
        return neq
    sum_y, sum_t = sums
    c = float(neq.count)
    A_joint, b_joint, tau_sq = neq.A_joint.copy(), neq.b_joint.copy(), neq.tau_sq.copy()
    for j in np.flatnonzero(free):
        A_joint[j] -= np.outer(sum_y[j], sum_y[j]) / c
        b_joint[j] -= sum_y[j] * sum_t[j] / c
        tau_sq[j] -= sum_t[j] ** 2 / c
    w = neq.weights
    return NormalEquations(np.einsum('j,jrs->rs', w, A_joint), w @ b_joint, A_joint, b_joint,
                           np.clip(tau_sq, 0.0, None), neq.count, w)


def gravity_normal_equations(robot, base, q, tau, weights=None, chunk=16384, workers=1):
    """Normal equations of the gravity fit, accumulated in chunks.

    The regressor is evaluated chunk by chunk (:meth:`RobotModel.gravity_regressor`
    vectorised), optionally on several threads (NumPy releases the GIL in its
    array kernels), and never held whole.

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

    Raises
    ------
    DataError
        Shapes that do not match the robot, bad weights, or no finite sample.
    """
    return gravity_normal_equations_parts(robot, base, q, tau, [slice(None)], weights,
                                          chunk=chunk, workers=workers)[0]


def gravity_normal_equations_parts(robot, base, q, tau, parts, weights=None, chunk=16384,
                                   workers=1, free_offsets=None):
    """:func:`gravity_normal_equations` of several parts of one record at once.

    The chunks of every part go through one thread pool, so both workers stay busy
    across parts (the held-out folds need one set of moments per pair).

    Parameters
    ----------
    parts : list of slice or ndarray of int
        The samples of each part.
    free_offsets : sequence of ndarray of bool, optional
        Per part, the joints (n,) whose torque has a free offset over that part (their
        mean over it eliminated): a forward/backward pair's joints held still.
    Other parameters as :func:`gravity_normal_equations`.

    Returns
    -------
    list of NormalEquations
        One per part.
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
    spans = []
    for k, part in enumerate(parts):
        rows = np.arange(len(q))[part] if isinstance(part, slice) else np.asarray(part)
        spans += [(k, rows[lo:lo + chunk]) for lo in range(0, len(rows), chunk)]

    def work(span):
        rows = span[1]
        qc, tc = q[rows], tau[rows]
        ok = np.all(np.isfinite(qc), axis=1) & np.all(np.isfinite(tc), axis=1)
        if not ok.all():
            qc, tc = qc[ok], tc[ok]
        return _chunk_moments(robot, base, qc, tc, weights)

    if workers > 1 and len(spans) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            moments = list(pool.map(work, spans))
    else:
        moments = [work(span) for span in spans]
    totals = []
    for k in range(len(parts)):
        mine = [m for (part, _), m in zip(spans, moments) if part == k]
        total = NormalEquations.total(m[0] for m in mine) if mine else None
        if total is None or total.count == 0:
            raise DataError('no finite samples to fit')
        if free_offsets is not None:
            sums = (sum(m[1][0] for m in mine), sum(m[1][1] for m in mine))
            total = _without_offsets(total, sums, np.asarray(free_offsets[k], dtype=bool))
        totals.append(total)
    return totals


def _result(method, names, beta, cov, condition, noise, n_samples, inliers, residuals, t0,
            info=None, warnings=()):
    """The one place an IdentificationResult is assembled (samples or moments)."""
    return IdentificationResult(
        method=method, names=tuple(names), beta=beta, std_errors=np.sqrt(np.diag(cov)),
        covariance=cov, residuals=residuals, condition_number=condition, rank=len(beta),
        n_samples=int(n_samples), inliers=inliers, noise_std=noise,
        seconds=time.perf_counter() - t0, warnings=tuple(warnings), info=info or {})


def joint_variance_covariance(cov_unit, A_joint, w, rss, count):
    """Covariance of a least-squares fit with per-joint weights ``w`` (n,), each joint's
    residual variance its own: ``(YᵀWY)⁻¹ (Σ_j w_j² s_j² Y_jᵀY_j) (YᵀWY)⁻¹``.

    One variance pooled over the joints (``cov_unit`` × the weighted residual variance)
    is right only when the weights are 1/σ² of what the residuals hold. They are the
    torque noise, and the residuals also hold what the model lacks (friction a pair
    leaves, torque held by a still joint): a joint whose noise is 100x smaller than its
    residual, such as a vertical first axis with no gravity and little noise, then set
    every parameter's standard error (~350x too large on a simulated UR5's sweeps, where
    the workspace check refused right fits, cause ``excitation``; 0.6x of the truth on
    another regressor). With weights equal to 1/s_j² this is ``cov_unit`` itself.

    Parameters
    ----------
    cov_unit : ndarray, (r, r)
        ``(YᵀWY)⁻¹``.
    A_joint : ndarray, (n, r, r)
        Σ ``Y_jᵀY_j`` over the fitted samples, per joint (unweighted).
    w : ndarray, (n,)
    rss : ndarray, (n,)
        Residual sum of squares per joint.
    count : int
        Samples fitted.

    Returns
    -------
    ndarray, (r, r)
    """
    n, r = len(w), cov_unit.shape[0]
    s2 = np.asarray(rss, dtype=float) / max(count - r / n, 1.0)
    middle = np.einsum('j,jrs->rs', w * w * s2, A_joint)
    cov = cov_unit @ middle @ cov_unit
    return (cov + cov.T) / 2


def _finish(method, names, Yb, tau, beta, cov_unit, condition, mask, w, t0, info=None,
            warnings=(), cov=None, per_joint=False):
    residuals = tau - _predict(Yb, beta)
    residuals[~mask] = np.nan
    r = residuals[mask]
    if cov is None and per_joint:
        cov = joint_variance_covariance(cov_unit, _joint_grams(Yb[mask]), w,
                                        np.sum(r ** 2, axis=0), int(mask.sum()))
    elif cov is None:
        # scale the unit-weight covariance by the weighted residual variance
        dof = max(r.size - len(beta), 1)
        cov = cov_unit * float(np.sum(w[None, :] * r ** 2) / dof)
    noise = np.sqrt(np.mean(r ** 2, axis=0)) if r.size else np.full(tau.shape[1], np.nan)
    return _result(method, names, beta, cov, condition, noise, mask.sum(), mask, residuals,
                   t0, info, warnings)


def _finish_moments(method, names, neq, beta, cov_unit, condition, t0, info, cov=None):
    """Result of a fit from moments: no residuals kept, RMS per joint from the moments."""
    rss = _row_rss(neq, beta)
    n = len(neq.tau_sq)
    if cov is None:
        cov = joint_variance_covariance(cov_unit, neq.A_joint, neq.weights, rss, neq.count)
    return _result(method, names, beta, cov, condition, np.sqrt(rss / neq.count), neq.count,
                   np.empty(0, dtype=bool), np.empty((0, n)), t0,
                   dict(info, residuals_kept=False))


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
                   info={'weights': w.tolist()}, per_joint=True)


#: Passes of :func:`bounded_solve`'s active set allowed per bounded coefficient before it
#: hands the problem to SciPy's BVLS (a cycling set: never seen on a fit's equations).
ACTIVE_SET_PASSES = 3


def _free_solve(As, bs, free, rcond):
    """The least-squares solution of the scaled normal equations (unit diagonal) over the
    ``free`` coefficients, the others at 0: by LU when a Cholesky factor shows the block
    regular (no pivot² below ``1e-10``; the smallest eigenvalue is at most the smallest
    pivot²), else by SVD with the singular directions below ``rcond`` dropped."""
    z = np.zeros(len(bs))
    idx = np.flatnonzero(free)
    if idx.size:
        block = As[np.ix_(idx, idx)]
        try:
            regular = np.min(np.diag(np.linalg.cholesky(block))) ** 2 > 1e-10
        except np.linalg.LinAlgError:
            regular = False
        z[idx] = np.linalg.solve(block, bs[idx]) if regular else \
            np.linalg.lstsq(block, bs[idx], rcond=rcond)[0]
    return z


def _active_set(As, bs, bounded, unbounded, units, rcond=1e-13):
    """Lawson and Hanson's active set on the normal equations ``As z = bs`` with
    ``z[bounded] >= 0``, started with free the bounded coefficients that the solution
    without bounds (``unbounded``) leaves positive: solve over the free ones, stepping
    back to the bound along the way when a free one would go below 0; then free the held
    one whose gradient pulls it up hardest (in the caller's ``units``, the columns' scales,
    as non-negative least squares on the caller's equations picks), and again, until none
    is pulled up. Returns z, or None when it does not settle within
    :data:`ACTIVE_SET_PASSES` passes per bounded coefficient."""
    tol = 1e-10 * max(float(np.max(np.abs(bs), initial=0.0)), 1e-300)
    free = ~bounded | (unbounded > 0)
    z = np.zeros(len(bs))
    for _ in range(ACTIVE_SET_PASSES * int(bounded.sum()) + 1):
        for _ in range(len(bs) + 1):
            trial = _free_solve(As, bs, free, rcond)
            below = free & bounded & (trial <= 0.0)
            if not below.any():
                z = trial
                break
            # the furthest step from z (feasible) toward the trial that keeps every bound
            ratios = z[below] / np.maximum(z[below] - trial[below], 1e-300)
            first = np.argmin(ratios)
            z = z + ratios[first] * (trial - z)
            free = free & ~(bounded & (z <= tol * 1e-3))
            free[np.flatnonzero(below)[first]] = False      # the one that met its bound
            z[bounded & ~free] = 0.0
        else:
            return None
        pull = bs - As @ z
        held = bounded & ~free & (pull > tol)
        if not held.any():
            return z
        free = free.copy()
        free[np.argmax(np.where(held, pull * units, -np.inf))] = True
    return None


def bounded_solve(A, b, nonnegative, sparse=False):
    """β minimising β'Aβ - 2b'β with ``β[nonnegative] ≥ 0`` (weighted least squares from
    its normal equations, some coefficients bounded below by zero).

    Lawson and Hanson's active set (:func:`_active_set`) on the column-scaled normal
    equations, in NumPy: a fit solves dozens of these and SciPy's optimisers take 0.1 s to
    import. The unbounded solution when it already satisfies the bounds. A problem the
    active set does not settle goes to bounded-variable least squares (Stark and Parker's
    BVLS, :func:`scipy.optimize.lsq_linear`) on a square-root factor of the same matrix;
    ``test/test_estimation.py`` holds the two to the same answers.

    Parameters
    ----------
    A : ndarray, (r, r)
        Symmetric positive (semi-)definite normal matrix.
    b : ndarray, (r,)
    nonnegative : ndarray of bool, (r,)
        The coefficients bounded below by 0 (friction coefficients).
    sparse : bool
        Start from every bounded coefficient at 0, freeing them one by one (Lawson and
        Hanson's own start, as :func:`scipy.optimize.nnls`): where a singular A has
        several minima, the one found frees as few as it can. By default the start is
        the unbounded solution's (fewer passes).

    Returns
    -------
    beta : ndarray, (r,)
    at_bound : ndarray of bool, (r,)
        The bounded coefficients held at 0.
    """
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    nonnegative = np.asarray(nonnegative, dtype=bool)
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
        raise ValueError('bounded least squares: the normal equations hold NaN or inf')
    d = np.sqrt(np.where(np.diag(A) > 0, np.diag(A), 1.0))
    As = A / np.outer(d, d)
    bs = b / d
    if sparse:
        z = _active_set(As, bs, nonnegative, np.zeros(len(bs)), d)
    else:
        z = _free_solve(As, bs, np.ones(len(bs), dtype=bool), 1e-13)
        if np.any(z[nonnegative] < 0):
            z = _active_set(As, bs, nonnegative, z, d)
    if z is None:
        z = _bvls(As, bs, nonnegative)
    beta = z / d
    beta[nonnegative] = np.maximum(beta[nonnegative], 0.0)
    return beta, nonnegative & (beta <= 0.0)


def _bvls(As, bs, nonnegative):
    """SciPy's BVLS on a square-root factor of the scaled normal equations."""
    from scipy.optimize import lsq_linear   # here: only a problem the active set leaves
    s, V = np.linalg.eigh(As)
    keep = s > s.max() * 1e-13
    R = np.sqrt(s[keep])[:, None] * V[:, keep].T
    y = (V[:, keep].T @ bs) / np.sqrt(s[keep])
    lower = np.where(nonnegative, 0.0, -np.inf)
    upper = np.full(len(bs), np.inf)
    return lsq_linear(R, y, bounds=(lower, upper), method='bvls', tol=1e-12).x


def nonnegative_friction(result, A, b, nonnegative, neq=None):
    """``result`` with its friction coefficients (``nonnegative``) bounded at ≥ 0.

    Unchanged when no bounded coefficient is negative; else the coefficients are
    refitted from the normal equations (A, b) of the samples it was fitted on by
    :func:`bounded_solve`, ``info['friction_at_zero']`` naming those held at 0. The
    covariance is the unbounded fit's (the bound is not a measurement).

    Parameters
    ----------
    result : IdentificationResult
    A, b : ndarray
        Weighted normal equations of the fitted samples.
    nonnegative : ndarray of bool, (r,)
    neq : NormalEquations, optional
        The moments (A, b) came from: the residual RMS per joint is recomputed.

    Returns
    -------
    IdentificationResult
    """
    nonnegative = np.asarray(nonnegative, dtype=bool)
    if not np.any(result.beta[nonnegative] < 0):
        return result
    beta, at_bound = bounded_solve(A, b, nonnegative)
    info = dict(result.info,
                friction_at_zero=[result.names[i] for i in np.flatnonzero(at_bound)])
    if neq is None:
        return replace(result, beta=beta, info=info)
    return replace(result, beta=beta, info=info,
                   noise_std=np.sqrt(_row_rss(neq, beta) / max(neq.count, 1)))


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


def _joint_by_joint(A_joint, b_joint, owners, names, row_rss, count):
    """Seed 000 eq. 10 on per-joint moments, from the last joint to the first.

    Joint i's own parameters are fitted on row i after subtracting what the
    distal parameters explain: ``b_own = Σ H_ownᵀ τ_i - Σ H_ownᵀ H_distal β_distal``.

    Parameters
    ----------
    A_joint : ndarray, (n, r, r)
        Σ ``H_iᵀ H_i`` per joint (row) i.
    b_joint : ndarray, (n, r)
        Σ ``H_iᵀ τ_i``.
    owners : ndarray of int, (r,)
        Last joint whose torque depends on each parameter (-1: none).
    row_rss : callable
        ``row_rss(i, beta)``: residual sum of squares of row i.
    count : int
        Samples behind the moments.

    Returns
    -------
    beta : ndarray, (r,)
    cov : ndarray, (r, r)
        Block diagonal: each joint's own fit (the propagation of the distal
        errors is ignored, as in the paper).
    condition : float
        The worst of the per-joint condition numbers.
    """
    if np.any(owners < 0):
        unexcited = [names[k] for k in np.flatnonzero(owners < 0)]
        raise RankDeficientError(f'the data cannot identify {", ".join(unexcited)}: '
                                 'no torque depends on them in these samples')
    n, r = b_joint.shape
    beta = np.zeros(r)
    cov = np.zeros((r, r))
    conditions = []
    for i in range(n - 1, -1, -1):
        own = np.flatnonzero(owners == i)
        if own.size == 0:
            continue
        distal = np.flatnonzero(owners > i)
        Ai = A_joint[i]
        A = Ai[np.ix_(own, own)]
        b = b_joint[i][own] - Ai[np.ix_(own, distal)] @ beta[distal]
        beta[own], cov_i, condition = solve_normal_equations(
            A, b, [names[k] for k in own], context=f' (joint {i + 1})')
        cov[np.ix_(own, own)] = cov_i * float(row_rss(i, beta)) / max(count - len(own), 1)
        conditions.append(condition)
    return beta, cov, max(conditions)


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
    H, y = Yb[mask], tau[mask]
    owners = parameter_owners(H)
    neq = sample_moments(Yb, tau, w, mask)

    def row_rss(i, beta):
        # from the residuals, not the moments: no cancellation on exact data
        resid = y[:, i] - H[:, i, :] @ beta
        return resid @ resid

    beta, cov, condition = _joint_by_joint(neq.A_joint, neq.b_joint, owners, names, row_rss,
                                           neq.count)
    return _finish('joint_by_joint', names, Yb, tau, beta, None, condition, mask, w, t0,
                   info={'owners': owners.tolist()}, cov=cov)


def fit_normal_equations(neq, names, method='wls_normal_equations', t0=None):
    """Weighted least squares from accumulated normal equations.

    Same scaling, identifiability check and covariance as :func:`fit_wls`.

    Parameters
    ----------
    neq : NormalEquations
    names : sequence of str, (r,)
    method : str
        Name recorded in the result.
    t0 : float, optional
        ``time.perf_counter()`` at the start of the work (default: now).

    Returns
    -------
    IdentificationResult
        Without residuals (shape (0, n)); ``noise_std`` from the moments.

    Raises
    ------
    RankDeficientError
        Naming the parameters the data cannot identify.
    """
    t0 = time.perf_counter() if t0 is None else t0
    beta, cov_unit, condition = solve_normal_equations(neq.A, neq.b, names)
    return _finish_moments(method, names, neq, beta, cov_unit, condition, t0,
                           {'weights': neq.weights.tolist()})


def fit_joint_by_joint_normal_equations(neq, names, t0=None):
    """Seed 000 eq. 10 from accumulated per-joint moments.

    The same estimator as :func:`fit_joint_by_joint`; a parameter is owned by
    the last joint whose moments it has a (relatively) non-zero diagonal in.

    Returns
    -------
    IdentificationResult
        Without residuals (shape (0, n)); ``noise_std`` from the moments.
    """
    t0 = time.perf_counter() if t0 is None else t0
    r = neq.b_joint.shape[1]
    diag = np.diagonal(neq.A_joint, axis1=1, axis2=2)          # (n, r)
    active = diag > 1e-12 * max(float(diag.max()), 1e-300)
    owners = np.array([np.flatnonzero(active[:, k]).max() if active[:, k].any() else -1
                       for k in range(r)])
    beta, cov, condition = _joint_by_joint(neq.A_joint, neq.b_joint, owners, names,
                                           lambda i, b: _row_rss(neq, b)[i], neq.count)
    return _finish_moments('joint_by_joint', names, neq, beta, None, condition, t0,
                           {'owners': owners.tolist()}, cov=cov)


def fit_gravity_chunked(robot, base, q, tau, noise=None, chunk=16384, workers=1):
    """Chunked WLS gravity fit: :func:`gravity_normal_equations` + solve.

    Parameters
    ----------
    robot : RobotModel
    base : BaseParameters
    q, tau : ndarray, (M, n)
        Joint angles (rad) and gravity torques (N·m).
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m); weights 1/σ².
    chunk, workers : int
        See :func:`gravity_normal_equations`.

    Returns
    -------
    IdentificationResult
    """
    t0 = time.perf_counter()
    weights = None if noise is None else _weights(noise, robot.n_joints)
    neq = gravity_normal_equations(robot, base, q, tau, weights, chunk=chunk, workers=workers)
    return fit_normal_equations(neq, base.names, t0=t0)


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
    if max_iter < 1:
        raise ValueError(f'max_iter = {max_iter} must be >= 1')
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
    else:
        # no fixed point within max_iter: the estimate and its covariance of the samples
        # kept last (not of the set before it)
        A, b = _normal_equations(Yb, tau, w, keep)
        beta, cov_unit, condition = solve_normal_equations(A, b, names)
    return _finish('threshold', names, Yb, tau, beta, cov_unit, condition, keep, w, t0,
                   info={'iterations': iteration + 1, 'rejected': rejected, 'k': k},
                   per_joint=True)


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
    # the covariance of the weighted fit on the samples kept, each joint's residual
    # variance its own (joint_variance_covariance), as the other estimators report it
    A, _ = _normal_equations(Yb, tau, w, inliers)
    try:
        _, cov_unit, _ = solve_normal_equations(A, np.zeros(len(beta)), names)
    except RankDeficientError:
        pass        # the kept samples alone do not determine it: the weighted one stays
    return _finish('irls', names, Yb, tau, beta, cov_unit, condition, inliers, w, t0,
                   info={'iterations': iteration + 1,
                         'rejected': int(use.sum() - inliers.sum())}, per_joint=True)


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
                         'rejected': int(use.sum() - inliers.sum())}, per_joint=True)


ESTIMATORS = {
    'wls': fit_wls,
    'joint_by_joint': fit_joint_by_joint,
    'threshold': fit_threshold,
    'irls': fit_irls,
    'pso': fit_pso,
}


#: Estimators that also run from accumulated moments (:class:`NormalEquations`).
MOMENT_ESTIMATORS = {
    'wls': lambda neq, names: fit_normal_equations(neq, names, method='wls'),
    'joint_by_joint': fit_joint_by_joint_normal_equations,
}

#: At most this many folds when candidates are scored on held-out groups.
HOLDOUT_FOLDS = 5

#: What a selection score is, as written in model files.
SCORE = 'weighted mean squared residual, weights 1/σ² per joint'


@dataclass(frozen=True)
class Selection:
    """How one estimator was chosen among the candidates.

    Attributes
    ----------
    by : str
        ``held_out`` (scored on data the candidate was not fitted on),
        ``in_sample`` (stated fallback: the data allows no hold-out) or
        ``single_candidate`` (nothing to choose).
    method : str
        The chosen estimator.
    reason : str
        Why the choice was made this way, in words.
    scores : dict
        method -> score (:data:`SCORE`, (N·m)² × weight); lower is better.
    folds : int
        Hold-out folds that entered the scores (0 when not held out).
    """

    by: str
    method: str
    reason: str
    scores: dict = field(default_factory=dict)
    folds: int = 0

    def to_dict(self):
        """Plain types for a model file: ``{by, method, reason, score, scores, folds}``."""
        return {'by': self.by, 'method': self.method, 'reason': self.reason,
                'score': SCORE, 'scores': {m: float(v) for m, v in self.scores.items()},
                'folds': int(self.folds)}


@dataclass(frozen=True)
class ModelChoice:
    """Outcome of :func:`select`.

    Attributes
    ----------
    result : IdentificationResult
        The chosen candidate, fitted on all the data.
    candidates : dict
        method -> IdentificationResult on all the data, or the error text.
    selection : Selection
    """

    result: IdentificationResult
    candidates: dict
    selection: Selection


def holdout_folds(strata, max_folds=HOLDOUT_FOLDS, seed=0):
    """Deal groups of samples into folds so every stratum keeps training groups.

    A group (a forward/backward pair, a sweep, a block of time) is held out only
    if its stratum (the joint it moves) has at least two groups, and no fold
    takes every group of a stratum.

    Parameters
    ----------
    strata : array_like of int, (G,)
        Stratum of each group.
    max_folds : int
    seed : int
        Seed of the random deal.

    Returns
    -------
    fold : ndarray of int, (G,)
        Fold of each group, -1 for groups that are always fitted.
    n_folds : int
        0 when no group can be held out.
    """
    strata = np.asarray(strata)
    fold = np.full(len(strata), -1)
    values, counts = np.unique(strata, return_counts=True)
    spare = int(counts[counts >= 2].sum())
    if spare < 2 or max_folds < 2:
        return fold, 0
    k = min(int(max_folds), spare)
    rng = np.random.default_rng(seed)
    offset = 0
    for value, count in zip(values, counts):
        if count < 2:
            continue
        # consecutive labels over all strata: every fold gets groups, and a
        # stratum of m >= 2 groups loses at most ceil(m / k) <= m - 1 per fold
        members = rng.permutation(np.flatnonzero(strata == value))
        fold[members] = (offset + np.arange(count)) % k
        offset += count
    return fold, k


def select(methods, fit, score, n_folds, no_folds_reason='no hold-out was possible'):
    """The model selector: score candidates on held-out data, refit the best on all.

    Parameters
    ----------
    methods : sequence of str
    fit : callable
        ``fit(method, fold)`` -> IdentificationResult fitted without fold
        ``fold``'s held-out data (``fold=None``: on all data).
    score : callable
        ``score(result, fold)`` -> (weighted sum of squared residuals, count)
        on fold ``fold``'s held-out data; ``fold=None``: the in-sample
        weighted mean squared residual (a float).
    n_folds : int
        Folds to score on; 0 means the data allows no hold-out.
    no_folds_reason : str
        Why there are no folds, recorded with an in-sample fallback.

    Returns
    -------
    ModelChoice

    Raises
    ------
    RankDeficientError
        If every candidate fails on all the data.
    """
    candidates = {}
    for method in methods:
        try:
            candidates[method] = fit(method, None)
        except RankDeficientError as exc:
            candidates[method] = str(exc)
    ok = [m for m in methods if not isinstance(candidates[m], str)]
    if not ok:
        raise RankDeficientError('; '.join(f'{m}: {e}' for m, e in candidates.items()))
    if len(ok) == 1:
        reason = ('only one estimator was run' if len(methods) == 1 else
                  'every other estimator failed on the data')
        return ModelChoice(candidates[ok[0]], candidates,
                           Selection('single_candidate', ok[0], reason))
    sse = dict.fromkeys(ok, 0.0)
    count = dict.fromkeys(ok, 0)
    used = 0
    for f in range(n_folds):
        try:
            fold_scores = {m: score(fit(m, f), f) for m in ok}
        except RankDeficientError:
            # the candidates are compared on the same folds: drop this one for all
            continue
        if any(c == 0 for _, c in fold_scores.values()):
            continue
        for m, (s, c) in fold_scores.items():
            sse[m] += s
            count[m] += c
        used += 1
    if used:
        scores = {m: sse[m] / count[m] for m in ok}
        best = min(scores, key=scores.get)
        selection = Selection('held_out', best, f'scored on held-out data in {used} of '
                              f'{n_folds} folds, then refitted on all the data', scores, used)
    else:
        if n_folds:
            no_folds_reason = (f'every one of {n_folds} hold-out folds left the training '
                               'data unable to identify the parameters')
        scores = {m: float(score(candidates[m], None)) for m in ok}
        best = min(scores, key=scores.get)
        selection = Selection('in_sample', best, f'{no_folds_reason}: chosen by the in-sample '
                              'residual, which favours the more flexible estimator', scores)
    return ModelChoice(candidates[best], candidates, selection)


def time_blocks(n_samples, blocks=HOLDOUT_FOLDS):
    """Group label of each sample: ``blocks`` contiguous blocks of time, (M,).

    Contiguous, not random, samples are held out: neighbouring samples share
    their noise after filtering and would leak into the training set.
    """
    return (np.arange(n_samples) * blocks) // max(n_samples, 1)


def fit_best(Yb, tau, names, noise=None, methods=('wls', 'joint_by_joint'), groups=None,
             strata=None, folds=HOLDOUT_FOLDS, seed=0, validation=None):
    """Run several estimators on samples and keep the one best on held-out data.

    Parameters
    ----------
    Yb : ndarray, (M, n, r)
        Base regressor at each sample.
    tau : ndarray, (M, n)
        Torques (N·m).
    names : sequence of str, (r,)
    noise : array_like, (n,), optional
        Noise σ per joint (N·m): estimator weights and score weights 1/σ².
    methods : sequence of str
        Keys of :data:`ESTIMATORS`.
    groups : ndarray of int, (M,), optional
        Group of each sample (held out together); -1: always fitted.
        Default: :func:`time_blocks`.
    strata : mapping or callable, optional
        Stratum of a group id (``strata[g]``), e.g. the joint a pair moves;
        default: one stratum.
    folds : int
        At most this many folds (:func:`holdout_folds`).
    seed : int
    validation : (Yb_val, tau_val), optional
        Held-out samples given by the caller; they replace the folds.

    Returns
    -------
    ModelChoice
    """
    Yb = np.asarray(Yb, dtype=float)
    tau = np.asarray(tau, dtype=float)
    w = _weights(noise, tau.shape[1])
    full = {}
    parts = {}        # fold (-1: always fitted) -> NormalEquations of its samples

    def fit(method, fold):
        if fold is None or validation is not None:
            if method not in full:
                full[method] = ESTIMATORS[method](Yb, tau, names, noise=noise)
            return full[method]
        if method in MOMENT_ESTIMATORS:
            # the same estimate from the other folds' moments, without a pass over Yb
            return MOMENT_ESTIMATORS[method](
                NormalEquations.total(p for f, p in parts.items() if f != fold), names)
        return ESTIMATORS[method](Yb, tau, names, noise=noise, mask=sample_fold != fold)

    def score(result, fold):
        if fold is None:
            r = result.residuals[result.inliers]
            return float(np.nanmean(w * r ** 2))
        if validation is not None:
            Yv, tv = (np.asarray(a, dtype=float) for a in validation)
            r = tv - _predict(Yv, result.beta)
            r = r[np.all(np.isfinite(r), axis=1)]
            return float(np.sum(w * r ** 2)), int(r.size)
        held = parts[fold]
        return float(w @ _row_rss(held, result.beta)), held.count * len(w)

    if validation is not None:
        return select(methods, fit, score, 1)
    groups = time_blocks(len(tau), folds) if groups is None else np.asarray(groups)
    ids = np.unique(groups[groups >= 0])
    labels = np.zeros(len(ids), dtype=int) if strata is None else \
        np.array([strata[g] for g in ids], dtype=int)
    group_fold, n_folds = holdout_folds(labels, folds, seed)
    sample_fold = np.full(len(tau), -1)
    inside = groups >= 0
    sample_fold[inside] = group_fold[np.searchsorted(ids, groups[inside])]
    if n_folds:
        finite = np.all(np.isfinite(tau), axis=1) & np.all(np.isfinite(Yb), axis=(1, 2))
        for f in range(-1, n_folds):
            parts[f] = sample_moments(Yb, tau, w, finite & (sample_fold == f))
    return select(methods, fit, score, n_folds, _no_folds_reason(labels, folds))


def fit_best_moments(parts, names, methods=('wls', 'joint_by_joint'), strata=None,
                     folds=HOLDOUT_FOLDS, seed=0):
    """:func:`fit_best` for long records: one :class:`NormalEquations` per group.

    Held-out folds cost no regressor evaluation: a fold's training moments are
    the sum of the other groups' moments, and its held-out residuals come from
    its own groups' moments (``Σ r_j² = Σ τ_j² - 2 βᵀ b_j + βᵀ A_j β``).

    Parameters
    ----------
    parts : sequence of NormalEquations, (G,)
        Moments of each group (pair, sweep or block of time).
    names : sequence of str
    methods : sequence of str
        Keys of :data:`MOMENT_ESTIMATORS`.
    strata : array_like of int, (G,), optional
        Stratum of each group (default: one stratum).

    Returns
    -------
    ModelChoice
    """
    parts = list(parts)
    unknown = [m for m in methods if m not in MOMENT_ESTIMATORS]
    if unknown:
        raise ValueError(f'estimator {unknown[0]!r} needs the samples; from moments: '
                         f'{sorted(MOMENT_ESTIMATORS)}')
    labels = np.zeros(len(parts), dtype=int) if strata is None else np.asarray(strata)
    group_fold, n_folds = holdout_folds(labels, folds, seed)
    total = NormalEquations.total(parts)

    def fit(method, fold):
        if fold is None:
            return MOMENT_ESTIMATORS[method](total, names)
        return MOMENT_ESTIMATORS[method](
            NormalEquations.total(p for p, f in zip(parts, group_fold) if f != fold), names)

    def score(result, fold):
        if fold is None:
            return float(total.weights @ result.noise_std ** 2) / len(total.weights)
        held = NormalEquations.total(p for p, f in zip(parts, group_fold) if f == fold)
        return float(total.weights @ _row_rss(held, result.beta)), held.count * len(held.tau_sq)

    return select(methods, fit, score, n_folds, _no_folds_reason(labels, folds))


def _no_folds_reason(strata, folds):
    if folds < 2:
        return f'hold-out turned off (folds={folds})'
    if len(strata) < 2:
        return f'{len(strata)} group of samples: nothing to hold out'
    return (f'{len(strata)} groups of samples (pairs), none sharing its stratum (joint) '
            'with another: holding one out would leave its joint unexcited')
