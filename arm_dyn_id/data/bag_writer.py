"""Writing rosbag2 bags: the recorder's crash-safe writer and synthetic test bags.

* :class:`BagRecorder` writes a rosbag2 bag (MCAP storage) from a writer thread.
  Callers hand it already-serialised CDR bytes (or objects plus a serialiser)
  through a queue; the thread writes them and, every ``flush_period`` seconds,
  closes the pending MCAP chunk and flushes the file, so that a SIGKILL loses
  at most the last ``flush_period`` of data (:mod:`.recovery` finishes such a
  bag). :func:`config_document` is the configuration it stores in the bag.
* :func:`write_bag` writes a whole bag of joint states at once, in the layout of
  ``ros2 bag record`` or of the recorder, from arrays (tests and benchmarks);
  :func:`encode_joint_states` builds the CDR bytes of many messages with NumPy.

ROS-free (``rosbags`` only). The bag layout is described in :mod:`.bag_format`.
"""

import datetime
import errno
import json
import os
import queue
import threading
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import RecordingError
from arm_dyn_id.data.bag_format import (
    BAG_VERSION, CONFIG_TOPIC, JOINT_STATE, LOCK_NAME, STRING, SUMMARY_NAME, SUMMARY_TOPIC,
    joint_state_layout, serialize_string, typestore)
from arm_dyn_id.data.motor import CurrentToTorque

#: messages encoded per batch by write_bag (bounds the memory of bytes held at once)
BATCH = 65536
_STOP = object()


def config_document(config, **extra):
    """The recording's configuration as a plain dict (YAML-ready).

    Parameters
    ----------
    config : arm_dyn_id.config.ArmConfig
        The configuration used live.
    **extra
        More keys (topics, rates, the config file's name and hash...).

    Returns
    -------
    dict
        robot_name, joints, torque_constants, current_signs, current_offsets,
        gear_ratios, efficiencies, gravity, urdf (file name), urdf_sha256 and
        ``extra``; :class:`~arm_dyn_id.data.motor.CurrentToTorque.from_dict` reads it.
    """
    doc = {'robot_name': config.robot_name}
    doc.update(CurrentToTorque.from_config(config).to_dict())
    doc['gravity'] = float(config.gravity)
    doc['urdf'] = Path(config.urdf).name
    try:
        doc['urdf_sha256'] = config.urdf_sha256()
    except OSError:
        doc['urdf_sha256'] = None
    if config.source is not None:
        doc['config_file'] = str(config.source)
    doc.update(extra)
    return doc


def timestamped_name(prefix='recording', when=None):
    """``<prefix>_YYYYmmddTHHMMSS_fffZ`` (UTC, milliseconds)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return f'{prefix}_{when.strftime("%Y%m%dT%H%M%S")}_{when.microsecond // 1000:03d}Z'


def _describe(exc, path=None):
    """``<file>: <OS error> (<ERRNO>)`` for an OSError, ``<type>: <text>`` otherwise."""
    if not isinstance(exc, OSError):
        return f'{type(exc).__name__}: {exc}'
    reason = exc.strerror or str(exc)
    code = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    if code:
        reason = f'{reason} ({code})'
    name = exc.filename or path
    return f'{name}: {reason}' if name else reason


class BagRecorder:
    """Write one rosbag2 MCAP bag from a background thread; crash-safe to ``flush_period``.

    Usage::

        rec = BagRecorder('recordings', prefix='recording')
        states = rec.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
        torques = rec.add_topic('/joint_torques', 'sensor_msgs/msg/JointState',
                                serializer=rclpy.serialization.serialize_message)
        path = rec.open(config_text=yaml_text)
        rec.write(states, stamp_ns, cdr_bytes)     # cheap: one queue put
        rec.close(summary={...})

    Parameters
    ----------
    output_dir : path-like
        Folder of the bags (created if needed).
    prefix : str
        Bag folder names are ``<prefix>_<UTC time>``; an existing folder is
        never reused (a ``_<k>`` suffix is added).
    flush_period : float
        Seconds between forced chunk writes and file flushes (≤ 1 s keeps the
        crash loss under a second).
    fsync : bool
        Also ``os.fsync`` at every flush (survives power loss, costs I/O).
    max_queue : int
        Messages waiting for the writer beyond this are dropped and counted.
    on_error : callable, optional
        ``on_error(recorder)``, called once, from the writer thread (or from
        :meth:`close`), when writing fails; :attr:`error` says why.

    Attributes
    ----------
    error : str or None
        Why writing stopped, naming the file and the OS error (``'<bag>/<name>.mcap:
        No space left on device (ENOSPC)'``); None while all is well.

    Notes
    -----
    rosbags' MCAP writer buffers messages in an in-memory chunk (up to 1 MiB)
    and writes the summary only on close. The writer thread closes the pending
    chunk at every flush, so the file always ends in complete records up to the
    last flush; :func:`~arm_dyn_id.data.recovery.recover_bag` rebuilds the
    summary after a crash.

    When a write fails (disk full, file too large, I/O error) the writer stops
    for good: :meth:`write` drops and counts further messages, the file is never
    touched again (a retried chunk could duplicate messages), and :meth:`close`
    leaves the bag unfinished with its lock file, so that it is recovered like a
    crashed one with everything up to the last flush. :meth:`close` never raises.
    """

    def __init__(self, output_dir, prefix='recording', flush_period=0.5, fsync=False,
                 max_queue=200_000, on_error=None):
        if not 0 < flush_period <= 1.0:
            raise ValueError(f'flush_period = {flush_period} s must be in (0, 1]')
        self.output_dir = Path(output_dir).expanduser()
        self.prefix = prefix
        self.flush_period = float(flush_period)
        self.fsync = bool(fsync)
        self.max_queue = int(max_queue)
        self.on_error = on_error
        self.path = None
        self.error = None
        self._file_failed = False   # the MCAP file itself could not be written
        self._failed_at = None
        self._flushed = 0
        self._topics = []
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._writer = None
        self._connections = []
        self._serializers = []
        self._config_handle = None
        self._summary_handle = None
        self._queued = 0
        self._written = 0
        self._dropped = 0
        self._counts = []
        self._last_flush = None
        self._closed = False

    # -- setup ------------------------------------------------------------
    def add_topic(self, topic, msgtype, serializer=None, msgdef=None, rihs01=None):
        """Register a topic before :meth:`open`; returns the handle for :meth:`write`.

        Parameters
        ----------
        topic : str
            Absolute topic name in the bag.
        msgtype : str
            ROS type, e.g. ``'sensor_msgs/msg/JointState'``.
        serializer : callable, optional
            Called in the writer thread on objects passed to :meth:`write`
            (e.g. ``rclpy.serialization.serialize_message``); without it,
            :meth:`write` takes CDR bytes.
        msgdef, rihs01 : str, optional
            Message definition and hash when the type is not a standard one.
        """
        if self._writer is not None:
            raise RuntimeError('add_topic must be called before open()')
        for i, (name, mtype, _, _, _) in enumerate(self._topics):
            if name == topic:
                if mtype != msgtype:
                    raise ValueError(f'topic {topic} registered as {mtype}, not {msgtype}')
                return i
        self._topics.append((topic, msgtype, serializer, msgdef, rihs01))
        return len(self._topics) - 1

    def _new_path(self):
        self.output_dir.mkdir(parents=True, exist_ok=True)
        base = timestamped_name(self.prefix)
        path = self.output_dir / base
        k = 1
        while path.exists():
            path = self.output_dir / f'{base}_{k}'
            k += 1
        return path

    def open(self, config_text=None, timestamp_ns=None):
        """Create the bag, register the topics, write the config, start the writer thread.

        Parameters
        ----------
        config_text : str, optional
            YAML written once on ``/arm_dyn_id/config``.
        timestamp_ns : int, optional
            Log time of the config message (default now).

        Returns
        -------
        pathlib.Path
            The new bag folder.

        Raises
        ------
        RecordingError
            The folder or the file could not be created or written (the message
            names it and the OS error; ``errno`` is set).
        """
        from rosbags.rosbag2 import StoragePlugin, Writer
        if self._writer is not None or self._closed:
            raise RuntimeError('a BagRecorder opens once; make a new one for a new file')
        self._config_handle = self.add_topic(CONFIG_TOPIC, STRING)
        self._summary_handle = self.add_topic(SUMMARY_TOPIC, STRING)
        path = None
        try:
            for _ in range(100):
                path = None
                path = self._new_path()
                writer = Writer(path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
                try:
                    writer.open()
                    break
                except OSError:
                    raise
                except Exception:  # another process took the name between check and mkdir
                    if not path.exists():
                        raise
            else:  # pragma: no cover
                raise RuntimeError(f'could not create a new bag folder in {self.output_dir}')
        except OSError as exc:
            if path is not None:
                try:
                    path.rmdir()  # only if empty: mkdir worked, the file did not
                except OSError:
                    pass
            raise self._open_error(exc, self.output_dir) from exc
        try:
            (path / LOCK_NAME).write_text(f'{os.getpid()}\n')
            store = typestore()
            for topic, msgtype, serializer, msgdef, rihs01 in self._topics:
                if msgdef is None:
                    conn = writer.add_connection(topic, msgtype, typestore=store)
                else:
                    conn = writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01)
                self._connections.append(conn)
                self._serializers.append(serializer)
            self._counts = [0] * len(self._connections)
            self._writer = writer
            self.path = path
            if config_text is not None:
                ts = time.time_ns() if timestamp_ns is None else int(timestamp_ns)
                self.write_text(self._config_handle, ts, config_text)
            # header, schemas, channels and config reach the file now: a crash at any later
            # point leaves a recoverable bag
            if config_text is not None:
                handle, ts, data = self._queue.get()
                writer.write(self._connections[handle], ts, serialize_string(data.text))
                self._counts[handle] += 1
                self._written += 1
            self._flush()
        except OSError as exc:
            self._closed = True
            try:
                writer.abort()
            except Exception:
                pass
            raise self._open_error(exc, path, writer) from exc
        self._thread = threading.Thread(target=self._run, name=f'bag-writer {path.name}',
                                        daemon=True)
        self._thread.start()
        return path

    @staticmethod
    def _open_error(exc, folder, writer=None):
        storage = getattr(writer, 'storage', None)
        if exc.filename is not None and Path(exc.filename) == folder:
            exc = OSError(exc.errno, exc.strerror)  # the folder is named once
        detail = _describe(exc, getattr(storage, 'path', None))
        # "Not a directory" says little when a parent of output_dir is a regular file
        blocking = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if blocking is not None and not blocking.is_dir():
            detail += f'; {blocking} is a file, not a folder'
        err = RecordingError(f'cannot create a bag in {folder}: {detail}')
        err.errno = exc.errno
        return err

    # -- hot path ---------------------------------------------------------
    def write(self, handle, timestamp_ns, data):
        """Queue one message (non-blocking, no I/O).

        Parameters
        ----------
        handle : int
            From :meth:`add_topic`.
        timestamp_ns : int
            Log (receive) time, ns since the epoch.
        data : bytes or object
            CDR bytes, or an object for the topic's serializer.

        Returns
        -------
        bool
            False when the message was dropped (queue full, writer failed or closed).
        """
        if self._closed or self.error is not None or \
                self._queued - self._written >= self.max_queue:
            self._dropped += 1
            return False
        self._queued += 1
        self._queue.put((handle, timestamp_ns, data))
        return True

    def write_text(self, handle, timestamp_ns, text):
        """Queue a ``std_msgs/String`` message given as text."""
        return self.write(handle, timestamp_ns, _Text(text))

    # -- writer thread ----------------------------------------------------
    def _flush(self):
        storage = self._writer.storage
        chunk = getattr(storage, 'chunk', None)
        # close the in-memory chunk so the file ends in complete records
        if chunk is not None and chunk.msgs:
            storage.close_chunk()
        bio = getattr(storage, 'bio', None)
        if bio is not None:
            bio.flush()
            if self.fsync:
                os.fsync(bio.fileno())
        self._last_flush = time.monotonic()
        self._flushed = self._written

    def _mcap_path(self):
        storage = getattr(self._writer, 'storage', None)
        return getattr(storage, 'path', None) or self.path

    def _fail(self, message, file_failed):
        """Record the first failure and tell ``on_error``; later failures are ignored."""
        if self.error is not None:
            return
        self._file_failed = file_failed
        self._failed_at = time.monotonic()
        self.error = message
        if self.on_error is not None:
            try:
                self.on_error(self)
            except Exception:  # a reporting problem must not hide the failure
                pass

    def _run(self):
        writer = self._writer
        get = self._queue.get
        next_flush = time.monotonic() + self.flush_period
        handle = None
        serialising = False
        try:
            while True:
                timeout = next_flush - time.monotonic()
                item = None
                if timeout > 0:
                    try:
                        item = get(timeout=timeout)
                    except queue.Empty:
                        item = None
                if item is _STOP:
                    break
                if item is not None:
                    handle, ts, data = item
                    serialising = True
                    if isinstance(data, _Text):
                        data = serialize_string(data.text)
                    elif not isinstance(data, (bytes, bytearray, memoryview)):
                        data = self._serializers[handle](data)
                    serialising = False
                    writer.write(self._connections[handle], ts, data)
                    self._counts[handle] += 1
                    self._written += 1
                if time.monotonic() >= next_flush:
                    self._flush()
                    next_flush = time.monotonic() + self.flush_period
        except Exception as exc:  # disk full, file too large, I/O error, bad data
            if serialising:
                self._fail(f'cannot serialise a message on {self._topics[handle][0]} for '
                           f'{self.path}: {type(exc).__name__}: {exc}', file_failed=False)
            else:
                self._fail(f'cannot write {_describe(exc, self._mcap_path())}',
                           file_failed=True)

    # -- status and close -------------------------------------------------
    @property
    def closed(self):
        """True once :meth:`close` has stopped the writer (or :meth:`open` failed)."""
        return self._closed

    def stats(self):
        """Writer counters: queued, written, flushed, dropped, backlog, per-topic, flush age.

        ``flushed`` is the number of messages in the file at the last flush (all of
        them readable after a crash or a failed write), ``failed_after_flush_s`` the
        time from that flush to the failure (None without one).
        """
        failed = self._failed_at
        return {
            'path': str(self.path) if self.path else None,
            'queued': self._queued,
            'written': self._written,
            'flushed': self._flushed,
            'dropped': self._dropped,
            'backlog': self._queued - self._written,
            'topics': {t[0]: c for t, c in zip(self._topics, self._counts)},
            'seconds_since_flush': None if self._last_flush is None
            else time.monotonic() - self._last_flush,
            'failed_after_flush_s': None if failed is None or self._last_flush is None
            else failed - self._last_flush,
            'error': self.error,
        }

    def close(self, summary=None, timeout=30.0):
        """Write everything queued, the summary, the index and ``metadata.yaml``.

        Never raises: a failure is kept in :attr:`error` (and reported to
        ``on_error``). After a failure the bag stays unfinished (no
        ``metadata.yaml``, lock file kept) and holds everything up to the last
        flush; :func:`~arm_dyn_id.data.recovery.recover_bag` or a new
        recorder's start finishes it.

        Parameters
        ----------
        summary : dict, optional
            Written as JSON on ``/arm_dyn_id/recording_summary`` and in
            ``recording_summary.json``; writer counters are added under ``writer``.
        timeout : float
            Seconds to wait for the writer thread.

        Returns
        -------
        pathlib.Path
            The bag folder.
        """
        if self._writer is None or self._closed:
            return self.path
        summary = dict(summary or {})
        now = time.time_ns()
        self._queue.put(_STOP)
        self._thread.join(timeout)
        self._closed = True
        if self._thread.is_alive():  # pragma: no cover
            self._fail(f'the writer thread of {self.path} did not finish within {timeout} s',
                       file_failed=True)
            return self.path
        summary['writer'] = self.stats()
        summary['recovered'] = False
        writer = self._writer
        complete = False
        if self.error is None:
            try:
                # written here, after the queue drained, so the counts are final
                writer.write(self._connections[self._summary_handle], now,
                             serialize_string(_dumps(summary)))
                writer.close()
                complete = True
            except Exception as exc:
                self._fail(f'cannot finish {self.path}: {_describe(exc, self._mcap_path())}',
                           file_failed=True)
        if not complete:
            if not self._file_failed:
                try:  # the file itself is fine (bad data): keep the pending chunk too
                    self._flush()
                except Exception:
                    pass
            try:
                # after a failed write the file is not written again (a chunk written
                # twice would duplicate messages): just close it
                writer.abort()
            except Exception:
                pass
            summary['writer'] = self.stats()
        summary_path = self.path / SUMMARY_NAME
        try:
            summary_path.write_text(_dumps(summary, indent=1) + '\n')
        except Exception as exc:
            problem = f'cannot write {_describe(exc, summary_path)}'
            if self.error is None:
                self._fail(problem, file_failed=False)
            else:
                self.error = f'{self.error}; also {problem}'
        if complete:
            try:
                (self.path / LOCK_NAME).unlink(missing_ok=True)
            except OSError:
                pass
        return self.path


def _dumps(obj, indent=None):
    try:
        return json.dumps(obj, indent=indent, sort_keys=True, default=json_default)
    except (TypeError, ValueError):  # a caller's summary value JSON cannot hold
        return json.dumps(obj, indent=indent, sort_keys=True, default=str)


class _Text:
    __slots__ = ('text',)

    def __init__(self, text):
        self.text = text


def json_default(obj):
    """``json.dumps(..., default=json_default)``: NumPy scalars and arrays, paths."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f'{type(obj).__name__} is not JSON serialisable')


# ---------------------------------------------------------------------------
# writing (synthetic bags for tests and benchmarks, plain ros2 bag record layout)

def encode_joint_states(stamps, names, position, velocity=None, effort=None, frame_id=''):
    """CDR bytes of many ``sensor_msgs/JointState`` messages of one layout at once.

    Parameters
    ----------
    stamps : ndarray, (N,)
        ``header.stamp`` (s).
    names : sequence of str, (k,)
    position, velocity, effort : ndarray, (N, k) or None
        None gives an empty array in every message.

    Returns
    -------
    ndarray of uint8, (N, L)
        Row i holds the CDR bytes of message i (byte-identical to rosbags' serialiser).
    """
    store = typestore()
    stamps = np.asarray(stamps, dtype=float)
    N, k = stamps.shape[0], len(names)
    arrays = [None if a is None else np.asarray(a, dtype=float).reshape(N, k)
              for a in (position, velocity, effort)]
    types = store.types
    msg = types[JOINT_STATE](
        header=types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](sec=0, nanosec=0), frame_id=frame_id),
        name=list(names), **{f: np.zeros(k if a is not None else 0) for f, a in
                             zip(('position', 'velocity', 'effort'), arrays)})
    raw = bytes(store.serialize_cdr(msg, JOINT_STATE))
    layout = joint_state_layout(raw)
    block = np.empty((N, len(raw)), dtype=np.uint8)
    block[:] = np.frombuffer(raw, dtype=np.uint8)
    sec = np.floor(stamps)
    nsec = np.round((stamps - sec) * 1e9)
    carry = nsec >= 1e9
    sec[carry] += 1
    nsec[carry] -= 1e9
    block[:, 4:8] = sec.astype('<i4').view(np.uint8).reshape(N, 4)
    block[:, 8:12] = nsec.astype('<u4').view(np.uint8).reshape(N, 4)
    for a, (count, off) in zip(arrays, layout['arrays']):
        if a is not None and count:
            block[:, off:off + 8 * count] = np.ascontiguousarray(a, dtype='<f8').view(
                np.uint8).reshape(N, 8 * count)
    return block


def write_bag(path, stamps, names, position, effort, velocity=None, topic='/joint_states',
              torques=None, markers=None, config_text=None, strings=None, version=9,
              storage='mcap', progress=None, torque_names=None):
    """Write a rosbag2 bag of joint states (and optionally what the recorder adds).

    Parameters
    ----------
    path : path-like
        New bag folder.
    stamps : ndarray, (N,)
        Header stamps (s); also the log times.
    names : sequence of str, (k,)
    position, effort : ndarray, (N, k)
        rad and motor current (A) (``effort`` may be None: no current field).
    velocity : ndarray, (N, k), optional
    topic : str
        Joint-state topic.
    torques : ndarray, (N, m), optional
        Also write ``/joint_torques`` (effort = torque, N·m) as the recorder does.
    torque_names : sequence of str, (m,), optional
        Joints of ``torques`` (default ``names``); positions are taken from
        ``position`` by name.
    markers : list of dict, optional
        Written as JSON on ``/excitation_segments`` at their ``t``.
    config_text : str, optional
        YAML on ``/arm_dyn_id/config`` (first message), as the recorder stores it.
    strings : dict, optional
        More ``std_msgs/String`` topics: {topic: [(t, text), ...]}.
    version : {8, 9}
        rosbag2 metadata version (8: Jazzy, 9: Kilted).
    storage : {'mcap', 'sqlite3'}
    progress : callable, optional
        ``progress(done, total)``.

    Returns
    -------
    pathlib.Path
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    store = typestore()
    stamps = np.asarray(stamps, dtype=float)
    N = stamps.shape[0]
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    texts = []   # (time ns, topic, text)
    if config_text is not None:
        texts.append((int(round(stamps[0] * 1e9)) - 1, CONFIG_TOPIC, config_text))
    for m in markers or ():
        texts.append((int(round(m['t'] * 1e9)), '/excitation_segments', json.dumps(m)))
    for name, items in (strings or {}).items():
        texts.extend((int(round(t * 1e9)), name, text) for t, text in items)
    texts.sort(key=lambda x: x[0])
    log = np.round(stamps * 1e9).astype(np.int64)
    tnames = list(names if torque_names is None else torque_names)
    tidx = None if torques is None else [list(names).index(j) for j in tnames]
    with Writer(Path(path), version=version, storage_plugin=plugin) as writer:
        conns = {topic: writer.add_connection(topic, JOINT_STATE, typestore=store)}
        if torques is not None:
            conns['/joint_torques'] = writer.add_connection('/joint_torques', JOINT_STATE,
                                                            typestore=store)
        for _, name, _ in texts:
            if name not in conns:
                conns[name] = writer.add_connection(name, STRING, typestore=store)
        k = 0
        for a in range(0, N, BATCH):
            b = min(N, a + BATCH)
            states = encode_joint_states(stamps[a:b], names, position[a:b],
                                         None if velocity is None else velocity[a:b],
                                         None if effort is None else effort[a:b])
            tq = None if torques is None else encode_joint_states(
                stamps[a:b], tnames, position[a:b][:, tidx], None, torques[a:b])
            for i in range(b - a):
                ts = int(log[a + i])
                while k < len(texts) and texts[k][0] <= ts:
                    writer.write(conns[texts[k][1]], texts[k][0], serialize_string(texts[k][2]))
                    k += 1
                writer.write(conns[topic], ts, states[i].tobytes())
                if tq is not None:
                    writer.write(conns['/joint_torques'], ts, tq[i].tobytes())
            if progress is not None:
                progress(b, N)
        for ts, name, text in texts[k:]:
            writer.write(conns[name], ts, serialize_string(text))
    return Path(path)
