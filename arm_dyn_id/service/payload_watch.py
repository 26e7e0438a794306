"""Following a payload picked up or put down while the arm works (issue 24 item 5).

:class:`PayloadWatch` is fed, for every joint_states message, the momentum-observer
residual of the served model (:class:`~arm_dyn_id.service.dynamics.ResidualStream`,
the external torque estimate) with q, q̇ and the contact flag. A load at the flange
adds ``−P(q) θ`` to that residual (r is the external torque acting on the arm), ``P``
the payload regressor of :func:`arm_dyn_id.identification.payload.payload_regressor` and
``θ = (m, m·c)``
(the arm model frozen, gravity part: the inertial part of a gripped load is small in
normal motion and is left in the residual as noise). The residual is relative to the
served model, which may already carry a payload ``θ_s``; the watch works on the whole
flange load ``y = −r + P_s(q) θ_s``, so applying a payload does not disturb it.

Every ``fit_period`` s, a weighted least-squares fit of θ on a window of the samples
(kept every ``sample_period`` s) gives the load; the object is that load minus the
configured (baseline) payload and the tare.

**The tare.** An imperfect arm model leaves an error that partly looks like a load at
the flange: on the simulated arm of the next paragraph its 8 s fits find -0.26 to +0.21 kg
with nothing held, and much the same offset (within 0.1 kg) while it holds 2 kg. The
mean (m, m·c) of the steady fits made while nothing is held (those of the null, below;
the longest fit length with ``NULL_FITS`` of them) is the tare: the arm's, not a load
(with a load held, the error of the load's own estimate would mix in). The object and
the null are taken relative to it. A tare of ``enter_mass`` or more is logged: the arm
model wants a refit, or a load held since the start is not configured (the tare cannot
tell the two apart; configure the load as the baseline payload).

**Standard errors that hold on an imperfect arm model.** The residual is not white: the
observer low-passes it, and the served arm model's own error (friction that drifted,
link parameters a few per cent off, torque constants, slow offsets) depends on the poses
and varies slowly. Over a 1 s window that error is a bias the fit cannot see, and the
white (or short-block) standard error understates the spread of the mass by 3-4x on a
simulated arm with such a model (``sim.pick_and_place.realistic_pick_and_place``). So the
mass's standard error is the largest of:

* the batch-means sandwich over ten blocks of the span (>= 0.1 s), widened by
  ``max(1, 2 τ / block)``: blocks shorter than the residual's correlation time τ are not
  independent (the effective number of samples of a correlated series). τ is the
  integrated autocorrelation time of the mass's influence series, measured by blocking
  (:func:`correlation_time`) on at least ``CORRELATION_SPAN`` s of steady samples (no
  candidate, no change), ``CORRELATION_PRIOR`` until measured; plus the white-noise term
  (directions the window does not excite, an arm at rest) and, when given, the arm model's
  held-out error;
* **the null**: the RMS deviation from the load believed (and the tare) of the watch's
  own fits of that length while nothing changed (every fit length, every fit counted once
  as long again has passed with no event: false starts included, or the null would be the
  quiet times only; forgotten beyond ``NULL_KEEP`` fits). It holds what no within-window estimate
  sees: the pose-dependent bias. Beyond the longest length measured, L, it is scaled by
  sqrt(L / span). No candidate starts before the null of the shortest fit is known
  (``NULL_FITS`` fits: ~5 s of work after a start).

**Fits that grow until precise.** The watch fits the last ``window`` s, then 2x, 4x, ...
up to ``max_window`` s (never across the last change), until the mass's standard error
is at most ``exit_mass / 2``. An event's fit uses the samples since its candidate began,
up to ``max_window`` s of them, so it waits as long as the arm model needs (the delay is
what the standard error asks, at most ``max_window`` s after the candidate began; after
that the candidate is held back, logged, until it is dropped).

Decisions, each with hysteresis:

* **candidate** — with no object: a fit's object mass >= ``enter_mass`` and at least
  ``SIGNIFICANCE`` standard errors starts a *picked_up* candidate. With one of mass m_o:
  |fitted − m_o| >= ``enter_mass`` (or fitted < ``exit_mass``), also significant, starts
  a change candidate. It is judged on its samples since it began: dropped when that fit
  is precise (standard error <= ``exit_mass / 2``) and back in the band (< ``exit_mass``
  from the belief); started again from now when that fit is not a flange load (a) or (b)
  and a new change is seen (a change after a false start would never be sustained).
* **event** — a candidate older than ``support`` s whose fit on the samples since it began
  is (a) explained: the fitted load removes at least ``min_explained`` of the offset's
  weighted energy ``Σ w (y − P θ_now)²``; (b) sustained: fitted alone on each third of the
  window, the load's scale ``s_k = <Pθ̂, y>_k / <Pθ̂, Pθ̂>_k`` is within
  ``1 ± sustain_tolerance`` of the whole window's; (c) precise: standard error of the mass
  <= ``max_mass_std`` (not for a put-down: it serves no estimate) and <=
  ``max_relative_std`` x the mass change. It is *put_down* when
  the mass is below ``exit_mass`` or below ``SIGNIFICANCE`` standard errors (a load not
  told from none), else *picked_up* / *changed*; emitted with mass, CoM, standard errors
  and time.
* **apply** (``apply`` True) — a picked_up / changed event is applied ``confirm`` s later
  if the fits since still see that load (within ``exit_mass``), refitted on everything
  since the candidate began; a put_down reverts at once to the baseline (a payload
  served that the arm no longer holds pushes the arm: the safe side is to drop it fast).
  An event the fits did not confirm is tried again when the fit on everything since its
  candidate began (up to ``max_window`` s), judged as the event was (against the object
  believed before it: explained, sustained, precise), has at most ``RETRY_GAIN`` times the
  standard error of the failed confirmation (more poses seen: at most a few tries before
  the fits reach ``max_window``): the load believed becomes that fit's and it goes
  through the confirmation window again (logged ``retry``). Without it, a load announced
  but never confirmed was believed and never served.

**A push is not a load.** A person pushing the arm gives a brief residual excursion.
It cannot become an event: it must last ``support`` s, and a 1 s window holding a push
shorter than ~0.8 s has a third where the load's scale is far from the window's (not
sustained). A push is also not a constant force at the flange across different poses,
so the flange load leaves much of it unexplained. Contact-flagged episodes shorter than
``support`` s are taken as pushes: their samples (and 0.1 s after, the observer
settling) are left out of the fits and a candidate that saw them starts again. Longer
contact episodes are kept: a load heavy enough also trips the contact thresholds.
"""

from collections import deque
from dataclasses import dataclass, fields

import numpy as np

from arm_dyn_id.identification.payload import (
    model_error_covariance, payload_full_regressor, payload_regressor)
from arm_dyn_id.model.robot import Payload

#: event kinds, as published (``event`` of the JSON body)
PICKED_UP, PUT_DOWN, CHANGED, APPLIED, REVERTED = (
    'picked_up', 'put_down', 'changed', 'applied', 'reverted')
BLOCK = 0.1          # s, the blocks of the batch-means covariance
SETTLE = 0.1         # s left out after a push (the observer's residual decays)
#: s, correlation time of the residual assumed until the watch has measured it
CORRELATION_PRIOR = 1.0
#: s of steady state (no candidate, no change) the correlation time is measured on, at least
CORRELATION_SPAN = 8.0
#: s of stream time between two measurements of the correlation time
CORRELATION_PERIOD = 1.0
#: a candidate's change of mass is at least this many standard errors
SIGNIFICANCE = 3.0
#: steady fits of a length before their spread counts in the standard error
NULL_FITS = 20
#: steady fits of a length the null remembers (exponential forgetting beyond)
NULL_KEEP = 600
#: s after the first sample (a start or restart: the observer and the arm settling) whose
#: fits do not count in the null
STARTUP = 1.0
#: the arm model's own error is taken as independent between blocks this long (s)
MODEL_ERROR_SECONDS = 1.0
#: an unconfirmed event is tried again once the fit since its candidate began has at most
#: this times the standard error of the failed confirmation (about twice the samples)
RETRY_GAIN = 0.7


@dataclass(frozen=True)
class WatchSettings:
    """How the watch decides (SI units; defaults for a 1 kHz stream and a 1 kg load).

    Attributes
    ----------
    window : float
        s of motion of the shortest fit; the watch's fit grows (doubling) up to
        ``max_window`` until its mass standard error is at most ``exit_mass / 2``.
    support : float
        s a candidate must last before its event.
    confirm : float
        s after a picked_up / changed event before it is applied.
    enter_mass, exit_mass : float
        kg, the hysteresis of a mass change (enter > exit > 0).
    max_mass_std : float
        kg, largest standard error of the mass that may make an event.
    max_relative_std : float
        Largest standard error of the mass over the mass change.
    min_explained : float
        Fraction (0-1) of the offset's weighted energy the flange load must explain.
    sustain_tolerance : float
        Largest relative difference of the load's scale on a third of the window.
    sample_period, fit_period : float
        s between samples kept and between fits.
    apply : bool
        Emit ``applied`` / ``reverted`` (the node then serves the payload).
    max_window : float
        s, the longest fit: the watch's fit and an event's fit (on the samples since its
        candidate began) never use more. An event is decided at most ``max_window`` s after
        its candidate began, or held back.
    """

    window: float = 1.0
    support: float = 0.8
    confirm: float = 0.5
    enter_mass: float = 0.3
    exit_mass: float = 0.15
    max_mass_std: float = 0.1
    max_relative_std: float = 0.1
    min_explained: float = 0.6
    sustain_tolerance: float = 0.3
    sample_period: float = 0.02
    fit_period: float = 0.1
    apply: bool = False
    max_window: float = 30.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != 'apply' and not (np.isfinite(value) and value > 0):
                raise ValueError(f'payload watch: {f.name} = {value} must be > 0')
        if not self.exit_mass < self.enter_mass:
            raise ValueError(f'payload watch: exit_mass {self.exit_mass} kg must be below '
                             f'enter_mass {self.enter_mass} kg (the hysteresis)')
        if not self.min_explained < 1:
            raise ValueError(f'payload watch: min_explained {self.min_explained} must be < 1')
        if self.window < 3 * BLOCK or self.sample_period * 10 > self.window:
            raise ValueError(f'payload watch: window {self.window} s must be >= {3 * BLOCK} s '
                             f'and hold >= 10 samples of sample_period {self.sample_period} s')
        if not self.max_window >= self.window:
            raise ValueError(f'payload watch: max_window {self.max_window} s must be >= '
                             f'window {self.window} s')


@dataclass(frozen=True)
class WatchFit:
    """One fit of the flange load on a window.

    Attributes
    ----------
    t : float
        Stamp of its last sample (s).
    theta, std_errors : ndarray, (4,)
        Whole flange load (m, m·cx, m·cy, m·cz) (kg, kg·m) and standard errors.
    mass, mass_std : float
        Object mass (whole load minus baseline, kg) and its standard error.
    com, com_std : ndarray, (3,)
        Object centre of mass in the frame (m) and first-order standard errors.
    explained : float
        Fraction of the offset's energy (against the current belief) the fit removes.
    scales : ndarray, (3,)
        The load's scale on each third of the window (1: sustained).
    samples : int
    span : float
        s from its first sample to its last.
    correlation : float
        s, the residual's correlation time its standard errors were widened for.
    """

    t: float
    theta: np.ndarray
    std_errors: np.ndarray
    mass: float
    mass_std: float
    com: np.ndarray
    com_std: np.ndarray
    explained: float
    scales: np.ndarray
    samples: int
    span: float = 0.0
    correlation: float = 0.0


@dataclass(frozen=True)
class PayloadEvent:
    """What the watch decided.

    Attributes
    ----------
    kind : str
        ``picked_up``, ``put_down``, ``changed``, ``applied`` or ``reverted``.
    t : float
        Stamp (s) of the last sample of the deciding fit.
    mass, com, mass_std, com_std
        The object (kg, m in ``frame``; 0 and zeros for put_down).
    frame : str
    payload : Payload or None
        What the model should serve now: baseline + object (None: no payload).
    since : float
        When the candidate started (s).
    explained : float
        Fraction of the offset the deciding fit explained.
    samples : int
        Samples of the deciding fit.
    """

    kind: str
    t: float
    mass: float
    com: tuple
    mass_std: float
    com_std: tuple
    frame: str
    payload: object
    since: float
    explained: float
    samples: int

    def to_dict(self):
        """The JSON body published on ``~/payload_events`` (docs/identifier.md)."""
        p = self.payload
        return {'event': self.kind, 'stamp': self.t, 'since': self.since,
                'mass': self.mass, 'mass_std': self.mass_std, 'com': list(self.com),
                'com_std': list(self.com_std), 'frame': self.frame,
                'explained': self.explained, 'samples': self.samples,
                'served_mass': 0.0 if p is None else float(p.mass),
                'served_com': [0.0, 0.0, 0.0] if p is None else [float(c) for c in p.com]}


def _theta(payload):
    if payload is None or not payload.mass > 0:
        return np.zeros(4)
    return float(payload.mass) * np.concatenate([[1.0], np.asarray(payload.com, dtype=float)])


class PayloadWatch:
    """Follow the flange load in a residual stream (module notes).

    Parameters
    ----------
    robot : RobotModel
        The arm model's kinematics and gravity (frozen).
    settings : WatchSettings, optional
    frame : str
        Payload frame (checked by :func:`payload_regressor` at the first sample).
    baseline : Payload, optional
        The configured payload (a gripper): the object is the load beyond it, and a
        put-down reverts to it. In ``frame``.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights; equal weights when None.
    model_error : array_like, (n,), optional
        The arm model's own error per joint (N·m, its held-out RMSE): it looks like a load
        over a short window, and enters the standard errors as in
        :func:`~arm_dyn_id.identification.payload.model_error_covariance`, correlated over
        ``MODEL_ERROR_SECONDS`` blocks. None or NaN: not counted.
    say : callable, optional
        ``say(text)`` hears every decision with its numbers (the node's logger).
    warn : callable, optional
        ``warn(text)`` hears what wants a person's attention (a large tare); ``say`` when
        None.

    Attributes
    ----------
    state : str
        ``empty`` or ``loaded``.
    object : ndarray, (4,)
        The object's (m, m·c) believed now.
    applied : bool
        Whether the object is applied (served).
    fits : deque of WatchFit
        The latest fits (for benchmarks and diagnostics).
    decisions : list of dict
        Every decision logged (kind, t, numbers).
    """

    def __init__(self, robot, settings=None, frame='flange', baseline=None, noise=None,
                 model_error=None, say=None, warn=None):
        self.robot = robot
        self.settings = settings or WatchSettings()
        self.frame = frame
        if baseline is not None and baseline.mass > 0 and baseline.frame != frame:
            raise ValueError(f'payload watch: baseline payload in {baseline.frame!r}, the '
                             f'watch in {frame!r}: give both in one frame')
        self.baseline = baseline if baseline is not None and baseline.mass > 0 else None
        self._base = _theta(self.baseline)
        n = robot.n_joints
        self._noise = None if noise is None else np.maximum(np.asarray(noise, dtype=float),
                                                            1e-9)
        self._w = np.ones(n) if noise is None else 1.0 / self._noise ** 2
        error = None if model_error is None else np.asarray(model_error, dtype=float)
        self._model_error = error if error is not None and np.any(
            np.isfinite(error) & (error > 0)) else None
        self._say = say or (lambda text: None)
        self._warn = warn or self._say
        s = self.settings
        # the samples whose q̈ is not known yet: [t, q, dq, r, served θ, served frame, P, y]
        self._records = deque(maxlen=int(np.ceil(s.fit_period / s.sample_period)) + 8)
        # the regressed samples of the longest fit: t, P (M, n, 4), y (M, n)
        self._keep = int(np.ceil((s.max_window + s.confirm + s.support) / s.sample_period)) + 4
        self._t = np.empty(2 * self._keep)
        self._P = np.empty((2 * self._keep, n, 4))
        self._y = np.empty((2 * self._keep, n))
        self._rows = 0
        #: s, the residual's correlation time (measured in steady state; module notes)
        self.correlation_time = CORRELATION_PRIOR
        self._correlation_span = 0.0
        # the watch's fit lengths, and what their fits do while nothing changes (the
        # null): [sum of squared mass deviations from the load believed, count, sum of the
        # mass deviations] per length
        self._levels = [s.window]
        while self._levels[-1] < s.max_window:
            self._levels.append(min(2.0 * self._levels[-1], s.max_window))
        self._null = np.zeros((len(self._levels), 3))
        # the null's fits made with nothing held: [count, sum of (m, m·c)]; their mean is
        # the tare (with a load held, the object's own error would mix in)
        self._empty = np.zeros((len(self._levels), 5))
        #: (m, m·c) the steady fits find with the load believed taken out: the arm model's
        #: error seen as a flange load (module notes, "The tare")
        self.tare = np.zeros(4)
        self._tare_warned = False
        self._unsure = deque()
        self._steady_since = -np.inf
        self._next_correlation = -np.inf
        self._first = np.inf
        self._served = None
        self._served_theta = np.zeros(4)
        self._served_frame = frame
        self._last_kept = -np.inf
        self._next_fit = -np.inf
        self._contact_since = None
        self._push_until = -np.inf
        self._push_from = np.inf
        self.state = 'empty'
        self.object = np.zeros(4)
        self.applied = False
        self._candidate = None          # (kind, since)
        self._pending = None            # (event, apply at)
        self._unconfirmed = None        # (event, standard error of the failed confirmation)
        self._prior = np.zeros(4)       # the object believed before the last event
        self._held = ''
        self.fits = deque(maxlen=200)
        self.decisions = []
        self.events = []

    # -- samples ------------------------------------------------------------------
    def reset(self):
        """Forget the samples (a stream restart); the belief stays."""
        self._records.clear()
        self._rows = 0
        self._last_kept = self._next_fit = -np.inf
        self._candidate = None
        self._unconfirmed = None
        self._steady_since = -np.inf
        self._first = np.inf

    def update(self, t, q, dq, residual, contact=False, served=None):
        """One sample in; the events it decided (usually none).

        Parameters
        ----------
        t : float
            Stamp (s).
        q : ndarray, (n,)
            rad, model order.
        dq : ndarray, (n,) or None
            rad/s (the stream's, measured or estimated); None: the load's gravity only.
        residual : ndarray, (n,)
            External torque estimate of the served model (N·m).
        contact : bool
            The stream's contact flag.
        served : Payload or None
            The payload the model that gave ``residual`` serves.

        Returns
        -------
        list of PayloadEvent
        """
        s = self.settings
        if t < self._last_kept:             # stamps went back (a replay): start again
            self.reset()
        self._contact(t, contact)
        if t - self._last_kept < 0.999 * s.sample_period:
            return []
        if served is not self._served:
            self._served = served
            self._served_theta = _theta(served)
            self._served_frame = served.frame if served is not None else self.frame
        self._last_kept = t
        self._first = min(self._first, t)
        self._records.append([t, np.array(q, dtype=float),
                              None if dq is None else np.array(dq, dtype=float),
                              np.array(residual, dtype=float), self._served_theta,
                              self._served_frame, None, None])
        if t < self._next_fit:
            return []
        self._next_fit = t + s.fit_period
        return self._decide(t)

    def _contact(self, t, contact):
        """Contact episodes shorter than ``support`` are pushes: left out, candidate reset."""
        if contact and self._contact_since is None:
            self._contact_since = t
        elif not contact and self._contact_since is not None:
            length = t - self._contact_since
            if length < self.settings.support:
                self._push_until = t + SETTLE
                self._push_from = self._contact_since
                self._log('push', t, f'contact for {length:.2f} s (< support '
                          f'{self.settings.support} s): a push, not a load; its samples are '
                          'left out', length=length)
                if self._candidate is not None:
                    self._drop(t, 'a push during its support')
            self._contact_since = None

    # -- fits ---------------------------------------------------------------------
    def _regress(self):
        """P and y of the samples whose q̈ is now known (central difference of q̇)."""
        recs = self._records
        todo = []
        for i in range(len(recs) - 2, -1, -1):
            if recs[i][6] is not None:
                break
            todo.append(i)
        if not todo:
            return
        todo.reverse()
        n = len(recs[0][1])
        q = np.array([recs[i][1] for i in todo])
        dq = np.zeros((len(todo), n))
        ddq = np.zeros((len(todo), n))
        full = np.zeros(len(todo), dtype=bool)
        for k, i in enumerate(todo):
            a, b = recs[max(i - 1, 0)], recs[i + 1]
            if recs[i][2] is None or a[2] is None or b[2] is None or \
                    b[0] - a[0] > 5 * self.settings.sample_period:
                continue
            dq[k], ddq[k], full[k] = recs[i][2], (b[2] - a[2]) / (b[0] - a[0]), True
        # the load's whole inverse dynamics (mass and first moment: the first four of its
        # ten parameters) where q̇ and q̈ are known, else its gravity
        P = payload_full_regressor(self.robot, q, dq, ddq, self.frame)[..., :4] \
            if full.any() else np.empty((len(todo), n, 4))
        if not full.all():
            P[~full] = payload_regressor(self.robot, q[~full], self.frame)
        for k, i in enumerate(todo):
            rec = recs[i]
            # the observer's r is the external torque on the arm: a load adds -P θ
            y = -rec[3]
            if rec[4][0] > 0:
                Ps = P[k] if rec[5] == self.frame else \
                    payload_regressor(self.robot, rec[1], rec[5])[0]
                y = y + Ps @ rec[4]
            rec[6], rec[7] = P[k], y
            self._push_row(rec[0], P[k], y)

    def _push_row(self, t, P, y):
        if self._rows == len(self._t):          # full: keep the newest _keep rows
            k = self._keep
            for a in (self._t, self._P, self._y):
                a[:k] = a[self._rows - k:self._rows]
            self._rows = k
        self._t[self._rows], self._P[self._rows], self._y[self._rows] = t, P, y
        self._rows += 1

    def _samples(self, start, end):
        """t, P, y of the regressed samples in [start, end] (pushes left out)."""
        m = self._rows
        t = self._t[:m]
        lo, hi = np.searchsorted(t, start, 'left'), np.searchsorted(t, end, 'right')
        t, P, y = t[lo:hi], self._P[lo:hi], self._y[lo:hi]
        if np.isfinite(self._push_until):
            keep = ~((t >= self._push_from - SETTLE) & (t <= self._push_until))
            t, P, y = t[keep], P[keep], y[keep]
        return t, P, y

    def fit(self, start, end=None):
        """WatchFit of the samples in [start, end] (pushes left out), or None (too few)."""
        self._regress()
        if not self._rows:
            return None
        end = self._t[self._rows - 1] if end is None else end
        t, P, y = self._samples(start, end)          # (M,), (M, n, 4), (M, n)
        need = 0.6 * (end - start) / self.settings.sample_period
        if len(t) < max(10, need):
            return None
        w = self._w
        A = np.einsum('mjp,j,mjq->pq', P, w, P)
        b = np.einsum('mjp,j,mj->p', P, w, y)
        scale = np.sqrt(np.maximum(np.diag(A), 1e-300))
        inv = np.linalg.pinv(A / np.outer(scale, scale), rcond=1e-8) / np.outer(scale, scale)
        theta = inv @ b
        e = y - P @ theta
        # batch means: score sums over blocks of a tenth of the span (>= 0.1 s), independent
        # between blocks (the observer's low-pass, the arm model's slow error)
        block = max(BLOCK, (t[-1] - t[0]) / 10)
        blocks = np.floor((t - t[0]) / block).astype(int)
        nb = blocks[-1] + 1
        scores = np.zeros((nb, 4))
        np.add.at(scores, blocks, np.einsum('mjp,j,mj->mp', P, w, e))
        used = np.count_nonzero(np.any(scores != 0, axis=1))
        # blocks shorter than the residual's correlation time are not independent: the
        # variance of their sum is 2 τ / block times what batch means gives (the effective
        # number of samples of a correlated series; module notes)
        widen = max(1.0, 2.0 * self.correlation_time / block)
        cov = inv @ (scores.T @ scores) @ inv * used / max(used - 4, 1) * widen
        span = t[-1] - t[0]
        # plus the white-noise term: the sandwich has no variance along directions the
        # window does not excite (an arm at rest: m against the vertical CoM)
        dof = max(e.size - 4, 1)
        cov += inv * float(np.einsum('mj,j,mj->', e, w, e)) / dof
        if self._model_error is not None:
            cov += model_error_covariance(P, self._noise, self._model_error, max(1, int(round(
                (t[-1] - t[0]) / MODEL_ERROR_SECONDS))))
        std = np.sqrt(np.clip(np.diag(cov), 0, None))
        # never more precise than fits of that length were while nothing changed: the arm
        # model's error depends on the poses, and over a short window it is a bias no
        # within-window estimate sees (the null of the longest length not above the span)
        null = self.null_std(span)
        if null > std[0]:
            std[0] = null
            cov[0, 0] = null ** 2
        belief = self._base + self.object + self.tare
        e0 = y - P @ belief
        E0 = float(np.einsum('mj,j,mj->', e0, w, e0))
        E1 = float(np.einsum('mj,j,mj->', e, w, e))
        explained = 1.0 - E1 / E0 if E0 > 0 else 0.0
        # the load's scale on each third: a constant flange load fits every third
        change = P @ (theta - belief)
        scales = np.full(3, np.nan)
        for k, rows in enumerate(np.array_split(np.arange(len(t)), 3)):
            num = np.einsum('mj,j,mj->', change[rows], w, (y - P @ belief)[rows])
            den = np.einsum('mj,j,mj->', change[rows], w, change[rows])
            scales[k] = num / den if den > 0 else np.nan
        obj = theta - self._base - self.tare
        mass = float(obj[0])
        com, com_std = np.zeros(3), np.full(3, np.inf)
        if abs(mass) > 1e-9:
            com = obj[1:] / mass
            J = np.zeros((3, 4))
            J[:, 0] = -obj[1:] / mass ** 2
            J[:, 1:] = np.eye(3) / mass
            com_std = np.sqrt(np.clip(np.diag(J @ cov @ J.T), 0, None))
        return WatchFit(t=float(t[-1]), theta=theta, std_errors=std, mass=mass,
                        mass_std=float(std[0]), com=com, com_std=com_std,
                        explained=float(explained), scales=scales, samples=int(len(t)),
                        span=float(t[-1] - t[0]), correlation=self.correlation_time)

    def null_std(self, span):
        """RMS deviation (kg) of the watch's steady fits (no candidate, nothing changed
        within them) from the load believed plus the tare, for the longest fit length not
        above ``span`` s (the shortest when ``span`` is shorter) with at least ``NULL_FITS``
        of them; 0 when none has. Beyond the longest length measured, L, its RMS times
        sqrt(L / span)."""
        ok = np.nonzero(self._null[:, 1] >= NULL_FITS)[0]
        if not len(ok):
            return 0.0
        # shorter than the shortest: as the shortest (a shorter fit is no more precise)
        below = [k for k in ok if self._levels[k] <= span * 1.0001 + 1e-9]
        k = below[-1] if below else ok[0]
        squares, count, deviation = self._null[k, 0], self._null[k, 1], self._null[k, 2]
        tare = float(self.tare[0])
        # about the tare: E[(d - tare)²] = E[d²] - 2 tare E[d] + tare²
        rms = float(np.sqrt(max((squares - 2.0 * tare * deviation) / count + tare ** 2,
                                0.0)))
        # longer than every length measured: as independent fits of that length
        return rms * np.sqrt(self._levels[k] / span) if k == ok[-1] and \
            span > self._levels[k] else rms

    def _measure_correlation(self, t):
        """The residual's correlation time, measured on the steady samples (no candidate, no
        pending event, no change) of the last ``max_window`` s, at least ``CORRELATION_SPAN``
        s of them: the integrated autocorrelation time of the mass's influence series
        (by blocking). A load change inside would look like a long correlation, hence steady
        samples only; until measured, ``CORRELATION_PRIOR``; a measurement is replaced only
        by one on as long a span (after a change, the one before stays)."""
        if t < self._next_correlation or self._candidate is not None or \
                self._pending is not None:
            return
        self._next_correlation = t + CORRELATION_PERIOD
        start = max(self._steady_since, t - self.settings.max_window)
        # a shorter span than the measurement in force cannot see as slow an error
        if t - start < max(CORRELATION_SPAN, 0.999 * self._correlation_span):
            return
        self._correlation_span = t - start
        tt, P, y = self._samples(start, t)
        if len(tt) < 20:
            return
        w = self._w
        A = np.einsum('mjp,j,mjq->pq', P, w, P)
        inv = np.linalg.pinv(A, rcond=1e-8)
        e = y - P @ (inv @ np.einsum('mjp,j,mj->p', P, w, y))
        h = np.einsum('p,mjp,j,mj->m', inv[0], P, w, e)
        self.correlation_time = correlation_time(h, self.settings.sample_period)

    # -- decisions ----------------------------------------------------------------
    def watch_fit(self, t):
        """The fits that watch for a change: on the last ``window`` s, doubled up to
        ``max_window`` until the mass's standard error is at most ``exit_mass / 2``.

        Returns
        -------
        (WatchFit or None, WatchFit or None)
            The first fit whose change of mass is a candidate's (>= ``enter_mass`` and
            >= ``SIGNIFICANCE`` standard errors; None: none is), and the last fit made (the
            precise one, or the longest there is; None: too few samples).
        """
        s = self.settings
        found, last, span = None, None, s.window
        # a fit is a null one when nothing changed for as long again after it, and no
        # candidate made an event since (its samples are then dropped, in _event): the
        # false starts count, or the null would be the quiet times only
        if self._candidate is None and self._pending is None:
            counted = False
            while self._unsure and self._unsure[0][0] <= t:
                _, k, dev, empty = self._unsure.popleft()
                self._null[k] += (dev[0] ** 2, 1.0, dev[0])
                if self._null[k, 1] > NULL_KEEP:     # forget slowly: conditions drift
                    self._null[k] *= NULL_KEEP / self._null[k, 1]
                if empty:
                    self._empty[k] += (1.0, *dev)
                    if self._empty[k, 0] > NULL_KEEP:
                        self._empty[k] *= NULL_KEEP / self._empty[k, 0]
                counted = True
            if counted:
                self._update_tare(t)
        for k, span in enumerate(self._levels):
            # never across the last change: before it the arm held another load
            start = max(t - span, self._steady_since)
            fit = self.fit(start, t)
            if fit is None:
                return found, last
            last = fit
            if start > self._steady_since and start >= self._first + STARTUP:
                # the deviation from the load believed, tare included (the tare is their mean)
                self._unsure.append((t + max(span, 2.0), k, fit.theta - self._base -
                                     self.object, self.state == 'empty'))
            if found is None and self._starts(fit):
                found = fit
            if fit.mass_std <= s.exit_mass / 2 or start == self._steady_since:
                return found, last
        return found, last

    def _update_tare(self, t):
        """The tare: the mean of the longest steady fits made with nothing held (at least
        ``NULL_FITS`` of them); a tare of ``enter_mass`` or more is logged (once per
        crossing)."""
        ok = np.nonzero(self._empty[:, 0] >= NULL_FITS)[0]
        if not len(ok):
            return
        k = ok[-1]
        self.tare = self._empty[k, 1:] / self._empty[k, 0]
        mass = float(self.tare[0])
        s = self.settings
        if abs(mass) >= s.enter_mass and not self._tare_warned:
            self._tare_warned = True
            self._log('tare', t, f'the steady arm looks like {mass:.3g} kg at the flange '
                      f'(fits of {self._levels[k]:g} s): taken as the arm model\'s error; a '
                      'load held since the start belongs in payload_mass, and an arm model '
                      'this far off wants a refit', warning=True, mass=mass)
        elif abs(mass) < s.exit_mass:
            self._tare_warned = False

    def _starts(self, fit):
        """Whether ``fit`` shows a change that starts a candidate (hysteresis enter side)."""
        s = self.settings
        held = float(self.object[0])
        if self._null[0, 1] < NULL_FITS:
            return False            # warming up: what a steady fit looks like is not known
        if self.state == 'empty':
            start = fit.mass >= s.enter_mass
        else:
            start = abs(fit.mass - held) >= s.enter_mass or fit.mass < s.exit_mass
        return start and abs(fit.mass - held) >= SIGNIFICANCE * fit.mass_std

    def _keeps(self, fit):
        """Whether a candidate fitted at ``fit`` is still a change (hysteresis exit side)."""
        s = self.settings
        if self.state == 'empty':
            return fit.mass >= s.exit_mass
        return abs(fit.mass - float(self.object[0])) >= s.exit_mass

    def _decide(self, t):
        s = self.settings
        self._measure_correlation(t)
        found, fit = self.watch_fit(t)
        if fit is None:
            return []
        self.fits.append(fit)
        events = []
        if self._pending is not None:
            # judged like the event: on the samples since its candidate began
            since = self._pending[0].since
            events += self._confirm(self.fit(max(t - s.max_window, since), t) or fit)
        elif self._unconfirmed is not None and self._candidate is None:
            self._retry(t)
        held = float(self.object[0])
        if self._candidate is not None:
            _, since = self._candidate
            # judged on the samples since it began (all after the change), up to
            # max_window of them: the window grows until the fit is precise
            recent = self.fit(max(t - s.max_window, since), t)
            if recent is None:
                return events
            if not self._keeps(recent) and recent.mass_std <= s.exit_mass / 2:
                self._drop(t, f'the mass fitted since it began, {recent.mass:.3g} ± '
                           f'{recent.mass_std:.2g} kg, is back in the band', mass=recent.mass)
                return events
            if t - since >= s.support and self._keeps(recent):
                # a load not told from none (below exit_mass or SIGNIFICANCE standard
                # errors) is put down
                kind = PICKED_UP if self.state == 'empty' else \
                    PUT_DOWN if recent.mass < max(s.exit_mass, SIGNIFICANCE * recent.mass_std) \
                    else CHANGED
                why = self._ready(kind, recent)
                if found is None or not why.startswith(('not explained', 'not sustained')):
                    events += self._event(kind, since, recent)
                    return events
                # not a flange load since it began, and a change now: start again from now
                # (a change after a false start would never be sustained since then)
                self._drop(t, f'{why}; a new change is seen')
            else:
                return events
        if found is not None:
            kind = PICKED_UP if self.state == 'empty' else \
                PUT_DOWN if found.mass < s.exit_mass else CHANGED
            self._candidate = (kind, t)
            self._held = ''
            self._log('candidate', t, f'{kind} candidate: object mass {found.mass:.3g} ± '
                      f'{found.mass_std:.2g} kg on {found.span:.1f} s (now {held:.3g} kg), '
                      f'explained {found.explained:.2f}', kind=kind, mass=found.mass,
                      mass_std=found.mass_std)
        return events

    def _ready(self, kind, fit):
        """Why ``fit`` cannot make an event yet ('' when it can)."""
        s = self.settings
        change = abs(fit.mass - float(self.object[0]))
        if fit.explained < s.min_explained:
            return (f'not explained by a flange load: it removes {fit.explained:.2f} of the '
                    f'offset (min_explained {s.min_explained})')
        if not np.all(np.abs(fit.scales - 1.0) <= s.sustain_tolerance):
            return (f'not sustained over the window: scale per third '
                    f'{np.round(fit.scales, 2).tolist()} (1 ± {s.sustain_tolerance})')
        # a put-down serves no estimate (the model goes back to the configured payload): it
        # needs the load told from the one held (below) and from none (its kind), not a
        # precise mass
        if kind != PUT_DOWN and not fit.mass_std <= s.max_mass_std:
            return (f'not precise: mass std error {fit.mass_std:.3g} kg > max_mass_std '
                    f'{s.max_mass_std} (on {fit.span:.1f} s)')
        if not fit.mass_std <= s.max_relative_std * change:
            return (f'not precise for the change: mass std error {fit.mass_std:.3g} kg > '
                    f'max_relative_std {s.max_relative_std} x the change {change:.3g} kg '
                    f'(on {fit.span:.1f} s)')
        return ''

    def _event(self, kind, since, fit):
        why = self._ready(kind, fit)
        if why:
            if why.split(':')[0] != self._held.split(':')[0]:
                self._log('held', fit.t, f'{kind} held back: {why}', kind=kind,
                          mass=fit.mass, mass_std=fit.mass_std, explained=fit.explained)
            self._held = why
            return []
        self._candidate = None
        self._held = ''
        self._unconfirmed = None
        self._prior = self.object.copy()       # the object believed before this event
        self._steady_since = since
        self._unsure.clear()
        if kind == PUT_DOWN:
            self.state, self.object = 'empty', np.zeros(4)
            mass, com, mass_std, com_std = 0.0, (0.0, 0.0, 0.0), fit.mass_std, (0.0,) * 3
        else:
            self.state, self.object = 'loaded', fit.theta - self._base - self.tare
            mass, com = fit.mass, tuple(float(c) for c in fit.com)
            mass_std, com_std = fit.mass_std, tuple(float(c) for c in fit.com_std)
        event = PayloadEvent(kind=kind, t=fit.t, mass=mass, com=com, mass_std=mass_std,
                             com_std=com_std, frame=self.frame, payload=self._payload(),
                             since=since, explained=fit.explained, samples=fit.samples)
        self._log(kind, fit.t, f'{kind}: object {mass:.3g} ± {mass_std:.2g} kg at '
                  f'{np.round(com, 4).tolist()} m in {self.frame} (candidate since '
                  f'{since:.2f} s, explained {fit.explained:.2f}, {fit.samples} samples)',
                  mass=mass, mass_std=mass_std, com=list(com))
        events = [event]
        self._pending = None
        if self.settings.apply:
            if kind == PUT_DOWN:
                if self.applied:
                    events.append(self._action(REVERTED, fit.t, event))
            else:
                self._pending = (event, fit.t + self.settings.confirm)
        self.events += events
        return events

    def _confirm(self, fit):
        """Apply the pending event once its confirmation window has passed."""
        event, when = self._pending
        if abs(fit.mass - event.mass) >= self.settings.exit_mass:
            self._pending = None
            self._unconfirmed = (event, fit.mass_std)
            self._log('unconfirmed', fit.t, f'{event.kind} not applied: the fitted mass '
                      f'{fit.mass:.3g} kg left {event.mass:.3g} ± '
                      f'{self.settings.exit_mass} kg within the confirmation window; tried '
                      f'again when a fit since {event.since:.2f} s has a standard error '
                      f'<= {RETRY_GAIN * fit.mass_std:.2g} kg', mass=fit.mass)
            return []
        if fit.t < when:
            return []
        self._pending = None
        # refit on everything since the candidate began: more poses, the better CoM
        longer = self.fit(event.since, fit.t)
        if longer is not None and longer.mass_std <= fit.mass_std:
            self.object = longer.theta - self._base - self.tare
            event = self._refitted(event, longer)
        out = [self._action(APPLIED, fit.t, event)]
        self.events += out
        return out

    def _retry(self, t):
        """An unconfirmed event again through the confirmation window, with the fit on
        everything since its candidate began, once that fit is precise and has at most
        ``RETRY_GAIN`` times the failed confirmation's standard error (module notes)."""
        s = self.settings
        event, failed = self._unconfirmed
        # judged as the event was: against the object believed before it (explained,
        # sustained, precise for the change)
        believed, self.object = self.object, self._prior
        try:
            refit = self.fit(max(t - s.max_window, event.since), t)
            why = 'no fit' if refit is None else self._ready(event.kind, refit)
        finally:
            self.object = believed
        if why or not refit.mass_std <= RETRY_GAIN * failed:
            return
        change = refit.mass - float(self.object[0])
        if refit.mass < max(s.exit_mass, SIGNIFICANCE * refit.mass_std):
            return                  # not told from none: a put-down candidate's to decide
        self._unconfirmed = None
        self._unsure.clear()        # their deviations were from the load believed before
        self.object = refit.theta - self._base - self.tare
        event = self._refitted(event, refit, t=refit.t, explained=refit.explained)
        self._pending = (event, t + s.confirm)
        self._log('retry', t, f'{event.kind} tried again: object {refit.mass:.3g} ± '
                  f'{refit.mass_std:.2g} kg on {refit.span:.1f} s since {event.since:.2f} s '
                  f'({change:+.3g} kg from the load believed), applied after '
                  f'{s.confirm:g} s if the fits still see it', mass=refit.mass,
                  mass_std=refit.mass_std)

    def _refitted(self, event, fit, **more):
        """``event`` with the object of ``fit`` (mass, CoM, their standard errors, samples)
        and the payload served now."""
        return PayloadEvent(**{**event.__dict__, 'mass': fit.mass,
                               'com': tuple(float(c) for c in fit.com),
                               'mass_std': fit.mass_std,
                               'com_std': tuple(float(c) for c in fit.com_std),
                               'payload': self._payload(), 'samples': fit.samples, **more})

    def _action(self, kind, t, event):
        self.applied = kind == APPLIED
        action = PayloadEvent(**{**event.__dict__, 'kind': kind, 't': t,
                                 'payload': event.payload})
        p = action.payload
        self._log(kind, t, f'{kind}: serving ' + ('no payload' if p is None else
                  f'{p.mass:.4g} kg at {np.round(p.com, 4).tolist()} m in {p.frame}'),
                  served_mass=0.0 if p is None else p.mass)
        return action

    def _payload(self):
        """Baseline + object as a Payload (None when no mass)."""
        theta = self._base + self.object
        if not theta[0] > 0:
            return None
        return Payload(mass=float(theta[0]), com=tuple(float(c) for c in theta[1:] / theta[0]),
                       frame=self.frame)

    def _drop(self, t, why, **numbers):
        kind, since = self._candidate
        self._candidate = None
        self._held = ''
        self._log('dropped', t, f'{kind} candidate (since {since:.2f} s) dropped: {why}',
                  kind=kind, **numbers)

    def _log(self, decision, t, text, warning=False, **numbers):
        self.decisions.append({'decision': decision, 't': float(t), **numbers})
        (self._warn if warning else self._say)(f'payload watch t={t:.2f} s: {text}')


def correlation_time(x, dt, min_blocks=6):
    """Integrated autocorrelation time (s) of a series by blocking (Flyvbjerg and Petersen
    1989): for blocks of 1, 2, 4, ... samples (at least ``min_blocks`` of them), the
    variance of the block means times the block length over the series' variance is
    ``2 τ``; the largest of these (the plateau, or the longest block when the series is
    too short to show it: the safe side).

    Parameters
    ----------
    x : ndarray, (M,)
        Samples ``dt`` s apart.
    dt : float
    min_blocks : int

    Returns
    -------
    float
        At least ``dt / 2`` (white); the variance of a mean of M samples is ``2 τ / (M dt)``
        times theirs.
    """
    x = np.asarray(x, dtype=float)
    var = np.var(x)
    if not var > 0:
        return dt / 2
    tau, size = 0.5, 1
    while len(x) // size >= min_blocks:
        n = len(x) // size
        means = x[:n * size].reshape(n, size).mean(axis=1)
        tau = max(tau, 0.5 * size * np.var(means, ddof=1) / var)
        size *= 2
    return float(tau) * dt


def run_watch(watch, t, q, dq, residual, contact=None, served=None):
    """A recorded residual through ``watch`` sample by sample (the node's code path).

    Parameters
    ----------
    t : ndarray, (N,)
    q, residual : ndarray, (N, n)
    dq : ndarray, (N, n) or None
    contact : ndarray, (N,) of bool, optional
    served : Payload, optional

    Returns
    -------
    list of PayloadEvent
    """
    events = []
    for k in range(len(t)):
        events += watch.update(float(t[k]), q[k], None if dq is None else dq[k], residual[k],
                               bool(contact[k]) if contact is not None else False, served)
    return events


__all__ = ['APPLIED', 'CHANGED', 'PICKED_UP', 'PUT_DOWN', 'PayloadEvent', 'PayloadWatch',
           'REVERTED', 'WatchFit', 'WatchSettings', 'correlation_time', 'run_watch']
