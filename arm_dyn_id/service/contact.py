"""Contact thresholds that hold on a real arm: the band, persistence, holding friction.

The momentum observer (:mod:`arm_dyn_id.service.dynamics`) gives r, the external torque
estimate per joint. On a real arm r is not zero without contact: the model is wrong by a
few per cent in motion (more at high speed and acceleration, and where friction turns at
zero speed), and at rest the joints hold a stiction torque the model cannot know (any
value up to the static friction, set when the arm stopped). A constant threshold is
either too low in motion or at rest, or too high to see a push. This module holds:

**The band** (:class:`ContactThresholds`), per joint i, N·m::

    standstill (the whole arm still, |q̇_j| < still_velocity, for settle_time):  s_i
    otherwise:  c0_i + cv_i ‖q̇‖ + ca_i ‖q̈‖  [+ h_i while |q̇_i| < breakaway_velocity,
                                              or while the arm starts]

with ‖·‖ the Euclidean norm over the joints (rad/s, rad/s²): model errors on one joint
come from the motion of all of them. q̈ is a causal estimate (first-order low-pass of the
difference of q̇, ``acceleration_cutoff_hz``). h_i is the holding bound below (the static
friction level): a joint that is slow or still while the arm moves holds a friction torque
the model cannot know (stiction, breakaway), up to that level; and for ``settle_time``
after a standstill (a start) every joint's friction passes from what it held to sliding,
a step the observer follows with its lag.

**Persistence.** A joint is over its band when ``|r_i| > band_i``; contact is flagged
when some joint has stayed over its band for ``persistence`` seconds, and released when
every joint has stayed within its band as long. A spike shorter than ``persistence`` is
never a contact; every contact is flagged ``persistence`` later than the crossing (the
delay this adds).

**Holding friction.** While the arm is still (every |q̇_j| < ``still_velocity``), a
tracker follows each joint's residual slowly (time constant ``holding_time``;
``settle_time / 4`` during the first ``settle_time`` of each stop, when the stiction
torques are set) and is bounded by ``holding_bounds`` (the model's static friction
level, Coulomb plus Stribeck, times a factor); when the arm moves every offset decays to
0 (``release_time``: moving, the friction is the model's again; a joint held still while
others move keeps its stiction in the residual, and the motion band, calibrated on such
motion, covers it). The
residual reported and judged is ``r − offset``, so at rest it reflects external force.
While a joint is over its band or contact is flagged the tracker is frozen (at most
``max_freeze`` seconds, after which an excursion that does not end is taken as a new
holding state, bounded as always).
Cost in sensitivity: a push that grows slower than the tracker is partly absorbed: a
force ramping at ρ N·m/s leaves about ``ρ·holding_time`` N·m in the residual (until the
offset hits its bound; then all of the excess shows), so it is flagged once
``ρ·holding_time`` exceeds the standstill band; and a push that starts within
``settle_time`` of the arm stopping is taken as holding torque up to the bound. After a
start or restart of the observer nothing is flagged for ``settle_time``.

**Calibration** (:func:`calibrate`): the residual of no-contact recordings, through the
same tracker, reduced to what the detector judges (the smallest |r| over every
``persistence`` window: a single-sample spike cannot set a threshold); the standstill
band is ``margin`` times its ``quantile`` over standstill samples; the motion band is the
smallest non-negative plane ``c0 + cv‖q̇‖ + ca‖q̈‖`` over the ``quantile`` of each state
bin (a grid of speed x acceleration bins), times ``margin``. Saved as
``<model dir>/contact_thresholds.yaml`` (:data:`FILE_NAME`, :meth:`ContactThresholds.save`).
"""

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import ConfigError

#: the file in a model folder that holds the thresholds the node uses by default
FILE_NAME = 'contact_thresholds.yaml'
SCHEMA = 'arm_dyn_id/contact_thresholds'
VERSION = 1

#: default settings (s, rad/s, Hz); chosen on simulated data (docs/contact.md)
PERSISTENCE = 0.05
STILL_VELOCITY = 0.01
BREAKAWAY_VELOCITY = 0.05
ACCELERATION_CUTOFF_HZ = 5.0
HOLDING_TIME = 1.0
RELEASE_TIME = 0.04
SETTLE_TIME = 0.3
MAX_FREEZE = 3.0
#: holding bound = this x the model's static friction (Coulomb + Stribeck) per joint
HOLDING_FACTOR = 1.5
QUANTILE = 0.999
MARGIN = 3.0
#: Calibration recordings with less standstill than this (s) have not shown the arm's
#: holds, starts and stops: the thresholds say so (``calibration['note']``).
SEEN_STILL_SECONDS = 1.0


def _vec(values, n, what, allow_inf=False):
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size == 1:
        arr = np.full(n, float(arr[0]))
    ok = np.isfinite(arr) | (allow_inf & (arr == np.inf))
    if arr.shape != (n,) or not np.all(ok) or np.any(arr < 0):
        raise ConfigError(f'{what} = {arr.tolist()} must be one value >= 0 per joint ({n})')
    return arr


@dataclass(frozen=True)
class ContactThresholds:
    """The contact band per joint and state, persistence and holding-friction settings.

    Parameters
    ----------
    joints : tuple of str
    standstill : ndarray, (n,)
        Band while the whole arm is still (N·m); ``inf`` leaves a joint out.
    base, per_velocity, per_acceleration : ndarray, (n,)
        Band in motion: ``base + per_velocity·‖q̇‖ + per_acceleration·‖q̈‖`` (N·m,
        N·m·s/rad, N·m·s²/rad).
    persistence : float
        Seconds a joint must stay over its band before contact is flagged (0: at once).
    still_velocity : float
        A joint is still below this |q̇| (rad/s).
    acceleration_cutoff_hz : float
        Cut-off of the causal q̈ estimate.
    holding_bounds : ndarray, (n,)
        Largest holding offset tracked per joint (N·m); 0 switches the tracker off. Also
        added to a joint's motion band while its |q̇_i| < ``breakaway_velocity``.
    breakaway_velocity : float
        rad/s.
    holding_time, release_time, settle_time, max_freeze : float
        Tracker time constants at rest and in motion, the settling window after a stop
        or a (re)start, the longest freeze during a contact (s).
    calibration : dict
        How the bands were derived (recordings, quantile, margin, samples, gains).
    """

    joints: tuple
    standstill: np.ndarray
    base: np.ndarray
    per_velocity: np.ndarray
    per_acceleration: np.ndarray
    persistence: float = PERSISTENCE
    still_velocity: float = STILL_VELOCITY
    acceleration_cutoff_hz: float = ACCELERATION_CUTOFF_HZ
    holding_bounds: np.ndarray = None
    breakaway_velocity: float = BREAKAWAY_VELOCITY
    holding_time: float = HOLDING_TIME
    release_time: float = RELEASE_TIME
    settle_time: float = SETTLE_TIME
    max_freeze: float = MAX_FREEZE
    calibration: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.joints)
        object.__setattr__(self, 'joints', tuple(str(j) for j in self.joints))
        for name in ('standstill', 'base'):
            object.__setattr__(self, name, _vec(getattr(self, name), n, name, allow_inf=True))
        for name in ('per_velocity', 'per_acceleration'):
            object.__setattr__(self, name, _vec(getattr(self, name), n, name))
        bounds = 0.0 if self.holding_bounds is None else self.holding_bounds
        object.__setattr__(self, 'holding_bounds',
                           _vec(bounds, n, 'holding_bounds', allow_inf=True))
        for name in ('persistence', 'still_velocity', 'acceleration_cutoff_hz',
                     'breakaway_velocity', 'holding_time', 'release_time', 'settle_time',
                     'max_freeze'):
            value = float(getattr(self, name))
            positive = name in ('still_velocity', 'acceleration_cutoff_hz', 'holding_time',
                                'release_time')
            if not np.isfinite(value) or value < 0 or (positive and value == 0):
                raise ConfigError(f'contact thresholds: {name} = {value} must be finite and '
                                  + ('> 0' if positive else '>= 0'))
            object.__setattr__(self, name, value)

    @property
    def n(self):
        return len(self.joints)

    @classmethod
    def constant(cls, joints, values, persistence=0.0):
        """Constant thresholds (N·m per joint, or one for all; ``inf`` or 0: joint left out),
        no holding tracker: what the node's ``contact_thresholds`` parameter gives."""
        n = len(joints)
        v = np.atleast_1d(np.asarray(values, dtype=float))
        v = np.full(n, float(v[0])) if v.size == 1 else v
        v = np.where(v > 0, v, np.inf)
        return cls(tuple(joints), v, v, np.zeros(n), np.zeros(n), persistence=persistence,
                   holding_bounds=np.zeros(n), settle_time=0.0)

    def band(self, dq, speed, acceleration, standstill, starting=False):
        """The band (N·m), (n,), in a state: q̇ (n,) rad/s, ‖q̇‖, ‖q̈‖ (rad/s²), arm still,
        arm starting (within ``settle_time`` of leaving a standstill)."""
        if standstill:
            return self.standstill
        return self.base + self.per_velocity * speed + self.per_acceleration * acceleration \
            + self.friction_term(dq, starting)

    def friction_term(self, dq, starting=False):
        """The holding bound of every joint slower than ``breakaway_velocity``, and of
        every joint while the arm starts (N·m); dq (n,) or (N, n), starting bool or (N,)."""
        slow = np.abs(dq) < self.breakaway_velocity
        if np.ndim(starting):
            starting = np.asarray(starting, dtype=bool)[:, None]
        return np.where(slow | starting, self.holding_bounds, 0.0)

    def with_settings(self, **changes):
        """A copy with some fields changed (e.g. ``persistence``)."""
        return replace(self, **changes)

    # the file ---------------------------------------------------------------
    def to_dict(self):
        def floats(a):
            return [float(x) if np.isfinite(x) else '.inf' for x in np.asarray(a, dtype=float)]
        return {
            'schema': SCHEMA, 'version': VERSION, 'joints': list(self.joints),
            'units': {'bands': 'N·m', 'per_velocity': 'N·m per rad/s of ‖q̇‖',
                      'per_acceleration': 'N·m per rad/s² of ‖q̈‖', 'times': 's'},
            'standstill': floats(self.standstill), 'base': floats(self.base),
            'per_velocity': floats(self.per_velocity),
            'per_acceleration': floats(self.per_acceleration),
            'persistence': self.persistence, 'still_velocity': self.still_velocity,
            'acceleration_cutoff_hz': self.acceleration_cutoff_hz,
            'breakaway_velocity': self.breakaway_velocity,
            'holding': {'bounds': floats(self.holding_bounds), 'time': self.holding_time,
                        'release_time': self.release_time, 'settle_time': self.settle_time,
                        'max_freeze': self.max_freeze},
            'calibration': _plain(self.calibration)}

    @classmethod
    def from_dict(cls, doc, source='contact thresholds'):
        if not isinstance(doc, dict) or doc.get('schema') != SCHEMA:
            raise ConfigError(f'{source}: not a contact thresholds file (schema {SCHEMA!r})')
        if not isinstance(doc.get('version'), int) or doc['version'] > VERSION:
            raise ConfigError(f'{source}: version {doc.get("version")!r} not readable by this '
                              f'arm_dyn_id (reads <= {VERSION})')

        def floats(a):
            return [float('inf') if x == '.inf' else float(x) for x in a]
        try:
            hold = doc.get('holding') or {}
            return cls(tuple(doc['joints']), floats(doc['standstill']), floats(doc['base']),
                       floats(doc['per_velocity']), floats(doc['per_acceleration']),
                       persistence=doc['persistence'], still_velocity=doc['still_velocity'],
                       acceleration_cutoff_hz=doc['acceleration_cutoff_hz'],
                       breakaway_velocity=doc.get('breakaway_velocity', BREAKAWAY_VELOCITY),
                       holding_bounds=floats(hold.get('bounds', [0.0])),
                       holding_time=hold.get('time', HOLDING_TIME),
                       release_time=hold.get('release_time', RELEASE_TIME),
                       settle_time=hold.get('settle_time', SETTLE_TIME),
                       max_freeze=hold.get('max_freeze', MAX_FREEZE),
                       calibration=doc.get('calibration') or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f'{source}: {exc}') from exc

    def save(self, path):
        """Write the YAML file (atomically); returns its path."""
        import yaml
        path = Path(path)
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        tmp = path.with_name(path.name + '.tmp')
        tmp.write_text('# contact thresholds of arm_dyn_id (docs/contact.md)\n' + text)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path, joints=None):
        """Read a thresholds file; ``joints`` given: refuse one of other joints."""
        import yaml
        path = Path(path)
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f'contact thresholds {path}: not YAML ({exc})') from exc
        out = cls.from_dict(doc, source=f'contact thresholds {path}')
        if joints is not None and tuple(joints) != out.joints:
            raise ConfigError(f'contact thresholds {path} are of joints {list(out.joints)}, '
                              f'the model has {list(joints)}')
        return out


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def thresholds_file(model_path):
    """``<model dir>/contact_thresholds.yaml`` of a model file (or of a model folder)."""
    p = Path(model_path)
    return (p if p.is_dir() else p.parent) / FILE_NAME


def model_fingerprint(model):
    """sha256 of a model's identified values (base parameters and friction), or None: the
    thresholds are of the model they were calibrated with."""
    import hashlib
    beta, phi = getattr(model, 'beta', None), getattr(model, 'phi', None)
    if beta is None:
        return None
    values = np.concatenate([np.ravel(beta), np.ravel(phi if phi is not None else [])])
    return hashlib.sha256(np.asarray(values, dtype='<f8').tobytes()).hexdigest()


def calibrated_thresholds(model_file, joints, gains, model=None):
    """The thresholds a node uses by default: the model folder's file, when there is one
    of these joints calibrated with these observer gains.

    Parameters
    ----------
    model_file : str or path-like or None
        The model served (its folder holds :data:`FILE_NAME`); empty: none.
    joints : sequence of str
    gains : array_like
        The observer gains served (1/s), one or one per joint.
    model : DynamicsModel, optional
        The model served: thresholds calibrated with another model are not used.

    Returns
    -------
    (ContactThresholds or None, str)
        The thresholds, and a sentence for the node's status (why none, or which file).
    """
    if not model_file:
        return None, ''
    path = thresholds_file(model_file)
    if not path.is_file():
        return None, f'no {FILE_NAME} beside the model'
    try:
        th = ContactThresholds.load(path, joints=joints)
    except (ConfigError, OSError) as exc:
        return None, f'{path} not used: {exc}'
    stored = th.calibration.get('observer_gains')
    n = len(tuple(joints))
    g = np.atleast_1d(np.asarray(gains, dtype=float))
    g = np.full(n, float(g[0])) if g.size == 1 else g
    if stored is not None and (len(stored) != n or not np.allclose(stored, g)):
        return None, (f'{path} not used: calibrated with observer_gains {list(stored)}, '
                      f'served with {g.tolist()}')
    mine, theirs = model_fingerprint(model), th.calibration.get('model_sha256')
    if mine is not None and theirs is not None and mine != theirs:
        return None, (f'{path} not used: calibrated with another model than the one served '
                      '(calibrate again: arm-dyn-id residual MODEL BAG... --calibrate)')
    return th, f'{path} (persistence {th.persistence:g} s)'


def holding_bounds(model, factor=HOLDING_FACTOR):
    """Per-joint bound of the holding offset: ``factor`` x the model's static friction
    (|Coulomb| + |Stribeck|, N·m), (n,); zeros when the model has no friction table."""
    try:
        table = model.friction_table()
    except AttributeError:
        return np.zeros(len(model.joint_names))
    zero = np.zeros(len(model.joint_names))
    return factor * (np.abs(table.get('coulomb', zero)) + np.abs(table.get('stribeck', zero)))


class ContactDetector:
    """The band, persistence and holding tracker applied to one residual stream.

    Parameters
    ----------
    thresholds : ContactThresholds

    Attributes
    ----------
    residual : ndarray, (n,)
        Of the last sample, like every attribute below:
        ``r − offset`` (N·m): the external torque estimate.
    offset : ndarray, (n,)
        The tracked holding torque (N·m).
    band : ndarray, (n,)
    over : ndarray of bool, (n,)
        Joints over their band now.
    joints_flagged : ndarray of bool, (n,)
        Joints over their band for ``persistence`` (what set or holds the contact).
    contact : bool
    speed, acceleration : float
        ‖q̇‖ (rad/s), ‖q̈‖ (rad/s²).
    allowance : ndarray, (n,)
        The friction allowance in the band (N·m): the holding bound of each joint slower
        than ``breakaway_velocity``, and of every joint while the arm starts (the first
        ``settle_time`` after a standstill).
    standstill, settling, starting : bool
    """

    def __init__(self, thresholds):
        self.thresholds = thresholds
        self._w_acc = 2.0 * math.pi * thresholds.acceleration_cutoff_hz
        self._tracking = bool(np.any(thresholds.holding_bounds > 0))
        self._neg_bounds = -thresholds.holding_bounds
        self._tau_fast = max(thresholds.settle_time, 1e-3) / 4.0
        self._none = np.zeros(thresholds.n, dtype=bool)
        self._none.flags.writeable = False
        self.reset()

    def reset(self):
        """Forget the past (an observer restart)."""
        n = self.thresholds.n
        self._t0 = self._t = self._dq = None
        self._ddq = np.zeros(n)
        self._still_since = None
        self._moving_since = None
        self._over_since = np.full(n, np.nan)
        self._over_start = None
        self._under_since = None
        self._contact_since = None
        self.offset = np.zeros(n)
        self.residual = np.zeros(n)
        self.band = np.full(n, np.inf)
        self.over = np.zeros(n, dtype=bool)
        self.joints_flagged = np.zeros(n, dtype=bool)
        self.contact = False
        self.speed = self.acceleration = 0.0
        self.allowance = np.zeros(n)
        self.standstill = self.settling = self.starting = False

    def update(self, t, dq, r):
        """One sample: (external torque estimate (n,), contact) out.

        Parameters
        ----------
        t : float
            Stamp (s), increasing (reset on an observer restart).
        dq : ndarray, (n,)
            q̇ the observer used (rad/s).
        r : ndarray, (n,)
            The observer's residual (N·m).
        """
        th = self.thresholds
        dq = np.asarray(dq, dtype=float)
        if self._t is None:
            self._t0, dt = t, 0.0
        else:
            dt = t - self._t
            alpha = 1.0 - math.exp(-self._w_acc * dt)
            self._ddq += alpha * ((dq - self._dq) / dt - self._ddq)
        self._t, self._dq = t, dq
        abs_dq = np.abs(dq)
        still = float(abs_dq.max()) < th.still_velocity
        if not still:
            if self.standstill:
                # a start: the joints' friction passes from what they held to sliding
                self._moving_since = t
            self._still_since = None
        elif self._still_since is None:
            self._still_since = t
        still_for = t - self._still_since if still else -1.0
        self.settling = t - self._t0 < th.settle_time
        self.standstill = still_for >= th.settle_time
        self.speed = math.sqrt(float(dq @ dq))
        self.acceleration = math.sqrt(float(self._ddq @ self._ddq))
        # frozen while a joint is over its band (an excursion is not absorbed before it is
        # judged) and during a contact, at most max_freeze s
        frozen = (self.contact or self._over_start is not None) and \
            t - (self._contact_since if self.contact else self._over_start) < th.max_freeze
        if self._tracking and dt > 0 and not frozen:
            if still:
                fast = self.settling or still_for < th.settle_time
                tau = self._tau_fast if fast else th.holding_time
                offset = self.offset + (1.0 - math.exp(-dt / tau)) * (r - self.offset)
            else:
                offset = self.offset * math.exp(-dt / th.release_time)
            self.offset = np.clip(offset, self._neg_bounds, th.holding_bounds, out=offset)
        self.residual = r - self.offset
        self.starting = not self.standstill and self._moving_since is not None and \
            t - self._moving_since < th.settle_time
        if self.standstill:
            self.allowance = np.zeros(th.n)
            self.band = th.standstill
        else:
            self.allowance = th.friction_term(abs_dq, self.starting) if self._tracking \
                else np.zeros(th.n)
            self.band = th.base + th.per_velocity * self.speed + \
                th.per_acceleration * self.acceleration + self.allowance
        over = np.abs(self.residual) > self.band
        if self.settling:
            over[:] = False
        self.over = over
        if over.any():
            since = self._over_since
            since[over & np.isnan(since)] = t
            since[~over] = np.nan
            self._over_start = float(np.nanmin(since))
            # a tiny tolerance: a persistence of k sample steps is met on the k-th step
            held = over & (t - since >= th.persistence - 1e-9)
        else:
            if self._over_start is not None:
                self._over_since[:] = np.nan
                self._over_start = None
            held = self._none
        self.joints_flagged = held
        if not self.contact:
            if held.any():
                self.contact, self._contact_since, self._under_since = True, t, None
        elif self._over_start is not None:
            self._under_since = None
        else:
            if self._under_since is None:
                self._under_since = t
            if t - self._under_since >= th.persistence - 1e-9:
                self.contact, self._contact_since = False, None
        return self.residual, self.contact

    #: what :meth:`run` returns per sample, and the attribute each comes from
    RUN_FIELDS = ('residual', 'contact', 'band', 'offset', 'flagged', 'speed', 'acceleration',
                  'standstill', 'settling', 'starting')

    def never_flags(self):
        """Whether no sample can be over its band: every standstill and motion base band
        infinite, the other terms finite and not negative (a calibration's probe)."""
        th = self.thresholds
        return bool(np.all(np.isposinf(th.standstill)) and np.all(np.isposinf(th.base))
                    and all(np.all(np.isfinite(a) & (a >= 0)) for a in
                            (th.per_velocity, th.per_acceleration, th.holding_bounds)))

    def run(self, t, dq, r, resets=None):
        """Many samples, as :meth:`update` takes them one by one (the same result, to
        rounding, and the same state after).

        A detector that :meth:`never_flags` (a calibration's probe) has no contact logic
        to follow sample by sample: only the q̈ estimate, the standstill states and the
        holding tracker are stepped, the rest is computed over all samples at once.
        Otherwise the samples go through :meth:`update`.

        Parameters
        ----------
        t : ndarray, (N,)
            Stamps (s).
        dq, r : ndarray, (N, n)
            The q̇ the observer used (rad/s) and its residual (N·m).
        resets : ndarray of bool, (N,), optional
            :meth:`reset` before these samples (the observer restarted there).

        Returns
        -------
        dict of ndarray
            :data:`RUN_FIELDS`: ``residual``, ``band``, ``offset`` (N, n); ``flagged``
            (N, n) bool; ``speed``, ``acceleration`` (N,); ``contact``, ``standstill``,
            ``settling``, ``starting`` (N,) bool.
        """
        t = np.asarray(t, dtype=float)
        dq = np.asarray(dq, dtype=float)
        r = np.asarray(r, dtype=float)
        N, n = dq.shape
        resets = np.zeros(N, dtype=bool) if resets is None else np.asarray(resets, dtype=bool)
        out = {key: np.zeros((N, n)) for key in ('residual', 'band', 'offset')}
        out['flagged'] = np.zeros((N, n), dtype=bool)
        out['speed'], out['acceleration'] = np.zeros(N), np.zeros(N)
        for key in ('contact', 'standstill', 'settling', 'starting'):
            out[key] = np.zeros(N, dtype=bool)
        if not self.never_flags():
            attribute = {'flagged': 'joints_flagged'}
            for k in range(N):
                if resets[k]:
                    self.reset()
                self.update(float(t[k]), dq[k], r[k])
                for key in self.RUN_FIELDS:
                    out[key][k] = getattr(self, attribute.get(key, key))
            if N:
                self._dq = self._dq.copy()      # not a view of the caller's array
            return out
        if N:
            self._quiet_run(t, dq, r, resets, out)
        return out

    def _quiet_run(self, t, dq, r, resets, out):
        """:meth:`run` of a detector that never flags (see there)."""
        th = self.thresholds
        N, n = dq.shape
        step = np.zeros(N)
        step[1:] = np.diff(t)
        raw = np.zeros((N, n))
        with np.errstate(divide='ignore', invalid='ignore'):
            raw[1:] = (dq[1:] - dq[:-1]) / step[1:, None]
        abs_dq = np.abs(dq)
        still = (abs_dq.max(axis=1) < th.still_velocity).tolist()
        times = t.tolist()
        if self._t is not None and not resets[0]:       # going on from update / run
            step[0] = times[0] - self._t
            raw[0] = (dq[0] - self._dq) / step[0]
        ddq_rows, offsets = np.empty((N, n)), out['offset']
        standstill, settling, starting = out['standstill'], out['settling'], out['starting']
        ddq, offset = self._ddq, self.offset
        t0, t_prev = self._t0, self._t
        still_since, moving_since, was_standstill = \
            self._still_since, self._moving_since, self.standstill
        neg, bounds = self._neg_bounds, th.holding_bounds
        settle, w = th.settle_time, self._w_acc
        for k in range(N):
            tk = times[k]
            if resets[k]:
                ddq, offset = np.zeros(n), np.zeros(n)
                t0 = t_prev = still_since = moving_since = None
                was_standstill = False
            if t_prev is None:
                t0, dt = tk, 0.0
            else:
                dt = tk - t_prev
                ddq = ddq + (1.0 - math.exp(-w * dt)) * (raw[k] - ddq)
            t_prev = tk
            ddq_rows[k] = ddq
            if not still[k]:
                if was_standstill:
                    moving_since = tk
                still_since = None
            elif still_since is None:
                still_since = tk
            still_for = tk - still_since if still[k] else -1.0
            settling_k = tk - t0 < settle
            was_standstill = still_for >= settle
            if self._tracking and dt > 0:
                if still[k]:
                    fast = settling_k or still_for < settle
                    tau = self._tau_fast if fast else th.holding_time
                    offset = offset + (1.0 - math.exp(-dt / tau)) * (r[k] - offset)
                else:
                    offset = offset * math.exp(-dt / th.release_time)
                np.minimum(np.maximum(offset, neg, out=offset), bounds, out=offset)   # clip
            offsets[k] = offset
            settling[k], standstill[k] = settling_k, was_standstill
            starting[k] = not was_standstill and moving_since is not None and \
                tk - moving_since < settle
        out['residual'][:] = r - offsets
        out['speed'][:] = np.sqrt(np.einsum('ij,ij->i', dq, dq))
        out['acceleration'][:] = np.sqrt(np.einsum('ij,ij->i', ddq_rows, ddq_rows))
        # the motion band of every sample (no holding bound is 0 without the tracker)
        moving = th.band(abs_dq, out['speed'][:, None], out['acceleration'][:, None], False,
                         starting)
        out['band'][:] = np.where(standstill[:, None], th.standstill, moving)
        # the state update() leaves after the last sample (never over a band: no contact)
        self._t0, self._t, self._dq, self._ddq = t0, t_prev, dq[-1].copy(), ddq.copy()
        self._still_since, self._moving_since = still_since, moving_since
        self.offset = offset.copy()
        self.residual = out['residual'][-1].copy()
        self.allowance = th.friction_term(abs_dq[-1], bool(starting[-1])) \
            if self._tracking and not standstill[-1] else np.zeros(n)
        self.band = out['band'][-1].copy()
        self.over = np.zeros(n, dtype=bool)
        self.joints_flagged = self._none
        self.speed, self.acceleration = float(out['speed'][-1]), float(out['acceleration'][-1])
        self.standstill, self.settling = bool(standstill[-1]), bool(settling[-1])
        self.starting = bool(starting[-1])


# ---------------------------------------------------------------------------
# episodes and statistics

def episodes(t, contact, residual, joints_flagged=None, joints=None):
    """Contact episodes of a flagged stream.

    Parameters
    ----------
    t : ndarray, (N,)
    contact : ndarray of bool, (N,)
    residual : ndarray, (N, n)
        External torque estimate (N·m).
    joints_flagged : ndarray of bool, (N, n), optional
        Joints over their band for the persistence (else: every joint over 0).
    joints : sequence of str

    Returns
    -------
    list of dict
        ``start``, ``end`` (s: first and last flagged sample), ``duration``, ``joints``
        (flagged during it), ``peak`` (largest |external torque| in it, N·m),
        ``peak_joint``, ``peak_time``, ``samples``.
    """
    t = np.asarray(t, dtype=float)
    c = np.asarray(contact, dtype=bool)
    r = np.asarray(residual, dtype=float)
    n = r.shape[1] if r.ndim == 2 else 0
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
    if not c.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], c.astype(np.int8), [0]])))
    out = []
    for a, b in zip(edges[::2], edges[1::2]):
        seg = np.abs(r[a:b])
        k, j = np.unravel_index(int(np.argmax(seg)), seg.shape)
        flagged = joints_flagged[a:b].any(axis=0) if joints_flagged is not None else \
            np.ones(n, dtype=bool)
        out.append({'start': float(t[a]), 'end': float(t[b - 1]),
                    'duration': float(t[b - 1] - t[a]),
                    'joints': [joints[i] for i in np.flatnonzero(flagged)],
                    'peak': float(seg[k, j]), 'peak_joint': joints[j],
                    'peak_time': float(t[a + k]), 'samples': int(b - a)})
    return out


def residual_statistics(residual, joints, standstill=None):
    """Per-joint statistics of the external torque estimate (N·m).

    Returns
    -------
    dict
        ``{joint: {rms, max_abs, p99_abs, mean, standstill_rms}}``.
    """
    r = np.asarray(residual, dtype=float)
    out = {}
    for i, j in enumerate(joints):
        x = r[:, i]
        still = x[standstill] if standstill is not None and np.any(standstill) else None
        out[j] = {'rms': float(np.sqrt(np.mean(x ** 2))), 'max_abs': float(np.max(np.abs(x))),
                  'p99_abs': float(np.quantile(np.abs(x), 0.99)), 'mean': float(np.mean(x)),
                  'standstill_rms': None if still is None else
                  float(np.sqrt(np.mean(still ** 2)))}
    return out


# ---------------------------------------------------------------------------
# calibration

def persisted(t, residual, window):
    """The smallest |r| over every window of ``window`` seconds ending at each sample,
    (N, n): what the detector judges with that persistence (a spike shorter than the
    window does not count)."""
    t = np.asarray(t, dtype=float)
    a = np.abs(np.asarray(residual, dtype=float))
    if window <= 0 or len(t) == 0:
        return a
    start = np.searchsorted(t, t - window + 1e-9)
    idx = np.arange(len(t))
    out = a.copy()
    lag = 1
    while True:
        ok = idx - lag >= start
        if not ok.any():
            break
        out[ok] = np.minimum(out[ok], a[idx[ok] - lag])
        lag += 1
    return out


@dataclass
class CalibrationRun:
    """What :func:`calibrate` needs of one no-contact recording, per sample (N,):
    ``t``, ``residual`` (N, n) after the holding tracker, ``velocity`` (N, n) rad/s,
    ``speed``, ``acceleration``, ``standstill``, ``settling`` (bool), ``source``,
    ``starting`` (bool, the arm within ``settle_time`` of leaving a standstill; None:
    never)."""

    t: np.ndarray
    residual: np.ndarray
    velocity: np.ndarray
    speed: np.ndarray
    acceleration: np.ndarray
    standstill: np.ndarray
    settling: np.ndarray
    source: str = ''
    starting: np.ndarray = None


def _envelope(v_mid, a_mid, v_low, a_low, need):
    """A plane (c0, cv, ca >= 0) over every bin's need: the slopes of the trend of the
    needs against the bins' median states (non-negative least squares, so the band
    grows beyond the states seen as the errors grew within them), the intercept raised
    until the plane covers each bin's need at its lowest state."""
    # here: the detector node never calibrates
    from arm_dyn_id.identification.estimators import bounded_solve
    scale = np.array([1.0, max(float(np.max(v_mid)), 1e-9), max(float(np.max(a_mid)), 1e-9)])
    A = np.column_stack([np.ones_like(v_mid), v_mid, a_mid]) / scale
    # sparse: with one or two bins, or bins in a line, the slopes the bins cannot tell
    # stay at 0 and the intercept carries the need (as non-negative least squares does)
    coef = bounded_solve(A.T @ A, A.T @ need, np.ones(3, dtype=bool), sparse=True)[0] / scale
    coef[0] += max(0.0, float(np.max(need - coef[0] - coef[1] * v_low - coef[2] * a_low)))
    return coef


def calibrate(runs, joints, holding_bounds=None, quantile=QUANTILE, margin=MARGIN,
              persistence=PERSISTENCE, bins=4, min_bin=20, floor=None, **settings):
    """Contact thresholds from no-contact recordings for a stated false-alarm target.

    Parameters
    ----------
    runs : sequence of CalibrationRun
        The residual of no-contact recordings through a detector of the same settings
        (:func:`arm_dyn_id.service.dynamics.calibration_run`).
    joints : sequence of str
    holding_bounds : array_like, (n,), optional
    quantile : float
        The false-alarm target: per joint and state bin, at most ``1 − quantile`` of the
        calibration samples have a persisted residual above ``band / margin``.
    margin : float
        Factor (>= 1) over that quantile: room for what the recordings did not show.
    persistence : float
        s; the residual is reduced to its smallest value over every such window.
    bins : int
        Speed and acceleration bins (quantiles of the motion samples) per axis.
    min_bin : int
        Fewer samples than this: a bin is merged into the plane's fit only through its
        neighbours (left out).
    floor : array_like, (n,), optional
        Smallest band per joint (N·m); default the 99th percentile of the standstill
        (else all) persisted residual, so a band never sits inside the noise.
    **settings
        Further :class:`ContactThresholds` fields (``still_velocity``, ...).

    Returns
    -------
    ContactThresholds
        ``calibration`` says the samples, sources, quantile, margin and bins.
    """
    joints = tuple(joints)
    n = len(joints)
    if not 0.5 <= quantile < 1 or not margin >= 1:
        raise ConfigError(f'quantile {quantile} must be in [0.5, 1) and margin {margin} >= 1')
    m, v, a, still, fr = [], [], [], [], []
    still_seconds = 0.0
    probe = ContactThresholds(joints, np.inf, np.inf, 0.0, 0.0, holding_bounds=holding_bounds,
                              **{k: x for k, x in settings.items()
                                 if k == 'breakaway_velocity'})
    for run in runs:
        keep = ~np.asarray(run.settling, dtype=bool)
        m.append(persisted(run.t, run.residual, persistence)[keep])
        starting = False if run.starting is None else np.asarray(run.starting, dtype=bool)
        fr.append(probe.friction_term(np.asarray(run.velocity), starting)[keep])
        v.append(np.asarray(run.speed)[keep])
        a.append(np.asarray(run.acceleration)[keep])
        still.append(np.asarray(run.standstill, dtype=bool)[keep])
        steps = np.diff(np.asarray(run.t, dtype=float))
        if steps.size:
            still_seconds += float(still[-1].sum() * np.median(steps))
    if not m or sum(len(x) for x in m) == 0:
        raise ConfigError('no calibration samples: give no-contact recordings of the arm')
    m, v, a, still, fr = (np.concatenate(x) for x in (m, v, a, still, fr))
    moving = ~still
    # in motion, what the friction term of slow joints does not cover
    m_motion = np.maximum(m - fr, 0.0)
    if floor is None:
        ref = m[still] if still.sum() >= min_bin else m
        floor = np.quantile(ref, 0.99, axis=0)
    floor = _vec(floor, n, 'floor')
    if still.sum() >= min_bin:
        standstill = margin * np.maximum(np.quantile(m[still], quantile, axis=0), floor)
    else:
        standstill = None
    plane = np.zeros((n, 3))
    binned, need = [], []
    if moving.sum() >= min_bin:
        vm, am, mm = v[moving], a[moving], m_motion[moving]
        ve = np.unique(np.quantile(vm, np.linspace(0, 1, bins + 1)))
        ae = np.unique(np.quantile(am, np.linspace(0, 1, bins + 1)))
        vi = np.clip(np.searchsorted(ve, vm, side='right') - 1, 0, max(len(ve) - 2, 0))
        ai = np.clip(np.searchsorted(ae, am, side='right') - 1, 0, max(len(ae) - 2, 0))
        lo_v, lo_a, mid_v, mid_a = [], [], [], []
        for i in np.unique(vi):
            for k in np.unique(ai):
                sel = (vi == i) & (ai == k)
                if sel.sum() < min_bin:
                    continue
                lo_v.append(float(vm[sel].min()))
                lo_a.append(float(am[sel].min()))
                mid_v.append(float(np.median(vm[sel])))
                mid_a.append(float(np.median(am[sel])))
                need.append(np.quantile(mm[sel], quantile, axis=0))
                binned.append({'speed_from': lo_v[-1], 'acceleration_from': lo_a[-1],
                               'samples': int(sel.sum())})
    in_motion = bool(len(need))
    if in_motion:
        # the motion's state bins with enough samples each (speed, acceleration planes)
        lo_v, lo_a, need = np.array(lo_v), np.array(lo_a), np.array(need)
        mid_v, mid_a = np.array(mid_v), np.array(mid_a)
        for j in range(n):
            plane[j] = _envelope(mid_v, mid_a, lo_v, lo_a, np.maximum(need[:, j], floor[j]))
        plane *= margin
    elif standstill is not None:
        # no motion bin holds min_bin samples (an arm that holds still, moved in brief
        # jerks): the standstill band everywhere
        plane[:, 0] = standstill
    else:
        raise ConfigError(f'too few calibration samples to derive thresholds: '
                          f'{int(still.sum())} at standstill and {int(moving.sum())} in '
                          f'motion, no state bin with {min_bin}; give longer no-contact '
                          'recordings of the arm at rest and in motion')
    if standstill is None:
        standstill = plane[:, 0].copy()
    calibration = {'quantile': quantile, 'margin': margin, 'persistence_window': persistence,
                   'samples': int(len(m)), 'standstill_samples': int(still.sum()),
                   'standstill_seconds': still_seconds,
                   'motion_samples': int(moving.sum()), 'bins': binned,
                   'floor': floor.tolist(),
                   'sources': [r.source for r in runs]}
    notes = []
    if not in_motion:
        notes.append(f'no motion state bin holds {min_bin} samples: the standstill band is '
                     'used in motion too; calibrate on recordings of the arm moving as it '
                     'will work')
    if still_seconds < SEEN_STILL_SECONDS:
        # a Fourier block moves all the time: a start from rest, where a joint creeps
        # through its friction's least known speeds, was not seen (on the real UR10e the
        # fit's own thresholds gave one 94 ms false alarm as a recording started)
        notes.append(f'{still_seconds:.2g} s of standstill (less than '
                     f'{SEEN_STILL_SECONDS:g} s): holds, starts and stops were not seen'
                     + (", and the standstill band is the motion band's base"
                        if still.sum() < min_bin else '') +
                     '; calibrate on recordings with holds (arm-dyn-id residual MODEL '
                     'BAG... --calibrate)')
    if notes:
        calibration['note'] = '; '.join(notes)
    calibration.update(settings.pop('calibration', {}))
    return ContactThresholds(joints, standstill, plane[:, 0], plane[:, 1], plane[:, 2],
                             persistence=persistence, holding_bounds=holding_bounds,
                             calibration=calibration, **settings)


__all__ = ['FILE_NAME', 'CalibrationRun', 'ContactDetector', 'ContactThresholds', 'calibrate',
           'calibrated_thresholds', 'episodes', 'holding_bounds', 'model_fingerprint',
           'persisted',
           'residual_statistics', 'thresholds_file']
