"""Momentum-based identification of a free-floating robot (seed 002).

With no external force the system's momentum is constant (seed 002 eqs. 3-6): the
momentum computed from the measured base and joint motion, ``A(q, v) φ``, equals the
known momentum ``h₀`` (zero after a release at rest; the reaction wheels' measured
momentum with the sign of eq. 6 otherwise). ``A φ`` is linear in the link parameters
(:mod:`arm_dyn_id.model.floating`), so

- :func:`fit_linear` solves ``min ‖A θ - h₀‖²`` over an affine parametrisation
  ``φ = T θ + t₀`` with the scale fixed by the weighed total mass (``Σ m = M``; with
  ``h₀ = 0`` the equations alone only fix φ up to a factor), reporting the parameters
  the motion cannot excite and leaving them at their nominal value;
- :func:`fit_ga` minimises seed 002's fitness ``H = Σ_i ‖ΔL_i‖²`` with the plain or the
  improved genetic algorithm of :func:`arm_dyn_id.optimisers.genetic_algorithm` inside a
  box, on the same data and the same mass constraint.

:func:`principal_parametrisation` is the paper's choice of unknowns (§2.1): mass and
principal moments of every body, 4 per body (28 for the 6-joint arm), CoMs and
products of inertia held at their nominal values.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.model.base_parameters import base_from_regressor
from arm_dyn_id.optimisers import genetic_algorithm

PRINCIPAL = ('m', 'Ixx', 'Iyy', 'Izz')
# relative |R_ii| of the pivoted QR (scaled unknowns) under which a column is dependent:
# the motion does not excite that unknown apart from the others
RANK_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Parametrisation:
    """``φ = T θ + t₀``: link parameters (p,) from the unknowns θ (k,).

    Attributes
    ----------
    names : tuple of str, (k,)
    T : ndarray, (p, k)
    t0 : ndarray, (p,)
    mass : ndarray, (k,)
        ``mass · θ`` + ``mass_offset`` is the total mass.
    mass_offset : float
    """

    names: tuple
    T: np.ndarray
    t0: np.ndarray
    mass: np.ndarray
    mass_offset: float

    def phi(self, theta):
        return self.T @ np.asarray(theta, float) + self.t0


def principal_parametrisation(model, phi_nominal=None, bodies=None):
    """Mass and principal moments (about the CoM, body axes) of ``bodies`` as unknowns,
    every other number of ``phi_nominal`` fixed (seed 002 §2.1).

    Parameters
    ----------
    model : FloatingModel
    phi_nominal : ndarray, (10·nb,), optional
        Default: the URDF's.
    bodies : sequence of str, optional
        Default: all bodies.

    Returns
    -------
    Parametrisation
    """
    phi = model.parameters() if phi_nominal is None else np.asarray(phi_nominal, float)
    bodies = model.body_names if bodies is None else tuple(bodies)
    p = len(phi)
    T = np.zeros((p, 4 * len(bodies)))
    t0 = phi.copy()
    names = []
    mass = np.zeros(4 * len(bodies))
    for k, body in enumerate(bodies):
        i = model.index(body, 'm')
        m = phi[i]
        if m <= 0:
            raise ConfigError(f'{body} has mass {m}: its centre of mass is undefined')
        c = phi[i + 1:i + 4] / m
        # pinocchio: I_O = I_C + m (|c|² E - c cᵀ), ordered xx, xy, yy, xz, yz, zz
        shift = (c @ c) * np.eye(3) - np.outer(c, c)
        pick = [(0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)]
        I_O = np.zeros((3, 3))
        for v, (a, b) in zip(phi[i + 4:i + 10], pick):
            I_O[a, b] = I_O[b, a] = v
        I_C = I_O - m * shift
        # θ = (m, Ixx, Iyy, Izz): φ = m·[1, c, shift] + diag parts; off-diagonals fixed
        T[i, 4 * k] = 1.0
        T[i + 1:i + 4, 4 * k] = c
        T[i + 4:i + 10, 4 * k] = [shift[a, b] for a, b in pick]
        for d, col in ((0, 1), (2, 2), (5, 3)):
            T[i + 4 + d, 4 * k + col] = 1.0
        t0[i:i + 10] = 0.0
        t0[i + 4:i + 10] = [I_C[a, b] if a != b else 0.0 for a, b in pick]
        mass[4 * k] = 1.0
        names += [f'{body}.{n}' for n in PRINCIPAL]
    fixed_mass = float(sum(phi[model.index(b, 'm')] for b in model.body_names
                           if b not in bodies))
    return Parametrisation(tuple(names), T, t0, mass, fixed_mass)


def theta_of(param, phi):
    """θ of a full parameter vector for :func:`principal_parametrisation` (least squares)."""
    return np.linalg.lstsq(param.T, np.asarray(phi, float) - param.t0, rcond=None)[0]


@dataclass
class MomentumFit:
    """Result of a momentum-based fit.

    Attributes
    ----------
    names : tuple of str
    theta : ndarray (k,)
        Estimate; unexcited parameters keep their nominal value.
    phi : ndarray (p,)
        Link parameters.
    identified : ndarray of bool (k,)
        False for parameters the motion does not excite.
    unexcited : tuple of str
        Their names.
    rms : float
        RMS momentum residual (N·s and N·m·s mixed, as in H).
    fitness : float
        Seed 002's H = Σ ‖Δh_i‖².
    method : str
    nfev : int
    seconds : float
    rank : int
        Number of base unknowns (independent columns).
    combinations : tuple of str
        What each fitted unknown stands for (dependent ones at nominal folded in).
    history : list
    std : ndarray (k,) or None
        Standard errors of the linear fit (NaN where not fitted).
    """

    names: tuple
    theta: np.ndarray
    phi: np.ndarray
    identified: np.ndarray
    unexcited: tuple
    rms: float
    fitness: float
    method: str
    nfev: int
    seconds: float
    rank: int
    combinations: tuple = ()
    history: list = field(default_factory=list)
    std: np.ndarray = None

    def errors_percent(self, truth):
        """|θ - truth| / |truth| in %, (k,)."""
        truth = np.asarray(truth, float)
        return 100 * np.abs(self.theta - truth) / np.abs(truth)


class MomentumProblem:
    """The stacked equations ``A θ = b`` of one recording.

    Parameters
    ----------
    model : FloatingModel
    Q, V : ndarray, (N, nq), (N, nv)
        Measured configurations and velocities.
    param : Parametrisation
    momentum : ndarray, (6,) or (N, 6), optional
        Known momentum h₀ (world, about the world origin); default zero.
    angular_only : bool
        Use only the angular momentum (seed 002 writes eq. 5 about the system CoM).
    """

    def __init__(self, model, Q, V, param, momentum=None, angular_only=False):
        Q = np.atleast_2d(np.asarray(Q, float))
        if len(Q) < 2:
            raise DataError(f'momentum identification needs a recording, got {len(Q)} sample')
        A = model.momentum_regressor(Q, V)
        h = np.zeros((len(Q), 6)) if momentum is None else np.broadcast_to(
            np.asarray(momentum, float), (len(Q), 6))
        rows = slice(3, 6) if angular_only else slice(0, 6)
        A, h = A[:, rows], h[:, rows]
        self.param = param
        self.samples = len(Q)
        self.B = (A @ param.T).reshape(-1, param.T.shape[1])
        self.b = (h - A @ param.t0).reshape(-1)

    def fitness(self, theta):
        """Seed 002's H (§2.4): Σ over samples of ‖Δh‖²."""
        r = self.B @ theta - self.b
        return float(r @ r)

    def excitation(self, scales, tolerance=RANK_TOLERANCE):
        """Base parameters of ``[B; mass row]`` in scaled units (pivoted QR of
        :func:`arm_dyn_id.model.base_parameters.base_from_regressor`): the independent
        unknowns are fitted, the dependent ones only enter in the combinations
        :meth:`BaseParameters.expressions` names and stay at their nominal value."""
        Bs = self.B * scales
        row = self.param.mass * scales
        row = row * np.linalg.norm(Bs) / np.linalg.norm(row) / np.sqrt(self.samples)
        return base_from_regressor(np.vstack([Bs, row]), self.param.names, 'momentum',
                                   tolerance=tolerance)


def _check_mass(total_mass):
    if total_mass is None or not np.isfinite(total_mass) or total_mass <= 0:
        raise ConfigError(f'total_mass {total_mass} must be a positive mass in kg: with '
                          'zero momentum it is what fixes the scale of the parameters')
    return float(total_mass)


def constrained_lstsq(B, b, c, target, nominal, scales, dependent=()):
    """``min ‖B θ - b‖²`` s.t. ``c·θ = target``, the ``dependent`` unknowns held at
    ``nominal``, solved in units of ``scales`` (null-space method).

    Returns
    -------
    theta : ndarray (k,)
    std : ndarray (k,)
        Standard errors from the residual variance (NaN for the held unknowns).
    sigma2 : float
        Residual variance.

    Raises
    ------
    ConfigError
        If the constraint involves only held unknowns.
    """
    nominal = np.asarray(nominal, float)
    dep = np.asarray(dependent, int)
    ind = np.setdiff1d(np.arange(len(nominal)), dep)
    cs = c[ind] * scales[ind]
    if not np.any(cs):
        raise ConfigError('no mass is among the excited unknowns: the total mass cannot '
                          'fix the scale of this fit')
    Bs = B[:, ind] * scales[ind]
    r = b - B[:, dep] @ nominal[dep]
    x_p = cs * (target - c[dep] @ nominal[dep]) / (cs @ cs)
    _, _, vt = np.linalg.svd(cs[None, :])
    Z = vt[1:].T
    BZ = Bs @ Z
    z = np.linalg.lstsq(BZ, r - Bs @ x_p, rcond=None)[0]
    x = x_p + Z @ z
    theta = nominal.copy()
    theta[ind] = scales[ind] * x
    resid = r - Bs @ x
    sigma2 = float(resid @ resid) / max(len(r) - BZ.shape[1], 1)
    cov = Z @ np.linalg.pinv(BZ.T @ BZ) @ Z.T * sigma2
    std = np.full(len(nominal), np.nan)
    std[ind] = scales[ind] * np.sqrt(np.maximum(np.diag(cov), 0.0))
    return theta, std, sigma2


def fit_linear(problem, theta_nominal, total_mass, tolerance=RANK_TOLERANCE):
    """Constrained linear solution: ``min ‖B θ - b‖²`` s.t. ``Σ m = M``.

    Only the base unknowns (independent columns of the scaled equations) are fitted;
    the others stay at ``theta_nominal`` and are named in ``unexcited`` with the
    combinations they enter (``combinations``). Standard errors come from the residual
    variance and the constrained normal matrix.

    Parameters
    ----------
    problem : MomentumProblem
    theta_nominal : ndarray, (k,)
    total_mass : float
        Weighed total mass M (kg).
    tolerance : float
        Rank threshold of the pivoted QR.

    Returns
    -------
    MomentumFit
    """
    start = time.perf_counter()
    M = _check_mass(total_mass)
    param = problem.param
    nominal = np.asarray(theta_nominal, float)
    if nominal.shape != (len(param.names),):
        raise ConfigError(f'theta_nominal must have {len(param.names)} entries, '
                          f'got {nominal.shape}')
    scales = np.where(np.abs(nominal) > 0, np.abs(nominal), 1.0)
    base = problem.excitation(scales, tolerance)
    theta, std, _ = constrained_lstsq(problem.B, problem.b, param.mass,
                                      M - param.mass_offset, nominal, scales, base.dependent)
    fit = _result(problem, theta, base, 'linear', 0, time.perf_counter() - start, [])
    fit.std = std
    return fit


def _result(problem, theta, base, method, nfev, seconds, history):
    param = problem.param
    H = problem.fitness(theta)
    identified = np.zeros(len(theta), bool)
    identified[base.independent] = True
    return MomentumFit(param.names, theta, param.phi(theta), identified,
                       tuple(param.names[i] for i in base.dependent),
                       float(np.sqrt(H / max(len(problem.b), 1))), H, method, nfev, seconds,
                       base.count, base.expressions(), history)


def fit_ga(problem, theta_nominal, total_mass, lower, upper, rng, improved=True,
           budget=24000, population=40, init_fraction=0.25, **kwargs):
    """Seed 002's genetic-algorithm identification (plain or improved) in a box.

    Genes are the unknowns but the largest-mass one, which follows from the total
    mass (``Σ m = M``); cost is the fitness H of §2.4.

    Parameters
    ----------
    problem : MomentumProblem
    theta_nominal : ndarray, (k,)
    total_mass : float
    lower, upper : ndarray, (k,)
        Search box.
    rng : numpy.random.Generator
    improved : bool
        Small-interval initialisation, large mutation, elitism (seed 002 §2.3).
    budget, population : int
    init_fraction : float
        Width of the improved GA's initial "small interval" around the nominal value,
        as a fraction of the box.
    **kwargs
        Passed to :func:`arm_dyn_id.optimisers.genetic_algorithm` (pc, pm, ...).

    Returns
    -------
    MomentumFit
    """
    M = _check_mass(total_mass)
    param = problem.param
    nominal = np.asarray(theta_nominal, float)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    if lower.shape != nominal.shape or upper.shape != nominal.shape or \
            np.any(lower >= upper):
        raise ConfigError('lower and upper must be (k,) with lower < upper everywhere')
    masses = np.flatnonzero(param.mass)
    derived = int(masses[np.argmax(nominal[masses])])
    genes = np.array([i for i in range(len(nominal)) if i != derived])
    width = upper[genes] - lower[genes]

    def theta_of_x(x):
        theta = nominal.copy()
        theta[genes] = lower[genes] + x * width
        theta[derived] = 0.0
        theta[derived] = M - param.mass_offset - param.mass @ theta
        return theta

    def cost(x):
        return problem.fitness(theta_of_x(x))

    centre = (nominal[genes] - lower[genes]) / width
    init = (centre - init_fraction / 2, centre + init_fraction / 2)
    scales = np.where(np.abs(nominal) > 0, np.abs(nominal), 1.0)
    base = problem.excitation(scales)
    res = genetic_algorithm(cost, len(genes), budget, rng, population=population,
                            improved=improved, init_box=init, **kwargs)
    return _result(problem, theta_of_x(res.x), base, res.method, res.nfev,
                   res.seconds, res.history)
