"""Recorded data of a floating-base robot (issue 17): the arrays on one time base.

:class:`FloatingData` is what a floating-base fit reads: the base pose and twist, the
joint motion and, for a robot standing on sole sensors, their normal forces, all
resampled onto the ``joint_states`` stamps. :func:`read_floating_bag` builds it from a
rosbag2 bag (MCAP or sqlite3) holding the topics named in the configuration's
``floating_base`` section; :func:`write_floating_bag` writes a simulated run as a bag
that holds only what a user's bag holds.
"""

import dataclasses
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.data.angles import unwrap
from arm_dyn_id.data.bag_format import JOINT_STATE, decode_joint_state_block, typestore
from arm_dyn_id.data.bag_reader import match_joint_names, read_stored_config
from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.data.mcap_records import raw_messages

ODOMETRY = 'nav_msgs/msg/Odometry'
IMU = 'sensor_msgs/msg/Imu'
WRENCH = 'geometry_msgs/msg/WrenchStamped'
#: largest |norm - 1| of a recorded quaternion accepted (then normalised)
QUATERNION_TOLERANCE = 1e-3


@dataclass
class FloatingData:
    """Measured signals of one run, (N, ...) each on one time base.

    Attributes
    ----------
    t : ndarray (N,)
        Time, s.
    base_position : ndarray (N, 3)
        Base frame origin in the world, m.
    base_quaternion : ndarray (N, 4)
        Base attitude in the world, ``x y z w``.
    base_linear : ndarray (N, 3)
        Base linear velocity, world axes, m/s.
    base_angular : ndarray (N, 3)
        Base angular velocity, base axes, rad/s.
    q, dq : ndarray (N, n)
        Joint angles (rad) and rates (rad/s) in the configuration's joint order.
    tau : ndarray (N, n), optional
        Joint torques (N·m) when the recording has them.
    forces : ndarray (N, k), optional
        Normal force of each sole sensor, N.
    sensor_positions : ndarray (N, k, 3) or (k, 3), optional
        Sensor positions: in the world (N, k, 3) (simulation), or in the frames named by
        ``sensor_frames`` (k, 3) (a bag: the configured positions).
    sensor_frames : tuple of str, optional
        URDF frame of each sensor when ``sensor_positions`` are local.
    truth : dict
        Noise-free signals (simulation only), same keys and shapes.
    """

    t: np.ndarray
    base_position: np.ndarray
    base_quaternion: np.ndarray
    base_linear: np.ndarray
    base_angular: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray = None
    forces: np.ndarray = None
    sensor_positions: np.ndarray = None
    sensor_frames: tuple = None
    truth: dict = field(default_factory=dict)


def _floating(config):
    fb = getattr(config, 'floating_base', None)
    if fb is None:
        where = f' {config.source}' if getattr(config, 'source', None) else ''
        raise ConfigError(f'config{where} has no floating_base section: a floating-base '
                          'bag needs method, total_mass and its topics (docs/floating_base.md)')
    return fb


def _open(path):
    from rosbags.rosbag2 import Reader
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f'bag {path} does not exist')
    if path.is_dir() and not (path / 'metadata.yaml').exists():
        raise DataError(f'bag {path} has no metadata.yaml: its recorder stopped without '
                        'closing it; run arm_dyn_id.data.recovery.recover_bag on it first')
    reader = Reader(path)
    try:
        reader.open()
    except Exception as exc:
        raise DataError(f'bag {path} could not be read ({type(exc).__name__}: {exc})') \
            from exc
    return path, reader


def _find_topic(path, by_topic, name, msgtype, key):
    """The bag topic of a configured (relative) name: ``/name`` or the one ``/<ns>/name``."""
    name = name.strip('/')
    found = ['/' + name] if '/' + name in by_topic else \
        [t for t in by_topic if t.endswith('/' + name)]
    if len(found) != 1:
        what = f'several topics {found} for' if found else 'no topic'
        raise DataError(f'bag {path} has {what} {name} ({msgtype}, {key}); '
                        f'its topics: {sorted(by_topic)}')
    topic = found[0]
    if by_topic[topic].msgtype != msgtype:
        raise DataError(f'bag {path}: topic {topic} ({key}) is a {by_topic[topic].msgtype}, '
                        f'not a {msgtype}')
    if int(by_topic[topic].msgcount) < 2:
        raise DataError(f'bag {path}: topic {topic} ({key}) holds '
                        f'{int(by_topic[topic].msgcount)} message(s); at least 2 are needed')
    return topic


def _states_topic(path, by_topic):
    states = sorted(t for t, c in by_topic.items() if c.msgtype == JOINT_STATE)
    stored = read_stored_config(path) or {}
    topic = (stored.get('topics') or {}).get('states')
    if topic in by_topic:
        return topic
    if '/joint_states' in states:
        return '/joint_states'
    candidates = [t for t in states if t.endswith('/joint_states')] or states
    if len(candidates) != 1:
        raise DataError(f'bag {path}: {"no" if not candidates else "more than one"} '
                        f'sensor_msgs/JointState topic ({candidates}) to read the joints from; '
                        f'its topics: {sorted(by_topic)}')
    return candidates[0]


def _stamp(header):
    return header.stamp.sec + header.stamp.nanosec * 1e-9


def _times(stamp, log_time):
    """Header stamps, or the log times when the stamps are all equal (unset)."""
    stamp = np.asarray(stamp, float)
    if len(stamp) > 1 and np.all(stamp == stamp[0]):
        return np.asarray(log_time, float) * 1e-9
    return stamp


def _order(t, *columns):
    """Samples sorted by time with repeated stamps dropped."""
    order = np.argsort(t, kind='stable')
    t = t[order]
    keep = np.concatenate([[True], np.diff(t) > 0])
    return (t[keep],) + tuple(c[order][keep] for c in columns)


def _finite(path, topic, what, t, values):
    bad = ~np.all(np.isfinite(values.reshape(len(values), -1)), axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f'bag {path}: {topic} {what} is NaN or inf in {int(bad.sum())} '
                        f'message(s), first at stamp {t[k]:.6f} s (message {k})')


def _unit(path, topic, t, quat):
    norm = np.linalg.norm(quat, axis=1)
    bad = np.abs(norm - 1.0) > QUATERNION_TOLERANCE
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f'bag {path}: {topic} orientation is not a unit quaternion in '
                        f'{int(bad.sum())} message(s), first at stamp {t[k]:.6f} s (norm '
                        f'{norm[k]:.6g}, x y z w {quat[k].tolist()})')
    return quat / norm[:, None]


def _decode_states(raws, store):
    """JointState CDR byte strings -> [(rows, names, stamp, position, velocity, effort)]."""
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    out = []
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        block = np.frombuffer(b''.join(raws[i] for i in rows), dtype=np.uint8)
        decoded, rest = decode_joint_state_block(block.reshape(len(rows), int(length)))
        out.extend((rows[sub], *more) for sub, *more in decoded)
        for i in rows[rest].tolist():
            msg = store.deserialize_cdr(raws[i], JOINT_STATE)
            out.append((np.array([i]), tuple(msg.name), np.array([_stamp(msg.header)]),
                        *(np.asarray(a, float)[None, :]
                          for a in (msg.position, msg.velocity, msg.effort))))
    return out


def _read_states(path, reader, conn, joints):
    """Stamps, q, dq (NaN when absent), tau (None unless every message has it)."""
    store = typestore()
    # one batch, decoded per byte length: in a floating robot's bag joint_states
    # alternate with the base and sensor messages, so the chunk runs that
    # mcap_records.joint_state_batches decodes at once are single messages
    pairs = [(lt, raw) for _, lt, raw in raw_messages(reader, [conn])]
    total = len(pairs)
    log = np.array([lt for lt, _ in pairs], dtype=np.int64)
    t = np.full(total, np.nan)
    q, dq, tau = (np.full((total, len(joints)), np.nan) for _ in range(3))
    check = JointStateCheck(joints)
    cache = {}
    for rows, names, stamp, pos, vel, eff in _decode_states([r for _, r in pairs], store):
        idx = cache.get(names)
        if idx is None:
            mapping, missing, ambiguous = match_joint_names(joints, names)
            idx = check.index(tuple(mapping.get(m, m) for m in names))
            if isinstance(idx, Rejection) or missing or ambiguous:
                raise DataError(f'bag {path}: {conn.topic} does not name every configured '
                                f'joint once (message names {list(names)}; configured '
                                f'{list(joints)}): record the robot\'s joint_states')
            cache[names] = idx
        k = len(names)
        if pos.shape[1] != k:
            raise DataError(f'bag {path}: {conn.topic} has {pos.shape[1]} positions for '
                            f'{k} names')
        t[rows] = stamp
        q[rows] = pos[:, idx]
        if vel.shape[1] == k:
            dq[rows] = vel[:, idx]
        if eff.shape[1] == k:
            tau[rows] = eff[:, idx]
    t = _times(t, log)
    _finite(path, conn.topic, 'position', t, q)
    t, q, dq, tau = _order(t, q, dq, tau)
    q, _ = unwrap(q)                       # a driver's wraps into one turn (data.angles)
    if np.isnan(dq).any():
        if not np.isnan(dq).all(axis=1).all():
            _finite(path, conn.topic, 'velocity', t, dq)
        dq = np.gradient(q, t, axis=0)     # no velocity published: central differences
    if np.isnan(tau).all():
        tau = None
    else:
        _finite(path, conn.topic, 'effort', t, tau)
    return t, q, dq, tau


def _slow_columns(msg, msgtype):
    """The columns :data:`_COLUMNS` names, from a deserialised message."""
    if msgtype == ODOMETRY:
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        return [p.x, p.y, p.z, o.x, o.y, o.z, o.w, v.x, v.y, v.z, w.x, w.y, w.z]
    if msgtype == IMU:
        o, w = msg.orientation, msg.angular_velocity
        return [o.x, o.y, o.z, o.w, msg.orientation_covariance[0], w.x, w.y, w.z]
    return [msg.wrench.force.z]


#: type -> (strings after the stamp, float64 fields after them, the columns read):
#: Odometry position, orientation, twist; Imu orientation, orientation_covariance[0],
#: angular velocity; WrenchStamped force.z (the order of _slow_columns)
_COLUMNS = {ODOMETRY: (2, 85, [0, 1, 2, 3, 4, 5, 6, 43, 44, 45, 46, 47, 48]),
            IMU: (1, 37, [0, 1, 2, 3, 4, 13, 14, 15]),
            WRENCH: (1, 6, [2])}


def _string_layout(raw, strings):
    """Offset of the first float64 after the header stamp and ``strings`` strings, and the
    strings; None unless little-endian CDR."""
    if len(raw) < 16 or raw[0] != 0 or raw[1] != 1:
        return None
    pos, names = 12, []
    try:
        for _ in range(strings):
            pos += (-(pos - 4)) % 4         # CDR alignment counts after the 4-byte header
            (n,) = struct.unpack_from('<I', raw, pos)
            names.append(bytes(raw[pos + 4:pos + 3 + n]).decode())
            pos += 4 + n
    except (struct.error, UnicodeDecodeError):
        return None
    return pos + (-(pos - 4)) % 8, tuple(names)


def _fixed_messages(reader, conn, msgtype):
    """Stamps, frame ids and the read columns of every message of ``conn``.

    Messages of one byte length whose strings equal the first one's share its layout:
    their floats are strided columns (NumPy, as the JointState reader does); the
    first of each such group is checked against rosbags' deserialiser, and every
    message that differs goes through it.

    Returns
    -------
    log_time (N,) int64, stamp (N,), frame_id list (N,), columns (N, c)
    """
    store = typestore()
    strings, floats, cols = _COLUMNS[msgtype]
    pairs = [(lt, raw) for _, lt, raw in raw_messages(reader, [conn])]
    n = len(pairs)
    log = np.array([lt for lt, _ in pairs], dtype=np.int64)
    stamp, values, frames = np.empty(n), np.empty((n, len(cols))), [''] * n
    lengths = np.fromiter((len(r) for _, r in pairs), dtype=np.int64, count=n)
    slow = []
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        first = pairs[rows[0]][1]
        layout = _string_layout(first, strings)
        if layout is None or layout[0] + 8 * floats != length:
            slow.extend(rows.tolist())
            continue
        offset, names = layout
        msg = store.deserialize_cdr(first, msgtype)
        block = np.frombuffer(b''.join(pairs[i][1] for i in rows), dtype=np.uint8)
        block = block.reshape(len(rows), int(length))
        same = (block[:, 12:offset] == block[0, 12:offset]).all(axis=1)
        slow.extend(rows[~same].tolist())
        rows, block = rows[same], block[same]
        data = np.ascontiguousarray(block[:, offset:]).view('<f8')[:, cols]
        if not np.array_equal(data[0], np.array(_slow_columns(msg, msgtype), float),
                              equal_nan=True):
            slow.extend(rows.tolist())        # not the layout assumed: the reference path
            continue
        sec = np.ascontiguousarray(block[:, 4:8]).view('<i4')[:, 0]
        nsec = np.ascontiguousarray(block[:, 8:12]).view('<u4')[:, 0]
        stamp[rows] = sec + nsec * 1e-9
        values[rows] = data
        for i in rows.tolist():
            frames[i] = names[0]
    for i in slow:
        msg = store.deserialize_cdr(pairs[i][1], msgtype)
        stamp[i], values[i], frames[i] = _stamp(msg.header), _slow_columns(msg, msgtype), \
            msg.header.frame_id
    return log, stamp, frames, values


def _read_odometry(path, reader, conn):
    log, stamp, _, a = _fixed_messages(reader, conn, ODOMETRY)
    t = _times(stamp, log)
    _finite(path, conn.topic, 'pose or twist', t, a)
    quat = _unit(path, conn.topic, t, a[:, 3:7])
    # REP 105: the twist is in child_frame_id (the base) axes -> linear part to the world
    linear = np.einsum('nij,nj->ni', _rotations(quat), a[:, 7:10])
    return _order(t, a[:, 0:3], quat, linear, a[:, 10:13])


def _read_imu(path, reader, conn):
    log, stamp, _, a = _fixed_messages(reader, conn, IMU)
    if np.any(a[:, 4] == -1):
        raise DataError(f'bag {path}: {conn.topic} gives no orientation '
                        '(orientation_covariance[0] = -1): the base attitude needs an '
                        'IMU with an orientation estimate, or an odometry topic')
    a = np.delete(a, 4, axis=1)
    t = _times(stamp, log)
    _finite(path, conn.topic, 'orientation or angular velocity', t, a)
    quat = _unit(path, conn.topic, t, a[:, 0:4])
    return _order(t, quat, a[:, 4:7])


def _read_wrench(path, reader, conn, frame):
    log, stamp, frames, a = _fixed_messages(reader, conn, WRENCH)
    for f in set(frames):
        if f and f.strip('/') != frame:
            raise DataError(f'bag {path}: {conn.topic} has frame_id {f!r}, but '
                            f'floating_base.sole_sensors gives frame {frame!r} for it: fix '
                            'the configuration or the sensor')
    t = _times(stamp, log)
    _finite(path, conn.topic, 'force', t, a)
    return _order(t, a[:, 0])


def _rotations(quat):
    x, y, z, w = quat.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], 1)


def _interp(t, ts, values):
    values = np.asarray(values, float)
    flat = values.reshape(len(ts), -1)
    out = np.stack([np.interp(t, ts, flat[:, j]) for j in range(flat.shape[1])], 1)
    return out.reshape((len(t),) + values.shape[1:])


def _interp_quaternion(t, ts, quat):
    """Normalised linear interpolation along the shorter arc (samples close in time)."""
    q = quat.copy()
    flip = np.cumsum(np.concatenate([[0], (np.sum(q[1:] * q[:-1], axis=1) < 0)])) % 2 == 1
    q[flip] *= -1
    out = _interp(t, ts, q)
    return out / np.linalg.norm(out, axis=1)[:, None]


def read_floating_bag(path, config, progress=None):
    """Read a floating-base robot's bag into :class:`FloatingData`.

    Reads ``joint_states`` (the stored recorder topic, ``/joint_states`` or the only
    ``sensor_msgs/JointState`` topic; joints matched by name as :func:`read_bag` does,
    extra joints ignored, prefixed names matched when unambiguous), the odometry or imu
    topic and each sole sensor's ``WrenchStamped`` topic of ``config.floating_base``
    (relative names: ``/name`` or the one ``/<namespace>/name`` of the bag). Stamps are
    the messages' ``header.stamp`` (the bag's log times when a topic leaves them all
    equal). Every stream is interpolated linearly (the attitude by normalised
    quaternion interpolation) at the ``joint_states`` stamps inside the span that all
    streams cover.

    Parameters
    ----------
    path : str or Path
        The bag folder (rosbag2, MCAP or sqlite3 storage).
    config : ArmConfig
        With ``floating_base`` set: names the topics, the joints and the sole sensors.
    progress : callable, optional
        ``progress(done, total)`` in topics read.

    Returns
    -------
    FloatingData
        ``t`` the ``joint_states`` stamps (s, as recorded); ``dq`` the recorded
        velocities, or central differences of ``q`` when the messages carry none;
        ``tau`` the efforts when every message has them. With odometry all four base
        arrays are set (linear velocity turned into world axes, REP 105); with only an
        imu ``base_quaternion`` and ``base_angular`` are, ``base_position`` and
        ``base_linear`` are None; with neither all four are None. ``forces`` (N, k)
        and ``sensor_positions`` (k, 3) in ``sensor_frames`` when sole sensors are
        configured.

    Raises
    ------
    ConfigError
        ``config`` has no ``floating_base`` section.
    DataError
        One line naming the bag and topic: a missing topic (with the bag's topics), a
        topic of another type or with fewer than two messages, NaN or inf, a quaternion
        that is not unit, a sole sensor whose ``frame_id`` differs from the configured
        frame, joints missing from ``joint_states``, no common time span.
    """
    fb = _floating(config)
    path, reader = _open(path)
    try:
        by_topic = {c.topic: c for c in reader.connections}
        states = _states_topic(path, by_topic)
        wanted = {}
        if fb.odometry_topic:
            wanted['odometry'] = _find_topic(path, by_topic, fb.odometry_topic, ODOMETRY,
                                             'floating_base.odometry_topic')
        elif fb.imu_topic:
            wanted['imu'] = _find_topic(path, by_topic, fb.imu_topic, IMU,
                                        'floating_base.imu_topic')
        for i, s in enumerate(fb.sole_sensors):
            wanted[i] = _find_topic(path, by_topic, s.topic, WRENCH,
                                    f'floating_base.sole_sensors[{i}].topic')
        total = 1 + len(wanted)
        t, q, dq, tau = _read_states(path, reader, by_topic[states], tuple(config.joints))
        if progress is not None:
            progress(1, total)
        streams = {}
        for done, (kind, topic) in enumerate(wanted.items(), 2):
            conn = by_topic[topic]
            if kind == 'odometry':
                streams[kind] = _read_odometry(path, reader, conn)
            elif kind == 'imu':
                streams[kind] = _read_imu(path, reader, conn)
            else:
                streams[kind] = _read_wrench(path, reader, conn, fb.sole_sensors[kind].frame)
            if progress is not None:
                progress(done, total)
    finally:
        reader.close()
    lo, hi = t[0], t[-1]
    for kind, s in streams.items():
        lo, hi = max(lo, s[0][0]), min(hi, s[0][-1])
    keep = (t >= lo) & (t <= hi)
    if keep.sum() < 2:
        spans = ', '.join(f'{wanted[k]} [{s[0][0]:.3f}, {s[0][-1]:.3f}]'
                          for k, s in streams.items())
        raise DataError(f'bag {path}: {states} [{t[0]:.3f}, {t[-1]:.3f}] s and {spans} '
                        f'have no common time span (fewer than 2 joint_states samples in it)')
    t, q, dq = t[keep], q[keep], dq[keep]
    tau = tau[keep] if tau is not None else None
    base = dict(base_position=None, base_quaternion=None, base_linear=None,
                base_angular=None)
    if 'odometry' in streams:
        ts, p, quat, v, w = streams['odometry']
        base = dict(base_position=_interp(t, ts, p),
                    base_quaternion=_interp_quaternion(t, ts, quat),
                    base_linear=_interp(t, ts, v), base_angular=_interp(t, ts, w))
    elif 'imu' in streams:
        ts, quat, w = streams['imu']
        base.update(base_quaternion=_interp_quaternion(t, ts, quat),
                    base_angular=_interp(t, ts, w))
    forces = positions = frames = None
    if fb.sole_sensors:
        forces = np.stack([_interp(t, streams[i][0], streams[i][1])
                           for i in range(len(fb.sole_sensors))], 1)
        positions = np.array([s.position for s in fb.sole_sensors], float)
        frames = tuple(s.frame for s in fb.sole_sensors)
    return FloatingData(t=t, q=q, dq=dq, tau=tau, forces=forces, sensor_positions=positions,
                        sensor_frames=frames, **base)


# ------------------------------------------------------------------ writing -----
def _header(store, t, frame_id):
    sec = int(np.floor(t))
    nanosec = min(int(round((t - sec) * 1e9)), 999_999_999)
    Time = store.types['builtin_interfaces/msg/Time']
    return store.types['std_msgs/msg/Header'](stamp=Time(sec=sec, nanosec=nanosec),
                                              frame_id=frame_id)


def write_floating_bag(path, config, data, storage='mcap', start=1.7e9, delays=None,
                       world_frame='world'):
    """Write ``data`` (e.g. a simulated run) as the bag a user's robot would record.

    Topics (absolute, ``/`` + the configured names): ``/joint_states`` (``name`` =
    ``config.joints``; position, velocity when ``data.dq`` is set, effort when
    ``data.tau`` is), the odometry topic
    (``nav_msgs/Odometry``: pose of the base frame in ``world_frame``, twist in the
    base's axes, REP 105) and/or the imu topic (``sensor_msgs/Imu``: orientation and
    angular velocity; no linear acceleration, its covariance[0] = -1), and one
    ``geometry_msgs/WrenchStamped`` per sole sensor (frame_id the configured frame,
    ``wrench.force.z`` the force). Written with rosbags; no recorder configuration.

    Parameters
    ----------
    path : path-like
        The bag folder to create (must not exist).
    config : ArmConfig
        With ``floating_base``.
    data : FloatingData
        World sensor positions are not written (a bag has none): the reader gives the
        configured ones.
    storage : {'mcap', 'sqlite3'}
    start : float
        Stamp (s) of ``data.t == 0``.
    delays : dict, optional
        Seconds added to the stamps of ``'odometry'``, ``'imu'``, ``'sole'`` (tests of
        time alignment).
    world_frame : str
        ``header.frame_id`` of the odometry.

    Returns
    -------
    pathlib.Path
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    fb = _floating(config)
    store = typestore()
    T = store.types
    delays = dict(delays or {})
    n_sensors = len(fb.sole_sensors)
    if n_sensors and (data.forces is None or np.shape(data.forces)[1] != n_sensors):
        raise DataError(f'{n_sensors} sole sensors configured, but the data has forces of '
                        f'shape {None if data.forces is None else np.shape(data.forces)}')
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    t = np.asarray(data.t, float) + start
    path = Path(path)
    rotations = _rotations(np.asarray(data.base_quaternion, float)) \
        if data.base_quaternion is not None else None
    vec3, quat_t = T['geometry_msgs/msg/Vector3'], T['geometry_msgs/msg/Quaternion']

    def quaternion(k):
        x, y, z, w = (float(v) for v in data.base_quaternion[k])
        return quat_t(x=x, y=y, z=z, w=w)

    def vector(v):
        return vec3(x=float(v[0]), y=float(v[1]), z=float(v[2]))

    # rows of C-ordered arrays: rosbags serialises float arrays as contiguous buffers
    data = dataclasses.replace(data, **{
        k: np.ascontiguousarray(getattr(data, k), dtype=float)
        for k in ('q', 'dq', 'tau', 'base_position', 'base_quaternion', 'base_linear',
                  'base_angular', 'forces') if getattr(data, k) is not None})
    with Writer(path, version=8, storage_plugin=plugin) as writer:
        def add(topic, msgtype):
            return writer.add_connection('/' + topic.strip('/'), msgtype, typestore=store)

        conns = {'states': add('joint_states', JOINT_STATE)}
        if fb.odometry_topic:
            conns['odometry'] = add(fb.odometry_topic, ODOMETRY)
        if fb.imu_topic:
            conns['imu'] = add(fb.imu_topic, IMU)
        for i, s in enumerate(fb.sole_sensors):
            conns[i] = add(s.topic, WRENCH)
        out = []     # (stamp, connection key, message)
        names = list(config.joints)
        for k, tk in enumerate(t):
            msg = T[JOINT_STATE](
                header=_header(store, tk, ''), name=names,
                position=np.asarray(data.q[k], float),
                velocity=np.asarray(data.dq[k], float) if data.dq is not None
                else np.zeros(0),
                effort=np.asarray(data.tau[k], float) if data.tau is not None
                else np.zeros(0))
            out.append((tk, 'states', msg))
            if 'odometry' in conns:
                ts = tk + delays.get('odometry', 0.0)
                pose = T['geometry_msgs/msg/Pose'](
                    position=T['geometry_msgs/msg/Point'](
                        x=float(data.base_position[k, 0]), y=float(data.base_position[k, 1]),
                        z=float(data.base_position[k, 2])),
                    orientation=quaternion(k))
                twist = T['geometry_msgs/msg/Twist'](
                    linear=vector(rotations[k].T @ data.base_linear[k]),
                    angular=vector(data.base_angular[k]))
                out.append((ts, 'odometry', T[ODOMETRY](
                    header=_header(store, ts, world_frame), child_frame_id=fb.base_frame,
                    pose=T['geometry_msgs/msg/PoseWithCovariance'](
                        pose=pose, covariance=np.zeros(36)),
                    twist=T['geometry_msgs/msg/TwistWithCovariance'](
                        twist=twist, covariance=np.zeros(36)))))
            if 'imu' in conns:
                ts = tk + delays.get('imu', 0.0)
                unknown = np.zeros(9)
                unknown[0] = -1.0
                out.append((ts, 'imu', T[IMU](
                    header=_header(store, ts, fb.base_frame), orientation=quaternion(k),
                    orientation_covariance=np.zeros(9),
                    angular_velocity=vector(data.base_angular[k]),
                    angular_velocity_covariance=np.zeros(9),
                    linear_acceleration=vector((0.0, 0.0, 0.0)),
                    linear_acceleration_covariance=unknown)))
            for i, s in enumerate(fb.sole_sensors):
                ts = tk + delays.get('sole', 0.0)
                out.append((ts, i, T[WRENCH](
                    header=_header(store, ts, s.frame),
                    wrench=T['geometry_msgs/msg/Wrench'](
                        force=vector((0.0, 0.0, data.forces[k, i])),
                        torque=vector((0.0, 0.0, 0.0))))))
        out.sort(key=lambda item: item[0])
        for ts, key, msg in out:
            msgtype = conns[key].msgtype
            writer.write(conns[key], int(round(ts * 1e9)),
                         bytes(store.serialize_cdr(msg, msgtype)))
    return path
