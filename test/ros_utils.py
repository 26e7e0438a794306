"""Helpers for tests that run ROS nodes in separate processes (CONVENTIONS.md 14).

Import them in a test module (``test/`` is on ``sys.path`` under pytest)::

    from ros_utils import start_node, stop, RosHarness   # the ros_env fixture: conftest.py

    def test_something(ros_env, tmp_path):
        proc = start_node('arm_dyn_id.nodes.recorder_node', {'config_file': ...}, ros_env,
                          name='recorder')
        with RosHarness(ros_env.domain_id) as ros:
            pub = ros.node.create_publisher(JointState, 'joint_states', 10)
            ros.wait_for(lambda: pub.get_subscription_count() > 0, timeout=10)
            ...
        assert stop(proc) == 0

What each piece does:

* ``RosEnv`` / ``ros_env`` fixture / ``ros_environment()`` context manager: an
  environment dict for child processes with a ``ROS_DOMAIN_ID`` (1..101) claimed
  through a lock file in the temp folder (``arm_dyn_id.nodes.ros_domain``, shared
  with the demo: parallel test runs and demos on one machine never share a domain),
  ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, a temporary
  ``ROS_HOME`` and ``ROS_LOG_DIR``, ``PYTHONPATH`` with the repository first and
  unbuffered Python output. On exit it stops processes still running and removes
  the Fast DDS shared-memory files (``/dev/shm/fastdds_*``, ``fastrtps_*``,
  ``fast_datasharing*``, ``sem.fastdds_*``) that appeared during the test and
  that no live process still maps or holds open.
* ``start_node(target, params, env)``: ``target`` is a module
  (``arm_dyn_id.nodes.recorder_node``, run with ``python -m``) or a path to a
  ``.py`` script; ``params`` a dict (written to a ``--params-file`` under
  ``/**: ros__parameters``) or the path of a parameter file. stdout and stderr go
  to ``<log_dir>/<name>.out`` / ``.err``; ``node_output(proc)`` reads them.
* ``stop(proc, timeout)``: SIGINT, wait, then SIGTERM, then SIGKILL; returns the
  exit code. ``kill(proc)`` is an immediate SIGKILL (crash tests).
* ``RosHarness(domain_id)``: an in-test rclpy node on its own ``rclpy.Context``
  (``rclpy.init(context=..., domain_id=...)``), spun by a single-threaded
  executor in a background thread; ``wait_for(predicate, timeout)`` polls, ``call(client,
  request, timeout)`` calls a service. Everything is bounded by a timeout.
* ``wait_for(predicate, timeout)`` / ``wait_quiet(items)``: wait on a condition, never a
  fixed sleep; ``wait_quiet`` waits until a list of received messages stops growing.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest

from arm_dyn_id.nodes.ros_domain import claim_domain

REPO = Path(__file__).resolve().parent.parent
_SHM = Path('/dev/shm')
_SHM_PREFIXES = ('fastdds_', 'fastrtps_', 'fast_datasharing', 'sem.fastdds_', 'sem.fastrtps_')


def wait_for(predicate, timeout, poll=0.01, what=None):
    """Poll ``predicate()`` until true; return it, or raise TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f'timed out after {timeout} s waiting for {what or predicate}')
        time.sleep(poll)


def wait_quiet(items, quiet=0.3, timeout=10.0, what='messages'):
    """Wait until ``len(items)`` has not changed for ``quiet`` s (what was in flight has
    landed); raise TimeoutError if it keeps changing for ``timeout`` s."""
    last = {'n': len(items), 't': time.monotonic()}

    def settled():
        now = time.monotonic()
        if len(items) != last['n']:
            last['n'], last['t'] = len(items), now
        return now - last['t'] >= quiet

    return wait_for(settled, timeout, what=f'{what} to stop arriving')


def shm_files():
    try:
        return {p.name for p in _SHM.iterdir() if p.name.startswith(_SHM_PREFIXES)}
    except OSError:
        return set()


def _shm_in_use():
    """Names under /dev/shm that some live process maps or holds open."""
    used = set()
    for proc in Path('/proc').iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for line in (proc / 'maps').read_text().splitlines():
                if '/dev/shm/' in line:
                    used.add(line.rsplit('/dev/shm/', 1)[1].split(' ')[0])
            for fd in (proc / 'fd').iterdir():
                target = os.readlink(fd)
                if target.startswith('/dev/shm/'):
                    used.add(target[len('/dev/shm/'):].split(' ')[0])
        except OSError:
            continue
    return used


def cleanup_shm(before):
    """Remove Fast DDS shm files that are new since ``before`` and no longer in use."""
    new = shm_files() - set(before)
    if not new:
        return []
    in_use = _shm_in_use()
    removed = []
    for name in sorted(new - in_use):
        try:
            (_SHM / name).unlink()
            removed.append(name)
        except OSError:
            pass
    return removed


class RosEnv(dict):
    """Environment for node processes; also carries ``domain_id``, ``root``, ``log_dir``."""

    domain_id: int
    root: Path
    log_dir: Path
    procs: list


@contextmanager
def ros_environment(root=None):
    """Yield a :class:`RosEnv`; on exit stop leftover processes and clean shm files."""
    shm_before = shm_files()
    tmp = None
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix='arm_dyn_id_ros_')
        root = tmp.name
    root = Path(root)
    claim = claim_domain()
    domain = claim.domain_id
    env = RosEnv(os.environ)
    env.domain_id = domain
    env.root = root
    env.log_dir = root / 'node_logs'
    env.log_dir.mkdir(parents=True, exist_ok=True)
    env.procs = []
    (root / 'ros_home').mkdir(exist_ok=True)
    env.update({
        'ROS_DOMAIN_ID': str(domain),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
        'ROS_HOME': str(root / 'ros_home'),
        'ROS_LOG_DIR': str(root / 'ros_home' / 'log'),
        'PYTHONUNBUFFERED': '1',
        'PYTHONFAULTHANDLER': '1',      # a crash of a node prints its Python stack
        'PYTHONPATH': os.pathsep.join(
            [str(REPO)] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p]),
        'RCUTILS_COLORIZED_OUTPUT': '0',
    })
    env.pop('ROS_LOCALHOST_ONLY', None)
    try:
        yield env
    finally:
        for proc in env.procs:
            if proc.poll() is None:
                stop(proc, timeout=5)
        if not os.environ.get('PYTEST_XDIST_WORKER'):
            # alone, this run's files are known: clean them now. Beside another pytest
            # worker, a file new since this test began may be one that worker's node has
            # just created; the controller cleans once, when every worker is done
            # (conftest.pytest_sessionfinish)
            cleanup_shm(shm_before)
        claim.release()
        if tmp is not None:
            tmp.cleanup()


@pytest.fixture
def ros_env(tmp_path):
    """Per-test :class:`RosEnv` rooted in ``tmp_path`` (see module docstring)."""
    with ros_environment(tmp_path / 'ros') as env:
        yield env


def write_params_file(path, params, node_name='/**'):
    """Write ``params`` as a ROS 2 parameter file; returns the path."""
    import yaml
    path = Path(path)
    path.write_text(yaml.safe_dump({node_name: {'ros__parameters': dict(params)}},
                                   sort_keys=False))
    return path


def start_node(target, params=None, env=None, name=None, ros_args=(), args=()):
    """Start a node process.

    Parameters
    ----------
    target : str or path-like
        Module name (run as ``python -m``) or path to a ``.py`` file.
    params : dict or path-like, optional
        Parameters (written to a params file) or an existing params file.
    env : RosEnv
        From :func:`ros_environment` / the ``ros_env`` fixture.
    name : str, optional
        Log file stem (default: last part of ``target``).
    ros_args : sequence of str
        Extra arguments after ``--ros-args`` (remaps ``-r a:=b``...).
    args : sequence of str
        Arguments before ``--ros-args``.

    Returns
    -------
    subprocess.Popen
        With ``log_out`` / ``log_err`` attributes (paths).
    """
    if env is None:
        raise ValueError('start_node needs env= from ros_environment() or the ros_env fixture')
    target = str(target)
    name = name or Path(target).stem.split('.')[-1]
    stem, k = name, 1
    while (env.log_dir / f'{name}.out').exists():  # a second process keeps its own logs
        k += 1
        name = f'{stem}_{k}'
    if target.endswith('.py'):
        cmd = [sys.executable, target]
    else:
        cmd = [sys.executable, '-m', target]
    cmd += list(args)
    ros = list(ros_args)
    if params is not None:
        if isinstance(params, dict):
            params = write_params_file(env.log_dir / f'{name}_params.yaml', params)
        ros += ['--params-file', str(params)]
    if ros:
        cmd += ['--ros-args'] + ros
    out = open(env.log_dir / f'{name}.out', 'w')
    err = open(env.log_dir / f'{name}.err', 'w')
    try:
        proc = subprocess.Popen(cmd, env=dict(env), stdout=out, stderr=err, cwd=str(env.root))
    finally:
        out.close()
        err.close()
    proc.log_out = env.log_dir / f'{name}.out'
    proc.log_err = env.log_dir / f'{name}.err'
    env.procs.append(proc)
    return proc


def node_output(proc):
    """stdout + stderr of a process started by :func:`start_node` (for assertion messages)."""
    text = ''
    for path in (proc.log_out, proc.log_err):
        try:
            text += Path(path).read_text()
        except OSError:
            pass
    return text


def process_report(pid, gdb_timeout=60.0):
    """What a process that does not end is doing: its state and each thread's state and
    kernel wait channel (/proc), and the native stacks of all threads (gdb, when
    installed). Text for a test's failure message."""
    lines = []
    task_dir = Path(f'/proc/{pid}/task')
    try:
        status = Path(f'/proc/{pid}/status').read_text()
        lines += [line for line in status.splitlines()
                  if line.split(':')[0] in ('State', 'Threads', 'SigPnd', 'ShdPnd', 'SigBlk',
                                            'SigCgt')]
        for task in sorted(task_dir.iterdir(), key=lambda p: int(p.name)):
            try:
                comm = (task / 'comm').read_text().strip()
                state = (task / 'stat').read_text().rsplit(')', 1)[1].split()[0]
                wchan = (task / 'wchan').read_text().strip()
            except OSError:
                continue
            lines.append(f'thread {task.name} {comm!r}: state {state}, wchan {wchan}')
    except OSError as exc:
        lines.append(f'/proc/{pid}: {exc}')
    gdb = shutil.which('gdb')
    if gdb:
        try:
            # the main thread first (native, then Python), then every thread
            command = [gdb, '-p', str(pid), '-batch', '-iex', 'set auto-load safe-path /',
                       '-ex', 'thread 1', '-ex', 'bt', '-ex', 'py-bt',
                       '-ex', 'thread apply all bt']
            out = subprocess.run(command, capture_output=True, text=True, timeout=gdb_timeout)
            lines.append(out.stdout[:30000])
        except (subprocess.TimeoutExpired, OSError) as exc:
            lines.append(f'gdb: {exc}')
    return '\n'.join(lines)


def refusal_line(proc, timeout=90.0):
    """A node refused its configuration: it exits with code 2, its output holds exactly
    one [FATAL] line and no traceback. Returns that line (the caller checks what it
    names)."""
    code = proc.wait(timeout)
    output = node_output(proc)
    assert code == 2, output
    fatal = [line for line in output.splitlines() if '[FATAL]' in line]
    assert len(fatal) == 1, output
    assert 'Traceback' not in output, output
    return fatal[0]


def dump_and_kill(proc, wait=3.0, report=None):
    """SIGUSR1 (every node prints its threads' stacks to its log: run_node registers
    faulthandler on it), ``wait`` s for the text, then SIGKILL; returns the exit code.
    With ``report`` (a path), :func:`process_report` is written there first."""
    if report is not None and proc.poll() is None:
        Path(report).write_text(process_report(proc.pid))
    if proc.poll() is None:
        proc.send_signal(signal.SIGUSR1)
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass
    return kill(proc)


def stop(proc, timeout=10.0):
    """SIGINT, then SIGTERM, then SIGKILL, each with a bounded wait; returns the exit code.
    Before the SIGKILL the node prints its stacks (:func:`dump_and_kill`)."""
    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0)):
        if proc.poll() is not None:
            break
        proc.send_signal(sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        dump_and_kill(proc)
    return proc.wait(3.0)


def kill(proc):
    """SIGKILL now (crash tests); returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(5.0)


class RosHarness:
    """An rclpy node on a private context and domain, spun in a background thread.

    Parameters
    ----------
    domain_id : int
        ``env.domain_id`` of the nodes under test.
    name : str
        Node name.
    """

    def __init__(self, domain_id, name='test_harness'):
        self.domain_id = int(domain_id)
        self.name = name
        self.context = None
        self.node = None
        self.executor = None
        self._thread = None
        self._stop = threading.Event()
        self._clients = {}

    def __enter__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        self.context = rclpy.Context()
        self._clients = {}
        rclpy.init(context=self.context, domain_id=self.domain_id)
        self.node = rclpy.create_node(self.name, context=self.context)
        # Not the EventsExecutor: with the rclpy wheels used here, creating entities
        # from the test thread while it spins deadlocks, and it answers no services
        # (nodes/executors.py). A test's own node is not the 1 kHz path under test.
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True, name='ros-harness')
        self._thread.start()
        return self

    def _spin(self):
        # spin in slices so that __exit__ can stop the thread promptly
        while not self._stop.is_set() and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def wait_for(self, predicate, timeout, poll=0.01, what=None):
        """Poll ``predicate()`` (callbacks run in the spin thread); bounded by ``timeout``."""
        return wait_for(predicate, timeout, poll, what)

    def wait_for_subscribers(self, publisher, count=1, timeout=15.0):
        return wait_for(lambda: publisher.get_subscription_count() >= count, timeout,
                        what=f'{count} subscriber(s) on {publisher.topic_name}')

    def wait_for_publishers(self, subscription, count=1, timeout=15.0):
        return wait_for(lambda: subscription.get_publisher_count() >= count, timeout,
                        what=f'{count} publisher(s) on {subscription.topic_name}')

    def publish_paced(self, publisher, messages, answered, chunk=200, timeout=60.0,
                      why=None):
        """Publish ``messages`` ``chunk`` at a time, each chunk once ``answered()`` (the
        replies counted so far) has caught up with all that was sent: a reliable stream of
        depth 1000 then loses nothing to a burst, on a busy machine too. AssertionError
        (with ``why()``) when a chunk is not answered within ``timeout`` s."""
        messages = list(messages)
        for lo in range(0, len(messages), chunk):
            for msg in messages[lo:lo + chunk]:
                publisher.publish(msg)
            sent = min(lo + chunk, len(messages))
            try:
                wait_for(lambda: answered() >= sent, timeout)
            except TimeoutError:
                raise AssertionError(f'{answered()} answers of {sent} sent'
                                     + ('' if why is None else f'; {why()}')) from None

    def call(self, client, request, timeout=10.0):
        """Call a service and return its response; raises TimeoutError."""
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f'service {client.srv_name} not available after {timeout} s')
        future = client.call_async(request)
        wait_for(future.done, timeout, what=f'response of {client.srv_name}')
        return future.result()

    def client(self, service, srv_type=None):
        """The harness's client of ``service`` (``std_srvs/Trigger`` by default), made on
        first use and kept until the harness ends. A client made just before its call can
        lose the request: the server is discovered (``wait_for_service``) before it has
        matched the client's request writer, and a volatile request sent then is dropped
        (one ``~/start`` call in CI, on a busy machine, got no answer in 20 s). Made early
        and reused, the client is matched by the time it calls."""
        if srv_type is None:
            from std_srvs.srv import Trigger as srv_type
        key = (service, srv_type)
        if key not in self._clients:
            self._clients[key] = self.node.create_client(srv_type, service)
        return self._clients[key]

    def trigger(self, service, timeout=10.0):
        """Call a ``std_srvs/Trigger`` service by name (:meth:`client`); returns the
        response."""
        from std_srvs.srv import Trigger
        return self.call(self.client(service), Trigger.Request(), timeout)

    def __exit__(self, *exc):
        import rclpy
        self._stop.set()
        # the spin thread must have left spin_once before the node goes: a node
        # destroyed (rcl_node_fini) while another thread still waits on it can crash
        # the whole test process, and 5 s (the bound this join had) is not always
        # enough on a busy machine
        self._thread.join(60.0)
        if self._thread.is_alive():
            warnings.warn(f'{self.name}: the spin thread did not stop in 60 s; its node is '
                          'left to the process exit rather than destroyed under it')
            return False
        try:
            self.executor.shutdown(timeout_sec=2.0)
        except Exception:
            pass
        try:
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
        return False
