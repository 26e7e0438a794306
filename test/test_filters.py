"""The preparation's filters (arm_dyn_id.data.filters) against scipy.signal's.

The fit command does not import scipy.signal (its import costs 0.3-0.5 s); these
functions must compute what the scipy.signal calls they replace computed, on the
shapes, rates and orders the preparation uses and on odd ones.
"""

import numpy as np
import pytest
import scipy.signal
from hypothesis import given, settings, strategies as st

from arm_dyn_id.data import filters


def _walk(rng, n, m=3):
    return np.cumsum(rng.standard_normal((n, m)), axis=0) + 0.05 * np.arange(n)[:, None]


@pytest.mark.parametrize('order', [2, 4, 6, 8])
@pytest.mark.parametrize('cutoff, fs', [(7.3, 1000.0), (0.5, 100.0), (45.0, 100.0),
                                        (2.0, 2000.0)])
def test_butterworth_sections_are_scipys(order, cutoff, fs):
    ours = filters.butter_sos(order, cutoff, fs)
    theirs = scipy.signal.butter(order, cutoff, fs=fs, output='sos')
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15 * np.abs(theirs).max())


@pytest.mark.parametrize('order', [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize('cutoff, fs', [(7.3, 1000.0), (0.5, 100.0), (45.0, 100.0),
                                        (2.0, 2000.0)])
def test_zero_phase_lowpass_is_scipys(order, cutoff, fs):
    """Forward-backward, odd extension, steady-state start: sosfiltfilt's output (odd
    orders pair their sections differently near the Nyquist frequency, which only
    changes the rounding)."""
    x = _walk(np.random.default_rng(order), 3000)
    ours = filters.sosfiltfilt(filters.butter_sos(order, cutoff, fs), x, axis=0)
    theirs = scipy.signal.sosfiltfilt(scipy.signal.butter(order, cutoff, fs=fs, output='sos'),
                                      x, axis=0)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9 * np.abs(theirs).max())


def test_zero_phase_lowpass_along_any_axis_and_a_single_column():
    rng = np.random.default_rng(1)
    sos = filters.butter_sos(4, 5.0, 200.0)
    x = rng.standard_normal((4, 800, 2))
    np.testing.assert_allclose(
        filters.sosfiltfilt(sos, x, axis=1),
        scipy.signal.sosfiltfilt(scipy.signal.butter(4, 5.0, fs=200.0, output='sos'), x,
                                 axis=1), atol=1e-12)
    one = rng.standard_normal(500)
    np.testing.assert_allclose(filters.lowpass_filtfilt(one, 200.0, 5.0, 4),
                               scipy.signal.sosfiltfilt(
                                   scipy.signal.butter(4, 5.0, fs=200.0, output='sos'), one),
                               atol=1e-12)


def test_too_short_a_record_or_a_cutoff_outside_the_band_is_an_error():
    sos = filters.butter_sos(4, 5.0, 200.0)
    with pytest.raises(ValueError, match='too few'):
        filters.sosfiltfilt(sos, np.zeros((15, 2)))
    with pytest.raises(ValueError, match='cut-off'):
        filters.butter_sos(4, 120.0, 200.0)
    with pytest.raises(ValueError, match='order'):
        filters.butter_sos(0, 5.0, 200.0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(40, 3000), order=st.sampled_from([2, 4]),
       cutoff=st.floats(0.01, 0.4), seed=st.integers(0, 2 ** 16))
def test_zero_phase_lowpass_property(n, order, cutoff, seed):
    """Any length the extension allows, any cut-off in the band."""
    x = _walk(np.random.default_rng(seed), n, 2)
    sos_ours, sos_theirs = (filters.butter_sos(order, cutoff, 1.0),
                            scipy.signal.butter(order, cutoff, fs=1.0, output='sos'))
    np.testing.assert_allclose(filters.sosfiltfilt(sos_ours, x),
                               scipy.signal.sosfiltfilt(sos_theirs, x, axis=0),
                               rtol=0, atol=1e-8 * max(1.0, np.abs(x).max()))


@pytest.mark.parametrize('n, nperseg', [(60000, 32768), (3000, 3000), (5001, 1024),
                                        (1001, 256), (257, 256)])
def test_welch_is_scipys(n, nperseg):
    v = np.random.default_rng(n).standard_normal((n, 4)) + np.linspace(0, 3, n)[:, None]
    f_ours, p_ours = filters.welch(v, 500.0, nperseg)
    f_theirs, p_theirs = scipy.signal.welch(v, fs=500.0, nperseg=nperseg, axis=0,
                                            detrend='linear')
    np.testing.assert_allclose(f_ours, f_theirs, rtol=1e-14)
    np.testing.assert_allclose(p_ours, p_theirs, rtol=0, atol=1e-12 * p_theirs.max())


@pytest.mark.parametrize('factor', [2, 3, 5, 10, 13, 27])
@pytest.mark.parametrize('n', [300, 999, 1000, 1001, 20000])
def test_fir_decimation_is_resample_poly(factor, n):
    x = _walk(np.random.default_rng(factor * n), n)
    theirs = scipy.signal.resample_poly(x, 1, factor, axis=0, padtype='line')
    ours = filters.fir_decimate(x, factor)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12 * np.abs(theirs).max())


def test_fir_decimation_keeps_trailing_axes_and_factor_one_copies():
    x = np.random.default_rng(2).standard_normal((5000, 4, 3))
    np.testing.assert_allclose(filters.fir_decimate(x, 7),
                               scipy.signal.resample_poly(x, 1, 7, axis=0, padtype='line'),
                               atol=1e-13)
    same = filters.fir_decimate(x, 1)
    assert np.array_equal(same, x) and same is not x


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 4000), factor=st.integers(2, 30), seed=st.integers(0, 2 ** 16))
def test_fir_decimation_property(n, factor, seed):
    x = _walk(np.random.default_rng(seed), n, 2)
    theirs = scipy.signal.resample_poly(x, 1, factor, axis=0, padtype='line')
    np.testing.assert_allclose(filters.fir_decimate(x, factor), theirs, rtol=0,
                               atol=1e-11 * max(1.0, np.abs(theirs).max()))


@pytest.mark.parametrize('length, order, deriv', [(251, 2, 0), (251, 2, 1), (251, 2, 2),
                                                  (7, 2, 1), (5, 3, 2), (3, 2, 0),
                                                  (51, 4, 3), (65, 2, 2), (1001, 3, 2)])
def test_savitzky_golay_is_scipys(length, order, deriv):
    """Short windows by direct convolution, long ones (> FFT_WINDOW) by FFT: SciPy's
    values to rounding either way."""
    x = _walk(np.random.default_rng(length + deriv), 3000) + 5.0
    theirs = scipy.signal.savgol_filter(x, length, order, deriv=deriv, delta=0.001, axis=0,
                                        mode='interp')
    ours = filters.savgol_filter(x, length, order, deriv=deriv, delta=0.001)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10 * np.abs(theirs).max())


def test_savitzky_golay_as_scipy_with_a_nan_and_a_derivative_above_the_order():
    """A NaN spoils one window around it, as SciPy's direct sum (not the whole column, as
    an FFT would); a derivative above the polynomial's order is zero."""
    x = _walk(np.random.default_rng(9), 5000, 2)
    x[2500, 0] = np.nan
    ours = filters.savgol_filter(x, 251, 2, deriv=1, delta=0.001)
    theirs = scipy.signal.savgol_filter(x, 251, 2, deriv=1, delta=0.001, axis=0)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.isnan(ours[:, 0]).sum() == 251 and not np.isnan(ours[:, 1]).any()
    np.testing.assert_allclose(ours[:, 1], theirs[:, 1], atol=1e-10 * np.abs(theirs[:, 1]).max())
    np.testing.assert_array_equal(filters.savgol_filter(x[:, 1], 7, 1, deriv=2), np.zeros(5000))
    np.testing.assert_array_equal(scipy.signal.savgol_filter(x[:, 1], 7, 1, deriv=2),
                                  np.zeros(5000))


def test_welch_of_one_column_has_scipys_shape():
    v = np.random.default_rng(4).standard_normal(3000)
    f, p = filters.welch(v, 100.0, 256)
    f_theirs, p_theirs = scipy.signal.welch(v, fs=100.0, nperseg=256, detrend='linear')
    assert p.shape == p_theirs.shape
    np.testing.assert_allclose(p, p_theirs, atol=1e-12 * p_theirs.max())


def test_savitzky_golay_window_that_does_not_fit_is_an_error():
    with pytest.raises(ValueError, match='does not fit'):
        filters.savgol_filter(np.zeros((10, 2)), 11, 2)
    with pytest.raises(ValueError, match='does not fit'):
        filters.savgol_filter(np.zeros((10, 2)), 4, 2)
