"""What the identifier does with the samples it holds, without ROS.

identifier_node (nodes/identifier_node.py) keeps the ``joint_torques`` samples and the
excitation markers it receives, and on ``~/fit``, ``~/check`` or ``~/identify_payload``
hands them here; it keeps the wiring (parameters, topics, services, the worker thread,
logging). What happens to the samples:

- :func:`fit_samples`: gravity or full dynamics, chosen as ``arm-dyn-id fit`` chooses
  (identification.pipeline.choose_dynamics), fitted by the same pipeline and refused by
  the same data gate: a fit the gate refuses is never served;
- :func:`write_live_fit`: the fit's folder under ``model_dir``
  (arm_dyn_id.service.model_dir), and :func:`fit_thresholds`, the contact thresholds of a
  full fit from its own held-out residuals (arm_dyn_id.service.contact_from_fit);
- :func:`check_held_samples`: the pre-flight check (arm_dyn_id.validation.check) on the
  still or slow samples;
- :func:`payload_from_samples`: a payload from the last seconds of samples, the arm model
  frozen (the entry point of ``arm-dyn-id payload``).

The full fit, its thresholds, the check and the payload work on the samples whose
stamps move forward only (:func:`moving_forward`): a replayed or restarted stream goes
back in time, and its repeated samples are left out (the gravity fit pairs the sweeps of
the excitation markers, whose times say which samples belong to them).
"""

import json
import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.data.motor import effort_reading
from arm_dyn_id.data.segmentation import filtered_derivatives, quasi_static_mask
from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.identification.payload import identify_payload_samples
from arm_dyn_id.model.gate import FIT_WARNINGS
from arm_dyn_id.identification.pipeline import (armature_choice, choose_dynamics,
                                                fit_full_samples, fit_gravity, judge_full_fit,
                                                judge_gravity_fit, plan_harmonic_hz)
from arm_dyn_id.service.contact import thresholds_file
from arm_dyn_id.service.contact_from_fit import held_out_thresholds
from arm_dyn_id.service.model_dir import write_fit
from arm_dyn_id.validation.check import FAIL, UNTESTABLE, check_samples
from arm_dyn_id.validation.plausibility import fit_notes, unchecked_note

#: what the fit's provenance says its data was
LIVE_DATA = 'live joint_torques'


def moving_forward(t):
    """Mask of the samples whose stamp moves past every stamp before it: those of a
    replayed or restarted stream, which go back, are left out of every fit."""
    t = np.asarray(t, dtype=float)
    keep = np.ones(len(t), dtype=bool)
    keep[1:] = t[1:] > np.maximum.accumulate(t)[:-1]
    return keep


@dataclass(frozen=True)
class FitSettings:
    """How the identifier fits (its parameters of the same names).

    ``dynamics``: 'auto', 'gravity' or 'full'; ``methods``: the gravity estimators;
    ``full_methods``: the full-dynamics estimators; ``effort``: what joint_states.effort
    carries ('auto', 'current', 'torque'), written into the model's measurement so that
    whoever serves it converts the same way.
    """

    dynamics: str = 'auto'
    methods: tuple = ('wls', 'joint_by_joint')
    full_methods: tuple = ('wls', 'irls', 'consistent')
    effort: str = 'auto'


@dataclass
class LiveFit:
    """A fit of the samples held: the model, its validation, why this kind
    (``choice``: a DynamicsChoice), a one-line summary, the seconds it took and the
    samples it saw."""

    model: object
    validation: dict
    choice: object
    summary: str
    seconds: float
    samples: int
    used: np.ndarray = field(repr=False, default=None)   # mask of the samples fitted
    #: what the data gate let the fit through with (plausibility.written_warnings)
    warnings: tuple = ()
    #: what the gate could not check (plausibility.unchecked_note), or ''
    unchecked: str = ''

    def message(self, written):
        """The reply of ``~/fit``: what was fitted, how, ``written`` (where), what the gate
        could not check and its warnings."""
        return (f'{self.choice.kind} dynamics ({self.choice.reason}): fitted '
                f'{self.model.base.count} base parameters from {self.samples} samples with '
                f'{self.summary} in {self.seconds:.2f} s; {written}' +
                (f'; {self.unchecked}' if self.unchecked else '') +
                ''.join(f'{WARNING_JOIN}{text}' for text in self.warnings))


#: what joins each of a fit's warnings to its reply (:meth:`LiveFit.message`)
WARNING_JOIN = '; warning: '


def without_warnings(reply):
    """A ``~/fit`` reply (:meth:`LiveFit.message`) without its warnings, counted instead:
    the identifier's log line of a fit it made on its own, whose warnings it has logged
    one by one already (WARN)."""
    head, *warnings = reply.split(WARNING_JOIN)
    return head + (f' ({len(warnings)} warning{"s" if len(warnings) > 1 else ""} logged '
                   'above)' if warnings else '')


def _provenance(config):
    return {'data': LIVE_DATA, 'config': str(config.source or '')}


def _fit_gravity(robot, config, t, q, tau, markers, methods):
    """The gravity fit of ``arm-dyn-id fit`` on every pair (no hold-out: the node fits all
    it recorded) and on the excitation node's markers only (no sweep detection live)."""
    if not markers:
        raise DataError(f'no segment markers: {len(t)} samples but nothing on '
                        'excitation_segments; forward/backward averaging needs them')
    fitted = fit_gravity(robot, t, q, tau, markers, noise=config.fit_noise,
                         methods=tuple(methods), holdout=0.0, segments='markers',
                         robot_name=config.robot_name, provenance=_provenance(config),
                         where='live data')
    summary = (f'{fitted.result.method}; residual RMS '
               f'{np.round(fitted.result.residual_rms(), 4).tolist()} N·m')
    return fitted, summary


def _fit_full(robot, config, t, q, tau, markers, methods):
    """Full dynamics with friction: identification.pipeline.fit_full_samples."""
    fitted = fit_full_samples(robot, t, q, tau, config=config,
                              harmonic_hz=plan_harmonic_hz(markers), methods=tuple(methods),
                              robot_name=config.robot_name, provenance=_provenance(config))
    model = fitted.model
    consistent = 'physically consistent' if model.consistent else 'not consistent'
    selection = model.metadata.get('selection') or {}
    friction = (selection.get('friction') or {}).get('chosen', 'given')
    rotor = armature_choice(model)
    return fitted, (f'{model.metadata.get("fit", {}).get("method", "?")} ({consistent}); '
                    f'friction {friction}' + (f'; rotor inertia {rotor}' if rotor else ''))


def fit_samples(robot, config, t, q, tau, markers, settings=FitSettings()):
    """Fit the samples held (torques in N·m) as ``arm-dyn-id fit`` would.

    Gravity or full dynamics by ``settings.dynamics`` (auto: a Fourier plan in the
    markers or rich motion -> full); the full fit sees the samples that move forward
    only (:func:`moving_forward`).

    Returns
    -------
    LiveFit

    Raises
    ------
    DataError
        Nothing to fit (no markers for a gravity fit, too little motion...), or a fit the
        data gate refuses (identification.pipeline.judge_*_fit): the reason is the gate's.
    """
    started = time.monotonic()
    t, q, tau = np.asarray(t, dtype=float), np.asarray(q, dtype=float), \
        np.asarray(tau, dtype=float)
    choice = choose_dynamics(t, q, markers, mode=settings.dynamics)
    used = moving_forward(t) if choice.kind == 'full' else np.ones(len(t), dtype=bool)
    if choice.kind == 'full':
        fitted, summary = _fit_full(robot, config, t[used], q[used], tau[used], markers,
                                    settings.full_methods)
        verdict = judge_full_fit(fitted, robot, tau, effort='torque')
    else:
        fitted, summary = _fit_gravity(robot, config, t, q, tau, markers, settings.methods)
        verdict = judge_gravity_fit(fitted, robot, tau, effort='torque')
    if not verdict.ok:
        raise DataError(f'{choice.kind} fit refused by the data gate: {verdict.reason}')
    model = fitted.model
    model.metadata.setdefault('dynamics_choice', choice.to_dict())
    # in the model's fit section, as `fit` writes it (the gate repeats the warnings to
    # whoever admits the file), and the warnings in the fit's reply, which the node logs
    notes = fit_notes(verdict.checks,
                      model.joint_names if choice.kind == 'full' else None)
    model.metadata.setdefault('fit', {}).update(notes)
    # what joint_states.effort carries (the recorder's conversion), for who serves it
    model.metadata.setdefault('measurement', effort_reading(
        model.joint_names, effort=settings.effort, config=config).measurement())
    unchecked = unchecked_note(notes, verdict.checks,
                               model.metadata['measurement'].get('effort', 'torque'))
    return LiveFit(model, fitted.validation, choice, summary, time.monotonic() - started,
                   len(t), used, tuple(notes[key] for key in FIT_WARNINGS if key in notes),
                   unchecked or '')


def write_live_fit(root, fit, urdf):
    """Write ``fit`` (and its identified ``urdf``, or None) to a new folder under
    ``root`` and move ``latest`` to it (service.model_dir.write_fit, no report: the node
    renders it afterwards). Returns write_fit's paths; OSError when it cannot write."""
    validation = dict(fit.validation or {})
    validation.setdefault('fit_summary', {})
    if isinstance(validation['fit_summary'], dict):
        validation['fit_summary'] = dict(validation['fit_summary'],
                                         dynamics=fit.choice.to_dict(),
                                         source='identifier_node live fit')
    return write_fit(root, fit.model, urdf, validation, report=False)


def fit_thresholds(robot, fit, t, q, tau, model_file, observer_gains):
    """``contact_thresholds.yaml`` beside ``model_file`` from a full fit's own held-out
    residuals (service.contact_from_fit, as ``arm-dyn-id fit``), on the samples it fitted.

    Returns the sentence to add to the fit's message. Raises ConfigError, DataError,
    OSError or ValueError when there are none (the fit stands without them).
    """
    used = fit.used if fit.used is not None else moving_forward(t)
    thresholds, info = held_out_thresholds(
        robot, fit.model, np.asarray(t)[used], np.asarray(q)[used], np.asarray(tau)[used],
        model_file=model_file, observer_gains=observer_gains)
    thresholds.save(thresholds_file(model_file))
    start, end = info['held_out_s']
    note = thresholds.calibration.get('note')
    return f'; contact thresholds from its last {end - start:.3g} s held out' + \
        (f' ({note})' if note else '')


def check_held_samples(robot, config, t, q, tau):
    """The pre-flight check of the samples held; (success, table or reason).

    Quasi-static samples (arm_dyn_id.data.segmentation.quasi_static_mask) of the torques
    received, against the nominal URDF's gravity; success is False when a joint fails or
    no joint could be checked.
    """
    if len(t) == 0:
        return False, ('no data: no joint_torques samples received yet; hold the arm '
                       'still at a few poses (or move it slowly) with the recorder running')
    keep = moving_forward(t)
    t, q, tau = np.asarray(t)[keep], np.asarray(q)[keep], np.asarray(tau)[keep]
    try:
        mask = quasi_static_mask(t, q)
        velocity = filtered_derivatives(t, q)[1]
        result = check_samples(robot, q, tau, mask=mask, velocity=velocity,
                               torque_constants=np.abs(config.joint_torque_gains))
    except DataError as exc:
        return False, f'check not possible: {exc}'
    head = (f'pre-flight check of {len(t)} samples ({result.n_samples} quasi-static) '
            f'against {config.urdf}\n\n')
    return result.status not in (FAIL, UNTESTABLE), head + result.table()


def payload_from_samples(model, t, q, tau, markers, window, frame, noise=None):
    """A payload at ``frame`` from the last ``window`` s of samples, the arm model frozen.

    identification.payload.identify_payload_samples on ``model`` (a full model: any
    motion, filtered like its fit; a gravity model: sweep pairs, else holds and slow
    motion), with the markers of that window.

    Returns
    -------
    (PayloadFit, str)
        The fit, and its JSON (``mass, com, frame, mass_std, com_std, samples`` and
        ``inertia`` when identified): the reply of ``~/identify_payload``.

    Raises
    ------
    DataError
        No samples, or none that identify it (the reason says which).
    """
    if len(t) == 0:
        raise DataError('no data: no joint_torques samples received; move the arm with '
                        'the payload attached while the recorder runs')
    t = np.asarray(t, dtype=float)
    recent = t >= t[-1] - window
    t, q, tau = t[recent], np.asarray(q)[recent], np.asarray(tau)[recent]
    markers = [m for m in markers if m.get('t', -np.inf) >= t[0] - 1.0]
    keep = moving_forward(t)
    try:
        fit = identify_payload_samples(model, t[keep], q[keep], tau[keep],
                                       markers=markers or None, noise=noise, frame=frame)
    except (DataError, JointNameError, ValueError) as exc:
        raise DataError(f'payload not identified from {len(t)} samples: {exc}') from exc
    doc = {'mass': fit.payload.mass, 'com': list(fit.payload.com), 'frame': frame,
           'mass_std': float(fit.std_errors[0]),
           'com_std': [float(x) for x in fit.com_std_errors], 'samples': int(len(t))}
    inertia = getattr(fit.payload, 'inertia', None)
    if inertia is not None:
        doc['inertia'] = np.asarray(inertia, dtype=float).tolist()
    return fit, json.dumps(doc)
