"""BagRecorder, crash recovery and load_recording (no ROS needed: rosbags only)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Reader, StoragePlugin, Writer

from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.recording import (
    CONFIG_TOPIC, JOINT_STATE, STRING, SUMMARY_TOPIC, BagRecorder, _typestore, find_unfinished,
    is_unfinished, load_recording, recover_bag, recover_unfinished, scan_mcap, serialize_string)

REPO = Path(__file__).resolve().parent.parent
JOINTS = ['joint_1', 'joint_2', 'joint_3']
CONFIG = {'joints': JOINTS, 'torque_constants': [0.5, 0.2, 0.1], 'current_signs': [1, -1, 1],
          'current_offsets': [0.0, 0.1, 0.0], 'topics': {'states': '/joint_states'}}


def joint_state(stamp, names, position, effort, velocity=None):
    store = _typestore()
    types = store.types
    sec = int(stamp)
    msg = types[JOINT_STATE](
        header=types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](
                sec=sec, nanosec=int(round((stamp - sec) * 1e9))),
            frame_id=''),
        name=list(names), position=np.asarray(position, float),
        velocity=np.asarray(velocity if velocity is not None else [], float),
        effort=np.asarray(effort, float))
    return bytes(store.serialize_cdr(msg, JOINT_STATE))


def expected_tau(current):
    gains = np.array([0.5, -0.2, 0.1])
    return gains * (np.asarray(current) - np.array([0.0, 0.1, 0.0]))


def record(tmp_path, n=500, extra=()):
    rec = BagRecorder(tmp_path, flush_period=0.2)
    states = rec.add_topic('/joint_states', JOINT_STATE)
    markers = rec.add_topic('/excitation_segments', STRING)
    path = rec.open(config_text=yaml.safe_dump(CONFIG))
    t0 = 1700000000.0
    rec.write_text(markers, int(t0 * 1e9), json.dumps({'segment_id': 0, 'phase': 'sweep',
                                                      'joint': 'joint_2', 't': t0}))
    for i in range(n):
        t = t0 + i * 1e-3
        # reversed order plus an extra joint: matched by name
        rec.write(states, int(t * 1e9),
                  joint_state(t, ['gripper'] + JOINTS[::-1], [9, 3, 2, 1],
                              [9, 0.3 * i, 0.2 * i, 0.1 * i], velocity=[0, 0.3, 0.2, 0.1]))
    for data in extra:
        rec.write(states, int((t0 + n * 1e-3) * 1e9), data)
    rec.close(summary={'quality': {'expected_rate_hz': 1000.0}, 'note': 'test'})
    return path


def test_round_trip(tmp_path):
    bad = [joint_state(1700000000.6, JOINTS, [1, 2, 3], [1, np.nan, 3]),
           joint_state(1700000000.7, JOINTS, [1, 2], [1, 2, 3]),
           joint_state(1700000000.8, JOINTS, [1, 2, 3], [])]
    path = record(tmp_path, 500, extra=bad)
    assert (path / 'metadata.yaml').is_file() and not is_unfinished(path)
    assert not (path / '.recorder.lock').exists()
    rec = load_recording(path)
    assert rec.joints == tuple(JOINTS)
    assert rec.n_samples == 500
    i = np.arange(500)
    np.testing.assert_allclose(rec.current, np.c_[0.1 * i, 0.2 * i, 0.3 * i])
    np.testing.assert_allclose(rec.q, np.tile([1.0, 2.0, 3.0], (500, 1)))
    np.testing.assert_allclose(rec.dq, np.tile([0.1, 0.2, 0.3], (500, 1)))
    np.testing.assert_allclose(rec.tau, expected_tau(rec.current))
    np.testing.assert_allclose(np.diff(rec.t), 1e-3, atol=1e-6)
    assert rec.config['joints'] == JOINTS
    assert rec.markers[0]['phase'] == 'sweep' and 'log_time' in rec.markers[0]
    assert rec.quality['recorded']['note'] == 'test'
    assert rec.quality['excluded_nonfinite'] == 1
    assert rec.quality['rejected'] == {'length mismatch': 1, 'missing effort': 1}
    side = json.loads((path / 'recording_summary.json').read_text())
    assert side['writer']['dropped'] == 0
    with Reader(path) as reader:  # a standard reader opens it
        topics = {c.topic for c in reader.connections}
        assert {CONFIG_TOPIC, SUMMARY_TOPIC, '/joint_states'} <= topics
        assert reader.message_count == 500 + 3 + 3


def test_never_overwrites(tmp_path):
    paths = {record(tmp_path, 5) for _ in range(3)}
    assert len(paths) == 3
    assert all((p / 'metadata.yaml').is_file() for p in paths)


def test_missing_joint_named(tmp_path):
    path = record(tmp_path, 10)
    cfg = {'joints': JOINTS + ['joint_9'], 'torque_constants': [1, 1, 1, 1]}
    with pytest.raises(JointNameError, match='joint_9'):
        load_recording(path, config=cfg)


def test_plain_ros2_bag_needs_config(tmp_path):
    for plugin in (StoragePlugin.SQLITE3, StoragePlugin.MCAP):
        path = tmp_path / plugin.name.lower()
        with Writer(path, version=8, storage_plugin=plugin) as writer:
            conn = writer.add_connection('/joint_states', JOINT_STATE, typestore=_typestore())
            for i in range(20):
                t = 100.0 + i * 1e-3
                writer.write(conn, int(t * 1e9), joint_state(t, JOINTS, [0, 0, 0], [1, 2, 3]))
        with pytest.raises(DataError, match='config='):
            load_recording(path)
        rec = load_recording(path, config=CONFIG)
        assert rec.n_samples == 20 and rec.config is None
        np.testing.assert_allclose(rec.tau[0], expected_tau([1, 2, 3]))


def test_recover_truncated_at_any_offset(tmp_path):
    path = record(tmp_path / 'src', 3000)
    data = (path / f'{path.name}.mcap').read_bytes()
    full = len(scan_mcap(path / f'{path.name}.mcap')['messages'])
    previous = -1
    for frac in (0.05, 0.3, 0.5, 0.77, 0.95):
        bag = tmp_path / f'cut{int(frac * 100)}'
        bag.mkdir()
        (bag / f'{bag.name}.mcap').write_bytes(data[:int(len(data) * frac)])
        assert is_unfinished(bag)
        with pytest.raises(DataError, match='recover_bag'):
            load_recording(bag)
        result = recover_bag(bag)
        n = sum(result['messages'].values())
        assert previous <= n <= full
        previous = n
        with Reader(bag) as reader:
            assert reader.message_count >= n
        assert (bag / f'{bag.name}.mcap.truncated').is_file()
        if result['messages'].get('/joint_states', 0):
            rec = load_recording(bag)
            np.testing.assert_allclose(rec.tau, expected_tau(rec.current))
            assert 'recovered' in rec.quality['recorded']


WRITER_SCRIPT = textwrap.dedent('''
    import sys, time
    import numpy as np, yaml
    sys.path.insert(0, {repo!r})
    sys.path.insert(0, {test!r})
    from arm_dyn_id.recording import BagRecorder, JOINT_STATE
    from test_recording import joint_state, CONFIG, JOINTS
    rec = BagRecorder({out!r}, flush_period=0.5)
    h = rec.add_topic('/joint_states', JOINT_STATE)
    rec.open(config_text=yaml.safe_dump(CONFIG))
    start = time.time()
    print(start, flush=True)
    i = 0
    while True:
        t = start + i * 1e-3
        delay = t - time.time()
        if delay > 0:
            time.sleep(delay)
        rec.write(h, int(t * 1e9), joint_state(t, JOINTS, [0, 0, 0], [i, 1, 2]))
        i += 1
''')


@pytest.mark.slow
def test_sigkill_loses_at_most_the_last_flush(tmp_path):
    out = tmp_path / 'out'
    script = WRITER_SCRIPT.format(repo=str(REPO), test=str(REPO / 'test'), out=str(out))
    proc = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE, text=True)
    try:
        start = float(proc.stdout.readline())
        time.sleep(3.0)
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    (bag,) = find_unfinished(out)
    results = recover_unfinished(out)
    assert results[0]['path'] == str(bag)
    assert find_unfinished(out) == []
    rec = load_recording(bag)
    expected = (killed_at - 1.5 - start) * 1000
    assert rec.n_samples >= expected
    np.testing.assert_allclose(rec.current[:, 0], np.arange(rec.n_samples))
    np.testing.assert_allclose(rec.tau, expected_tau(rec.current))


def test_serialized_string_reads_back():
    store = _typestore()
    assert store.deserialize_cdr(serialize_string('a: 1'), STRING).data == 'a: 1'
