"""The one reader of rosbag2 bags (MCAP or sqlite3): joint data into a :class:`Recording`.

:func:`read_bag` reads recorder bags and plain ``ros2 bag record`` bags: the
samples of one ``sensor_msgs/JointState`` topic with the motor current in
``effort``, converted to torques, the segment markers, the configuration the
recorder stored and its summary; an unfinished recorder bag is recovered
first on request.

Deserialising every ``JointState`` into a message object runs at ~20-30k
messages/s, so a 1-hour 1 kHz bag would take minutes. The reader decodes the
CDR bytes with NumPy instead: messages of one byte length whose non-numeric
bytes (frame id, joint names, array lengths) equal those of the first such
message share one layout, so the stamps and the position, velocity and effort
arrays are read as strided float64 columns of a 2-D byte array. Messages that
differ (other names, other lengths, big-endian CDR) go through rosbags'
deserialiser one by one, so the result never depends on the fast path.

It also checks what an offline fit needs and says what is missing and what to
pass instead (the messages name the ``arm-dyn-id`` options): a joint-state topic,
the configured joints, current values in ``effort``, a readable file.
"""

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.data import velocity
from arm_dyn_id.data.angles import unwrap, unwrap_note
from arm_dyn_id.data.bag_format import (
    CONFIG_TOPIC, JOINT_STATE, STRING, SUMMARY_TOPIC, joint_state_layout, typestore)
from arm_dyn_id.data.mcap_records import joint_state_batches, raw_messages
from arm_dyn_id.data.joint_states import (
    EMPTY_ARRAY, LENGTH_MISMATCH, MISSING_JOINTS, JointStateCheck, Rejection)
from arm_dyn_id.data.motor import CurrentToTorque
from arm_dyn_id.data.quality import delivered_fraction, stream_quality
from arm_dyn_id.data.recovery import is_unfinished, recover_bag

#: messages decoded per batch (bounds the memory of raw bytes held at once)
BATCH = 65536


# ---------------------------------------------------------------------------
# NumPy decoding of sensor_msgs/JointState CDR

def _constant_mask(layout):
    """Byte columns that must equal the template's: all but the stamp and the floats."""
    mask = np.ones(layout['length'], dtype=bool)
    mask[4:12] = False
    for count, off in layout['arrays']:
        mask[off:off + 8 * count] = False
    return mask


def _floats(block, off, count):
    return np.ascontiguousarray(block[:, off:off + 8 * count]).view('<f8')


def _decode_batch(raws, store, fast=True):
    """Decode a list of JointState CDR byte strings.

    Returns
    -------
    list of (rows, names, stamp, position, velocity, effort)
        ``rows`` indexes into ``raws``; arrays are (len(rows), k) with k the
        number of names (velocity/effort may have 0 or another width).
        ``fast=False`` sends every message through rosbags' deserialiser.
    """
    out = []
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    slow = [] if fast else list(range(len(raws)))
    for length in np.unique(lengths) if fast else ():
        rows = np.flatnonzero(lengths == length)
        layout = joint_state_layout(raws[rows[0]])
        if layout is None:
            slow.extend(rows.tolist())
            continue
        block = np.frombuffer(b''.join([raws[i] for i in rows]), dtype=np.uint8)
        block = block.reshape(len(rows), int(length))
        mask = _constant_mask(layout)
        template = block[0, mask]
        same = (block[:, mask] == template).all(axis=1)
        if not same.all():
            slow.extend(rows[~same].tolist())
            rows, block = rows[same], block[same]
        sec = np.ascontiguousarray(block[:, 4:8]).view('<i4')[:, 0]
        nsec = np.ascontiguousarray(block[:, 8:12]).view('<u4')[:, 0]
        stamp = sec.astype(np.float64) + nsec.astype(np.float64) * 1e-9
        arrays = [_floats(block, off, count) for count, off in layout['arrays']]
        out.append((rows, layout['names'], stamp, *arrays))
    for i in sorted(slow):
        msg = store.deserialize_cdr(raws[i], JOINT_STATE)
        stamp = np.array([msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9])
        out.append((np.array([i]), tuple(msg.name), stamp,
                    np.asarray(msg.position, dtype=float)[None, :],
                    np.asarray(msg.velocity, dtype=float)[None, :],
                    np.asarray(msg.effort, dtype=float)[None, :]))
    return out


def string_data(raw):
    """``data`` of a ``std_msgs/msg/String`` CDR message, as rosbags' deserialiser reads it.

    Little-endian CDR (what rosbag2 writes) is read here; anything else goes
    through rosbags, so its errors are rosbags'. Building rosbags' type store
    takes ~0.3 s, a sixth of ``arm-dyn-id fit`` of a 1-minute bag, and a
    recorder bag needs it only for these strings.

    Parameters
    ----------
    raw : bytes
        The serialised message with its 4-byte CDR header.

    Returns
    -------
    str
    """
    raw = bytes(raw)
    if len(raw) >= 8 and raw[:2] == b'\x00\x01':
        (n,) = struct.unpack_from('<I', raw, 4)
        # rosbags accepts up to 3 bytes of padding after the string, no more
        if n >= 1 and 8 + n <= len(raw) <= 11 + n:
            try:
                return raw[8:7 + n].decode()
            except UnicodeDecodeError:
                pass
    return typestore().deserialize_cdr(raw, STRING).data


# ---------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class Recording:
    """Joint data of one bag as arrays, in the joint order of ``joints``.

    Attributes
    ----------
    t : ndarray, (N,)
        ``header.stamp`` of each usable sample (s since the epoch), increasing.
    q : ndarray, (N, n)
        Joint positions (rad), continuous: a driver's wraps into one turn taken out.
    dq : ndarray, (N, n)
        Joint velocities (rad/s); NaN where the messages carried none, or everywhere
        when they are not the rate of the angles (``quality['velocity_not_used']``).
    current : ndarray, (N, n)
        Motor currents (A).
    tau : ndarray, (N, n)
        Joint torques k_e·I (N·m, seed 000 eq. 19) from the recording's own
        configuration, or from the ``config`` given to :func:`read_bag`.
    joints : tuple of str
    markers : list of dict
        Segment markers (``excitation_segments`` JSON) in log order, each with
        ``log_time`` (s) added.
    config : dict or None
        The configuration stored in the bag (``/arm_dyn_id/config``).
    quality : dict
        ``recorded``: the recorder's summary (None for plain bags or crashes
        before close); ``loaded``: counters recomputed from the stamps;
        ``excluded_nonfinite``, ``excluded_not_increasing`` and ``rejected``
        (reason -> count) while loading; ``unwrapped`` (joint -> whole turns taken
        out of its angle, :mod:`arm_dyn_id.data.angles`); ``velocity_not_used`` (the
        joints whose published velocity is not the rate of their angles,
        :mod:`arm_dyn_id.data.velocity`: ``dq`` is then all NaN).
    source : pathlib.Path
    states_topic : str
    torque_config : dict
        The current -> torque conversion used (:meth:`CurrentToTorque.to_dict`).
    name_map : dict
        Message joint name -> configured name, for the names that differ
        (``--joint-map`` or an unambiguous prefix match); empty when all match.
    notes : tuple of str
        What the reader decided on its own and the user should hear (the topic
        chosen among several, log times used for unusable stamps, names matched).
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    current: np.ndarray
    tau: np.ndarray
    joints: tuple
    markers: list
    config: dict
    quality: dict
    source: Path
    states_topic: str
    torque_config: dict = field(default_factory=dict)
    name_map: dict = field(default_factory=dict)
    notes: tuple = ()

    @property
    def n_samples(self):
        return self.t.shape[0]


# ---------------------------------------------------------------------------
# joint names of the message -> configured names

_SEPARATORS = '_/:.-'


def _suffix_match(long, short):
    """True when ``long`` is ``short`` with a prefix ending in a separator."""
    return len(long) > len(short) and long.endswith(short) and \
        long[-len(short) - 1] in _SEPARATORS


def match_joint_names(configured, names, joint_map=None):
    """How a message's joint names map onto the configured joints.

    Exact names match first; ``joint_map`` (message name -> configured name)
    renames; a configured joint still missing matches the one message name that
    is it with a prefix (``ur_shoulder_pan_joint`` for ``shoulder_pan_joint``)
    or that it is with a prefix (``joint1`` for ``panda_joint1``), when exactly
    one name does.

    Parameters
    ----------
    configured : sequence of str, (n,)
    names : sequence of str
        One message's joint names.
    joint_map : dict, optional

    Returns
    -------
    mapping : dict
        Message name -> configured name for the names that differ.
    missing : list of str
        Configured joints with no match.
    ambiguous : dict
        Configured joint -> the several message names it could be.
    """
    joint_map = dict(joint_map or {})
    renamed = [joint_map.get(m, m) for m in names]
    mapping = {m: r for m, r in zip(names, renamed) if m != r}
    taken = set(renamed)
    free = [m for m, r in zip(names, renamed) if r not in configured]
    missing, ambiguous = [], {}
    for j in configured:
        if j in taken:
            continue
        found = [m for m in free if _suffix_match(m, j) or _suffix_match(j, m)]
        if len(found) == 1:
            mapping[found[0]] = j
            free.remove(found[0])
            taken.add(j)
        elif found:
            ambiguous[j] = found
        else:
            missing.append(j)
    return mapping, missing, ambiguous


class _NameResolver:
    """Message name tuple -> configured-name tuple (cached), recording what it matched."""

    def __init__(self, configured, joint_map=None):
        self.configured = tuple(configured)
        self.joint_map = dict(joint_map or {})
        self.used = {}
        self.problems = {}     # names -> (missing, ambiguous)
        self._cache = {}

    def __call__(self, names):
        found = self._cache.get(names)
        if found is None:
            mapping, missing, ambiguous = match_joint_names(self.configured, names,
                                                            self.joint_map)
            found = tuple(mapping.get(m, m) for m in names)
            if mapping and not missing and not ambiguous:
                self.used.update({m: mapping[m] for m in mapping})
            if missing or ambiguous:
                self.problems[names] = (missing, ambiguous)
            self._cache[names] = found
        return found


# ---------------------------------------------------------------------------
# reading


def _open_reader(path):
    from rosbags.rosbag2 import Reader
    reader = Reader(path)
    try:
        reader.open()
    except Exception as exc:
        hint = ('the file is truncated or damaged; a bag of the arm_dyn_id recorder is '
                'repaired with --recover' if any(Path(path).glob('*.mcap*'))
                else 'check that it is a rosbag2 folder with metadata.yaml')
        raise DataError(f'bag {path} could not be read ({type(exc).__name__}: {exc}): '
                        f'{hint}') from exc
    return reader


def bag_info(path):
    """Topics, types and message counts of a bag (no message is read).

    Returns
    -------
    dict
        ``topics`` {name: {type, count}}, ``storage``, ``version``, ``duration_s``.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f'bag {path} does not exist')
    reader = _open_reader(path)
    try:
        topics = {c.topic: {'type': c.msgtype, 'count': int(c.msgcount)}
                  for c in reader.connections}
        meta = yaml.safe_load((path / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
        return {'topics': topics, 'version': int(meta['version']),
                'storage': meta['storage_identifier'], 'duration_s': reader.duration * 1e-9}
    finally:
        reader.close()


def read_stored_config(path):
    """The configuration the recorder stored in a bag, reading that one message.

    Parameters
    ----------
    path : path-like
        Bag folder.

    Returns
    -------
    dict or None
        The YAML of ``/arm_dyn_id/config``; None when the bag has none or is
        unfinished (no ``metadata.yaml``).
    """
    path = Path(path).expanduser()
    if not (path / 'metadata.yaml').exists():
        return None
    reader = _open_reader(path)
    try:
        conns = [c for c in reader.connections if c.topic == CONFIG_TOPIC]
        if not conns:       # rosbags reads EVERY message for an empty connection list
            return None
        for _, _, raw in reader.messages(conns):
            return yaml.safe_load(string_data(raw))
    finally:
        reader.close()
    return None


def _conversion(config):
    if config is None:
        return None
    if isinstance(config, CurrentToTorque):
        return config
    if isinstance(config, dict):
        return CurrentToTorque.from_dict(config)
    return CurrentToTorque.from_config(config)


def read_markers(reader, by_topic):
    """Segment markers of every ``*excitation_segments`` topic of an open bag.

    Parameters
    ----------
    reader : rosbags.rosbag2.Reader
    by_topic : dict
        Topic name -> connection.

    Returns
    -------
    list of dict
        The JSON markers with ``log_time`` (s) added; text that is not a JSON
        object is kept as ``{'raw': text, 'error': ...}``.
    """
    markers = []
    for topic, conn in by_topic.items():
        if conn.msgtype != STRING or not topic.endswith('excitation_segments'):
            continue
        for _, log_time, raw in raw_messages(reader, [conn]):
            text = string_data(raw)
            try:
                marker = json.loads(text)
                if not isinstance(marker, dict):
                    raise ValueError('not a JSON object')
            except ValueError as exc:
                marker = {'raw': text, 'error': str(exc)}
            marker['log_time'] = log_time * 1e-9
            markers.append(marker)
    return markers


def read_bag_header(reader, by_topic, config, path):
    """The stored configuration, the recorder's summary and the current conversion.

    Parameters
    ----------
    reader : rosbags.rosbag2.Reader
    by_topic : dict
        Topic name -> connection.
    config : ArmConfig or CurrentToTorque or dict or None
        Conversion that overrides the stored one.
    path : path-like
        The bag (for messages).

    Returns
    -------
    stored_config : dict or None
    recorded : dict or None
        The recorder's summary.
    conversion : CurrentToTorque

    Raises
    ------
    DataError
        Neither a stored configuration nor ``config``.
    """
    stored_config = recorded = None
    if CONFIG_TOPIC in by_topic:
        for _, _, raw in reader.messages([by_topic[CONFIG_TOPIC]]):
            stored_config = yaml.safe_load(string_data(raw))
            break
    if SUMMARY_TOPIC in by_topic:
        for _, _, raw in reader.messages([by_topic[SUMMARY_TOPIC]]):
            recorded = json.loads(string_data(raw))
    conv = _conversion(config)
    if conv is None and stored_config is not None:
        conv = CurrentToTorque.from_dict(stored_config)
    if conv is None:
        raise DataError(f'bag {path} has no stored configuration ({CONFIG_TOPIC}): pass the '
                        'arm config (--config, or config= in Python) with its joints and '
                        'torque_constants (or --torque-constants k1,k2,...) to convert '
                        'currents to torques')
    return stored_config, recorded, conv


def _states_topic(path, by_topic, states_topic, stored_config, notes):
    """The JointState topic to read: given, stored, ``/joint_states``, or the only one."""
    states = sorted(t for t, c in by_topic.items() if c.msgtype == JOINT_STATE)
    topic = states_topic or (stored_config or {}).get('topics', {}).get('states')
    if topic is None:
        if not states:
            if not by_topic or all(int(c.msgcount) == 0 for c in by_topic.values()):
                raise DataError(f'bag {path} is empty (no messages): record the arm\'s '
                                'joint_states into it')
            raise DataError(
                f'bag {path} has no sensor_msgs/JointState topic (topics: '
                f'{sorted(by_topic)}): record joint_states with the motor current '
                'or the joint torque in effort')
        candidates = [t for t in states if t.endswith('joint_states')]
        if len(states) == 1:
            candidates = states
        elif '/joint_states' in states:
            candidates = ['/joint_states']
            notes.append(f'{len(states)} JointState topics ({", ".join(states)}): reading '
                         '/joint_states (--states-topic chooses another)')
        if len(candidates) != 1:
            raise DataError(f'bag {path}: cannot tell the joint-state topic among '
                            f'{states}; pass --states-topic NAME (states_topic= in Python)')
        topic = candidates[0]
    if topic not in by_topic:
        raise DataError(f'bag {path} has no topic {topic} (JointState topics: {states}; '
                        f'all topics: {sorted(by_topic)}): pass --states-topic NAME')
    if by_topic[topic].msgtype != JOINT_STATE:
        raise DataError(f'bag {path}: topic {topic} is a {by_topic[topic].msgtype}, not '
                        f'a sensor_msgs/JointState (JointState topics: {states})')
    return topic


def _unfinished(path, recover):
    """Refuse or recover a bag folder without metadata.yaml."""
    from arm_dyn_id.data.recovery import writer_alive
    if not is_unfinished(path):
        raise DataError(f'{path} is not a rosbag2 bag (no metadata.yaml); pass the '
                        'bag folder that ros2 bag record or the recorder wrote')
    pid = writer_alive(path)
    if pid is not None:
        raise DataError(f'bag {path} is still being written (process {pid} is alive): '
                        'wait until its recorder stops, then read it')
    if not recover:
        raise DataError(
            f'bag {path} has no metadata.yaml: its recorder stopped without closing '
            'it; pass --recover (recover=True in Python) or run '
            f'arm_dyn_id.data.recovery.recover_bag({str(path)!r}) to rebuild its '
            'index (keeps every complete record)')
    recover_bag(path)


def _choose_stamps(stamp, log_time, notes, topic):
    """Header stamps, or the log times when the stamps cannot order the samples.

    Drivers that leave ``header.stamp`` at zero (or at one value) give no time;
    stamps going back or repeating in most messages are also a driver fault.
    Then the bag's log times (reception, ns) are used, and that is said.
    """
    n = stamp.shape[0]
    if n < 2:
        return stamp
    steps = np.diff(stamp)
    bad = int(np.count_nonzero(steps <= 0))
    if bad == 0:
        return stamp
    log_steps = np.diff(log_time)
    log_bad = int(np.count_nonzero(log_steps <= 0))
    if np.all(stamp == stamp[0]):
        why = 'zero' if stamp[0] == 0 else f'all equal ({stamp[0]:.9g} s)'
    elif bad > n // 2 and log_bad < bad // 10:
        why = f'not increasing in {bad} of {n - 1} steps'
    else:
        return stamp
    notes.append(f'header stamps of {topic} are {why}: using the bag\'s log times')
    return log_time


def read_bag(path, config=None, states_topic=None, recover=False, progress=None, fast=True,
             joint_map=None):
    """Read the joint data of a bag into a :class:`Recording`.

    Reads recorder bags and plain ``ros2 bag record`` bags alike (the motor
    current in ``joint_states.effort``), decoding the JointState CDR bytes with
    NumPy (see the module notes). Samples whose stamp does not move forward
    (duplicates, out of order) or that hold NaN or inf are dropped, as the live
    quality counters drop them, and counted in ``quality``. Header stamps that
    are zero, all equal, or mostly not increasing give way to the bag's log
    times (said in ``notes``). Messages may list the joints in any order, carry
    more joints, and name them with a prefix (matched when unambiguous, see
    :func:`match_joint_names`). Errors name the missing piece and the option
    to pass.

    Parameters
    ----------
    path : path-like
        Bag folder (metadata version 8 or 9, MCAP or sqlite3).
    config : ArmConfig or CurrentToTorque or dict, optional
        Current -> torque conversion and joint order instead of the
        configuration stored by the recorder on ``/arm_dyn_id/config``;
        required for bags without one.
    states_topic : str, optional
        ``sensor_msgs/JointState`` topic with the current in ``effort``;
        default: the stored config's, else ``/joint_states`` or the only
        JointState topic.
    recover : bool
        Repair an unfinished recorder bag in place first
        (:func:`arm_dyn_id.data.recovery.recover_bag`); a bag whose writer is
        still running is never touched.
    progress : callable, optional
        ``progress(done, total)`` in messages of the states topic, called per batch.
    fast : bool
        False decodes every message with rosbags' deserialiser (about 5x
        slower): the reference the NumPy decoding is tested against.
    joint_map : dict, optional
        Message joint name -> configured name.

    Returns
    -------
    Recording

    Raises
    ------
    DataError
        No such bag, empty, unreadable, unfinished or still being written, no
        joint-state topic, no configuration, no effort values, no usable sample.
    JointNameError
        A configured joint is absent from every message of the topic (named).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f'bag {path} does not exist')
    if path.is_dir() and not (path / 'metadata.yaml').exists():
        _unfinished(path, recover)
    reader = _open_reader(path)
    notes = []
    try:
        by_topic = {c.topic: c for c in reader.connections}
        stored_config, recorded, conv = read_bag_header(reader, by_topic, config, path)
        topic = _states_topic(path, by_topic, states_topic, stored_config, notes)
        conn = by_topic[topic]
        total = int(conn.msgcount)
        n = conv.n_joints
        check = JointStateCheck(conv.joints)
        resolve = _NameResolver(conv.joints, joint_map)
        store_rows = _Columns(total, n)
        rejected = {}
        seen_names = set()
        done = 0
        batch, logs = [], []

        def reject(rejection, count):
            rejected[rejection] = rejected.get(rejection, 0) + count

        def flush(decoded=None, log=None):
            if decoded is None:
                decoded = _decode_batch(batch, typestore(), fast)
                log = np.asarray(logs, dtype=np.int64)
            for rows, names, stamp, pos, vel, eff in decoded:
                k = len(names)
                seen_names.add(names)
                # the names and array lengths are shared by the whole run of rows: one
                # check (data.joint_states, the nodes' own) stands for all of them
                if eff.shape[1] == 0:
                    reject(EMPTY_ARRAY, len(rows))
                    continue
                if eff.shape[1] != k or pos.shape[1] != k:
                    reject(LENGTH_MISMATCH, len(rows))
                    continue
                idx = check.index(resolve(names))
                if isinstance(idx, Rejection):
                    reject(idx.reason, len(rows))
                    continue
                if np.array_equal(idx, np.arange(n)):
                    idx = slice(0, n)  # the URDF's order already: no column gather
                store_rows.put(rows + done, stamp, pos[:, idx],
                               vel[:, idx] if vel.shape[1] == k else np.nan, eff[:, idx],
                               log[rows] * 1e-9)

        # MCAP: whole chunks decoded with NumPy (data.mcap_records); None: rosbags below
        batches = joint_state_batches(reader, conn) if fast else None
        for decoded, count, log in batches or ():
            flush(decoded, log)
            done += count
            if progress is not None:
                progress(done, total)
        for _, log_time, raw in reader.messages([conn]) if batches is None else ():
            batch.append(raw)
            logs.append(log_time)
            if len(batch) >= BATCH:
                flush()
                done += len(batch)
                batch, logs = [], []
                if progress is not None:
                    progress(done, total)
        if batch:
            flush()
            done += len(batch)
        if progress is not None:
            progress(done, max(total, done))
        markers = read_markers(reader, by_topic)
    finally:
        reader.close()
    if not store_rows.count:
        _no_samples(path, topic, done, rejected, seen_names, resolve, conv)
    if resolve.used:
        pairs = ', '.join(f'{m} -> {j}' for m, j in resolve.used.items())
        notes.append(f'joint names matched: {pairs}')
    t, q, dq, cur, log_t = store_rows.columns()
    t = _choose_stamps(t, log_t, notes, topic)
    _check_effort(path, topic, cur, conv.joints)
    expected_rate = ((recorded or {}).get('quality') or {}).get('expected_rate_hz')
    if not expected_rate:
        # plain bags: the nominal rate is the median step's (gaps then count at 2 periods)
        steps = np.diff(t)
        steps = steps[steps > 0]
        expected_rate = 1.0 / float(np.median(steps)) if steps.size else 1000.0
    loaded, usable = stream_quality(t, (q, cur), expected_rate=expected_rate,
                                    gap_threshold=2.0 / expected_rate, return_usable=True)
    loaded['rejected'] = dict(rejected)
    loaded['messages'] += sum(rejected.values())
    loaded['time_source'] = 'log_time' if t is log_t else 'header_stamp'
    if not usable.any():
        raise DataError(f'bag {path}: no usable samples on {topic} ({loaded["nonfinite"]} '
                        f'with NaN or inf, {loaded["duplicates"]} repeated and '
                        f'{loaded["out_of_order"]} backward stamps)')
    if not usable.all():
        t, q, dq, cur = t[usable], q[usable], dq[usable], cur[usable]
    q, wraps = unwrap(q)
    if wraps.any():
        notes.append(unwrap_note(conv.joints, wraps))
    wrong_velocity = velocity.judge(conv.joints, t, q, dq, max_gap=2.0 / expected_rate)
    if wrong_velocity:
        notes.append(velocity.sentence(wrong_velocity))
        dq = np.full_like(dq, np.nan)
    tau = conv.convert_many(cur)
    for a in (t, q, dq, cur, tau):
        a.setflags(write=False)
    quality = {'recorded': recorded, 'loaded': loaded,
               'excluded_nonfinite': loaded['nonfinite'],
               'excluded_not_increasing': loaded['duplicates'] + loaded['out_of_order'],
               'rejected': rejected,
               'unwrapped': {j: int(w) for j, w in zip(conv.joints, wraps) if w},
               'velocity_not_used': dict(wrong_velocity)}
    return Recording(t=t, q=q, dq=dq, current=cur, tau=tau, joints=conv.joints,
                     markers=markers, config=stored_config, quality=quality, source=path,
                     states_topic=topic, torque_config=conv.to_dict(),
                     name_map=dict(resolve.used), notes=tuple(notes))


class _Columns:
    """The accepted samples, written in place at their message index.

    Preallocated for the bag's message count (grown if the count was short), so
    batches need no concatenation and no sort afterwards: an hour at 1 kHz is
    3.6M rows, and each extra copy of five such columns costs seconds.
    """

    def __init__(self, capacity, n):
        self.n = n
        self.count = 0
        self._alloc(max(int(capacity), 1024))

    def _alloc(self, size, old=None):
        arrays = [np.empty(size), np.empty((size, self.n)), np.empty((size, self.n)),
                  np.empty((size, self.n)), np.empty(size), np.zeros(size, dtype=bool)]
        if old is not None:
            for new, prev in zip(arrays, old):
                new[:len(prev)] = prev
        (self.t, self.q, self.dq, self.cur, self.log, self.present) = arrays

    def put(self, rows, stamp, pos, vel, eff, log):
        end = int(rows.max()) + 1
        self.count += len(rows)
        if end > len(self.t):
            self._alloc(max(end, 2 * len(self.t)),
                        (self.t, self.q, self.dq, self.cur, self.log, self.present))
        if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows) \
                and (len(rows) == 1 or bool((np.diff(rows) == 1).all())):
            # a run of consecutive messages (the usual case): a slice writes the block
            # in one copy, where an index array scatters it row by row
            rows = slice(int(rows[0]), int(rows[-1]) + 1)
        self.t[rows], self.q[rows], self.dq[rows] = stamp, pos, vel
        self.cur[rows], self.log[rows] = eff, log
        self.present[rows] = True

    def columns(self):
        """(t, q, dq, current, log_time) of the accepted rows, in message order."""
        end = int(np.flatnonzero(self.present)[-1]) + 1
        keep = slice(0, end) if self.count == end else np.flatnonzero(self.present[:end])
        return (self.t[keep], self.q[keep], self.dq[keep], self.cur[keep], self.log[keep])


def _no_samples(path, topic, done, rejected, seen_names, resolve, conv):
    """Raise the error that says why no message of ``topic`` was usable."""
    if done == 0:
        raise DataError(f'bag {path}: topic {topic} holds no messages')
    if rejected.get(MISSING_JOINTS):
        have = sorted({j for names in seen_names for j in names})
        for names, (missing, ambiguous) in resolve.problems.items():
            if ambiguous:
                j, found = next(iter(ambiguous.items()))
                raise JointNameError(
                    f'joint {j!r} of the URDF could be any of {found} in {topic} of bag '
                    f'{path}: pass --joint-map {found[0]}:{j},...')
        union = set(have) | {resolve.joint_map.get(m, m) for m in have}
        missing = [j for j in conv.joints if j not in union]
        astray = {b: u for b, u in resolve.joint_map.items()
                  if b in have and u not in conv.joints and b in conv.joints}
        if astray and not missing:
            # the union still holds the bag's own name of a joint mapped away
            b, u = next(iter(astray.items()))
            raise JointNameError(
                f'--joint-map {b}:{u}: {b!r} of {topic} in bag {path} is one of the joints '
                f'read ({list(conv.joints)}), mapped to {u!r}, which is not: no message '
                'then holds them all. Map bag names to the URDF\'s (NAME_IN_BAG:URDF_NAME)')
        if missing:
            raise JointNameError(
                f'joint {missing[0]!r} is not in {topic} of bag {path} (missing: {missing}; '
                f'the messages have {have}): pass --joint-map NAME_IN_BAG:{missing[0]},... '
                'or the --urdf / --config of this arm')
        groups = sorted(sorted(names) for names in seen_names)
        raise JointNameError(
            f'the joints are spread over differently named messages of {topic} in bag '
            f'{path} (e.g. {groups[0]} and {groups[-1]}: two publishers?); no message '
            f'holds all of {list(conv.joints)}: record one topic that does, or pass '
            '--states-topic')
    if rejected.get(EMPTY_ARRAY):
        raise DataError(f'bag {path}: {topic} carries no effort values (the motor '
                        'current or joint torque): record with it in joint_states.effort '
                        '(ros2_control map_interface_to_joint_state), or pass '
                        '--states-topic for the topic that has it')
    raise DataError(f'bag {path}: no usable samples on {topic} (rejected: {rejected})')


def _check_effort(path, topic, effort, joints):
    """Refuse efforts that are NaN or inf in every message of a joint (named)."""
    finite = np.isfinite(effort).any(axis=0)
    if not finite.all():
        bad = [j for j, ok in zip(joints, finite) if not ok]
        raise DataError(f'bag {path}: the effort of {bad[0]} on {topic} is NaN or inf in '
                        f'every message ({len(bad)} of {len(joints)} joints: {bad}): the '
                        'driver does not publish it')


def concatenate_recordings(recordings, gap=30.0):
    """Several recordings of one arm as one, placed one after another in time.

    Each recording after the first is shifted so that it starts ``gap``
    seconds after the previous one ends (bags recorded on different days, or
    overlapping clocks, never interleave), and its markers with it; a sweep
    therefore never spans two bags, and the step between them is a reported gap.

    Parameters
    ----------
    recordings : sequence of Recording
        Same joints, same order.
    gap : float
        Seconds between one recording's end and the next one's start.

    Returns
    -------
    Recording
        ``quality['loaded']`` sums the counters; ``quality['bags']`` keeps each
        one's; ``source`` is the first bag, ``notes`` say the shifts.

    Raises
    ------
    DataError
        Recordings of different joints.
    """
    recordings = list(recordings)
    if len(recordings) == 1:
        return recordings[0]
    first = recordings[0]
    for rec in recordings[1:]:
        if tuple(rec.joints) != tuple(first.joints):
            raise DataError(f'bag {rec.source} has joints {list(rec.joints)}, bag '
                            f'{first.source} {list(first.joints)}: fit bags of one arm')
    parts, markers, notes, end = [], [], list(first.notes), None
    for rec in recordings:
        shift = 0.0 if end is None else end + gap - float(rec.t[0])
        parts.append(rec.t + shift)
        for m in rec.markers:
            m = dict(m)
            for key in ('t', 'log_time'):
                if isinstance(m.get(key), (int, float)):
                    m[key] = m[key] + shift
            markers.append(m)
        if end is not None:
            notes.extend(n for n in rec.notes if n not in notes)
        end = float(parts[-1][-1])
    arrays = {'t': np.concatenate(parts)}
    for key in ('q', 'dq', 'current', 'tau'):
        arrays[key] = np.concatenate([getattr(r, key) for r in recordings])
    for a in arrays.values():
        a.setflags(write=False)
    loaded = [r.quality['loaded'] for r in recordings]
    total = dict(loaded[0])
    for key in ('messages', 'accepted', 'gaps', 'drops', 'duplicates', 'out_of_order',
                'nonfinite', 'duration_s'):
        total[key] = sum(q.get(key, 0) for q in loaded)
    total['max_gap_s'] = max(q.get('max_gap_s', 0.0) for q in loaded)
    total['rate_hz'] = float(np.average([q['rate_hz'] for q in loaded],
                                        weights=[max(q['accepted'], 1) for q in loaded]))
    total['delivered_fraction'] = delivered_fraction(total)
    rejected = {}
    for q in loaded:
        for k, v in (q.get('rejected') or {}).items():
            rejected[k] = rejected.get(k, 0) + v
    total['rejected'] = rejected
    quality = {'recorded': first.quality.get('recorded'), 'loaded': total,
               'excluded_nonfinite': total['nonfinite'],
               'excluded_not_increasing': total['duplicates'] + total['out_of_order'],
               'rejected': rejected,
               'bags': [{'bag': str(r.source), **r.quality['loaded']} for r in recordings]}
    name_map = {}
    for r in recordings:
        name_map.update(r.name_map)
    return Recording(t=arrays['t'], q=arrays['q'], dq=arrays['dq'],
                     current=arrays['current'], tau=arrays['tau'], joints=first.joints,
                     markers=markers, config=first.config, quality=quality,
                     source=first.source, states_topic=first.states_topic,
                     torque_config=first.torque_config, name_map=name_map,
                     notes=tuple(notes))
