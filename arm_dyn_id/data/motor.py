"""Motor current to joint torque (seed 000 eq. 19).

Per joint ``i``::

    tau_i = sign_i * k_e,i * ratio_i * efficiency_i * (I_i - offset_i)

with ``k_e`` the torque constant at the joint side (N·m/A, gear ratio included
unless ``ratio`` is given separately), ``sign`` +1 or -1 and ``offset`` in A.
Measured messages may list joints in any order and carry extra joints; they are
matched by name, and the mapping is computed once per distinct name list.

Which conversion a consumer of ``joint_states`` applies is decided in one place,
:func:`effort_reading`: what is given explicitly (a parameter, a config), else what the
model file's ``measurement`` section says the fitted data carried
(:mod:`arm_dyn_id.model.files`), so a model fitted from currents is served from its file.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.data.joint_states import MISSING_JOINTS, JointStateCheck, Rejection
from arm_dyn_id.errors import ConfigError, DataError, JointNameError


def _per_joint(values, n, name, default):
    if values is None:
        values = default
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size == 1 and n > 1:
        arr = np.full(n, float(arr[0]))
    if arr.shape != (n,):
        raise ConfigError(f'{name} has {arr.size} values, expected one per joint ({n})')
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f'{name} = {arr.tolist()} contains NaN or inf')
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


class CurrentToTorque:
    """Convert motor currents (A) into joint torques (N·m), seed 000 eq. 19.

    Parameters
    ----------
    joints : sequence of str, (n,)
        Output order of every torque array.
    torque_constants : array_like, (n,)
        k_e at the joint side (N·m/A), > 0.
    current_signs : array_like, (n,), optional
        +1 or -1 (default +1).
    current_offsets : array_like, (n,), optional
        Current offsets (A) subtracted before scaling (default 0).
    gear_ratios, efficiencies : array_like, (n,), optional
        Separate factors multiplied into the gain (default 1).

    Raises
    ------
    ConfigError
        If a per-joint array has the wrong length, a sign is not ±1 or a
        constant is not positive.
    """

    def __init__(self, joints, torque_constants, current_signs=None, current_offsets=None,
                 gear_ratios=None, efficiencies=None):
        joints = tuple(str(j) for j in joints)
        if not joints:
            raise ConfigError('joints must name at least one joint')
        if len(set(joints)) != len(joints):
            raise ConfigError(f'joints = {list(joints)} repeats a name')
        n = len(joints)
        k_e = _per_joint(torque_constants, n, 'torque_constants', None)
        signs = _per_joint(current_signs, n, 'current_signs', 1.0)
        offsets = _per_joint(current_offsets, n, 'current_offsets', 0.0)
        ratios = _per_joint(gear_ratios, n, 'gear_ratios', 1.0)
        effs = _per_joint(efficiencies, n, 'efficiencies', 1.0)
        for name, arr in (('torque_constants', k_e), ('gear_ratios', ratios),
                          ('efficiencies', effs)):
            if np.any(arr <= 0):
                i = int(np.argmax(arr <= 0))
                raise ConfigError(f'{name}[{i}] ({joints[i]}) = {arr[i]} must be > 0')
        if np.any(np.abs(signs) != 1):
            i = int(np.argmax(np.abs(signs) != 1))
            raise ConfigError(f'current_signs[{i}] ({joints[i]}) = {signs[i]} must be +1 or -1')
        self.joints = joints
        self.torque_constants = k_e
        self.current_signs = signs
        self.current_offsets = offsets
        self.gear_ratios = ratios
        self.efficiencies = effs
        gains = signs * k_e * ratios * effs
        gains.setflags(write=False)
        self.gains = gains
        self._check = JointStateCheck(self.joints)

    @classmethod
    def from_config(cls, config):
        """Build from an :class:`arm_dyn_id.config.ArmConfig`."""
        return cls(config.joints, config.torque_constants, config.current_signs,
                   config.current_offsets, config.gear_ratios, config.efficiencies)

    @classmethod
    def from_dict(cls, data):
        """Build from a mapping with the keys of :meth:`to_dict` (a recording's config).

        Raises
        ------
        ConfigError
            If ``joints`` or ``torque_constants`` is missing.
        """
        for key in ('joints', 'torque_constants'):
            if key not in data:
                raise ConfigError(f'conversion config lacks {key!r}: keys are {sorted(data)}')
        return cls(data['joints'], data['torque_constants'], data.get('current_signs'),
                   data.get('current_offsets'), data.get('gear_ratios'),
                   data.get('efficiencies'))

    def to_dict(self):
        """Plain-Python description (lists of floats) that :meth:`from_dict` reads back."""
        return {
            'joints': list(self.joints),
            'torque_constants': self.torque_constants.tolist(),
            'current_signs': self.current_signs.tolist(),
            'current_offsets': self.current_offsets.tolist(),
            'gear_ratios': self.gear_ratios.tolist(),
            'efficiencies': self.efficiencies.tolist(),
        }

    @classmethod
    def from_measurement(cls, joints, section):
        """Build from a model file's ``measurement`` section of effort ``current`` (its
        arrays in the order of ``joints``, the model's).

        Raises
        ------
        ConfigError
            The section is not of effort current, or an array is wrong.
        """
        if not isinstance(section, dict) or section.get('effort') != 'current':
            raise ConfigError(f'measurement {section!r} is not of effort current: it has no '
                              'torque constants')
        return cls(joints, section.get('torque_constants'), section.get('current_signs'),
                   section.get('current_offsets'), section.get('gear_ratios'),
                   section.get('efficiencies'))

    def measurement(self, joints=None):
        """The model file's ``measurement`` section of this conversion (effort ``current``),
        its arrays in the order of ``joints`` (default :attr:`joints`).

        Raises
        ------
        JointNameError
            A joint of ``joints`` is not converted here.
        """
        conversion = self if joints is None else self.reordered(joints)
        return {'effort': 'current',
                **{k: v for k, v in conversion.to_dict().items() if k != 'joints'}}

    def reordered(self, joints):
        """The same conversion for the joints ``joints`` (a subset, any order).

        Raises
        ------
        JointNameError
            Naming the first joint of ``joints`` that is not converted here.
        """
        joints = tuple(str(j) for j in joints)
        if joints == self.joints:
            return self
        where = {j: i for i, j in enumerate(self.joints)}
        missing = [j for j in joints if j not in where]
        if missing:
            raise JointNameError(f'no torque constant for joint {missing[0]!r}: the conversion '
                                 f'is of {list(self.joints)}')
        idx = [where[j] for j in joints]
        return type(self)(joints, self.torque_constants[idx], self.current_signs[idx],
                          self.current_offsets[idx], self.gear_ratios[idx],
                          self.efficiencies[idx])

    @property
    def n_joints(self):
        return len(self.joints)

    def index_for(self, names):
        """Indices into a message's arrays that give config order, (n,) int.

        The mapping is the one JointState check of every consumer
        (:class:`~arm_dyn_id.data.joint_states.JointStateCheck`), raised as an error.

        Parameters
        ----------
        names : sequence of str
            Joint names of a message, any order; extra names are ignored.

        Raises
        ------
        JointNameError
            Naming the first configured joint that ``names`` lacks.
        DataError
            A name appears twice.
        """
        idx = self._check.index(names)
        if isinstance(idx, Rejection):
            if idx.reason == MISSING_JOINTS:
                raise JointNameError(idx.detail)
            raise DataError(idx.detail)
        return idx

    def reorder(self, names, values):
        """Pick ``values`` (one per name) into config order, (n,).

        Raises
        ------
        JointNameError
            A configured joint is missing from ``names``.
        DataError
            ``values`` and ``names`` differ in length.
        """
        values = np.asarray(values, dtype=float)
        if values.shape != (len(names),):
            raise DataError(f'{values.size} values for {len(names)} joint names')
        return values[self.index_for(names)]

    def convert(self, names, currents):
        """Torques (N·m) in config order for one message, (n,), seed 000 eq. 19.

        Parameters
        ----------
        names : sequence of str
            Joint names of the message, any order, extra joints ignored.
        currents : array_like, (len(names),)
            Motor currents (A).

        Returns
        -------
        ndarray, (n,)
            NaN or inf currents give NaN or inf torques: callers decide what to
            exclude; nothing is replaced silently.

        Raises
        ------
        JointNameError
            A configured joint is missing from ``names``.
        DataError
            ``currents`` and ``names`` differ in length.
        """
        return self.gains * (self.reorder(names, currents) - self.current_offsets)

    def convert_many(self, currents):
        """Vectorised conversion of currents already in config order.

        Parameters
        ----------
        currents : array_like, (N, n)
            Motor currents (A).

        Returns
        -------
        ndarray, (N, n)
            Joint torques (N·m).

        Raises
        ------
        DataError
            If the second dimension is not the number of joints.
        """
        currents = np.asarray(currents, dtype=float)
        if currents.ndim != 2 or currents.shape[1] != self.n_joints:
            raise DataError(f'currents have shape {currents.shape}, '
                            f'expected (N, {self.n_joints}) for joints {list(self.joints)}')
        torques = np.subtract(currents, self.current_offsets)
        torques *= self.gains       # in place: one (N, n) array, not two
        return torques


@dataclass(frozen=True)
class EffortReading:
    """How a consumer reads ``joint_states.effort`` as joint torque (:func:`effort_reading`).

    Attributes
    ----------
    effort : {'current', 'torque'}
    conversion : CurrentToTorque or None
        For ``current``, in the consumer's joint order; None for ``torque``.
    source : str
        Where the choice came from, in words (``config /x/arm.yaml``, ``the model file's
        measurement section``, ``given``).
    """

    effort: str
    conversion: object
    source: str

    @property
    def gains(self):
        """N·m per A at the joint, sign included, (n,); None for effort torque."""
        return None if self.conversion is None else self.conversion.gains

    @property
    def offsets(self):
        """Current offsets (A), (n,); None for effort torque."""
        return None if self.conversion is None else self.conversion.current_offsets

    def measurement(self):
        """This reading as a model file's ``measurement`` section (model/files.py)."""
        return {'effort': 'torque'} if self.conversion is None else \
            self.conversion.measurement()

    def describe(self):
        """One phrase for status and diagnostics lines."""
        if self.effort == 'torque':
            return f'torque in joint_states.effort ({self.source})'
        return f'current in joint_states.effort, converted by {self.source}'


#: How :func:`effort_reading` names the model file's section.
FROM_MODEL = "the model file's measurement section"


def effort_reading(joints, measurement=None, effort=None, config=None, model_joints=None,
                   need='joint_states.effort is read as a motor current'):
    """Which conversion of ``joint_states.effort`` to joint torque applies (seed 000 eq. 19).

    What is given explicitly wins: ``effort`` ``torque`` (no conversion), else the torque
    constants of ``config``; else the model file's ``measurement`` section (the effort the
    model was fitted from and its conversion); else there is none.

    Parameters
    ----------
    joints : sequence of str, (n,)
        The consumer's joint order: the conversion's arrays come in it.
    measurement : dict, optional
        The model's ``measurement`` section (``model.measurement``), or None (an older
        file, a fit that did not record it).
    effort : {'current', 'torque', 'auto'}, optional
        What the consumer was told effort is; ``'auto'`` or None: the model's.
    config : ArmConfig or CurrentToTorque, optional
        Torque constants configured explicitly (a config file, parameters).
    model_joints : sequence of str, optional
        The order of the section's arrays (the model's joints); default ``joints``.
    need : str
        Why a conversion is needed, for the error (a node's words).

    Returns
    -------
    EffortReading

    Raises
    ------
    ConfigError
        Effort is (or must be) a current and neither ``config`` nor the model gives torque
        constants: says what to give.
    JointNameError
        The configuration or the model lacks a joint of ``joints``.
    """
    if effort not in (None, 'auto', 'current', 'torque'):
        raise ConfigError(f'effort {effort!r} must be current, torque or auto')
    joints = tuple(joints)
    if effort == 'torque':
        return EffortReading('torque', None, 'given')
    if config is not None:
        conversion = config if isinstance(config, CurrentToTorque) else \
            CurrentToTorque.from_config(config)
        source = getattr(config, 'source', None)
        return EffortReading('current', conversion.reordered(joints),
                             f'config {source}' if source else 'the configured torque_constants')
    measured = (measurement or {}).get('effort')
    if measured == 'current':
        conversion = CurrentToTorque.from_measurement(model_joints or joints, measurement)
        return EffortReading('current', conversion.reordered(joints), FROM_MODEL)
    if measured == 'torque' and effort in (None, 'auto'):
        return EffortReading('torque', None, FROM_MODEL)
    model = ('the model was fitted from joint torques (its measurement section: effort torque)'
             if measured == 'torque' else
             'the model file has no measurement section (fitted before it was written, or '
             'from data of unknown effort)')
    raise ConfigError(f'{need} but no torque constants are configured and {model}: give '
                      'torque_constants (config_file), or read effort as torque')


#: relative difference of two readings' numbers taken as the same (a constant copied
#: from a printed line)
READING_RTOL = 1e-4
#: The arrays of a ``measurement`` section compared between a model and a reading, with
#: the absolute tolerance that tells them apart (``READING_RTOL`` besides)
_READING_KEYS = {'torque_constants': 0.0, 'current_signs': 0.0, 'current_offsets': 1e-9,
                 'gear_ratios': 0.0, 'efficiencies': 0.0}


def reading_differs(measured, effort, conversion, joints):
    """How a recording's effort reading differs from the one a model was fitted from (its
    ``measurement`` section), in words, or '' when it is the same.

    Parameters
    ----------
    measured : dict
        The model's ``measurement`` section.
    effort : {'current', 'torque'}
        How the recording is read.
    conversion : CurrentToTorque
        The recording's conversion (ignored for ``torque``).
    joints : sequence of str
        The model's joints (the section's order).
    """
    kind = measured.get('effort')
    if kind != effort:
        return (f'as {kind or "unknown"}, the recording as {effort} ('
                + ('--effort torque' if effort == 'torque' else 'motor current') + ')')
    if kind != 'current':
        return ''
    # both through the same conversion: a key the section leaves out is its default
    model = CurrentToTorque.from_measurement(joints, measured).measurement(joints)
    reading = conversion.measurement(joints)
    for key, atol in _READING_KEYS.items():
        a = np.asarray(model.get(key), dtype=float)
        b = np.asarray(reading.get(key), dtype=float)
        if a.shape != b.shape:
            return f'with {key} {a.tolist()}, the recording with {b.tolist()}'
        off = ~np.isclose(a, b, rtol=READING_RTOL, atol=atol)
        if off.any():
            which = ', '.join(f'{j} {x!r} (model) against {y!r}' for j, x, y in zip(
                np.asarray(joints)[off], a[off].tolist(), b[off].tolist()))
            return f'with other {key}: {which}'
    return ''


class StampJoiner:
    """Pair position samples with current samples from another topic by time.

    Each position waits until a current sample lies within ``tolerance`` of its
    time; the nearest one is taken. A position is given up (counted in
    ``unpaired``) once currents newer than its time + ``tolerance`` have arrived
    without a match, or when more than ``capacity`` positions wait. Both streams
    are expected in roughly increasing time order (1 kHz drivers).

    Parameters
    ----------
    tolerance : float
        Largest time difference (s) between a position and its current.
    capacity : int
        Most samples kept waiting on either side.
    """

    def __init__(self, tolerance, capacity=512):
        from collections import deque
        if not tolerance >= 0:
            raise ValueError(f'pairing tolerance {tolerance} must be >= 0 s')
        self.tolerance = float(tolerance)
        self.capacity = int(capacity)
        self._positions = deque()      # (t, item)
        self._currents = deque()       # (t, currents)
        self._newest_position = None
        self.unpaired = 0
        self.paired = 0

    def _nearest_current(self, t):
        best, best_dt = None, None
        for tc, cur in self._currents:
            dt = abs(tc - t)
            if dt <= self.tolerance and (best_dt is None or dt < best_dt):
                best, best_dt = cur, dt
        return best

    def _drain(self):
        """Pair waiting positions in order; returns [(item, currents), ...]."""
        ready = []
        newest = self._currents[-1][0] if self._currents else None
        while self._positions:
            t, item = self._positions[0]
            cur = self._nearest_current(t)
            if cur is not None:
                ready.append((item, cur))
                self.paired += 1
            elif newest is not None and newest > t + self.tolerance:
                self.unpaired += 1          # its current will not come any more
            else:
                break
            self._positions.popleft()
        # currents older than every waiting position (minus tolerance) are spent. With no
        # position waiting, the newest position seen is the horizon: currents that arrive
        # ahead of their positions (the executor serving one topic's queue before the
        # other's) are kept for them, not dropped for the newest current
        if self._positions:
            horizon = self._positions[0][0]
        else:
            horizon = self._newest_position if self._newest_position is not None else -np.inf
        while len(self._currents) > 1 and self._currents[0][0] < horizon - self.tolerance:
            self._currents.popleft()
        while len(self._positions) > self.capacity:
            self._positions.popleft()
            self.unpaired += 1
        while len(self._currents) > self.capacity:
            self._currents.popleft()
        return ready

    def add_position(self, t, item):
        """A position sample at time t (s); returns the pairs now complete."""
        t = float(t)
        self._positions.append((t, item))
        if self._newest_position is None or t > self._newest_position:
            self._newest_position = t
        return self._drain()

    def add_current(self, t, currents):
        """A current sample at time t (s); returns the pairs now complete."""
        self._currents.append((float(t), currents))
        return self._drain()
