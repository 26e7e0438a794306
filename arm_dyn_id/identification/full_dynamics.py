"""Full rigid-body dynamics with friction from Fourier excitation data (seed 001).

Model (seed 001 eqs. 2-6):

    τ = M(q) q̈ + C(q, q̇) q̇ + G(q) + F_c sign(q̇) + F_v q̇ = Y(q, q̇, q̈) θ = Y_b β,

β the base parameters of the inertial + friction regressor (48 for the TX-60).

Only q and τ are measured. q̇ and q̈ come from zero-phase filtering and
differentiation: q is low-passed forward and backward (Butterworth,
``scipy.signal.filtfilt``, no phase lag) and differentiated twice by central
differences; τ goes through the same filter, so the two sides of the equation
see the same attenuation. Samples within a few filter time constants of either
end are dropped (``filtfilt``'s edge transients).

Coulomb friction makes τ jump where q̇ changes sign. Low-passing τ smears that
step while ``sign(q̇)`` in the regressor stays sharp, which biases every
parameter (on the TX-60 test record, held-out errors of 0.35-0.6 N·m for
0.5 N·m noise). So the Coulomb column is filtered too: the fit uses
``filtfilt(sign(q̇_f))``, the same filter on both sides of the linear equation
(the rigid-body and viscous columns are smooth, the filter leaves them as they
are). Held-out errors drop to 0.01-0.13 N·m. Predictions on new states use the
plain ``sign(q̇)`` (:func:`predict_full`).

With gross errors in τ (seed 001 §4.2) the filter would spread each outlier
over its neighbours and defeat per-sample rejection (eqs. 14-15): pass
``filter_torque=False`` to fit the raw τ (and the sharp ``sign(q̇_f)``) with the
robust estimators; white noise needs no filtering for least squares.

After low-passing at ``cutoff_hz`` the data carries nothing above that
frequency, so a record taken at 1 kHz and filtered at 10 Hz is heavily
oversampled: keeping every ``decimate``-th sample loses no information the fit
can use and divides the cost of the per-sample regressor (one pinocchio call
per sample) by ``decimate``. Keep ``fs / decimate`` at least ~4× the cutoff.
"""

from dataclasses import dataclass, field

import numpy as np
import scipy.signal

from arm_dyn_id.model.base_parameters import inertial_base_parameters
from arm_dyn_id.errors import DataError
from arm_dyn_id.identification.estimators import ESTIMATORS, HOLDOUT_FOLDS, fit_best

DEFAULT_METHODS = ('wls',)


@dataclass(frozen=True)
class FilteredData:
    """Filtered positions, their derivatives and filtered torques.

    Attributes
    ----------
    t : ndarray, (M,)
    q, dq, ddq : ndarray, (M, n)
        rad, rad/s, rad/s².
    tau : ndarray, (M, n)
        N·m, or None when no torques were given.
    coulomb : ndarray, (M, n)
        ``sign(q̇)`` passed through the same filter (the Coulomb regressor column).
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray = None
    coulomb: np.ndarray = None


def filter_and_differentiate(t, q, tau=None, cutoff_hz=10.0, order=4, decimate=1,
                             edge=None, filter_torque=True):
    """Zero-phase low-pass of q and τ, and q̇, q̈ by central differences.

    Parameters
    ----------
    t : ndarray, (N,)
        Uniformly spaced sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    tau : ndarray, (N, n), optional
        Joint torques (N·m), filtered with the same filter.
    cutoff_hz : float
        Butterworth cut-off (Hz), below the Nyquist frequency.
    order : int
        Butterworth order (applied twice by filtfilt).
    decimate : int
        Keep every ``decimate``-th sample after filtering.
    edge : int, optional
        Samples dropped at each end; default ``3·fs/cutoff``.
    filter_torque : bool
        Low-pass τ and the Coulomb column ``sign(q̇)`` (default); otherwise keep τ
        raw and ``sign(q̇)`` sharp.

    Returns
    -------
    FilteredData

    Raises
    ------
    DataError
        Non-uniform or too short records, NaN, or a cut-off above Nyquist.
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape} and positions {q.shape} must be (N,) and (N, n)')
    if tau is not None:
        tau = np.asarray(tau, dtype=float)
        if tau.shape != q.shape:
            raise DataError(f'torques {tau.shape} do not match positions {q.shape}')
    if len(t) < 16:
        raise DataError(f'{len(t)} samples are too few to filter')
    dt = np.diff(t)
    step = float(np.median(dt))
    if step <= 0 or np.max(np.abs(dt - step)) > 0.01 * step:
        raise DataError(f'samples are not uniformly spaced (steps {dt.min():.6g} to '
                        f'{dt.max():.6g} s): resample onto a uniform grid first')
    if not (np.all(np.isfinite(q)) and (tau is None or np.all(np.isfinite(tau)))):
        raise DataError('positions or torques contain NaN/inf: cut or fill gaps first')
    fs = 1.0 / step
    if not 0 < cutoff_hz < fs / 2:
        raise DataError(f'cut-off {cutoff_hz} Hz must lie in (0, {fs / 2:.6g}) Hz '
                        f'(Nyquist of {fs:.6g} Hz sampling)')
    if int(decimate) < 1:
        raise DataError(f'decimate {decimate} must be a positive integer')
    sos = scipy.signal.butter(order, cutoff_hz, fs=fs, output='sos')
    qf = scipy.signal.sosfiltfilt(sos, q, axis=0)
    dq = np.gradient(qf, step, axis=0)
    ddq = np.gradient(dq, step, axis=0)
    if filter_torque:
        tf = None if tau is None else scipy.signal.sosfiltfilt(sos, tau, axis=0)
        coulomb = scipy.signal.sosfiltfilt(sos, np.sign(dq), axis=0)
    else:
        tf, coulomb = tau, np.sign(dq)
    edge = int(np.ceil(3 * fs / cutoff_hz)) if edge is None else int(edge)
    keep = slice(edge, len(t) - edge, int(decimate))
    if len(t) - 2 * edge < 2:
        raise DataError(f'the record ({len(t)} samples) is shorter than the filter edges '
                        f'(2 × {edge} samples)')
    return FilteredData(t=t[keep], q=qf[keep], dq=dq[keep], ddq=ddq[keep],
                        tau=None if tf is None else tf[keep], coulomb=coulomb[keep])


@dataclass
class FullFit:
    """Outcome of :func:`identify_full`.

    Attributes
    ----------
    robot : RobotModel
    base : BaseParameters
        Inertial base parameters with friction (``kind='inertial'``).
    result : IdentificationResult
        The chosen estimator's result; ``result.beta`` are the base parameters,
        residuals and ``noise_std`` are those of the filtered torques.
    candidates : dict
        method -> IdentificationResult or error text.
    data : FilteredData
        The samples that were fitted.
    info : dict
        Filter settings, sample counts, provenance and ``selection`` (the
        :class:`~arm_dyn_id.identification.estimators.Selection` as a dict).
    selection : Selection
        How the method was chosen (held-out blocks of time, or why not).
    """

    robot: object
    base: object
    result: object
    candidates: dict
    data: FilteredData
    info: dict = field(default_factory=dict)
    selection: object = None

    @property
    def beta(self):
        return self.result.beta

    def friction(self):
        """Identified Coulomb (N·m) and viscous (N·m·s/rad) friction per joint."""
        names = list(self.base.names)
        n = self.robot.n_joints
        coulomb = np.array([self.beta[names.index(f'fc{j + 1}')] if f'fc{j + 1}' in names
                            else np.nan for j in range(n)])
        viscous = np.array([self.beta[names.index(f'fv{j + 1}')] if f'fv{j + 1}' in names
                            else np.nan for j in range(n)])
        return coulomb, viscous


def base_regressor(robot, base, q, dq, ddq, coulomb=None):
    """Full base regressor with friction, (M, n, r), one pinocchio call per sample.

    Parameters
    ----------
    coulomb : ndarray, (M, n), optional
        Values of the Coulomb columns; default ``sign(dq)``.
    """
    q, dq, ddq = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, dq, ddq))
    Y = robot.full_regressor(q, dq, ddq, friction=base.friction)
    if coulomb is not None and base.friction:
        n = robot.n_joints
        idx = np.arange(n)
        Y[:, idx, Y.shape[2] - 2 * n + 2 * idx] = np.atleast_2d(coulomb)
    return base.reduce(Y)


def identify_full(robot, t, q, tau, cutoff_hz=10.0, methods=DEFAULT_METHODS, noise=None,
                  decimate=1, order=4, base=None, validation=None, provenance=None,
                  filter_torque=True, folds=HOLDOUT_FOLDS, seed=0):
    """Identify the full dynamics with friction from an excitation record.

    Parameters
    ----------
    robot : RobotModel
    t : ndarray, (N,)
        Uniform sample times (s).
    q : ndarray, (N, n)
        Measured joint angles (rad).
    tau : ndarray, (N, n)
        Measured joint torques (N·m).
    cutoff_hz : float
        Low-pass cut-off for q and τ (Hz); a few times the highest harmonic of
        the excitation (L·ω_f / 2π).
    methods : sequence of str
        Estimators of :mod:`arm_dyn_id.identification.estimators` (``wls``, ``threshold``,
        ``irls``, ``pso``); with more than one, each is scored on held-out
        contiguous blocks of the record (or on ``validation``) and the best is
        kept, refitted on all the samples.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    decimate : int
        Keep every ``decimate``-th filtered sample (see the module notes).
    base : BaseParameters, optional
        Default ``inertial_base_parameters(robot, friction=True)``.
    validation : (q, dq, ddq, tau), optional
        Held-out samples used to choose between methods instead of the blocks.
    filter_torque : bool
        Low-pass τ (and the Coulomb column) with the same filter as q; False
        for gross errors and robust estimators (see the module notes).
    folds : int
        Blocks of time, each held out in turn, when choosing between methods.
    seed : int
        Seed of the fold deal.

    Returns
    -------
    FullFit
    """
    unknown = [m for m in methods if m not in ESTIMATORS]
    if unknown:
        raise ValueError(f'unknown estimator {unknown[0]!r}; choose from {sorted(ESTIMATORS)}')
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[1] != robot.n_joints:
        raise DataError(f'positions {q.shape} must be (N, {robot.n_joints}) for joints '
                        f'{list(robot.joint_names)}')
    base = base or inertial_base_parameters(robot, friction=True)
    data = filter_and_differentiate(t, q, tau, cutoff_hz=cutoff_hz, order=order,
                                    decimate=decimate, filter_torque=filter_torque)
    Yb = base_regressor(robot, base, data.q, data.dq, data.ddq, coulomb=data.coulomb)
    val = None
    if validation is not None:
        qv, dqv, ddqv, tv = validation
        val = (base_regressor(robot, base, qv, dqv, ddqv), np.asarray(tv, dtype=float))
    # filtered neighbours share their noise: hold out contiguous blocks, not samples
    choice = fit_best(Yb, data.tau, base.names, noise=noise, validation=val,
                      methods=tuple(methods), folds=folds, seed=seed)
    info = {'cutoff_hz': float(cutoff_hz), 'order': int(order), 'decimate': int(decimate),
            'filter_torque': bool(filter_torque),
            'n_raw_samples': int(len(q)), 'n_fit_samples': int(len(data.t)),
            'provenance': dict(provenance or {}),
            'selection': choice.selection.to_dict()}
    return FullFit(robot=robot, base=base, result=choice.result, candidates=choice.candidates,
                   data=data, info=info, selection=choice.selection)


def predict_full(fit, q, dq, ddq):
    """Torques of the identified full model (N·m), (M, n) for (M, n) inputs."""
    single = np.asarray(q).ndim == 1
    out = base_regressor(fit.robot, fit.base, q, dq, ddq) @ fit.beta
    return out[0] if single else out


__all__ = ['FilteredData', 'FullFit', 'filter_and_differentiate', 'identify_full',
           'predict_full', 'base_regressor']
