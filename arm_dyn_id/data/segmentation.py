"""Find reciprocating sweeps in recorded joint angles when a bag has no segment markers.

A bag recorded with plain ``ros2 bag record`` (no ``excitation_segments``) still
holds the seed 000 excitation (eq. 11): one joint moves at constant speed while
the others hold still, then comes back. :func:`detect_sweeps` finds those spans
from t and q alone and :func:`markers_from_sweeps` writes them as segment markers
in the format of docs/interfaces.md, so :func:`arm_dyn_id.identification.pairing.average_pairs`
works on them unchanged.

Method (per joint j):

1. velocity from a central difference over ``window`` seconds (encoder noise of
   1e-5 rad gives ~3e-4 rad/s of velocity noise at 50 ms);
2. *runs*: maximal spans where |v_j| > ``min_speed`` with one sign;
3. the run's sweep speed is the median |v_j| over the run; the *sweep* is the span
   from the first to the last sample with |v_j| >= (1 - ``speed_tolerance``) x that
   speed (the ramps at both ends are left out);
4. it is kept when it lasts ``min_duration`` seconds and every other joint's |v|
   stays below ``still_fraction`` x the sweep speed over it.

All thresholds but ``min_speed`` are relative to the sweep's own speed, so slow
and fast sweeps are found alike.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError


@dataclass(frozen=True)
class DetectedSweep:
    """One constant-speed pass of one joint found in the data.

    Attributes
    ----------
    joint_index : int
    direction : int
        +1 (q increasing) or -1.
    start, stop : int
        Sample index range [start, stop).
    speed : float
        Median |q̇| over the sweep (rad/s).
    """

    joint_index: int
    direction: int
    start: int
    stop: int
    speed: float


def smoothed_velocity(t, q, window=0.05):
    """Central-difference velocity over about ``window`` seconds.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    window : float
        Difference span (s); longer spans average out encoder noise.

    Returns
    -------
    ndarray, (N, n)
        rad/s.
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    N = t.shape[0]
    if N < 3:
        raise DataError(f'{N} samples are too few to find sweeps')
    dt = float(np.median(np.diff(t)))
    if not dt > 0:
        raise DataError('sample times must increase to find sweeps')
    k = max(1, int(round(0.5 * window / dt)))
    hi = np.minimum(np.arange(N) + k, N - 1)
    lo = np.maximum(np.arange(N) - k, 0)
    return (q[hi] - q[lo]) / (t[hi] - t[lo])[:, None]


def _runs(mask):
    """[start, stop) of the True runs of a bool array."""
    edges = np.diff(np.concatenate([[0], mask.view(np.int8), [0]]))
    return np.column_stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)])


def detect_sweeps(t, q, window=0.05, min_speed=2e-3, speed_tolerance=0.05,
                  still_fraction=0.1, min_duration=0.5):
    """Constant-speed sweeps of one joint at a time, in time order.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    window : float
        Velocity difference span (s).
    min_speed : float
        |q̇| (rad/s) above which a joint counts as moving; above the velocity
        noise, below the slowest sweep (seed 000 sweeps at ~0.02-0.05 rad/s).
    speed_tolerance : float
        Relative deviation from the sweep speed still counted as constant speed.
    still_fraction : float
        Other joints must stay below this fraction of the sweep speed.
    min_duration : float
        Shortest sweep kept (s).

    Returns
    -------
    list of DetectedSweep
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape} and positions {q.shape} must be (N,) and (N, n)')
    v = smoothed_velocity(t, q, window)
    speed = np.abs(v)
    half = max(1, int(round(0.5 * window / float(np.median(np.diff(t))))))
    found = []
    for j in range(q.shape[1]):
        for sign in (1, -1):
            for a, b in _runs(sign * v[:, j] > min_speed):
                if t[b - 1] - t[a] < min_duration:
                    continue
                plateau = float(np.median(speed[a:b, j]))
                flat = np.flatnonzero(speed[a:b, j] >= (1.0 - speed_tolerance) * plateau)
                # a smoothed speed at sample i already sees half a window ahead
                start, stop = a + int(flat[0]) + half, a + int(flat[-1]) + 1 - half
                if stop - start < 2:
                    continue
                if t[stop - 1] - t[start] < min_duration:
                    continue
                others = np.delete(speed[start:stop], j, axis=1)
                if others.size and others.max() > still_fraction * plateau:
                    continue
                found.append(DetectedSweep(j, sign, start, stop, plateau))
    return sorted(found, key=lambda s: s.start)


def markers_from_sweeps(t, sweeps, joints):
    """Segment markers (docs/interfaces.md) for detected sweeps.

    Each sweep gets a ``sweep`` marker at its first sample; the sample after it
    gets ``reversal`` when the next sweep is the same joint coming back, else
    ``settle``. Marker times are sample times, so
    :func:`arm_dyn_id.identification.pairing.sweeps_from_markers` recovers the exact ranges.

    Parameters
    ----------
    t : ndarray, (N,)
    sweeps : list of DetectedSweep
    joints : sequence of str

    Returns
    -------
    list of dict
        With ``detected: True`` on every marker.
    """
    t = np.asarray(t, dtype=float)
    markers = []
    for k, s in enumerate(sweeps):
        markers.append({'segment_id': k, 'joint': joints[s.joint_index],
                        'joint_index': int(s.joint_index), 'direction': int(s.direction),
                        'phase': 'sweep', 't': float(t[s.start]), 'speed': float(s.speed),
                        'detected': True})
        if s.stop < t.shape[0]:
            nxt = sweeps[k + 1] if k + 1 < len(sweeps) else None
            back = nxt is not None and nxt.joint_index == s.joint_index and \
                nxt.direction == -s.direction
            if nxt is not None and nxt.start <= s.stop:
                continue   # the next sweep starts right away: its marker ends this one
            markers.append({'segment_id': k, 'joint': joints[s.joint_index],
                            'joint_index': int(s.joint_index), 'direction': 0,
                            'phase': 'reversal' if back else 'settle',
                            't': float(t[s.stop]), 'detected': True})
    return markers


def detect_markers(t, q, joints, **options):
    """:func:`detect_sweeps` then :func:`markers_from_sweeps`.

    Raises
    ------
    DataError
        If no sweep is found (the data holds no one-joint constant-speed motion).
    """
    sweeps = detect_sweeps(t, q, **options)
    if not sweeps:
        raise DataError('no constant-speed sweep of a single joint found in the data '
                        '(and the bag has no excitation_segments markers): record the '
                        'reciprocating excitation, or lower min_speed')
    return markers_from_sweeps(t, sweeps, joints)
