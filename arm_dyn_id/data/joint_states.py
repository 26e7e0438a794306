"""One check of joint-state messages against the configured joints, ROS-free.

A ``sensor_msgs/JointState`` carries ``name`` and the arrays ``position``,
``velocity``, ``effort``, each either empty or one value per name. Every consumer
(recorder, identifier, excitation, simulated arm, offline reader) needs the same
thing from it: the indices that pick the configured joints out of the message, or
one named reason why the message is unusable. The reasons are a fixed vocabulary,
so that counters in diagnostics and bag summaries read the same everywhere:

================== ==========================================================
``empty_array``    a required array (``position``, ``effort``, ...) is empty
``length_mismatch`` a required array does not have one value per name
``duplicate_joints`` a joint name appears twice
``unknown_joints`` (strict checks only) a name that is not configured
``missing_joints`` a configured joint is not in the message
``non_finite``     a checked value of a configured joint is NaN or inf
================== ==========================================================

The mapping from a name list to indices is computed once per distinct name list.
"""

from typing import NamedTuple

import numpy as np

EMPTY_ARRAY = 'empty_array'
LENGTH_MISMATCH = 'length_mismatch'
DUPLICATE_JOINTS = 'duplicate_joints'
UNKNOWN_JOINTS = 'unknown_joints'
MISSING_JOINTS = 'missing_joints'
NON_FINITE = 'non_finite'
#: Every rejection reason, in the order the checks run.
REASONS = (EMPTY_ARRAY, LENGTH_MISMATCH, DUPLICATE_JOINTS, UNKNOWN_JOINTS, MISSING_JOINTS,
           NON_FINITE)
FIELDS = ('position', 'velocity', 'effort')
_PLURAL = {'position': 'positions', 'velocity': 'velocities', 'effort': 'efforts'}


class Rejection(NamedTuple):
    """Why a message is unusable: ``reason`` (one of :data:`REASONS`) and a sentence."""

    reason: str
    detail: str


class JointSample(NamedTuple):
    """The configured joints' values of one message, each (n,) in configured order.

    ``index`` picks them out of the message's arrays; an optional array that the
    message leaves empty (or gives with the wrong length) is None.
    """

    index: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


class JointStateCheck:
    """Checks joint names and arrays of messages against the configured joints.

    Parameters
    ----------
    joints : sequence of str, (n,)
        The configured joint order.
    strict : bool
        Refuse names that are not configured (queries); otherwise extra joints in a
        message are ignored (streams from a driver that publishes more joints).
    max_cached : int
        Distinct name lists whose index mapping is kept.
    """

    def __init__(self, joints, strict=False, max_cached=64):
        self.joints = tuple(str(j) for j in joints)
        self.strict = bool(strict)
        self._configured = frozenset(self.joints)
        self._cache = {}
        self._max = int(max_cached)

    @property
    def n_joints(self):
        return len(self.joints)

    def index(self, names):
        """Indices into a message's arrays that give configured order, or a rejection.

        Parameters
        ----------
        names : sequence of str
            The message's joint names, any order.

        Returns
        -------
        ndarray of int, (n,), read-only, or Rejection
            ``duplicate_joints``, ``unknown_joints`` (strict) or ``missing_joints``.
        """
        key = names if isinstance(names, tuple) else tuple(names)
        found = self._cache.get(key)
        if found is not None:
            return found
        found = self._map(key)
        if len(self._cache) >= self._max:
            self._cache.clear()
        self._cache[key] = found     # rejections too: a bad name list repeats at 1 kHz
        return found

    def _map(self, key):
        where = {}
        for i, name in enumerate(key):
            if name in where:
                return Rejection(DUPLICATE_JOINTS,
                                 f'joint {name!r} appears twice in {list(key)}')
            where[name] = i
        if self.strict:
            unknown = [name for name in key if name not in self._configured]
            if unknown:
                return Rejection(UNKNOWN_JOINTS, f'unknown joint {unknown[0]!r}; the '
                                 f'configured joints are {list(self.joints)}')
        missing = [j for j in self.joints if j not in where]
        if missing:
            return Rejection(MISSING_JOINTS, f'joint {missing[0]!r} is missing (got '
                             f'{list(key)}); give all of {list(self.joints)}')
        idx = np.array([where[j] for j in self.joints], dtype=np.intp)
        idx.setflags(write=False)
        return idx

    def check(self, names, position=(), velocity=(), effort=(), require=('position',),
              finite=('position',)):
        """Check one message; its configured joints' values, or why it is unusable.

        Parameters
        ----------
        names : sequence of str
            ``JointState.name``.
        position, velocity, effort : sequence of float
            The message's arrays, each empty or one value per name.
        require : tuple of str
            Arrays that must have one value per name (``empty_array`` if empty,
            ``length_mismatch`` otherwise). The others are used when they have one
            value per name and are None in the result when not.
        finite : tuple of str
            Arrays whose configured joints' values must be finite (``non_finite``).

        Returns
        -------
        JointSample or Rejection
        """
        arrays = {'position': position, 'velocity': velocity, 'effort': effort}
        n = len(names)
        for field in require:
            size = len(arrays[field])
            if size == 0:
                return Rejection(EMPTY_ARRAY, f'{field} is empty; it must give one value per '
                                 f'joint name ({n})')
            if size != n:
                return Rejection(LENGTH_MISMATCH, f'{n} names but {size} {_PLURAL[field]}')
        idx = self.index(names)
        if isinstance(idx, Rejection):
            return idx
        picked = {}
        for field in FIELDS:
            values = arrays[field]
            picked[field] = np.asarray(values, dtype=float)[idx] \
                if len(values) == n and n else None
        for field in finite:
            values = picked[field]
            if values is not None and not np.isfinite(values).all():
                bad = int(np.argmax(~np.isfinite(values)))
                return Rejection(NON_FINITE, f'{field} of {self.joints[bad]} is NaN or inf '
                                 f'({values[bad]})')
        return JointSample(idx, picked['position'], picked['velocity'], picked['effort'])

    def place(self, names):
        """Where each of a command's joints sits in the configured order, or a rejection.

        For commands that may name a subset of the joints (a ``JointTrajectory``).

        Returns
        -------
        list of int, (len(names),), or Rejection
            ``duplicate_joints`` or ``unknown_joints``.
        """
        seen = set()
        for name in names:
            if name in seen:
                return Rejection(DUPLICATE_JOINTS, f'joint {name!r} appears twice in '
                                 f'{list(names)}')
            seen.add(name)
            if name not in self._configured:
                return Rejection(UNKNOWN_JOINTS, f'joint {name!r} is not one of '
                                 f'{list(self.joints)}')
        return [self.joints.index(name) for name in names]

    def check_values(self, values, what='values'):
        """A command of one finite value per configured joint, (n,), or a rejection."""
        arr = np.asarray(values, dtype=float)
        if arr.shape != (self.n_joints,):
            return Rejection(LENGTH_MISMATCH, f'{arr.size} {what}, expected one per joint '
                             f'{list(self.joints)}')
        if not np.isfinite(arr).all():
            bad = int(np.argmax(~np.isfinite(arr)))
            return Rejection(NON_FINITE, f'{what}: the value of {self.joints[bad]} is NaN or '
                             f'inf ({arr[bad]})')
        return arr
