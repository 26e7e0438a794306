"""BagRecorder, crash recovery and read_bag on what they write (no ROS: rosbags only)."""

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

from arm_dyn_id.errors import DataError, JointNameError, RecordingError
from arm_dyn_id.data.bag_reader import read_bag
from arm_dyn_id.data.bag_format import (
    CONFIG_TOPIC, JOINT_STATE, STRING, SUMMARY_TOPIC, serialize_string, typestore)
from arm_dyn_id.data.bag_writer import BagRecorder
from arm_dyn_id.data.recovery import (
    find_unfinished, is_unfinished, recover_bag, recover_unfinished, scan_mcap)

REPO = Path(__file__).resolve().parent.parent
JOINTS = ['joint_1', 'joint_2', 'joint_3']
CONFIG = {'joints': JOINTS, 'torque_constants': [0.5, 0.2, 0.1], 'current_signs': [1, -1, 1],
          'current_offsets': [0.0, 0.1, 0.0], 'topics': {'states': '/joint_states'}}


def joint_state(stamp, names, position, effort, velocity=None):
    store = typestore()
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
    rec = read_bag(path)
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
    assert rec.quality['rejected'] == {'length_mismatch': 1, 'empty_array': 1}
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
        read_bag(path, config=cfg)


def test_plain_ros2_bag_needs_config(tmp_path):
    for plugin in (StoragePlugin.SQLITE3, StoragePlugin.MCAP):
        path = tmp_path / plugin.name.lower()
        with Writer(path, version=8, storage_plugin=plugin) as writer:
            conn = writer.add_connection('/joint_states', JOINT_STATE, typestore=typestore())
            for i in range(20):
                t = 100.0 + i * 1e-3
                writer.write(conn, int(t * 1e9), joint_state(t, JOINTS, [0, 0, 0], [1, 2, 3]))
        with pytest.raises(DataError, match='config='):
            read_bag(path)
        rec = read_bag(path, config=CONFIG)
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
            read_bag(bag)
        result = recover_bag(bag)
        n = sum(result['messages'].values())
        assert previous <= n <= full
        previous = n
        with Reader(bag) as reader:
            assert reader.message_count >= n
        assert (bag / f'{bag.name}.mcap.truncated').is_file()
        if result['messages'].get('/joint_states', 0):
            rec = read_bag(bag)
            np.testing.assert_allclose(rec.tau, expected_tau(rec.current))
            assert 'recovered' in rec.quality['recorded']


WRITER_SCRIPT = textwrap.dedent('''
    import sys, time
    import numpy as np, yaml
    sys.path.insert(0, {repo!r})
    sys.path.insert(0, {test!r})
    from arm_dyn_id.data.bag_format import JOINT_STATE
    from arm_dyn_id.data.bag_writer import BagRecorder
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
            time.sleep(delay)   # paces the writer at 1 kHz
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
        time.sleep(3.0)     # let it record for a while (several flushes), then crash it
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
    rec = read_bag(bag)
    expected = (killed_at - 1.5 - start) * 1000
    assert rec.n_samples >= expected
    np.testing.assert_allclose(rec.current[:, 0], np.arange(rec.n_samples))
    np.testing.assert_allclose(rec.tau, expected_tau(rec.current))


def test_serialized_string_reads_back():
    store = typestore()
    assert store.deserialize_cdr(serialize_string('a: 1'), STRING).data == 'a: 1'


FULL_DISK_SCRIPT = textwrap.dedent('''
    import json, resource, sys, time
    import yaml
    sys.path.insert(0, {repo!r})
    sys.path.insert(0, {test!r})
    from arm_dyn_id.data.bag_format import JOINT_STATE
    from arm_dyn_id.data.bag_writer import BagRecorder
    from test_recording import joint_state, CONFIG, JOINTS
    reports = []
    rec = BagRecorder({out!r}, flush_period=0.1, on_error=lambda r: reports.append(r.error))
    h = rec.add_topic('/joint_states', JOINT_STATE)
    path = rec.open(config_text=yaml.safe_dump(CONFIG))
    # a truly full disk: the summary cannot be written either
    (path / 'recording_summary.json').mkdir()
    # writes past the limit fail with EFBIG (CPython ignores SIGXFSZ)
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
    t0 = 1700000000.0
    i = 0
    deadline = time.monotonic() + 15
    while rec.error is None and time.monotonic() < deadline:
        t = t0 + i * 1e-3
        rec.write(h, int(t * 1e9), joint_state(t, JOINTS, [0, 0, 0], [i, 1, 2]))
        i += 1
        if i % 10 == 0:
            time.sleep(0.002)   # about 5 kHz: several flushes before the limit
    later = [rec.write(h, 0, b'') for _ in range(50)]
    try:
        rec.close(summary={{'note': 'full'}})
        closed = 'ok'
    except BaseException as exc:
        closed = repr(exc)
    print(json.dumps({{'reports': reports, 'error': rec.error, 'closed': closed,
                      'accepted_later': any(later), 'stats': rec.stats(),
                      'path': str(path), 'sent': i}}))
''')


def test_write_failure_keeps_the_flushed_part_and_close_never_raises(tmp_path):
    """Disk full mid-recording (RLIMIT_FSIZE -> EFBIG), summary unwritable too (issue 9)."""
    out = tmp_path / 'out'
    limit = 400_000
    script = FULL_DISK_SCRIPT.format(repo=str(REPO), test=str(REPO / 'test'), out=str(out),
                                     limit=limit)
    done = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    bag = Path(result['path'])
    mcap = bag / f'{bag.name}.mcap'
    assert result['closed'] == 'ok'
    error = result['error']
    assert result['reports'] == [error.split('; ')[0]]   # reported once, when it happened
    assert error.startswith(f'cannot write {mcap}: File too large (EFBIG)'), error
    assert 'recording_summary.json' in error and 'Is a directory' in error
    assert not result['accepted_later'] and result['stats']['dropped'] >= 50
    assert mcap.stat().st_size == limit
    # unfinished, lock kept: found like a crashed bag, and recovered
    assert (bag / '.recorder.lock').is_file() and not (bag / 'metadata.yaml').exists()
    assert find_unfinished(out) == [bag]
    (bag / 'recording_summary.json').rmdir()
    rec = read_bag(bag, recover=True)
    flushed_states = result['stats']['flushed'] - 1    # minus the config message
    assert flushed_states > 1000
    # everything flushed is recovered; what was still queued when the disk filled may be
    # lost, or not (on a slow machine the failing write can be chunk framing after the
    # last message), but nothing beyond what was sent
    assert flushed_states <= rec.n_samples <= result['sent']
    np.testing.assert_array_equal(rec.current[:, 0], np.arange(rec.n_samples))
    np.testing.assert_allclose(rec.tau, expected_tau(rec.current))
    assert rec.quality['recorded']['recovered'] is True


def test_output_dir_below_a_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / 'not_a_folder'
    blocker.write_text('')
    rec = BagRecorder(blocker / 'bags')
    rec.add_topic('/joint_states', JOINT_STATE)
    with pytest.raises(OSError, match=f'cannot create a bag in {blocker / "bags"}: .*'
                       f'{blocker} is a file, not a folder') as info:
        rec.open(config_text='a: 1')
    assert isinstance(info.value, RecordingError) and info.value.errno is not None
    assert rec.close() is None
