"""Identify a payload's mass, centre of mass and inertia with the arm model frozen.

A rigid payload at a frame f of body b (placement R_f, p_f in the body frame)
adds to body b's mass parameters ``Δm = m`` and ``Δh = R_f h + p_f m``, with
``h = m c`` its first moment in the frame. The gravity torque is linear in the
link parameters, so the extra torque is linear in (m, h):

    τ - G_arm(q) = [Y_m + Y_h p_f,  Y_h R_f] (m, h)ᵀ,

Y_m, Y_h being body b's columns of the gravity regressor. Four parameters,
fitted by weighted least squares on friction-free samples (forward/backward
averaged, seed 000 eq. 5, or the quasi-static samples of any slow motion) with the
identified arm model frozen.

With a full-dynamics arm model the same holds for the whole inverse dynamics: a
payload's ten inertial parameters π_f = (m, h, I_f) in its frame (I_f about the
frame's origin, pinocchio's order Ixx, Ixy, Iyy, Ixz, Iyz, Izz) enter body b's
ten linearly, ``π_b += T π_f`` with

    m_b += m,   h_b += R h + m p,
    I_b += R I_f Rᵀ - m S(p)² - S(p) S(R h) - S(R h) S(p)

(S the cross-product matrix), so ``τ - τ_arm(q, q̇, q̈) = Y_b(q, q̇, q̈) T π_f``
(:func:`payload_full_regressor`). The inertia is fitted only when the motion
excites it (the six inertia columns are not nearly dependent on the others and
each other, :data:`MIN_INERTIA_EXCITATION`); otherwise the payload is a point
mass and its four parameters are fitted.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError
from arm_dyn_id.identification.estimators import fit_wls
from arm_dyn_id.identification.gravity import still_joints, without_held_offsets
from arm_dyn_id.model.payload import (DEFAULT_FRAMES, _six, _skew, _sym,  # noqa: F401
                                      payload_frame, payload_full_regressor, payload_regressor,
                                      payload_transform)
from arm_dyn_id.model.robot import Payload
from arm_dyn_id.identification.pairing import average_pairs, on_swept_joint, sweeps_from_markers

PAYLOAD_PARAMS = ('m', 'mx', 'my', 'mz')


class NoPayloadError(DataError):
    """The data shows no payload: the mass is not significantly above zero."""


class PayloadDataRefused(DataError):
    """The data gate refused the recording (units, signs, swapped joints against the arm
    model); ``cause`` is one of :data:`arm_dyn_id.validation.plausibility.CAUSES`."""

    def __init__(self, message, cause=None):
        super().__init__(message)
        self.cause = cause


#: Contiguous time blocks over which the arm model's own error is taken as correlated
#: (its contribution to the payload's covariance, :func:`model_error_covariance`).
MODEL_ERROR_BLOCKS = 10


#: inertia about the payload frame's origin, pinocchio's order
INERTIA_PARAMS = ('ixx', 'ixy', 'iyy', 'ixz', 'iyz', 'izz')
#: Inertia is identified when the smallest singular value of the column-scaled,
#: weighted payload regressor is at least this fraction of the largest.
MIN_INERTIA_EXCITATION = 1e-3


@dataclass(frozen=True)
class PayloadFit:
    """An identified payload.

    Attributes
    ----------
    payload : Payload
        Mass (kg) and centre of mass (m, in ``payload.frame``).
    std_errors : ndarray, (4,) or (10,)
        Of (m, m·cx, m·cy, m·cz) (kg, kg·m), and of the inertia about the
        frame's origin (kg·m²) when it was fitted.
    com_std_errors : ndarray, (3,)
        First-order standard errors of the centre of mass (m).
    result : IdentificationResult
    inertia_std_errors : ndarray, (3, 3) or None
        First-order standard errors of ``payload.inertia`` (about the centre of
        mass, kg·m²); None when the inertia was not identified.
    note : str
        How the data was used and, when the inertia was not fitted, why.
    """

    payload: Payload
    std_errors: np.ndarray
    com_std_errors: np.ndarray
    result: object
    inertia_std_errors: np.ndarray = None
    note: str = ''

    @property
    def mass_std_error(self):
        return float(self.std_errors[0])

    def to_dict(self):
        """``mass``, ``com``, ``inertia`` (or None), each with its standard error, and
        ``std_errors_from`` (what they include)."""
        p = self.payload
        inertia = None if p.inertia is None else np.asarray(p.inertia).tolist()
        return {'frame': p.frame, 'mass': float(p.mass), 'mass_std_error': self.mass_std_error,
                'com': [float(c) for c in p.com],
                'com_std_error': [float(c) for c in self.com_std_errors],
                'inertia': inertia,
                'inertia_std_error': None if self.inertia_std_errors is None
                else np.asarray(self.inertia_std_errors).tolist(),
                'units': {'mass': 'kg', 'com': 'm, in the frame',
                          'inertia': 'kg·m², about the centre of mass, frame axes'},
                'method': self.result.method, 'n_samples': int(self.result.n_samples),
                'condition_number': float(self.result.condition_number),
                'std_errors_from': self.result.info.get('std_errors', 'measurement noise'),
                'note': self.note}


def model_error_covariance(P, noise, model_error, blocks=MODEL_ERROR_BLOCKS):
    """Covariance the frozen arm model's own error adds to the payload's parameters.

    The payload is fitted to τ - τ_arm: an error e of the arm model is fitted as
    payload. It is not white noise: it depends on the pose and is correlated over
    time, so averaging many samples does not shrink it. Model it as an error of
    RMS ε_j on joint j (the arm model's held-out RMSE), constant over each of
    ``blocks`` contiguous time blocks and independent between blocks and joints:

        Cov = A⁻¹ [Σ_b Σ_j ε_j² w_j² s_bj s_bjᵀ] A⁻¹,  s_bj = Σ_{i∈b} P_ij,
        A = Σ_i Σ_j w_j P_ij P_ijᵀ,  w_j = 1 / σ_j²

    (the sandwich covariance of weighted least squares under that error).

    Parameters
    ----------
    P : ndarray, (M, n, p)
        Payload regressor of the fitted samples, in time order.
    noise : array_like, (n,) or None
        σ per joint of the weights (N·m); equal weights when None.
    model_error : array_like, (n,)
        ε per joint (N·m); NaN or 0: no contribution.
    blocks : int

    Returns
    -------
    ndarray, (p, p)
    """
    P = np.asarray(P, dtype=float)
    m, n, p = P.shape
    eps = np.nan_to_num(np.asarray(model_error, dtype=float), nan=0.0)
    w = np.ones(n) if noise is None else 1.0 / np.asarray(noise, dtype=float) ** 2
    ok = np.all(np.isfinite(P), axis=(1, 2))
    P = P[ok]
    A = np.einsum('mjp,j,mjq->pq', P, w, P)
    middle = np.zeros((p, p))
    for rows in np.array_split(np.arange(len(P)), max(1, min(int(blocks), len(P)))):
        s = P[rows].sum(axis=0)                             # (n, p)
        middle += np.einsum('j,jp,jq->pq', (eps * w) ** 2, s, s)
    inv = np.linalg.pinv(A)
    return inv @ middle @ inv


def _point_mass_fit(P, extra, noise, frame, method, note='', model_error=None, robot=None,
                    whole=None):
    """WLS of (m, h); PayloadFit with com = h / m (no inertia). ``whole``: the regressor
    before any offsets were taken out of it (what the payload does to the torques, for the
    detection against the arm model's error); default ``P``."""
    result = fit_wls(P[..., :4], extra, PAYLOAD_PARAMS, noise=noise, method=method)
    if robot is not None:
        _detected((P if whole is None else whole)[..., :4], result.beta, model_error, frame,
                  robot)
    return _finish(_with_model_error(result, P[..., :4], noise, model_error), frame, note)


def _with_model_error(result, P, noise, model_error):
    """``result`` with the arm model's error added to its covariance (and standard errors)."""
    from dataclasses import replace
    if model_error is None or not np.any(np.isfinite(model_error)):
        return result
    cov = result.covariance + model_error_covariance(P, noise, model_error)
    return replace(result, covariance=cov, std_errors=np.sqrt(np.clip(np.diag(cov), 0, None)),
                   info=dict(result.info, std_errors='measurement noise and the arm model\'s '
                             'held-out error over time blocks'))


def _finish(result, frame, note):
    mass, h = float(result.beta[0]), result.beta[1:4]
    sigma = result.std_errors
    if not mass > 3 * sigma[0]:
        raise NoPayloadError(f'no payload detected at {frame!r}: estimated mass {mass:.4g} ± '
                             f'{sigma[0]:.2g} kg')
    com = h / mass
    # first-order propagation of c = h / m
    J = np.zeros((3, len(result.beta)))
    J[:, 0] = -h / mass ** 2
    J[:, 1:4] = np.eye(3) / mass
    com_cov = J @ result.covariance @ J.T
    inertia = inertia_err = None
    if len(result.beta) == 10:
        inertia = _inertia_about_com(result.beta)
        # Jacobian of the six unique entries by central differences (the map is smooth)
        Jc = np.empty((6, 10))
        for k in range(10):
            d = np.zeros(10)
            d[k] = 1e-6 * max(1.0, abs(result.beta[k]))
            Jc[:, k] = (_six(_inertia_about_com(result.beta + d)) -
                        _six(_inertia_about_com(result.beta - d))) / (2 * d[k])
        inertia_err = _sym(np.sqrt(np.clip(np.diag(Jc @ result.covariance @ Jc.T), 0, None)))
    payload = Payload(mass=mass, com=tuple(float(c) for c in com), frame=frame,
                      inertia=None if inertia is None else
                      tuple(tuple(float(x) for x in row) for row in inertia))
    return PayloadFit(payload=payload, std_errors=sigma,
                      com_std_errors=np.sqrt(np.clip(np.diag(com_cov), 0, None)),
                      result=result, inertia_std_errors=inertia_err, note=note)


def _inertia_about_com(beta):
    """Inertia about the centre of mass (3x3, frame axes) of (m, h, I_f about the origin)."""
    m, h = beta[0], beta[1:4]
    S = _skew(h)
    return _sym(beta[4:10]) + S @ S / m        # I_c = I_O + m S(c)² = I_O + S(h)²/m


def inertia_excitation(P, noise=None):
    """Smallest over largest singular value of the weighted, column-scaled regressor.

    Parameters
    ----------
    P : ndarray, (M, n, 10)
    noise : array_like, (n,), optional
        σ per joint (N·m).

    Returns
    -------
    float
        Near 0 when some combination of the ten parameters leaves the torques
        unchanged (the motion does not excite the inertia).
    """
    w = np.ones(P.shape[1]) if noise is None else 1.0 / np.asarray(noise, dtype=float)
    A = (P * w[None, :, None]).reshape(-1, P.shape[-1])
    A = A[np.all(np.isfinite(A), axis=1)]
    norms = np.linalg.norm(A, axis=0)
    if A.shape[0] < A.shape[1] or np.any(norms == 0):
        return 0.0
    s = np.linalg.svd(A / norms, compute_uv=False)
    return float(s[-1] / s[0])


def identify_payload_full(robot, q, dq, ddq, tau, arm_torques, noise=None, frame='flange',
                          inertia='auto', model_error=None):
    """Payload parameters from any motion, the arm's full dynamic model frozen.

    Parameters
    ----------
    robot : RobotModel
        The arm's kinematics (the payload frame must be in it).
    q, dq, ddq : ndarray, (M, n)
        Filtered joint angles, velocities and accelerations (rad, rad/s, rad/s²).
    tau : ndarray, (M, n)
        Measured joint torques with the payload, filtered like q (N·m).
    arm_torques : ndarray, (M, n)
        The frozen arm model's torques (rigid body + friction) at (q, dq, ddq) (N·m).
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    frame : str
    inertia : {'auto', True, False}
        Fit the inertia: when the motion excites it (auto), always, or never.
        With ``auto`` an inertia that is not physically valid (a negative
        principal moment, or one larger than the sum of the other two) is
        dropped for a point mass, and the note says so: the arm model's errors
        are then larger than the inertia's effect.
    model_error : array_like, (n,), optional
        The frozen arm model's own torque error per joint (N·m, e.g. its held-out
        RMSE): a payload whose torques stay below it on every joint is not
        detected (:class:`NoPayloadError`), whatever its standard error says.

    Returns
    -------
    PayloadFit
        ``payload.inertia`` about the centre of mass when it was fitted.

    Raises
    ------
    DataError
        Shapes that do not match, no payload in the data, or ``inertia=True`` and
        the motion does not excite it.
    """
    arrays = (q, dq, ddq, tau, arm_torques)
    q, dq, ddq, tau, arm = (np.asarray(a, dtype=float) for a in arrays)
    if not (q.shape == dq.shape == ddq.shape == tau.shape == arm.shape) or q.ndim != 2:
        raise DataError(f'payload data: q {q.shape}, dq {dq.shape}, ddq {ddq.shape}, tau '
                        f'{tau.shape} and arm torques {arm.shape} must all be (M, n)')
    P = payload_full_regressor(robot, q, dq, ddq, frame)
    extra = tau - arm
    _beyond_the_frame(robot, frame, extra, model_error)
    excitation = inertia_excitation(P, noise)
    fit_inertia = inertia is True or (inertia == 'auto' and
                                      excitation >= MIN_INERTIA_EXCITATION)
    if inertia is True and excitation < MIN_INERTIA_EXCITATION:
        raise DataError(f'the motion does not excite the payload\'s inertia (excitation '
                        f'{excitation:.2g} < {MIN_INERTIA_EXCITATION:g}): rotate the wrist '
                        'joints faster and about several axes')
    why = ('not asked' if inertia is False else
           f'not excited by the motion (excitation {excitation:.2g} < '
           f'{MIN_INERTIA_EXCITATION:g})')
    if fit_inertia:
        result = fit_wls(P, extra, PAYLOAD_PARAMS + INERTIA_PARAMS, noise=noise,
                         method='payload_full_wls')
        _detected(P, result.beta, model_error, frame, robot)
        fit = _finish(_with_model_error(result, P, noise, model_error), frame,
                      f'full dynamics, {len(q)} samples; inertia identified '
                      f'(excitation {excitation:.2g})')
        moments = np.linalg.eigvalsh(np.asarray(fit.payload.inertia))
        valid = moments[0] >= 0 and moments[2] <= moments[0] + moments[1]
        if valid or inertia is True:
            return fit
        why = (f'fitted but not physically valid (principal moments '
               f'{", ".join(f"{m:.2g}" for m in moments)} kg·m²): the arm model\'s errors '
               'exceed its effect')
    result = fit_wls(P[..., :4], extra, PAYLOAD_PARAMS, noise=noise, method='payload_full_wls')
    _detected(P[..., :4], result.beta, model_error, frame, robot)
    return _finish(_with_model_error(result, P[..., :4], noise, model_error), frame,
                   f'full dynamics, {len(q)} samples; inertia {why}: a point '
                   'mass')


#: A joint the payload frame does not reach whose torque departs from the arm model by
#: more than this many times the model's own error there: a load acts on it, so it hangs
#: beyond the frame given (the factor of `validate`'s beyond-held-out warning: a model on
#: another recording of the same arm stays within it).
UNREACHED_LIMIT = 5.0


def _beyond_the_frame(robot, frame, extra, model_error):
    """Refuse a payload frame that hangs before joints whose torque departs from the arm
    model (``extra``, N·m) by more than :data:`UNREACHED_LIMIT` x its own error: a load at
    the frame cannot put torque on them, a load beyond it does."""
    from arm_dyn_id.model.payload import frame_reached
    if model_error is None:
        return
    error = np.asarray(model_error, dtype=float)
    rms = np.sqrt(np.mean(np.asarray(extra) ** 2, axis=0))
    ratio = rms / np.where(np.isfinite(error) & (error > 0), error, np.inf)
    off = ~frame_reached(robot, frame) & (ratio > UNREACHED_LIMIT)
    if off.any():
        names = np.asarray(robot.joint_names)
        each = ', '.join(f'{names[j]} {rms[j]:.3g} N·m ({ratio[j]:.2g}x)'
                         for j in np.flatnonzero(off))
        raise PayloadDataRefused(
            f'payload frame {frame!r} hangs before joints a load there cannot turn, yet their '
            f'torque departs from the arm model by more than {UNREACHED_LIMIT:g}x its own '
            f'error ({each}): the load is beyond them. Give the frame it is attached to '
            f'(--frame, default {payload_frame(robot)!r})', 'frame')


def _detected(P, beta, model_error, frame, robot):
    """Refuse a payload whose torques stay below the arm model's own error on every joint."""
    if model_error is None:
        return
    error = np.asarray(model_error, dtype=float)
    torque = np.sqrt(np.mean((P @ beta) ** 2, axis=0))
    ratio = torque / np.where(np.isfinite(error) & (error > 0), error, np.inf)
    if not np.any(ratio >= 1.0):
        j = int(np.argmax(ratio))
        raise NoPayloadError(f'no payload detected at {frame!r}: the fitted payload '
                             f'({beta[0]:.3g} kg) moves the torques by at most '
                             f'{ratio[j]:.2g}x the arm model\'s own error '
                             f'({robot.joint_names[j]}: {torque[j]:.3g} N·m against '
                             f'{error[j]:.3g} N·m)')


def identify_payload_quasi_static(model, t, q, tau, noise=None, frame='flange', dq=None,
                                  model_error=None):
    """Payload mass and centre of mass from the static holds and slow motion of any
    recording, the arm's gravity model frozen.

    Holds are averaged; slow moving bins keep the frozen model's friction
    (Coulomb and viscous, where it is known) subtracted.

    Parameters
    ----------
    model : GravityModel
    t : ndarray, (N,)
    q, tau : ndarray, (N, n)
    noise : array_like, (n,), optional
    frame : str
    dq : ndarray, (N, n), optional
        Measured velocities (rad/s).
    model_error : array_like, (n,), optional
        The arm model's own error per joint (N·m): a payload below it is not
        detected, and it enters the standard errors (:func:`model_error_covariance`).

    Returns
    -------
    PayloadFit
    """
    from arm_dyn_id.identification.quasi_static import quasi_static_samples
    samples = quasi_static_samples(t, q, tau, dq=dq)
    if samples.n_samples < 4:
        raise DataError(f'only {samples.n_samples} quasi-static samples (holds and bins of '
                        'slow motion): hold the arm with the payload still at a few poses for '
                        'a second or two, or move it slowly')
    fc, fv = (np.nan_to_num(model.friction[k]) for k in ('coulomb', 'viscous'))
    friction = np.where(samples.is_hold[:, None], 0.0,
                        fc * np.sign(samples.dq) + fv * samples.dq)
    extra = samples.tau - friction - model.gravity_torques(samples.q)
    P = payload_regressor(model.robot, samples.q, frame)
    return _point_mass_fit(P, extra, noise, frame, 'payload_wls_quasi_static',
                           f'gravity model, quasi-static samples: {len(samples.holds)} holds '
                           f'and {int((~samples.is_hold).sum())} bins of slow motion',
                           model_error=model_error, robot=model.robot)


def identify_payload(model, t, q, tau, markers=None, noise=None, frame='flange',
                     average=True, model_error=None, free_offsets=True):
    """Payload mass and centre of mass from data taken with it attached.

    Parameters
    ----------
    model : GravityModel
        The identified arm without payload (frozen); its robot's gravity must be
        the gravity of the data.
    t : ndarray, (N,)
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n)
        Measured joint torques (N·m).
    markers : list of dict, optional
        Segment markers; with ``average`` the forward/backward passes are averaged
        to cancel friction.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    frame : str
        Frame the centre of mass is expressed in.
    model_error : array_like, (n,), optional
        The arm model's own error per joint (N·m): a payload below it is not
        detected, and it enters the standard errors (:func:`model_error_covariance`).
    free_offsets : bool
        With averaging, a free torque offset per pair on the joints it holds still (the
        friction a geared joint holds at rest, any value within its breakaway level), as
        in :func:`~arm_dyn_id.identification.gravity.identify_gravity`: taken for the
        payload's, it put the mass up to 8 % and the centre of mass up to 18 mm off, at up
        to 11 standard errors, on the simulated humanoid (``bench/held_friction.py``).

    Returns
    -------
    PayloadFit

    Raises
    ------
    DataError
        When the data shows no payload (mass not significantly above zero).
    RankDeficientError
        When the data cannot separate the centre-of-mass components (named).
    """
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    note = 'gravity model, every sample'
    if average:
        if not markers:
            raise DataError('payload identification averages forward/backward passes: pass '
                            'the segment markers, or average=False')
        sweeps = sweeps_from_markers(t, markers)
        paired = average_pairs(t, q, tau, sweeps)
        q, tau = paired.q, paired.tau
        note = f'gravity model, {len(np.unique(paired.pair_id))} forward/backward pairs averaged'
    extra = tau - (model.gravity_torques(q) if len(q) else np.empty_like(tau))
    if average and 'pair_offset' in getattr(model, 'friction', {}):
        # the constant the arm's own sweeps kept on the swept joint (friction stronger one
        # way, an effort offset: --pair-offsets yes), which the payload did not bring
        extra = extra - on_swept_joint(paired, model.friction['pair_offset'])
    P = whole = payload_regressor(model.robot, q, frame)
    if average and free_offsets:
        P, extra = without_held_offsets(P, extra, paired.pair_id, still_joints(paired))
        note += ', a free offset per pair on the joints it holds still'
    return _point_mass_fit(P, extra, noise, frame, 'payload_wls', note, model_error=model_error,
                           robot=model.robot, whole=whole)


def identify_payload_samples(model, t, q, tau, markers=None, noise=None, frame='flange',
                             inertia='auto', dq=None, say=None, effort=None, gains=None):
    """A payload from any recording with it attached, the arm model frozen.

    A full-dynamics model (``model.dynamics == 'full'``): the recording is
    prepared with the model's own filter (cut-off, order), q̇ and q̈ from the
    filtered q, and :func:`identify_payload_full` fits the payload against the
    model's torques (inertia when the motion excites it). A gravity model:
    forward/backward sweep pairs (recorded markers, else detected in q) are
    averaged (:func:`identify_payload`), else the static holds and slow motion
    are used (:func:`identify_payload_quasi_static`).

    Parameters
    ----------
    model : GravityModel or DynamicsModel
        Its robot's gravity must be that of the data.
    t : ndarray, (N,)
        s (any spacing for a full model).
    q, tau : ndarray, (N, n)
        rad, N·m.
    markers : list of dict, optional
        Recorded segment markers.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    frame : str
    inertia : {'auto', True, False}
        Full models only (see :func:`identify_payload_full`).
    dq : ndarray, (N, n), optional
        Measured velocities (rad/s), for the quasi-static selection.
    say : callable, optional
        ``say(text)`` hears which data is used.
    effort : {'current', 'torque'}, optional
    gains : array_like, (n,), optional
        How the effort was read (N·m per A), for the data gate's messages.

    Returns
    -------
    PayloadFit

    Raises
    ------
    PayloadDataRefused
        The data gate (:func:`arm_dyn_id.validation.plausibility.judge_data`) finds the
        measured torque unlike the arm model's: units, signs, swapped joints.
    NoPayloadError
        No payload above the noise and the arm model's own error.
    """
    say = say or (lambda text: None)
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if getattr(model, 'dynamics', 'gravity') == 'full':
        from arm_dyn_id.data.preparation import prepare
        prep = model.metadata.get('preparation') or {}
        data = prepare(t, q, tau, cutoff_hz=prep.get('cutoff_hz'),
                       order=int(prep.get('order', 4)))
        say(f'full-dynamics model: {len(data.t)} samples filtered at '
            f'{data.info.get("cutoff_hz", float("nan")):.3g} Hz (the model\'s filter)')
        weights, held = _held_still(model, q, noise, say)
        arm = model.torques(data.q, data.dq, data.ddq)
        _gate(data.tau, arm, model, noise, tau, effort, gains, data.q)
        error = np.fmax(_model_error(model), held)
        return identify_payload_full(model.robot, data.q, data.dq, data.ddq, data.tau, arm,
                                     noise=weights, frame=frame, inertia=inertia,
                                     model_error=error if np.any(np.isfinite(error)) else None)
    weights, held = _held_still(model, q, noise, say)
    every = slice(None, None, max(1, len(q) // 5000))
    _gate(tau[every], model.gravity_torques(q[every]), model, noise, tau, effort, gains, q)
    error = np.fmax(_model_error(model), held)
    error = error if np.any(np.isfinite(error)) else None
    from arm_dyn_id.data.segmentation import detect_markers
    from arm_dyn_id.identification.pipeline import clean_markers
    from arm_dyn_id.identification.pairing import pair_sweeps
    marks = clean_markers(markers)
    source = 'recorded'
    if not any(m['phase'] == 'sweep' and m.get('joint_index', -1) >= 0 for m in marks):
        try:
            marks, source = detect_markers(t, q, model.joint_names), 'detected'
        except DataError:
            marks = []
    if marks and pair_sweeps(sweeps_from_markers(t, marks), q):
        say(f'gravity model: forward/backward sweep pairs ({source}) averaged')
        return identify_payload(model, t, q, tau, marks, noise=weights, frame=frame,
                                model_error=error)
    say('gravity model: no sweep pairs, the static holds and slow motion are used')
    return identify_payload_quasi_static(model, t, q, tau, noise=weights, frame=frame, dq=dq,
                                         model_error=error)


def arm_model_error(model):
    """The arm model's own error per joint (N·m), ndarray (n,): its held-out RMSE (training
    RMSE without a hold-out), NaN where its file does not say."""
    return _model_error(model)


def _held_still(model, q, noise, say):
    """The joints the recording holds still: their torque holds up to the friction F they
    may hold at rest (validation.check.holding_friction), constant over each hold, which
    a payload fit would take for a load. Returns (noise with F added in quadrature on those
    joints, or None when none was given; F on those joints and NaN elsewhere: the arm
    model's error there is at least F)."""
    from arm_dyn_id.validation.check import held_still, holding_friction
    still = held_still(q)
    held = np.where(still, holding_friction(model.robot), np.nan)
    if not still.any():
        return noise, held
    if still.all():
        raise DataError('every joint is held still in the recording (one pose): a payload\'s '
                        'mass and centre of mass need the arm moved through several poses '
                        '(with a gravity model: static holds at several poses, or sweeps)')
    say(f'held still: {", ".join(np.asarray(model.joint_names)[still])}: their torque may '
        'hold friction up to ' + ', '.join(f'{f:.3g}' for f in held[still]) + ' N·m, '
        'weighted and counted as the arm model\'s error there')
    if noise is not None:
        noise = np.asarray(noise, dtype=float)
        noise = np.where(still, np.hypot(noise, np.nan_to_num(held)), noise)
    return noise, held


def _model_error(model):
    """The arm model's held-out RMSE per joint (N·m; training RMSE without a hold-out)."""
    validation = model.metadata.get('validation') or {}
    held = validation.get('held_out') or validation.get('training') or {}
    return np.array([(held.get(j) or {}).get('rmse') or np.nan for j in model.joint_names],
                    dtype=float)


def _gate(measured, arm, model, noise, raw, effort, gains, q):
    """The data gate of every fit path: the measured torque against the arm model's (the
    joints ``q`` holds still tested only where the torque varies well above their
    friction at rest)."""
    from arm_dyn_id.validation.plausibility import SCALE_LIMIT, judge_data, still_floor
    verdict = judge_data(measured, arm, model.joint_names, noise=noise, raw=raw,
                         effort=effort, gains=gains, limit=SCALE_LIMIT,
                         reference='the arm model\'s',
                         floor=still_floor(model.robot, q, SCALE_LIMIT),
                         relative=None)     # the payload raises the outer joints
    if not verdict.ok:
        raise PayloadDataRefused(verdict.reason, verdict.cause)


__all__ = ['DEFAULT_FRAMES', 'INERTIA_PARAMS', 'MIN_INERTIA_EXCITATION', 'NoPayloadError',
           'PAYLOAD_PARAMS', 'PayloadDataRefused', 'PayloadFit', 'model_error_covariance',
           'payload_frame',
           'identify_payload', 'identify_payload_full', 'identify_payload_quasi_static',
           'identify_payload_samples',
           'inertia_excitation', 'payload_full_regressor', 'payload_regressor',
           'payload_transform', 'arm_model_error']
