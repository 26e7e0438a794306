"""Stream quality counters: gaps, drops, duplicates, out-of-order, NaN, rejections."""

import math

import numpy as np
import pytest

from arm_dyn_id.data.quality import StreamQuality, loss_warning, stream_quality


def test_clean_stream():
    q = StreamQuality(1000.0)
    for i in range(1001):
        assert q.update(100.0 + i * 1e-3, [1.0, 2.0])
    s = q.summary()
    assert s['gaps'] == s['drops'] == s['duplicates'] == s['out_of_order'] == 0
    assert s['rate_hz'] == pytest.approx(1000.0)
    assert s['duration_s'] == pytest.approx(1.0)
    assert s['delivered_fraction'] == 1.0


def test_counts_each_defect():
    q = StreamQuality(1000.0, gap_threshold=0.002)
    stamps = [0.000, 0.001, 0.002, 0.006,   # 4 ms step: one gap, three drops
              0.006,                          # duplicate
              0.005,                          # out of order
              0.007, 0.008]
    for t in stamps:
        q.update(t, [0.0])
    q.update(0.009, [math.nan])
    q.update(0.010, [math.inf])
    q.reject('length mismatch')
    q.reject('length mismatch')
    q.reject('missing effort')
    s = q.summary()
    assert s['gaps'] == 1
    assert s['max_gap_s'] == pytest.approx(0.004)
    assert s['drops'] == 3
    assert s['duplicates'] == 1
    assert s['out_of_order'] == 1
    assert s['nonfinite'] == 2
    assert s['rejected'] == {'length mismatch': 2, 'missing effort': 1}
    assert s['messages'] == len(stamps) + 2 + 3
    assert s['accepted'] == len(stamps) - 2


def test_two_ms_step_is_one_drop_not_a_gap():
    q = StreamQuality(1000.0, 0.002)
    for t in (0.0, 0.001, 0.003):
        q.update(t)
    assert q.drops == 1 and q.gaps == 0


def test_batch_helper_agrees():
    t = np.r_[np.arange(100) * 1e-3, 0.2, 0.2]
    v = np.ones((t.size, 2))
    v[5, 1] = np.nan
    s = stream_quality(t, v)
    assert s['nonfinite'] == 1 and s['duplicates'] == 1 and s['gaps'] == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match='expected_rate'):
        StreamQuality(0.0)


def test_batch_helper_equals_the_live_counter():
    """The vectorised counters and usable mask are those of StreamQuality, sample by sample."""
    rng = np.random.default_rng(3)
    steps = rng.choice([1e-3, 1e-3, 1e-3, 2e-3, 2.5e-3, 4e-3, 0.0, -3e-3], size=2000)
    t = 50.0 + np.cumsum(steps)
    v = rng.normal(size=(t.size, 3))
    v[rng.integers(0, t.size, 40), rng.integers(0, 3, 40)] = np.nan
    live = StreamQuality(500.0, gap_threshold=0.003)
    accepted = np.array([live.update(s, row) for s, row in zip(t.tolist(), v)])
    summary, usable = stream_quality(t, v, expected_rate=500.0, gap_threshold=0.003,
                                     return_usable=True)
    np.testing.assert_array_equal(usable, accepted)
    expected = live.summary()
    assert summary.keys() == expected.keys()
    for key, value in expected.items():
        assert summary[key] == pytest.approx(value, rel=1e-12), key
    assert stream_quality([])['messages'] == 0


def test_despike_replaces_isolated_spikes_and_passes_steps():
    from arm_dyn_id.data.quality import despike
    rng = np.random.default_rng(3)
    t = np.arange(20_000) / 100.0
    q = 0.5 * np.sin(t / 5)
    dq = np.gradient(q, t)
    # gravity-like trend + a Coulomb step at every reversal + noise
    clean = np.stack([3 * np.cos(q) + 0.5 * np.tanh(dq / 1e-3),
                      np.sin(q) - 0.2 * np.sign(dq)], axis=1)
    noisy = clean + rng.normal(0, 0.005, clean.shape)
    assert not despike(noisy)[1].any()          # reversals and noise are not gross errors
    spikes = rng.choice(np.arange(1, len(t) - 1), 30, replace=False)
    hit = noisy.copy()
    hit[spikes, 0] += rng.choice([-1, 1], 30) * rng.uniform(0.2, 2.0, 30)
    cleaned, flagged = despike(hit)
    assert set(np.flatnonzero(flagged[:, 0])) == set(spikes)
    assert not flagged[:, 1].any()
    np.testing.assert_allclose(cleaned[spikes, 0], noisy[spikes, 0], atol=0.05)


def test_despike_leaves_a_heavy_tailed_column_alone():
    """Outliers in more than max_fraction of the samples are the signal (breakaway at
    every reversal of a real arm at 100 Hz), not isolated errors: nothing replaced."""
    from arm_dyn_id.data.quality import despike
    rng = np.random.default_rng(4)
    x = np.stack([np.sin(np.arange(10_000) / 200.0)] * 2, axis=1)
    x += rng.normal(0, 0.001, x.shape)
    x[rng.choice(np.arange(1, 9_999), 200, replace=False), 0] += 1.0    # 2 %: heavy tail
    x[rng.choice(np.arange(1, 9_999), 10, replace=False), 1] += 1.0     # 0.1 %: errors
    cleaned, flagged = despike(x)
    assert not flagged[:, 0].any() and np.array_equal(cleaned[:, 0], x[:, 0])
    assert flagged[:, 1].sum() == 10


def test_stamps_jittering_around_their_period_lose_nothing():
    """A driver that stamps on receipt: each stamp up to 40 % of a period off its slot. The
    long steps it makes are not drops (the short ones beside them make up for them): no
    sample is missing and nothing is said; with 2 % of the samples dropped as well, those
    600 are counted, not the jitter's. The running counter and the whole-stream one
    agree."""
    rng = np.random.default_rng(0)
    slots = np.arange(30000) / 500.0
    jittered = slots + rng.uniform(-0.4, 0.4, len(slots)) / 500.0
    dropped = np.delete(jittered, rng.choice(len(slots), 600, replace=False))
    for stamps, missing in ((jittered, 0), (dropped, 600)):
        whole = stream_quality(stamps, expected_rate=500.0, gap_threshold=2 / 500.0)
        running = StreamQuality(500.0, 2 / 500.0)
        for stamp in stamps:
            running.update(stamp)
        for summary in (whole, running.summary()):
            assert summary['drops'] == missing
            assert (loss_warning(summary) is None) == (missing == 0)
    assert stream_quality(jittered, expected_rate=500.0)['delivered_fraction'] == 1.0
