"""The identifier's collection of live data (arm_dyn_id.service.samples), no Node."""

import json
import threading

import numpy as np
import pytest

from arm_dyn_id.errors import DataError
from arm_dyn_id.service.samples import MarkerLog, SampleBuffer


def test_buffer_grows_past_its_capacity_and_keeps_every_sample():
    buf = SampleBuffer(2, capacity=4)
    for k in range(11):
        buf.append(0.001 * k, [k, -k], [2 * k, 3 * k])
    assert buf.count == 11 and buf.capacity == 16
    t, q, tau = buf.snapshot()
    np.testing.assert_allclose(t, 0.001 * np.arange(11))
    np.testing.assert_array_equal(q[:, 0], np.arange(11))
    np.testing.assert_array_equal(tau[:, 1], 3 * np.arange(11))


def test_snapshot_stays_valid_while_samples_arrive():
    buf = SampleBuffer(1, capacity=2)
    buf.append(0.0, [1.0], [1.0])
    buf.append(1.0, [2.0], [2.0])
    t, q, _ = buf.snapshot()
    for k in range(100):        # several doublings after the snapshot
        buf.append(2.0 + k, [0.0], [0.0])
    np.testing.assert_array_equal(t, [0.0, 1.0])
    np.testing.assert_array_equal(q[:, 0], [1.0, 2.0])


def test_concurrent_appends_lose_nothing():
    buf = SampleBuffer(3, capacity=8)

    def writer(offset):
        for k in range(500):
            buf.append(offset + k, np.full(3, offset + k), np.zeros(3))
    threads = [threading.Thread(target=writer, args=(i * 1000,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    t, q, _ = buf.snapshot()
    assert len(t) == 2000 and len(set(t.tolist())) == 2000
    np.testing.assert_array_equal(q[:, 2], t)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match='capacity'):
        SampleBuffer(6, capacity=0)


def test_marker_log_keeps_each_marker_once_and_names_bad_ones():
    log = MarkerLog()
    marker = {'segment_id': 3, 'phase': 'forward', 't': 12.5, 'joint': 'joint_2'}
    assert log.add(json.dumps(marker)) == marker
    assert log.add(json.dumps(marker)) is None          # transient_local re-delivery
    assert log.add(json.dumps({**marker, 'phase': 'backward'}))['phase'] == 'backward'
    assert len(log) == 2
    for bad in ('not json', '[1, 2]', json.dumps({'phase': 'done'}),
                json.dumps({'phase': 'done', 't': 'soon'})):
        with pytest.raises(DataError, match='docs/interfaces.md'):
            log.add(bad)
    assert len(log) == 2


def test_angles_a_driver_wrapped_into_one_turn_are_held_continuous():
    """The live fit reads the buffer: a joint reported within (-π, π] that passes π jumps
    by 2π between two samples; the buffer holds it continuous and counts the wrap."""
    q = np.linspace(2.5, 4.0, 200)                       # passes π once
    wrapped = np.angle(np.exp(1j * q))
    buf = SampleBuffer(2, capacity=16)
    for k, a in enumerate(wrapped):
        buf.append(0.01 * k, [a, 0.3], [1.0, 2.0])
    _, held, _ = buf.snapshot()
    np.testing.assert_allclose(held[:, 0], q, atol=1e-12)
    np.testing.assert_allclose(held[:, 1], 0.3)
    assert buf.wraps.tolist() == [1, 0]
