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

Every ``fit_period`` s, a weighted least-squares fit of θ on the last ``window`` s
(samples kept every ``sample_period`` s) gives the load; its covariance is the
batch-means sandwich over ten blocks of the span (at least 0.1 s each: the residual is
low-passed by the observer and the arm model's error is correlated in time, so
per-sample white noise would understate it), plus the white-noise term (directions the
window does not excite, an arm at rest) and, when given, the arm model's own error.
The object is that load minus the configured (baseline) payload.

Decisions, each with hysteresis:

* **candidate** — with no object: object mass >= ``enter_mass`` starts a *picked_up*
  candidate, kept while it stays >= ``exit_mass``. With one of mass m_o: |fitted − m_o|
  >= ``enter_mass`` (or fitted < ``exit_mass``) starts a change candidate, kept while
  |fitted − m_o| >= ``exit_mass``; it becomes *put_down* when the deciding fit's mass is
  below ``exit_mass``, else *changed*.
* **event** — a candidate older than ``support`` s whose fit on the samples since it began
  (at most ``window`` s of them: all after the change) is (a) explained:
  the fitted load removes at least ``min_explained`` of the offset's weighted energy
  ``Σ w (y − P θ_now)²``; (b) sustained: fitted alone on each third of the window,
  the load's scale ``s_k = <Pθ̂, y>_k / <Pθ̂, Pθ̂>_k`` is within ``1 ± sustain_tolerance``
  of the whole window's; (c) precise: standard error of the mass <= ``max_mass_std`` and
  <= ``max_relative_std`` x the mass change. Then the event (picked_up, put_down,
  changed) is emitted with mass, CoM, standard errors and time.
* **apply** (``apply`` True) — a picked_up / changed event is applied ``confirm`` s later
  if the fits since still see that load (within ``exit_mass``), refitted on everything
  since the candidate began; a put_down reverts at once to the baseline (a payload
  served that the arm no longer holds pushes the arm: the safe side is to drop it fast).

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
#: the arm model's own error is taken as independent between blocks this long (s)
MODEL_ERROR_SECONDS = 1.0


@dataclass(frozen=True)
class WatchSettings:
    """How the watch decides (SI units; defaults for a 1 kHz stream and a 1 kg load).

    Attributes
    ----------
    window : float
        s of motion each fit uses.
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
                 model_error=None, say=None):
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
        s = self.settings
        keep = int(np.ceil((s.window + s.confirm + s.support) / s.sample_period)) + 4
        # [t, q, dq, r, served θ, served frame, P, y]; P and y once q̈ is known
        self._records = deque(maxlen=keep)
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
        self._held = ''
        self.fits = deque(maxlen=200)
        self.decisions = []
        self.events = []

    # -- samples ------------------------------------------------------------------
    def reset(self):
        """Forget the samples (a stream restart); the belief stays."""
        self._records.clear()
        self._last_kept = self._next_fit = -np.inf
        self._candidate = None

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

    def fit(self, start, end=None):
        """WatchFit of the samples in [start, end] (pushes left out), or None (too few)."""
        self._regress()
        recs = [r for r in self._records if r[6] is not None]
        if not recs:
            return None
        t = np.array([r[0] for r in recs])
        end = t[-1] if end is None else end
        use = (t >= start) & (t <= end)
        if np.isfinite(self._push_until):
            use &= ~((t >= self._push_from - SETTLE) & (t <= self._push_until))
        need = 0.6 * (end - start) / self.settings.sample_period
        if use.sum() < max(10, need):
            return None
        t = t[use]
        P = np.array([r[6] for r, u in zip(recs, use) if u])     # (M, n, 4)
        y = np.array([r[7] for r, u in zip(recs, use) if u])     # (M, n)
        w = self._w
        A = np.einsum('mjp,j,mjq->pq', P, w, P)
        b = np.einsum('mjp,j,mj->p', P, w, y)
        scale = np.sqrt(np.maximum(np.diag(A), 1e-300))
        inv = np.linalg.pinv(A / np.outer(scale, scale), rcond=1e-8) / np.outer(scale, scale)
        theta = inv @ b
        e = y - P @ theta
        # batch means: score sums over blocks of a tenth of the span (>= 0.1 s), independent
        # between blocks (the observer's low-pass, the arm model's slow error)
        blocks = np.floor((t - t[0]) / max(BLOCK, (t[-1] - t[0]) / 10)).astype(int)
        nb = blocks[-1] + 1
        scores = np.zeros((nb, 4))
        np.add.at(scores, blocks, np.einsum('mjp,j,mj->mp', P, w, e))
        used = np.count_nonzero(np.any(scores != 0, axis=1))
        cov = inv @ (scores.T @ scores) @ inv * used / max(used - 4, 1)
        # plus the white-noise term: the sandwich has no variance along directions the
        # window does not excite (an arm at rest: m against the vertical CoM)
        dof = max(e.size - 4, 1)
        cov += inv * float(np.einsum('mj,j,mj->', e, w, e)) / dof
        if self._model_error is not None:
            cov += model_error_covariance(P, self._noise, self._model_error, max(1, int(round(
                (t[-1] - t[0]) / MODEL_ERROR_SECONDS))))
        std = np.sqrt(np.clip(np.diag(cov), 0, None))
        belief = self._base + self.object
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
        obj = theta - self._base
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
                        explained=float(explained), scales=scales, samples=int(len(t)))

    # -- decisions ----------------------------------------------------------------
    def _decide(self, t):
        s = self.settings
        fit = self.fit(t - s.window, t)
        if fit is None:
            return []
        self.fits.append(fit)
        events = []
        if self._pending is not None:
            # judged like the event: on the samples since its candidate began
            since = self._pending[0].since
            events += self._confirm(self.fit(max(t - s.window, since), t) or fit)
        held = float(self.object[0])
        if self.state == 'empty':
            start, keep = fit.mass >= s.enter_mass, fit.mass >= s.exit_mass
        else:
            # one candidate for any change of a held load; put_down or changed is told
            # by the fit that makes the event (a load put down passes through lighter fits)
            start = abs(fit.mass - held) >= s.enter_mass or fit.mass < s.exit_mass
            keep = abs(fit.mass - held) >= s.exit_mass
        kind = None if not start else PICKED_UP if self.state == 'empty' else \
            PUT_DOWN if fit.mass < s.exit_mass else CHANGED
        if self._candidate is not None:
            _, since = self._candidate
            if not keep:
                self._drop(t, f'the fitted mass {fit.mass:.3g} kg left the band',
                           mass=fit.mass)
                return events
            if t - since >= s.support:
                # the event is judged on the samples since the candidate began (all after
                # the change), up to a window of them
                fit = self.fit(max(t - s.window, since), t) or fit
                ckind = PICKED_UP if self.state == 'empty' else \
                    PUT_DOWN if fit.mass < s.exit_mass else CHANGED
                events += self._event(ckind, since, fit)
            return events
        if kind is not None:
            self._candidate = (kind, t)
            self._held = ''
            self._log('candidate', t, f'{kind} candidate: object mass {fit.mass:.3g} ± '
                      f'{fit.mass_std:.2g} kg (now {held:.3g} kg), explained '
                      f'{fit.explained:.2f}', kind=kind, mass=fit.mass, mass_std=fit.mass_std)
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
        if not fit.mass_std <= s.max_mass_std:
            return f'mass std error {fit.mass_std:.3g} kg > max_mass_std {s.max_mass_std}'
        if not fit.mass_std <= s.max_relative_std * change:
            return (f'mass std error {fit.mass_std:.3g} kg > max_relative_std '
                    f'{s.max_relative_std} x the change {change:.3g} kg')
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
        if kind == PUT_DOWN:
            self.state, self.object = 'empty', np.zeros(4)
            mass, com, mass_std, com_std = 0.0, (0.0, 0.0, 0.0), fit.mass_std, (0.0,) * 3
        else:
            self.state, self.object = 'loaded', fit.theta - self._base
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
            self._log('unconfirmed', fit.t, f'{event.kind} not applied: the fitted mass '
                      f'{fit.mass:.3g} kg left {event.mass:.3g} ± '
                      f'{self.settings.exit_mass} kg within the confirmation window',
                      mass=fit.mass)
            return []
        if fit.t < when:
            return []
        self._pending = None
        # refit on everything since the candidate began: more poses, the better CoM
        longer = self.fit(event.since, fit.t)
        if longer is not None and longer.mass_std <= fit.mass_std:
            self.object = longer.theta - self._base
            event = PayloadEvent(**{**event.__dict__, 'mass': longer.mass,
                                    'com': tuple(float(c) for c in longer.com),
                                    'mass_std': longer.mass_std,
                                    'com_std': tuple(float(c) for c in longer.com_std),
                                    'payload': self._payload(), 'samples': longer.samples})
        out = [self._action(APPLIED, fit.t, event)]
        self.events += out
        return out

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

    def _log(self, decision, t, text, **numbers):
        self.decisions.append({'decision': decision, 't': float(t), **numbers})
        self._say(f'payload watch t={t:.2f} s: {text}')


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
           'REVERTED', 'WatchFit', 'WatchSettings', 'run_watch']
