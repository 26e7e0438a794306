"""Recording joint data to rosbag2 MCAP files, and crash recovery.

Two parts, all ROS-free (``rosbags`` only):

* :class:`BagRecorder` writes a rosbag2 bag (MCAP storage) from a writer thread.
  Callers hand it already-serialised CDR bytes (or objects plus a serialiser)
  through a queue; the thread writes them and, every ``flush_period`` seconds,
  closes the pending MCAP chunk and flushes the file, so that a SIGKILL loses
  at most the last ``flush_period`` of data.
* :func:`recover_bag` turns a bag whose writer died (no ``metadata.yaml``, no
  MCAP summary) into a normal, indexed bag holding every complete record.

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

import datetime
import errno
import json
import mmap
import os
import queue
import struct
import threading
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import DataError, RecordingError
from arm_dyn_id.data.motor import CurrentToTorque
from arm_dyn_id.data.quality import stream_quality

CONFIG_TOPIC = '/arm_dyn_id/config'
SUMMARY_TOPIC = '/arm_dyn_id/recording_summary'
STRING = 'std_msgs/msg/String'
JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT64_ARRAY = 'std_msgs/msg/Float64MultiArray'
LOCK_NAME = '.recorder.lock'
SUMMARY_NAME = 'recording_summary.json'
BAG_VERSION = 8  # rosbag2 metadata version readable by Jazzy and later

_MCAP_MAGIC = b'\x89MCAP0\r\n'
_STOP = object()
_TYPESTORE = None


def _typestore():
    global _TYPESTORE
    if _TYPESTORE is None:
        from rosbags.typesys import Stores, get_typestore
        _TYPESTORE = get_typestore(Stores.LATEST)
    return _TYPESTORE


def serialize_string(text):
    """CDR bytes of a ``std_msgs/msg/String`` holding ``text``."""
    store = _typestore()
    msg = store.types[STRING](data=text)
    return bytes(store.serialize_cdr(msg, STRING))


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


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    last flush; :func:`recover_bag` rebuilds the summary after a crash.

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
            store = _typestore()
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
        flush; :func:`recover_bag` or a new recorder's start finishes it.

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
# crash recovery


def _mcap_file(bag):
    bag = Path(bag)
    if bag.is_file():
        return bag
    files = sorted(bag.glob('*.mcap'))
    if not files:
        partial = sorted(bag.glob('*.mcap.truncated'))
        if partial:
            return partial[0]
        raise DataError(f'{bag} holds no .mcap file')
    return files[0]


def is_unfinished(bag):
    """True if ``bag`` is a recorder folder with an MCAP file but no ``metadata.yaml``."""
    bag = Path(bag)
    return bag.is_dir() and not (bag / 'metadata.yaml').exists() and \
        (any(bag.glob('*.mcap')) or any(bag.glob('*.mcap.truncated')))


def find_unfinished(output_dir):
    """Bag folders in ``output_dir`` left unfinished by a writer that is no longer running.

    Returns
    -------
    list of pathlib.Path
    """
    output_dir = Path(output_dir).expanduser()
    if not output_dir.is_dir():
        return []
    found = []
    for bag in sorted(p for p in output_dir.iterdir() if p.is_dir()):
        if not is_unfinished(bag):
            continue
        lock = bag / LOCK_NAME
        try:
            pid = int(lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue  # another live recorder is writing it
        found.append(bag)
    return found


def _read_str(buf, pos):
    (n,) = struct.unpack_from('<I', buf, pos)
    return bytes(buf[pos + 4:pos + 4 + n]).decode(), pos + 4 + n


def _scan_records(buf, start, end, out):
    """Parse MCAP records in buf[start:end]; stop at the first incomplete one."""
    pos = start
    while pos + 9 <= end:
        op = buf[pos]
        (length,) = struct.unpack_from('<Q', buf, pos + 1)
        body = pos + 9
        if body + length > end:
            break  # truncated record: the writer died while writing it
        if op == 0x03:
            (sid,) = struct.unpack_from('<H', buf, body)
            name, p = _read_str(buf, body + 2)
            encoding, p = _read_str(buf, p)
            (n,) = struct.unpack_from('<I', buf, p)
            out['schemas'][sid] = (name, encoding, bytes(buf[p + 4:p + 4 + n]).decode())
        elif op == 0x04:
            cid, sid = struct.unpack_from('<HH', buf, body)
            topic, p = _read_str(buf, body + 4)
            encoding, p = _read_str(buf, p)
            out['channels'][cid] = (sid, topic, encoding)
        elif op == 0x05:
            cid, _, log_time = struct.unpack_from('<HIQ', buf, body)
            out['messages'].append((cid, log_time, bytes(buf[body + 22:body + length])))
        elif op == 0x06:
            _, _, usize, _ = struct.unpack_from('<QQQI', buf, body)
            compression, p = _read_str(buf, body + 28)
            (csize,) = struct.unpack_from('<Q', buf, p)
            data = buf[p + 8:p + 8 + csize]
            if compression == 'zstd':
                try:
                    from compression import zstd
                except ImportError:
                    from backports import zstd
                data = zstd.decompress(bytes(data))
            elif compression == 'lz4':
                from lz4.frame import decompress
                data = decompress(bytes(data))
            elif compression:
                raise DataError(f'unknown MCAP chunk compression {compression!r}')
            inner = memoryview(bytes(data))
            _scan_records(inner, 0, min(len(inner), usize), out)
        elif op in (0x0F, 0x02):
            out['complete_records_end'] = body + length
            out['data_end'] = True
            return
        pos = body + length
        out['complete_records_end'] = pos


def scan_mcap(path):
    """Read every complete record of a possibly truncated MCAP file.

    Returns
    -------
    dict
        ``schemas`` {id: (name, encoding, text)}, ``channels`` {id: (schema id,
        topic, encoding)}, ``messages`` [(channel id, log time ns, CDR bytes)],
        ``size`` (bytes), ``complete_records_end`` (offset after the last
        complete record) and ``data_end`` (True if the data section was closed).

    Raises
    ------
    DataError
        If the file is not an MCAP file.
    """
    path = Path(path)
    out = {'schemas': {}, 'channels': {}, 'messages': [], 'complete_records_end': 0,
           'data_end': False}
    with path.open('rb') as f:
        size = os.fstat(f.fileno()).st_size
        out['size'] = size
        if size == 0:
            return out  # the writer died before its first flush: nothing to recover
        if size < len(_MCAP_MAGIC):
            raise DataError(f'{path} is not an MCAP file ({size} bytes)')
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if mm[:8] != _MCAP_MAGIC:
                raise DataError(f'{path} is not an MCAP file (bad magic)')
            buf = memoryview(mm)
            try:
                _scan_records(buf, 8, size, out)
            finally:
                buf.release()
    return out


def _rihs01(msgtype, msgdef):
    from rosbags.typesys import get_typestore, Stores
    from rosbags.typesys.msg import get_types_from_msg
    store = _typestore()
    if msgtype in store.types:
        return store.hash_rihs01(msgtype)
    own = get_typestore(Stores.EMPTY)
    own.register(get_types_from_msg(msgdef, msgtype))
    return own.hash_rihs01(msgtype)


def recover_bag(path, keep_truncated=True):
    """Make a bag whose writer died readable by standard tools.

    Every complete MCAP record up to the crash is kept; the partial record at
    the end (at most ``flush_period`` of data) is lost. The result is an
    indexed MCAP file with a summary plus ``metadata.yaml``, written through
    rosbags, and a ``/arm_dyn_id/recording_summary`` message and
    ``recording_summary.json`` with ``"recovered": true``.

    Parameters
    ----------
    path : path-like
        The bag folder (or its ``.mcap`` file).
    keep_truncated : bool
        Keep the original file as ``<name>.mcap.truncated`` (default), else
        delete it once the new file is in place.

    Returns
    -------
    dict
        What was recovered: ``path``, ``messages`` per topic, ``lost_bytes``.

    Raises
    ------
    DataError
        If the folder has no MCAP file or the file is not MCAP.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    path = Path(path)
    bag = path.parent if path.is_file() else path
    if (bag / 'metadata.yaml').exists():
        return {'path': str(bag), 'messages': {}, 'lost_bytes': 0, 'already_complete': True}
    source = _mcap_file(bag)
    scan = scan_mcap(source)
    lost = scan['size'] - scan['complete_records_end']
    tmp_root = bag.parent / f'.{bag.name}.recovering'
    if tmp_root.exists():
        for p in sorted(tmp_root.rglob('*'), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        tmp_root.rmdir()
    tmp_root.mkdir()
    tmp_bag = tmp_root / bag.name
    schemas, channels = scan['schemas'], scan['channels']
    counts = {}
    stamps = []
    summary_seen = False
    with Writer(tmp_bag, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for cid, (sid, topic, _) in sorted(channels.items()):
            name, _, msgdef = schemas.get(sid, ('', '', ''))
            if not name:
                continue
            conns[cid] = writer.add_connection(topic, name, msgdef=msgdef,
                                               rihs01=_rihs01(name, msgdef))
            counts[topic] = 0
        store = _typestore()
        for cid, log_time, data in scan['messages']:
            conn = conns.get(cid)
            if conn is None:
                continue
            writer.write(conn, log_time, data)
            counts[conn.topic] += 1
            if conn.topic == SUMMARY_TOPIC:
                summary_seen = True
            elif conn.msgtype == JOINT_STATE and conn.topic.endswith('joint_states'):
                msg = store.deserialize_cdr(data, JOINT_STATE)
                stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
        summary = {'recovered': True, 'messages': dict(counts), 'lost_bytes': lost,
                   'source_file': source.name,
                   'quality': stream_quality(stamps) if stamps else None}
        if not summary_seen:
            summary_conn = next((c for c in conns.values() if c.topic == SUMMARY_TOPIC), None)
            if summary_conn is None:
                summary_conn = writer.add_connection(SUMMARY_TOPIC, STRING, typestore=store)
            last = max((m[1] for m in scan['messages']), default=time.time_ns())
            writer.write(summary_conn, last, serialize_string(json.dumps(summary)))
    # move the rebuilt files into place; the original survives as .truncated
    target = bag / f'{bag.name}.mcap'
    if source.suffix == '.mcap':
        kept = source.with_name(source.name + '.truncated')
        os.replace(source, kept)
    else:
        kept = source
    os.replace(tmp_bag / f'{bag.name}.mcap', target)
    (bag / SUMMARY_NAME).write_text(json.dumps(summary, indent=1, sort_keys=True) + '\n')
    os.replace(tmp_bag / 'metadata.yaml', bag / 'metadata.yaml')
    tmp_bag.rmdir()
    tmp_root.rmdir()
    if not keep_truncated:
        kept.unlink()
    (bag / LOCK_NAME).unlink(missing_ok=True)
    return {'path': str(bag), 'messages': counts, 'lost_bytes': lost,
            'already_complete': False}


def recover_unfinished(output_dir):
    """Recover every unfinished bag in ``output_dir`` (see :func:`find_unfinished`).

    Returns
    -------
    list of dict
        One :func:`recover_bag` result per bag; a bag that fails has ``error``.
    """
    results = []
    for bag in find_unfinished(output_dir):
        try:
            results.append(recover_bag(bag))
        except Exception as exc:
            results.append({'path': str(bag), 'error': f'{type(exc).__name__}: {exc}'})
    return results
