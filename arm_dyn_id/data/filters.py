"""The digital filters of the data preparation, in NumPy and SciPy's linear algebra.

``scipy.signal`` costs 0.3-0.5 s to import (it parses the docstrings of its whole
API), more than the rest of a one-minute fit's preparation: the fit command would
spend a fifth of its time on it. These are the five of its functions the preparation
uses, computed the same way (``test/test_filters.py`` holds them to SciPy's results):

- :func:`butter_sos`, :func:`sosfiltfilt`: the zero-phase Butterworth low-pass. Each
  second-order section is a banded lower-triangular system solved by LAPACK's
  ``dtbtrs`` (forward substitution: the filter's own recursion), with SciPy's odd
  extension at both ends and its steady-state initial conditions;
- :func:`welch`: the averaged periodogram (Hann window, half overlap, each segment's
  linear trend removed, one-sided density);
- :func:`fir_decimate`: ``resample_poly(x, 1, factor, padtype='line')``: a Kaiser
  (β = 5) windowed-sinc FIR at the new Nyquist frequency, 10 x factor taps each side,
  the signal extended by the line through its first and last samples;
- :func:`savgol_filter`: the Savitzky-Golay filter (``mode='interp'``: the polynomial
  fitted to the first and last windows at the ends); a window longer than
  :data:`FFT_WINDOW` samples is convolved by FFT (SciPy's direct sum differs from it by
  rounding: 1e-10 of the output's range for a second derivative).
"""

import math

import numpy as np
import scipy.linalg.lapack
import scipy.ndimage


def butter_sos(order, cutoff_hz, fs):
    """Second-order sections (k, 6) of a digital Butterworth low-pass of ``order`` at
    ``cutoff_hz`` for sampling at ``fs`` (Hz): the analogue prototype's poles, pre-warped
    and mapped by the bilinear transform, the zeros at z = -1, the gain in the first
    section; a section per conjugate pair, the pole farthest from the unit circle first
    (for an odd order the real pole first, with two of the zeros, and the last pair with
    one, as ``scipy.signal.butter`` pairs them)."""
    order = int(order)
    if order < 1:
        raise ValueError(f'filter order {order} must be at least 1')
    wn = 2.0 * float(cutoff_hz) / float(fs)
    if not 0.0 < wn < 1.0:
        raise ValueError(f'cut-off {cutoff_hz} Hz must lie in (0, {fs / 2}) Hz')
    warped = 4.0 * math.tan(math.pi * wn / 2.0)        # analogue, for a sampling of 2
    m = np.arange(-order + 1, order, 2)
    poles = warped * -np.exp(1j * np.pi * m / (2 * order))
    gain = warped ** order
    z_poles = (4.0 + poles) / (4.0 - poles)
    gain = gain * float(np.real(1.0 / np.prod(4.0 - poles)))
    # one pole of each conjugate pair (and the real one), nearest the unit circle last
    upper = z_poles[z_poles.imag > 1e-14 * np.abs(z_poles)]
    real = z_poles[np.abs(z_poles.imag) <= 1e-14 * np.abs(z_poles)].real
    upper = upper[np.argsort(-np.abs(1.0 - np.abs(upper)))]
    sections = [[1.0, 2.0, 1.0, 1.0, -2.0 * p.real, abs(p) ** 2] for p in upper]
    if len(real):
        # as SciPy pairs them: the real pole with two zeros, the last pair with one
        sections.insert(0, [1.0, 2.0, 1.0, 1.0, -real[0], 0.0])
        sections[-1][:3] = [1.0, 1.0, 0.0]
    sos = np.array(sections)
    sos[0, :3] *= gain
    return sos


def _section_zi(section):
    """Steady-state state (2,) of one section for a unit step (``lfilter_zi``)."""
    b, a = section[:3], section[3:]
    system = np.array([[1.0 + a[1], -1.0], [a[2], 1.0]])
    return np.linalg.solve(system, b[1:] - a[1:] * b[0])


def sosfilt_zi(sos):
    """Initial states (k, 2) of the cascade's steady state for a unit step."""
    zi = np.empty((len(sos), 2))
    scale = 1.0
    for i, section in enumerate(sos):
        zi[i] = scale * _section_zi(section)
        scale *= section[:3].sum() / section[3:].sum()
    return zi


def _section(section, x, zi):
    """One section's output along axis 0 of x (N, m) from the states zi (2, m):
    ``y_n + a1 y_{n-1} + a2 y_{n-2} = b0 x_n + b1 x_{n-1} + b2 x_{n-2}``, with the states
    entering the first two equations, solved as a banded unit lower-triangular system."""
    b0, b1, b2, _, a1, a2 = section
    rhs = np.empty(x.shape, order='F')
    scipy.ndimage.convolve1d(x, [b0, b1, b2], axis=0, mode='constant', origin=-1, output=rhs)
    rhs[0] += zi[0]
    rhs[1] += zi[1]
    band = np.empty((3, len(x)))
    band[0], band[1], band[2] = 1.0, a1, a2
    y, info = scipy.linalg.lapack.dtbtrs(band, rhs, uplo='L', diag='U', overwrite_b=1)
    if info != 0:                # only a wrong argument (the diagonal is 1)
        raise ValueError(f'the filter section\'s solve failed (LAPACK info {info})')
    return y


def sosfilt(sos, x, zi):
    """The cascade applied along axis 0 of x (N, m), each section from its states
    ``zi`` (k, 2, m)."""
    y = np.asarray(x, dtype=float)
    for section, z in zip(sos, zi):
        y = _section(section, y, z)
    return y


def sosfiltfilt(sos, x, axis=0):
    """Zero-phase (forward, then backward) filtering by ``sos`` along ``axis``, as
    ``scipy.signal.sosfiltfilt``: x extended at both ends by its odd reflection of
    3 x (2k + 1) samples (fewer first-order sections' worth), each pass started from the
    steady state of its first sample."""
    sos = np.asarray(sos, dtype=float)
    x = np.moveaxis(np.asarray(x, dtype=float), axis, 0)
    shape = x.shape
    x = x.reshape(len(x), -1)
    taps = 2 * len(sos) + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))
    edge = 3 * taps
    if len(x) <= edge:
        raise ValueError(f'{len(x)} samples are too few for the filter\'s {edge}-sample '
                         'extension at each end')
    ext = np.concatenate([2 * x[:1] - x[edge:0:-1], x, 2 * x[-1:] - x[-2:-edge - 2:-1]])
    zi = sosfilt_zi(sos)[:, :, None]
    y = sosfilt(sos, ext, zi * ext[0])
    y = sosfilt(sos, y[::-1], zi * y[-1])[::-1]
    return np.moveaxis(y[edge:-edge].reshape(shape), 0, axis)


def lowpass_filtfilt(x, fs, cutoff_hz, order, axis=0):
    """Zero-phase Butterworth low-pass of ``order`` at ``cutoff_hz`` along ``axis``."""
    return sosfiltfilt(butter_sos(order, cutoff_hz, fs), x, axis=axis)


def welch(x, fs, nperseg):
    """Power spectral density of each column of x (N, m) by Welch's method, as
    ``scipy.signal.welch(x, fs, nperseg=nperseg, axis=0, detrend='linear')``:
    frequencies (F,) Hz and the one-sided density (F, m) ((F,) for x (N,))."""
    x = np.asarray(x, dtype=float)
    shape = x.shape
    x = x.reshape(len(x), -1)
    nperseg = int(nperseg)
    step = nperseg - nperseg // 2
    count = (len(x) - nperseg) // step + 1
    if count < 1:
        raise ValueError(f'{len(x)} samples are fewer than a segment ({nperseg})')
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(nperseg) / nperseg)   # periodic Hann
    tt = np.arange(nperseg, dtype=float)
    tt = (tt - tt.mean()) / np.sqrt(((tt - tt.mean()) ** 2).sum())
    power = 0.0
    for k in range(count):
        seg = x[k * step:k * step + nperseg]
        seg = seg - seg.mean(axis=0) - np.outer(tt, tt @ seg)       # its least-squares line
        spec = np.fft.rfft(seg * window[:, None], axis=0)
        power = power + (spec.real ** 2 + spec.imag ** 2)
    power = power / (count * fs * (window ** 2).sum())
    if nperseg % 2:
        power[1:] *= 2
    else:
        power[1:-1] *= 2
    return np.fft.rfftfreq(nperseg, 1.0 / fs), power.reshape((len(power),) + shape[1:])


def fir_decimate(x, factor):
    """Every ``factor``-th sample of x (N, ...) along axis 0 after a linear-phase FIR
    low-pass at the new Nyquist frequency, delay compensated, as
    ``scipy.signal.resample_poly(x, 1, factor, axis=0, padtype='line')``."""
    x = np.asarray(x, dtype=float)
    down = int(factor)
    if down == 1:
        return x.copy()
    half = 10 * down
    taps = 2 * half + 1
    m = np.arange(taps) - half
    h = np.sinc(m / down) / down * np.kaiser(taps, 5.0)
    h /= h.sum()
    n_in = len(x)
    n_out = n_in // down + bool(n_in % down)
    pre = down - half % down                  # zeros before the taps (output centring)
    skip = (half + pre) // down               # outputs dropped at the start
    h = np.concatenate([np.zeros(pre), h])[::-1]
    # output i is sum_j h[j] x[i·down - j]: x extended by its end-to-end line
    first = skip * down - (len(h) - 1)
    last = (skip + n_out - 1) * down
    flat = x.reshape(n_in, -1).T              # (columns, N): each window contiguous
    slope = (flat[:, -1] - flat[:, 0]) / max(n_in - 1, 1)
    lo, hi = max(first, 0), min(last, n_in - 1)
    before = np.arange(first, min(0, last + 1))
    after = np.arange(max(n_in, first), last + 1) - (n_in - 1)
    ext = np.concatenate([flat[:, :1] + np.outer(slope, before), flat[:, lo:hi + 1],
                          flat[:, -1:] + np.outer(slope, after)], axis=1)
    windows = np.lib.stride_tricks.sliding_window_view(ext, len(h), axis=1)[:, ::down]
    return (windows @ h).T.reshape((n_out,) + x.shape[1:])


#: Savitzky-Golay windows longer than this (samples) are convolved by FFT
FFT_WINDOW = 64


def savgol_coefficients(length, polyorder, deriv=0, delta=1.0):
    """Convolution coefficients (length,) of the Savitzky-Golay filter (zeros for a
    derivative above the polynomial's order, as SciPy's)."""
    if deriv > polyorder:
        return np.zeros(length)
    half = length // 2
    positions = np.arange(-half, length - half, dtype=float)[::-1]
    A = positions[None, :] ** np.arange(polyorder + 1)[:, None]
    y = np.zeros(polyorder + 1)
    y[deriv] = math.factorial(deriv) / delta ** deriv
    return np.linalg.lstsq(A, y, rcond=None)[0]


def savgol_filter(x, length, polyorder, deriv=0, delta=1.0, axis=0):
    """Savitzky-Golay smoothing or derivative along ``axis``, as
    ``scipy.signal.savgol_filter(..., mode='interp')``: the interior by convolution
    (by FFT for windows longer than :data:`FFT_WINDOW`),
    the first and last ``length // 2`` samples from the polynomial fitted to the first
    and last ``length`` samples."""
    x = np.moveaxis(np.asarray(x, dtype=float), axis, 0)
    if length > len(x) or length % 2 == 0 or polyorder >= length:
        raise ValueError(f'a Savitzky-Golay window of {length} samples (order {polyorder}) '
                         f'does not fit {len(x)} samples')
    coeffs = savgol_coefficients(length, polyorder, deriv, delta)
    if length > FFT_WINDOW and np.all(np.isfinite(x)):
        # by FFT: a quarter-second window at 1 kHz is 251 taps a sample; the column means
        # are taken out first (a constant passes unchanged, or not at all for a derivative).
        # Not with a NaN or inf: it would spread over the whole column, not one window
        mean = x.mean(axis=0)
        size = 1 << int(np.ceil(np.log2(len(x) + length - 1)))
        full = np.fft.irfft(np.fft.rfft(x - mean, size, axis=0) *
                            np.fft.rfft(coeffs, size).reshape((-1,) + (1,) * (x.ndim - 1)),
                            size, axis=0)
        y = full[length // 2:length // 2 + len(x)] + (mean if deriv == 0 else 0.0)
    else:
        y = scipy.ndimage.convolve1d(x, coeffs, axis=0, mode='constant')
    half = length // 2
    flat, out = x.reshape(len(x), -1), y.reshape(len(y), -1)
    positions = np.arange(length, dtype=float)
    for window, rows in ((slice(0, length), slice(0, half)),
                         (slice(len(x) - length, len(x)), slice(len(x) - half, len(x)))):
        coeffs = np.polynomial.polynomial.polyfit(positions, flat[window], polyorder)
        deriv_coeffs = np.polynomial.polynomial.polyder(coeffs, deriv, axis=0) \
            if deriv else coeffs
        where = positions[:half] if rows.start == 0 else positions[length - half:]
        out[rows] = np.polynomial.polynomial.polyval(where, deriv_coeffs).T / delta ** deriv
    return np.moveaxis(out.reshape(y.shape), 0, axis)


__all__ = ['FFT_WINDOW', 'butter_sos', 'sosfilt_zi', 'sosfilt', 'sosfiltfilt', 'lowpass_filtfilt',
           'welch', 'fir_decimate', 'savgol_coefficients', 'savgol_filter']
