"""ZMP-based identification of a biped's masses and centres of mass (seed 003).

The unknowns are seed 003's Φ = [lc0, lc1, lc2, lc3, m0, m1, m2, m3] (§4: torso,
thigh, shank, foot; left and right links alike; each CoM on its link's length
direction; inertias about the CoMs from CAD). The ZMP predicted from the joint motion,
``x' = X φ(Φ) / F φ(Φ)``, ``y' = Y φ(Φ) / F φ(Φ)`` (seed 003 eqs. 5-8, written through the
contact-wrench regressor of :mod:`arm_dyn_id.model.floating`) is fitted to the ZMP of
the sole sensors under ``c·Φ = M`` (the weighed total mass, eq. 10):

- :func:`fit_newton`: the paper's iteration (eqs. 11-14): Newton steps, steepest
  descent when the Hessian is singular, every step projected on the mass constraint,
  stopped when ``‖ΔΦ‖ ≤ ε``; with the box bounds of eq. 10 and a step halving when the
  error grows (the paper tunes a fixed α by hand instead);
- :func:`fit_linear`: a linear reformulation. Multiplying by the vertical force,
  ``(X - x F) φ = 0`` and ``(Y - y F) φ = 0`` are linear in φ, and φ is linear in
  ``(m, m·lc)`` up to the small ``m·lc²`` term of the inertia about the joint (fixed
  from the previous iterate): a constrained least-squares problem, solved in a few
  passes, with no learning rate, no start point and no local minimum.
- :func:`fit_torques`: the joint-torque identification the paper compares with (eq. 1
  with the stance foot as the fixed base): in single support the stance foot carries
  the whole contact wrench, so ``τ = (Y_τ - J_footᵀ W) φ``; friction is not modelled.

Unknowns the motion does not excite (e.g. the feet's ``lc`` while both feet stay on
the ground) are found by the base-parameter QR of the scaled Jacobian, kept at their
nominal value and named in the result.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.identification.momentum import constrained_lstsq
from arm_dyn_id.model.base_parameters import base_from_regressor
from arm_dyn_id.model.floating import zmp_rows

# (type, bodies, length direction in the body frame)
SEED003_TYPES = (('torso', ('torso',), (0.0, 0.0, 1.0)),
                 ('thigh', ('thigh_l', 'thigh_r'), (0.0, 0.0, -1.0)),
                 ('shank', ('shank_l', 'shank_r'), (0.0, 0.0, -1.0)),
                 ('foot', ('foot_l', 'foot_r'), (0.0, 0.0, -1.0)))
RANK_TOLERANCE = 1e-3
_PICK = [(0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)]


def _sym6(M):
    return np.array([M[a, b] for a, b in _PICK])


class LinkTypes:
    """Seed 003's parametrisation φ(Φ) of a :class:`FloatingModel`.

    Parameters
    ----------
    model : FloatingModel
    phi_nominal : ndarray, optional
        CAD values: the other bodies' parameters and the types' inertias about their
        CoMs are taken from it (default the URDF's).
    types : sequence of (name, bodies, direction)
    """

    def __init__(self, model, phi_nominal=None, types=SEED003_TYPES):
        self.model = model
        phi = model.parameters() if phi_nominal is None else np.asarray(phi_nominal, float)
        self.types = tuple(types)
        k = len(self.types)
        self.names = tuple(f'lc_{t[0]}' for t in self.types) + tuple(
            f'm_{t[0]}' for t in self.types)
        self.count = np.array([len(t[1]) for t in self.types], float)
        self.fixed = phi.copy()
        self._bodies = []
        nominal = np.zeros(2 * k)
        for j, (name, bodies, d) in enumerate(self.types):
            d = np.asarray(d, float) / np.linalg.norm(d)
            entries = []
            for body in bodies:
                i = model.index(body, 'm')
                m = phi[i]
                c = phi[i + 1:i + 4] / m
                I_O = np.zeros((3, 3))
                for v, (a, b) in zip(phi[i + 4:i + 10], _PICK):
                    I_O[a, b] = I_O[b, a] = v
                I_C = I_O - m * ((c @ c) * np.eye(3) - np.outer(c, c))
                entries.append((i, _sym6(I_C)))
                self.fixed[i:i + 10] = 0.0
                nominal[j] += (c @ d) / len(bodies)
                nominal[k + j] += m / len(bodies)
            self._bodies.append((d, _sym6(np.eye(3) - np.outer(d, d)), entries))
        self.nominal = nominal
        self.mass_row = np.concatenate([np.zeros(k), self.count])
        self.fixed_mass = float(self.fixed[::10].sum())

    def phi(self, Phi):
        """Link parameters (p,) of Φ (2k,)."""
        k = len(self.types)
        out = self.fixed.copy()
        for j, (d, shift, entries) in enumerate(self._bodies):
            lc, m = Phi[j], Phi[k + j]
            for i, I_C in entries:
                out[i] = m
                out[i + 1:i + 4] = m * lc * d
                out[i + 4:i + 10] = I_C + m * lc * lc * shift
        return out

    def jacobian(self, Phi):
        """∂φ/∂Φ, (p, 2k)."""
        k = len(self.types)
        J = np.zeros((len(self.fixed), 2 * k))
        for j, (d, shift, entries) in enumerate(self._bodies):
            lc, m = Phi[j], Phi[k + j]
            for i, _ in entries:
                J[i, k + j] = 1.0
                J[i + 1:i + 4, j] = m * d
                J[i + 1:i + 4, k + j] = lc * d
                J[i + 4:i + 10, j] = 2 * m * lc * shift
                J[i + 4:i + 10, k + j] = lc * lc * shift
        return J

    def linear_map(self, Phi):
        """φ = T u + t0 with u = (m·lc (k), m (k)); the ``m·lc²`` term is taken at Φ."""
        k = len(self.types)
        T = np.zeros((len(self.fixed), 2 * k))
        t0 = self.fixed.copy()
        for j, (d, shift, entries) in enumerate(self._bodies):
            lc, m = Phi[j], Phi[k + j]
            for i, I_C in entries:
                T[i, k + j] = 1.0
                T[i + 1:i + 4, j] = d
                t0[i + 4:i + 10] = I_C + m * lc * lc * shift
        return T, t0


@dataclass
class ZmpFit:
    """Result of a ZMP (or torque) fit.

    Attributes
    ----------
    names : tuple of str
    Phi : ndarray (2k,)
        ``lc`` (m) then masses (kg); unexcited unknowns keep their nominal value.
    phi : ndarray (p,)
    identified : ndarray of bool (2k,)
    unexcited : tuple of str
    zmp_rms : float
        RMS distance between predicted and measured ZMP (m).
    iterations : int
    newton_steps, descent_steps : int
    method : str
    seconds : float
    history : list of (error e, ‖ΔΦ‖) per iteration
    """

    names: tuple
    Phi: np.ndarray
    phi: np.ndarray
    identified: np.ndarray
    unexcited: tuple
    zmp_rms: float
    iterations: int
    method: str
    seconds: float
    newton_steps: int = 0
    descent_steps: int = 0
    history: list = field(default_factory=list)

    @property
    def total_mass(self):
        return float(self.phi[::10].sum())


class ZmpProblem:
    """The measured ZMP and the motion of one recording.

    Parameters
    ----------
    model : FloatingModel
    Q, V, A : ndarray
        Configurations, velocities, accelerations (N, nq / nv).
    zmp : ndarray, (N, 2)
        Measured ZMP (m), e.g. :func:`arm_dyn_id.model.floating.zmp_from_sensors`.
    types : LinkTypes
    """

    def __init__(self, model, Q, V, A, zmp, types):
        zmp = np.asarray(zmp, float)
        Q = np.atleast_2d(Q)
        if zmp.shape != (len(Q), 2):
            raise DataError(f'measured ZMP must be ({len(Q)}, 2), got {zmp.shape}')
        if not np.all(np.isfinite(zmp)):
            raise DataError('measured ZMP is not finite')
        if len(Q) < 2 * len(types.names):
            raise DataError(f'{len(Q)} samples cannot fit {len(types.names)} unknowns')
        W = model.wrench_regressor(Q, V, A)
        self.X, self.Y, self.F = (np.ascontiguousarray(a) for a in zmp_rows(W))
        self.zmp = zmp
        self.types = types

    def residuals(self, Phi):
        phi = self.types.phi(Phi)
        f = self.F @ phi
        return np.concatenate([self.X @ phi / f - self.zmp[:, 0],
                               self.Y @ phi / f - self.zmp[:, 1]])

    def error(self, Phi):
        """Seed 003 eq. 9: Σ (x' - x)² + (y' - y)² (m²)."""
        r = self.residuals(Phi)
        return float(r @ r)

    def jacobian(self, Phi):
        """∂r/∂Φ, (2N, 2k)."""
        phi = self.types.phi(Phi)
        f = self.F @ phi
        x, y = self.X @ phi / f, self.Y @ phi / f
        dphi = self.types.jacobian(Phi)
        dF = self.F @ dphi
        Jx = (self.X @ dphi - x[:, None] * dF) / f[:, None]
        Jy = (self.Y @ dphi - y[:, None] * dF) / f[:, None]
        return np.vstack([Jx, Jy])

    def gradient(self, Phi):
        """G of eq. 12, 2 Jᵀ r."""
        return 2 * self.jacobian(Phi).T @ self.residuals(Phi)

    def hessian(self, Phi, scales):
        """H of eq. 12 by central differences of the analytic gradient (the paper's
        eqs. 15-20 written out), symmetrised."""
        n = len(Phi)
        H = np.empty((n, n))
        for j in range(n):
            h = 1e-6 * scales[j]
            e = np.zeros(n)
            e[j] = h
            H[:, j] = (self.gradient(Phi + e) - self.gradient(Phi - e)) / (2 * h)
        return (H + H.T) / 2

    def base(self, Phi, scales, tolerance=RANK_TOLERANCE):
        J = self.jacobian(Phi) * scales
        row = self.types.mass_row * scales
        row = row * np.linalg.norm(J) / np.linalg.norm(row) / np.sqrt(len(J))
        return base_from_regressor(np.vstack([J, row]), self.types.names, 'zmp',
                                   tolerance=tolerance)


def _check(types, Phi0, total_mass, lower, upper):
    if total_mass is None or not np.isfinite(total_mass) or total_mass <= types.fixed_mass:
        raise ConfigError(f'total_mass {total_mass} kg must exceed the known links\' '
                          f'{types.fixed_mass:.4g} kg')
    n = len(types.names)
    Phi0 = types.nominal.copy() if Phi0 is None else np.asarray(Phi0, float)
    lower = np.full(n, -np.inf) if lower is None else np.asarray(lower, float)
    upper = np.full(n, np.inf) if upper is None else np.asarray(upper, float)
    if Phi0.shape != (n,) or lower.shape != (n,) or upper.shape != (n,) or \
            np.any(lower >= upper):
        raise ConfigError(f'start, lower and upper must have {n} entries ({types.names}) '
                          'with lower < upper')
    return Phi0, lower, upper


def _project_mass(Phi, c, target):
    return Phi + c * (target - c @ Phi) / (c @ c)


def _start(problem, total_mass, Phi0, lower, upper, project=False):
    """What both fits start from: the checked start and bounds, the mass the unknowns
    share, the scales (nominal values) and the excited directions at the start."""
    types = problem.types
    Phi, lower, upper = _check(types, Phi0, total_mass, lower, upper)
    target = total_mass - types.fixed_mass
    if project:
        Phi = np.clip(_project_mass(Phi, types.mass_row, target), lower, upper)
    scales = np.where(np.abs(types.nominal) > 0, np.abs(types.nominal), 1.0)
    return Phi, lower, upper, target, scales, problem.base(Phi, scales)


def fit_newton(problem, total_mass, Phi0=None, lower=None, upper=None, alpha=0.02,
               eps=1e-7, max_iterations=500):
    """Seed 003's constrained Newton / steepest-descent iteration (eqs. 9-14).

    Parameters
    ----------
    problem : ZmpProblem
    total_mass : float
        Weighed mass of the whole robot (kg).
    Phi0 : ndarray (2k,), optional
        Start (default the nominal values); projected onto the mass constraint.
    lower, upper : ndarray (2k,), optional
        Bounds Φ_min, Φ_max of eq. 10.
    alpha : float
        Learning rate of the steepest-descent step (eq. 13; the paper's 0.02).
    eps : float
        Stop when ‖ΔΦ‖ ≤ ε (eq. 14).
    max_iterations : int

    Returns
    -------
    ZmpFit
    """
    start = time.perf_counter()
    types = problem.types
    c = types.mass_row
    Phi, lower, upper, target, scales, base = _start(problem, total_mass, Phi0, lower, upper,
                                                     project=True)
    free = np.zeros(len(Phi), bool)
    free[base.independent] = True
    cf = c * free
    if not np.any(cf):
        raise ConfigError('no mass is excited: the total mass cannot be kept')
    target = target - c[~free] @ Phi[~free]
    S = scales * free                                  # held unknowns never move
    cs = c * S
    _, _, vt = np.linalg.svd(cs[None, free])
    Zs = np.zeros((len(Phi), free.sum() - 1))
    Zs[free] = vt[1:].T                                # constraint plane, scaled units
    e = problem.error(Phi)
    history, newton, descent, it = [], 0, 0, 0
    rate = alpha
    for it in range(1, max_iterations + 1):
        G = problem.gradient(Phi) * S
        H = problem.hessian(Phi, scales) * np.outer(S, S)
        Hr = Zs.T @ H @ Zs
        w = np.linalg.eigvalsh(Hr)
        if w[0] > 1e-10 * max(w[-1], 1e-300):
            step = -Zs @ np.linalg.solve(Hr, Zs.T @ G)     # eq. 12, in the constraint plane
            newton += 1
            kind = 'newton'
        else:
            # eq. 13 in scaled units (lc and m differ by 100x), the step length adapted:
            # halved on failure below, doubled after a success
            g = Zs @ (Zs.T @ G)
            step = -rate * g / max(np.linalg.norm(g), 1e-300)
            descent += 1
            kind = 'descent'
        step = step * S                                  # scaled units -> lc (m), m (kg)
        # stay inside the box (eq. 10): shorten the whole step, which keeps c·ΔΦ = 0
        t = 1.0
        for j in np.flatnonzero(step):
            room = (upper[j] - Phi[j]) if step[j] > 0 else (lower[j] - Phi[j])
            t = min(t, max(room / step[j], 0.0))
        step = t * step
        accepted = False
        for _ in range(40):
            if problem.error(Phi + step) <= e:
                accepted = True
                break
            step = step / 2
            if kind == 'descent':
                rate /= 2
        if not accepted:
            step = np.zeros_like(step)
        elif kind == 'descent':
            rate = min(2 * rate, 1.0)
        Phi = Phi + step
        e = problem.error(Phi)
        norm = float(np.linalg.norm(step))
        history.append((e, norm))
        if norm <= eps:                                  # eq. 14
            break
    Phi = _project_mass(Phi, cf, target)
    return _fit(problem, Phi, base, 'newton', it, time.perf_counter() - start,
                newton, descent, history)


def _fit(problem, Phi, base, method, iterations, seconds, newton=0, descent=0, history=()):
    types = problem.types
    identified = np.zeros(len(Phi), bool)
    identified[base.independent] = True
    r = problem.residuals(Phi)
    n = len(r) // 2
    dist = np.sqrt(r[:n] ** 2 + r[n:] ** 2)
    return ZmpFit(types.names, Phi, types.phi(Phi), identified,
                  tuple(types.names[i] for i in base.dependent),
                  float(np.sqrt(np.mean(dist ** 2))), iterations, method, seconds,
                  newton, descent, list(history))


def _u_to_Phi(u, k):
    h, m = u[:k], u[k:]
    return np.concatenate([h / m, m])


def fit_linear(problem, total_mass, Phi0=None, lower=None, upper=None, passes=3):
    """Linear reformulation: ``(X - x F) φ = 0``, ``(Y - y F) φ = 0`` with φ linear in
    ``u = (m·lc, m)``, solved under ``Σ m = M`` by constrained least squares; the
    small ``m·lc²`` inertia term is updated between ``passes``. Results outside the
    bounds are clipped (and the masses re-projected on the total).

    Returns
    -------
    ZmpFit
    """
    start = time.perf_counter()
    types = problem.types
    Phi, lower, upper, target, scales, base = _start(problem, total_mass, Phi0, lower, upper)
    k = len(types.names) // 2
    c_u = np.concatenate([np.zeros(k), types.count])
    x, y = problem.zmp[:, 0:1], problem.zmp[:, 1:2]
    rows = np.vstack([problem.X - x * problem.F, problem.Y - y * problem.F])
    rows = rows / np.median(np.abs(problem.F @ types.phi(Phi)))     # metres
    u_nom = np.concatenate([Phi[:k] * Phi[k:], Phi[k:]])
    dep = base.dependent
    for _ in range(passes):
        T, t0 = types.linear_map(Phi)
        B = rows @ T
        b = -rows @ t0
        u_scale = np.where(np.abs(u_nom) > 0, np.abs(u_nom), 1.0)
        u, _, _ = constrained_lstsq(B, b, c_u, target, u_nom, u_scale, dep)
        Phi = _u_to_Phi(u, k)
    # bounds and the total mass: alternate projections on the box and on the mass plane
    # (both convex), ending on the plane so the total is exact
    cm = types.mass_row * np.isin(np.arange(2 * k), dep, invert=True)
    target_free = target - types.mass_row[dep] @ Phi[dep]
    for _ in range(200):
        Phi = _project_mass(np.clip(Phi, lower, upper), cm, target_free)
    return _fit(problem, Phi, base, 'linear', passes, time.perf_counter() - start)


def torque_rows(model, Q, V, A, stance_foot):
    """Joint-torque regressor with the stance foot carrying the whole contact wrench:
    ``τ = (Y_τ - J_footᵀ W) φ`` (N, n, p), pinocchio's world-frame foot Jacobian."""
    Y = model.joint_torque_regressor(Q, V, A)
    W = model.wrench_regressor(Q, V, A)
    fid = model.frame_id(stance_foot)
    out = np.empty_like(Y)
    for k, q in enumerate(np.atleast_2d(Q)):
        pin.computeJointJacobians(model.model, model.data, q)
        pin.updateFramePlacements(model.model, model.data)
        J = pin.getFrameJacobian(model.model, model.data, fid, pin.WORLD)[:, 6:]
        # pinocchio's WORLD jacobian pairs with a wrench about the world origin
        out[k] = Y[k] - J.T @ W[k]
    return out


def fit_torques(model, Q, V, A, tau, types, stance_foot, total_mass=None, passes=3):
    """Joint-torque identification of the same unknowns (seed 003 eq. 1 with the stance
    foot fixed; friction not modelled): least squares over all joints and samples,
    under ``Σ m = M`` when ``total_mass`` is given, the unknowns the torques cannot
    separate (base-parameter QR) held at their nominal value and named."""
    start = time.perf_counter()
    tau = np.asarray(tau, float)
    R = torque_rows(model, Q, V, A, stance_foot)
    if tau.shape != R.shape[:2]:
        raise DataError(f'joint torques must be {R.shape[:2]}, got {tau.shape}')
    k = len(types.names) // 2
    Phi = types.nominal.copy()
    rows = R.reshape(-1, R.shape[-1])
    scales = np.abs(types.nominal)
    base = base_from_regressor(rows @ types.jacobian(Phi) * scales, types.names, 'torque',
                               tolerance=RANK_TOLERANCE)
    c_u = np.concatenate([np.zeros(k), types.count])
    for _ in range(passes):
        T, t0 = types.linear_map(Phi)
        u_nom = np.concatenate([Phi[:k] * Phi[k:], Phi[k:]])
        u_scale = np.where(np.abs(u_nom) > 0, np.abs(u_nom), 1.0)
        if total_mass is None:
            B = rows @ T
            ind = base.independent
            u = u_nom.copy()
            rhs = tau.reshape(-1) - rows @ t0 - B[:, base.dependent] @ u_nom[base.dependent]
            u[ind] = u_scale[ind] * np.linalg.lstsq(B[:, ind] * u_scale[ind], rhs,
                                                    rcond=None)[0]
        else:
            u, _, _ = constrained_lstsq(rows @ T, tau.reshape(-1) - rows @ t0, c_u,
                                        total_mass - types.fixed_mass, u_nom, u_scale,
                                        base.dependent)
        Phi = _u_to_Phi(u, k)
    identified = np.zeros(len(Phi), bool)
    identified[base.independent] = True
    return ZmpFit(types.names, Phi, types.phi(Phi), identified,
                  tuple(types.names[i] for i in base.dependent), float('nan'), passes,
                  'torque', time.perf_counter() - start)


def stance_motion(model, t, q, stance_foot, foot_pose, window=0.5, order=3):
    """Configurations, velocities and accelerations of a biped from joint angles alone,
    the stance foot standing still at ``foot_pose`` (no motion capture, seed 003 §3):
    the joint angles are smoothed and differentiated by a Savitzky-Golay filter
    (zero phase, ``window`` seconds), the torso pose follows by kinematics.

    Parameters
    ----------
    model : FloatingModel
    t : ndarray (N,)
        Uniform sample times (s).
    q : ndarray (N, n)
    stance_foot : str
    foot_pose : pinocchio.SE3
    window : float
    order : int

    Returns
    -------
    Q, V, A : ndarray (N, nq), (N, nv), (N, nv)
    """
    from arm_dyn_id.data.filters import savgol_filter
    t = np.asarray(t, float)
    q = np.asarray(q, float)
    if t.ndim != 1 or q.shape != (len(t), model.n):
        raise DataError(f'joint angles must be ({len(t)}, {model.n}), got {q.shape}')
    dt = np.diff(t)
    if len(t) < 3 or np.any(dt <= 0) or np.ptp(dt) > 1e-6 * max(dt.mean(), 1e-12) + 1e-9:
        raise DataError('sample times must be uniform and increasing')
    h = float(dt.mean())
    n_win = max((order + 2) | 1, int(round(window / h)) | 1)      # odd, more than order
    if n_win > len(t):
        raise DataError(f'{len(t)} samples are fewer than the {n_win}-sample smoothing window')
    qs = savgol_filter(q, n_win, order, axis=0)
    Q = model.base_from_foot(qs, stance_foot, foot_pose)
    # base twist in its own frame by differences of the configuration on the manifold
    V = np.empty((len(t), model.nv))
    for k in range(len(t)):
        a, b = max(k - 1, 0), min(k + 1, len(t) - 1)
        V[k] = pin.difference(model.model, Q[a], Q[b]) / ((b - a) * h)
    V[:, 6:] = savgol_filter(q, n_win, order, deriv=1, delta=h, axis=0)
    V[:, :6] = savgol_filter(V[:, :6], n_win, order, axis=0)
    A = savgol_filter(V, n_win, order, deriv=1, delta=h, axis=0)
    return Q, V, A
