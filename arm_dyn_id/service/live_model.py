"""The model the identifier serves while the arm works, without ROS.

identifier_node (nodes/identifier_node.py) turns messages into calls and results into
messages; what happens in between lives here:

- the served objects (:class:`~arm_dyn_id.service.gravity.ServedModel`, a full model's
  :class:`~arm_dyn_id.service.dynamics.ServedDynamics` and its joint_states
  :class:`~arm_dyn_id.service.dynamics.ResidualStream`), swapped in as one reference
  each so that the 1 kHz path takes no lock to find them. The stream and the queries
  evaluate them on one thread (they share a full model's pinocchio data): the node's
  1 kHz thread. Queries answered on a thread of their own starved the stream
  (docs/identifier.md, "Threads and executors");
- friction drift (:class:`LiveFriction`): the tracker of the served model's residual
  stream, the versions it serves, friction_drift.yaml, rollback.

- the payload watch (:class:`LiveWatch`): arm_dyn_id.service.payload_watch fed with the
  stream's residual; what it decides is published, and an applied (or reverted) payload
  comes back as a new model through :meth:`LiveModel.install`.

:func:`build_served` makes what :meth:`LiveModel.install` swaps in, from a model, the
gravity and payload served and the residual's settings (:class:`ResidualSettings`).
"""

import concurrent.futures
import threading
from dataclasses import dataclass

import numpy as np

from arm_dyn_id.data.joint_states import Rejection
from arm_dyn_id.data.motor import effort_reading
from arm_dyn_id.errors import ConfigError, JointNameError
from arm_dyn_id.identification.payload import arm_model_error
from arm_dyn_id.service.contact import calibrated_thresholds
from arm_dyn_id.service.dynamics import (
    ResidualStream, ServedDynamics, answer_dynamics_query, is_full)
from arm_dyn_id.service.friction_drift import FrictionTracker, model_id, save_state
from arm_dyn_id.service.gravity import ServedModel, answer_query
from arm_dyn_id.service.payload_watch import APPLIED, REVERTED, PayloadWatch

NO_MODEL_STATUS = 'no full-dynamics model'


@dataclass(frozen=True)
class ResidualSettings:
    """The joint_states residual of a full model (the identifier's parameters of the same
    names): ``on``; ``effort`` ('auto', 'current', 'torque') and ``config`` (an ArmConfig
    or None), what joint_states.effort carries; ``contact_thresholds`` (N·m, one or one
    per joint; all 0: the calibrated ones of the model's folder, when there are);
    ``observer_gains`` (1/s); ``max_gap`` (s); ``velocity_cutoff`` (Hz)."""

    on: bool = True
    effort: str = 'auto'
    config: object = None
    contact_thresholds: tuple = (0.0,)
    observer_gains: tuple = (25.0,)
    max_gap: float = 0.05
    velocity_cutoff: float = 20.0

    def stream(self, dynamics, model_file):
        """(ResidualStream or None, status line) for a served full model; ``model_file``:
        the model's file, whose folder may hold calibrated contact thresholds."""
        if not self.on:
            return None, 'off (parameter residual is false)'
        if not dynamics.fast.exact:
            return None, 'off: the model has no pinocchio equivalent (a massless body)'
        # the effort kind or config when given, else the model file's measurement
        try:
            reading = effort_reading(dynamics.joints, dynamics.model.measurement,
                                     effort=self.effort, config=self.config,
                                     model_joints=dynamics.model.joint_names)
        except (ConfigError, JointNameError) as exc:
            return None, f'off: {exc}'
        thresholds = np.asarray(self.contact_thresholds, dtype=float)
        thresholds = None if np.all(thresholds <= 0) else \
            np.where(thresholds > 0, thresholds, np.inf)
        # no thresholds given: the calibrated ones of the model's folder, when there are
        calibrated, why = (None, '') if thresholds is not None else calibrated_thresholds(
            model_file, dynamics.joints, self.observer_gains, dynamics.model)
        stream = ResidualStream(dynamics, self.observer_gains,
                                thresholds if calibrated is None else calibrated,
                                self.max_gap, self.velocity_cutoff,
                                torque_gains=reading.gains, offsets=reading.offsets)
        if calibrated is not None:
            what = f'contact by the calibrated thresholds {why}'
        elif thresholds is None:
            what = 'no contact flag' + (f' ({why})' if why else '')
        else:
            what = f'contact above {np.round(stream.observer.thresholds, 4).tolist()} N·m'
        return stream, f'on ({reading.describe()}; {what})'


def build_served(model, gravity, payload, residual=ResidualSettings(), model_file=''):
    """What serves ``model`` (what :meth:`LiveModel.install` takes): the gravity
    ServedModel and, for a full model, its ServedDynamics and the joint_states residual
    (pinocchio equivalent: ~0.1 s). ``gravity``: m/s^2 (0: the fit's); ``payload``: a
    Payload or None; ``model_file``: the model's file (its folder: contact thresholds)."""
    if is_full(model):
        dynamics = ServedDynamics(model, gravity, payload)
        served = ServedModel(model, gravity, payload, fast=dynamics.fast)
        stream, status = residual.stream(dynamics, model_file)
    else:
        served, dynamics, stream = ServedModel(model, gravity, payload), None, None
        status = 'off: a gravity model (the residual needs a full-dynamics model)'
    return {'served': served, 'dynamics': dynamics, 'residual': stream,
            'residual_status': status}


@dataclass
class StreamAnswer:
    """What one joint_states message gave (see :meth:`LiveModel.stream`).

    ``gravity``: (q, G(q)) or a Rejection, None without a model; ``residual``: the
    ResidualStream's (q, dq, model, external, contact) or a Rejection, None without a
    residual stream; ``served`` / ``stream``: the objects that answered (their joints
    name the values).
    """

    served: object
    stream: object
    gravity: object
    residual: object


class LiveFriction:
    """Friction drift while serving: a :class:`FrictionTracker` of the served model,
    the friction versions it serves, persisted and rolled back.

    Parameters
    ----------
    settings : TrackerSettings
    state_file : callable
        ``state_file()`` -> path of friction_drift.yaml beside the served model, or None
        when the model has no file (nothing is saved then).
    publish : callable
        ``publish(doc)``: the served friction's document (``~/friction``, JSON).
    log : callable
        ``log(level, text)`` with level 'info', 'warning' or 'error'.
    """

    def __init__(self, settings, state_file, publish, log):
        self.settings = settings
        self.state_file = state_file
        self.publish = publish
        self.log = log
        self.tracker = None     # FrictionTracker of the served full model
        self.stream = None      # the ResidualStream it feeds on
        self.save_errors = 0
        self._refusals = 0

    @property
    def status(self):
        return 'no residual yet' if self.tracker is None else self.tracker.status

    @property
    def version(self):
        return 0 if self.tracker is None else self.tracker.version

    def update(self, stream, served, t, dq, contact):
        """Feed the tracker one residual sample of ``stream``; returns the ServedDynamics
        to serve from now on (``served``, or a copy with the new friction version).
        The caller holds :attr:`LiveModel.friction_lock` (here and in :meth:`rollback`)."""
        if self.stream is not stream:      # a new model or a rebuild
            served = self._start(stream, served)
        tracker = self.tracker
        if tracker is None:
            return served
        update = tracker.update(t, dq, stream.observer.residual, contact)
        if update is not None:
            return self._serve(update, served)
        if tracker.refusals != self._refusals:
            self._refusals = tracker.refusals
            self.log('error', f'friction update {tracker.status}')
        return served

    def rollback(self, stream, served):
        """The version before the current one, served again: (success, message, served)."""
        tracker = self.tracker
        if tracker is None or self.stream is not stream:
            return False, ('no friction tracked yet: it starts with the first joint_states '
                           'of a full model'), served
        if tracker.version == 0:
            return False, 'already serving the fitted friction (version 0)', served
        was = tracker.version
        update = tracker.rollback()
        served = self._serve(update, served)
        return True, f'friction rolled back from version {was} to version {update.version}', \
            served

    def _start(self, stream, served):
        """A tracker for the stream's model; the same model keeps its tracker (a payload or
        gravity change rebuilds the stream), another one restores friction_drift.yaml."""
        self.stream = stream
        model = stream.observer.dynamics.model
        tracker = self.tracker
        if tracker is None or tracker.model_id != model_id(model):
            try:
                tracker = FrictionTracker(model, stream.observer.gains, self.settings,
                                          stream.observer.max_gap)
            except ValueError as exc:
                self.tracker = None
                self.log('error', f'friction tracking off for this model: {exc}')
                return served
            path = self.state_file()
            _, message = (None, 'no model file: the tracked friction is not saved') \
                if path is None else tracker.restore(path)
            self.log('info', f'friction tracking on (model {tracker.model_id}): {message}')
            self.tracker = tracker
            self._refusals = 0
        tracker.restart()       # the new stream's observer starts again too
        if tracker.version != 0:
            return self._serve(None, served, save=False)
        self.publish(self.document(None))
        return served

    def _serve(self, update, served, save=True):
        """The tracker's friction into the served dynamics and the residual stream (no
        rebuild: the rigid body and the observer state stay); the document, the file."""
        tracker, stream = self.tracker, self.stream
        dynamics = stream.observer.dynamics
        if served is not None and served.fast is dynamics:
            served = served.with_friction(tracker.phi)
            stream.serve(served)
        else:       # a stream of another served object: its observer only
            stream.serve(dynamics.with_friction(tracker.phi))
        self.publish(self.document(update))
        path = self.state_file()
        if save and path is not None:
            # disk I/O off the 1 kHz path
            threading.Thread(target=self._save, args=(tracker.to_dict(), path), daemon=True,
                             name='friction-save').start()
        return served

    def _save(self, state, path):
        try:
            save_state(state, path)
        except OSError as exc:
            self.save_errors += 1
            self.log('error', f'could not write {path}: {exc}')

    def document(self, update):
        """The served friction's version, values and status (``~/friction``)."""
        tracker = self.tracker
        return {'version': tracker.version, 'model_id': tracker.model_id,
                'stamp': None if update is None or not np.isfinite(update.stamp)
                else update.stamp, 'reason': 'restored' if update is None else update.reason,
                'joints': list(tracker.joints), 'status': tracker.status,
                **{k: np.round(v, 6).tolist() for k, v in tracker.table().items()}}


class LiveWatch:
    """A payload picked up or put down while the arm works (service.payload_watch), on
    the served model's residual stream.

    Parameters
    ----------
    settings : WatchSettings
    frame : str
        Where the payload sits (a URDF frame).
    baseline : Payload or None
        What a put-down reverts to (the payload served at start).
    noise : array_like or None
        The torque noise per joint (N·m), as configured.
    publish : callable
        ``publish(event_dict)``: every event (``~/payload_events``, JSON).
    apply : callable
        ``apply(event)`` for an applied or reverted event: serves its payload (rebuilds the
        served model, ~0.1 s); called in a thread of its own, in the events' order.
    log : callable
        ``log(level, text)``.
    """

    def __init__(self, settings, frame, baseline, noise, publish, apply, log):
        self.settings = settings
        self.frame = frame
        self.baseline = baseline
        self.noise = noise
        self.publish = publish
        self.apply = apply
        self.log = log
        self.watch = None       # PayloadWatch, made at the first residual
        self.off = ''           # why the watch stopped, '' while it runs
        self._pool = None       # applies the events, in order

    @property
    def status(self):
        watch = self.watch
        if self.off:
            return f'off: {self.off}'
        if watch is None:
            return 'no residual yet'
        applied = ' (applied)' if watch.applied else ''
        return f'{watch.state} {watch.object[0]:.4g} kg{applied}, tare {watch.tare[0]:.3g} kg'

    def update(self, stream, t, q, dq, external, contact):
        """Feed the watch one residual sample of ``stream``; publish (and apply) what it
        decides. A payload frame the URDF does not have turns the watch off (logged)."""
        if self.off:
            return
        dynamics = stream.observer.dynamics
        try:
            if self.watch is None:
                self.watch = PayloadWatch(
                    dynamics.model.robot, self.settings, self.frame, self.baseline,
                    say=lambda text: self.log('info', text),
                    warn=lambda text: self.log('warning', text), noise=self.noise,
                    model_error=arm_model_error(dynamics.model))
            events = self.watch.update(t, q, dq, external, contact, dynamics.payload)
        except (ValueError, JointNameError) as exc:
            self.off = str(exc)
            self.log('error', f'payload watch off: {exc}')
            return
        for event in events:
            self.publish(event.to_dict())
            if event.kind in (APPLIED, REVERTED):
                # not on the 1 kHz path; one thread, so an apply and a revert keep their order
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix='payload-watch')
                self._pool.submit(self.apply, event)

    def shutdown(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class LiveModel:
    """The served model, its residual stream and friction drift (module docstring).

    Parameters
    ----------
    friction : LiveFriction, optional
        None: friction_tracking off.
    watch : LiveWatch, optional
        None: payload_watch off.
    """

    def __init__(self, friction=None, watch=None):
        self.served = None          # ServedModel, None before the first model
        self.dynamics = None        # ServedDynamics of a full model, else None
        self.residual = None        # ResidualStream of joint_states, else None
        self.residual_status = NO_MODEL_STATUS
        self.friction = friction
        self.watch = watch
        self._same_joints = False
        # friction versions: stream thread vs rollback and install (services, fits)
        self.friction_lock = threading.Lock()

    def install(self, built):
        """Swap in what serves a new model: a dict with ``served``, ``dynamics``,
        ``residual``, ``residual_status`` (each one reference: the 1 kHz path takes no
        lock to find them; ``served`` last, the one the stream looks at first)."""
        with self.friction_lock:
            self.dynamics = built['dynamics']
            self.residual = built['residual']
            self.residual_status = built['residual_status']
            # the stream's checked positions serve G(q) too when both have the same joints
            self._same_joints = self.residual is not None and \
                list(self.residual.joints) == list(built['served'].joints)
            self.served = built['served']

    def stream(self, names, t, position, velocity, effort):
        """One joint_states message (stamp ``t`` s): G(q) and, with a residual stream,
        the momentum-observer residual; friction drift follows. A :class:`StreamAnswer`."""
        served, stream = self.served, self.residual
        if served is None:
            return StreamAnswer(None, None, None, None)
        residual = None if stream is None else stream.update(names, t, position, velocity,
                                                             effort)
        accepted = residual is not None and not isinstance(residual, Rejection)
        if accepted and self._same_joints and stream is self.residual:
            gravity = residual[0], served.fast.torques(residual[0])     # checked once
        else:
            gravity = served.stream(names, position)
        if accepted:
            q, dq, _, external, contact = residual
            if self.friction is not None:
                with self.friction_lock:
                    self.dynamics = self.friction.update(stream, self.dynamics, t, dq, contact)
            if self.watch is not None:
                self.watch.update(stream, t, q, dq, external, contact)
        return StreamAnswer(served, stream, gravity, residual)

    def query(self, names, position):
        """(served, answer): answer_query on the served model (a Rejection when none)."""
        served = self.served
        return served, answer_query(served, names, position)

    def dynamics_query(self, names, position, velocity, acceleration):
        """(served dynamics, answer): answer_dynamics_query on the served full model."""
        served = self.dynamics
        return served, answer_dynamics_query(served, names, position, velocity, acceleration)

    def rollback_friction(self):
        """Serve the friction version before the current one again; (success, message)."""
        if self.friction is None:
            return False, 'friction_tracking is false: there is nothing to roll back'
        with self.friction_lock:
            ok, message, self.dynamics = self.friction.rollback(self.residual, self.dynamics)
        return ok, message
