"""What the identifier collects from live streams before a fit, ROS-free.

:class:`SampleBuffer` holds the (t, q, tau) samples of a 1 kHz torque stream in
preallocated arrays that double when full (no per-sample Python objects), and
:class:`MarkerLog` the excitation segment markers (JSON, docs/interfaces.md),
each kept once although transient_local topics deliver them again.
"""

import json
import threading

import numpy as np

from arm_dyn_id.data.angles import Unwrapper
from arm_dyn_id.errors import DataError


class SampleBuffer:
    """Growing (t, q, tau) arrays: amortised doubling, safe to read while appended to.

    Angles that a driver wrapped into one turn are held unwrapped
    (:class:`arm_dyn_id.data.angles.Unwrapper`; :attr:`wraps` counts the turns taken out).

    Parameters
    ----------
    n_joints : int
    capacity : int
        Initial number of samples; it doubles when full.
    """

    def __init__(self, n_joints, capacity=65536):
        if capacity < 1:
            raise ValueError(f'capacity {capacity} must be >= 1 sample')
        self.n = int(n_joints)
        self.count = 0
        self._t = np.empty(capacity)
        self._q = np.empty((capacity, self.n))
        self._tau = np.empty((capacity, self.n))
        self._lock = threading.Lock()
        self._unwrap = Unwrapper(self.n)

    @property
    def wraps(self):
        """Whole turns taken out of each joint's angle so far, (n,) int."""
        return self._unwrap.wraps.copy()

    @property
    def capacity(self):
        return len(self._t)

    def append(self, t, q, tau):
        """One sample: time (s), q (n,) rad, tau (n,) N·m."""
        with self._lock:
            k = self.count
            if k == len(self._t):
                # new arrays: views handed out by snapshot() keep the old ones intact
                cap = 2 * len(self._t)
                self._t = np.resize(self._t, cap)
                self._q = np.resize(self._q, (cap, self.n))
                self._tau = np.resize(self._tau, (cap, self.n))
            self._t[k] = t
            self._q[k] = self._unwrap(q)
            self._tau[k] = tau
            self.count = k + 1

    def snapshot(self):
        """Views of the samples so far: t (N,), q (N, n), tau (N, n).

        Rows below ``count`` are never rewritten, so the views stay valid while
        samples keep arriving.
        """
        with self._lock:
            k = self.count
            return self._t[:k], self._q[:k], self._tau[:k]


class MarkerLog:
    """Segment markers in arrival order, each (segment_id, phase, t) kept once."""

    def __init__(self):
        self.markers = []
        self._keys = set()

    def __len__(self):
        return len(self.markers)

    def add(self, text):
        """Parse one marker message; returns the marker dict, or None if already kept.

        Raises
        ------
        DataError
            If ``text`` is not a JSON object with ``phase`` and a numeric ``t``.
        """
        try:
            marker = json.loads(text)
            key = (marker.get('segment_id'), marker['phase'], float(marker['t']))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DataError(f'{exc} ({text[:80]!r}); see docs/interfaces.md') from exc
        if key in self._keys:
            return None
        self._keys.add(key)
        self.markers.append(marker)
        return marker
