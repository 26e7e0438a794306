"""Full rigid-body dynamics with friction from Fourier excitation data (seed 001).

Model (seed 001 eqs. 2-6):

    τ = M(q) q̈ + C(q, q̇) q̇ + G(q) + F_c sign(q̇) + F_v q̇ = Y(q, q̇, q̈) θ = Y_b β,

β the base parameters of the inertial + friction regressor (48 for the TX-60).

Only q and τ are measured. q̇ and q̈ come from zero-phase filtering and
differentiation: q is low-passed forward and backward (Butterworth,
no phase lag; :mod:`arm_dyn_id.data.filters`) and differentiated twice by central
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

import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.ndimage

from arm_dyn_id.data.filters import butter_sos, sosfiltfilt
from arm_dyn_id.data.preparation import prepare
from arm_dyn_id.errors import ConfigError, DataError, RankDeficientError
from arm_dyn_id.identification import consistent as cons
from arm_dyn_id.identification.effort_scales import relative_effort_scales
from arm_dyn_id.identification.estimators import (
    ESTIMATORS, HOLDOUT_FOLDS, MOMENT_ESTIMATORS, IdentificationResult, NormalEquations,
    _predict, _row_rss, _weights, bounded_solve, fit_best, identifiability,
    joint_variance_covariance, nonnegative_friction,
    sample_moments, select, time_blocks)
from arm_dyn_id.model.base_parameters import inertial_base_parameters
from arm_dyn_id.model.dynamics import (SLOW_SPEED, DynamicsModel, FrictionModel, base_matrix,
                                       nominal_standard_parameters, parse_friction,
                                       gravity_base_regressor, rigid_base_parameters,
                                       rigid_regressor)
from arm_dyn_id.model.export import link_shares
from arm_dyn_id.model.robot import carries_gravity
from arm_dyn_id.validation.metrics import joint_metrics

DEFAULT_METHODS = ('wls',)
#: Joints whose effort scale against the others' reads beyond this (or below its
#: inverse) get a standard error: the data gate judges the high ones, the low ones' is
#: evidence in model.yaml; so do those whose freed scale removes
#: :data:`~arm_dyn_id.validation.plausibility.EFFORT_SCALE_DECISIVE` of the loss.
EFFORT_SCALE_SE_FROM = 1.5


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
    sos = butter_sos(order, cutoff_hz, fs)
    qf = sosfiltfilt(sos, q, axis=0)
    dq = np.gradient(qf, step, axis=0)
    ddq = np.gradient(dq, step, axis=0)
    if filter_torque:
        tf = None if tau is None else sosfiltfilt(sos, tau, axis=0)
        coulomb = sosfiltfilt(sos, np.sign(dq), axis=0)
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


# ---------------------------------------------------------------------------
# The full-dynamics fit behind `arm-dyn-id fit --dynamics full` and the node
# ---------------------------------------------------------------------------
#: Estimators :func:`fit_full` runs by default; the held-out score picks one. The
#: robust ones (``irls``, ``threshold``) are for records with gross errors, fitted
#: with ``filter_torque=False`` (a filter spreads each outlier over its
#: neighbours); they iterate over the samples: IRLS adds ~9 s of CPU per 10 min of
#: 1 kHz data, against 1.7 s for WLS and the consistent fit together.
FULL_METHODS = ('wls', 'consistent')
#: Friction of :func:`fit_full` unless told: Coulomb (smooth sign) + viscous.
DEFAULT_FRICTION = FrictionModel(coulomb='tanh', smooth_velocity=0.01)
#: ``armature='auto'`` keeps the rotor inertias when the mean held-out RMSE % with them
#: is at most this fraction of the score without.
ARMATURE_GAIN = 0.9
#: Torque the validation compares against: the filtered one (what the fit sees).
VALIDATE_AGAINST = ('filtered', 'raw')


def _metrics_dict(metrics):
    """``{joint: {max_torque, rmse, rmse_percent, mae, rho, n_samples}}``."""
    out = {}
    for m in metrics:
        d = m.to_dict()
        d.pop('joint')
        d.pop('noise_amplitude', None)
        out[m.joint] = d
    return out


#: Candidates of ``friction='auto'``, simplest first (``--friction`` words).
AUTO_FRICTION = ('coulomb,viscous', 'coulomb,viscous,offset', 'coulomb,viscous,stribeck',
                 'coulomb_directional,viscous', 'coulomb,viscous,load_coulomb')
#: Widths ε of the Coulomb term's smooth sign ``tanh(q̇ / ε)`` that ``friction='auto'``
#: tries first, with Coulomb + viscous friction, on the same time blocks (rad/s): the
#: narrowest within :data:`AUTO_TOLERANCE` of the best is kept for every candidate. A
#: joint whose friction rises over a tenth of a rad/s (a Panda's, a sigmoid in q̇ of
#: 5-20 per rad/s) left a sharp sign's residual that the checks of the effort's scale and
#: sign read as a torque constant off or a sign flipped on right simulated arms.
SMOOTH_VELOCITIES = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
#: ... and a wider one only where it scores at most this fraction of the narrowest's: the
#: width changes what the model serves at rest and at reversals (the residual, the contact
#: bands), so it must earn it. The real UR10e's 30 s run scored 3.56 at 0.02 rad/s against
#: 3.60 at 0.01 (its fit's own contact bands then narrowed and flagged a free recording);
#: simulated arms whose friction rises over 0.1-0.4 rad/s scored about 0.55x at 0.16.
WIDTH_GAIN = 0.95
#: The Stribeck candidate is tried only with a smooth sign at most this fraction of its
#: Stribeck velocity wide: a hump ``s(q̇)·exp(-(q̇/v_st)²)`` inside a Coulomb term that
#: still rises there peaks low (0.66 at ε = 0.02, 0.13 at 0.16 for v_st = 0.05 rad/s), so
#: its coefficient would read several times the stiction it stands for (the contact
#: band's holding friction adds it whole).
STRIBECK_WIDTH = 0.4
#: A richer candidate is kept only if its mean held-out RMSE % is below the
#: simplest one within this ratio of the best (parsimony: noise-level gains are not gains).
AUTO_TOLERANCE = 1.01
#: A richer candidate is not chosen when the gravity torque it fits moves from the
#: simplest one's by more than this fraction of the URDF's gravity (RMS over the
#: recorded poses) on a joint that carries gravity: its extra terms then trade friction
#: for gravity on this motion (an offset or a direction-dependent Coulomb term is a
#: constant torque while the joint moves one way), unless it explains the recording
#: decisively better (:data:`DECISIVE`).
GRAVITY_SHIFT = 0.05
#: ... its mean held-out RMSE % at most this fraction of the simplest one's. Simulated
#: arms with no offset, whose rotor inertia or friction shape the model lacks, read
#: 0.79-0.99 for an offset or a direction-dependent Coulomb term that moved the gravity
#: torque by 4-54 % (a loaded UR5 elbow's fitted gravity 56 % off); a true offset of
#: 0.3 N·m read 0.2.
DECISIVE = 0.5
#: ... but never one that moves the gravity torque by more than this fraction of the
#: URDF's: no error of a URDF's masses moves it that far, so the term trades for gravity
#: whatever it scores. A true offset of 0.3 N·m on the humanoid moved it 0.31; a right
#: Kinova whose friction rose slowly and shifted with direction fitted offsets of -3.0
#: and +1.7 N·m that moved it 2.55 (its gravity 17 % off, 1.6 % with the directional
#: term, which scored 0.99 against the offset's 0.69).
GRAVITY_SHIFT_CAP = 1.0
#: A joint slower than :data:`~arm_dyn_id.model.dynamics.SLOW_SPEED` is left out of its
#: own torque's equations in the full fit (:func:`moving_rows`), and for this many periods
#: of the cut-off frequency either side of such a sample. Simulated arms with the
#: friction step at 1e-3 rad/s fitted their gravity 1.7-9.9 % off through the slow
#: samples at rest and reversals, 0.0-0.1 % without them (a SO-101, its gravity under
#: its friction: 82 %, 0.1 %); the real UR10e scored the same on its held-out
#: recordings (docs/benchmarks.md).
SLOW_SPREAD = 0.25
#: ... unless the joint would keep less than this share of its samples.
MOVING_SHARE = 0.5


def _prepare(robot, base, friction, t, q, tau, features_out=False, widths=(), **options):
    """Prepared record with the stacked base + friction regressor W (M, n, r + f),
    every column through the same filter as τ.

    The load-dependent term's column ``|τ_load|·s(q̇)`` (τ_load the nominal URDF's
    rigid-body torque, ``Y θ_URDF``) rides with the rigid-body regressor: the same
    pinocchio call, the same filter. ``features_out``: also return the friction
    features (M, n, k). ``widths``: also return the smooth sign ``tanh(q̇ / ε)`` at each
    ε, filtered alike (M, n, len(widths)), last."""
    armature = base.armature
    theta = nominal_standard_parameters(robot, armature) if friction.load else None
    own = friction.per_joint - (1 if friction.load else 0)

    def features(dq):
        f = friction.features(dq)
        return np.concatenate([f] + [np.tanh(dq / eps)[..., None] for eps in widths],
                              axis=-1) if widths else f

    def rigid(qd, dqd, ddqd):
        Y = rigid_regressor(robot, qd, dqd, ddqd, armature=armature)
        Yb = base.reduce(Y)
        if theta is None:
            return Yb
        load = np.abs(Y @ theta) * friction.sign(dqd)
        return np.concatenate([Yb, load[:, :, None]], axis=2)

    if options.get('signals') is not None:
        options['signals_key'] = (friction, tuple(widths))
    prepared = prepare(t, q, tau, features=features, regressor=rigid, **options)
    regr, feats = prepared.regressor, prepared.features
    soft = feats[:, :, own:]
    feats = feats[:, :, :own]
    if theta is not None:
        regr, feats = regr[:, :, :-1], np.concatenate([feats, regr[:, :, -1:]], axis=2)
    F = friction.regressor(prepared.dq, features=feats)
    W = np.concatenate([regr, F], axis=2)
    out = (prepared, W) + ((feats,) if features_out else ()) + ((soft,) if widths else ())
    return out


def _selected(parts, T):
    """Block moments of the columns ``W T`` (T (c, k) selects and adds columns of W)."""
    return [NormalEquations(T.T @ p.A @ T, T.T @ p.b, T.T @ p.A_joint @ T, p.b_joint @ T,
                            p.tau_sq, p.count, p.weights) for p in parts]


def _chosen_width(scores):
    """The smooth sign's width kept from each width's held-out score ``{eps: score}``
    (every :data:`SMOOTH_VELOCITIES`): the narrowest within :data:`AUTO_TOLERANCE` of
    the best, and a wider one than the narrowest only at :data:`WIDTH_GAIN` of its score
    or less."""
    best = min(scores.values())
    width = next(eps for eps in SMOOTH_VELOCITIES if scores[eps] <= AUTO_TOLERANCE * best)
    narrowest = SMOOTH_VELOCITIES[0]
    return width if scores[width] <= WIDTH_GAIN * scores[narrowest] else narrowest


def _choose_friction(robot, base, t, q, tau, noise, holdout, **options):
    """``friction='auto'``: every :data:`AUTO_FRICTION` candidate scored on the
    recording's own time blocks (each block predicted by a fit without it,
    friction coefficients bounded ≥ 0), one preparation shared by all (only the
    friction columns differ). The simplest candidate within :data:`AUTO_TOLERANCE`
    of the best mean held-out RMSE % over the joints is chosen, among those whose
    gravity torque stays within :data:`GRAVITY_SHIFT` of the simplest one's
    (:func:`_gravity_shifts`) or whose score is :data:`DECISIVE` of its. Before them, the
    width of the Coulomb term's smooth sign (:data:`SMOOTH_VELOCITIES`), scored alike with
    Coulomb + viscous friction: the narrowest within :data:`AUTO_TOLERANCE` of the best
    (a wider one costs a second preparation).

    Returns
    -------
    prepared, W, friction, selection, Wu : Prepared, ndarray (M, n, r + f), FrictionModel,
        dict, ndarray (M, n, r + u)
        ``Wu``: the regressor with every candidate's friction terms (the union), at the
        width chosen.
    """
    union = FrictionModel(coulomb='tanh', smooth_velocity=SMOOTH_VELOCITIES[0], offset=True,
                          stribeck=True, directional=True, load=True)
    prepared, Wu, feats, soft = _prepare(robot, base, union, t, q, tau, features_out=True,
                                         widths=SMOOTH_VELOCITIES, **options)
    r, n, ku = base.count, robot.n_joints, union.per_joint
    target = prepared.tau
    groups = time_blocks(len(target), int(holdout))
    peak = np.maximum(np.nanmax(np.abs(target), axis=0), 1e-12)
    finite = np.all(np.isfinite(target), axis=1) & np.all(np.isfinite(Wu), axis=(1, 2))
    w_given = None if noise is None else _weights(np.asarray(noise, dtype=float), n)
    # the Coulomb term's width first: Coulomb + viscous at each, from one pass over the
    # rigid columns and every width's (a width's moments are Tᵀ A T, as the candidates')
    simplest_model = parse_friction(AUTO_FRICTION[0])
    kw = len(SMOOTH_VELOCITIES) + 1
    Fw = simplest_model.regressor(prepared.dq, features=np.concatenate(
        [soft, feats[:, :, union.terms.index('fv')][:, :, None]], axis=2))
    Ww = np.concatenate([Wu[:, :, :r], Fw], axis=2)
    ok = finite & np.all(np.isfinite(Ww), axis=(1, 2))
    width_parts = [sample_moments(Ww, target, np.ones(n), ok & (groups == g))
                   for g in range(int(holdout))]
    width_scores, w = {}, w_given
    nonneg = _signed_terms(r, simplest_model, n)
    for i, eps in enumerate(SMOOTH_VELOCITIES):
        T = np.zeros((r + n * kw, r + 2 * n))
        T[:r, :r] = np.eye(r)
        for j in range(n):
            T[r + j * kw + i, r + 2 * j] = T[r + j * kw + kw - 1, r + 2 * j + 1] = 1.0
        parts = _selected(width_parts, T)
        if w is None:   # weights of the narrowest one's residual, shared by all
            w = _residual_weights(parts, peak)
        width_scores[eps] = float(np.mean(_held_out_percent(parts, w, nonneg, peak)))
    width = _chosen_width(width_scores)
    if width != union.smooth_velocity:
        union = replace(union, smooth_velocity=width)
        prepared, Wu = _prepare(robot, base, union, t, q, tau, **options)
        target = prepared.tau
        finite = np.all(np.isfinite(target), axis=1) & np.all(np.isfinite(Wu), axis=(1, 2))
    # one pass over the union's columns; a candidate's columns are W_u T (fc = fcp + fcn),
    # so its moments are Tᵀ A T, Tᵀ b. Scored on every sample, the slow ones too
    # (moving_rows): above the slow speed a direction-dependent Coulomb term is Coulomb
    # plus an offset; only the slow samples tell the two apart
    union_parts = [sample_moments(Wu, target, np.ones(n), finite & (groups == g))
                   for g in range(int(holdout))]
    w = w_given
    scores, built = {}, {}
    at_width = {spec: replace(parse_friction(spec), smooth_velocity=width)
                for spec in AUTO_FRICTION}
    tried = [spec for spec, model in at_width.items()
             if not model.stribeck or width <= STRIBECK_WIDTH * model.stribeck_velocity]
    for spec in tried:
        model = at_width[spec]
        kc = model.per_joint
        T = np.zeros((r + n * ku, r + n * kc))
        T[:r, :r] = np.eye(r)
        for j in range(n):
            for i, term in enumerate(model.terms):
                for source in (('fcp', 'fcn') if term == 'fc' else (term,)):
                    T[r + j * ku + union.terms.index(source), r + j * kc + i] = 1.0
        parts = _selected(union_parts, T)
        if w is None:   # weights of the simplest candidate's residual, shared by all
            w = _residual_weights(parts, peak)
        nonneg = _signed_terms(r, model, n)
        scores[spec] = float(np.mean(_held_out_percent(parts, w, nonneg, peak)))
        built[spec] = (model, T, parts, nonneg)
    shifts = _gravity_shifts(robot, base, prepared.q, built, w)
    simplest = scores[AUTO_FRICTION[0]]
    eligible = [spec for spec in tried if shifts[spec] <= GRAVITY_SHIFT or
                (scores[spec] <= DECISIVE * simplest and shifts[spec] <= GRAVITY_SHIFT_CAP)]
    best = min(scores[spec] for spec in eligible)
    chosen = next(spec for spec in eligible if scores[spec] <= AUTO_TOLERANCE * best)
    model, T = built[chosen][:2]
    W = Wu @ T
    selection = {'chosen': chosen, 'model': model.describe(),
                 'by': f'mean held-out RMSE % over the joints on {int(holdout)} time blocks '
                       'of the training recording (coefficients bounded >= 0); the '
                       f'simplest within {AUTO_TOLERANCE:g}x of the best, setting aside '
                       f'one that moves the gravity torque from the simplest\'s by more '
                       f'than {100 * GRAVITY_SHIFT:g} % of the URDF\'s unless its score is '
                       f'at most {DECISIVE:g}x the simplest\'s (and moves it by at most '
                       f'{100 * GRAVITY_SHIFT_CAP:g} %); first the Coulomb term\'s '
                       'smooth sign tanh(qd/eps): the narrowest eps of '
                       f'{", ".join(f"{e:g}" for e in SMOOTH_VELOCITIES)} rad/s within '
                       f'{AUTO_TOLERANCE:g}x of the best, with coulomb,viscous (one wider '
                       f'than {SMOOTH_VELOCITIES[0]:g} only at {WIDTH_GAIN:g}x its score or '
                       'less)',
                 'scores': scores, 'gravity_shift': shifts, 'gravity_tolerance': GRAVITY_SHIFT,
                 # the Coulomb term's width, chosen first (coulomb,viscous at each)
                 'smooth_velocity': {'chosen': width,
                                     'scores': {f'{eps:g}': v
                                                for eps, v in width_scores.items()}},
                 # the ones that scored better than the simplest (the others would not
                 # have been chosen anyway)
                 'set_aside': [spec for spec in tried
                               if spec not in eligible and scores[spec] < simplest],
                 # not scored: a Stribeck hump inside a Coulomb term this wide
                 'not_tried': [spec for spec in AUTO_FRICTION if spec not in tried]}
    return prepared, W, model, selection, Wu


def _spread(mask, prepared, dt):
    """``mask`` (samples along axis 0, bool) widened by :data:`SLOW_SPREAD` / cut-off s
    either side: the filter spreads a sample's torque over its neighbours."""
    cutoff = float(prepared.info.get('cutoff_hz') or np.nan)
    if np.isfinite(cutoff) and cutoff > 0 and dt > 0:
        half = int(np.ceil(SLOW_SPREAD / cutoff / dt - 1e-6))
        if half > 0:
            return scipy.ndimage.maximum_filter1d(mask.astype(np.uint8), size=2 * half + 1,
                                                  axis=0).astype(bool)
    return mask


def moving_rows(prepared):
    """Which of each joint's prepared samples the full fit uses: (M, n) float 0/1, or None
    when it uses them all.

    A joint slower than :data:`SLOW_SPEED` (its filtered q̇), and for
    :data:`SLOW_SPREAD` / cut-off seconds either side of that (the filter spreads a
    sample's torque over its neighbours), is left out of its own torque's equations:
    there the friction is what no model knows (presliding, stiction at a reversal or a
    start) and the friction columns assume it; a joint that would keep less than
    :data:`MOVING_SHARE` of its samples keeps them all. Other joints' equations at those
    samples stay. The samples are still predicted and scored by the validation.
    """
    dq = prepared.dq
    if dq is None or len(dq) < 3:
        return None
    slow = ~(np.abs(dq) >= SLOW_SPEED)          # NaN counts as slow
    keep = ~_spread(slow, prepared, float(np.median(np.diff(prepared.t))))
    share = keep.mean(axis=0)
    keep[:, share < MOVING_SHARE] = True
    if keep.all():
        return None
    return keep.astype(float)


#: s: the arm resting (every joint slower than SLOW_SPEED) this long holds still (a rest,
#: not a reversal): its joints hold whatever friction they were left with (stiction,
#: anywhere within ±F_c), which no model predicts; such samples are not scored
REST_SECONDS = 1.0


def rest_rows(prepared):
    """The samples where the arm rests: every joint slower than :data:`SLOW_SPEED` for at
    least :data:`REST_SECONDS` (and :data:`SLOW_SPREAD` / cut-off s either side), (M,)
    bool, or None when there are none. The fit leaves them out of its held-out score
    unless they are more than ``1 - MOVING_SHARE`` of the recording (then the rests are
    what it shows, and a refusal names them). A simulated UR5 and Panda resting twice
    for 5 s during their Fourier excitation (a quarter of the samples), stiction within
    ±F_c there, were refused as "does not follow" their lightest joint with the model
    0.01-0.02 % off: the held-out score counted the friction held at rest."""
    dq = prepared.dq
    if dq is None or len(dq) < 3:
        return None
    dt = float(np.median(np.diff(prepared.t)))
    if not dt > 0:
        return None
    still = np.all(np.abs(dq) < SLOW_SPEED, axis=1).astype(np.uint8)
    span = int(np.ceil(REST_SECONDS / dt - 1e-6)) | 1
    # in a still run at least REST_SECONDS long: the opening (erosion, then dilation)
    rest = _spread(scipy.ndimage.maximum_filter1d(
        scipy.ndimage.minimum_filter1d(still, size=span), size=span).astype(bool), prepared, dt)
    return rest if rest.any() else None


def _left_out(keep, joints):
    """``{joint: share of its samples left out}`` of :func:`moving_rows`."""
    share = np.zeros(len(joints)) if keep is None else 1.0 - keep.mean(axis=0)
    return {j: round(float(x), 4) for j, x in zip(joints, share)}


def _kept_noise(noise, keep):
    """A per-joint residual σ from moments that counted every sample (``rss / count``)
    over the samples each joint kept."""
    if keep is None:
        return noise
    return noise / np.sqrt(np.maximum(keep.mean(axis=0), 1e-12))


def _signed_terms(r, friction, n):
    """Which of ``r`` base + ``friction``'s coefficients are bounded ≥ 0 (bool, r + f)."""
    nonneg = np.zeros(r + friction.per_joint * n, dtype=bool)
    nonneg[r:] = [name.rstrip('0123456789') in FrictionModel.POSITIVE
                  for name in friction.names(n)]
    return nonneg


def _residual_weights(parts, peak, keep=None):
    """Per-joint weights from the residual of a first unweighted least-squares fit of
    the block moments ``parts`` (floored at 1e-6 of the largest ``peak``); ``keep``: the
    rows they were accumulated with (:func:`moving_rows`)."""
    total = NormalEquations.total(parts)
    beta = np.linalg.lstsq(total.A, total.b, rcond=None)[0]
    sigma = _kept_noise(np.sqrt(_row_rss(total, beta) / max(total.count, 1)), keep)
    return _weights(np.maximum(sigma, 1e-6 * peak.max()), len(peak))


def _held_out_percent(parts, w, nonneg, peak):
    """Held-out RMSE % of each joint's peak: every block of moments ``parts`` predicted by
    the signed weighted fit of the others (:func:`_signed_solve`), (n,)."""
    rss, count = np.zeros(len(peak)), 0
    for g in range(len(parts)):
        rest = NormalEquations.total(p for i, p in enumerate(parts) if i != g)
        if parts[g].count == 0 or rest.count == 0:
            continue
        beta = _signed_solve(rest, w, nonneg)
        rss += _row_rss(parts[g], beta)
        count += parts[g].count
    return 100 * np.sqrt(rss / max(count, 1)) / peak


def _as_fitted(robot, model, t, q, tau):
    """A record prepared as ``model`` was fitted (its base set, friction model and
    preparation) and its stacked regressor: ``(prepared, W)``."""
    prep = model.metadata.get('preparation') or {}
    t, q, tau = _check_record(robot, t, q, tau)
    return _prepare(robot, model.base, model.friction_model, t, q, tau,
                    cutoff_hz=prep.get('cutoff_hz'), order=int(prep.get('order', 4)),
                    decimate=prep.get('decimate'), filter_torque=prep.get('filter_torque', True))


def exchanged_scores(robot, model, t, q, tau, joint, holdout=HOLDOUT_FOLDS):
    """Held-out RMSE % per joint of ``model``'s structure (its base set, friction model
    and preparation) fitted by signed weighted least squares on time blocks of a record,
    with the torques as recorded and with column ``joint`` exchanged with each other
    column in turn: one preparation and one regressor for all (only the target differs;
    each target weighted by its own first fit's residual).

    Returns
    -------
    dict
        ``None`` (as recorded) and each other column index -> ndarray (n,) of RMSE % of
        that joint's peak torque.
    """
    n = robot.n_joints
    prepared, W = _as_fitted(robot, model, t, q, tau)
    nonneg = _signed_terms(model.base.count, model.friction_model, n)
    groups = time_blocks(len(prepared.tau), int(holdout))
    keep = moving_rows(prepared)
    out = {}
    for k in [None] + [k for k in range(n) if k != joint]:
        target = prepared.tau.copy()
        if k is not None:
            # the filter and the resampling act column by column: exchanging the prepared
            # columns is preparing the exchanged record
            target[:, [joint, k]] = target[:, [k, joint]]
        finite = np.all(np.isfinite(target), axis=1) & np.all(np.isfinite(W), axis=(1, 2))
        parts = [sample_moments(W, target, np.ones(n), finite & (groups == g), keep)
                 for g in range(int(holdout))]
        peak = np.maximum(np.nanmax(np.abs(target), axis=0), 1e-12)
        out[k] = _held_out_percent(parts, _residual_weights(parts, peak, keep), nonneg,
                                   peak)
    return out


def tilt_refit(robot, model, t, q, tau):
    """The gravity tilt a record's torques follow, fitted with the model's structure.

    ``model``'s base set, friction model and preparation, refitted by weighted least
    squares (each joint weighted by its residual's spread) with two columns more: the
    model's gravity torques along two directions square to the URDF's gravity
    (:func:`arm_dyn_id.identification.tilt.tilt_columns`), the small tilt's horizontal
    part (linear in it). Fitted with the rigid-body columns, it is not taken up by
    parameters that bent to explain it in the fit without it.

    Returns
    -------
    dict
        ``degrees``, ``removed`` (share of the weighted residual of the refit without the
        two columns they remove), ``gravity_vector`` (m/s², the URDF's root frame).
    """
    from arm_dyn_id.identification.tilt import column_gain, tilt_columns, tilt_reading
    prepared, W = _as_fitted(robot, model, t, q, tau)
    coef, removed = column_gain(W, tilt_columns(model, prepared.q), prepared.tau)[:2]
    return tilt_reading(model.robot.gravity_vector, coef, removed)


def _signed_solve(neq, w, nonneg):
    """The least-squares coefficients of moments ``neq`` with per-joint weights ``w``,
    refitted with the ``nonneg`` ones bounded ≥ 0 when one comes out negative."""
    A, b = np.einsum('j,jrs->rs', w, neq.A_joint), w @ neq.b_joint
    beta = np.linalg.lstsq(A, b, rcond=None)[0]
    if np.any(beta[nonneg] < 0):
        beta, _ = bounded_solve(A, b, nonneg)
    return beta


def _gravity_shifts(robot, base, q, built, w, poses=300):
    """Per candidate: how far the gravity torque it fits on the whole recording moves
    from the simplest candidate's, the largest over the joints that carry gravity of
    RMS(ΔG) / RMS(G_URDF) over (up to ``poses``) recorded poses. ``built``: spec ->
    (model, T, block moments, which coefficients are bounded ≥ 0)."""
    P = q[::max(1, len(q) // poses)]
    Yg = gravity_base_regressor(robot, base, P)
    urdf = np.sqrt(np.mean(robot.gravity_torques(P) ** 2, axis=0))
    carry = carries_gravity(urdf)
    gravity = {}
    for spec, (_, _, parts, nonneg) in built.items():
        gravity[spec] = Yg @ _signed_solve(NormalEquations.total(parts), w,
                                           nonneg)[:base.count]
    first = gravity[AUTO_FRICTION[0]]
    out = {}
    for spec, G in gravity.items():
        moved = np.sqrt(np.mean((G - first) ** 2, axis=0)) / np.maximum(urdf, 1e-12)
        out[spec] = float(np.max(moved[carry])) if carry.any() else 0.0
    return out


def _reweighted(neq, w):
    """The same moments with per-joint weights w (n,): A = Σ_j w_j A_j, b = Σ_j w_j b_j."""
    return NormalEquations(np.einsum('j,jrs->rs', w, neq.A_joint), w @ neq.b_joint,
                           neq.A_joint, neq.b_joint, neq.tau_sq, neq.count, w)


def _check_record(robot, t, q, tau):
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    n = robot.n_joints
    if t.ndim != 1 or q.ndim != 2 or q.shape != (t.shape[0], n) or tau.shape != q.shape:
        raise DataError(f'times {t.shape}, positions {q.shape} and torques {tau.shape} must be '
                        f'(N,), (N, {n}) and (N, {n}) for joints {list(robot.joint_names)}')
    return t, q, tau


def fit_full(robot, t, q, tau, config=None, methods=FULL_METHODS, cutoff_hz=None,
             harmonic_hz=None, holdout=HOLDOUT_FOLDS, friction=None, armature=False,
             noise=None, decimate=None, order=4, filter_torque=True, nominal_weight=None,
             solver='CLARABEL', validate_against='filtered', provenance=None, robot_name=None,
             seed=0, _signals=None):
    """Fit, choose and validate a full-dynamics model from one recording.

    Steps: :func:`arm_dyn_id.data.preparation.prepare` (resample, zero-phase
    low-pass with a stated cut-off, q̇ and q̈, edge trimming, decimation), the
    base + friction regressor, per-joint noise weights, every estimator in
    ``methods`` scored on ``holdout`` contiguous time blocks it was not fitted on
    (:func:`~arm_dyn_id.identification.estimators.select`), the best refitted on
    all samples. The validation metrics are those of the chosen estimator's
    out-of-fold predictions (each block predicted by the fit without it).

    Parameters
    ----------
    robot : RobotModel
    t : ndarray, (N,)
        s (uneven stamps are resampled).
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n)
        N·m (joint torques: motor currents already converted).
    config : ArmConfig, optional
        ``robot_name`` and ``torque_noise`` (weights) when given.
    methods : sequence of str
        Keys of :data:`~arm_dyn_id.identification.estimators.ESTIMATORS` and
        ``'consistent'`` (:mod:`.consistent`).
    cutoff_hz, harmonic_hz, order, decimate, filter_torque
        See :func:`~arm_dyn_id.data.preparation.prepare`.
    holdout : int
        Time blocks (folds) for the held-out choice and validation (≥ 2).
    friction : FrictionModel, str or None
        A FrictionModel, a ``--friction`` specification
        (:func:`~arm_dyn_id.model.dynamics.parse_friction`), or ``'auto'``: the
        :data:`AUTO_FRICTION` candidate with the best held-out score on the
        recording's own time blocks (:func:`_choose_friction`; the scores are in
        ``metadata['selection']['friction']``). Default :data:`DEFAULT_FRICTION`:
        Coulomb with the smooth sign ``tanh(q̇ / 0.01 rad/s)`` + viscous.
    armature : bool or 'auto'
        Identify rotor inertias; ``'auto'``: fit with and without, keep them when
        the mean held-out RMSE % with them is at most :data:`ARMATURE_GAIN` of the
        score without (the record's own time blocks; the scores are in
        ``metadata['selection']['armature']``). Default False here; the command,
        the node and the config default to ``'auto'``.
    noise : array_like, (n,), optional
        Torque σ per joint (N·m); default the residual RMS of a first
        least-squares fit (two-step weighted least squares).
    nominal_weight : float, optional
        λ of the consistent fit (default :data:`.consistent.NOMINAL_WEIGHT`).
    solver : {'CLARABEL', 'SCS'}
    validate_against : {'filtered', 'raw'}
        Torque the validation metrics compare with.
    provenance : dict, optional
    robot_name : str, optional
    _signals : dict, optional
        The record's filtered signals shared between fits of it (``armature='auto'``
        passes one to both; :func:`~arm_dyn_id.data.preparation.prepare`).

    Returns
    -------
    model : DynamicsModel
    validation : dict
        ``{'held_out': {joint: {rmse, rmse_percent, mae, rho, max_torque,
        n_samples}}, 'training': {...}}``.

    Raises
    ------
    DataError
        Bad shapes, NaN-only data, too short records.
    ConfigError
        Unknown estimator, solver or validation choice.
    RankDeficientError
        The data identifies no model with any estimator.
    """
    if isinstance(armature, str):
        if armature != 'auto':
            raise ConfigError(f"armature {armature!r} must be true, false or 'auto'")
        options = dict(config=config, methods=methods, cutoff_hz=cutoff_hz,
                       harmonic_hz=harmonic_hz, holdout=holdout, friction=friction,
                       noise=noise, decimate=decimate, order=order,
                       filter_torque=filter_torque, nominal_weight=nominal_weight,
                       solver=solver, validate_against=validate_against,
                       provenance=provenance, robot_name=robot_name, seed=seed)
        fits, errors = {}, {}
        signals = {}     # the record filtered once for both: only the regressor differs
        for flag in (False, True):
            try:
                fits[flag] = fit_full(robot, t, q, tau, armature=flag, _signals=signals,
                                      **options)
            except RankDeficientError as error:
                # the other fit stands on its own (n more parameters may leave the
                # consistent fit without a solution where the rigid body alone has one)
                errors[str(flag).lower()] = str(error)
        if not fits:
            raise RankDeficientError(f"neither fit of armature='auto' succeeded: without "
                                     f"rotor inertia: {errors['false']}; with: "
                                     f"{errors['true']}")
        scores = {flag: float(np.mean([m['rmse_percent'] for m in
                                       v['held_out'].values()]))
                  for flag, (_, v) in fits.items() if 'held_out' in v}
        # the rotor inertias are kept only for a clear gain: n more parameters lower the
        # score a little on any arm, and cost its gravity (simulated arms without rotor
        # inertia read 0.96-0.996x, their gravity 1.7 -> 4.2 % off; with 0.1-0.3 kg·m²
        # per joint that mattered 0.16-0.77x)
        if len(scores) == 2:
            best = bool(scores[True] <= ARMATURE_GAIN * scores[False])
        else:   # one fit (or one score) only: that one
            best = True in scores or False not in fits
        model, validation = fits[best]
        model.metadata['selection']['armature'] = {
            'chosen': bool(best),
            'by': f'mean held-out RMSE % over the joints, kept at {ARMATURE_GAIN:g}x or '
                  'less of the score without',
            'scores': {str(k).lower(): v for k, v in scores.items()},
            **({'errors': errors} if errors else {})}
        return model, validation
    started = time.perf_counter()
    methods = tuple(methods)
    unknown = [m for m in methods if m not in ESTIMATORS and m != 'consistent']
    if unknown or not methods:
        raise ConfigError(f'unknown estimator {unknown[0] if unknown else None!r}; choose from '
                          f'{sorted(ESTIMATORS) + ["consistent"]}')
    if validate_against not in VALIDATE_AGAINST:
        raise ConfigError(f'validate_against {validate_against!r} must be one of '
                          f'{list(VALIDATE_AGAINST)}')
    if int(holdout) < 2:
        raise ConfigError(f'holdout {holdout} must be at least 2 time blocks')
    t, q, tau = _check_record(robot, t, q, tau)
    friction = parse_friction(friction) or DEFAULT_FRICTION
    nominal_weight = cons.NOMINAL_WEIGHT if nominal_weight is None else float(nominal_weight)
    if config is not None:
        robot_name = robot_name or getattr(config, 'robot_name', None)
        cfg_noise = getattr(config, 'fit_noise', None)
        if noise is None and cfg_noise is not None and np.all(np.isfinite(cfg_noise)) and \
                np.all(np.asarray(cfg_noise) > 0):
            noise = np.asarray(cfg_noise, dtype=float)
    base = rigid_base_parameters(robot, armature=armature)
    options = dict(cutoff_hz=cutoff_hz, harmonic_hz=harmonic_hz, order=order,
                   decimate=decimate, filter_torque=filter_torque, signals=_signals)
    friction_choice, W_union = None, None
    if friction == 'auto':
        prepared, W, friction, friction_choice, W_union = _choose_friction(
            robot, base, t, q, tau, noise, holdout, **options)
    else:
        prepared, W = _prepare(robot, base, friction, t, q, tau, **options)
    target = prepared.tau
    names = tuple(base.names) + friction.names(robot.n_joints)
    r = base.count
    n = robot.n_joints
    # one pass over W: unweighted moments per block of time and per joint; every
    # weighted sum, fold and the first noise estimate come from them
    groups = time_blocks(len(target), int(holdout))
    finite = np.all(np.isfinite(target), axis=1) & np.all(np.isfinite(W), axis=(1, 2))
    keep = moving_rows(prepared)
    raw_parts = {g: sample_moments(W, target, np.ones(n), finite & (groups == g), keep)
                 for g in range(int(holdout))}
    if noise is None:
        first = MOMENT_ESTIMATORS['wls'](NormalEquations.total(raw_parts.values()), names)
        noise = np.maximum(_kept_noise(first.noise_std, keep),
                           1e-6 * np.nanmax(np.abs(target)))
    noise = np.asarray(noise, dtype=float)
    w = _weights(noise, n)
    parts = {g: _reweighted(p, w) for g, p in raw_parts.items()}

    B = base_matrix(base)
    theta_nom = nominal_standard_parameters(robot, armature)
    _, _, fixed = link_shares(robot, robot.source)
    fterms = [name.rstrip('0123456789') for name in friction.names(n)]
    n_arm = n if armature else 0

    solutions = {}
    total = NormalEquations.total(parts.values())
    sdp = []          # compiled once, on first use, for every fold

    def fit_consistent(fold):
        neq = total if fold is None else NormalEquations.total(
            p for g, p in parts.items() if g != fold)
        if not sdp:
            # every physically signed term is bounded as Coulomb is
            signed = ['fc' if f in FrictionModel.POSITIVE else f for f in fterms]
            sdp.append(cons.ConsistentProblem(
                total.A, B, theta_nom, robot.n_bodies, signed, fixed=fixed,
                nominal_weight=nominal_weight, solver=solver, armature=n_arm,
                count=total.count * n))
        sol = sdp[0].solve(neq.A, neq.b, neq.count * n, c=float(w @ neq.tau_sq))
        solutions[fold] = sol
        mask = finite & (groups != fold) if fold is not None else finite
        resid = target - _predict(W, sol.x)
        resid[~mask] = np.nan
        rss = _row_rss(neq, sol.x)
        condition, _ = identifiability(neq.A, names)
        try:
            cov_unit = np.linalg.inv(neq.A)
        except np.linalg.LinAlgError:
            cov_unit = np.linalg.pinv(neq.A)
        # each joint's residual variance its own, as the least-squares candidates report
        # it (the constraints' own effect on the spread is not counted)
        cov = joint_variance_covariance(cov_unit, neq.A_joint, w, rss, neq.count)
        return IdentificationResult(
            method='consistent', names=names, beta=sol.x,
            std_errors=np.sqrt(np.clip(np.diag(cov), 0, None)), covariance=cov,
            residuals=resid, condition_number=condition, rank=len(sol.x),
            n_samples=int(mask.sum()), inliers=mask, noise_std=np.sqrt(rss / neq.count),
            seconds=sol.seconds,
            info={'solver': sol.solver, 'status': sol.status, **sol.info,
                  'min_pseudo_inertia_eigenvalues': sol.min_eigenvalues.tolist()})

    cache = {}
    nonnegative = _signed_terms(r, friction, n)
    # the sample-by-sample estimators (irls, threshold, pso) see the same equations as
    # the moments: each joint's slow samples zeroed out
    by_sample = keep is not None and any(m not in MOMENT_ESTIMATORS and m != 'consistent'
                                         for m in methods)
    W_rows, target_rows = (W * keep[:, :, None], target * keep) if by_sample else (W, target)

    def fit(method, fold):
        key = (method, fold)
        if key not in cache:
            if method == 'consistent':
                cache[key] = fit_consistent(fold)
            elif method in MOMENT_ESTIMATORS:
                # the same estimate from the blocks' moments: no pass over W
                cache[key] = MOMENT_ESTIMATORS[method](NormalEquations.total(
                    p for g, p in parts.items() if g != fold), names)
            else:
                mask = None if fold is None else groups != fold
                cache[key] = ESTIMATORS[method](W_rows, target_rows, names, noise=noise,
                                                mask=mask)
            if method != 'consistent' and np.any(cache[key].beta[nonnegative] < 0):
                # Coulomb, viscous, Stribeck, load friction are never negative: refit ≥ 0
                neq = total if fold is None else NormalEquations.total(
                    p for g, p in parts.items() if g != fold)
                cache[key] = nonnegative_friction(cache[key], neq.A, neq.b, nonnegative, neq)
        return cache[key]

    def score(result, fold):
        if fold is None:
            if result.residuals.shape[0] == 0:       # a fit from moments
                return float(w @ result.noise_std ** 2) / n
            rr = result.residuals[result.inliers]
            return float(np.nanmean(w * rr ** 2))
        return float(w @ _row_rss(parts[fold], result.beta)), parts[fold].count * n

    choice = select(methods, fit, score, int(holdout))
    result = choice.result
    method = choice.selection.method
    # the model's torque as compared: through the fit's filter ('filtered'), or
    # from the unfiltered regressor at the same samples ('raw', against raw τ)
    W_eval = W
    if validate_against == 'raw' and filter_torque:
        _, W_eval = _prepare(robot, base, friction, t, q, tau,
                             cutoff_hz=prepared.info['cutoff_hz'], order=order,
                             decimate=prepared.info['decimate'], filter_torque=False)
    # out-of-fold predictions of the chosen estimator: every block by the fit without it
    held_pred = np.full_like(target, np.nan)
    for g in range(int(holdout)):
        try:
            fold_result = fit(method, g)
        except (RankDeficientError, np.linalg.LinAlgError):   # left out of the score
            continue
        rows = groups == g
        held_pred[rows] = _predict(W_eval[rows], fold_result.beta)
    reference = target if validate_against == 'filtered' else prepared.tau_raw
    joints = robot.joint_names
    validation = {}
    ok = np.all(np.isfinite(held_pred), axis=1)
    rest = rest_rows(prepared)
    rests = 0.0 if rest is None else float(rest.mean())
    scored_rests = rest is not None and rests <= 1.0 - MOVING_SHARE
    if scored_rests:
        # scored on motion: the friction the arm holds at rest is stiction, which no model
        # predicts
        ok = ok & ~rest
    if ok.sum() >= 2:
        validation['held_out'] = _metrics_dict(joint_metrics(reference[ok], held_pred[ok],
                                                             joints))
    validation['training'] = _metrics_dict(joint_metrics(
        reference, _predict(W_eval, result.beta), joints))
    sol = solutions.get(None) if method == 'consistent' else None
    theta = sol.theta if sol is not None else None
    consistent_flag = bool(sol is not None and np.all(sol.min_eigenvalues >= -1e-8) and
                           np.all(sol.phi[[i for i, f in enumerate(fterms)
                                           if f in FrictionModel.POSITIVE]] >= -1e-9))
    candidates = {}
    for m, c in choice.candidates.items():
        candidates[m] = ({'error': c} if isinstance(c, str) else
                         {'condition_number': float(c.condition_number),
                          'residual_rms': c.residual_rms().tolist(),
                          'seconds': float(c.seconds)})
    # here: serving a full model imports this module, the data gate's rules only fitting
    from arm_dyn_id.validation.plausibility import EFFORT_SCALE_DECISIVE
    scales = relative_effort_scales(list(raw_parts.values()), w, joints,
                                    limit=EFFORT_SCALE_SE_FROM,
                                    decisive=EFFORT_SCALE_DECISIVE)
    union_scales = None
    if W_union is not None and any(d['scale'] > EFFORT_SCALE_SE_FROM and not d['at_end']
                                   for d in scales.values()):
        finite_union = finite & np.all(np.isfinite(W_union), axis=(1, 2))
        union_scales = relative_effort_scales(
            [sample_moments(W_union, target, np.ones(n), finite_union & (groups == g), keep)
             for g in range(int(holdout))], w, joints, limit=EFFORT_SCALE_SE_FROM,
            decisive=EFFORT_SCALE_DECISIVE)
    metadata = {
        'robot_name': robot_name,
        'fit': {'method': method, 'estimator': method,
                'condition_number': float(result.condition_number),
                # the rigid body's alone (friction known): how well the motion pins the
                # coupling between joints that effort_scales reads
                'rigid_condition_number': float(identifiability(total.A[:r, :r],
                                                                names[:r])[0]),
                'n_samples': int(result.n_samples), 'noise_std': noise.tolist(),
                'residual_rms': result.residual_rms().tolist(),
                'seconds': float(time.perf_counter() - started),
                'nominal_weight': nominal_weight, 'solver': solver,
                # each joint's slow samples, left out of its own equations
                'slow_samples': {'speed_rad_s': SLOW_SPEED,
                                 'spread_s': SLOW_SPREAD / max(
                                     float(prepared.info.get('cutoff_hz') or 0), 1e-9),
                                 'left_out': _left_out(keep, robot.joint_names)},
                # the share of the samples where the arm rests (rest_rows), and of those
                # left out of the held-out score (all of them, unless half or more)
                'rests': round(rests, 4),
                'rests_not_scored': round(rests, 4) if scored_rests else 0.0,
                # each joint's effort scale against the others', pinned by the rigid body's
                # coupling (the data gate judges it: one torque constant off)
                'effort_scales': scales,
                # ... and with every friction term friction='auto' tried (the union), where
                # a joint reads high: a reading that the richer friction takes away came
                # from a friction the chosen model describes poorly, not a torque constant
                'effort_scales_union': union_scales,
                'candidates': candidates,
                'consistent_fit': (None if 'consistent' not in choice.candidates or
                                   isinstance(choice.candidates['consistent'], str) else
                                   choice.candidates['consistent'].info)},
        'selection': {**choice.selection.to_dict(),
                      'friction': friction_choice or {'chosen': 'given',
                                                      'model': friction.describe()}},
        'validation': {**validation, 'against': validate_against,
                       'held_out_blocks': int(holdout)},
        'preparation': dict(prepared.info),
        'provenance': dict(provenance or {}),
    }
    model = DynamicsModel(robot.copy(), base, result.beta[:r], friction, result.beta[r:],
                          result.std_errors, standard=theta, consistent=consistent_flag,
                          metadata=metadata, covariance=result.covariance)
    return model, validation


def validate_full(model, t, q, tau, cutoff_hz=None, order=None, against='filtered',
                  holdout_rows=None):
    """Score a model on any trajectory with the keys of the gravity path.

    The record is prepared with the model's own filter (its ``preparation``
    metadata: cut-off and order, unless given), q̇ and q̈ from the filtered q.
    ``against='filtered'``: the filtered torque against the model's torque
    through the same filter (what the fit compares); ``'raw'``: the resampled
    measured torque against the model's torque.

    Parameters
    ----------
    model : DynamicsModel or GravityModel
        A gravity model predicts ``G(q)`` plus its Coulomb and viscous friction
        where known.
    t, q, tau : ndarray, (N,), (N, n), (N, n)
    against : {'filtered', 'raw'}

    Returns
    -------
    dict
        ``{joint: {max_torque, rmse, rmse_percent, mae, rho, n_samples}}``.
    """
    if against not in VALIDATE_AGAINST:
        raise ConfigError(f'against {against!r} must be one of {list(VALIDATE_AGAINST)}')
    t, q, tau = _check_record(model.robot, t, q, tau)
    prep = model.metadata.get('preparation') or {}
    cutoff = cutoff_hz if cutoff_hz is not None else prep.get('cutoff_hz')
    order = order if order is not None else int(prep.get('order', 4))
    if getattr(model, 'dynamics', 'gravity') == 'full':
        # filtered: the model's torque through the same filter (as the fit sees it)
        data, W = _prepare(model.robot, model.base, model.friction_model, t, q, tau,
                           cutoff_hz=cutoff, order=order, decimate=1,
                           filter_torque=against == 'filtered')
        pred = W @ np.concatenate([model.beta + model._payload_beta, model.phi])
    else:
        data = prepare(t, q, tau, cutoff_hz=cutoff, order=order, decimate=1)
        pred = predict_model(model, data.q, data.dq, data.ddq)
    reference = data.tau if against == 'filtered' else data.tau_raw
    return _metrics_dict(joint_metrics(reference, pred, model.joint_names))


def predict_model(model, q, dq, ddq):
    """Torques of a full or gravity model at states (N, n) (N·m)."""
    if getattr(model, 'dynamics', 'gravity') == 'full':
        return model.torques(q, dq, ddq)
    out = model.gravity_torques(q)
    fc = np.nan_to_num(model.friction.get('coulomb', 0.0))
    fv = np.nan_to_num(model.friction.get('viscous', 0.0))
    return out + fc * np.sign(dq) + fv * dq


__all__ += ['fit_full', 'validate_full', 'predict_model', 'FULL_METHODS', 'exchanged_scores']
