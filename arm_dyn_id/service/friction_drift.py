"""Friction drift tracked while serving: a bounded online update of the friction only.

Joint friction falls as the drives warm up (tens of per cent over the first tens of
minutes on geared arms) while the served model stays the one fitted cold.
:class:`FrictionTracker` follows it from the residual stream the node already runs,
with the rigid body frozen:

**What it regresses.** The momentum observer of :mod:`arm_dyn_id.service.dynamics`
gives, per joint, ``r ≈ LP_K(τ_f,model − τ_f,true)`` on free motion (the friction
error seen as an external torque, through the observer's first-order low-pass of
bandwidth K). So ``LP_K(τ_f,true) = LP_K(τ_f,model) − r``: the measured torque minus
the rigid-body torque, without ever differentiating q̇. The friction features of the
model's own law (``FrictionModel.features``: the (smooth) sign, q̇, ...) go through
the same discrete low-pass as r (``F_k = (F_(k-1) + K Δt f_k) / (1 + K Δt)``, the
observer's implicit step), so regressor and target carry the same lag and the fit
is unbiased at velocity reversals. Tracked: the Coulomb (``fc``, or ``fcp``/``fcn``)
and viscous (``fv``) terms; an offset, Stribeck or load term stays as fitted (their
contribution is subtracted from the target), like the rigid body.

**How.** Recursive least squares with exponential forgetting, per joint (the
regressor is block-diagonal): ``λ = exp(−Δt / T)`` per step, T the forgetting time
constant (s; default 30 s: a friction changing by 1.5 %/min is followed within
~1 %), applied only on steps that update the joint (a joint at rest keeps what it
knows), kept in information form with the prior refreshed at the forgetting rate
(:meth:`FrictionTracker._step`). A
joint's step needs ``|q̇| > min_speed`` and no contact flagged; the RLS runs at most
at ``rate`` Hz and a new estimate is proposed every ``period`` seconds of stream time.

**Bounds.** Each tracked coefficient must stay within ``[low·fitted − margin,
high·fitted + margin]`` and ≥ 0 (the physical sign of Coulomb and viscous friction).
A joint whose proposal has any coefficient outside is refused: it keeps being served
its last good values (the other joints' update goes on, so one joint beyond its bounds
does not freeze the others), and :attr:`FrictionTracker.status` names the joint, the
term, its value and bounds, and asks for a refit. Its RLS keeps running: back inside
the bounds, it is accepted again.

**Versions.** Version 0 is the fitted friction. Every accepted proposal that changes
a coefficient by more than ``min_change`` (relative to its fitted magnitude plus the
margin) gets the next version number (monotonic, never reused, even after a
rollback) and is kept in a short history; :meth:`FrictionTracker.rollback` serves an
earlier version again (default the one before the current one; 0 = the fitted one).
:attr:`FrictionTracker.model_id` names the base model (a hash of its joints, base
parameters and fitted friction), so a saved state is only ever applied to the model
it was tracked on: :func:`save_state` writes ``friction_drift.yaml`` beside the model
file (atomic), :meth:`FrictionTracker.restore` reads it back or says why not.
"""

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.model import files
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics

STATE_FILE = 'friction_drift.yaml'
SCHEMA = 'arm_dyn_id/friction_drift'
TRACKED = ('fc', 'fcp', 'fcn', 'fv')      # the terms followed online
REFRESH = 0.01      # fraction of the prior's information kept in steady state (a floor)
TERM_NAMES = {'fc': 'coulomb', 'fcp': 'coulomb_positive', 'fcn': 'coulomb_negative',
              'fv': 'viscous', 'fo': 'offset', 'fs': 'stribeck', 'fl': 'coulomb_load'}


@dataclass(frozen=True)
class TrackerSettings:
    """Settings of :class:`FrictionTracker` (SI units).

    Attributes
    ----------
    forgetting_time : float
        Time constant T of the exponential forgetting (s): λ = exp(−Δt / T) per step.
    rate : float
        Largest rate of RLS steps (Hz); samples in between only feed the filters.
    period : float
        Stream time between two proposals of a new version (s).
    bounds : tuple of float
        (low, high) factors of the fitted value a coefficient must stay within.
    margin : float
        Absolute widening of the bounds (N·m for Coulomb, N·m·s/rad for viscous), so a
        coefficient fitted near 0 can still move a little.
    min_speed : float
        A joint's RLS step needs |q̇| above this (rad/s).
    noise : float
        Standard deviation of the torque noise the RLS assumes (N·m).
    prior : float
        Prior standard deviation of each coefficient, a fraction of its fitted value
        (plus the margin); its information is refreshed at the forgetting rate.
    min_change : float
        A proposal becomes a version only when a coefficient moved by more than this
        fraction of (|fitted| + margin) from the served value.
    min_steps : int
        RLS steps a joint needs (since the start or a rollback) before its values are
        proposed.
    history : int
        Versions kept for a rollback (the fitted one, version 0, always).
    """

    forgetting_time: float = 30.0
    rate: float = 100.0
    period: float = 5.0
    bounds: tuple = (0.5, 1.5)
    margin: float = 0.01
    min_speed: float = 0.05
    noise: float = 0.05
    prior: float = 0.5
    min_change: float = 0.005
    min_steps: int = 50
    history: int = 20

    def __post_init__(self):
        object.__setattr__(self, 'bounds', tuple(float(b) for b in self.bounds))
        positive = ('forgetting_time', 'rate', 'period', 'noise', 'prior')
        for key in positive:
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f'friction tracking {key} = {value} must be > 0')
        for key in ('margin', 'min_speed', 'min_change'):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f'friction tracking {key} = {value} must be >= 0')
        low, high = self.bounds if len(self.bounds) == 2 else (math.nan, math.nan)
        if not (0 <= low < 1 < high and math.isfinite(high)):
            raise ValueError(f'friction tracking bounds = {list(self.bounds)} must be two '
                             'factors of the fitted value, 0 <= low < 1 < high')
        if int(self.min_steps) < 1 or int(self.history) < 1:
            raise ValueError(f'friction tracking min_steps {self.min_steps} and history '
                             f'{self.history} must be >= 1')


@dataclass(frozen=True)
class FrictionUpdate:
    """A friction served from now on: its version, the model's φ (n·k,), the stream
    stamp (s) it was decided at and why (``tracked``, ``rollback``, ``restored``)."""

    version: int
    phi: np.ndarray
    stamp: float
    reason: str


def model_id(model):
    """A short id of a full model: hash of its joints, friction law, β and fitted φ."""
    h = hashlib.sha256()
    h.update(','.join(model.joint_names).encode())
    h.update(repr(sorted(model.friction_model.to_dict().items())).encode())
    h.update(np.ascontiguousarray(model.beta, dtype=float).tobytes())
    h.update(np.ascontiguousarray(model.phi, dtype=float).tobytes())
    return h.hexdigest()[:12]


def state_path(model_file):
    """``friction_drift.yaml`` beside a model file."""
    return Path(model_file).with_name(STATE_FILE)


class FrictionTracker:
    """Online friction of one served full model (module notes).

    Parameters
    ----------
    model : DynamicsModel
        The fitted model (not modified); its ``phi`` is version 0.
    gains : array_like, (n,) or scalar
        The momentum observer's bandwidth K per joint (1/s).
    settings : TrackerSettings, optional
    max_gap : float
        The observer's restart gap (s): a stamp step longer than this, or one that does
        not move forward, restarts the filters as the observer restarts r.

    Attributes
    ----------
    version : int
        Version of the friction served.
    phi : ndarray, (n·k,)
        The friction served (the model's layout).
    status : str
        One line: tracking, refused (joint, term, bounds, "refit"), rolled back...
    refusals : int
    """

    def __init__(self, model, gains, settings=None, max_gap=0.05):
        self.settings = settings or TrackerSettings()
        s = self.settings
        fm = model.friction_model
        self.joints = tuple(model.joint_names)
        n = len(self.joints)
        self.n = n
        self.model_id = model_id(model)
        self._all_terms = tuple(fm.terms)
        self.terms = tuple(t for t in fm.terms if t != 'fl')     # served without load
        self.k = fm.per_joint
        self.fitted = np.asarray(model.phi, dtype=float).copy()
        self._cols = np.array([i for i, t in enumerate(fm.terms) if t in TRACKED])
        self._frozen = np.array([i for i, t in enumerate(self.terms) if t not in TRACKED],
                                dtype=int)
        gains = np.atleast_1d(np.asarray(gains, dtype=float))
        self.gains = np.full(n, float(gains[0])) if gains.size == 1 else gains
        if self.gains.shape != (n,) or not np.all(self.gains > 0):
            raise ValueError(f'observer gains {gains.tolist()} must be one > 0 value per '
                             f'joint ({n}) or one for all')
        self.max_gap = float(max_gap)
        self._smooth = fm.coulomb == 'tanh'
        self._inv_vs = 1.0 / fm.smooth_velocity
        self._inv_vst = 1.0 / fm.stribeck_velocity
        fit = self.fitted.reshape(n, self.k)[:, self._cols]
        low, high = s.bounds
        self.lower = np.maximum(np.minimum(low * fit, high * fit) - s.margin, 0.0)
        self.upper = np.maximum(low * fit, high * fit) + s.margin
        self._scale = np.abs(fit) + s.margin + 1e-12
        m = len(self._cols)
        # the prior's information (inverse covariance), per joint, and its pull to the fit
        self._A0 = np.zeros((n, m, m))
        self._A0[:] = np.eye(m)
        self._A0 /= ((s.prior * self._scale) ** 2)[:, :, None]
        # what of it is refreshed at the forgetting rate: a floor, not a pull (the data of
        # one forgetting time carry far more information on any joint that moves)
        self._A_floor = REFRESH * self._A0
        self._b_floor = np.einsum('jab,jb->ja', self._A_floor, fit)
        self._R = s.noise ** 2
        self.history = [(0, self.fitted.copy(), math.nan, 'fitted')]
        self.next_version = 1
        self.refusals = 0
        self.accepted = 0
        self.status = 'tracking: serving the fitted friction (version 0)'
        self._serve(self.fitted, 0)
        self._t = None
        self._t_step = None
        self._t_proposal = None
        self._f = np.empty((n, len(self.terms)))
        self._dt = None

    # -- served values ------------------------------------------------------
    def _serve(self, phi, version):
        """Serve ``phi`` as ``version``; the RLS restarts from it with the prior covariance."""
        self.phi = np.asarray(phi, dtype=float).copy()
        self.version = int(version)
        table = self.phi.reshape(self.n, self.k)
        self._served_cols = table[:, :len(self.terms)].copy()
        start = table[:, self._cols]
        self._frozen_values = table[:, self._frozen].copy()
        self.A = self._A0.copy()
        self.b = np.einsum('jab,jb->ja', self._A0, start)
        self.steps = np.zeros(self.n, dtype=int)
        self._F = np.zeros((self.n, len(self.terms)))
        self._L = np.zeros(self.n)
        self._t = None

    def restart(self):
        """The residual stream's observer restarted (a new stream): so do the filters."""
        self._t = None

    def table(self, phi=None):
        """``{term name: (n,)}`` of the served (or given) φ, like DynamicsModel.friction_table."""
        phi = (self.phi if phi is None else np.asarray(phi, dtype=float)).reshape(self.n, self.k)
        return {TERM_NAMES[t]: phi[:, i].copy() for i, t in enumerate(self._all_terms)}

    def features(self, dq, out=None):
        """Friction features of the model's law without the load term, (n,) -> (n, k')."""
        s = np.tanh(dq * self._inv_vs) if self._smooth else np.sign(dq)
        out = np.empty((len(dq), len(self.terms))) if out is None else out
        for i, term in enumerate(self.terms):
            if term == 'fc':
                out[:, i] = s
            elif term == 'fcp':
                np.maximum(s, 0.0, out=out[:, i])
            elif term == 'fcn':
                np.minimum(s, 0.0, out=out[:, i])
            elif term == 'fv':
                out[:, i] = dq
            elif term == 'fo':
                out[:, i] = 1.0
            else:       # fs, Stribeck
                out[:, i] = s * np.exp(-(dq * self._inv_vst) ** 2)
        return out

    # -- per sample ---------------------------------------------------------
    def update(self, t, dq, residual, contact=False):
        """One residual sample in; a :class:`FrictionUpdate` when a new version is accepted.

        Parameters
        ----------
        t : float
            Stamp (s), the residual stream's.
        dq : ndarray, (n,)
            The velocity the observer used (rad/s).
        residual : ndarray, (n,)
            The momentum observer's r (N·m), before any contact-band processing.
        contact : bool
            Contact flagged at this sample: no RLS step.

        Returns
        -------
        FrictionUpdate or None
        """
        dq = np.asarray(dq, dtype=float)
        dt = None if self._t is None else t - self._t
        self._t = t
        if dt is None or not 0 < dt <= self.max_gap:
            # the observer restarts r = 0 here: so do the filters of features and model
            self._F[:] = 0.0
            self._L[:] = 0.0
            self._t_step = None
            return None
        # the observer's implicit step: x_k = x_(k-1) + a (u_k - x_(k-1)), a = KΔt/(1+KΔt)
        if dt != self._dt:
            self._dt = dt
            self._a = self.gains * dt / (1.0 + self.gains * dt)
        a = self._a
        f = self.features(dq, self._f)
        self._L += a * ((f * self._served_cols).sum(axis=1) - self._L)
        f -= self._F
        f *= a[:, None]
        self._F += f
        if self._t_proposal is None:
            self._t_proposal = t
        if self._t_step is None:
            self._t_step = t
        elif t - self._t_step >= 1.0 / self.settings.rate:
            self._step(t - self._t_step, dq, np.asarray(residual, dtype=float), contact)
            self._t_step = t
        if t - self._t_proposal >= self.settings.period:
            self._t_proposal = t
            return self._propose(t)
        return None

    def _step(self, dt, dq, residual, contact):
        """One RLS step with forgetting, every joint at once (block-diagonal regressor).

        Kept in information form, ``A = λ A + x xᵀ / R + (1 − λ) ε A0`` and
        ``b = λ b + x y / R + (1 − λ) ε A0 θ_fit`` (A0 the prior's information,
        ε = REFRESH), θ = A⁻¹ b: the exponentially weighted least-squares estimate that
        covariance-form RLS computes recursively, without its loss of positive
        definiteness over 10⁵ steps. The refreshed share of the prior is a floor, so an
        unexcited direction cannot wind up. A joint at rest gets
        no step and no forgetting."""
        if contact or not math.isfinite(float(residual.sum())):
            return
        move = np.abs(dq) > self.settings.min_speed
        if not move.any():
            return
        # LP(τ_f,true) = LP(τ_f,model) − r; frozen terms' share taken out
        y = self._L - residual
        if self._frozen.size:
            y -= (self._F[:, self._frozen] * self._frozen_values).sum(axis=1)
        x = self._F[:, self._cols]                                   # (n, m)
        lam = np.where(move, math.exp(-dt / self.settings.forgetting_time), 1.0)
        w = move / self._R
        self.A *= lam[:, None, None]
        self.A += (1.0 - lam)[:, None, None] * self._A_floor
        self.A += (w[:, None] * x)[:, :, None] * x[:, None, :]
        self.b *= lam[:, None]
        self.b += (1.0 - lam)[:, None] * self._b_floor + (w * y)[:, None] * x
        self.steps += move

    @property
    def theta(self):
        """The RLS estimate of the tracked coefficients, (n, m) (Coulomb, viscous...)."""
        return np.linalg.solve(self.A, self.b[:, :, None])[:, :, 0]

    def _propose(self, t):
        """The RLS estimate of the excited joints as a new version; a joint with a
        coefficient outside its bounds is refused (it keeps its last good values)."""
        ready = self.steps >= self.settings.min_steps
        if not ready.any():
            return None
        served = self.phi.reshape(self.n, self.k)[:, self._cols]
        proposal = np.where(ready[:, None], self.theta, served)
        outside = (proposal < self.lower) | (proposal > self.upper) | ~np.isfinite(proposal)
        refused = ''
        if outside.any():
            j, c = (int(i[0]) for i in np.nonzero(outside))
            term = TERM_NAMES[self.terms[self._cols[c]]]
            fit = self.fitted.reshape(self.n, self.k)[j, self._cols[c]]
            bad = outside.any(axis=1)
            self.refusals += 1
            refused = (
                f'refused at t={t:.1f} s: {self.joints[j]} {term} {proposal[j, c]:.4g} '
                f'outside [{self.lower[j, c]:.4g}, {self.upper[j, c]:.4g}] (fitted '
                f'{fit:.4g}); {", ".join(np.asarray(self.joints)[bad])} still served at '
                'their last good values: the friction drifted beyond its bounds, refit '
                'the model')
            proposal[bad] = served[bad]
        if not np.any(np.abs(proposal - served) > self.settings.min_change * self._scale):
            if refused:
                self.status = refused
            return None
        phi = self.phi.reshape(self.n, self.k).copy()
        phi[:, self._cols] = proposal
        version = self.next_version
        update = self._accept(phi.ravel(), version, t, 'tracked')
        self.status = refused or f'tracking: version {version} accepted at t={t:.1f} s'
        if refused:
            self.status = f'version {version} accepted for the other joints; ' + refused
        return update

    def _accept(self, phi, version, t, reason):
        A, b, steps, F, L, t_last = (self.A, self.b, self.steps, self._F, self._L, self._t)
        self._serve(phi, version)
        if reason == 'tracked':             # keep the RLS state and the filters
            self.A, self.b, self.steps, self._F, self._L, self._t = (A, b, steps, F, L, t_last)
            # the model filter now carries the old friction's past: equal to what r saw
        self.next_version = max(self.next_version, version + 1)
        self.accepted += reason == 'tracked'
        self.history = [h for h in self.history if h[0] != version]
        self.history.append((version, self.phi.copy(), float(t), reason))
        keep = self.settings.history
        if len(self.history) > keep + 1:       # version 0 always stays
            self.history = self.history[:1] + self.history[-keep:]
        return FrictionUpdate(version, self.phi.copy(), float(t), reason)

    # -- rollback -------------------------------------------------------------
    @property
    def versions(self):
        """Versions a rollback can return to, oldest first."""
        return [h[0] for h in self.history]

    def rollback(self, version=None, t=math.nan):
        """Serve an earlier version again: ``version`` (0 = the fitted friction), default
        the one served before the current one. Returns the FrictionUpdate.

        Raises
        ------
        ValueError
            ``version`` is not in the history (the message lists those that are).
        """
        versions = self.versions
        if version is None:
            at = versions.index(self.version) if self.version in versions else 0
            version = versions[at - 1] if at > 0 else 0
        if version not in versions:
            raise ValueError(f'friction version {version} is not kept; a rollback can go to '
                             f'{versions}')
        phi = next(h[1] for h in self.history if h[0] == version)
        current = self.version
        self._serve(phi, version)
        self._t_proposal = None
        # history: drop what came after the target, so a second rollback goes further back
        self.history = [h for h in self.history if versions.index(h[0]) <= versions.index(
            version)]
        self.status = f'rolled back from version {current} to version {version}'
        return FrictionUpdate(version, self.phi.copy(), float(t), 'rollback')

    # -- persistence ----------------------------------------------------------
    def to_dict(self):
        """The state worth keeping (YAML-ready): model id, served version and values,
        history, bounds."""
        names = [f'{t}{j + 1}' for j in range(self.n) for t in self._all_terms]
        return files.plain({
            'schema': SCHEMA, 'model_id': self.model_id, 'joints': list(self.joints),
            'names': names, 'version': self.version, 'next_version': self.next_version,
            'values': self.phi, 'fitted': self.fitted,
            'served': {k: v for k, v in self.table().items()},
            'status': self.status, 'refusals': self.refusals,
            'settings': asdict(self.settings),
            'history': [{'version': v, 'values': p, 'stamp': s, 'reason': r}
                        for v, p, s, r in self.history]})

    def restore(self, path):
        """Take the state saved at ``path`` when it belongs to this model.

        Returns
        -------
        (FrictionUpdate or None, str)
            The restored friction (None when nothing was taken) and one sentence saying
            what happened (no file, another model, out of bounds, restored version N).
        """
        path = Path(path)
        if not path.exists():
            return None, f'no {path.name} beside the model: serving the fitted friction'
        try:
            doc = yaml.safe_load(path.read_text())
            if doc.get('schema') != SCHEMA:
                raise KeyError('schema')
            if doc['model_id'] != self.model_id:
                return None, (f'{path} ignored: it was tracked on model {doc["model_id"]}, '
                              f'this model is {self.model_id}; serving the fitted friction')
            values = np.asarray(doc['values'], dtype=float)
            history = [(int(h['version']), np.asarray(h['values'], dtype=float),
                        math.nan if h['stamp'] is None else float(h['stamp']), h['reason'])
                       for h in doc['history']]
            version, next_version = int(doc['version']), int(doc['next_version'])
        except (OSError, yaml.YAMLError, AttributeError, KeyError, TypeError,
                ValueError) as exc:
            return None, f'{path} ignored: unreadable ({type(exc).__name__}: {exc})'
        if values.shape != self.fitted.shape or not np.all(np.isfinite(values)):
            return None, f'{path} ignored: {values.size} values for {self.fitted.size}'
        cols = values.reshape(self.n, self.k)[:, self._cols]
        if np.any((cols < self.lower) | (cols > self.upper)):
            return None, f'{path} ignored: its friction is outside the bounds; refit'
        self._serve(values, version)
        self.history = [(0, self.fitted.copy(), math.nan, 'fitted')] + [
            h for h in history if h[0] != 0 and h[1].shape == self.fitted.shape]
        self.next_version = max(next_version, version + 1)
        self.status = f'tracking: restored version {version} from {path.name}'
        return (FrictionUpdate(version, self.phi.copy(), math.nan, 'restored'),
                f'restored friction version {version} from {path}')


def save_state(doc, path):
    """Write a tracker's :meth:`FrictionTracker.to_dict` at ``path`` (atomic)."""
    return files.save(doc, path)


def track_recording(model, t, q, dq, tau, gains, tracker=None):
    """The served model's residual over a recording, sample by sample, through the node's
    path: a :class:`ResidualStream` (momentum observer) and, with ``tracker``, every
    accepted friction version served at once (``ServedDynamics.with_friction``,
    ``ResidualStream.serve``), as identifier_node does with friction tracking on.
    Without ``tracker`` the model stays frozen.

    Parameters
    ----------
    model : DynamicsModel
        The served (fitted) model.
    t : ndarray, (N,)
        Stamps (s).
    q, dq, tau : ndarray, (N, n)
        Joint positions (rad), velocities (rad/s) and torques (N·m), model order.
    gains : float or ndarray, (n,)
        Observer gains K (1/s).
    tracker : FrictionTracker, optional
        Built on ``model`` with the same gains; its state goes on from where it is.

    Returns
    -------
    residual : ndarray, (N, n)
        The observer's residual at every sample (N·m), contact band applied.
    updates : list of FrictionUpdate
        The versions served, in order.
    """
    served = ServedDynamics(model)
    stream = ResidualStream(served, gains)
    residual, updates = np.empty_like(q), []
    for k in range(len(t)):
        _, v, _, r, contact = stream.step(t[k], q[k], dq[k], tau[k])
        residual[k] = r
        if tracker is not None:
            update = tracker.update(t[k], v, stream.observer.residual, contact)
            if update is not None:
                served = served.with_friction(update.phi)
                stream.serve(served)
                updates.append(update)
    return residual, updates


__all__ = ['FrictionTracker', 'FrictionUpdate', 'STATE_FILE', 'TrackerSettings', 'model_id',
           'save_state', 'state_path', 'track_recording']
