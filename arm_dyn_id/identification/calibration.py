"""Torque constants from twin recordings without and with a load of known mass.

The arm runs the same trajectory twice: without a load (U) and with a rigid load
of known mass m at a frame f (L). With motor currents i (A) and torque
constants k (N·m/A, ``τ_j = k_j i_j``), at the same q, q̇, q̈ the arm's own
dynamics and its friction cancel in the difference, and what is left is the
load's torque (:func:`~arm_dyn_id.identification.payload.payload_full_regressor`):

    k_j Δi_j(t) = [Y_f(q, q̇, q̈) π]_j,      Δi = i_L(t + s) - i_U(t),

with π = (m, h, I_f) the load's ten inertial parameters in its frame (h = m c,
I_f about the frame's origin), m known, and s the time shift that aligns the
runs. Written with the error in the current, the measured quantity (the
"difference formulation" of issue 23),

    Δi_j(t) = a_j ([Y_f π]_j + d_j(t)) + e_j(t),      a_j = 1 / k_j,        (1)

is bilinear in the unknowns (a, π_free): π_free = h (3), and the six inertia
terms when the motion excites them. ``d`` is the nominal URDF's torque
difference between the two runs' actual states (the loaded run tracks the
trajectory a little differently); it is small, and known.

Friction cancels only when it is the same in both runs. Runs taken on other
days (temperature) or a gear whose friction grows with its load break that, so
per-joint Coulomb and viscous terms of the *difference* may be added to (1),
``+ c_j tanh(q̇_j / ε) + v_j q̇_j`` (and an offset ``o_j``, off by default: it
absorbs the constant part of the load's gravity torque), in A. They are linear
and per joint, so they are projected out of Δi and of every column of (1) joint
by joint before the bilinear fit (Frisch-Waugh-Lovell: the same estimates as
fitting them).

A least-squares formulation in which the unloaded run only constrains the arm
(the arm's parameters and the constants fitted together on both runs, the
error put in the torque) is biased low: the issue's author measured 0.87x the
known mass back on a real UR10e pair. Equation (1) has no arm parameters, and
its error sits where the noise is (the current), so that bias does not arise.

**Alignment** (:func:`align`): the shift s minimising the mean of
``|q_L(t + s) - q_U(t)|²`` over the overlap (at least half the shorter run),
first on a grid by FFT cross-correlation, then to a fraction of a sample by a
bounded scalar search on linearly interpolated q. A periodic excitation matches
itself a period later as well: of the shifts that fit within twice the best mean
square (plus :data:`TIE_RAD`), the one with the longest overlap is taken.

**Solution** (:func:`calibrate`): alternating least squares (for fixed π each
a_j is a one-column fit; for fixed a, π_free is linear), then Gauss-Newton
(``scipy.optimize.least_squares``, Levenberg-Marquardt) on (1) weighted by each
joint's residual σ_j, re-estimated once; from seven starts of the centre of mass
(the frame's origin and 5 cm along each axis both ways), since h = 0 alone can
be a saddle (see :func:`_solve`).

**Standard errors.** Residuals of filtered data are correlated in time, so the
plain ``σ² (JᵀJ)⁻¹`` is too small. The covariance is the sandwich over time
blocks (a Newey-West-type estimator with a rectangular kernel):

    C = H⁻¹ (Σ_b g_b g_bᵀ) H⁻¹ · B / (B - p),      H = JᵀJ,   g_b = Σ_{t∈b} J_tᵀ r_t,

with B blocks of at least twice the residuals' correlation time (the first lag
where their autocorrelation falls below 1/e) and p parameters, ``se(k_j) =
se(a_j) / a_j²`` (first order). Model errors that vary slowly over the run (a
real arm's) are not seen by blocks that short, so a block jackknife is computed
too: the fit repeated with each of G = :data:`JACKKNIFE_BLOCKS` contiguous blocks
left out, ``var(k_j) = (G - 1) / G Σ_g (k_j^(g) - mean_g k_j^(g))²``. Each
standard error is the largest of the three. On simulated twins (the set-up of
``test/test_calibrate.py``, 8 draws) the normalised errors have an RMS of 0.6-1.3
per joint; on the real UR10e pair the halves of the unloaded run give constants
that differ by up to 3 combined standard errors (docs/benchmarks.md).

**Determination.** A joint is *determined* when its relative standard error is
at most :data:`DETERMINED` (5 %), *poorly determined* up to
:data:`UNDETERMINED` (20 %), *undetermined* beyond (or with k ≤ 0). For joints
that are not determined the result says why, from the load's torque on that
joint: only inertial (its axis stays along gravity: joint 1 of a vertical arm),
the load's centre of mass on its axis (joint 6 with a load centred on the
flange), or a signal small against the current noise.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from arm_dyn_id.data.preparation import choose_cutoff, prepare, resample
from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.identification.payload import (INERTIA_PARAMS, MIN_INERTIA_EXCITATION,
                                               inertia_excitation, payload_full_regressor,
                                               payload_regressor)
from arm_dyn_id.model.payload import frame_reached, payload_frame

#: relative standard error of k at or below which a joint is determined
DETERMINED = 0.05
#: relative standard error of k beyond which a joint is undetermined
UNDETERMINED = 0.20
#: the shorter run's share the two runs must overlap by
MIN_OVERLAP = 0.5
#: a centre of mass closer than this to a joint's axis (m) is "on the axis"
ON_AXIS_M = 0.01
FIRST_MOMENT_PARAMS = ('mx', 'my', 'mz')
#: RMS difference of q per joint (rad) below which two shifts match equally well
TIE_RAD = 1e-3
#: RMS difference of q per joint (rad) after the best shift beyond which the two runs are
#: not one trajectory (a real UR10e pair: 7e-5 rad; a loaded arm tracks a little worse)
MAX_ALIGN_RAD = 0.02
#: distance (m) of the centre of mass from the frame's origin in the solver's starts
START_OFFSET_M = 0.05
#: with a smaller scaled Jacobian condition (min / max singular value) the load's inertia
#: trades with a joint's constant and the load is taken as a point mass (inertia='auto')
MIN_RCOND = 1e-4
#: rad/s: the smooth sign tanh(q̇ / ε) of the friction-difference columns
FRICTION_EPS = 0.01
#: per-joint terms of the friction difference between the runs that can be fitted
FRICTION_TERMS = ('coulomb', 'viscous', 'offset')
#: time blocks of the block jackknife
JACKKNIFE_BLOCKS = 8


@dataclass(frozen=True)
class Alignment:
    """How two runs of one trajectory line up: ``q_other(t + shift) ≈ q_ref(t)``.

    Attributes
    ----------
    shift_s : float
        s: the other run's time of the ref run's t = 0 motion, relative to its
        own start, minus the ref's (both measured from each run's first stamp).
    rms_rad : float
        RMS of ``q_other(t + shift) - q_ref(t)`` over the overlap (rad).
    overlap_s : float
        Length of the overlap (s).
    """

    shift_s: float
    rms_rad: float
    overlap_s: float


def align(t_ref, q_ref, t_other, q_other, rate=None):
    """The time shift s with ``q_other(t + s) ≈ q_ref(t)``, times from each run's start.

    Parameters
    ----------
    t_ref, t_other : ndarray, (N,) and (K,)
        Stamps (s), any origin and spacing.
    q_ref, q_other : ndarray, (N, n) and (K, n)
        Joint angles (rad) of the same joints.
    rate : float, optional
        Grid rate (Hz) of the coarse search; default the ref's median rate.

    Returns
    -------
    Alignment

    Raises
    ------
    DataError
        Joint counts differ, or no shift overlaps the runs by
        :data:`MIN_OVERLAP` of the shorter one.
    """
    tr, qr, _, info = resample(t_ref, q_ref, rate=rate)
    fs = info['rate_hz']
    to, qo, _, _ = resample(t_other, q_other, rate=fs)
    if qr.shape[1] != qo.shape[1]:
        raise DataError(f'the runs have {qr.shape[1]} and {qo.shape[1]} joints')
    tr, to = tr - tr[0], to - to[0]
    N, K = len(tr), len(to)
    # mean squared difference for every lag L (other index = ref index + L), via FFT
    size = 1 << int(np.ceil(np.log2(N + K)))
    cross = np.zeros(N + K - 1)
    for j in range(qr.shape[1]):
        spec = np.fft.rfft(qo[:, j], size) * np.conj(np.fft.rfft(qr[:, j], size))
        c = np.fft.irfft(spec, size)
        cross += np.concatenate([c[-(N - 1):] if N > 1 else [], c[:K]])
    lags = np.arange(-(N - 1), K)
    cr = np.concatenate([[0.0], np.cumsum(np.sum(qr ** 2, axis=1))])
    co = np.concatenate([[0.0], np.cumsum(np.sum(qo ** 2, axis=1))])
    lo = np.maximum(0, -lags)                   # ref index range [lo, hi)
    hi = np.minimum(N, K - lags)
    count = hi - lo
    ss = (cr[hi] - cr[lo]) + (co[hi + lags] - co[lo + lags]) - 2 * cross
    need = MIN_OVERLAP * min(N, K)
    msd = np.where(count >= need, ss / np.maximum(count, 1), np.inf)
    if not np.isfinite(msd).any():
        raise DataError('the runs are too short to align')
    # a periodic excitation matches itself one period later too: of the shifts that fit
    # (about) as well as the best, the one that overlaps the runs the most
    floor = float(np.min(msd))
    good = msd <= 2.0 * floor + TIE_RAD ** 2 * qr.shape[1]
    local = np.r_[True, msd[1:] <= msd[:-1]] & np.r_[msd[:-1] <= msd[1:], True]
    candidates = np.nonzero(good & local)[0]
    best = int(lags[candidates[np.argmax(count[candidates])]])

    def cost(shift):
        inside = (tr + shift >= 0) & (tr + shift <= to[-1])
        if inside.sum() < need:
            return np.inf
        other = np.column_stack([np.interp(tr[inside] + shift, to, qo[:, j])
                                 for j in range(qo.shape[1])])
        return float(np.mean(np.sum((other - qr[inside]) ** 2, axis=1)))

    res = scipy.optimize.minimize_scalar(cost, bounds=((best - 1) / fs, (best + 1) / fs),
                                         method='bounded', options={'xatol': 1e-4 / fs})
    shift = float(res.x) if res.fun <= cost(best / fs) else best / fs
    inside = (tr + shift >= 0) & (tr + shift <= to[-1])
    return Alignment(shift_s=shift, rms_rad=float(np.sqrt(cost(shift) / qr.shape[1])),
                     overlap_s=float(np.ptp(tr[inside])))


@dataclass(frozen=True)
class Calibration:
    """Torque constants identified from twin runs (see the module notes).

    Attributes
    ----------
    joints : tuple of str
    torque_constants : ndarray, (n,)
        k (N·m/A), ``τ = k · i``.
    std_errors : ndarray, (n,)
        Standard errors of k (N·m/A), the larger of the block sandwich and the
        plain estimate.
    determination : tuple of str
        Per joint: 'determined', 'poorly determined' or 'undetermined'.
    advice : tuple of str
        Per joint: why it is not determined and what motion would determine it
        ('' when determined).
    mass : float
        The known load mass (kg).
    com, com_std_errors : ndarray, (3,)
        The load's fitted centre of mass in ``frame`` and its standard errors (m).
    inertia : ndarray, (6,) or None
        Fitted inertia about the frame's origin (kg·m², pinocchio's order), when
        the motion excites it.
    frame : str
    alignment : Alignment
    residual_rms : ndarray, (n,)
        RMS of the residual of eq. (1) per joint (A).
    signal_rms : ndarray, (n,)
        RMS of the load's torque per joint (N·m), and its gravity part
        ``gravity_rms``.
    gravity_rms : ndarray, (n,)
    n_samples : int
    info : dict
        cut-off, blocks, iterations, how the errors were computed.
    refusal : tuple (cause, text) or None
        Why the constants are not to be used (:func:`_judge`): ``units`` (the two runs'
        efforts in different units), ``frame`` (the load hangs beyond the frame given),
        ``short`` (an overlap too short for honest standard errors), ``swapped`` (the
        loaded run given as the unloaded), ``sign`` (every current's sign reversed),
        ``scale`` (the constants make the unloaded run's torque another scale than the
        URDF's: the mass or the effort's units); None when nothing says so.
    """

    joints: tuple
    torque_constants: np.ndarray
    std_errors: np.ndarray
    determination: tuple
    advice: tuple
    mass: float
    com: np.ndarray
    com_std_errors: np.ndarray
    inertia: np.ndarray
    frame: str
    alignment: Alignment
    residual_rms: np.ndarray
    signal_rms: np.ndarray
    gravity_rms: np.ndarray
    n_samples: int
    info: dict = field(default_factory=dict)
    refusal: tuple = None

    @property
    def relative_std_errors(self):
        return self.std_errors / np.abs(self.torque_constants)

    def to_dict(self):
        """Plain types for JSON: the constants, their errors, per-joint determination."""
        joints = {}
        for j, name in enumerate(self.joints):
            joints[name] = {
                'torque_constant': float(self.torque_constants[j]),
                'std_error': float(self.std_errors[j]),
                'relative_std_error': float(self.relative_std_errors[j]),
                'determination': self.determination[j], 'advice': self.advice[j],
                'load_torque_rms': float(self.signal_rms[j]),
                'load_gravity_torque_rms': float(self.gravity_rms[j]),
                'residual_rms_current': float(self.residual_rms[j])}
        return {
            'joints': list(self.joints),
            'torque_constants': [float(k) for k in self.torque_constants],
            'torque_constants_std_error': [float(s) for s in self.std_errors],
            'per_joint': joints,
            'load': {'frame': self.frame, 'mass': float(self.mass),
                     'com': [float(c) for c in self.com],
                     'com_std_error': [float(c) for c in self.com_std_errors],
                     'inertia_about_frame_origin': None if self.inertia is None
                     else [float(x) for x in self.inertia]},
            'alignment': {'shift_s': self.alignment.shift_s,
                          'rms_rad': self.alignment.rms_rad,
                          'overlap_s': self.alignment.overlap_s},
            'n_samples': int(self.n_samples),
            'refused': None if self.refusal is None else
            {'cause': self.refusal[0], 'reason': self.refusal[1]},
            'units': {'torque_constants': 'N·m/A (τ = k·i)', 'com': 'm, in the frame',
                      'inertia': 'kg·m², pinocchio order xx, xy, yy, xz, yz, zz',
                      'load_torque_rms': 'N·m', 'residual_rms_current': 'A'},
            'info': self.info,
        }


def _interp(t_new, t, x):
    """Linear interpolation of x (M, ...) along axis 0 at t_new."""
    flat = x.reshape(len(t), -1)
    out = np.column_stack([np.interp(t_new, t, flat[:, c]) for c in range(flat.shape[1])])
    return out.reshape((len(t_new),) + x.shape[1:])


def _correlation_samples(r):
    """First lag where the joints' mean residual autocorrelation falls below 1/e."""
    r = r - r.mean(axis=0)
    n = len(r)
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spec = np.fft.rfft(r, size, axis=0)
    acf = np.fft.irfft(np.abs(spec) ** 2, size, axis=0)[:n]
    acf = acf / np.where(acf[0] > 0, acf[0], 1.0)
    mean = acf.mean(axis=1)
    below = np.nonzero(mean < np.exp(-1.0))[0]
    return int(below[0]) if len(below) else n


def _scaled_rcond(J):
    """Smallest over largest singular value of J with unit-norm columns."""
    norms = np.linalg.norm(J, axis=0)
    if np.any(norms == 0):
        return 0.0
    s = np.linalg.svd(J / norms, compute_uv=False)
    return float(s[-1] / s[0])


def _inverse(H):
    """H⁻¹ of a symmetric positive semi-definite H, scaled; a direction H does not
    see gets a variance of 1e12 times its scale (never 0 as a pseudo-inverse would)."""
    d = np.sqrt(np.where(np.diag(H) > 0, np.diag(H), 1.0))
    lam, V = np.linalg.eigh(H / np.outer(d, d))
    lam = np.maximum(lam, 1e-12 * max(lam[-1], 1e-300))
    return (V / lam) @ V.T / np.outer(d, d)


def _covariance(J, r, n_time, p):
    """Plain and block-sandwich covariance of a weighted least-squares solution.

    J (n_time * n, p) and r (n_time * n,) are time-major (row = t * n + j),
    already weighted so that the plain covariance is ``s² (JᵀJ)⁻¹``.
    """
    Hinv = _inverse(J.T @ J)
    dof = max(len(r) - p, 1)
    plain = Hinv * float(r @ r) / dof
    n = len(r) // n_time
    corr = _correlation_samples(r.reshape(n_time, n))
    block = int(min(max(2 * corr, 5), n_time // max(2 * p, 10) or 1))
    blocks = max(n_time // block, 1)
    g = np.zeros((blocks, p))
    scores = (J * r[:, None]).reshape(n_time, n, p).sum(axis=1)
    for b in range(blocks):
        end = n_time if b == blocks - 1 else (b + 1) * block
        g[b] = scores[b * block:end].sum(axis=0)
    meat = g.T @ g * (blocks / max(blocks - p, 1))
    sandwich = Hinv @ meat @ Hinv
    return plain, sandwich, {'block_samples': block, 'blocks': blocks,
                             'correlation_samples': corr}


def _solve(di, Y0, Yf, d, mass, iterations=10, starts=None):
    """Alternating least squares, then Levenberg-Marquardt, of eq. (1), from several starts.

    Parameters
    ----------
    di : ndarray, (M, n)
        Current differences (A).
    Y0 : ndarray, (M, n)
        Regressor column of the mass.
    Yf : ndarray, (M, n, r)
        Columns of the free load parameters (first moment first).
    d : ndarray, (M, n)
        Known torque difference (N·m).
    starts : list of ndarray, (r,), optional
        Starts of π_free; default the seven described below.

    Returns
    -------
    x : ndarray, (n + r,)
        (a, π_free).
    r : ndarray, (M·n,)
        Weighted residual, time-major.
    J : ndarray, (M·n, n + r)
        Its Jacobian.
    raw : ndarray, (M, n)
        Unweighted residual (A).
    nfev : int

    Notes
    -----
    The problem is bilinear, and a centre of mass on an axis of symmetry of the
    motion is a saddle: started from h = 0 alone, a joint whose signal then
    vanishes (the last one, for a load centred on the flange) gets a = 0 and
    passes no gradient to h. The starts are h = 0 and h = m·c for c at
    :data:`START_OFFSET_M` along ±x, ±y, ±z of the frame; the lowest cost wins.
    """
    M, n, r = Yf.shape
    base = Y0 * mass + d

    def residual(x, w):
        s = base + Yf @ x[n:]
        return ((di - x[:n] * s) * w).ravel()

    def jacobian(x, w):
        a, pi = x[:n], x[n:]
        s = base + Yf @ pi
        J = np.zeros((M, n, n + r))
        J[:, np.arange(n), np.arange(n)] = -s * w
        J[:, :, n:] = -(a * w)[None, :, None] * Yf
        return J.reshape(M * n, n + r)

    # per joint: Σ_t Yf Yfᵀ, Σ_t Yf Δi, Σ_t Yf base (the normal equations for π)
    gram = np.einsum('tjp,tjq->jpq', Yf, Yf)
    y_di = np.einsum('tjp,tj->jp', Yf, di)
    y_base = np.einsum('tjp,tj->jp', Yf, base)

    def fit(pi, w):
        a = np.zeros(n)
        for _ in range(iterations):
            s = base + Yf @ pi
            a = np.sum(di * s, axis=0) / np.maximum(np.sum(s * s, axis=0), 1e-300)
            c = (a * w) ** 2
            A = np.einsum('j,jpq->pq', c, gram)
            b = np.einsum('j,jp->p', a * w ** 2, y_di) - np.einsum('j,jp->p', c, y_base)
            pi = np.linalg.lstsq(A, b, rcond=None)[0]
        return scipy.optimize.least_squares(residual, np.concatenate([a, pi]), jac=jacobian,
                                            method='lm', xtol=1e-12, ftol=1e-12, args=(w,))

    if starts is None:
        starts = [np.zeros(r)]
        for axis in range(3):
            for sign in (1.0, -1.0):
                start = np.zeros(r)
                start[axis] = sign * START_OFFSET_M * mass
                starts.append(start)
    w = np.ones(n)
    nfev = 0
    for _ in range(2):              # unit weights, then the residuals' σ per joint
        sols = [fit(start, w) for start in starts]
        nfev += sum(int(s.nfev) for s in sols)
        sol = min(sols, key=lambda s: s.cost)
        raw = di - sol.x[:n] * (base + Yf @ sol.x[n:])
        sigma = np.sqrt(np.mean(raw ** 2, axis=0))
        w = 1.0 / np.where(sigma > 0, sigma, 1.0)
        starts = [sol.x[n:]]
    x = sol.x
    return x, residual(x, w), jacobian(x, w), raw, nfev


def _advice(robot, name, j, rel, signal, gravity, noise_torque, com_distance):
    """Why joint j is not well determined and what motion would determine it better."""
    if com_distance < ON_AXIS_M:
        return (f'{name}: the load\'s centre of mass is on its axis ({100 * com_distance:.1f} '
                'cm away on average): mount the load off-axis')
    if gravity < 0.1 * signal:
        return (f'{name}: only inertial torque of the load reaches it (its axis stays along '
                f'gravity): move {name} with larger accelerations, or tilt the joints '
                'before it')
    if signal < 3 * noise_torque:
        return (f'{name}: the load\'s torque on it ({signal:.2g} N·m RMS) is small against '
                f'the current noise ({noise_torque:.2g} N·m): use a heavier load, or poses '
                'that hold it farther from the axis')
    return (f'{name}: the load\'s torque on it ({signal:.2g} N·m RMS) is weak against the '
            f'residual ({noise_torque:.2g} N·m RMS): a heavier load, held farther from its axis, '
            'or a longer recording')


def _com_axis_distance(robot, q, frame, com, count=100):
    """Mean distance (m) of the load's centre of mass from each joint's axis, (n,)."""
    import pinocchio as pin
    model, data = robot.model, robot.data
    fid = model.getFrameId(frame)
    rows = q[np.linspace(0, len(q) - 1, min(count, len(q))).astype(int)]
    out = np.zeros(robot.n_joints)
    for qk in rows:
        pin.framesForwardKinematics(model, data, robot._pin_q(qk))
        c = data.oMf[fid].act(np.asarray(com, dtype=float))
        for k, jid in enumerate(robot._jid):
            axis = np.asarray(robot._axes[int(jid) - 1], dtype=float)
            placement = data.oMi[int(jid)]
            z = placement.rotation @ (axis / np.linalg.norm(axis))
            out[k] += np.linalg.norm(np.cross(c - placement.translation, z))
    return out / len(rows)


def default_frame(robot):
    """'flange' if the model has it, else 'tool0', else the last joint's tip link."""
    import pinocchio as pin
    model = robot.model
    for name in ('flange', 'tool0'):
        if model.existFrame(name):
            return name
    last = int(robot._jid.max())
    bodies = [f for f in model.frames if (f.parentJoint if hasattr(f, 'parentJoint')
                                          else f.parent) == last and
              f.type == pin.FrameType.BODY]
    if not bodies:
        raise JointNameError(f'no frame on the last joint of {robot.source}: pass --frame')
    return bodies[-1].name


def _annihilate(columns, *arrays):
    """Each joint's part of ``arrays`` orthogonal to its ``columns`` (M, n, c) over time.

    For per-joint linear nuisance terms ``Δi_j = a_j s_j + F_j c_j + e_j`` the
    estimates of (a, π) are those of the same problem with Δi_j, s_j (and every
    column of s_j) replaced by their residuals on F_j (Frisch-Waugh-Lovell).
    """
    out = [np.array(a, dtype=float, copy=True) for a in arrays]
    for j in range(columns.shape[1]):
        F = columns[:, j, :]
        Qf, _ = np.linalg.qr(F)
        for a in out:
            x = a[:, j]
            a[:, j] = x - Qf @ (Qf.T @ x)
    return out


#: The two runs' effort per N·m of the URDF's torque (the loaded run's with the load as a
#: point mass at its frame) differing by more than this factor either way on every judged
#: joint: the runs are in different units (current and torque differ by k ~ 10 on most
#: drives, A and mA by 1000). A centre of mass off the frame, friction and inertia move
#: it by tens of percent, not 3x.
RUN_LEVEL_LIMIT = 3.0
#: Blocks of twice the residual's correlation time the overlap must hold at least: fewer,
#: and the standard errors come from blocks shorter than the correlation (they understate).
MIN_BLOCKS = 10


def _judge(robot, k, rel, reached, determination, mass, runs, blocks, p, overlap_s, frame,
           residual, noise):
    """Whether constants found may be used: (cause, text) or None.

    ``runs``: (unloaded current, the URDF's torque there, loaded current, the URDF's torque
    there, the load's as a point mass at its frame), on the aligned samples. In turn: the
    two runs' current per N·m off by :data:`RUN_LEVEL_LIMIT` the same way on every judged
    joint, with the load's torque counted and without it (units: before anything
    fitted); a joint the frame cannot reach (not ``reached``) whose runs differ by more than
    the raw current's noise (its filtered ``residual`` against ``noise``, A: the load
    hangs beyond the frame); an overlap too short for honest standard errors (fewer than
    :data:`MIN_BLOCKS` blocks of twice the residual's correlation time); every constant
    that says anything negative: the bags swapped, or every current's sign reversed (told
    apart by the unloaded run's current against the URDF's torque); the unloaded run's
    torque with these constants against the URDF's (the mass or the effort's units)."""
    from arm_dyn_id.validation.check import holding_friction
    from arm_dyn_id.validation.plausibility import (JOINT_SCALE_LIMIT, judge_level,
                                                    level_scales)
    names = list(robot.joint_names)
    floor = holding_friction(robot)
    i_unloaded, nominal, i_loaded, nominal_loaded, point = runs
    unloaded_level = level_scales(i_unloaded, nominal, floor)
    # with the load (a heavy one raises the distal joints' current) and without it (the
    # mass given may be the mistake): off the same way both, on every judged joint
    ratio = np.abs(level_scales(i_loaded, nominal_loaded + point, floor) / unloaded_level)
    bare = np.abs(level_scales(i_loaded, nominal_loaded, floor) / unloaded_level)
    judged = np.isfinite(ratio) & np.isfinite(bare)
    both = np.minimum(ratio, bare), np.maximum(ratio, bare)
    if judged.any() and (np.all(both[0][judged] > RUN_LEVEL_LIMIT) or
                         np.all(both[1][judged] < 1 / RUN_LEVEL_LIMIT)):
        each = ', '.join(f'{names[j]} x{ratio[j]:.3g}' for j in np.flatnonzero(judged))
        return 'units', (f'the loaded run\'s current per N·m of the URDF\'s torque (the load '
                         f'as a point mass at its frame) is not the unloaded run\'s ({each}): '
                         'the two are in different units (one motor current, one joint '
                         'torque; A and mA)')
    unreached = np.flatnonzero(~reached & (residual > noise))
    if len(unreached):
        each = ', '.join(f'{names[j]} {residual[j]:.2g} A (noise {noise[j]:.2g} A)'
                         for j in unreached)
        which = ', '.join(names[j] for j in unreached)
        return 'frame', (f'the load at {frame!r} cannot turn {which}, yet the runs\' currents '
                         f'differ there by more than the noise ({each}): the load hangs '
                         f'beyond {frame!r}: give the frame it is attached to (--frame)')
    n_time = len(i_unloaded)
    need = 2 * blocks['correlation_samples'] * MIN_BLOCKS
    if n_time < need:
        return 'short', (f'the aligned runs overlap by {overlap_s:.3g} s ({n_time} prepared '
                         f'samples), fewer than {MIN_BLOCKS} blocks of twice the residual\'s '
                         f'correlation ({blocks["correlation_samples"]} samples): the '
                         'constants and their errors mean nothing. Record the trajectory '
                         'longer, the same in both runs (a whole period of the excitation)')
    said = reached & np.isfinite(rel) & (rel < 0.5)
    if said.sum() >= 2 and np.all(k[said] < 0):
        each = ', '.join(f'{names[j]} {k[j]:.3g}' for j in np.flatnonzero(said))
        signs = unloaded_level[np.isfinite(unloaded_level)]
        if len(signs) and np.all(signs < 0):
            return 'sign', (f'every joint\'s constant came out negative ({each}) and the '
                            'unloaded run\'s current opposes the URDF\'s torque: every '
                            'current\'s sign is reversed (current_signs: -1 on every joint)')
        return 'swapped', (f'every joint\'s constant came out negative ({each}) while the '
                           'unloaded run\'s current follows the URDF\'s torque: the loaded '
                           'run was given as UNLOADED_BAG: swap the two bags (not the current '
                           'signs)')
    used = np.array([d != 'undetermined' for d in determination])
    if not used.any():
        return None
    verdict = judge_level(np.where(used, i_unloaded * k, np.nan), nominal, names,
                          floor=floor, limit=JOINT_SCALE_LIMIT, reference='the URDF\'s')
    scales = {j: s for j, s in verdict.checks['level'].items() if s is not None}
    if verdict.ok or not scales:
        return None
    if verdict.cause == 'sign':
        return 'sign', verdict.reason
    typical = float(np.exp(np.median(np.log(np.abs(list(scales.values()))))))
    each = ', '.join(f'{j} x{s:.3g}' for j, s in scales.items())
    return 'scale', (f'with these constants the unloaded run\'s torque is {typical:.3g}x the '
                     f'URDF\'s ({each}): is the load\'s mass right (--mass {mass:g}, in kg)? '
                     'Or is the effort not motor current in A (mA; joint torque already, '
                     'which gives constants near 1)?')


def calibrate(robot, unloaded, loaded, mass, frame=None, inertia='auto', cutoff_hz=None,
              arm_correction=True, friction=('coulomb', 'viscous')):
    """Torque constants from twin runs without and with a load of known mass.

    Parameters
    ----------
    robot : RobotModel
        The arm's kinematics (its URDF inertias serve only the small correction
        ``d`` of eq. (1), see ``arm_correction``).
    unloaded, loaded : tuple (t, q, i)
        Stamps (N,) s, joint angles (N, n) rad and motor currents (N, n) A of
        the run without and with the load (any time origin; the loaded run
        may start earlier or later).
    mass : float
        The load's mass (kg), known.
    frame : str, optional
        Frame of the load (default :func:`default_frame`).
    inertia : {'auto', True, False}
        Fit the load's inertia: when the motion excites it, always, never.
    cutoff_hz : float, optional
        Low-pass cut-off of both runs; default chosen from the unloaded run's
        q (:func:`~arm_dyn_id.data.preparation.choose_cutoff`).
    arm_correction : bool
        Subtract the nominal URDF's torque difference between the runs'
        actual states (their tracking differs a little).

    Returns
    -------
    Calibration

    Raises
    ------
    DataError
        Shapes, a mass that is not positive, runs that do not overlap.
    JointNameError
        A frame that is not in the model.
    """
    if not (np.isfinite(mass) and mass > 0):
        raise DataError(f'load mass {mass} kg must be positive')
    # a frame the URDF lacks, or that no joint moves, refused as for a payload
    frame = default_frame(robot) if frame is None else payload_frame(robot, frame)
    reached = frame_reached(robot, frame)
    n = robot.n_joints
    (tu, qu, iu), (tl, ql, il) = [tuple(np.asarray(a, dtype=float) for a in run)
                                  for run in (unloaded, loaded)]
    for label, (t, q, i) in (('unloaded', (tu, qu, iu)), ('loaded', (tl, ql, il))):
        if q.ndim != 2 or q.shape[1] != n or i.shape != q.shape or t.shape != q.shape[:1]:
            raise DataError(f'{label} run: t {t.shape}, q {q.shape}, i {i.shape} must be '
                            f'(N,), (N, {n}), (N, {n})')
    alignment = align(tu, qu, tl, ql)
    if not alignment.rms_rad <= MAX_ALIGN_RAD:
        raise DataError(f'the two runs are not the same trajectory: after the best shift '
                        f'({alignment.shift_s:+.3f} s) their joint angles still differ by '
                        f'{alignment.rms_rad:.3g} rad RMS (at most {MAX_ALIGN_RAD:g}); record '
                        'one trajectory twice, without and with the load')
    if cutoff_hz is None:
        t_, q_, _, info = resample(tu, qu)
        cutoff_hz, source = choose_cutoff(q_, info['rate_hz'])
    else:
        source = 'given'

    def regressor(q, dq, ddq):
        return payload_full_regressor(robot, q, dq, ddq, frame)

    pu = prepare(tu - tu[0], qu, iu, cutoff_hz=cutoff_hz)
    pl = prepare(tl - tl[0], ql, il, cutoff_hz=cutoff_hz, regressor=regressor)
    # the unloaded samples whose twin lies inside the loaded run
    t_twin = pu.t + alignment.shift_s
    inside = (t_twin >= pl.t[0]) & (t_twin <= pl.t[-1])
    if inside.sum() < 20:
        raise DataError(f'the aligned runs overlap by {inside.sum()} prepared samples only')
    t_twin = t_twin[inside]
    qL, dqL, ddqL = (_interp(t_twin, pl.t, x) for x in (pl.q, pl.dq, pl.ddq))
    P = _interp(t_twin, pl.t, pl.regressor)                      # (M, n, 10)
    di = _interp(t_twin, pl.t, pl.tau) - pu.tau[inside]
    # the URDF's rigid-body torques (N·m) at the unloaded run's states and the loaded run's
    nominal = robot.inverse_dynamics(pu.q[inside], pu.dq[inside], pu.ddq[inside])
    nominal_loaded = robot.inverse_dynamics(qL, dqL, ddqL)
    d = nominal_loaded - nominal if arm_correction else np.zeros_like(di)
    excitation = inertia_excitation(P)
    fit_inertia = inertia is True or (inertia == 'auto' and
                                      excitation >= MIN_INERTIA_EXCITATION)
    names = FIRST_MOMENT_PARAMS + (INERTIA_PARAMS if fit_inertia else ())
    unknown = set(friction) - set(FRICTION_TERMS)
    if unknown:
        raise DataError(f'friction terms {sorted(unknown)}: choose from {FRICTION_TERMS}')
    columns = {'coulomb': np.tanh(dqL / FRICTION_EPS), 'viscous': dqL,
               'offset': np.ones_like(dqL)}
    nuisance = np.stack([columns[k] for k in FRICTION_TERMS if k in friction], axis=-1) \
        if friction else None

    def solve(keep, n_free, starts=None):
        """eq. (1) on the samples ``keep``, the friction differences projected out."""
        arrays = (di[keep], P[keep][..., 0], d[keep], P[keep][..., 1:1 + n_free])
        if nuisance is not None:
            arrays = _annihilate(nuisance[keep], *arrays)
        return _solve(arrays[0], arrays[1], arrays[3], arrays[2], mass, starts=starts)

    every = np.ones(len(di), dtype=bool)
    n_free = 9 if fit_inertia else 3
    x, r, J, raw, nfev = solve(every, n_free)
    rcond = _scaled_rcond(J)
    if fit_inertia and inertia == 'auto' and rcond < MIN_RCOND:
        # the inertia trades with some joint's constant (a load centred on the last
        # axis: only its Izz reaches that joint): a point mass instead
        fit_inertia = False
        why = (f'inertia dropped: it trades with a constant (scaled Jacobian '
               f'{rcond:.2g} < {MIN_RCOND:g})')
        names, n_free = FIRST_MOMENT_PARAMS, 3
        x, r, J, raw, nfev = solve(every, n_free)
        rcond = _scaled_rcond(J)
    else:
        why = ('inertia fitted' if fit_inertia else
               'point mass: inertia not asked' if inertia is False else
               f'point mass: inertia not excited ({excitation:.2g} < '
               f'{MIN_INERTIA_EXCITATION:g})')
    a, pi = x[:n], x[n:]
    p = len(x)
    plain, sandwich, blocks = _covariance(J, r, len(di), p)
    # block jackknife: each of G contiguous time blocks left out in turn
    G = JACKKNIFE_BLOCKS
    edges = np.linspace(0, len(di), G + 1).astype(int)
    leave = np.empty((G, p))
    for g in range(G):
        keep = every.copy()
        keep[edges[g]:edges[g + 1]] = False
        xg = solve(keep, n_free, starts=[pi])[0]
        leave[g] = np.concatenate([1.0 / xg[:n], xg[n:]])
    jack = (G - 1) / G * np.sum((leave - leave.mean(axis=0)) ** 2, axis=0)
    k = 1.0 / a
    se_k = np.sqrt(np.maximum.reduce([np.diag(plain)[:n] / a ** 4,
                                      np.diag(sandwich)[:n] / a ** 4, jack[:n]]))
    se_pi = np.sqrt(np.maximum.reduce([np.diag(plain)[n:], np.diag(sandwich)[n:],
                                       jack[n:]]))
    h = pi[:3]
    com = h / mass
    com_se = se_pi[:3] / mass
    load = P[..., 0] * mass + P[..., 1:1 + len(pi)] @ pi
    Pg = payload_regressor(robot, qL, frame)                    # gravity only, (M, n, 4)
    grav = Pg @ np.concatenate([[mass], h])
    signal = np.sqrt(np.mean(load ** 2, axis=0))
    gravity = np.sqrt(np.mean(grav ** 2, axis=0))
    residual_rms = np.sqrt(np.mean(raw ** 2, axis=0))
    distance = _com_axis_distance(robot, qL, frame, com)
    rel = se_k / np.abs(k)
    determination, advice = [], []
    for j, name in enumerate(robot.joint_names):
        if not reached[j]:
            determination.append('undetermined')
            advice.append(f'{name}: the load at {frame!r} is not beyond it (no torque of the '
                          'load reaches it): attach the load beyond every joint to calibrate')
            continue
        if k[j] <= 0 or not np.isfinite(rel[j]) or rel[j] > UNDETERMINED:
            determination.append('undetermined')
        elif rel[j] > DETERMINED:
            determination.append('poorly determined')
        else:
            determination.append('determined')
        if determination[-1] == 'determined':
            advice.append('')
        elif k[j] <= 0 and rel[j] < 0.5:
            advice.append(f'{name}: the current rises against the load\'s torque: its sign '
                          'is reversed (current_signs)')
        else:
            noise_torque = residual_rms[j] * abs(k[j]) if np.isfinite(k[j]) else np.inf
            advice.append(_advice(robot, name, j, rel[j], signal[j], gravity[j],
                                  noise_torque, distance[j]))
    point = Pg @ np.array([mass, 0.0, 0.0, 0.0])               # the load at the frame
    from arm_dyn_id.identification.pipeline import noise_estimate
    refusal = _judge(robot, k, rel, reached, determination, mass,
                     (pu.tau[inside], nominal, _interp(t_twin, pl.t, pl.tau),
                      nominal_loaded, point), blocks, p, alignment.overlap_s, frame,
                     residual_rms, noise_estimate(iu))
    info = {'cutoff_hz': float(cutoff_hz), 'cutoff_source': source,
            'rate_hz': float(pu.info['rate_hz']), 'inertia_fitted': bool(fit_inertia),
            'inertia_excitation': float(excitation), 'parameters': list(names),
            'load_model': why, 'jacobian_rcond': rcond,
            'arm_correction': bool(arm_correction),
            'arm_correction_rms': [float(v) for v in np.sqrt(np.mean(d ** 2, axis=0))],
            'function_evaluations': nfev,
            'friction_difference': [k for k in FRICTION_TERMS if k in friction],
            'std_error_method': 'largest of the plain (residual sigma per joint), the '
            'time-block sandwich (first-order for k = 1/a) and the block jackknife '
            f'({JACKKNIFE_BLOCKS} blocks)',
            'jackknife_blocks': JACKKNIFE_BLOCKS, **blocks}
    return Calibration(
        joints=tuple(robot.joint_names), torque_constants=k, std_errors=se_k,
        determination=tuple(determination), advice=tuple(advice), mass=float(mass),
        com=com, com_std_errors=com_se, inertia=pi[3:] if fit_inertia else None,
        frame=frame, alignment=alignment, residual_rms=residual_rms, signal_rms=signal,
        gravity_rms=gravity, n_samples=int(len(di)), info=info, refusal=refusal)


__all__ = ['Alignment', 'Calibration', 'align', 'calibrate', 'default_frame',
           'DETERMINED', 'MIN_BLOCKS', 'RUN_LEVEL_LIMIT', 'UNDETERMINED']
