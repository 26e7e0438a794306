"""Interleaved topics in MCAP chunks: the NumPy record path gives what rosbags gives.

The recorder writes ``/joint_states`` and ``/joint_torques`` one message each
per sample, with markers and other topics among them, so the record walker of
``data.mcap_records`` sees repeating patterns of records rather than runs of
one topic. Hypothesis draws interleavings of topics (patterns repeated or
broken, chunk boundaries anywhere), joint name lists that vary within a topic,
NaN efforts, empty and short arrays, frame ids, big-endian CDR and log times
with ties and steps back; each message must come out of the fast path as
rosbags' deserialiser reads it, in rosbags' order, and ``read_bag`` must give
the same recording (or the same error) either way.
"""

import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.data import bag_reader, mcap_records
from arm_dyn_id.data.bag_format import JOINT_STATE, STRING, serialize_string, typestore
from arm_dyn_id.data.bag_reader import read_bag

JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONV = {'joints': JOINTS, 'torque_constants': [0.5, 0.5, 0.3, 0.2, 0.1, 0.05]}
NAME_SETS = [
    JOINTS,
    [JOINTS[i] for i in (3, 0, 5, 1, 4, 2)],        # same byte length, other bytes
    JOINTS + ['finger'],
    JOINTS[:5] + ['joint_6x'],                       # one name longer
    ['a'],
    [],
]
STATES, TORQUES, MARKERS, CHATTER = ('/joint_states', '/joint_torques',
                                     '/excitation_segments', '/chatter')
TOPICS = [STATES, TORQUES, MARKERS, CHATTER]

layouts = st.tuples(
    st.integers(0, len(NAME_SETS) - 1),                   # names
    st.sampled_from(['full', 'short', 'empty']),          # position
    st.sampled_from(['full', 'empty']),                   # velocity
    st.sampled_from(['full', 'nan', 'empty', 'all_nan']),  # effort
    st.sampled_from(['', 'base']),                        # frame id
)
# one segment: a pattern of topics, each with its layout, repeated a number of times
segments = st.tuples(
    st.lists(st.tuples(st.sampled_from(TOPICS), layouts), min_size=1, max_size=4),
    st.integers(1, 40),
    st.sampled_from(['none', 'break_chunk', 'tie', 'back']),
)


def _message(store, layout, stamp, rng, big_endian):
    names_i, pos_kind, vel_kind, eff_kind, frame = layout
    names = NAME_SETS[names_i]
    k = len(names)
    width = {'full': k, 'short': max(k - 1, 0), 'empty': 0}
    eff = rng.normal(0, 1, k if eff_kind != 'empty' else 0)
    if eff_kind == 'nan' and k:
        eff[rng.random(k) < 0.5] = np.nan
    if eff_kind == 'all_nan':
        eff[:] = np.nan
    types = store.types
    sec = int(np.floor(stamp))
    msg = types[JOINT_STATE](
        header=types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](
                sec=sec, nanosec=int(round((stamp - sec) * 1e9)) % 1_000_000_000),
            frame_id=frame),
        name=list(names), position=rng.normal(0, 1, width[pos_kind]),
        velocity=rng.normal(0, 1, width[vel_kind]), effort=eff)
    return bytes(store.serialize_cdr(msg, JOINT_STATE, little_endian=not big_endian))


def write_interleaved(path, plan, seed):
    """Write the drawn segments with rosbags' MCAP writer; returns the bag folder."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    store = typestore()
    rng = np.random.default_rng(seed)
    t = 1.7e9
    log = int(t * 1e9)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {STATES: writer.add_connection(STATES, JOINT_STATE, typestore=store),
                 TORQUES: writer.add_connection(TORQUES, JOINT_STATE, typestore=store),
                 MARKERS: writer.add_connection(MARKERS, STRING, typestore=store),
                 CHATTER: writer.add_connection(CHATTER, STRING, typestore=store)}
        for pattern, repeats, event in plan:
            for r in range(repeats):
                t += 1e-3
                step = 1_000_000
                if event == 'tie' and r % 3 == 1:
                    step = 0
                elif event == 'back' and r % 5 == 2:
                    step = -3_000_000
                log += step
                for topic, layout in pattern:
                    if topic in (MARKERS, CHATTER):
                        raw = serialize_string(f'{{"t": {t!r}, "r": {r}}}' if topic == MARKERS
                                               else 'x' * int(rng.integers(0, 9)))
                    else:
                        raw = _message(store, layout, t, rng, rng.random() < 0.02)
                    # the recorder logs a sample's messages with one receive time
                    writer.write(conns[topic], log, raw)
            storage = writer.storage
            if event == 'break_chunk' and storage.chunk.msgs:
                storage.close_chunk()
    return path


def _fast_rows(reader, conn):
    """(log time, names, stamp, position, velocity, effort) per message, from the fast path."""
    batches = mcap_records.joint_state_batches(reader, conn)
    assert batches is not None
    rows = []
    for decoded, count, log_time in batches:
        out = [None] * count
        for idx, names, stamp, pos, vel, eff in decoded:
            for j, i in enumerate(idx.tolist()):
                assert out[i] is None
                out[i] = (int(log_time[i]), names, stamp[j], pos[j], vel[j], eff[j])
        assert all(o is not None for o in out)
        rows.extend(out)
    return rows


def _slow_rows(reader, conn):
    store = typestore()
    rows = []
    for _, log_time, raw in reader.messages([conn]):
        msg = store.deserialize_cdr(raw, JOINT_STATE)
        rows.append((log_time, tuple(msg.name),
                     msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
                     msg.position, msg.velocity, msg.effort))
    return rows


def _read(bag, fast):
    """read_bag's recording, or its error, with the MCAP record path on or off."""
    patches = [] if fast else [
        mock.patch.object(bag_reader, 'joint_state_batches', lambda reader, conn: None),
        mock.patch.object(bag_reader, 'raw_messages',
                          lambda reader, conns: reader.messages(conns))]
    for p in patches:
        p.start()
    try:
        return read_bag(bag, CONV)
    except (DataError, JointNameError) as exc:
        return type(exc), str(exc)
    finally:
        for p in patches:
            p.stop()


def assert_same_recording(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    for name in ('t', 'q', 'dq', 'current', 'tau'):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y, equal_nan=True), name
    for name in ('markers', 'quality', 'notes', 'joints', 'name_map', 'states_topic'):
        assert getattr(a, name) == getattr(b, name), name


def check_bag(bag):
    from rosbags.rosbag2 import Reader
    with Reader(bag) as reader:
        by_topic = {c.topic: c for c in reader.connections}
        for topic in (STATES, TORQUES):
            fast, slow = _fast_rows(reader, by_topic[topic]), _slow_rows(reader, by_topic[topic])
            assert len(fast) == len(slow), topic
            for f, s in zip(fast, slow):
                assert f[:3] == s[:3], topic
                for x, y in zip(f[3:], s[3:]):
                    assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), topic
        conns = [by_topic[x] for x in (MARKERS, CHATTER, TORQUES)]
        fast = [(c.topic, t, bytes(raw))
                for c, t, raw in mcap_records.raw_messages(reader, conns)]
        slow = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages(conns)]
        assert fast == slow
    assert_same_recording(_read(bag, True), _read(bag, False))


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(plan=st.lists(segments, min_size=1, max_size=8), seed=st.integers(0, 2 ** 16))
def test_interleavings_decode_as_rosbags_does(plan, seed):
    with tempfile.TemporaryDirectory() as tmp:
        check_bag(write_interleaved(Path(tmp) / 'bag', plan, seed))


def test_recorder_pattern_is_walked_in_runs_not_records(tmp_path):
    """joint_states/joint_torques alternating over chunks: a few runs per chunk."""
    good = (0, 'full', 'full', 'full', '')
    torque = (0, 'full', 'empty', 'full', '')
    plan = [([(STATES, good), (TORQUES, torque)], 2500, 'none'),
            ([(MARKERS, good), (STATES, good), (TORQUES, torque)], 1, 'none'),
            ([(STATES, good), (TORQUES, torque)], 2500, 'tie')]
    bag = write_interleaved(tmp_path / 'bag', plan, 0)
    mcap = next(bag.glob('*.mcap'))
    chunks = mcap_records._chunk_plan(mcap, {1})
    assert len(chunks) > 1
    n_runs = 0
    with open(mcap, 'rb') as f:
        for index in chunks:
            buf = mcap_records._read_chunk(f, index, mcap)
            n_runs += len(mcap_records._runs(buf, {1}, mcap, index.chunk_start_offset))
    # 5001 joint_states messages; runs break at chunk ends and at the marker only
    assert n_runs <= 2 * len(chunks) + 2
    check_bag(bag)
    rec = read_bag(bag, CONV)
    assert rec.n_samples == 5001 and len(rec.markers) == 1


@pytest.mark.parametrize('period', [1, 2, 3, 5])
def test_patterns_of_any_period_up_to_the_limit(tmp_path, period):
    good = (0, 'full', 'full', 'nan', '')
    pattern = [(STATES, good)] + [(TORQUES, (k % 3, 'full', 'empty', 'full', 'base'))
                                  for k in range(period - 1)]
    bag = write_interleaved(tmp_path / 'bag', [(pattern, 700, 'none')], period)
    check_bag(bag)


@settings(max_examples=200, deadline=None, database=None)
@given(text=st.text(), little=st.booleans(), pad=st.integers(0, 5),
       cut=st.integers(0, 3), junk=st.binary(max_size=12))
def test_string_data_reads_as_rosbags_does(text, little, pad, cut, junk):
    """bag_reader.string_data gives rosbags' String.data, or rosbags' error."""
    from rosbags.serde import SerdeError
    store = typestore()
    raw = bytes(store.serialize_cdr(store.types[STRING](data=text), STRING,
                                    little_endian=little))
    for candidate in (raw, raw + b'\0' * pad, raw[:len(raw) - cut], junk, raw[:4] + junk):
        try:
            expected = store.deserialize_cdr(candidate, STRING).data
        except SerdeError as exc:
            with pytest.raises(SerdeError, match=str(exc)[:20]):
                bag_reader.string_data(candidate)
        else:
            assert bag_reader.string_data(candidate) == expected


def test_reading_a_recorder_bag_builds_no_type_store(tmp_path, monkeypatch):
    """rosbags' type store (0.3 s to build) is left alone when NumPy decodes everything."""
    from arm_dyn_id.data import bag_format
    good = (0, 'full', 'full', 'full', '')
    plan = [([(STATES, good), (TORQUES, good), (MARKERS, good)], 50, 'none')]
    bag = write_interleaved(tmp_path / 'bag', plan, 0)
    monkeypatch.setattr(bag_format, '_TYPESTORE', None)
    bag_reader.read_stored_config(bag)
    rec = read_bag(bag, CONV)
    assert rec.n_samples == 50 and len(rec.markers) == 50
    assert bag_format._TYPESTORE is None
