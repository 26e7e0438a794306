"""JointState messages of MCAP bags read as records and decoded in bulk with NumPy.

rosbags yields one message at a time from a Python loop over each chunk's
records (about 6 µs a message: 20 s for a 1-hour 1 kHz bag). Here the chunk
indexes of the MCAP summary (read with the ``mcap`` package) give the chunks
that hold the topic; each chunk is decompressed once and its records are
walked in *runs*: a message record followed by records with the same opcode,
length and channel sits at a fixed stride, and so does each record of a
repeating pattern (the recorder's ``joint_states``, ``joint_torques``,
``joint_states``, ...), so a run of any length costs a few NumPy operations.
The CDR bytes of all messages of one length in a chunk are then decoded at
once by :func:`~arm_dyn_id.data.bag_format.decode_joint_state_block`, and
the few it cannot decode (other layouts beyond its limit, big-endian CDR) go
through rosbags' deserialiser.

The result is the one rosbags gives, message for message and in its order:
the channels rosbags matches to the connection, file by file in the bag's
order, and within a file by log time, ties in file order (rosbags merges the
time-sorted chunks by log time and chunk offset). :func:`joint_state_batches`
returns None, and the caller reads with rosbags, whenever this path does not
apply: sqlite3 storage, file- or message-compressed bags, an MCAP file without
summary or chunk index, an unknown chunk compression, a rosbags version whose
reader looks different.
"""

import struct
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import DataError
from arm_dyn_id.data.bag_format import JOINT_STATE, decode_joint_state_block, typestore

#: messages decoded per batch (bounds the raw bytes held at once: ~60 MB at 6 joints)
BATCH_MESSAGES = 1 << 18

_HEAD = 11              # opcode (1) + record length (8) + channel id (2)
_MESSAGE = 0x05
_CHUNK = 0x06
_MESSAGE_FIXED = 22     # channel id, sequence, log time, publish time
_COMPRESSIONS = ('', 'zstd', 'lz4')
_PERIOD = 8        # records of a repeating pattern recognised by _runs


def _storages(reader, conn):
    """[(file path, [channel ids])] of an open rosbags reader, or None if not applicable.

    The channels are those rosbags itself reads for ``conn``: same topic, type,
    serialisation and QoS, and digest when both have one.
    """
    try:
        from rosbags.rosbag2.storage_mcap import McapReader
        directory = reader.storage
        storages = directory.storages
        mode = directory.metadata.compression_mode
    except (AttributeError, ImportError):
        return None
    if mode or not storages or not all(isinstance(s, McapReader) for s in storages):
        return None
    files = []
    for storage in storages:
        ids = [x.id for x in storage.connections
               if x.topic == conn.topic and x.msgtype == conn.msgtype and x.ext == conn.ext
               and (not x.digest or not conn.digest or conn.digest == x.digest)]
        files.append((Path(storage.path), ids))
    return files


def _chunk_plan(path, channels):
    """Chunk indexes of one MCAP file holding ``channels``, in file order; None: no index."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    try:
        with open(path, 'rb') as f:
            summary = make_reader(f).get_summary()
    except (McapError, OSError, struct.error, ValueError, EOFError):
        return None
    if summary is None or not summary.chunk_indexes:
        return None
    chunks = sorted((c for c in summary.chunk_indexes
                     if any(cid in c.message_index_offsets for cid in channels)),
                    key=lambda c: c.chunk_start_offset)
    if any(c.compression not in _COMPRESSIONS for c in chunks):
        return None
    return chunks


def _groups(chunks):
    """Split chunks where no later message can sort before an earlier one.

    rosbags orders by (log time, chunk offset), so a chunk group boundary is
    safe where every earlier chunk ends no later than every later chunk starts.
    """
    if not chunks:
        return []
    starts = np.array([c.message_start_time for c in chunks], dtype=np.int64)
    ends = np.array([c.message_end_time for c in chunks], dtype=np.int64)
    ok = np.maximum.accumulate(ends)[:-1] <= np.minimum.accumulate(starts[::-1])[::-1][1:]
    cuts = np.flatnonzero(ok) + 1
    return [chunks[a:b] for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(chunks)])]


def _read_chunk(f, index, path):
    """Decompressed records of one chunk, as uint8 (uncompressed_size,)."""
    f.seek(index.chunk_start_offset)
    head = f.read(9 + 28 + 4)
    if len(head) < 41 or head[0] != _CHUNK:
        raise DataError(f'bag file {path}: no chunk record at byte {index.chunk_start_offset} '
                        'where its summary says: the file is damaged')
    (n,) = struct.unpack_from('<I', head, 37)
    f.seek(index.chunk_start_offset + 41 + n + 8)
    data = f.read(index.compressed_size)
    if len(data) != index.compressed_size:
        raise DataError(f'bag file {path}: the chunk at byte {index.chunk_start_offset} is '
                        'cut short: the file is truncated')
    try:
        if index.compression == 'zstd':
            import zstandard
            data = zstandard.ZstdDecompressor().decompress(
                data, max_output_size=index.uncompressed_size)
        elif index.compression == 'lz4':
            import lz4.frame
            data = lz4.frame.decompress(data)
    except Exception as exc:
        raise DataError(f'bag file {path}: the chunk at byte {index.chunk_start_offset} '
                        f'does not decompress ({type(exc).__name__}: {exc})') from exc
    if len(data) != index.uncompressed_size:
        raise DataError(f'bag file {path}: the chunk at byte {index.chunk_start_offset} holds '
                        f'{len(data)} bytes, its index says {index.uncompressed_size}')
    return np.frombuffer(data, dtype=np.uint8)


def _strided(buf, start, rows, cols, stride):
    return np.lib.stride_tricks.as_strided(buf[start:], shape=(rows, cols),
                                           strides=(stride, 1), writeable=False)


def _runs(buf, channels, path, where):
    """Message records of ``channels`` in a chunk's records, as runs at a fixed stride.

    A run is a record repeated back to back (one topic) or one phase of a
    repeating pattern of up to ``_PERIOD`` records: the recorder writes a
    ``joint_states`` and a ``joint_torques`` message per sample, so its chunks
    hold no two records of one topic in a row, but every second record is one.
    A pattern is recognised from the first few records and confirmed with
    NumPy in growing windows; where none repeats, records are taken one by one.

    Returns
    -------
    list of (start, count, record length, channel id, stride)
        ``count`` records of the same ``record length`` (bytes after opcode and
        length field) and channel, ``stride`` bytes apart from byte ``start``.
    """
    size = buf.shape[0]
    mv = memoryview(buf)
    runs = []
    pos = 0
    while pos < size:
        heads = _pattern(mv, pos, size, path, where)
        period = heads[-1][0] - pos + heads[-1][2]
        count = 1
        if period >= _HEAD and pos + period + _HEAD <= size \
                and mv[pos + period:pos + period + _HEAD] == mv[pos:pos + _HEAD]:
            # a pattern of len(heads) records seems to repeat: count whole periods
            window = 64
            while True:
                start = pos + count * period
                m = min(window, (size - start) // period)
                if m <= 0:
                    break
                ok = np.ones(m, dtype=bool)
                for at, _, _ in heads:
                    ok &= (_strided(buf, start + at - pos, m, _HEAD, period)
                           == buf[at:at + _HEAD]).all(axis=1)
                if ok.all():
                    count += m
                    window *= 4
                    continue
                count += int(np.argmin(ok))
                break
        for at, op, stride in heads:
            if op != _MESSAGE:
                continue
            if stride - 9 < _MESSAGE_FIXED:
                raise DataError(f'bag file {path}: invalid message record length '
                                f'{stride - 9} in the chunk at byte {where}')
            (cid,) = struct.unpack_from('<H', mv, at + 9)
            if cid in channels:
                # count 1: the records of a pattern that did not come back, one by one
                runs.append((at, count, stride - 9, cid, period if count > 1 else stride))
        pos += count * period
    return runs


def _pattern(mv, pos, size, path, where):
    """[(offset, opcode, stride)] of the records from ``pos`` until one repeats the first.

    At most ``_PERIOD`` records; only the first when a record is shorter than
    the head compared, or when the first record's head does not come back.
    """
    heads = []
    at = pos
    first = mv[pos:pos + _HEAD]
    while at < size and len(heads) < _PERIOD:
        if at + 9 > size:
            raise DataError(f'bag file {path}: a record is cut short in the chunk at byte '
                            f'{where}: the file is damaged')
        op = mv[at]
        (length,) = struct.unpack_from('<Q', mv, at + 1)
        stride = 9 + length
        if at + stride > size:
            raise DataError(f'bag file {path}: a record overruns the chunk at byte {where}: '
                            'the file is damaged')
        if heads and (stride < _HEAD or mv[at:at + _HEAD] == first):
            break
        heads.append((at, op, stride))
        if stride < _HEAD:
            break
        at += stride
    if len(heads) > 1 and not (at + _HEAD <= size and mv[at:at + _HEAD] == first):
        return heads[:1]
    return heads


def _message_data(buf, runs):
    """Log times and message bytes of runs, grouped by byte length.

    Returns
    -------
    log_time : ndarray of int64, (m,)
        ns, in record order.
    by_length : dict
        length -> list of (positions (k,) into the m messages, bytes (k, length));
        one item per length: the runs of one length are gathered into one block
        (a recorder chunk holds one run per marker), so a chunk of interleaved
        topics is decoded in a few NumPy operations, not message by message.
    """
    if not runs:
        return np.zeros(0, dtype=np.int64), {}
    starts, times = [], []
    for pos, count, length, _, stride in runs:
        starts.append(pos + stride * np.arange(count, dtype=np.int64))
        times.append(_strided(buf, pos + 15, count, 8, stride))
    starts = np.concatenate(starts)
    # the runs of a pattern's phases overlap in the file: rank messages by their offset
    rank = np.empty(starts.size, dtype=np.int64)
    rank[np.argsort(starts, kind='stable')] = np.arange(starts.size)
    log_time = np.empty(starts.size, dtype=np.int64)
    log_time[rank] = np.concatenate(times).view('<u8')[:, 0]
    groups = {}
    done = 0
    for pos, count, length, _, stride in runs:
        n = length - _MESSAGE_FIXED
        groups.setdefault(n, []).append(
            (rank[done:done + count], _strided(buf, pos + 31, count, n, stride)))
        done += count
    by_length = {}
    for n, items in groups.items():
        if len(items) > 1:
            items = [(np.concatenate([r for r, _ in items]),
                      np.concatenate([b for _, b in items]))]
        by_length[n] = items
    return log_time, by_length


def _decode(parts, store):
    """Decode the messages of a batch: {length: [(rows, bytes)]} -> _decode_batch tuples."""
    out = []
    for length, items in parts.items():
        if length == 0:
            items = [(np.concatenate([r for r, _ in items]),
                      np.zeros((sum(len(r) for r, _ in items), 0), dtype=np.uint8))]
        for rows, block in items:
            # each chunk's strided view decoded where it lies: gathering every message's
            # bytes into one block first copied the whole bag once more
            out.extend(_decode_block(rows, block, store))
    return out


def _decode_block(rows, block, store):
    out = []
    decoded, rest = decode_joint_state_block(block)
    for sub, names, stamp, pos, vel, eff in decoded:
        out.append((rows[sub], names, stamp, pos, vel, eff))
    if rest.size:
        store = typestore() if store is None else store
        for i in rest.tolist():
            # the reference path (rosbags' deserialiser), as bag_reader does it
            msg = store.deserialize_cdr(block[i].tobytes(), JOINT_STATE)
            stamp = np.array([msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9])
            out.append((rows[i:i + 1], tuple(msg.name), stamp,
                        np.asarray(msg.position, dtype=float)[None, :],
                        np.asarray(msg.velocity, dtype=float)[None, :],
                        np.asarray(msg.effort, dtype=float)[None, :]))
    return out


class _Batch:
    """Messages gathered from chunk groups until a batch is full."""

    def __init__(self):
        self.parts = {}
        self.times = []
        self.count = 0

    def add(self, log_time, by_length, order=None):
        """Add one chunk group; ``order``: rank of each message in read order, or None."""
        for length, items in by_length.items():
            for rows, block in items:
                rows = rows if order is None else order[rows]
                self.parts.setdefault(length, []).append((rows + self.count, block))
        self.times.append(log_time if order is None else log_time[np.argsort(order)])
        self.count += log_time.shape[0]

    def take(self, store):
        decoded = _decode(self.parts, store)
        log_time = np.concatenate(self.times) if self.times else np.zeros(0, np.int64)
        count = self.count
        self.__init__()
        return decoded, count, log_time


def _file_batches(path, channels, chunks, store):
    """Batches of one MCAP file, in rosbags' order."""
    batch = _Batch()
    with open(path, 'rb') as f:
        for group in _groups(chunks):
            times, parts, done = [], {}, 0
            for index in group:
                buf = _read_chunk(f, index, path)
                log_time, by_length = _message_data(
                    buf, _runs(buf, channels, path, index.chunk_start_offset))
                # rosbags keeps only what lies within the chunk's stated time range
                keep = ((log_time >= index.message_start_time)
                        & (log_time <= index.message_end_time))
                if not keep.all():
                    log_time, by_length = _select(log_time, by_length, keep)
                times.append(log_time)
                for length, items in by_length.items():
                    parts.setdefault(length, []).extend((r + done, b) for r, b in items)
                done += log_time.shape[0]
            log_time = np.concatenate(times) if times else np.zeros(0, np.int64)
            order = None
            if log_time.size > 1 and (np.diff(log_time) < 0).any():
                # stable sort by log time: the row each message takes in rosbags' order
                order = np.empty(log_time.size, dtype=np.int64)
                order[np.argsort(log_time, kind='stable')] = np.arange(log_time.size)
            batch.add(log_time, parts, order)
            if batch.count >= BATCH_MESSAGES:
                yield batch.take(store)
    if batch.count:
        yield batch.take(store)


def _select(log_time, by_length, keep):
    """The messages where ``keep``, renumbered."""
    new = np.cumsum(keep) - 1
    out = {}
    for length, items in by_length.items():
        for rows, block in items:
            k = keep[rows]
            if k.any():
                out.setdefault(length, []).append((new[rows[k]], block[k]))
    return log_time[keep], out


def joint_state_batches(reader, conn):
    """The JointState messages of ``conn`` decoded in batches, or None to use rosbags.

    Parameters
    ----------
    reader : rosbags.rosbag2.Reader
        The open reader of the bag (its storages say which files and channels
        rosbags would read).
    conn : rosbags connection
        The ``sensor_msgs/JointState`` topic's connection.

    Returns
    -------
    iterator of (decoded, count, log_time) or None
        ``decoded``: list of ``(rows, names, stamp, position, velocity,
        effort)`` as :func:`~arm_dyn_id.data.bag_format.decode_joint_state_block`
        gives them, ``rows`` indexing the batch's ``count`` messages in rosbags'
        order; ``log_time`` (count,) int64 ns, the bag's receive time of each.
        None when this path does not apply (see the module notes).

    Raises
    ------
    DataError
        While iterating: a chunk the summary points at is missing, cut short or
        does not decompress.
    """
    if conn.msgtype != JOINT_STATE:
        return None
    files = _storages(reader, conn)
    if files is None:
        return None
    plans = []
    for path, channels in files:
        chunks = _chunk_plan(path, channels) if channels else []
        if chunks is None:
            return None
        plans.append((path, set(channels), chunks))
    return _batches(plans)


def _batches(plans):
    store = None        # rosbags' type store only for what NumPy does not decode (0.3 s)
    for path, channels, chunks in plans:
        yield from _file_batches(path, channels, chunks, store)


def raw_messages(reader, conns):
    """``reader.messages(conns)`` of rosbags, faster for a few messages among many.

    For the sparse topics of a bag (segment markers among 1 kHz joint states):
    the chunks that hold them are walked in runs instead of record by record.

    Parameters
    ----------
    reader : rosbags.rosbag2.Reader
        An open reader.
    conns : list of rosbags connections

    Returns
    -------
    iterator of (connection, log time (ns), bytes)
        In rosbags' order (log time, ties in file order), as rosbags yields them.
    """
    plans = []
    for conn in conns:
        files = _storages(reader, conn)
        if files is None:
            return reader.messages(conns)
        for i, (path, ids) in enumerate(files):
            if len(plans) <= i:
                plans.append((path, {}))
            plans[i][1].update({cid: conn for cid in ids if cid not in plans[i][1]})
    for i, (path, channels) in enumerate(plans):
        chunks = _chunk_plan(path, channels) if channels else []
        if chunks is None:
            return reader.messages(conns)
        plans[i] = (path, channels, chunks)
    return _raw_messages(plans)


def _raw_messages(plans):
    for path, channels, chunks in plans:
        with open(path, 'rb') as f:
            for group in _groups(chunks):
                found = []
                for c, index in enumerate(group):
                    buf = _read_chunk(f, index, path)
                    for pos, count, length, cid, stride in _runs(
                            buf, channels, path, index.chunk_start_offset):
                        for r in range(pos, pos + count * stride, stride):
                            (t,) = struct.unpack_from('<Q', buf, r + 15)
                            if index.message_start_time <= t <= index.message_end_time:
                                found.append((t, c, r, channels[cid],
                                              buf[r + 31:r + 9 + length].tobytes()))
                # ties in file order: the runs of a pattern's phases interleave in the chunk
                found.sort(key=lambda m: m[:3])
                for t, _, _, conn, raw in found:
                    yield conn, t, raw
