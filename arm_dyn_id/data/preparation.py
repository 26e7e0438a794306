"""Preparing a recording for a full-dynamics fit: resample, filter, differentiate, trim.

Only q and τ are measured; the model also needs q̇ and q̈. The steps, in order:

1. **Resampling** (:func:`resample`). Logs from real controllers are not evenly
   spaced (the UR RTDE log through ROS: ~100 Hz, steps of 2-34 ms). Rows with
   NaN/inf are dropped, stamps sorted, repeated stamps dropped, then q and τ are
   interpolated linearly onto a uniform grid at the median rate. A gap longer
   than ``max_gap`` (default 10 median steps) is refused: interpolating across it
   would invent motion.
2. **Cut-off** (:func:`choose_cutoff`). When the excitation's highest harmonic is
   known (a Fourier plan), the cut-off is ``HARMONIC_FACTOR`` (5) times it.
   Otherwise it comes from the data: the velocity power spectrum (Welch) summed
   over the joints, and the frequency below which it holds all but
   ``POWER_LEFT`` (1e-4, -40 dB) of its power; the cut-off is 5 times that
   frequency, within ``[MIN_CUTOFF_HZ, 0.4·rate]``. Summing the joints lets the
   moving ones decide (a still joint's spectrum is noise). On the real UR10e
   30 s Fourier run this gives 1.07 Hz x 5 = 5.4 Hz; isolated vibration and
   stamp-jitter peaks at 7-25 Hz, 60 dB below the motion, do not count (a
   noise-floor rule, tried first, put the cut-off at the 40 Hz limit because of
   them). Why 5: on simulated seed 001 records (TX-60, 6 harmonics of 0.1 Hz,
   10 s) a 3x cut-off trims 3/f_c = 1.7 s of edges at each end and doubled the
   model error against 5x-10x; above 5x the derivatives of real, quantised
   encoder readings get noisier (q̈ noise grows as f_c^2.5) for no gain. How the
   cut-off was chosen is stated in the model file (``preparation.cutoff_source``).
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
4. **Differentiation**: central differences of the filtered q (``np.gradient``).
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
import scipy.signal

from arm_dyn_id.errors import DataError

#: Cut-off = this factor × the highest frequency the motion carries.
HARMONIC_FACTOR = 5.0
#: The motion's band holds all but this fraction of the velocity power (-40 dB).
POWER_LEFT = 1e-4
MIN_CUTOFF_HZ = 0.5
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
        raise DataError(f'the record has a gap of {dt[at]:.3g} s at t = {ts[at]:.6g} s '
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


def choose_cutoff(q, rate, harmonic_hz=None):
    """Low-pass cut-off (Hz) for a uniform record, and how it was chosen.

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
    top = 0.4 * rate
    if harmonic_hz is not None:
        if not (np.isfinite(harmonic_hz) and harmonic_hz > 0):
            raise DataError(f'highest harmonic {harmonic_hz} Hz must be positive')
        cut = float(np.clip(HARMONIC_FACTOR * harmonic_hz, MIN_CUTOFF_HZ, top))
        return cut, (f'{HARMONIC_FACTOR:g} x the excitation\'s highest harmonic '
                     f'({harmonic_hz:.4g} Hz)')
    q = np.asarray(q, dtype=float)
    dq = np.gradient(q, 1.0 / rate, axis=0)
    nper = int(min(len(q), max(256, 2 ** int(np.ceil(np.log2(20 * rate))))))
    f, p = scipy.signal.welch(dq, fs=rate, nperseg=nper, axis=0, detrend='linear')
    # the joints' velocity power together: a still joint adds (almost) nothing
    total = np.sum(p, axis=1)
    if not np.any(total > 0):
        cut = float(np.clip(rate / 20, MIN_CUTOFF_HZ, top))
        return cut, 'no motion in the record: rate / 20'
    cumulative = np.cumsum(total) / np.sum(total)
    highest = float(f[int(np.argmax(cumulative >= 1.0 - POWER_LEFT))])
    cut = float(np.clip(HARMONIC_FACTOR * highest, MIN_CUTOFF_HZ, top))
    return cut, (f'{HARMONIC_FACTOR:g} x the frequency below which the velocity spectrum '
                 f'holds all but {POWER_LEFT:.0e} of its power ({highest:.3g} Hz)')


def default_decimation(rate, cutoff_hz):
    """Largest step keeping ``SAMPLES_PER_CUTOFF`` samples per cut-off period."""
    # (a rate from median stamp steps is 999.9999... Hz for 1 kHz)
    return max(1, int(np.floor(rate / (SAMPLES_PER_CUTOFF * cutoff_hz) + 1e-6)))


def _fir_decimate(x, factor):
    """Every ``factor``-th sample after a linear-phase FIR low-pass at the new Nyquist
    frequency (``scipy.signal.resample_poly``, delay compensated), along axis 0."""
    return scipy.signal.resample_poly(x, 1, int(factor), axis=0, padtype='line')


def lowpass(x, rate, cutoff_hz, order=DEFAULT_ORDER):
    """Zero-phase Butterworth low-pass along axis 0."""
    sos = scipy.signal.butter(order, cutoff_hz, fs=rate, output='sos')
    return scipy.signal.sosfiltfilt(sos, x, axis=0)


def prepare(t, q, tau=None, cutoff_hz=None, harmonic_hz=None, order=DEFAULT_ORDER, rate=None,
            decimate=None, edge=None, filter_torque=True, features=None, regressor=None,
            max_gap=None):
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

    Returns
    -------
    Prepared

    Raises
    ------
    DataError
        Wrong shapes, too few samples, gaps, a cut-off outside (0, Nyquist).
    """
    t_raw = np.asarray(t)
    tu, qu, tauu, info = resample(t, q, tau, rate=rate, max_gap=max_gap)
    fs = info['rate_hz']
    if cutoff_hz is None:
        cutoff_hz, source = choose_cutoff(qu, fs, harmonic_hz)
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
        tu, qu = tu[::pre], _fir_decimate(qu, pre)
        if tauu is not None:
            tau_raw, tauu = tauu[::pre], _fir_decimate(tauu, pre)
        fs, step, n_edge = fs / pre, step // pre, -(-n_edge // pre)
    qf = lowpass(qu, fs, cutoff_hz, order)
    dq = np.gradient(qf, 1.0 / fs, axis=0)
    ddq = np.gradient(dq, 1.0 / fs, axis=0)
    feats = None
    if features is not None:
        if pre > 1:
            # the friction columns at the full rate (their steps where q̇ changes
            # sign, not on the coarse grid), then through the same FIR as τ
            dq_full = np.column_stack([np.interp(t_full, tu, dq[:, j])
                                       for j in range(dq.shape[1])])
            full = features(dq_full)
            feats = _fir_decimate(full.reshape(len(t_full), -1), pre).reshape(
                (len(tu),) + full.shape[1:])
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
    info.update({'cutoff_hz': float(cutoff_hz), 'cutoff_source': source, 'order': int(order),
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


__all__ = ['Prepared', 'resample', 'choose_cutoff', 'default_decimation', 'lowpass', 'prepare']
