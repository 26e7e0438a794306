"""Recorded samples in, validated gravity model out: one path for the CLI and the nodes.

:func:`fit_gravity` takes arrays (t, q, τ, segment markers) — what the
identifier node buffers, or what :func:`arm_dyn_id.data.bag_reader.read_bag`
returns (:func:`fit_gravity_recording`) — and chains:

1. segment markers: the recorded ones, or sweeps detected in q
   (:func:`choose_markers`);
2. hold-out: a seeded fraction of the forward/backward pairs is kept out of the
   fit (:func:`split_pairs`), each joint keeping at least one pair;
3. identification on the other pairs
   (:func:`arm_dyn_id.identification.gravity.identify_gravity`, whose estimator
   choice is itself cross-validated within them);
4. validation on forward/backward averages of the held-out and the training
   pairs (:func:`pair_metrics`), against a noise level estimated from τ
   (:func:`noise_estimate`).

Nothing here reads arguments, prints or writes files: progress goes to an
optional ``phase(text)`` callback.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.data.quality import despike
from arm_dyn_id.data.segmentation import (NOISE_MARGIN, QUASI_STATIC_ACCELERATION,
                                          QUASI_STATIC_SPEED, detect_markers, encoder_noise,
                                          filtered_derivatives)
from arm_dyn_id.errors import DataError
from arm_dyn_id.identification.estimators import HOLDOUT_FOLDS
from arm_dyn_id.identification.gravity import (DEFAULT_METHODS, GravityFit, as_record,
                                               identify_gravity)
from arm_dyn_id.identification.pairing import (average_pairs, on_swept_joint, pair_sweeps,
                                               sweeps_from_markers, thinned)
from arm_dyn_id.identification.tilt import gravity_tilt, read_tilt, sweep_tilt, tilt_message
from arm_dyn_id.validation.metrics import joint_metrics

#: Fraction of forward/backward pairs held out by default (``arm-dyn-id fit --holdout``).
DEFAULT_HOLDOUT = 0.2

#: Where the fitted samples come from: sweep pairs from recorded markers when present,
#: else detected sweeps, else the quasi-static parts ('auto'); or one of them.
SEGMENT_MODES = ('auto', 'markers', 'detect', 'quasi_static')


def clean_markers(markers):
    """Markers usable by pairing.

    Parameters
    ----------
    markers : iterable
        Decoded ``excitation_segments`` messages.

    Returns
    -------
    list of dict
        The dicts with ``t`` and ``phase`` and no ``error``; sweeps must also
        carry ``joint_index`` and ``direction``.
    """
    out = []
    for m in markers or ():
        if not isinstance(m, dict) or 'error' in m or 't' not in m or 'phase' not in m:
            continue
        if m['phase'] == 'sweep' and ('joint_index' not in m or 'direction' not in m):
            continue
        out.append(m)
    return out


def choose_markers(t, q, joints, markers=None, mode='auto', where='the data', phase=None):
    """Segment markers of a record and where they came from.

    Parameters
    ----------
    t : ndarray, (N,)
        Sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    joints : sequence of str, (n,)
    markers : list of dict, optional
        Recorded markers (cleaned here with :func:`clean_markers`).
    mode : {'auto', 'markers', 'detect', 'quasi_static'}
        Recorded markers only, detection in q only, or recorded sweeps when
        there are any, else detection (``'quasi_static'`` uses no markers: an
        empty list is returned).
    where : str
        Names the record in error messages (a bag path).
    phase : callable, optional
        ``phase(text)`` is told before a detection starts.

    Returns
    -------
    markers : list of dict
    source : str
        ``'markers'`` or ``'detected'``.

    Raises
    ------
    DataError
        ``mode='markers'`` and no sweep marker was recorded.
    """
    if mode not in SEGMENT_MODES:
        raise ValueError(f'segments {mode!r}: choose from {SEGMENT_MODES}')
    if mode == 'quasi_static':
        return [], 'quasi_static'
    markers = clean_markers(markers)
    has_sweeps = any(m['phase'] == 'sweep' for m in markers)
    if mode == 'markers' and not has_sweeps:
        phases = sorted({str(m['phase']) for m in markers})
        raise DataError(f'no sweep pairs in {where}: {len(markers)} excitation_segments '
                        f'markers (phases {phases}) and no sweep among them; detecting the '
                        'sweeps in the joint angles (segments: detect) can find them')
    if mode == 'markers' or (mode == 'auto' and has_sweeps):
        return markers, 'markers'
    if phase is not None:
        phase('no segment markers: detecting constant-speed sweeps' if mode == 'auto'
              else 'detecting constant-speed sweeps')
    return detect_markers(t, q, joints), 'detected'


def noise_estimate(tau):
    """Torque noise σ per joint from sample-to-sample differences (robust, MAD).

    Gravity changes little between 1 kHz samples, so the first difference is
    noise (σ√2) plus rare steps at reversals, which the median ignores.

    Parameters
    ----------
    tau : ndarray, (N, n)
        Measured torques (N·m).

    Returns
    -------
    ndarray, (n,)
        σ (N·m); NaN with fewer than three finite samples.
    """
    tau = np.asarray(tau, dtype=float)
    # a median needs no more than ~half a million differences (an hour at 1 kHz has 3.6M)
    first = np.arange(0, max(len(tau) - 1, 0), max(1, (len(tau) - 1) // 500_000))
    d = tau[first + 1] - tau[first]
    d = d[np.all(np.isfinite(d), axis=1)]
    if d.shape[0] < 2:
        return np.full(np.shape(tau)[1], np.nan)
    mad = np.median(np.abs(d - np.median(d, axis=0)), axis=0)
    return 1.4826 * mad / np.sqrt(2.0)


def _noise_weights(tau):
    """σ per joint for the weights when none is configured: :func:`noise_estimate`,
    floored so that a joint with quantised or constant torque keeps a finite weight."""
    sigma = noise_estimate(tau)
    scale = np.nanmax(np.abs(tau), axis=0) if np.size(tau) else np.ones(np.shape(tau)[1])
    floor = np.maximum(1e-4 * np.nan_to_num(scale, nan=1.0), 1e-9)
    return np.where(np.isfinite(sigma), np.maximum(sigma, floor), floor)


def _sweep_markers(t, markers):
    """(marker, start, stop) of each marker that sweeps_from_markers turns into a Sweep."""
    ordered = sorted(markers, key=lambda m: m['t'])
    found = []
    for k, m in enumerate(ordered):
        if m.get('phase') != 'sweep':
            continue
        t_end = ordered[k + 1]['t'] if k + 1 < len(ordered) else np.inf
        start, stop = np.searchsorted(t, [m['t'], t_end])
        if stop - start >= 2:
            found.append((m, int(start), int(stop)))
    return found


def split_pairs(t, markers, fraction, seed, q=None):
    """Choose forward/backward pairs to hold out for validation.

    At least one pair is held out when ``fraction`` > 0 and there is more than one
    pair; every joint keeps at least one training pair.

    Parameters
    ----------
    t : ndarray, (N,)
        Sample times (s).
    markers : list of dict
        Segment markers.
    fraction : float
        Fraction of the pairs to hold out, in [0, 1).
    seed : int
        Seed of the random choice.
    q : ndarray, (N, n), optional
        rad: the passes of a pair must hold the other joints at one pose
        (:func:`~arm_dyn_id.identification.pairing.pair_sweeps`).

    Returns
    -------
    fit_markers : list of dict
        ``markers`` with the held-out sweeps relabelled ``sweep_held_out`` (no
        longer sweeps for the fit; their samples are not used by it).
    held : list of (Sweep, Sweep)
    train : list of (Sweep, Sweep)

    Raises
    ------
    DataError
        If the markers give no forward/backward pair.
    """
    sweeps = sweeps_from_markers(t, markers)
    pairs = pair_sweeps(sweeps, q)
    if not pairs:
        raise DataError('no forward/backward sweep pair in the data: each joint must sweep '
                        'forward and back over the same range (seed 000 excitation)')
    n_hold = 0 if fraction <= 0 or len(pairs) < 2 else \
        min(len(pairs) - 1, max(1, int(round(fraction * len(pairs)))))
    rng = np.random.default_rng(seed)
    left = {}
    for fwd, _ in pairs:
        left[fwd.joint_index] = left.get(fwd.joint_index, 0) + 1
    held_ids = set()
    for i in rng.permutation(len(pairs)):
        if len(held_ids) >= n_hold:
            break
        j = pairs[i][0].joint_index
        if left[j] > 1:
            left[j] -= 1
            held_ids.add(int(i))
    held = [p for i, p in enumerate(pairs) if i in held_ids]
    train = [p for i, p in enumerate(pairs) if i not in held_ids]
    starts = {s.start for pair in held for s in pair}
    relabel = {id(m) for m, start, _ in _sweep_markers(t, markers) if start in starts}
    fit_markers = [dict(m, phase='sweep_held_out') if id(m) in relabel else m
                   for m in markers]
    return fit_markers, held, train


#: Averaged samples at most scored per case (every k-th beyond it).
MAX_SCORED_SAMPLES = 250_000


def pair_metrics(model, t, q, tau, pairs, joints, noise=None, gravity=None, paired=None):
    """Metrics of a model on forward/backward-averaged pairs (friction cancelled).

    Beyond :data:`MAX_SCORED_SAMPLES` averaged samples every k-th is scored.

    Parameters
    ----------
    model : GravityModel
    t : ndarray, (N,)
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n)
        Measured torques (N·m).
    pairs : list of (Sweep, Sweep)
    joints : sequence of str, (n,)
    noise : ndarray, (n,), optional
        Torque noise σ (N·m) reported beside the metrics.
    gravity : float, optional
        Gravity (m/s²) the data was taken at; default the model's.
    paired : PairedData, optional
        ``pairs`` already averaged (the fit's own training pairs), not averaged again.

    Returns
    -------
    metrics : list of JointMetrics
    paired : PairedData
    predicted : ndarray, (M, n)
        The model's torques at the averaged samples (N·m).
    """
    if paired is None:
        sweeps = [s for pair in pairs for s in pair]
        sweeps.sort(key=lambda s: s.start)
        paired = average_pairs(t, q, tau, sweeps)
    # evenly spaced averaged samples: the same RMSE, MAE and rho to well below the noise,
    # at a fraction of the cost of G(q) for an hour at 1 kHz
    paired = thinned(paired, MAX_SCORED_SAMPLES)
    predicted = model.gravity_torques(paired.q, gravity=gravity)
    if 'pair_offset' in model.friction:
        # the constant a swept joint keeps in its pair averages, fitted beside gravity
        predicted = predicted + on_swept_joint(paired, model.friction['pair_offset'])
    return joint_metrics(paired.tau, predicted, joints, noise), paired, predicted


def metrics_dict(metrics, noise=None):
    """Per-joint metrics as plain dicts, ``{joint: {max_torque, rmse, ...}}``.

    Parameters
    ----------
    metrics : list of JointMetrics
    noise : ndarray, (n,), optional
        Added as ``noise_std`` (N·m, None when unknown).

    Returns
    -------
    dict
    """
    out = {}
    for j, m in enumerate(metrics):
        d = m.to_dict()
        d.pop('joint')
        d.pop('noise_amplitude', None)
        if noise is not None:
            d['noise_std'] = None if not np.isfinite(noise[j]) else float(noise[j])
        out[m.joint] = d
    return out


@dataclass(frozen=True)
class GravityPipelineFit:
    """Outcome of :func:`fit_gravity`: the model and how well it predicts.

    Attributes
    ----------
    model : GravityModel
        Fitted on the training pairs; ``metadata`` holds ``fit``, ``selection``,
        ``validation`` and ``provenance`` (and ``robot_name`` when known).
    fit : GravityFit
        The identification: chosen result, every candidate, the selection.
    validation : dict
        ``{'held_out': {joint: metrics}, 'training': {joint: metrics}}``;
        ``held_out`` only when pairs were held out (the ``training`` metrics are
        in-sample).
    cases : dict
        case -> (PairedData, predicted (M, n) N·m), the samples behind each
        case of ``validation``.
    held_out, training : list of (Sweep, Sweep)
        The forward/backward pairs held out and fitted.
    markers : list of dict
        The segment markers used (before the held-out sweeps were relabelled).
    marker_source : str
        ``'markers'`` (recorded) or ``'detected'``.
    noise_std : ndarray, (n,)
        Torque noise σ per joint estimated from the raw τ (N·m).
    holdout : float
    seed : int
    seconds : float
        Wall time of the identification.
    """

    model: object
    fit: GravityFit
    validation: dict
    cases: dict
    held_out: list
    training: list
    markers: list
    marker_source: str
    noise_std: np.ndarray
    holdout: float
    seed: int
    seconds: float
    info: dict = field(default_factory=dict)

    @property
    def result(self):
        """The chosen estimator's IdentificationResult."""
        return self.fit.result

    @property
    def selection(self):
        """How the estimator was chosen (:class:`~.estimators.Selection`)."""
        return self.fit.selection

    def summary(self):
        """What the fit used and found, as plain types (the CLI's ``fit_summary``)."""
        doc = (self._quasi_static_summary() if self.marker_source == 'quasi_static'
               else self._sweep_summary())
        doc['gross_errors'] = {'replaced': dict(self.info.get('gross_errors', {})),
                               'note': 'isolated single-sample spikes in the torques, '
                               'replaced by the median of their neighbours before the fit'}
        return doc

    def _sweep_summary(self):
        return {
            'segments': {'source': self.marker_source,
                         'sweeps': sum(1 for m in self.markers if m['phase'] == 'sweep'),
                         'pairs': len(self.held_out) + len(self.training)},
            'holdout': {'fraction': self.holdout, 'seed': self.seed,
                        'held_out_pairs': len(self.held_out),
                        'training_pairs': len(self.training),
                        'note': 'the model is fitted on the training pairs only; held_out '
                        'metrics are on pairs it never saw' if self.held_out else
                        'no pair held out: training metrics are in-sample'},
            **self._model_summary(),
        }

    def _quasi_static_summary(self):
        info = self.info
        counts = info['samples']
        return {
            'segments': {'source': 'quasi_static', 'sweeps': 0, 'pairs': 0,
                         'holds': counts['holds'], 'slow_bins': counts['slow_bins'],
                         'quasi_static_samples': counts['quasi_static'],
                         'raw_samples': counts['raw']},
            'holdout': {'fraction': self.holdout, 'seed': self.seed,
                        'held_out_samples': counts['held_out'],
                        'training_samples': counts['fitted'],
                        'held_out_groups': counts['held_out_groups'],
                        'training_groups': counts['training_groups'],
                        'note': 'whole holds and slow-motion segments are held out; held_out '
                        'metrics are on samples the model never saw' if counts['held_out']
                        else 'nothing held out: training metrics are in-sample'},
            'quasi_static': {k: v for k, v in info.items() if k != 'source'},
            'full_dynamics': info['full_dynamics'],
            **self._model_summary(),
        }

    def _model_summary(self):
        """What every summary ends with: the fit, the choice, the parameters."""
        model = self.model
        return {
            'fit': model.metadata.get('fit'),
            'selection': model.metadata.get('selection'),
            'base_parameters': {'names': list(model.base.names),
                                'expressions': list(model.base.expressions()),
                                'values': model.beta.tolist(),
                                'std_errors': model.std_errors.tolist()},
            'friction': {k: v.tolist() for k, v in model.friction.items()},
            'noise_std': self.noise_std.tolist(),
        }


def fit_gravity(robot, t, q, tau, markers=None, *, noise=None, methods=DEFAULT_METHODS,
                holdout=DEFAULT_HOLDOUT, seed=0, segments='auto', joints=None,
                robot_name=None, provenance=None, folds=HOLDOUT_FOLDS, phase=None,
                where='the data', dq=None, quasi_static=None, rest_friction=None,
                pair_offsets='auto'):
    """Fit and validate the gravity model of reciprocating data (seed 000) or of any
    recording's quasi-static parts.

    Parameters
    ----------
    robot : RobotModel
        Kinematics, with gravity set to the value the data was taken at.
    t : ndarray, (N,)
        Sample times (s); samples out of order are sorted.
    q : ndarray, (N, n)
        Joint angles (rad), in the order of ``robot.joint_names``.
    tau : ndarray, (N, n)
        Measured joint torques (N·m).
    markers : list of dict, optional
        ``excitation_segments`` markers (``t``, ``phase``, ``joint_index``,
        ``direction``); needed unless ``segments`` allows detection.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the estimator weights (the arm
        config's ``torque_noise``).
    methods : sequence of str
        Candidate estimators; the one best on held-out pairs is kept.
    holdout : float
        Fraction of forward/backward pairs kept out of the fit for validation,
        in [0, 1); 0 fits every pair (the identifier node).
    seed : int
        Seed of the hold-out and of the selector's folds.
    segments : {'auto', 'markers', 'detect', 'quasi_static'}
        See :func:`choose_markers`. ``'quasi_static'`` fits the holds and slow
        motion of the recording (:mod:`arm_dyn_id.identification.quasi_static`);
        ``'auto'`` falls back to it when there are no recorded sweep markers and
        no sweep pair is detected.
    joints : sequence of str, optional
        Joint names for the metrics; default ``robot.joint_names``.
    robot_name : str, optional
        Stored in the model file.
    provenance : dict, optional
        ``{data, config, ...}`` for the model file.
    folds : int
        At most this many folds for the estimator choice.
    phase : callable, optional
        ``phase(text)`` hears the steps as they start (progress output).
    where : str
        Names the record in error messages (``bag PATH``).
    dq : ndarray, (N, n), optional
        Measured joint velocities (rad/s) for the quasi-static selection;
        estimated from q when absent.
    quasi_static : dict, optional
        Thresholds of the quasi-static selection: ``max_speed`` (rad/s),
        ``max_acceleration`` (rad/s²), ``min_duration`` (s), ``min_samples``.
    rest_friction : float or array_like (n,), optional
        Bound on friction at rest in the quasi-static fit (N·m); default from
        the data (see :func:`_fit_quasi_static`).
    pair_offsets : {'auto', 'yes', 'no'}
        Sweep pairs: each swept joint's constant in its forward/backward averages
        (:func:`~arm_dyn_id.identification.gravity.pair_offsets`): fitted beside the
        gravity (``'yes'``), or not and read for the gate (``'auto'``), or neither.

    Returns
    -------
    GravityPipelineFit

    Raises
    ------
    DataError
        Shapes that do not match, no markers, no forward/backward pair.
    RankDeficientError
        The training pairs cannot identify some base parameter (named).
    ValueError
        ``holdout`` outside [0, 1), an unknown estimator or segments mode.
    """
    if not 0 <= holdout < 1:
        raise ValueError(f'holdout {holdout} must be in [0, 1)')
    t, q, tau = as_record(t, q, tau)
    if len(t) and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind='stable')
        t, q, tau = t[order], q[order], tau[order]
    joints = list(robot.joint_names if joints is None else joints)
    say = phase or (lambda text: None)
    # isolated current spikes (gross errors) would each shift a whole averaged pair
    # or hold: replaced by their neighbours' median, counted and reported
    tau, flagged = despike(tau)
    gross = {j: int(c) for j, c in zip(joints, flagged.sum(axis=0)) if c}
    if gross:
        say(f'{sum(gross.values())} isolated gross errors in the torques replaced by the '
            f'median of their neighbours: {gross}')
    if noise is None:
        # per-joint weights 1/σ² from the data: with equal weights the heavy proximal
        # joints swamp the light wrist joints, in the fit and in the estimator choice
        noise = _noise_weights(tau)
    qs_options = dict(noise=noise, holdout=holdout, seed=seed, joints=joints,
                      robot_name=robot_name, provenance=provenance, where=where, say=say,
                      dq=dq, thresholds=quasi_static, rest_friction=rest_friction)
    if segments == 'quasi_static':
        return _with_gross_errors(_fit_quasi_static(robot, t, q, tau, **qs_options), gross)
    recorded = any(m['phase'] == 'sweep' for m in clean_markers(markers))
    try:
        markers, source = choose_markers(t, q, joints, markers, segments, where, phase)
        fit_markers, held, train = split_pairs(t, markers, holdout, seed, q)
    except DataError as exc:
        if segments != 'auto' or recorded:
            raise
        say(f'no forward/backward sweep pairs ({exc}): fitting the quasi-static samples')
        return _with_gross_errors(_fit_quasi_static(robot, t, q, tau, **qs_options), gross)
    say(f'segments from {source}: {len(held) + len(train)} forward/backward pairs, '
        f'{len(held)} held out for validation')
    say(f'fitting ({", ".join(methods)}) on {len(train)} pairs')
    started = time.perf_counter()
    fit = identify_gravity(robot, t, q, tau, fit_markers, noise=noise, methods=tuple(methods),
                           average=True, provenance=provenance, folds=folds, seed=seed,
                           pair_offsets_mode=pair_offsets)
    seconds = time.perf_counter() - started
    model = fit.model
    noise_std = noise_estimate(tau)
    validation, cases = {}, {}
    for case, pairs in (('held_out', held), ('training', train)):
        if not pairs:
            continue
        # the training pairs are the ones the fit averaged: reuse them
        metrics, paired, predicted = pair_metrics(
            model, t, q, tau, pairs, joints, noise_std,
            paired=fit.paired if case == 'training' else None)
        validation[case] = metrics_dict(metrics, noise_std)
        cases[case] = (paired, predicted)
    model.metadata['validation'] = dict(validation)
    if robot_name is not None:
        model.metadata['robot_name'] = robot_name
    return _with_gross_errors(GravityPipelineFit(
        model=model, fit=fit, validation=validation, cases=cases, held_out=held,
        training=train, markers=markers, marker_source=source, noise_std=noise_std,
        holdout=holdout, seed=seed, seconds=seconds,
        info={'weights_noise': np.asarray(noise, dtype=float)}), gross)


def _with_gross_errors(outcome, gross):
    """Record the gross errors replaced before the fit (joint -> count)."""
    outcome.info['gross_errors'] = dict(gross)
    outcome.model.metadata['gross_errors'] = dict(gross)
    return outcome


def _fit_quasi_static(robot, t, q, tau, *, noise, holdout, seed, joints, robot_name,
                      provenance, where, say, dq=None, thresholds=None, rest_friction=None):
    """:func:`fit_gravity` on the quasi-static samples of a recording.

    Holds and slow moving segments are the units of hold-out; the held-out ones
    are scored with the same metrics as sweep pairs (friction fitted on slow
    motion removed from the reference, friction at rest left in it).
    """
    from arm_dyn_id.identification import quasi_static as qs
    from arm_dyn_id.identification.estimators import IdentificationResult, Selection
    from arm_dyn_id.identification.pairing import PairedData
    from arm_dyn_id.model.base_parameters import gravity_base_parameters
    from arm_dyn_id.model.gravity import GravityModel

    opts = dict(thresholds or {})
    min_samples = int(opts.pop('min_samples', qs.MIN_QUASI_STATIC_SAMPLES))
    started = time.perf_counter()
    samples = qs.quasi_static_samples(t, q, tau, dq=dq, **opts)
    motion = samples.motion
    th = samples.thresholds
    rich_note = None
    if motion['rich']:
        rich_note = (f'the full-dynamics fit applies (arm_dyn_id.identification.full_dynamics.'
                     f'identify_full): {100 * motion["fast_fraction"]:.0f} % of the samples '
                     f'move faster than {th["max_speed"]:g} rad/s, with '
                     f'{motion["joints_moving"]:.1f} joints moving at once on average; '
                     f'the quasi-static fit uses only '
                     f'{100 * samples.n_quasi_static / max(samples.n_raw, 1):.1f} % of them')
        say(rich_note)
    base = gravity_base_parameters(robot)
    need = max(min_samples, int(np.ceil(base.count / max(robot.n_joints, 1))) + 1)
    if samples.n_samples < need:
        what = (f'only {samples.n_samples} quasi-static samples ({len(samples.holds)} holds, '
                f'{int((~samples.is_hold).sum())} bins of slow motion; |q̇| <= '
                f'{th["max_speed"]:g} rad/s, |q̈| <= {th["max_acceleration"]:g} rad/s² for '
                f'{th["min_duration"]:g} s) in {where}, at least {need} needed')
        if motion['rich']:
            raise DataError(f'{what}: the recording is rich motion, fit the full dynamics '
                            '(--dynamics full; identify_full in Python) instead')
        raise DataError(f'{what}: record static poses held for a second or two, or slow '
                        'moves, or the reciprocating excitation')
    noise_raw = noise_estimate(tau)
    sigma = np.asarray(noise, dtype=float) if noise is not None else noise_raw
    say(f'quasi-static samples: {len(samples.holds)} holds and '
        f'{int((~samples.is_hold).sum())} bins of slow motion from '
        f'{samples.n_quasi_static} of {samples.n_raw} samples')
    held = qs.choose_held_out(robot, base, samples, holdout, seed, sigma)
    train = ~held
    say(f'fitting gravity (weighted least squares) on {int(train.sum())} samples, '
        f'{int(held.sum())} held out for validation')
    context = f' from the quasi-static samples of {where}'
    fit = qs.fit_quasi_static(robot, base, samples, train, sigma, rest_friction, context)
    seconds = time.perf_counter() - started
    train_samples = qs._subset(samples, train)
    residual_rms = np.sqrt(np.mean(fit.residuals ** 2, axis=0))
    result = IdentificationResult(
        method='wls_quasi_static', names=tuple(base.names), beta=fit.beta,
        std_errors=np.sqrt(np.clip(np.diag(fit.cov), 0, None)), covariance=fit.cov,
        residuals=fit.residuals, condition_number=fit.condition, rank=base.count,
        n_samples=int(train.sum()), inliers=np.ones(int(train.sum()), dtype=bool),
        noise_std=residual_rms, seconds=seconds)
    selection = Selection(by='single_candidate', method=result.method,
                          reason='quasi-static data: one weighted least-squares fit with '
                          'per-sample weights 1/(σ²/k + s²), no estimator choice')
    names = list(robot.joint_names)
    friction_note = {
        'rest_friction_bound': fit.rest_friction.tolist(),
        'bound_source': {names[j]: fit.bound_source[j] for j in range(len(names))},
        'note': 'friction at rest is not cancelled on static holds (no forward/backward '
                'average): each hold\'s torque may differ from gravity by up to the bound, '
                'assumed uniform in ±bound and weighted accordingly; the bound is the '
                'Coulomb level fitted on slow motion (coulomb), given (given), or '
                f'{100 * qs.REST_FRICTION_FRACTION:g} % of the joint\'s largest torque '
                '(fraction)',
    }
    info = {
        'source': 'quasi_static', 'thresholds': th,
        'samples': {'raw': samples.n_raw, 'quasi_static': samples.n_quasi_static,
                    'holds': len(samples.holds),
                    'slow_bins': int((~samples.is_hold).sum()),
                    'fitted': int(train.sum()), 'held_out': int(held.sum()),
                    'held_out_groups': int(len(np.unique(samples.group[held]))),
                    'training_groups': int(len(np.unique(samples.group[train])))},
        'joint_range_rad': {k: v['range'] for k, v in
                            qs.joint_coverage(robot, train_samples).items()},
        'excitation': fit.excitation,
        'excitation_note': 'per base parameter, 1/sqrt of the diagonal of the inverse of '
                           'the scaled normal matrix: 1 when its regressor column is '
                           'independent of the others, near 0 when the others explain it',
        'friction_at_rest': friction_note,
        'friction_joints': [names[j] for j in fit.fjoints],
        'motion': motion,
        'full_dynamics': rich_note or 'not indicated: the recording is mostly slow or one '
                                      'joint at a time',
    }
    metadata = {
        'fit': {'method': result.method, 'averaged_forward_backward': False,
                'quasi_static': True, 'condition_number': float(fit.condition),
                'n_samples': int(train.sum()), 'residual_rms': residual_rms.tolist(),
                'noise_std': residual_rms.tolist(), 'seconds': float(seconds),
                'rest_friction_bound': fit.rest_friction.tolist(), 'candidates': {}},
        'selection': selection.to_dict(),
        'provenance': dict(provenance or {}),
    }
    friction = {k: v.copy() for k, v in fit.friction.items()}
    model = GravityModel(robot.copy(), base, fit.beta, result.std_errors, friction, metadata)
    validation, cases = {}, {}
    comp = samples.tau - qs.friction_torque(samples, fit)
    for case, rows in (('held_out', held), ('training', train)):
        if rows.sum() < 2:
            continue
        pred = model.gravity_torques(samples.q[rows])
        metrics = joint_metrics(comp[rows], pred, joints, noise_raw)
        validation[case] = metrics_dict(metrics, noise_raw)
        moving = np.argmax(np.abs(samples.dq[rows]), axis=1)
        moving[samples.is_hold[rows]] = -1
        paired = PairedData(q=samples.q[rows], tau=comp[rows],
                            friction=samples.tau[rows] - comp[rows], dq=samples.dq[rows],
                            moving_joint=moving, pair_id=samples.group[rows])
        cases[case] = (paired, pred)
    model.metadata['validation'] = dict(validation)
    if robot_name is not None:
        model.metadata['robot_name'] = robot_name
    gfit = GravityFit(model=model, result=result, candidates={result.method: result},
                      paired=None, info={'n_raw_samples': int(len(t))}, selection=selection)
    return GravityPipelineFit(model=model, fit=gfit, validation=validation, cases=cases,
                              held_out=[], training=[], markers=[],
                              marker_source='quasi_static', noise_std=noise_raw,
                              holdout=holdout, seed=seed, seconds=seconds, info=info)


#: ``arm-dyn-id fit --dynamics``: chosen from the data, or asked for.
DYNAMICS_MODES = ('auto', 'gravity', 'full')

#: Rows at most looked at when judging how a recording moves (every k-th beyond).
_MOTION_ROWS = 200_000


@dataclass(frozen=True)
class DynamicsChoice:
    """Which model a recording supports, and why (:func:`choose_dynamics`).

    Attributes
    ----------
    kind : {'gravity', 'full'}
    reason : str
        One line for people: what in the data decided.
    source : str
        ``'plan'`` (a stored plan kind), ``'markers'`` (recorded segment
        markers), ``'motion'`` (the joint angles) or ``'asked'``.
    motion : dict
        :func:`~arm_dyn_id.identification.quasi_static.motion_profile` of the
        recording plus ``acceleration_fraction`` (samples with some
        |q̈| above the quasi-static bound); empty when not computed.
    """

    kind: str
    reason: str
    source: str
    motion: dict = field(default_factory=dict)

    def to_dict(self):
        return {'kind': self.kind, 'reason': self.reason, 'source': self.source,
                'motion': dict(self.motion)}


def _stored_plan_kind(stored, markers):
    """The excitation plan kind a bag states (stored config or markers), or None."""
    for doc in [stored or {}] + [m for m in markers or () if isinstance(m, dict)]:
        if not isinstance(doc, dict):
            continue
        for key in ('plan_kind', 'kind'):
            value = doc.get(key)
            if isinstance(value, str) and value in ('fourier', 'reciprocating'):
                return value
        nested = doc.get('excitation') or doc.get('plan')
        if isinstance(nested, dict):
            value = nested.get('plan_kind') or nested.get('kind')
            if isinstance(value, str) and value in ('fourier', 'reciprocating'):
                return value
    return None


def plan_harmonic_hz(markers, plan=None):
    """The highest harmonic of a known Fourier excitation (Hz), or None.

    ``plan`` (a :class:`~arm_dyn_id.excitation.plans.Plan`, e.g. ``fit --plan``) decides;
    else the ``harmonic_hz`` of the excitation node's ``start`` marker (a recorder bag's).
    The preparation then cuts off at a multiple of it instead of reading the band from
    the recording (:func:`arm_dyn_id.data.preparation.choose_band`).
    """
    if plan is not None:
        return plan.top_harmonic_hz
    for marker in markers or ():
        value = marker.get('harmonic_hz') if isinstance(marker, dict) else None
        if isinstance(value, (int, float)) and np.isfinite(value) and value > 0:
            return float(value)
    return None


#: s: the longest filter span :func:`motion_window` gives a noisy encoder.
LONGEST_MOTION_WINDOW = 1.0


def motion_window(t, sigma, window=0.25):
    """s: the filter span of :func:`motion_statistics`: ``window``, or longer when the q̈
    noise that white encoder noise ``sigma`` (rad, the noisiest joint's) leaves through
    it at the sample times ``t`` (measured on a seeded unit white noise) exceeds
    1 / :data:`~arm_dyn_id.data.segmentation.NOISE_MARGIN` of
    :data:`QUASI_STATIC_ACCELERATION`: a quadratic fit's q̈ noise falls as span^-2.5, so
    the span grows until it does not (at most :data:`LONGEST_MOTION_WINDOW`). A UR5 swept
    at 15 °/s with 2e-3 rad of encoder noise at 100 Hz read 71 % of its samples
    accelerating over 0.25 s (0.2 rad/s² of noise against the 0.2 bound), against 21 %
    without noise: it was fitted as full dynamics and refused for its cut-off, where its
    sweeps give the gravity model. The bound itself stays: a review found that raising it
    with the noise turned a gentle Fourier motion (q̈ up to 0.3-0.5 rad/s²) with the same
    noise into a gravity fit."""
    if not sigma > 0 or len(t) < 8:
        return window
    unit = np.random.default_rng(0).standard_normal((len(t), 1))
    noise = NOISE_MARGIN * sigma * float(np.std(filtered_derivatives(t, unit, window)[2]))
    if noise <= QUASI_STATIC_ACCELERATION:
        return window
    return float(min(LONGEST_MOTION_WINDOW,
                     window * (noise / QUASI_STATIC_ACCELERATION) ** 0.4))


def motion_statistics(t, q, dq=None):
    """How a recording moves: :func:`quasi_static.motion_profile` and accelerations.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        rad.
    dq : ndarray, (N, n), optional
        Measured velocities (rad/s); estimated from q when absent.

    Returns
    -------
    dict
        ``fast_fraction``, ``joints_moving``, ``peak_speed``, ``rich`` (see
        :func:`~arm_dyn_id.identification.quasi_static.motion_profile`),
        ``acceleration_fraction`` and ``peak_acceleration`` (rad/s², per joint).
    """
    from arm_dyn_id.identification.quasi_static import motion_profile
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if len(t) < 8:
        return {'fast_fraction': 0.0, 'joints_moving': 0.0, 'peak_speed': [],
                'rich': False, 'acceleration_fraction': 0.0, 'peak_acceleration': []}
    # every step-th sample, at most ~_MOTION_ROWS of them, yet 10 per filter span: the
    # 0.25 s Savitzky-Golay span passes only a few Hz, so the fractions and peaks come
    # out the same, where filtering an hour at 1 kHz whole took 15 s
    window = 0.25
    mean_step = (t[-1] - t[0]) / (len(t) - 1)
    step = max(1, min(len(t) // _MOTION_ROWS,
                      int(window / (10 * mean_step)) if mean_step > 0 else 1))
    # the encoder's noise from every sample (its second differences: a sweep's are 0)
    sigma = float(np.max(encoder_noise(q), initial=0.0)) if dq is None else 0.0
    if step > 1:
        t, q = t[::step], q[::step]
        dq = None if dq is None else np.asarray(dq, dtype=float)[::step]
    window = motion_window(t, sigma, window)
    _, v, a = filtered_derivatives(t, q, window, dq)
    doc = motion_profile(v, QUASI_STATIC_SPEED)
    accelerating = np.any(np.abs(a) > QUASI_STATIC_ACCELERATION, axis=1)
    doc['acceleration_fraction'] = float(accelerating.mean())
    doc['peak_acceleration'] = np.abs(a).max(axis=0).tolist()
    return doc


#: Fraction of samples with some |q̈| above the quasi-static bound beyond which rich
#: motion is full dynamics even when constant-speed sweeps are detected in it.
RICH_ACCELERATION = 0.5
#: ``--dynamics auto`` falls through from a gravity fit that cannot use a recording to
#: the full fit only when at least this fraction of the samples accelerate (static
#: poses have nothing for the full fit: the gravity error is the one to show).
FALLBACK_ACCELERATING = 0.1
#: Rich motion is full dynamics only when more than this fraction of its samples
#: accelerate (slow moves between holds are fast by speed, yet quasi-static).
MIN_ACCELERATING = 0.25


def choose_dynamics(t, q, markers=None, stored=None, dq=None, mode='auto', joints=None):
    """Gravity or full dynamics for a recording (``arm-dyn-id fit --dynamics``).

    In order: a plan kind the bag states (stored configuration or markers:
    ``fourier`` -> full, ``reciprocating`` -> gravity); recorded segment markers
    (sweeps of one joint at a time -> gravity, multi-joint sweeps with
    ``joint_index`` -1, what a Fourier plan announces -> full); else the motion
    itself: constant-speed forward/backward sweep pairs detected in q (given
    ``joints``) -> gravity, unless the motion is rich and accelerates on more
    than :data:`RICH_ACCELERATION` of the samples; *rich* motion (more than half
    of the samples faster than the quasi-static speed with at least two joints
    at once on average) that accelerates on more than :data:`MIN_ACCELERATING`
    of the samples -> full; slow moves, slow or one-joint-at-a-time motion ->
    gravity.

    Parameters
    ----------
    t : ndarray, (N,)
    q : ndarray, (N, n)
        rad.
    markers : list of dict, optional
        Recorded ``excitation_segments`` markers.
    stored : dict, optional
        The configuration a recorder stored in the bag.
    dq : ndarray, (N, n), optional
        Measured velocities (rad/s).
    mode : {'auto', 'gravity', 'full'}
        Anything but ``'auto'`` is returned as asked (without motion statistics).
    joints : sequence of str, optional
        Joint names; with them, sweeps are detected in q as the gravity path would.

    Returns
    -------
    DynamicsChoice
    """
    if mode not in DYNAMICS_MODES:
        raise ValueError(f'dynamics {mode!r}: choose from {DYNAMICS_MODES}')
    # the motion statistics only when the motion decides: an asked kind, a stated plan or
    # recorded markers need none (DynamicsChoice.motion stays empty)
    if mode != 'auto':
        return DynamicsChoice(mode, f'--dynamics {mode} asked', 'asked')
    kind = _stored_plan_kind(stored, markers)
    if kind is not None:
        chosen = 'full' if kind == 'fourier' else 'gravity'
        return DynamicsChoice(chosen, f'the bag was recorded with a {kind} excitation plan',
                              'plan')
    sweeps = [m for m in clean_markers(markers) if m['phase'] == 'sweep']
    if sweeps:
        single = [m for m in sweeps if int(m.get('joint_index', -1)) >= 0]
        if single:
            return DynamicsChoice('gravity', f'{len(single)} recorded sweep markers of one '
                                  'joint at a time (reciprocating excitation)', 'markers')
        return DynamicsChoice('full', f'{len(sweeps)} recorded segment markers of motion of '
                              'all joints at once (Fourier excitation)', 'markers')
    motion = motion_statistics(t, q, dq)
    what = (f'{100 * motion["fast_fraction"]:.0f} % of the samples move faster than '
            f'{QUASI_STATIC_SPEED:g} rad/s, {motion["joints_moving"]:.1f} joints at once on '
            f'average, {100 * motion["acceleration_fraction"]:.0f} % accelerate')
    accelerating = motion['rich'] and motion['acceleration_fraction'] > RICH_ACCELERATION
    if joints is not None and not accelerating:
        # constant-speed sweeps between fast moves also count as "rich" by speed alone:
        # the sweeps decide (what the gravity path would detect)
        try:
            pairs = pair_sweeps(sweeps_from_markers(t, detect_markers(t, q, joints)), q)
        except DataError:
            pairs = []
        if pairs:
            return DynamicsChoice('gravity', f'{len(pairs)} constant-speed forward/backward '
                                  f'sweep pairs of one joint at a time detected ({what})',
                                  'motion', motion)
    if motion['rich'] and motion['acceleration_fraction'] > MIN_ACCELERATING:
        return DynamicsChoice('full', f'rich motion: {what}', 'motion', motion)
    if motion['rich']:
        return DynamicsChoice('gravity', f'slow moves of several joints, hardly accelerating: '
                              f'{what}', 'motion', motion)
    return DynamicsChoice('gravity', f'slow or one-joint motion: {what}', 'motion', motion)


def holdout_blocks(fraction):
    """Time blocks of the full-dynamics validation for a hold-out ``fraction``.

    Each of ``round(1 / fraction)`` contiguous blocks is held out in turn (at
    least 2); a fraction of 0 keeps the default :data:`HOLDOUT_FOLDS` (the full
    fit always chooses its estimator on held-out blocks).
    """
    if not 0 <= fraction < 1:
        raise ValueError(f'holdout {fraction} must be in [0, 1)')
    return HOLDOUT_FOLDS if fraction <= 0 else max(2, int(round(1.0 / fraction)))


@dataclass(frozen=True)
class FullPipelineFit:
    """Outcome of :func:`fit_full_samples`: a validated full-dynamics model.

    Attributes
    ----------
    model : DynamicsModel
    validation : dict
        ``{'held_out': {joint: metrics}, 'training': {joint: metrics}}``; held-out
        metrics are out-of-fold predictions on contiguous time blocks.
    prepared : Prepared
        The recording as the model's filter prepares it (every sample kept).
    predicted : ndarray, (M, n)
        The model's torques at ``prepared`` (rigid body + friction, N·m).
    rigid : ndarray, (M, n)
        Their rigid-body part (N·m).
    nominal : ndarray, (M, n)
        The URDF's nominal rigid-body torques at ``prepared`` (N·m).
    noise_std : ndarray, (n,)
        Torque noise σ estimated from the raw τ (N·m).
    blocks : int
        Time blocks held out in turn.
    seed : int
    seconds : float
    info : dict
        ``gross_errors``.
    record : tuple of ndarray, optional
        ``(t, q, τ)`` as fitted (sorted, gross errors replaced): what the gate refits.
    """

    model: object
    validation: dict
    prepared: object
    predicted: np.ndarray
    rigid: np.ndarray
    nominal: np.ndarray
    noise_std: np.ndarray
    blocks: int
    seed: int
    seconds: float
    info: dict = field(default_factory=dict)
    record: tuple = None

    def summary(self):
        """What the fit used and found, as plain types (the CLI's ``fit_summary``)."""
        model = self.model
        meta = model.metadata
        return {
            'dynamics': 'full',
            'segments': {'source': 'time_blocks', 'blocks': self.blocks},
            'holdout': {'blocks': self.blocks, 'seed': self.seed,
                        'note': f'the record is cut into {self.blocks} contiguous time blocks; '
                        'held_out metrics predict each block with the fit that did not see '
                        'it'},
            'preparation': meta.get('preparation'),
            'fit': meta.get('fit'),
            'selection': meta.get('selection'),
            'consistent': bool(model.consistent),
            'base_parameters': {'names': list(model.base.names),
                                'expressions': list(model.base.expressions()),
                                'values': np.asarray(model.beta).tolist()},
            'friction': {k: np.asarray(v).tolist() for k, v in model.friction_table().items()},
            'parameter_names': list(model.parameter_names),
            'std_errors': np.asarray(model.std_errors).tolist(),
            'noise_std': self.noise_std.tolist(),
            'gross_errors': {'replaced': dict(self.info.get('gross_errors', {})),
                             'note': 'isolated single-sample spikes in the torques, replaced '
                             'by the median of their neighbours before the fit'},
        }


#: A joint whose recorded angle spans less than this (rad) is held still or locked: its
#: friction columns are zero and a full fit cannot be solved.
LOCKED_SPAN = np.radians(0.5)


def _every_joint_moves(q, joints):
    """DataError naming the joints a full-dynamics recording holds still (their angle spans
    less than :data:`LOCKED_SPAN`): their friction is seen only in their own motion, so
    the fit has no solution (a Kinova with its third joint locked failed with "the data
    cannot identify fc3, fv3 ... or fix them from the URDF")."""
    from arm_dyn_id.validation.check import joint_spans
    span = joint_spans(np.where(np.isfinite(q), q, np.nan))
    still = [(j, s) for j, s in zip(joints, span) if np.isfinite(s) and s < LOCKED_SPAN]
    if still:
        which = ', '.join(f'{j} ({np.degrees(s):.2g}°)' for j, s in still)
        raise DataError(
            f'{which} {"does" if len(still) == 1 else "do"} not move in this recording '
            f'(held still or locked?): a full-dynamics fit needs every joint to move, as a '
            "joint's friction shows only in its own motion, and the inertia of the links "
            'beyond it about its axis only in its motion too. Record again with every joint '
            'moving (`arm-dyn-id design` plans such an excitation)')


def fit_full_samples(robot, t, q, tau, *, config=None, methods=None, holdout=DEFAULT_HOLDOUT,
                     seed=0, cutoff_hz=None, harmonic_hz=None, robot_name=None,
                     provenance=None, phase=None, friction=None, armature=None):
    """Fit and validate the full dynamics (rigid body + friction) of any rich recording.

    The same steps for the CLI and the identifier node: isolated torque spikes
    replaced (as in the gravity path), then
    :func:`arm_dyn_id.identification.full_dynamics.fit_full` (preparation with a
    stated cut-off, estimators chosen on held-out time blocks, validation), and
    the prepared samples with the model's predictions for plots and the
    plausibility check.

    Parameters
    ----------
    robot : RobotModel
    t : ndarray, (N,)
        s, any spacing.
    q, tau : ndarray, (N, n)
        rad, N·m (joint torque).
    config : ArmConfig, optional
        ``torque_noise`` and ``robot_name``.
    methods : sequence of str, optional
        Default :data:`~arm_dyn_id.identification.full_dynamics.FULL_METHODS`.
    holdout : float
        Hold-out fraction: ``round(1 / holdout)`` time blocks (:func:`holdout_blocks`).
    cutoff_hz, harmonic_hz : float, optional
        Low-pass cut-off, or the highest harmonic of a known Fourier plan.
    phase : callable, optional
        ``phase(text)`` hears the steps.
    friction : str or FrictionModel, optional
        ``'auto'`` or a ``--friction`` specification (see
        :func:`~arm_dyn_id.identification.full_dynamics.fit_full`); default the
        config's ``friction`` (``'auto'``).
    armature : bool or 'auto', optional
        Default the config's ``armature`` (``'auto'``).

    Returns
    -------
    FullPipelineFit
    """
    from arm_dyn_id.data.preparation import prepare
    from arm_dyn_id.identification.full_dynamics import FULL_METHODS, fit_full
    say = phase or (lambda text: None)
    blocks = holdout_blocks(holdout)
    t, q, tau = as_record(t, q, tau)
    if len(t) and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind='stable')
        t, q, tau = t[order], q[order], tau[order]
    joints = list(robot.joint_names)
    _every_joint_moves(q, joints)
    tau, flagged = despike(tau)
    gross = {j: int(c) for j, c in zip(joints, flagged.sum(axis=0)) if c}
    if gross:
        say(f'{sum(gross.values())} isolated gross errors in the torques replaced by the '
            f'median of their neighbours: {gross}')
    methods = tuple(methods or FULL_METHODS)
    say(f'fitting the full dynamics ({", ".join(methods)}) on {len(t)} samples, '
        f'{blocks} time blocks held out in turn')
    started = time.perf_counter()
    if friction is None:
        friction = getattr(config, 'friction', None) or 'auto'
    if armature is None:
        armature = getattr(config, 'armature', 'auto')
    model, validation = fit_full(robot, t, q, tau, config=config, methods=methods,
                                 cutoff_hz=cutoff_hz, harmonic_hz=harmonic_hz, holdout=blocks,
                                 provenance=provenance, robot_name=robot_name, seed=seed,
                                 friction=friction, armature=armature)
    seconds = time.perf_counter() - started
    chosen = model.metadata.get('selection', {}).get('friction', {})
    if chosen.get('scores'):
        scores = ', '.join(f'{k} {v:.3g}' for k, v in chosen['scores'].items())
        widths = (chosen.get('smooth_velocity') or {}).get('scores') or {}
        if widths:
            scores += '; eps (rad/s) ' + ', '.join(f'{k} {v:.3g}' for k, v in widths.items())
        say(f'friction: {chosen["chosen"]} ({chosen["model"]}), chosen by {chosen["by"]}: '
            f'{scores}')
        aside = chosen.get('set_aside') or []
        if aside:
            moved = ', '.join(f'{k} {100 * chosen["gravity_shift"][k]:.0f} %' for k in aside)
            say(f'friction: set aside, as they move the fitted gravity torque from '
                f'{next(iter(chosen["scores"]))}\'s by more than '
                f'{100 * chosen["gravity_tolerance"]:g} % of the URDF\'s (a constant torque '
                f'this motion cannot tell from gravity) without halving the held-out error, '
                f'or by more than the URDF\'s whole gravity: {moved}')
    else:
        say(f'friction: {chosen.get("model", model.friction_model.describe())} (as asked)')
    rotor = armature_choice(model)
    if rotor:
        say(f'rotor inertia: {rotor}')
    prep = model.metadata.get('preparation') or {}
    say(f'filter: {prep.get("filter", "low-pass")} at {prep.get("cutoff_hz", float("nan")):.3g}'
        f' Hz ({prep.get("cutoff_source", "given")})')
    data = prepare(t, q, tau, cutoff_hz=prep.get('cutoff_hz'), order=int(prep.get('order', 4)),
                   decimate=1)
    rigid = model.rigid_body_torques(data.q, data.dq, data.ddq)
    predicted = rigid + model.friction_torques(data.dq, data.q, data.ddq)
    nominal = _nominal_torques(robot, data.q, data.dq, data.ddq)
    if robot_name is not None:
        model.metadata['robot_name'] = robot_name
    model.metadata['gross_errors'] = dict(gross)
    return FullPipelineFit(model=model, validation=validation, prepared=data,
                           predicted=predicted, rigid=rigid, nominal=nominal,
                           noise_std=noise_estimate(tau), blocks=blocks, seed=seed,
                           seconds=seconds, info={'gross_errors': gross}, record=(t, q, tau))


def armature_choice(model):
    """``armature='auto'``'s choice in words (``kept, chosen by ...: without 3.1, with
    1.2``, a failed fit's error after), or None when it was asked for."""
    rotor = (model.metadata.get('selection') or {}).get('armature')
    if not rotor:
        return None
    scores = ', '.join(f'{"with" if k == "true" else "without"} {v:.3g}'
                       for k, v in rotor['scores'].items())
    errors = rotor.get('errors') or {}
    failed = ''.join(f'; the fit {"with" if k == "true" else "without"} them failed: {e}'
                     for k, e in errors.items())
    how = 'the only fit that succeeded' if errors else f'chosen by {rotor["by"]}'
    return f'{"kept" if rotor["chosen"] else "left out"}, {how}: {scores}{failed}'


#: Samples at most for the nominal torques of the plausibility check (every k-th beyond).
_NOMINAL_ROWS = 5000


def _nominal_torques(robot, q, dq, ddq):
    """The URDF's rigid-body torques (N·m) at the prepared samples (NaN rows between the
    at most :data:`_NOMINAL_ROWS` evaluated)."""
    out = np.full(q.shape, np.nan)
    rows = slice(0, len(q), max(1, len(q) // _NOMINAL_ROWS))
    if len(q):
        out[rows] = robot.inverse_dynamics(q[rows], dq[rows], ddq[rows])
    return out


def fit_full_recording(recording, robot, config=None, **options):
    """:func:`fit_full_samples` on a recording read from a bag.

    Parameters
    ----------
    recording : Recording
    robot : RobotModel
        With the recording's joints, in its order.
    config : ArmConfig, optional
    **options
        Keyword arguments of :func:`fit_full_samples`; ``provenance`` entries
        are added to ``{data: recording.source, states_topic}``.

    Returns
    -------
    FullPipelineFit
    """
    provenance = {'data': str(recording.source), 'states_topic': recording.states_topic}
    provenance.update(options.pop('provenance', None) or {})
    if config is not None and options.get('robot_name') is None:
        options['robot_name'] = config.robot_name
    return fit_full_samples(robot, recording.t, recording.q, recording.tau, config=config,
                            provenance=provenance, **options)


def fit_gravity_recording(recording, robot, config=None, **options):
    """:func:`fit_gravity` on a recording read from a bag.

    Parameters
    ----------
    recording : Recording
        From :func:`arm_dyn_id.data.bag_reader.read_bag` (``t``, ``q``, ``tau``,
        ``markers``, ``joints``, ``source``, ``states_topic``).
    robot : RobotModel
        With the recording's joints, in its order.
    config : ArmConfig, optional
        Supplies ``torque_noise`` (weights) and ``robot_name`` unless given in
        ``options``.
    **options
        Keyword arguments of :func:`fit_gravity`; ``provenance`` entries are
        added to ``{data: recording.source, states_topic}``.

    Returns
    -------
    GravityPipelineFit
    """
    if config is not None:
        if options.get('noise') is None and config.fit_noise is not None:
            options['noise'] = np.asarray(config.fit_noise, dtype=float)
        if options.get('robot_name') is None:
            options['robot_name'] = config.robot_name
    provenance = {'data': str(recording.source), 'states_topic': recording.states_topic}
    provenance.update(options.pop('provenance', None) or {})
    options.setdefault('joints', list(recording.joints))
    options.setdefault('where', f'bag {recording.source}')
    dq = getattr(recording, 'dq', None)
    if options.get('dq') is None and dq is not None and np.shape(dq) == np.shape(recording.q) \
            and np.all(np.isfinite(dq)) and np.any(dq != 0):
        options['dq'] = dq
    return fit_gravity(robot, recording.t, recording.q, recording.tau, recording.markers,
                       provenance=provenance, **options)


#: poses drawn over the joints' range where the gate judges the model's uncertainty
WORKSPACE_POSES = 200


def workspace_poses(robot, count=WORKSPACE_POSES, seed=0):
    """``count`` poses drawn uniformly over each joint's URDF range (one turn of it at
    most, about its middle), rad."""
    lower, upper = robot.position_limits
    wide = upper - lower > 2 * np.pi          # a whole turn: any 2π of it (gravity is periodic)
    lower = np.where(wide, 0.5 * (lower + upper) - np.pi, lower)
    upper = np.where(wide, lower + 2 * np.pi, upper)
    return np.random.default_rng(seed).uniform(lower, upper, size=(count, robot.n_joints))


def workspace_uncertainty(robot, regressor, covariance, names, poses):
    """How well a fit's gravity torque is determined away from the poses of its data.

    Parameters
    ----------
    robot : RobotModel
        The nominal URDF, with the fit's joints.
    regressor : ndarray, (M, n, r)
        The fit's base regressor of G(q) at ``poses`` (:func:`workspace_poses`).
    covariance : ndarray, (r, r)
        The base parameters' covariance.
    names : sequence of str, (r,)
        Base parameter names.
    poses : ndarray, (M, n)

    Returns
    -------
    sigma : ndarray, (n,)
        Per joint, the median over the poses of the 1σ uncertainty of G(q) (N·m).
    nominal : ndarray, (n,)
        The URDF's G(q) over the poses, RMS (N·m).
    weak : list of str
        The base parameters behind most of the uncertainty (each at least a tenth of
        the largest contribution cov_ii E‖Y_i‖²), largest first.
    """
    Y, names = np.asarray(regressor), list(names)
    cov = np.asarray(covariance, dtype=float)
    # a normal matrix near singular inverts to a covariance with negative eigenvalues
    # (and variances): rounding, not certainty. Their magnitudes are the uncertainty of
    # those directions, so the covariance is taken as V |Λ| Vᵀ
    w, V = np.linalg.eigh(0.5 * (cov + cov.T))
    cov = (V * np.abs(w)) @ V.T
    variance = np.einsum('mjr,rs,mjs->mj', Y, cov, Y)
    sigma = np.median(np.sqrt(np.clip(variance, 0.0, None)), axis=0)
    nominal = np.sqrt(np.mean(robot.gravity_torques(poses) ** 2, axis=0))
    share = np.diag(cov) * np.mean(np.sum(Y ** 2, axis=1), axis=0)
    order = np.argsort(-share)
    weak = [names[k] for k in order if share[k] > 0.1 * share[order[0]]] \
        if share.size and share[order[0]] > 0 else []
    return sigma, nominal, weak


def judge_gravity_fit(fitted, robot, raw, effort=None, gains=None):
    """The data gate of a gravity fit, the same for ``arm-dyn-id fit`` and a node.

    :func:`arm_dyn_id.validation.plausibility.judge_data` on every averaged pair (or
    quasi-static sample) against the URDF's gravity there (units, signs, swapped
    joints), then :func:`~arm_dyn_id.validation.plausibility.judge_fit` of the model
    on the held-out ones (the training ones without a hold-out).

    Parameters
    ----------
    fitted : GravityPipelineFit
    robot : RobotModel
        The nominal URDF, with the recording's joints.
    raw : ndarray, (N, n)
        Every measured torque of the recording (N·m).
    effort : {'current', 'torque'}, optional
    gains : array_like, (n,), optional
        N·m per A of the conversion (``effort='current'``).

    A base that is not level (:func:`~arm_dyn_id.identification.tilt.sweep_tilt`, on the
    fit's own samples) is named first in a refusal, or carried as a warning.
    A joint whose effort disagrees with the other joints' on the averaged pairs
    (:func:`_pair_scales`: one torque constant off) is refused or carried as a warning
    (``pair_scale_warning``, said as the ``effort_scale_warning``). A model that moves by
    :data:`~arm_dyn_id.identification.gravity.PAIR_OFFSET_SHIFT` when each swept joint's
    constant in its pair averages is fitted beside it is carried as a warning
    (``pair_offset_warning``).

    The model gate's physics last (:func:`_physical`).

    Returns
    -------
    Plausibility
    """
    return _physical(_judge_gravity(fitted, robot, raw, effort, gains), fitted.model)


def _judge_gravity(fitted, robot, raw, effort, gains):
    """:func:`judge_gravity_fit` before the model gate's physics."""
    verdict, final = _judge_angles(_gravity_gate(fitted, robot, raw, effort, gains), robot,
                                   np.concatenate([c[0].q for c in fitted.cases.values()]),
                                   lambda v: _gravity_convention(fitted, robot, v))
    if final:
        return verdict
    verdict = _with_tilt(verdict, read_tilt(sweep_tilt, fitted, robot))[0]
    mode = ((fitted.model.metadata.get('fit') or {}).get('pair_offsets') or {}).get('mode')
    if mode is None or not (verdict.ok or verdict.cause == 'load'):
        return verdict
    from arm_dyn_id.identification.gravity import every_pair
    try:
        joined = every_pair(fitted.cases)    # every averaged pair, held out and fitted
    except (ValueError, ArithmeticError, LookupError, MemoryError):
        joined = None   # the readings below must not stop a passed fit
    if joined is None:
        return verdict
    # one torque constant off: the joints' efforts against each other, on the pairs (a
    # load the URDF lacks moves none of them: the fit identifies it)
    verdict = _pair_scales(fitted, robot, joined, verdict, effort, gains)
    if verdict.ok and mode == 'auto':
        # friction stronger one way, or an effort offset: how far the model moves with it
        from arm_dyn_id.identification.gravity import pair_offset_reading, pair_offset_warning
        try:
            read = pair_offset_reading(fitted.model, joined, robot,
                                       fitted.info.get('weights_noise'))
            said, numbers = (None, None) if read is None else pair_offset_warning(
                fitted.model, read, robot, workspace_poses(robot))
        except (ValueError, ArithmeticError, LookupError, MemoryError):   # LinAlgError too
            said, numbers = None, None   # a reading that fails must not stop a passed fit
        if numbers is not None:
            verdict.checks['pair_offsets'] = numbers
        if said:
            verdict.checks['pair_offset_warning'] = said
    return verdict


def _pair_scales(fitted, robot, joined, verdict, effort, gains):
    """``verdict`` with a gravity fit's effort scales read on its averaged pairs
    (``joined``; :func:`~arm_dyn_id.identification.gravity.pair_effort_scales`) and judged
    (:func:`~arm_dyn_id.validation.plausibility.pair_scales`): a passed one refused, or
    carrying the warning. A refusal for a load the URDF lacks (its scales against the
    URDF growing along the chain) names the constant instead when one joint's effort
    is refused against the others': a humanoid arm's joint_4 at 2x, read x1.1 x1.1 x1.02
    x2.08 against the URDF, was refused as a missing load."""
    from arm_dyn_id.identification.gravity import pair_effort_scales
    from arm_dyn_id.validation.plausibility import EFFORT_SCALE_OFF, pair_scales
    try:
        # the jackknife only where a scale reads off 1 by what pair_scales judges
        scales = pair_effort_scales(fitted.model.base, joined, robot,
                                    fitted.info.get('weights_noise'),
                                    limit=1.0 + EFFORT_SCALE_OFF)
        few = _few_poses(robot, joined)
    except (ValueError, ArithmeticError, LookupError, MemoryError):   # LinAlgError too
        scales = few = None   # a reading that fails must not stop a passed fit
    if few is not None:
        verdict.checks['few_poses'] = few
    if scales is None:
        return verdict
    judged = pair_scales(scales, list(robot.joint_names), effort, gains)
    checks = {**verdict.checks, **judged.checks}
    if not verdict.ok:
        if judged.ok:
            return type(verdict)(False, verdict.reason, checks, verdict.cause)
        return type(verdict)(False, judged.reason + ' (the URDF\'s checks read it as a load '
                             'the URDF lacks, which moves no joint\'s effort against the '
                             'others\')', checks, judged.cause)
    return type(verdict)(judged.ok, judged.reason, checks, judged.cause)


def _few_poses(robot, joined):
    """The joints that carry gravity and that a gravity fit's pairs (``joined``) sweep at
    fewer than two poses of the others: {joint: poses}. There neither the constant a
    forward/backward average keeps (friction stronger one way, an effort offset: it is
    that joint's own gravity's constant) nor the joint's effort scale against the others'
    is read (sweeps of three arms at one pose a joint: 0.8x-1.2x said 2 times in 24)."""
    from arm_dyn_id.identification.gravity import sweep_poses
    from arm_dyn_id.model.robot import carries_gravity
    urdf = np.sqrt(np.mean(robot.gravity_torques(workspace_poses(robot)) ** 2, axis=0))
    poses = {name: int(sweep_poses(joined, j))
             for j, (name, loaded) in enumerate(zip(robot.joint_names, carries_gravity(urdf)))
             if loaded}
    return {name: count for name, count in poses.items() if count < 2}


def _gravity_gate(fitted, robot, raw, effort, gains):
    """:func:`judge_gravity_fit` before the tilt."""
    from arm_dyn_id.validation.plausibility import judge_data, judge_fit
    joints = list(robot.joint_names)
    q_all = np.concatenate([c[0].q for c in fitted.cases.values()])
    tau_all = np.concatenate([c[0].tau for c in fitted.cases.values()])
    # a joint the data holds still keeps whatever friction it holds (the pairs cancel
    # only the moving joint's): tested only where its gravity torque varies well above it
    from arm_dyn_id.validation.plausibility import still_floor
    nominal = robot.gravity_torques(q_all)
    verdict = judge_data(tau_all, nominal, joints,
                         noise=fitted.noise_std, raw=raw, effort=effort, gains=gains,
                         subject='gravity torque', floor=still_floor(robot, q_all))
    if not verdict.ok:
        return verdict
    if not fitted.model.metadata.get('fit', {}).get('quasi_static'):
        # a joint too light for the 5 % rule: its sign on its own forward/backward pairs
        # (their friction cancelled), where the URDF's torque is beyond its error there
        from arm_dyn_id.validation.plausibility import judge_sweep_signs, urdf_error_bound
        moving = np.concatenate([c[0].moving_joint for c in fitted.cases.values()])
        light = [joints.index(j) for j in verdict.checks.get('untested', [])]
        own = judge_sweep_signs(tau_all, nominal, moving,
                                urdf_error_bound(robot), joints, light)
        verdict = type(verdict)(own.ok, own.reason, {**verdict.checks, **own.checks},
                                own.cause)
        if not verdict.ok:
            return verdict
    # the held-out pairs come from the same motion: is the model determined elsewhere?
    # (before the fit's own scale: a model the data does not determine has any scale)
    where = _judge_workspace(robot, fitted.model, fitted.result.covariance, joints, q_all)
    checks = {**verdict.checks, **where.checks}
    if not where.ok:
        return type(where)(False, where.reason, checks, where.cause)
    case = 'held_out' if 'held_out' in fitted.cases else 'training'
    paired, predicted = fitted.cases[case]
    from arm_dyn_id.validation.check import holding_friction
    judged = judge_fit(paired.tau, predicted, nominal=robot.gravity_torques(paired.q),
                       noise=fitted.noise_std, joints=joints, held_out=case == 'held_out',
                       raw=raw, held=holding_friction(robot))
    return type(judged)(judged.ok, judged.reason, {**checks, **judged.checks}, judged.cause)


def _judge_workspace(robot, model, covariance, joints, q_all):
    """judge_workspace of a fit: its gravity torque's uncertainty over the joints' range,
    the joints its data moves, the parameters behind it and (a gravity model) a motion
    for the first."""
    from arm_dyn_id.validation.plausibility import judge_workspace
    poses = workspace_poses(robot)
    base, r = model.base, model.base.count
    gravity = model.dynamics == 'gravity'
    if gravity:
        Y = base.reduce(robot.gravity_regressor(poses))
    else:
        from arm_dyn_id.model.dynamics import gravity_base_regressor
        Y = gravity_base_regressor(robot, base, poses)
    cov = np.asarray(covariance)[:r, :r]
    sigma, nominal, weak = workspace_uncertainty(robot, Y, cov, base.names, poses)
    far = None
    if not gravity:
        # a full fit: its uncertainty over the range against that at the poses visited
        # (the residual's size, which scales both, cancels)
        from arm_dyn_id.model.dynamics import gravity_base_regressor
        visited = np.asarray(q_all)[::max(1, len(q_all) // len(poses))]
        near, _, _ = workspace_uncertainty(
            robot, gravity_base_regressor(robot, base, visited), cov, base.names, visited)
        far = sigma / np.maximum(near, 1e-300)
    verdict = judge_workspace(sigma, nominal, joints, extrapolation=far)
    if verdict.ok:
        return verdict
    from arm_dyn_id.validation.check import held_still
    moved = {j: s for j, s, k in zip(joints, np.ptp(q_all, axis=0), held_still(q_all))
             if not k}
    advice, scatter = '', None
    if weak and gravity:
        fit = model.metadata.get('fit') or {}
        if fit.get('quasi_static') and moved and len(moved) == len(joints) and \
                min(moved.values()) >= 2 * WIDE_MOTION and fit.get('residual_rms'):
            # every joint already moves beyond what an advised motion adds: the scatter
            # of the torques (friction held at rest, noise) over too few samples decides
            loaded = np.asarray(nominal) >= 0.05 * np.max(nominal)
            worst = int(np.argmax(np.where(loaded, np.asarray(sigma) /
                                           np.maximum(nominal, 1e-300), -np.inf)))
            scatter = (f'the data already moves every joint over '
                       f'{np.degrees(min(moved.values())):.0f}° or more: what leaves them '
                       f'undetermined is the torques\' scatter about the model '
                       f'({joints[worst]} {fit["residual_rms"][worst]:.3g} N·m RMS, the '
                       'friction a joint holds at rest among it) over '
                       f'{fit.get("n_samples", "its")} samples; more samples determine '
                       'them: more holds, or sweeps whose forward/backward pairs cancel the '
                       'friction')
        else:
            from arm_dyn_id.identification.quasi_static import motion_advice
            advice = motion_advice(robot, base, q_all[::max(1, len(q_all) // 400)],
                                   weak[:1]).get(weak[0], '')
    return judge_workspace(sigma, nominal, joints, moved, weak, advice, extrapolation=far,
                           scatter=scatter)


#: Half the range (rad) of the motion the workspace refusal advises
#: (``quasi_static.motion_advice``): quasi-static data that moves every joint over twice
#: this already is told that its torques' scatter over its samples, not its motion, leaves
#: the model undetermined (a user's trial: 40 holds of a UR5 spanning 204-214° were told to move
#: shoulder_lift through ±60°).
WIDE_MOTION = np.radians(60.0)


#: A joint the model does not follow on held-out blocks is named swapped with another
#: when, their effort columns exchanged, the same fit's held-out RMSE % falls to at most
#: this share of the fit's as recorded, on both joints and on the mean over all joints
#: (simulated wrists swapped: 0.23-0.37x on the mean, the worst of the pair 0.14-0.31x;
#: exchanging another pair of the same records: 1.2x and worse).
SWAP_GAIN = 0.5


def _swap_suspects(verdict, joints):
    """The joints of a refusal whose effort column may be another joint's, to try with
    :func:`_swap_explains` (at most two, so that a refusal costs at most two refits).

    A joint the model does not follow on held-out blocks (the excitation, the held-out
    quality, or its friction pinned at a bound), a joint whose effort reads far off
    against the other joints' (a torque constant), then, for a refusal that blames a flipped
    sign, the joints whose torque runs against the URDF's: two joints swapped read as a
    sign when one's torque is the other's mirror (the humanoid's joints 2 and 3: joint 3
    at rho = -0.83), or when the fit pins a friction to follow another joint's torque
    (the UR5's elbow and wrist_1). A genuine flip, tried the same way, is no exchange's
    gain (every simulated one of 19 on three arms).
    """
    if verdict.cause not in ('excitation', 'held_out', 'sign', 'torque_constant'):
        return []
    checks = verdict.checks
    suspects = [checks.get('held_out_failed')]
    if verdict.cause == 'torque_constant':
        # a joint whose effort reads far off against the others' (effort_scales) may
        # carry another joint's effort (the humanoid's joints 4 and 5 swapped: joint 4
        # read as a constant off); a constant off is no exchange's gain
        from arm_dyn_id.validation.plausibility import RELATIVE_SCALE_LIMIT
        table = checks.get('effort_scales') or {}
        suspects += sorted((j for j, c in table.items() if isinstance(c, dict) and
                            c.get('scale') is not None and
                            abs(np.log(max(abs(c['scale']), 1e-9))) >
                            np.log(RELATIVE_SCALE_LIMIT)),
                           key=lambda j: -table[j].get('drop', 0.0))
    if verdict.cause == 'sign':
        # a flip read from the joints' coupling (plausibility.flipped_effort) names its
        # joint first: two swapped efforts can read as one joint's effort negative
        flipped = (checks.get('flipped_effort') or {}).get('joint')
        if flipped:
            suspects.append(flipped)
        against = dict((checks.get('agreement') or {}).items())
        against.update((j, c) for j, c in (checks.get('light_signs') or {}).items()
                       if c.get('judged'))
        suspects += sorted((j for j, c in against.items() if c['rho'] < 0),
                           key=lambda j: against[j]['rho'])
        scales = checks.get('untested_scales') or {}
        suspects += [j for j, c in scales.items() if c.get('below_floor')]
    found = []
    for joint in suspects:
        if joint in joints and joint not in found:
            found.append(joint)
    return found[:2]


def _swap_explains(fitted, robot, joint):
    """``(sentence, scores)`` when exchanging ``joint``'s effort column with another's makes
    the model follow its held-out blocks (:data:`SWAP_GAIN`), else None.

    The model's structure refitted on the record as fitted, as recorded and with each
    other column exchanged in turn (:func:`.full_dynamics.exchanged_scores`: one
    preparation, one regressor, a weighted solve per block and target); only for a
    refused fit, and it only adds to a refusal, so a failure of its own leaves the
    refusal as it was.
    """
    from arm_dyn_id.identification.full_dynamics import exchanged_scores
    if fitted.record is None:
        return None
    joints = list(robot.joint_names)
    i = joints.index(joint)
    try:
        scores = exchanged_scores(robot, fitted.model, *fitted.record, i,
                                  holdout=fitted.blocks)
    except (ValueError, ArithmeticError, LookupError):   # DataError, LinAlgError among them
        return None
    before = scores.pop(None)
    best = None
    for k, after in scores.items():
        gain = float(np.mean(after) / max(np.mean(before), 1e-12))
        both = max(after[i] / max(before[i], 1e-12), after[k] / max(before[k], 1e-12))
        if gain <= SWAP_GAIN and both <= SWAP_GAIN and (best is None or gain < best[1]):
            best = (k, gain, after)
    if best is None:
        return None
    k, gain, after = best
    a, b = sorted((i, k))
    found = {'joints': [joints[a], joints[b]], 'before': before.tolist(),
             'after': after.tolist(), 'gain': gain}
    return (f'{joints[a]}\'s and {joints[b]}\'s efforts look swapped: with the two columns '
            f'exchanged the same model follows both on held-out time blocks ({joints[a]} '
            f'{before[a]:.3g} -> {after[a]:.3g} %, {joints[b]} {before[b]:.3g} -> '
            f'{after[b]:.3g} % RMSE of their largest torque; every joint {np.mean(before):.3g} '
            f'-> {np.mean(after):.3g} % on average): joint order of the effort (joint_map, '
            'the driver\'s joint names); `arm-dyn-id check` tests each joint', found)


#: A joint whose recorded angle spans less than this (rad), yet more than
#: :data:`LOCKED_SPAN`, is said as the model is written: the inertia about its axis and
#: its friction are known only near its motion (a UR5 whose elbow moved ±0.016 rad was
#: written with gravity 2-3 % off, yet 26-36 % off on another motion of the same arm;
#: the held-out blocks of the same motion cannot see it).
NARROW_SPAN = np.radians(5.0)


def narrow_motion_message(q, joints):
    """The warning naming the joints a full-dynamics record ``q`` (as recorded: the
    record was refused before the fit for a joint under :data:`LOCKED_SPAN`) moves less
    than :data:`NARROW_SPAN`, else None."""
    from arm_dyn_id.validation.check import joint_spans
    span = joint_spans(np.where(np.isfinite(q), q, np.nan))
    narrow = [(j, s) for j, s in zip(joints, span) if np.isfinite(s) and s < NARROW_SPAN]
    if not narrow:
        return None
    which = ', '.join(f'{j} ({np.degrees(s):.2g}°)' for j, s in narrow)
    one = len(narrow) == 1
    return (f'{which} {"moves" if one else "move"} less than '
            f'{np.degrees(NARROW_SPAN):.0f}° in this recording: the inertia about '
            f'{"its axis" if one else "their axes"} and {"its" if one else "their"} '
            'friction are known only near this motion, which the held-out blocks share, '
            'so the model may be wrong on another motion (its gravity over the joints\' '
            'range is checked apart). Record again with every joint moving wider for a '
            'model of the whole dynamics (`arm-dyn-id design` plans one)')


def judge_full_fit(fitted, robot, raw, effort=None, gains=None):
    """The data gate of a full-dynamics fit, the same for ``arm-dyn-id fit`` and a node,
    then the model gate's physics (:func:`_physical`).

    :func:`arm_dyn_id.validation.plausibility.judge_full` on the prepared samples
    against the URDF's inverse dynamics there, the cut-off, and the held-out quality.

    Parameters
    ----------
    fitted : FullPipelineFit
    robot : RobotModel
        The nominal URDF, with the recording's joints.
    raw : ndarray, (N, n)
        Every measured torque of the recording (N·m).
    effort : {'current', 'torque'}, optional
    gains : array_like, (n,), optional

    Returns
    -------
    Plausibility
    """
    return _physical(_judge_full(fitted, robot, raw, effort, gains), fitted.model)


def _judge_full(fitted, robot, raw, effort, gains):
    """:func:`judge_full_fit` before the model gate's physics."""
    from arm_dyn_id.identification.full_dynamics import ARMATURE_GAIN
    from arm_dyn_id.validation.plausibility import Plausibility, judge_full
    flat = _saturation(fitted, robot)
    if flat:
        # read first: a flat effort makes the cut-off's and the scales' readings wrong
        from arm_dyn_id.validation.saturation import saturation_message
        return Plausibility(False, saturation_message(flat), {'saturation': flat},
                            'saturated')
    model = fitted.model
    fit = model.metadata.get('fit') or {}
    unmodelled = None
    if not model.armature:
        # a geared arm's rotor inertia is not in the URDF either, and a model without it
        # does not follow held-out blocks (a simulated Panda with 0.3 kg·m² on each joint
        # was refused at 9 % held-out RMSE and written with it, 3 % off the true gravity)
        tried = (model.metadata.get('selection') or {}).get('armature')
        failed = ((tried or {}).get('errors') or {}).get('true')
        if failed:
            # auto's fit with rotor inertia had no solution: --armature yes would not either
            unmodelled = (f"a geared arm's rotor inertia, which this fit leaves out: the fit "
                          f'with it found no solution ({failed})')
        else:
            ask = (f'--armature yes (auto left it out: it did not lower the held-out error '
                   f'by {1 - ARMATURE_GAIN:.0%})' if tried else '--armature auto')
            unmodelled = (f"a geared arm's rotor inertia, which this fit leaves out: {ask} "
                          '(config key armature) fits it')
    verdict = judge_full(fitted.prepared, fitted.predicted, fitted.nominal,
                         fitted.validation.get('held_out'), fitted.noise_std,
                         joints=list(robot.joint_names), robot=robot,
                         parameter_names=model.parameter_names,
                         values=model.parameter_values, std_errors=model.std_errors,
                         condition=fit.get('condition_number'), raw=raw, effort=effort,
                         gains=gains, unmodelled=unmodelled,
                         scales=fit.get('effort_scales'),
                         union_scales=fit.get('effort_scales_union'),
                         rigid_condition=fit.get('rigid_condition_number'))
    for joint in ([] if verdict.ok else _swap_suspects(verdict, robot.joint_names)):
        swapped = _swap_explains(fitted, robot, joint)
        if swapped is not None:
            return type(verdict)(False, f'{swapped[0]}. As recorded: {verdict.reason}',
                                 {**verdict.checks, 'swap_test': swapped[1]}, 'swap')
    verdict, final = _judge_angles(verdict, robot, fitted.prepared.q if fitted.record is None
                                   else fitted.record[1],
                                   lambda v: _full_convention(fitted, robot, v))
    if final:
        return verdict
    if verdict.cause in ('excitation', 'held_out') and fit.get('rests') and \
            not fit.get('rests_not_scored'):
        # scored rests: their stiction is what the held-out blocks fail on (and it reads
        # as a tilt: a UR5 resting 55 % of the time read 1.9°)
        return _with_rests(verdict, fit['rests'])
    # a base that is not level: said first in a refusal, as a warning with a written model
    verdict, tilted = _with_tilt(verdict, read_tilt(gravity_tilt, fitted, robot))
    if tilted and not verdict.ok:
        return verdict
    # as recorded, as the held-still refusal measured it (the filter narrows a span)
    narrow = narrow_motion_message(fitted.prepared.q if fitted.record is None else
                                   fitted.record[1], list(robot.joint_names))
    if narrow:
        verdict.checks['narrow_motion_warning'] = narrow
    if verdict.ok:
        _read_lag(fitted, verdict.checks)
    if not verdict.ok or model.covariance is None:
        return verdict
    # held-out time blocks of the same motion: is the model determined elsewhere?
    where = _judge_workspace(robot, model, model.covariance, list(robot.joint_names),
                             fitted.prepared.q)
    return _with_tilt(type(where)(where.ok, where.reason, {**verdict.checks, **where.checks},
                                  where.cause), verdict.checks.get('gravity_tilt'))[0]


def _with_rests(verdict, rests):
    """A held-out refusal with the arm's rests named first, when they were scored (``rests``
    of the recording, half or more:
    :func:`~arm_dyn_id.identification.full_dynamics.rest_rows`): a UR5 resting three
    times for 6-16 s was refused as too little excitation, wiring or rotor inertia, the
    friction it held at rest in the score."""
    return type(verdict)(False, f'the arm rests {100 * rests:.0f} % of the recording (every '
                         'joint slower than 0.03 rad/s for 1 s or more), holding whatever '
                         'friction it was left with, which no model predicts: cut the rests '
                         f'out of the recording, or record more motion. As fitted: '
                         f'{verdict.reason}', {**verdict.checks, 'rests': rests},
                         verdict.cause)


def _read_lag(fitted, checks):
    """The effort's lag against the angles (:func:`arm_dyn_id.validation.timing.effort_lag`)
    on the fit's samples, into ``checks``: ``effort_lag`` and, when it is said,
    ``effort_lag_warning``."""
    from arm_dyn_id.validation.timing import effort_lag, lag_message
    prepared = fitted.prepared
    if prepared.tau is None or prepared.dq is None:
        return
    read = effort_lag(prepared.t, prepared.tau, fitted.nominal, prepared.dq)
    if read is None:
        return
    lag, best, recorded = read
    checks['effort_lag'] = {'lag_s': lag, 'unexplained': best,
                            'unexplained_as_recorded': recorded}
    said = lag_message(lag, best, recorded)
    if said:
        checks['effort_lag_warning'] = said


def _saturation(fitted, robot):
    """:func:`arm_dyn_id.validation.saturation.saturated` of a full fit: the recorded
    effort (as fitted, not filtered) at the prepared samples against the URDF's torque."""
    from arm_dyn_id.validation.saturation import saturated
    prepared = fitted.prepared
    if fitted.record is None or prepared.tau is None:
        return []
    t, _, tau = fitted.record
    effort = np.column_stack([np.interp(prepared.t, t, tau[:, j])
                              for j in range(tau.shape[1])])
    return saturated(effort, fitted.nominal, prepared.dq, list(robot.joint_names),
                     fitted.noise_std)


def _physical(verdict, model):
    """``verdict``, or a refusal (cause ``implausible``) of a model whose file the model gate
    would refuse (:func:`arm_dyn_id.model.gate.physics`): a least-squares fit giving a
    loaded joint a negative inertia, gravity beyond 5x the URDF's or against its sign.
    Such a model was written with exit 0 (a Panda's effort clipped at 66 % of its peak on
    one joint) and every command and node then refused its file."""
    if not verdict.ok:
        return verdict
    from arm_dyn_id.model.gate import ModelRefused, physics
    try:
        physics(model)
    except ModelRefused as exc:
        reason = (f'{exc}, which every command and node refuses to load. No rigid arm '
                  'makes these torques: look for an effort that saturates or is clipped, a '
                  'hand or an obstacle on the arm during the recording, or a motion that '
                  'leaves a least-squares fit free there')
        tilted = verdict.checks.get('gravity_tilt_warning')
        if tilted:      # a UR5 tilted 3°, fitted upright: shoulder_pan's inertia negative
            reason = f'{tilted}. As fitted: {reason}'
        return type(verdict)(False, reason, {**verdict.checks, 'physics': str(exc)},
                             'implausible')
    return verdict


#: rows of a gate's samples the angle conventions are tried on (each costs the URDF's
#: torque there: 24 changes of a 6-joint arm at 200 rows, about 35 ms)
_CONVENTION_ROWS = 200


def _named_convention(verdict, found):
    """The gate's verdict with a change of angle convention that explains the torque
    (``found``: :func:`~arm_dyn_id.validation.angle_convention.convention`'s) named, or
    ``verdict`` itself: a refusal, whatever the gate said (a fit that passes on these
    angles holds near this motion only); a sign refusal whose signs flipped explain it
    as well keeps its cause and says the change beside it."""
    if not found:
        return verdict
    from arm_dyn_id.validation.angle_convention import convention_message
    joint, offset, score, recorded = found[0]
    checks = {**verdict.checks, 'angle_convention': {
        'joint': joint, 'offset_rad': None if offset is None else float(offset),
        'reversed': offset is None, 'unexplained': score, 'unexplained_as_recorded': recorded,
        'alike': [[j, o if o is None or o == 'sign' else float(o), s] for j, o, s, _ in
                  found[1:]]}}
    if any(o == 'sign' for _, o, _, _ in found) and not verdict.ok:
        changes = [f for f in found if f[1] != 'sign']
        return type(verdict)(False, f'{verdict.reason}. Or: {convention_message(changes)}',
                             checks, verdict.cause)
    recorded = (f'As recorded: {verdict.reason}' if not verdict.ok else
                'As recorded the gate passed: a model fitted on these angles holds near this '
                'motion only')
    return type(verdict)(False, f'{convention_message(found)}. {recorded}', checks,
                         'angle_convention')


def _judge_angles(verdict, robot, q, convention_of):
    """The recorded angles ``q`` against the URDF's, in both gates before the tilt:
    ``(verdict, final)``, final when they refuse. Angles that look like degrees
    (:func:`~arm_dyn_id.validation.angle_convention.degrees_message`) are refused with
    cause ``units``; else ``convention_of(verdict)`` (:func:`_gravity_convention`,
    :func:`_full_convention`) names a joint's convention off the URDF's."""
    from arm_dyn_id.validation.angle_convention import degrees_message
    said = degrees_message(robot, q)
    if said is not None:
        recorded = f'. As recorded: {verdict.reason}' if not verdict.ok else ''
        return type(verdict)(False, said + recorded, {**verdict.checks, 'degrees': said},
                             'units'), True
    verdict = convention_of(verdict)
    return verdict, verdict.cause == 'angle_convention'


def _spread(rows, count=_CONVENTION_ROWS):
    """At most ``count`` of the row indices ``rows`` (an int array), evenly spread."""
    return rows[::max(1, len(rows) // count)]


def _sign_named(verdict):
    """The joints a sign refusal names (their torque against the URDF's, light joints'
    own signs included)."""
    if verdict.cause != 'sign':
        return []
    against = dict(verdict.checks.get('agreement') or {})
    against.update((j, c) for j, c in (verdict.checks.get('light_signs') or {}).items()
                   if c.get('judged'))
    flipped = (verdict.checks.get('flipped_effort') or {}).get('joint')
    named = [j for j, c in against.items() if c.get('rho', 0) < 0 and
             (c.get('tested') or c.get('judged'))]
    return named + ([flipped] if flipped and flipped not in named else [])


def _gravity_convention(fitted, robot, verdict):
    """:func:`_full_convention` of a gravity fit: the URDF's gravity at its averaged
    pairs (or quasi-static samples), which hold no friction."""
    from arm_dyn_id.validation.angle_convention import convention
    q = np.concatenate([c[0].q for c in fitted.cases.values()])
    tau = np.concatenate([c[0].tau for c in fitted.cases.values()])
    rows = _spread(np.arange(len(q)))

    def nominal_at(angles, reversed=None):      # gravity: no velocity to reverse
        return robot.gravity_torques(angles)
    return _named_convention(verdict, convention(q[rows], nominal_at, tau[rows],
                                                 list(robot.joint_names),
                                                 flip=_sign_named(verdict)))


def _full_convention(fitted, robot, verdict):
    """A full fit's verdict, refused naming the cause when one joint's angle convention off
    the URDF's explains the torque (:mod:`arm_dyn_id.validation.angle_convention`): the
    URDF's inverse dynamics at the gate's rows again with the change."""
    from arm_dyn_id.validation.angle_convention import convention, inverse_dynamics_at
    prepared = fitted.prepared
    rows = _spread(np.flatnonzero(np.all(np.isfinite(fitted.nominal), axis=1)))
    q, dq, ddq = prepared.q[rows], prepared.dq[rows], prepared.ddq[rows]
    nominal_at = inverse_dynamics_at(robot, dq, ddq)
    smooth = fitted.model.friction_model.smooth_velocity
    return _named_convention(verdict, convention(q, nominal_at, prepared.tau[rows],
                                                 list(robot.joint_names), velocity=dq,
                                                 flip=_sign_named(verdict), smooth=smooth))


def _with_tilt(verdict, tilt):
    """``(verdict, sentence)``: a gate's verdict with the tilt read (``checks``'
    ``gravity_tilt``) and, where :func:`~arm_dyn_id.identification.tilt.tilt_message`
    says it, named first in a refusal or carried as ``gravity_tilt_warning``."""
    tilted = tilt_message(tilt)
    checks = dict(verdict.checks)
    if tilt is not None:
        checks['gravity_tilt'] = tilt
    if tilted and not verdict.ok:
        return type(verdict)(False, f'{tilted}. As fitted: {verdict.reason}', checks,
                             verdict.cause), tilted
    if tilted:
        checks['gravity_tilt_warning'] = tilted
    return type(verdict)(verdict.ok, verdict.reason, checks, verdict.cause), tilted


__all__ = ['DEFAULT_HOLDOUT', 'DYNAMICS_MODES', 'FALLBACK_ACCELERATING', 'DynamicsChoice',
           'FullPipelineFit', 'GravityPipelineFit', 'armature_choice', 'choose_dynamics',
           'choose_markers', 'clean_markers', 'fit_full_recording', 'fit_full_samples',
           'fit_gravity', 'fit_gravity_recording', 'holdout_blocks',
           'judge_full_fit', 'NARROW_SPAN',
           'narrow_motion_message',
           'judge_gravity_fit', 'metrics_dict', 'motion_statistics', 'workspace_poses',
           'workspace_uncertainty', 'noise_estimate', 'pair_metrics', 'plan_harmonic_hz',
           'split_pairs']
