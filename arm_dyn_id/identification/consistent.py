"""Physically consistent full-dynamics fit: a semidefinite programme (Clarabel).

Least squares on the base parameters β can return values no rigid body has
(a negative mass hidden in a combination, an inertia violating the triangle
inequality, negative friction) when the excitation is poor. This fit works on
the standard parameters θ instead (10 per body, plus rotor inertias), with the
base parameters as the linear combinations ``β = B θ`` the data sees, and
imposes on every link (Wensing, Kim & Slotine, RA-L 2018):

- its 4x4 pseudo-inertia ``J = [[Σ, h], [hᵀ, m]] ⪰ 0``, ``Σ = ½ tr(I)·1 - I``
  (I and h about the joint frame origin, as pinocchio orders θ): this one LMI
  holds exactly for mass distributions with non-negative density, so it
  implies m ≥ 0, a positive-definite inertia and the triangle inequalities;
- each link's mass at least ``MIN_MASS_RATIO`` of its nominal mass;
- Coulomb, viscous and Stribeck coefficients and rotor inertias ≥ 0.

The LMI is on the URDF link each joint carries; links the model merges into
the moving body (fixed children such as a flange) keep their nominal values,
so the exported URDF (:mod:`arm_dyn_id.model.export`) stays valid link by link.

Objective, with x = [B θ; φ] the base and friction parameters and (A, b, c)
the weighted normal equations of the data (``Σ r² = xᵀA x - 2 bᵀx + c``)::

    (xᵀ A x - 2 bᵀ x + c) / (M·n)  +  λ Σ_i ((θ_i - θ_nom,i) / s_i)²

i.e. the mean weighted squared residual (weights 1/σ², so about 1 at the noise
level) plus a pull toward the URDF (``λ`` = ``nominal_weight``, default
:data:`NOMINAL_WEIGHT`), each parameter scaled by its size on the nominal arm:
``s = m_nom`` for masses, ``m_nom·L`` for first moments and ``m_nom·L²`` for
inertias (L the link's nominal radius of gyration, at least 5 cm). The pull
decides the directions the data does not (the non-identifiable combinations)
and weighs little against the data elsewhere.

Solved with Clarabel (interior point), given the cones directly: each link's LMI as
its PSD-triangle cone, the bounds as a nonnegative cone (no modelling layer to import
or compile). SCS (first order) is the alternative, through cvxpy.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import ConfigError, RankDeficientError

#: λ: weight of the pull toward the URDF's nominal parameters.
NOMINAL_WEIGHT = 1e-3
#: Each link keeps at least this fraction of its nominal mass.
MIN_MASS_RATIO = 0.01
SOLVERS = ('CLARABEL', 'SCS')


@dataclass(frozen=True)
class ConsistentSolution:
    """Result of :func:`solve_consistent`.

    Attributes
    ----------
    theta : ndarray, (p,)
        Standard parameters (consistent).
    phi : ndarray, (f,)
        Friction parameters.
    x : ndarray, (r + f,)
        ``[B θ, φ]``: base and friction parameters.
    solver, status : str
    seconds : float
        Wall time of the solve (building the problem included).
    min_eigenvalues : ndarray, (nb,)
        Smallest eigenvalue of each link's pseudo-inertia (kg·m²), ≥ -1e-9.
    info : dict
    """

    theta: np.ndarray
    phi: np.ndarray
    x: np.ndarray
    solver: str
    status: str
    seconds: float
    min_eigenvalues: np.ndarray
    info: dict = field(default_factory=dict)


def pseudo_inertia(theta10):
    """4x4 pseudo-inertia of 10 link parameters (pinocchio order), NumPy."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = theta10
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = (hx, hy, hz)
    J[3, 3] = m
    return J


def is_consistent(theta, n_bodies, fixed=None, tol=1e-9):
    """Whether every link's pseudo-inertia is PSD (to ``tol`` relative)."""
    return bool(np.all(link_min_eigenvalues(theta, n_bodies, fixed) >= -tol * max(
        1.0, float(np.max(np.abs(theta[:10 * n_bodies]))))))


def link_min_eigenvalues(theta, n_bodies, fixed=None):
    """Smallest pseudo-inertia eigenvalue per link, (nb,)."""
    theta = np.asarray(theta, dtype=float)[:10 * n_bodies].reshape(n_bodies, 10)
    if fixed is not None:
        theta = theta - np.asarray(fixed).reshape(n_bodies, 10)
    return np.array([np.linalg.eigvalsh(pseudo_inertia(t))[0] for t in theta])


def parameter_scales(theta_nominal, n_bodies, n_extra):
    """Scale of each standard parameter on the nominal arm, (p,)."""
    t = np.asarray(theta_nominal, dtype=float)[:10 * n_bodies].reshape(n_bodies, 10)
    masses = t[:, 0]
    mean_mass = max(float(np.mean(masses[masses > 0])) if np.any(masses > 0) else 1.0, 1e-3)
    m = np.where(masses > 0, masses, mean_mass)
    trace = t[:, 4] + t[:, 6] + t[:, 9]
    radius = np.maximum(np.sqrt(np.clip(trace, 0, None) / (2 * m)), 0.05)
    s = np.column_stack([m, m * radius, m * radius, m * radius] + [m * radius ** 2] * 6)
    extra = np.full(n_extra, float(np.mean(m * radius ** 2)))
    return np.concatenate([s.ravel(), extra])


def _psd_eigh(A):
    """Eigenvalues and vectors of A's symmetric part, negative eigenvalues (rounding) set
    to 0."""
    lam, V = np.linalg.eigh(0.5 * (A + A.T))
    return np.clip(lam, 0.0, None), V


def _sqrt_psd(A):
    lam, V = _psd_eigh(A)
    return (V * np.sqrt(lam)) @ V.T


def _psd_part(A):
    """A's symmetric part with its negative eigenvalues (rounding) set to 0."""
    lam, V = _psd_eigh(A)
    return (V * lam) @ V.T


#: A link's pseudo-inertia as Clarabel's PSD-triangle vector (upper triangle column by
#: column, off-diagonal entries x √2) from its 10 parameters (m, h, I in pinocchio order)
_R2 = np.sqrt(2.0)
_PSD_MAP = np.array([
    # m   hx   hy   hz  ixx  ixy  iyy  ixz  iyz  izz
    [0, 0, 0, 0, -.5, 0, .5, 0, 0, .5],          # J00 = (iyy + izz - ixx) / 2
    [0, 0, 0, 0, 0, -_R2, 0, 0, 0, 0],           # J01 = -ixy
    [0, 0, 0, 0, .5, 0, -.5, 0, 0, .5],          # J11
    [0, 0, 0, 0, 0, 0, 0, -_R2, 0, 0],           # J02 = -ixz
    [0, 0, 0, 0, 0, 0, 0, 0, -_R2, 0],           # J12 = -iyz
    [0, 0, 0, 0, .5, 0, .5, 0, 0, -.5],          # J22
    [0, _R2, 0, 0, 0, 0, 0, 0, 0, 0],            # J03 = hx
    [0, 0, _R2, 0, 0, 0, 0, 0, 0, 0],            # J13 = hy
    [0, 0, 0, _R2, 0, 0, 0, 0, 0, 0],            # J23 = hz
    [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]])             # J33 = m
_CLARABEL_STATUS = {'Solved': 'optimal', 'AlmostSolved': 'optimal_inaccurate'}


class ConsistentProblem:
    """The consistent fit's SDP, set up once and solved for many data sets.

    The constraints (Clarabel's ``A v + s = b`` and cones, or for SCS a cvxpy problem
    with the data as parameters, compiled once) depend on the arm only; each solve
    brings a data set's scaled normal matrix and right-hand side, so the held-out
    folds of one record share them.

    Parameters
    ----------
    A_scale : ndarray, (r + f, r + f)
        A normal matrix of the record (its diagonal scales the friction unknowns).
    B, theta_nominal, n_bodies, friction_terms, fixed, nominal_weight,
    min_mass_ratio, solver, armature
        See :func:`solve_consistent`.
    """

    def __init__(self, A_scale, B, theta_nominal, n_bodies, friction_terms, fixed=None,
                 nominal_weight=NOMINAL_WEIGHT, min_mass_ratio=MIN_MASS_RATIO,
                 solver='CLARABEL', armature=0, count=1):
        solver = str(solver).upper()
        if solver not in SOLVERS:
            raise ConfigError(f'consistent-fit solver {solver!r} must be one of {list(SOLVERS)}')
        if not (np.isfinite(nominal_weight) and nominal_weight >= 0):
            raise ConfigError(f'nominal_weight {nominal_weight} must be >= 0')
        r, p = B.shape
        f = len(friction_terms)
        self.solver, self.B, self.nb = solver, B, n_bodies
        self.nominal_weight, self.min_mass_ratio = float(nominal_weight), float(min_mass_ratio)
        theta_nominal = np.asarray(theta_nominal, dtype=float)
        self.theta_nominal = theta_nominal
        self.fixed = np.zeros((n_bodies, 10)) if fixed is None else np.asarray(fixed, float)
        self.s = parameter_scales(theta_nominal, n_bodies, p - 10 * n_bodies)
        # friction scaled by the size of its columns in the data
        diag = np.sqrt(np.clip(np.diag(A_scale)[r:] / max(int(count), 1), 1e-300, None))
        self.sf = 1.0 / np.maximum(diag, 1e-12) if f else np.zeros(0)
        T = np.zeros((r + f, p + f))
        T[:r, :p] = B * self.s
        T[r:, p:] = np.diag(self.sf)
        self.T = T
        self.p, self.f = p, f
        self.z_nom = np.concatenate([theta_nominal / self.s, np.zeros(f)])
        self.pulled = np.concatenate([np.ones(p), np.zeros(f)])
        m_nom = theta_nominal[:10 * n_bodies].reshape(n_bodies, 10)[:, 0] - self.fixed[:, 0]
        positive = [i for i, term in enumerate(friction_terms) if term in ('fc', 'fv', 'fs')]
        # v >= bound on these unknowns (scaled): the masses, the rotor inertias, the
        # physically signed friction terms
        lower = {10 * k: (min_mass_ratio * m_nom[k] + self.fixed[k, 0]) / self.s[10 * k]
                 for k in range(n_bodies) if m_nom[k] > 0}
        lower.update({i: 0.0 for i in range(p - armature, p)} if armature else {})
        lower.update({p + i: 0.0 for i in positive})
        self.lower = lower
        if solver == 'CLARABEL':
            self._cones = self._conic_constraints()
        else:
            self._cvxpy_problem()

    def _conic_constraints(self):
        """Clarabel's ``A v + s = b, s ∈ K`` for the constraints, built once: the bounds
        (nonnegative cone), then each link's pseudo-inertia ``J(s·z - fixed) ⪰ 0`` as its
        upper triangle, column by column, off-diagonal entries scaled by √2."""
        import scipy.sparse
        n_var = self.p + self.f
        rows, cols, vals, b = [], [], [], []
        for j, (i, bound) in enumerate(sorted(self.lower.items())):
            rows.append(j), cols.append(i), vals.append(-1.0), b.append(-bound)
        start = len(b)
        for k in range(self.nb):
            block = -_PSD_MAP * self.s[10 * k:10 * k + 10]
            nz = np.nonzero(block)
            rows.extend(start + 10 * k + nz[0]), cols.extend(10 * k + nz[1])
            vals.extend(block[nz])
            b.extend(-_PSD_MAP @ self.fixed[k])
        A = scipy.sparse.csc_matrix((vals, (rows, cols)), shape=(len(b), n_var))
        import clarabel
        cones = ([clarabel.NonnegativeConeT(start)] if start else []) + \
            [clarabel.PSDTriangleConeT(4) for _ in range(self.nb)]
        return A, np.asarray(b, dtype=float), cones

    def _cvxpy_problem(self):
        """The same problem in cvxpy (the SCS path), compiled once with the data as
        parameters."""
        import cvxpy as cp
        n_var = self.p + self.f
        self.R = cp.Parameter((n_var, n_var))
        self.bs = cp.Parameter(n_var)
        v = cp.Variable(n_var)
        self.v = v
        z = v[:self.p]
        objective = (cp.sum_squares(self.R @ v) - 2 * self.bs @ v
                     + self.nominal_weight * cp.sum_squares(z - self.z_nom[:self.p]))
        constraints = []
        for k in range(self.nb):
            th = cp.multiply(self.s[10 * k:10 * k + 10], z[10 * k:10 * k + 10]) - self.fixed[k]
            m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = (th[i] for i in range(10))
            half = 0.5 * (ixx + iyy + izz)
            P = cp.Variable((4, 4), PSD=True)
            constraints += [P[0, 0] == half - ixx, P[1, 1] == half - iyy,
                            P[2, 2] == half - izz, P[0, 1] == -ixy, P[0, 2] == -ixz,
                            P[1, 2] == -iyz, P[0, 3] == hx, P[1, 3] == hy, P[2, 3] == hz,
                            P[3, 3] == m]
        if self.lower:
            index = np.array(sorted(self.lower))
            constraints.append(v[index] >= np.array([self.lower[i] for i in index]))
        self.problem = cp.Problem(cp.Minimize(objective), constraints)

    def solve(self, A, b, count, c=0.0):
        """Solve for the normal equations (A, b) of ``count`` samples x joints.

        Returns
        -------
        ConsistentSolution

        Raises
        ------
        RankDeficientError
            If the solver finds no solution.
        """
        t0 = time.perf_counter()
        norm = 1.0 / max(int(count), 1)
        data = _psd_part(norm * (self.T.T @ A @ self.T))
        bs = norm * (self.T.T @ b)
        if self.solver == 'CLARABEL':
            v, status = self._solve_clarabel(data, bs)
        else:
            v, status = self._solve_cvxpy(data, bs)
        theta = self.s * np.asarray(v[:self.p])
        phi = self.sf * np.asarray(v[self.p:]) if self.f else np.zeros(0)
        eig = link_min_eigenvalues(theta, self.nb, self.fixed)
        objective = float(v @ data @ v - 2 * bs @ v + self.nominal_weight * np.sum(
            (self.pulled * (v - self.z_nom)) ** 2))
        return ConsistentSolution(
            theta=theta, phi=phi, x=np.concatenate([self.B @ theta, phi]), solver=self.solver,
            status=status, seconds=time.perf_counter() - t0,
            min_eigenvalues=eig,
            info={'nominal_weight': self.nominal_weight,
                  'min_mass_ratio': self.min_mass_ratio,
                  'objective': objective + norm * float(c),
                  'nominal_distance': float(np.sqrt(np.mean(
                      ((theta - self.theta_nominal) / self.s) ** 2)))})

    def _solve_clarabel(self, data, bs):
        """min vᵀ(D + λE)v - 2(bs + λ E z_nom)ᵀv over the cones, with Clarabel directly
        (its default tolerances, as cvxpy calls it): v, status."""
        import clarabel
        import scipy.sparse
        H = data + self.nominal_weight * np.diag(self.pulled)
        P = scipy.sparse.csc_matrix(np.triu(H))
        q = -(bs + self.nominal_weight * self.pulled * self.z_nom)
        A, b, cones = self._cones
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        try:
            result = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
        except Exception as exc:      # the solver's own error types are not exported
            raise RankDeficientError(f'the consistent fit (CLARABEL) failed: {exc}') from exc
        status = _CLARABEL_STATUS.get(str(result.status))
        if status is None:
            raise RankDeficientError('the consistent fit (CLARABEL) found no solution: '
                                     f'status {result.status}')
        return np.asarray(result.x, dtype=float), status

    def _solve_cvxpy(self, data, bs):
        import cvxpy as cp
        self.R.value = _sqrt_psd(data)
        self.bs.value = bs
        try:
            self.problem.solve(solver=cp.SCS, eps=1e-7, max_iters=20000)
        except cp.error.SolverError as exc:
            raise RankDeficientError(f'the consistent fit ({self.solver}) failed: '
                                     f'{exc}') from exc
        v = self.v.value
        if v is None or self.problem.status not in ('optimal', 'optimal_inaccurate'):
            raise RankDeficientError(f'the consistent fit ({self.solver}) found no solution: '
                                     f'status {self.problem.status}')
        return np.asarray(v, dtype=float), self.problem.status


def solve_consistent(A, b, count, B, theta_nominal, n_bodies, friction_terms, fixed=None,
                     nominal_weight=NOMINAL_WEIGHT, min_mass_ratio=MIN_MASS_RATIO,
                     solver='CLARABEL', armature=0, c=0.0):
    """The consistent fit from weighted normal equations (one data set).

    Parameters
    ----------
    A : ndarray, (r + f, r + f)
        ``Σ Wᵀ W`` over samples of the weighted base + friction regressor.
    b : ndarray, (r + f,)
    count : int
        Samples x joints behind A (normalises the data term).
    B : ndarray, (r, p)
        ``β = B θ``.
    theta_nominal : ndarray, (p,)
        URDF values (10 per body, then ``armature`` zeros).
    n_bodies : int
    friction_terms : sequence of str, (f,)
        Prefix of each friction parameter (``fc``, ``fv``, ``fo``, ``fs``);
        ``fc``, ``fv`` and ``fs`` are kept ≥ 0.
    fixed : ndarray, (nb, 10), optional
        Nominal share of merged fixed links in each body (kept as is).
    nominal_weight : float
    min_mass_ratio : float
    solver : {'CLARABEL', 'SCS'}
    armature : int
        Number of rotor-inertia parameters at the end of θ (kept ≥ 0).
    c : float
        ``Σ τᵀWτ`` (only for the reported objective).

    Returns
    -------
    ConsistentSolution (``seconds`` includes building the problem)

    Raises
    ------
    RankDeficientError
        If the solver finds no solution (the message says what it returned).
    """
    t0 = time.perf_counter()
    problem = ConsistentProblem(A, B, theta_nominal, n_bodies, friction_terms, fixed=fixed,
                                nominal_weight=nominal_weight, min_mass_ratio=min_mass_ratio,
                                solver=solver, armature=armature, count=count)
    sol = problem.solve(A, b, count, c)
    return ConsistentSolution(**{**sol.__dict__, 'seconds': time.perf_counter() - t0})


__all__ = ['ConsistentSolution', 'ConsistentProblem', 'solve_consistent', 'pseudo_inertia',
           'is_consistent', 'link_min_eigenvalues', 'parameter_scales', 'NOMINAL_WEIGHT',
           'SOLVERS']
