"""Crash recovery of recorder bags: every complete MCAP record of an unfinished bag.

A bag is *unfinished* when its writer died (SIGKILL, power cut, disk full): a
folder with an ``.mcap`` file and no ``metadata.yaml``, the MCAP summary
missing. The file still holds complete records up to the writer's last flush
(:class:`~arm_dyn_id.data.bag_writer.BagRecorder` closes the pending chunk
every ``flush_period``). :func:`scan_mcap` reads those records without the
summary, :func:`recover_bag` rewrites them into a normal, indexed bag, and
:func:`recover_unfinished` does so for every bag of a folder whose writer is
no longer running.
"""

import json
import mmap
import os
import struct
import time
from pathlib import Path

from arm_dyn_id.errors import DataError
from arm_dyn_id.data.bag_format import (
    BAG_VERSION, JOINT_STATE, LOCK_NAME, STRING, SUMMARY_NAME, SUMMARY_TOPIC, serialize_string,
    typestore)
from arm_dyn_id.data.quality import stream_quality

_MCAP_MAGIC = b'\x89MCAP0\r\n'


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def _open_for_writing_by(path):
    """Pids of other processes holding ``path`` open for writing (Linux /proc; else [])."""
    path = Path(path)
    try:
        target = os.stat(path)
    except OSError:
        return []
    pids = []
    proc = Path('/proc')
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / 'fd').iterdir())
        except OSError:
            continue       # another user's process, or it just ended
        for fd in fds:
            try:
                st = os.stat(fd)
                if (st.st_dev, st.st_ino) != (target.st_dev, target.st_ino):
                    continue
                flags = int((entry / 'fdinfo' / fd.name).read_text().split('flags:')[1]
                            .split()[0], 8)
            except (OSError, ValueError, IndexError):
                continue
            if flags & (os.O_WRONLY | os.O_RDWR):
                pids.append(int(entry.name))
                break
    return pids


def writer_alive(bag):
    """Pid of a live process still writing ``bag``, or None.

    Looks at the recorder's lock file (``.recorder.lock`` holds its pid) and,
    on Linux, at the processes holding the bag's MCAP file open for writing
    (``ros2 bag record`` leaves no lock file).

    Parameters
    ----------
    bag : path-like
        The bag folder (or its ``.mcap`` file).

    Returns
    -------
    int or None
    """
    bag = Path(bag)
    bag = bag.parent if bag.is_file() else bag
    try:
        pid = int((bag / LOCK_NAME).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    if pid is not None and pid != os.getpid() and _pid_alive(pid):
        return pid
    for mcap in sorted(bag.glob('*.mcap')) + sorted(bag.glob('*.db3')):
        pids = _open_for_writing_by(mcap)
        if pids:
            return pids[0]
    return None


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
        if writer_alive(bag) is not None:
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
    store = typestore()
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
        If the folder has no MCAP file, the file is not MCAP, or its writer is
        still running (the bag is left untouched).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    path = Path(path)
    bag = path.parent if path.is_file() else path
    if (bag / 'metadata.yaml').exists():
        return {'path': str(bag), 'messages': {}, 'lost_bytes': 0, 'already_complete': True}
    pid = writer_alive(bag)
    if pid is not None:
        raise DataError(f'bag {bag} is still being written (process {pid} is alive): not '
                        'recovered; wait until its recorder stops, then read it')
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
        store = typestore()
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
