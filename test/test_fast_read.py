"""MCAP JointState records decoded with NumPy give exactly what rosbags gives.

Real bags written with rosbags (MCAP metadata v8 and v9, plain and zstd chunks,
sqlite3) are read twice by ``read_bag``: through the fast MCAP path
(``data.mcap_records``) and with it switched off (rosbags yields every message,
the reference), and every array, marker and quality counter must be equal.
"""

import json
import shutil
from dataclasses import fields

import numpy as np
import pytest

from arm_dyn_id.errors import DataError
from arm_dyn_id.data import bag_reader, mcap_records
from arm_dyn_id.data.bag_format import (
    JOINT_STATE, STRING, decode_joint_state_block, serialize_string, typestore)
from arm_dyn_id.data.bag_reader import read_bag
from arm_dyn_id.data.bag_writer import encode_joint_states, write_bag

JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONV = {'joints': JOINTS, 'torque_constants': [0.5, 0.5, 0.3, 0.2, 0.1, 0.05]}


def read_both(bag, monkeypatch, expect_fast=True, **kw):
    """read_bag through the fast path and through rosbags; checks which path ran."""
    calls = []
    real = mcap_records.joint_state_batches

    def spy(reader, conn):
        out = real(reader, conn)
        calls.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(bag_reader, 'joint_state_batches', spy)
        fast = read_bag(bag, CONV, **kw)
    assert calls == [expect_fast]
    with monkeypatch.context() as m:
        m.setattr(bag_reader, 'joint_state_batches', lambda reader, conn: None)
        m.setattr(bag_reader, 'raw_messages', lambda reader, conns: reader.messages(conns))
        slow = read_bag(bag, CONV, **kw)
    return fast, slow


def assert_same(a, b):
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            assert np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert x == y, f.name


def sweep(n, seed=0, k=6):
    rng = np.random.default_rng(seed)
    t = 1.7e9 + np.arange(n) * 1e-3
    q = np.cumsum(rng.normal(0, 1e-3, (n, k)), axis=0)
    cur = rng.normal(0, 1, (n, k))
    return t, q, cur


@pytest.mark.parametrize('version', [8, 9])
def test_recorder_style_bag_matches_rosbags(tmp_path, monkeypatch, version):
    n = 12000      # 1 kHz, more than one 1 MiB chunk
    t, q, cur = sweep(n)
    names = ['gripper_left'] + JOINTS
    q = np.hstack([np.zeros((n, 1)), q])
    cur = np.hstack([np.zeros((n, 1)), cur])
    markers = [{'t': float(t[i]), 'segment': i // 1000, 'event': 'start'}
               for i in range(5, n, 1000)]
    bag = write_bag(tmp_path / 'bag', t, names, q, cur, velocity=q * 2, markers=markers,
                    torques=cur[:, 1:] * 0.4, torque_names=JOINTS, config_text='a: 1\n',
                    strings={'/chatter': [(t[7], 'hello'), (t[9000], 'bye')]},
                    version=version)
    fast, slow = read_both(bag, monkeypatch)
    assert_same(fast, slow)
    assert fast.n_samples == n and len(fast.markers) == len(markers)
    assert_same(fast, read_bag(bag, CONV, fast=False))


def write_mixed(path, compression=None, seed=1, n=9000):
    """JointStates of many layouts in random runs, log times out of order, other topics."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
    store = typestore()
    rng = np.random.default_rng(seed)
    t, q, cur = sweep(n, seed)
    shuffled = [JOINTS[i] for i in (3, 0, 5, 1, 4, 2)]
    perm = [JOINTS.index(j) for j in shuffled]
    layouts = [
        lambda a, b: encode_joint_states(t[a:b], JOINTS, q[a:b], q[a:b], cur[a:b]),
        # same byte length, other bytes: the joints in another order
        lambda a, b: encode_joint_states(t[a:b], shuffled, q[a:b][:, perm], q[a:b][:, perm],
                                         cur[a:b][:, perm]),
        # an extra joint, no velocity, a frame id
        lambda a, b: encode_joint_states(
            t[a:b], JOINTS + ['finger'], np.hstack([q[a:b], np.ones((b - a, 1))]), None,
            np.hstack([cur[a:b], np.zeros((b - a, 1))]), frame_id='base'),
        # no effort at all (rejected by the reader, counted)
        lambda a, b: encode_joint_states(t[a:b], JOINTS, q[a:b], q[a:b], None),
    ]
    raws = []
    a = 0
    while a < n:
        b = min(n, a + int(rng.integers(1, 400)))
        kind = int(rng.choice(4, p=[0.6, 0.2, 0.15, 0.05]))
        raws.extend(bytes(r) for r in layouts[kind](a, b))
        a = b
    for i in rng.choice(n, 5, replace=False):      # big-endian CDR: the deserialiser's
        msg = store.deserialize_cdr(raws[i], JOINT_STATE)
        raws[i] = bytes(store.serialize_cdr(msg, JOINT_STATE, little_endian=False))
    # log times jittered by up to 20 ms: rosbags yields them sorted, across chunks too
    log = np.round(t * 1e9).astype(np.int64) + rng.integers(-20_000_000, 20_000_000, n)
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    if compression:
        writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    with writer:
        js = writer.add_connection('/joint_states', JOINT_STATE, typestore=store)
        other = writer.add_connection('/joint_torques', JOINT_STATE, typestore=store)
        marks = writer.add_connection('/excitation_segments', STRING, typestore=store)
        for i in range(n):
            writer.write(js, int(log[i]), raws[i])
            if i % 7 == 3:
                writer.write(other, int(log[i]), raws[i])
            if i % 1500 == 10:
                text = json.dumps({'t': float(t[i]), 'i': i}) if i != 1510 else 'not json'
                writer.write(marks, int(log[i]), serialize_string(text))
    return path


@pytest.mark.parametrize('compression', [None, 'zstd'])
def test_mixed_layouts_and_log_order_match_rosbags(tmp_path, monkeypatch, compression):
    bag = write_mixed(tmp_path / 'bag', compression)
    chunks = mcap_records._chunk_plan(next(bag.glob('*.mcap')), {1})
    assert len(chunks) > 1
    assert {c.compression for c in chunks} == {compression or ''}
    # overlapping chunk times: some groups hold more than one chunk
    assert len(mcap_records._groups(chunks)) < len(chunks)
    fast, slow = read_both(bag, monkeypatch)
    assert_same(fast, slow)
    assert fast.quality['rejected']            # the no-effort runs, counted alike
    assert len(fast.markers) == 6 and any('error' in m for m in fast.markers)


def test_sqlite3_bag_falls_back_to_rosbags(tmp_path, monkeypatch):
    t, q, cur = sweep(500)
    bag = write_bag(tmp_path / 'bag', t, JOINTS, q, cur, storage='sqlite3', version=8)
    fast, slow = read_both(bag, monkeypatch, expect_fast=False)
    assert_same(fast, slow)


def test_block_decoder_matches_deserialiser():
    store = typestore()
    t, q, cur = sweep(50)
    rows = [bytes(r) for r in encode_joint_states(t, JOINTS, q, q, cur)]
    other = [JOINTS[i] for i in (1, 0, 2, 3, 4, 5)]
    rows[10] = bytes(encode_joint_states(t[10:11], other, q[10:11], q[10:11], cur[10:11])[0])
    msg = store.deserialize_cdr(rows[20], JOINT_STATE)
    rows[20] = bytes(store.serialize_cdr(msg, JOINT_STATE, little_endian=False))
    block = np.frombuffer(b''.join(rows), dtype=np.uint8).reshape(len(rows), -1)
    decoded, rest = decode_joint_state_block(block)
    assert rest.tolist() == [20]
    assert sorted(len(d[0]) for d in decoded) == [1, 48]
    for sub, names, stamp, pos, vel, eff in decoded:
        for j, i in enumerate(sub):
            ref = store.deserialize_cdr(rows[i], JOINT_STATE)
            assert names == tuple(ref.name)
            assert stamp[j] == ref.header.stamp.sec + ref.header.stamp.nanosec * 1e-9
            assert np.array_equal(pos[j], ref.position)
            assert np.array_equal(vel[j], ref.velocity)
            assert np.array_equal(eff[j], ref.effort)
    # one layout allowed: the shuffled message is left to the deserialiser too
    _, rest = decode_joint_state_block(block, max_layouts=1)
    assert rest.tolist() == [10, 20]


def test_truncated_file_is_a_clear_error(tmp_path):
    t, q, cur = sweep(3000)
    bag = write_bag(tmp_path / 'bag', t, JOINTS, q, cur)
    mcap = next(bag.glob('*.mcap'))
    with open(mcap, 'r+b') as f:
        f.truncate(mcap.stat().st_size // 2)
    with pytest.raises(DataError, match='could not be read.*truncated or damaged'):
        read_bag(bag, CONV)


def test_damaged_chunk_is_a_clear_error(tmp_path):
    t, q, cur = sweep(3000)
    bag = write_bag(tmp_path / 'bag', t, JOINTS, q, cur)
    mcap = next(bag.glob('*.mcap'))
    index = mcap_records._chunk_plan(mcap, {1})[0]
    data = bytearray(mcap.read_bytes())
    data[index.chunk_start_offset] = 0x05         # no chunk opcode where the summary points
    mcap.write_bytes(bytes(data))
    with pytest.raises(DataError, match=f'bag file {mcap}: no chunk record at byte'):
        read_bag(bag, CONV)


def test_unindexed_file_falls_back(tmp_path, monkeypatch):
    """A file whose summary holds no chunk index: rosbags' own scan reads it."""
    t, q, cur = sweep(300)
    bag = write_bag(tmp_path / 'bag', t, JOINTS, q, cur)
    copy = tmp_path / 'copy'
    shutil.copytree(bag, copy)
    monkeypatch.setattr(mcap_records, '_chunk_plan', lambda path, channels: None)
    fast, slow = read_both(copy, monkeypatch, expect_fast=False)
    assert_same(fast, slow)
