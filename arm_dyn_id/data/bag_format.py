"""The rosbag2 bags of arm_dyn_id: topic and type names, the type store, CDR layouts.

What the writer (:mod:`.bag_writer`), crash recovery (:mod:`.recovery`) and the
reader (:mod:`.bag_reader`) must agree on, kept in one place so that none of
them imports another for it.

Bag layout written by the recorder (``<output_dir>/<prefix>_<UTC time>/``)::

    metadata.yaml                  written on close (or by recover_bag)
    <name>.mcap                    rosbag2 MCAP storage, metadata version 8
    recording_summary.json         quality counters (sidecar), written on close
    .recorder.lock                 pid of the live writer; removed on close

Topics: the raw inputs as received (e.g. ``/joint_states``), ``/joint_torques``,
``/excitation_segments``, ``/arm_dyn_id/config`` (std_msgs/String YAML, first
message of the file) and ``/arm_dyn_id/recording_summary`` (std_msgs/String
JSON, last message, on close or recovery).
"""

import struct

import numpy as np

CONFIG_TOPIC = '/arm_dyn_id/config'
SUMMARY_TOPIC = '/arm_dyn_id/recording_summary'
STRING = 'std_msgs/msg/String'
JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT64_ARRAY = 'std_msgs/msg/Float64MultiArray'
LOCK_NAME = '.recorder.lock'
SUMMARY_NAME = 'recording_summary.json'
BAG_VERSION = 8  # rosbag2 metadata version readable by Jazzy and later

_TYPESTORE = None


def typestore():
    """rosbags' type store of the standard ROS 2 messages (built once, on first use)."""
    global _TYPESTORE
    if _TYPESTORE is None:
        from rosbags.typesys import Stores, get_typestore
        _TYPESTORE = get_typestore(Stores.LATEST)
    return _TYPESTORE


def serialize_string(text):
    """CDR bytes of a ``std_msgs/msg/String`` holding ``text``."""
    store = typestore()
    msg = store.types[STRING](data=text)
    return bytes(store.serialize_cdr(msg, STRING))


# ---------------------------------------------------------------------------
# CDR layout of sensor_msgs/JointState (little endian, XCDR1 as rosbag2 stores it)

def _align(pos, n):
    # CDR alignment counts from the end of the 4-byte encapsulation header
    return pos + (-(pos - 4)) % n


def joint_state_layout(raw):
    """Offsets of one little-endian JointState CDR message.

    Returns
    -------
    dict or None
        ``names`` (tuple), ``arrays`` [(count, byte offset of the data)] for
        position, velocity, effort, ``length``; None when the message is not
        little-endian CDR or is malformed.
    """
    if len(raw) < 16 or raw[0] != 0 or raw[1] != 1:
        return None
    try:
        pos = 12
        (n_frame,) = struct.unpack_from('<I', raw, pos)
        pos += 4 + n_frame
        pos = _align(pos, 4)
        (k,) = struct.unpack_from('<I', raw, pos)
        pos += 4
        names = []
        for _ in range(k):
            pos = _align(pos, 4)
            (n,) = struct.unpack_from('<I', raw, pos)
            names.append(bytes(raw[pos + 4:pos + 3 + n]).decode())
            pos += 4 + n
        arrays = []
        for _ in range(3):
            pos = _align(pos, 4)
            (count,) = struct.unpack_from('<I', raw, pos)
            pos += 4
            if count:
                pos = _align(pos, 8)
            arrays.append((count, pos))
            pos += 8 * count
    except (struct.error, UnicodeDecodeError):
        return None
    if pos > len(raw):
        return None
    return {'names': tuple(names), 'arrays': arrays, 'length': len(raw)}


def constant_mask(layout):
    """Byte columns of a layout that all its messages share: all but the stamp and floats.

    Parameters
    ----------
    layout : dict
        From :func:`joint_state_layout`.

    Returns
    -------
    ndarray of bool, (layout['length'],)
    """
    mask = np.ones(layout['length'], dtype=bool)
    mask[4:12] = False
    for count, off in layout['arrays']:
        mask[off:off + 8 * count] = False
    return mask


def _ranges(mask):
    """[start, stop) byte ranges where ``mask`` is True."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _rows_equal(rows, template, a, b):
    """Whether bytes [a, b) of each row equal the template's, compared 8 bytes at a time.

    The names and padding of a 6-joint message are ~100 bytes; comparing them as
    uint64 words instead of single bytes makes the check of a 1-hour bag 8x cheaper.
    """
    words = (b - a) // 8 * 8
    same = np.ones(rows.shape[0], dtype=bool)
    if words:
        same &= (rows[:, a:a + words].view('<u8') ==
                 template[a:a + words].view('<u8')).all(axis=1)
    if a + words < b:
        same &= (rows[:, a + words:b] == template[a + words:b]).all(axis=1)
    return same


def decode_joint_state_block(block, max_layouts=8):
    """Decode many JointState CDR messages of one byte length at once.

    Messages whose non-numeric bytes (encapsulation, frame id, joint names,
    array lengths and padding) equal those of a template message share its
    :func:`joint_state_layout`, so their stamps and position, velocity and
    effort arrays are strided float64 columns of ``block``. The first row is
    the first template; rows that differ from it are tried against their own
    first row, up to ``max_layouts`` layouts.

    Parameters
    ----------
    block : ndarray of uint8, (k, length)
        One serialised message (CDR with its 4-byte header) per row.
    max_layouts : int
        Layouts tried before the remaining rows are left to a deserialiser.

    Returns
    -------
    decoded : list of (rows, names, stamp, position, velocity, effort)
        ``rows`` (m,) int64 indexes into ``block``; ``names`` tuple of str (n);
        ``stamp`` (m,) s, ``header.stamp``; ``position``, ``velocity``,
        ``effort`` (m, count) float64 with each array's own count (0 when empty).
    rest : ndarray of int64
        Rows not decoded (big-endian or malformed CDR, or more layouts than
        ``max_layouts``): deserialise them one by one.
    """
    rows = np.arange(block.shape[0])
    decoded = []
    rest = []
    for _ in range(max_layouts):
        if not rows.size:
            break
        layout = joint_state_layout(block[rows[0]].tobytes())
        if layout is None:
            rest.append(rows[:1])
            rows = rows[1:]
            continue
        sub = block if rows.size == block.shape[0] else block[rows]
        same = np.ones(rows.size, dtype=bool)
        template = sub[0]
        for a, b in _ranges(constant_mask(layout)):
            same &= _rows_equal(sub, template, a, b)
        if not same.all():
            sub = sub[same]
        sec = np.ascontiguousarray(sub[:, 4:8]).view('<i4')[:, 0]
        nsec = np.ascontiguousarray(sub[:, 8:12]).view('<u4')[:, 0]
        stamp = sec.astype(np.float64) + nsec.astype(np.float64) * 1e-9
        arrays = [np.ascontiguousarray(sub[:, off:off + 8 * count]).view('<f8')
                  for count, off in layout['arrays']]
        decoded.append((rows[same], layout['names'], stamp, *arrays))
        rows = rows[~same]
    rest.append(rows)
    return decoded, np.sort(np.concatenate(rest)).astype(np.int64)
