"""Preparing a recording for a full-dynamics fit: resample, filter, differentiate, trim.

Only q and τ are measured; the model also needs q̇ and q̈. The steps, in order:

1. **Resampling** (:func:`resample`). Logs from real controllers are not evenly
   spaced (the UR RTDE log through ROS: ~100 Hz, steps of 2-34 ms). Rows with
   NaN/inf are dropped, stamps sorted, repeated stamps dropped, then q and τ are
   interpolated linearly onto a uniform grid at the median rate. A gap longer
   than ``max_gap`` (default 10 median steps) is refused: interpolating across it
   would invent motion.
2. **Cut-off** (:func:`choose_band`). When the excitation's highest harmonic is
   known (a Fourier plan), the cut-off is ``HARMONIC_FACTOR`` (5) times it.
   Otherwise it comes from the data, joint by joint. The spectrum of q
   (:func:`q_spectrum`: Welch of the first differences, their gain divided out)
   has a flat floor where white encoder, quantisation or interpolation noise
   dominates; the floor (:func:`noise_floor`) is its median over 0.1-0.3 x the
   rate. What stands above ``FLOOR_FACTOR`` (30) x the floor is the motion.
   Two numbers come from it:

   - the top of the motion's band: turned into velocity and summed over the
     moving joints, the frequency below which it holds all but ``POWER_LEFT``
     (1e-4, -40 dB) of its power (earlier versions took this of the raw velocity
     spectrum, which white noise fills up to the Nyquist frequency: at 500 Hz-2 kHz
     with encoder noise the cut-off became the rate limit);
   - the noise's limit: the cut-off at which the noise of q̈ below it,
     ``floor (2π)⁴ f_c⁵ / 5``, reaches ``ACCEL_NOISE`` (1e-4) of the motion's q̈
     power, for the joint that allows least (noise in the regressor biases the
     least-squares fit by about that fraction).

   The cut-off is the noise's limit, kept within ``LOW_BAND_FACTOR`` (3) and
   ``BAND_FACTOR`` (20) x the top of the band: as high as the noise allows (less
   of the record lost to the filter's edges, friction steps kept sharper in τ and
   the regressor alike), never into the motion. On the simulated realism matrix
   (bench/realism_matrix.py: three arms, 100 Hz-2 kHz, encoder noise 0-5e-4 rad
   and 17-bit quantisation, uneven stamps, dropped samples) the held-out error of
   this choice is within 1.25x of the best cut-off of a sweep in every cell. On the
   real UR10e Fourier runs (100 Hz) the top of the band is 0.7-1.2 Hz. A choice
   clipped to ``MIN_CUTOFF_HZ``, ``MAX_CUTOFF_HZ`` or ``RATE_LIMIT`` x the rate,
   or a record with no motion above the noise, carries a warning that names
   ``--cutoff`` (``CutoffChoice.warning``, ``info['cutoff_warning']``, and after
   ``WARNING:`` in ``cutoff_source``). How the cut-off was chosen is stated in
   the model file (``preparation.cutoff_source``).
3. **Zero-phase low-pass** (:func:`lowpass`): Butterworth of ``order`` run
   forward and backward (``sosfiltfilt``): no phase lag, so q, q̇, q̈ and τ stay
   aligned in time. τ gets the same filter as q for the fit (both sides of the
   linear equation see the same attenuation), and so do the friction columns
   (``sign(q̇)`` is a step; filtering τ but not the column would bias every
   parameter).
   The regressor ``Y(q, q̇, q̈)`` goes through the same filter too: the
   dynamics are nonlinear in q, so the torque has content above the motion's
   band (products of harmonics); filtering τ but not Y would remove it from one
   side of ``τ = Y θ`` only. (On the simulated TX-60 the difference is small:
   the rigid-body torque of a Fourier motion stays mostly inside the band; the
   step ``sign(q̇)`` is what needs it most, see ``features``.)
4. **Differentiation** (:func:`differentiate`): fourth-order central differences
   of the filtered q (5-point stencils for q̇ and q̈), taken before the last
   decimation. At a frequency f their relative errors are (ωh)⁴/30 and (ωh)⁴/90
   (ω = 2πf, h the step); ``np.gradient`` twice, used before, has (ωh)²/3 in q̈:
   for a 1 Hz harmonic at 100 Hz, 1.3e-3 against 2e-7.
5. **Edge trimming**: ``filtfilt`` transients reach about ``3 / cutoff`` seconds
   into the record; those samples are dropped at both ends.
6. **Decimation** (:func:`default_decimation`): after the filter nothing is left
   above the cut-off (8th-order roll-off in amplitude: -48 dB at twice the
   cut-off, beyond -100 dB at five times), so a 1 kHz record filtered at 5 Hz is
   100x oversampled. Keeping every d-th sample with ``rate / d ≥ 10·cutoff``
   (the new Nyquist frequency at 5x the cut-off) aliases nothing the fit can
   see and divides the regressor's cost (one pinocchio call per sample) by d.
   When d ≥ 8 (1 kHz data and a cut-off of a few Hz) the first factor d/4 is
   taken before the Butterworth filters by a polyphase linear-phase FIR
   (``resample_poly``: it computes only the samples it keeps), so the IIR filters
   and differences run on 40+ samples per cut-off period instead of 400. The
   friction columns are still formed at the full rate (from q̇ interpolated back
   onto it, so their steps sit where q̇ changes sign) and go through the same FIR
   as τ; the FIR's passband is flat far beyond the cut-off.

For validation the model can be scored against the filtered torque (what the
fit sees) or the resampled raw torque (measurement noise included):
:class:`Prepared` carries both.
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.data.filters import fir_decimate, lowpass_filtfilt, welch
from arm_dyn_id.errors import DataError, GapError

#: Cut-off = this factor × the highest frequency the motion carries.
HARMONIC_FACTOR = 5.0
#: The motion's band holds all but this fraction of the velocity power (-40 dB).
POWER_LEFT = 1e-4
#: Limits of a chosen cut-off (Hz); a choice clipped to one of them (or to
#: ``RATE_LIMIT`` x the rate) comes with a warning that names ``--cutoff``.
MIN_CUTOFF_HZ = 0.5
MAX_CUTOFF_HZ = 50.0
RATE_LIMIT = 0.4
#: The noise floor of q is the median of its spectrum over this band (fractions of the
#: rate): above any arm's motion, below the roll-off of resampling near Nyquist.
FLOOR_BAND = (0.1, 0.3)
#: From the data, the cut-off lies between these factors x the top of the motion's
#: band: as high as the noise of q allows (less of the record lost to the filter's
#: edges, sharper friction steps kept alike in τ and the regressor).
LOW_BAND_FACTOR = 3.0
BAND_FACTOR = 20.0
#: The noise of q̈ below the cut-off may reach this fraction of the motion's q̈ power
#: (errors in the regressor bias the fit by about as much).
ACCEL_NOISE = 1e-4
#: A joint moves when the variance of its motion is this multiple of its noise's.
MOVING_SNR = 100.0
#: Bins averaged before the median is taken (:func:`noise_floor`).
FLOOR_GROUP = 8
#: Spectrum of q less this multiple of its floor (15 dB) is the motion's.
FLOOR_FACTOR = 30.0
#: Decimate so that at least this many samples per cut-off period remain.
SAMPLES_PER_CUTOFF = 10.0
DEFAULT_ORDER = 4
#: Long records: a first FIR stage keeps 1 sample in ``decimate // PRE_SPLIT``,
#: so the Butterworth stage still sees at least 40 samples per cut-off period.
PRE_SPLIT = 4


@dataclass(frozen=True)
class Prepared:
    """A recording ready for the full-dynamics regressor.

    Attributes
    ----------
    t : ndarray, (M,)
        s, uniform (after resampling, trimming and decimation).
    q, dq, ddq : ndarray, (M, n)
        Filtered positions (rad) and their derivatives (rad/s, rad/s²).
    tau : ndarray, (M, n) or None
        Torques through the same filter (N·m): what the fit uses.
    tau_raw : ndarray, (M, n) or None
        Resampled torques, unfiltered (N·m).
    features : ndarray, (M, n, k) or None
        ``features(dq)`` computed at the full rate and filtered like τ
        (friction columns), or unfiltered when τ is not filtered.
    info : dict
        ``rate_hz, resampled, cutoff_hz, cutoff_source, order, decimate,
        edge_s, n_raw, n_kept, filter_torque`` (plain types, for the model file).
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray = None
    tau_raw: np.ndarray = None
    features: np.ndarray = None
    regressor: np.ndarray = None
    info: dict = field(default_factory=dict)


def _as_record(t, q, tau):
    t = np.asarray(t, dtype=float)
    q = np.asarray(q, dtype=float)
    if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise DataError(f'times {t.shape} and positions {q.shape} must be (N,) and (N, n)')
    if tau is not None:
        tau = np.asarray(tau, dtype=float)
        if tau.shape != q.shape:
            raise DataError(f'torques {tau.shape} do not match positions {q.shape}')
    return t, q, tau


def resample(t, q, tau=None, rate=None, max_gap=None):
    """Clean and resample a record onto a uniform grid.

    Parameters
    ----------
    t : ndarray, (N,)
        Stamps (s), any spacing and order.
    q : ndarray, (N, n)
    tau : ndarray, (N, n), optional
    rate : float, optional
        Hz; default the median rate of the stamps.
    max_gap : float, optional
        Longest step (s) to interpolate across; default 10 median steps.

    Returns
    -------
    t_u : ndarray, (M,)
    q_u : ndarray, (M, n)
    tau_u : ndarray, (M, n) or None
    info : dict
        ``rate_hz``, ``resampled`` (whether the stamps were uneven), ``dropped``
        (non-finite or repeated rows).

    Raises
    ------
    DataError
        Wrong shapes, too few finite rows, a gap longer than ``max_gap``.
    """
    t, q, tau = _as_record(t, q, tau)
    ok = np.isfinite(t) & np.all(np.isfinite(q), axis=1)
    if tau is not None:
        ok &= np.all(np.isfinite(tau), axis=1)
    if ok.all() and np.all(np.diff(t) > 0):
        ts, qs, taus = t, q, tau         # the common case: no copies
    else:
        order = np.argsort(t[ok], kind='stable')
        ts, qs = t[ok][order], q[ok][order]
        taus = None if tau is None else tau[ok][order]
        keep = np.concatenate([[True], np.diff(ts) > 0])[:len(ts)]
        ts, qs = ts[keep], qs[keep]
        taus = None if taus is None else taus[keep]
    dropped = int(len(t) - len(ts))
    if len(ts) < 16:
        raise DataError(f'{len(ts)} usable samples (of {len(t)}) are too few to prepare')
    dt = np.diff(ts)
    step = float(np.median(dt))
    max_gap = 10 * step if max_gap is None else float(max_gap)
    if dt.max() > max_gap:
        at = int(np.argmax(dt))
        raise GapError(f'the record has a gap of {dt[at]:.3g} s at t = {ts[at]:.6g} s '
                       f'(longest allowed {max_gap:.3g} s): cut the record there and fit '
                       'the parts separately')
    rate = 1.0 / step if rate is None else float(rate)
    if not (np.isfinite(rate) and rate > 0):
        raise DataError(f'resampling rate {rate} Hz must be positive')
    uneven = bool(np.max(np.abs(dt - step)) > 0.01 * step or dropped)
    if not uneven and abs(rate * step - 1) < 1e-9:
        return ts, qs, taus, {'rate_hz': float(rate), 'resampled': False, 'dropped': dropped}
    tu = ts[0] + np.arange(int(np.floor((ts[-1] - ts[0]) * rate + 1e-9)) + 1) / rate
    qu = np.column_stack([np.interp(tu, ts, qs[:, j]) for j in range(qs.shape[1])])
    tauu = None if taus is None else np.column_stack(
        [np.interp(tu, ts, taus[:, j]) for j in range(taus.shape[1])])
    return tu, qu, tauu, {'rate_hz': float(rate), 'resampled': True, 'dropped': dropped}


@dataclass(frozen=True)
class CutoffChoice:
    """A low-pass cut-off and how it was chosen (:func:`choose_band`).

    Attributes
    ----------
    cutoff_hz : float
    source : str
        In words, for the model file and the fit's output.
    warning : str or None
        Set when the choice landed on a limit (``MIN_CUTOFF_HZ``,
        ``MAX_CUTOFF_HZ``, ``RATE_LIMIT`` x the rate) or the record shows no
        motion: the data did not decide, and the text names ``--cutoff``.
    band_hz : float or None
        Top of the motion's band (Hz) when it came from the data.
    q_noise_rad : tuple of float
        White-noise level of q per joint (rad, from the floor of its spectrum;
        empty when the plan decided).
    """

    cutoff_hz: float
    source: str
    warning: str = None
    band_hz: float = None
    q_noise_rad: tuple = ()


def q_spectrum(q, rate):
    """Power spectrum of q per joint, from its first differences (Welch, Hann).

    Differencing first whitens the spectrum (the motion's low-frequency power is
    reduced by f² before the window is applied, so its leakage stays far below
    any encoder's floor); the difference's gain ``(2·rate·sin(π f / rate))²`` is
    then divided out, so white noise on q gives a flat floor.

    Parameters
    ----------
    q : ndarray, (N, n)
        rad, uniform at ``rate``.
    rate : float
        Hz.

    Returns
    -------
    f : ndarray, (F,)
        Hz.
    power : ndarray, (F, n)
        rad²/Hz (one-sided; 0 at f = 0).
    """
    v = np.diff(np.asarray(q, dtype=float), axis=0) * rate
    nper = int(min(len(v), max(256, 2 ** int(np.ceil(np.log2(20 * rate))))))
    f, p = welch(v, rate, nper)
    gain = (2.0 * rate * np.sin(np.pi * f / rate)) ** 2
    power = np.zeros_like(p)
    power[1:] = p[1:] / gain[1:, None]
    return f, power


def noise_floor(f, power, rate):
    """The flat floor of q's spectrum per joint (rad²/Hz): the median, over
    ``FLOOR_BAND``, of the spectrum averaged over groups of ``FLOOR_GROUP`` bins.

    The median keeps isolated peaks (vibration, stamp jitter) out; the averaging
    first makes each value nearly Gaussian, so that the median is the mean (a
    single periodogram bin is exponential, and its median only ln 2 of its mean).
    """
    inside = power[(f >= FLOOR_BAND[0] * rate) & (f <= FLOOR_BAND[1] * rate)]
    if not len(inside):
        return np.zeros(power.shape[1])
    groups = max(1, len(inside) // FLOOR_GROUP)
    means = inside[:groups * (len(inside) // groups)].reshape(groups, -1, power.shape[1])
    return np.median(means.mean(axis=1), axis=0)


def _limited(cut, rate, why, band_hz=None, noise=()):
    """Clip ``cut`` to the limits; a clipped choice gets a warning naming --cutoff."""
    limits = [(MIN_CUTOFF_HZ, f'the minimum ({MIN_CUTOFF_HZ:g} Hz)'),
              (MAX_CUTOFF_HZ, f'the maximum ({MAX_CUTOFF_HZ:g} Hz)'),
              (RATE_LIMIT * rate, f'the rate limit ({RATE_LIMIT:g} x {rate:.6g} Hz)')]
    top = min(MAX_CUTOFF_HZ, RATE_LIMIT * rate)
    clipped = float(np.clip(cut, min(MIN_CUTOFF_HZ, top), top))
    warning = None
    if clipped != cut:
        limit = min(limits, key=lambda item: abs(item[0] - clipped))[1]
        warning = (f'the cut-off {clipped:.3g} Hz is {limit}, not what the data asked for '
                   f'({cut:.3g} Hz): check the motion and its spectrum, and give the cut-off '
                   'with --cutoff HZ (a few times the highest frequency the motion carries)')
    return CutoffChoice(clipped, why, warning, band_hz, tuple(float(v) for v in noise))


def choose_band(q, rate, harmonic_hz=None):
    """Low-pass cut-off for a uniform record: the motion's band, above the noise.

    With a known excitation (a Fourier plan) its highest harmonic decides:
    ``HARMONIC_FACTOR`` x ``harmonic_hz``. Otherwise, joint by joint, the
    spectrum of q (:func:`q_spectrum`) has a flat floor where white encoder,
    quantisation or interpolation noise dominates (:func:`noise_floor`); the
    motion's spectrum is what stands above ``FLOOR_FACTOR`` x that floor. Its top
    (``band_hz``): turned into velocity (x (2πf)²) and summed over the moving
    joints, the frequency below which it holds all but ``POWER_LEFT`` of its
    power. The noise's limit: the cut-off at which the noise of q̈ below it,
    ``floor (2π)⁴ f_c⁵ / 5``, reaches ``ACCEL_NOISE`` x the motion's q̈ power, for
    the joint that allows least. The cut-off is that limit, within
    ``LOW_BAND_FACTOR`` and ``BAND_FACTOR`` x the top of the band, then within
    ``MIN_CUTOFF_HZ``, ``MAX_CUTOFF_HZ`` and ``RATE_LIMIT`` x the rate. Noise never
    counts as motion, at any rate or level.

    Parameters
    ----------
    q : ndarray, (N, n)
        rad, uniform at ``rate``.
    rate : float
        Hz.
    harmonic_hz : float, optional
        Highest harmonic of a known excitation (Fourier plan, ``L·ω_f / 2π``).

    Returns
    -------
    CutoffChoice
        With a warning when the choice is clipped to a limit or the record does
        not move.

    Raises
    ------
    DataError
        A non-positive ``harmonic_hz``.
    """
    if harmonic_hz is not None:
        if not (np.isfinite(harmonic_hz) and harmonic_hz > 0):
            raise DataError(f'highest harmonic {harmonic_hz} Hz must be positive')
        return _limited(HARMONIC_FACTOR * harmonic_hz, rate,
                        f'{HARMONIC_FACTOR:g} x the excitation\'s highest harmonic '
                        f'({harmonic_hz:.4g} Hz)')
    f, power = q_spectrum(q, rate)
    floor = noise_floor(f, power, rate)
    noise = np.sqrt(floor * rate / 2.0)          # white noise σ: floor = 2σ² / rate
    df = float(f[1] - f[0]) if len(f) > 1 else 1.0
    motion = np.clip(power - FLOOR_FACTOR * floor, 0.0, None)
    # a joint moves when its motion stands well above its noise (a still joint's
    # spectrum leaks a little above the floor in the lowest bins)
    moving = np.sum(motion, axis=0) * df > MOVING_SNR * noise ** 2
    velocity = motion[:, moving] * (2 * np.pi * f[:, None]) ** 2
    total = np.sum(velocity, axis=1)
    if not np.any(total > 0):
        choice = _limited(rate / 20, rate, 'no motion above the noise in the record: rate / 20',
                          noise=noise)
        warning = choice.warning or (
            f'no motion above the noise of q in the record; the cut-off {choice.cutoff_hz:.3g}'
            ' Hz (rate / 20) is a guess: give it with --cutoff HZ')
        return CutoffChoice(choice.cutoff_hz, choice.source, warning, None, choice.q_noise_rad)
    cumulative = np.cumsum(total) / np.sum(total)
    highest = float(f[int(np.argmax(cumulative >= 1.0 - POWER_LEFT))])
    # the noise's limit: q̈ noise power below the cut-off, floor (2π)⁴ f_c⁵ / 5, at most
    # ACCEL_NOISE x the motion's q̈ power, for every moving joint
    accel = np.sum(motion[:, moving] * (2 * np.pi * f[:, None]) ** 4, axis=0) * df
    with np.errstate(divide='ignore'):
        limits = (5 * ACCEL_NOISE * accel / ((2 * np.pi) ** 4 * floor[moving])) ** 0.2
    noise_hz = float(np.min(limits))
    low, high = LOW_BAND_FACTOR * highest, BAND_FACTOR * highest
    cut = float(np.clip(noise_hz, low, high))
    sigma = f'q noise {np.median(noise[moving]):.2g} rad'
    top = f'the top of the motion\'s band ({highest:.3g} Hz, above the noise floor)'
    if cut == low:
        why = (f'{LOW_BAND_FACTOR:g} x {top}, the lowest allowed: the noise\'s limit is lower '
               f'({noise_hz:.3g} Hz, {sigma})')
    elif cut == high:
        why = f'{BAND_FACTOR:g} x {top}, the highest allowed ({sigma})'
    else:
        why = (f'where q̈ noise reaches {ACCEL_NOISE:.0e} of the motion\'s ({sigma}); '
               f'{cut / highest:.3g} x {top}')
    return _limited(cut, rate, why, band_hz=highest, noise=noise)


def choose_cutoff(q, rate, harmonic_hz=None):
    """Low-pass cut-off (Hz) for a uniform record, and how it was chosen.

    :func:`choose_band` as a pair; a warning (a choice on a limit) is appended
    to the source.

    Parameters
    ----------
    q : ndarray, (N, n)
        rad, uniform at ``rate``.
    rate : float
        Hz.
    harmonic_hz : float, optional
        Highest harmonic of a known excitation (Fourier plan, ``L·ω_f / 2π``).

    Returns
    -------
    cutoff : float
    source : str
        In words, for the model file.
    """
    choice = choose_band(q, rate, harmonic_hz)
    return choice.cutoff_hz, _stated(choice)


def _stated(choice):
    return choice.source if not choice.warning else f'{choice.source}; WARNING: {choice.warning}'


def default_decimation(rate, cutoff_hz):
    """Largest step keeping ``SAMPLES_PER_CUTOFF`` samples per cut-off period."""
    # (a rate from median stamp steps is 999.9999... Hz for 1 kHz)
    return max(1, int(np.floor(rate / (SAMPLES_PER_CUTOFF * cutoff_hz) + 1e-6)))


#: How q̇ and q̈ are formed (stated in the model file).
DIFFERENTIATION = ('fourth-order central differences of the filtered q (5-point stencils '
                   'for q̇ and q̈, second order at the two ends)')


def differentiate(q, rate):
    """q̇ and q̈ of a filtered, uniform record by fourth-order central differences.

    ``q̇_k = (q_{k-2} - 8 q_{k-1} + 8 q_{k+1} - q_{k+2}) / 12h`` and
    ``q̈_k = (-q_{k-2} + 16 q_{k-1} - 30 q_k + 16 q_{k+1} - q_{k+2}) / 12h²``:
    their relative errors at a frequency f are about (ωh)⁴/30 and (ωh)⁴/90
    (ω = 2πf, h = 1/rate), against (ωh)²/6 and (ωh)²/3 for ``np.gradient``
    applied twice: for a 1 Hz harmonic at 100 Hz, 2e-7 in q̈ against 1.3e-3. The
    two samples at each end use ``np.gradient``'s second-order one-sided formulas
    (they are trimmed with the filter's edges).

    Parameters
    ----------
    q : ndarray, (N, n)
        rad, uniform at ``rate`` (N ≥ 5).
    rate : float
        Hz.

    Returns
    -------
    dq, ddq : ndarray, (N, n)
        rad/s, rad/s².
    """
    q = np.asarray(q, dtype=float)
    h = 1.0 / rate
    dq = np.gradient(q, h, axis=0, edge_order=2)
    ddq = np.gradient(dq, h, axis=0, edge_order=2)
    if len(q) >= 5:
        a, b, c, d, e = q[:-4], q[1:-3], q[2:-2], q[3:-1], q[4:]
        dq[2:-2] = (a - 8.0 * b + 8.0 * d - e) / (12.0 * h)
        ddq[2:-2] = (-a + 16.0 * b - 30.0 * c + 16.0 * d - e) / (12.0 * h * h)
    return dq, ddq


def lowpass(x, rate, cutoff_hz, order=DEFAULT_ORDER):
    """Zero-phase Butterworth low-pass along axis 0."""
    return lowpass_filtfilt(x, rate, cutoff_hz, order)


def _filtered_signals(t, q, tau, cutoff_hz, harmonic_hz, order, rate, decimate, edge,
                      filter_torque, features, max_gap):
    """:func:`prepare`'s work before the regressor: the record resampled, its cut-off
    chosen, q, τ and the features filtered (and pre-decimated), q̇ and q̈ formed; a
    dict of them."""
    t_raw = np.asarray(t)
    tu, qu, tauu, info = resample(t, q, tau, rate=rate, max_gap=max_gap)
    fs = info['rate_hz']
    warning = None
    if cutoff_hz is None:
        choice = choose_band(qu, fs, harmonic_hz)
        cutoff_hz, source, warning = choice.cutoff_hz, _stated(choice), choice.warning
    else:
        cutoff_hz, source = float(cutoff_hz), 'given'
    if not 0 < cutoff_hz < fs / 2:
        raise DataError(f'cut-off {cutoff_hz} Hz must lie in (0, {fs / 2:.6g}) Hz '
                        f'(Nyquist of {fs:.6g} Hz sampling)')
    step = default_decimation(fs, cutoff_hz) if decimate is None else int(decimate)
    if step < 1:
        raise DataError(f'decimate {decimate} must be a positive integer')
    edge_s = 3.0 / cutoff_hz if edge is None else float(edge)
    n_edge = int(np.ceil(edge_s * fs))
    if len(tu) - 2 * n_edge < 16:
        raise DataError(f'the record ({len(tu) / fs:.3g} s) is too short for the filter '
                        f'edges (2 x {edge_s:.3g} s) at a {cutoff_hz:.3g} Hz cut-off')
    tau_raw = tauu
    pre = max(1, step // PRE_SPLIT)
    if pre > 1:
        # stage one for long, heavily oversampled records: a polyphase FIR low-pass
        # that computes only every pre-th output (linear phase, delay removed), so
        # the IIR filters below run on 1/pre of the samples
        t_full = tu
        tu, qu = tu[::pre], fir_decimate(qu, pre)
        if tauu is not None:
            tau_raw, tauu = tauu[::pre], fir_decimate(tauu, pre)
        fs, step, n_edge = fs / pre, step // pre, -(-n_edge // pre)
    qf = lowpass(qu, fs, cutoff_hz, order)
    dq, ddq = differentiate(qf, fs)
    feats = None
    if features is not None:
        if pre > 1:
            # the friction columns at the full rate (their steps where q̇ changes
            # sign, not on the coarse grid), then through the same FIR as τ
            dq_full = np.column_stack([np.interp(t_full, tu, dq[:, j])
                                       for j in range(dq.shape[1])])
            full = features(dq_full)
            feats = fir_decimate(full, pre)
        else:
            feats = features(dq)
    if filter_torque:
        tauf = None if tauu is None else lowpass(tauu, fs, cutoff_hz, order)
        if feats is not None:
            shape = feats.shape
            feats = lowpass(feats.reshape(shape[0], -1), fs, cutoff_hz, order).reshape(shape)
    else:
        tauf = tau_raw
        if feats is not None and pre > 1:
            feats = features(dq)
    return dict(t_raw=t_raw, tu=tu, qf=qf, dq=dq, ddq=ddq, tauf=tauf, tau_raw=tau_raw,
                feats=feats, fs=fs, step=step, n_edge=n_edge, pre=pre, cutoff_hz=cutoff_hz,
                source=source, warning=warning, info=info)


def prepare(t, q, tau=None, cutoff_hz=None, harmonic_hz=None, order=DEFAULT_ORDER, rate=None,
            decimate=None, edge=None, filter_torque=True, features=None, regressor=None,
            max_gap=None, signals=None, signals_key=None):
    """Resample, filter, differentiate, trim and decimate one record.

    Parameters
    ----------
    t : ndarray, (N,)
        s, any spacing.
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n), optional
        N·m.
    cutoff_hz : float, optional
        Default: :func:`choose_cutoff` (from ``harmonic_hz`` or the spectrum).
    harmonic_hz : float, optional
        Highest harmonic of a known Fourier excitation.
    order : int
        Butterworth order (applied twice).
    rate : float, optional
        Resampling rate (Hz); default the median rate.
    decimate : int, optional
        Default :func:`default_decimation`.
    edge : float, optional
        Seconds trimmed at each end; default ``3 / cutoff``.
    filter_torque : bool
        Filter τ and the features (default) or keep them raw (gross errors and
        the robust estimators: a filter would smear each outlier).
    features : callable, optional
        ``features(dq)`` (N, n) -> (N, n, k), computed at the full rate and
        filtered like τ (the friction columns).
    regressor : callable, optional
        ``regressor(q, dq, ddq)`` (M, n) x3 -> (M, n, p), evaluated on the
        decimated samples and filtered like τ (at the decimated rate, which is
        at least 10 samples per cut-off period): the same filter on both sides
        of ``τ = Y θ``, so torque content the nonlinear dynamics put above the
        cut-off is removed from both alike.
    max_gap : float, optional
        See :func:`resample`.
    signals : dict, optional
        Filtered signals of earlier calls on the same record, reused (and stored) when
        the options and ``signals_key`` match: a fit that prepares one record for two
        regressors (rotor inertia left out and kept) filters it once.
    signals_key : hashable, optional
        What ``features`` computes (the caller's name for it).

    Returns
    -------
    Prepared

    Raises
    ------
    DataError
        Wrong shapes, too few samples, gaps, a cut-off outside (0, Nyquist).
    """
    key = None if signals is None else (signals_key, cutoff_hz, harmonic_hz, order, rate,
                                        decimate, edge, filter_torque, max_gap)
    stage = None if key is None else signals.get(key)
    if stage is None:
        stage = _filtered_signals(t, q, tau, cutoff_hz, harmonic_hz, order, rate, decimate,
                                  edge, filter_torque, features, max_gap)
        if key is not None:
            signals[key] = stage
    if key is not None:          # each caller its own arrays: the stored ones stay as made
        stage = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in stage.items()}
    t_raw, tu, qf, dq, ddq, tauf, tau_raw, feats = (stage[k] for k in (
        't_raw', 'tu', 'qf', 'dq', 'ddq', 'tauf', 'tau_raw', 'feats'))
    fs, step, n_edge, pre = stage['fs'], stage['step'], stage['n_edge'], stage['pre']
    cutoff_hz, source, warning = stage['cutoff_hz'], stage['source'], stage['warning']
    info = dict(stage['info'])
    keep = slice(n_edge, len(tu) - n_edge, step)
    regr = None
    if regressor is not None:
        # evaluated on the decimated samples, edges included, then (when τ is
        # filtered) through the same low-pass at the decimated rate, then trimmed
        every = slice(n_edge % step, len(tu), step)     # the grid of ``keep``
        regr = regressor(qf[every], dq[every], ddq[every])
        if filter_torque:
            shape = regr.shape
            regr = lowpass(regr.reshape(shape[0], -1), fs / step, cutoff_hz,
                           order).reshape(shape)
        first = n_edge // step                          # where ``keep`` starts on it
        regr = regr[first:first + len(tu[keep])]
    info.update({'cutoff_hz': float(cutoff_hz), 'cutoff_source': source,
                 'cutoff_warning': warning, 'differentiation': DIFFERENTIATION,
                 'order': int(order),
                 'filter': 'Butterworth, zero-phase (forward-backward)',
                 'decimate': int(step * pre), 'pre_decimate': int(pre),
                 'edge_s': float(n_edge / fs),
                 'n_raw': int(len(t_raw)), 'n_kept': int(len(tu[keep])),
                 'filter_torque': bool(filter_torque),
                 'filter_regressor': bool(regressor is not None and filter_torque)})
    return Prepared(t=tu[keep], q=qf[keep], dq=dq[keep], ddq=ddq[keep],
                    tau=None if tauf is None else tauf[keep],
                    tau_raw=None if tau_raw is None else tau_raw[keep],
                    features=None if feats is None else feats[keep], regressor=regr,
                    info=info)


__all__ = ['CutoffChoice', 'DIFFERENTIATION', 'Prepared', 'choose_band', 'choose_cutoff',
           'default_decimation', 'differentiate', 'lowpass', 'prepare', 'q_spectrum',
           'resample']
