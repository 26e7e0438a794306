"""Find reciprocating sweeps in recorded joint angles when a bag has no segment markers.

A bag recorded with plain ``ros2 bag record`` (no ``excitation_segments``) still
holds the seed 000 excitation (eq. 11): one joint moves at constant speed while
the others hold still, then comes back. :func:`detect_sweeps` finds those spans
from t and q alone and :func:`markers_from_sweeps` writes them as segment markers
in the format of docs/interfaces.md, so :func:`arm_dyn_id.identification.pairing.average_pairs`
works on them unchanged.

Method (per joint j):

1. velocity from a central difference over ``window`` seconds, by default the
   shortest span (at least 50 ms, at most 1 s) over which the recording's own encoder
   noise (:func:`encoder_noise`) leaves a velocity noise of a quarter of ``min_speed``
   (:func:`sweep_window`): 1e-4 rad of noise at 1 kHz gave 3e-3 rad/s over 50 ms, the
   joints held still seemed to move at a tenth of a 3 °/s sweep's speed, and no sweep
   was found. Steps 3-4 then take each run's velocity again over the span that keeps
   its noise at a quarter of ``speed_tolerance`` × the run's speed (a fast or short
   sweep keeps its 50 ms, a slow one through a noisy encoder gets more);
2. *runs*: maximal spans where |v_j| > ``min_speed`` with one sign;
3. the run's sweep speed is the median |v_j| over the run; the *sweep* is the longest
   stretch within ``speed_tolerance`` of that speed (dips out of the band shorter than a
   window bridged), less half a window at each end (the ramps at both ends are left
   out, and a fast move into the sweep that a long span merged with it); when that
   finds no sweep, other speed levels of the run are tried, the one with the longest
   stretch first (a sweep and the move after it merged into one run);
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


def smoothed_velocity(t, q, window=0.05, at=None):
    """Central-difference velocity over about ``window`` seconds.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    window : float
        Difference span (s); longer spans average out encoder noise.
    at : ndarray of int, (M,), optional
        Only these rows (the same values as the whole result's rows).

    Returns
    -------
    ndarray, (N, n) or (M, n)
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
    rows = np.arange(N) if at is None else np.asarray(at)
    hi = np.minimum(rows + k, N - 1)
    lo = np.maximum(rows - k, 0)
    return (q[hi] - q[lo]) / (t[hi] - t[lo])[:, None]


def encoder_noise(q):
    """rad, (n,): the white noise σ of each joint's angle, from its second differences
    (1.4826·MAD / √6, each joint over its own finite samples). A smooth motion's own
    second difference is far below it at the rates of a recording except in its ramps,
    which the median leaves out; a quantised encoder on slow motion gives 0."""
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] < 3:
        return np.zeros(q.shape[-1] if q.ndim else 0)
    d2 = np.diff(q, n=2, axis=0)
    out = np.zeros(q.shape[1])
    for j in range(q.shape[1]):
        col = d2[np.isfinite(d2[:, j]), j]
        if len(col):
            out[j] = 1.4826 * np.median(np.abs(col - np.median(col))) / np.sqrt(6.0)
    return out


#: rad/s: a joint counts as moving above this speed (:func:`detect_sweeps`' default);
#: above the velocity noise, below the slowest sweep (seed 000: ~0.02-0.05 rad/s).
MOVING_SPEED = 2e-3
#: s: the velocity span of :func:`sweep_window`, at least and at most.
SHORTEST_WINDOW, LONGEST_WINDOW = 0.05, 1.0
#: A speed is told from the velocity noise when it is this many times that noise.
NOISE_MARGIN = 4.0


def _noise_speed(sigma, span):
    """rad/s: :data:`NOISE_MARGIN` × the velocity noise (√2 σ / span) of a central
    difference over ``span`` s of angles with white noise ``sigma`` rad."""
    return NOISE_MARGIN * np.sqrt(2.0) * sigma / span


def sweep_window(q, min_speed=MOVING_SPEED, sigma=None):
    """s: the central-difference span whose velocity noise, from the noisiest joint's
    :func:`encoder_noise` (``sigma`` when given), is 1 / :data:`NOISE_MARGIN` of
    ``min_speed``, within [:data:`SHORTEST_WINDOW`, :data:`LONGEST_WINDOW`]."""
    if sigma is None:
        sigma = float(np.max(encoder_noise(q), initial=0.0))
    # _noise_speed falls as 1 / span: the span where it equals min_speed
    return float(np.clip(_noise_speed(sigma, 1.0) / min_speed, SHORTEST_WINDOW,
                         LONGEST_WINDOW))


def _longest_span(mask, gap):
    """[start, stop) of the longest stretch of ``mask`` whose False gaps are all shorter
    than ``gap`` samples (noise dips out of the band), or None if ``mask`` is all False.
    A run's speed within the band: a fast move into the sweep's start, merged with it
    by a long velocity span across a short settle, is left out (it is above the band)."""
    runs = _runs(mask)
    if not len(runs):
        return None
    best, first, last = None, runs[0][0], runs[0][1]
    for a, b in runs[1:]:
        if a - last < gap:
            last = b
            continue
        if best is None or last - first > best[1] - best[0]:
            best = (first, last)
        first, last = a, b
    if best is None or last - first > best[1] - best[0]:
        best = (first, last)
    return int(best[0]), int(best[1])


def _runs(mask):
    """[start, stop) of the True runs of a bool array."""
    edges = np.diff(np.concatenate([[0], mask.view(np.int8), [0]]))
    return np.column_stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)])


def detect_sweeps(t, q, window=None, min_speed=MOVING_SPEED, speed_tolerance=0.05,
                  still_fraction=0.1, min_duration=0.5):
    """Constant-speed sweeps of one joint at a time, in time order.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    window : float, optional
        Velocity difference span (s); default :func:`sweep_window` (from the encoder
        noise in ``q``).
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
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    sigma = float(np.max(encoder_noise(q), initial=0.0))
    fixed = window is not None
    if not fixed:
        # which joint moves, and when: the span that keeps still joints under min_speed
        window = sweep_window(q, min_speed, sigma)
    v = smoothed_velocity(t, q, window)
    found = []
    for j in range(q.shape[1]):
        for sign in (1, -1):
            for a, b in _runs(sign * v[:, j] > min_speed):
                if t[b - 1] - t[a] < min_duration:
                    continue
                if fixed:
                    span, vel, parts = window, v[a:b], [(0, b - a)]
                else:
                    # the run's own span: short enough for a fast or short sweep, long
                    # enough that its speed stays within the tolerance band through the
                    # noise (a quarter of it); the run cut again on that velocity (a long
                    # detection span merges a move into a sweep across a short settle)
                    guess = float(np.median(np.abs(v[a:b, j])))
                    span = sweep_window(q, speed_tolerance * guess, sigma)
                    vel = smoothed_velocity(t, q, span, at=np.arange(a, b))
                    moving = max(min_speed, _noise_speed(sigma, span))
                    parts = _runs(sign * vel[:, j] > moving)
                half = max(1, int(round(0.5 * span / dt))) if dt > 0 else 1
                for c, d in parts:
                    sweep = _flat_sweep(t, np.abs(vel[c:d]), j, a + c, half, speed_tolerance,
                                        still_fraction, min_duration)
                    if sweep is not None:
                        found.append(DetectedSweep(j, sign, *sweep))
    return sorted(found, key=lambda s: s.start)


#: Speed levels (quantiles of a run's speed) tried when the run's median speed finds no
#: sweep in it (:func:`_flat_sweep`).
PLATEAU_QUANTILES = np.linspace(0.05, 0.95, 19)


def _flat_sweep(t, speed, j, offset, half, speed_tolerance, still_fraction, min_duration):
    """(start, stop, speed) of the constant-speed sweep of joint ``j`` in a run whose
    speeds (rows from sample ``offset``) are ``speed``, or None (:func:`detect_sweeps`
    steps 3-4).

    The sweep's speed is the run's median speed; when that finds none, the speed level
    (:data:`PLATEAU_QUANTILES` of the run's) with the longest stretch in its band is
    tried, then the next, a stretch kept only where its speed holds level
    (:func:`_level`): a sweep and the move after it can form one run, when the joint
    keeps its direction through a short settle that a long velocity span (a noisy
    encoder's) smooths over, and the run's median is then neither's (a UR5 with 1e-3 rad
    of encoder noise lost both backward passes of its elbow so, and its model was 12 %
    off)."""
    if len(speed) < 2:
        return None
    plateau = float(np.median(speed[:, j]))
    found = _sweep_at(t, speed, j, offset, half, plateau, speed_tolerance, still_fraction,
                      min_duration)
    if found is not None:
        return found
    # no level can pass where the other joints never stand still for a sweep's length
    # (a move between poses: most runs that reach this point). A stretch _sweep_at keeps
    # has speed >= plateau (1 - tolerance) and the others <= still_fraction x plateau, so
    # every sample of it passes this test: it prunes nothing that could be found
    others = np.delete(speed, j, axis=1)
    if others.size and speed_tolerance < 1:
        quiet = np.all(others <= still_fraction / (1 - speed_tolerance) * speed[:, [j]],
                       axis=1)
        if not any(t[offset + b - 1] - t[offset + a] >= min_duration
                   for a, b in _runs(quiet)):
            return None
    levels = np.quantile(speed[:, j], PLATEAU_QUANTILES)
    spans = [_longest_span(np.abs(speed[:, j] - level) <= speed_tolerance * level, 2 * half)
             for level in levels]
    order = sorted((k for k, span in enumerate(spans) if span is not None and levels[k] > 0),
                   key=lambda k: spans[k][0] - spans[k][1])
    for k in order:
        found = _sweep_at(t, speed, j, offset, half, float(levels[k]), speed_tolerance,
                          still_fraction, min_duration)
        if found is not None and _level(speed[found[0] - offset:found[1] - offset, j],
                                        speed_tolerance * found[2]):
            return found
    return None


#: A stretch's speed holds level (:func:`_level`) when the medians of its thirds lie
#: within this share of the speed band's half-width of each other: constant-speed sweeps
#: of a UR5 through 1-2e-3 rad of encoder noise read at most 0.16 (0.8 % of their
#: speed), the crests of a real UR10e's 0.1 Hz sinusoidal oscillations 0.48 or more.
LEVEL_SHARE = 0.25


def _level(speed, tolerance):
    """Whether a stretch's speed holds level: the medians of its thirds within
    :data:`LEVEL_SHARE` of ``tolerance`` (rad/s, the band's half-width) of each other. A
    constant-speed sweep's do through the noise; the crest of an oscillation, whose speed
    rises and falls within the band, does not (its middle third runs faster than its
    ends), and there the passes' accelerations, the same at the same angle both ways,
    would not cancel in their average."""
    thirds = [np.median(part) for part in np.array_split(np.asarray(speed), 3) if len(part)]
    return len(thirds) == 3 and max(thirds) - min(thirds) <= LEVEL_SHARE * tolerance


def _sweep_at(t, speed, j, offset, half, plateau, speed_tolerance, still_fraction,
              min_duration):
    """:func:`_flat_sweep` at one speed ``plateau``: the longest stretch within
    ``speed_tolerance`` of it, less half a window at each end, kept when it lasts
    ``min_duration`` and the other joints stay still; its speed is ``plateau``."""
    flat = _longest_span(np.abs(speed[:, j] - plateau) <= speed_tolerance * plateau, 2 * half)
    if flat is None:
        return None
    # a smoothed speed at sample i already sees half a window ahead
    start, stop = flat[0] + half, flat[1] - half
    if stop - start < 2 or t[offset + stop - 1] - t[offset + start] < min_duration:
        return None
    others = np.delete(speed[start:stop], j, axis=1)
    # a NaN among the others' speeds (a sample lost) cannot vouch that they stood still
    if others.size and (not np.all(np.isfinite(others)) or
                        others.max() > still_fraction * plateau):
        return None
    return offset + start, offset + stop, plateau


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


#: Default quasi-static thresholds: joint speed (rad/s), joint acceleration
#: (rad/s²) and shortest run kept (s). At 0.05 rad/s and 0.2 rad/s² the inertial
#: and Coriolis torques of a 5 kg, 1 m arm stay near 0.1 N·m.
QUASI_STATIC_SPEED = 0.05
QUASI_STATIC_ACCELERATION = 0.2
QUASI_STATIC_DURATION = 0.2


def filtered_derivatives(t, q, window=0.25, dq=None):
    """Zero-phase smoothed q, q̇ and q̈ of samples with possibly uneven stamps.

    q is interpolated onto a uniform grid at the median sample step, smoothed
    and differentiated there by a Savitzky-Golay filter of order 2 over
    ``window`` seconds (a symmetric local polynomial: no phase lag), and read
    back at the sample times.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s); steps may vary (100 Hz RTDE logs).
    q : ndarray, (N, n)
        Joint angles (rad).
    window : float
        Filter span (s).
    dq : ndarray, (N, n), optional
        Measured velocity (rad/s); when given it is returned as q̇ (smoothed)
        and q̈ is its filtered derivative.

    Returns
    -------
    q_s : ndarray, (N, n)
        Smoothed angles (rad).
    dq : ndarray, (N, n)
        rad/s.
    ddq : ndarray, (N, n)
        rad/s².

    Raises
    ------
    DataError
        Shapes that do not match, times that do not increase, too few samples.
    """
    # here: the identifier node imports this module, and serving needs no filter
    # (scipy.linalg and scipy.ndimage, 0.2 s of its start)
    from arm_dyn_id.data.filters import savgol_filter

    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape} and positions {q.shape} must be (N,) and (N, n)')
    N = t.shape[0]
    if N < 5:
        raise DataError(f'{N} samples are too few to estimate joint speeds')
    steps = np.diff(t)
    if np.any(steps <= 0):
        raise DataError('sample times must strictly increase to estimate joint speeds')
    dt = float(np.median(steps))
    grid = t[0] + dt * np.arange(int(np.floor((t[-1] - t[0]) / dt)) + 1)
    k = max(2, int(round(0.5 * window / dt)))
    length = min(2 * k + 1, grid.size - (1 - grid.size % 2))
    if length < 3:
        raise DataError(f'{N} samples over {t[-1] - t[0]:.3g} s are too few to estimate '
                        'joint speeds')

    def on_grid(x):
        return np.column_stack([np.interp(grid, t, x[:, j]) for j in range(x.shape[1])])

    def back(x):
        return np.column_stack([np.interp(t, grid, x[:, j]) for j in range(x.shape[1])])

    qg = on_grid(q)
    polyorder = min(2, length - 1)
    q_s = back(savgol_filter(qg, length, polyorder, axis=0))
    if dq is None:
        v = back(savgol_filter(qg, length, polyorder, deriv=1, delta=dt, axis=0))
        a = back(savgol_filter(qg, length, polyorder, deriv=2, delta=dt, axis=0))
    else:
        dq = np.asarray(dq, dtype=float)
        if dq.shape != q.shape:
            raise DataError(f'velocities {dq.shape} must match positions {q.shape}')
        vg = on_grid(dq)
        v = back(savgol_filter(vg, length, polyorder, axis=0))
        a = back(savgol_filter(vg, length, polyorder, deriv=1, delta=dt, axis=0))
    return q_s, v, a


def quasi_static_mask(t, q, dq=None, max_speed=QUASI_STATIC_SPEED,
                      max_acceleration=QUASI_STATIC_ACCELERATION,
                      min_duration=QUASI_STATIC_DURATION, window=0.25):
    """Samples where every joint moves slowly enough for τ ≈ G(q) + friction.

    A sample is quasi-static when, for every joint, |q̇| <= ``max_speed`` and
    |q̈| <= ``max_acceleration`` (q̇ and q̈ from :func:`filtered_derivatives`),
    and it lies in a run of such samples lasting at least ``min_duration``.

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s), even or uneven steps.
    q : ndarray, (N, n)
        Joint angles (rad).
    dq : ndarray, (N, n), optional
        Measured joint velocities (rad/s); estimated from q when absent.
    max_speed : float or array_like (n,)
        rad/s, per joint or for all.
    max_acceleration : float or array_like (n,)
        rad/s², per joint or for all.
    min_duration : float
        Shortest run kept (s); shorter dips below the thresholds (a reversal
        of a fast motion) are not quasi-static.
    window : float
        Derivative filter span (s).

    Returns
    -------
    ndarray of bool, (N,)
    """
    t = np.asarray(t, dtype=float)
    _, v, a = filtered_derivatives(t, q, window, dq)
    n = v.shape[1]
    vmax = np.broadcast_to(np.asarray(max_speed, dtype=float), (n,))
    amax = np.broadcast_to(np.asarray(max_acceleration, dtype=float), (n,))
    slow = np.all(np.abs(v) <= vmax, axis=1) & np.all(np.abs(a) <= amax, axis=1)
    mask = np.zeros_like(slow)
    for a0, b0 in _runs(slow):
        if t[b0 - 1] - t[a0] >= min_duration:
            mask[a0:b0] = True
    return mask


def static_holds(t, q, mask, max_drift=2e-3, min_duration=0.3, trim=0.05):
    """Spans where the arm holds one pose: quasi-static and q within ``max_drift``.

    Each run of ``mask`` is cut into holds greedily: a hold grows while every
    joint stays within ``max_drift`` of its first sample, and is kept when it
    lasts ``min_duration`` after ``trim`` seconds are dropped at both ends
    (settling after a move).

    Parameters
    ----------
    t : ndarray, (N,)
        Increasing sample times (s).
    q : ndarray, (N, n)
        Joint angles (rad).
    mask : ndarray of bool, (N,)
        Quasi-static samples (:func:`quasi_static_mask`).
    max_drift : float
        Largest excursion of any joint within a hold (rad).
    min_duration : float
        Shortest hold kept (s).
    trim : float
        Seconds dropped at each end of a hold.

    Returns
    -------
    list of (int, int)
        ``(start, stop)`` index ranges ``[start, stop)`` in time order.
    """
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    holds = []
    for a0, b0 in _runs(mask):
        start = int(a0)
        while start < b0:
            dev = np.max(np.abs(q[start:b0] - q[start]), axis=1)
            out = np.flatnonzero(dev > max_drift)
            stop = start + int(out[0]) if out.size else int(b0)
            lo = int(np.searchsorted(t, t[start] + trim))
            hi = int(np.searchsorted(t, t[stop - 1] - trim, side='right'))
            if hi - lo >= 2 and t[hi - 1] - t[lo] >= min_duration:
                holds.append((lo, hi))
            start = max(stop, start + 1)
    return holds
