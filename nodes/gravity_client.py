"""Clients of the identifier node's queries and residual stream (docs/interfaces.md).

- :class:`GravityClient`: ``gravity_query`` -> ``gravity_result``. The request is a
  sensor_msgs/JointState with joint names and positions (rad); the reply carries
  G(q) (N·m) in ``effort`` and the same ``header.frame_id`` (the correlation id).
- :class:`DynamicsClient`: ``dynamics_query`` -> ``dynamics_result``, inverse dynamics
  of a full model: positions, velocities and accelerations (in ``effort``) in; the
  total torque, its rigid-body part and its friction part out.
- :class:`ResidualMonitor`: the latest ``external_torques`` (residual) and ``contact``.

An error reply has an empty ``effort`` and ``name = ['error: <message>']``.

- :func:`spin_in_background`: spins a node in a thread that the process waits for at
  exit, so that ``rclpy.shutdown()`` ends a client cleanly.

Example::

    client = GravityClient(node)          # create before spinning
    spin_in_background(node)              # an executor in a thread, joined at exit
    client.wait_for_server(5.0)
    tau = client.call(['joint_1', 'joint_2'], [0.1, 0.2])   # N·m, in the order asked
    ids = DynamicsClient(node)
    answer = ids.call(names, q, dq, ddq)  # answer.total, .rigid_body, .friction (N·m)
"""

import atexit
import itertools
import sys
import threading
import time
import uuid
import weakref
from typing import NamedTuple

import numpy as np
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from arm_dyn_id.nodes.qos import stream_qos

ERROR_PREFIX = 'error: '


#: s the process waits at exit for threads still inside an rclpy executor.
EXIT_WAIT = 5.0


class BackgroundSpin:
    """An executor spinning ``node`` in a daemon thread (:func:`spin_in_background`).

    ``rclpy.shutdown()`` ends it without a traceback; :meth:`shutdown` ends it before
    that (and joins the thread). Either way the process waits for the thread at exit.
    """

    def __init__(self, node, executor=None):
        self.executor = executor if executor is not None else \
            SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        self.thread = threading.Thread(target=self._spin, daemon=True,
                                       name=f'{node.get_name()}-spin')
        _SPINS.add(self)
        _exit_wait()
        self.thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except ExternalShutdownException:
            pass        # rclpy.shutdown(): the normal end

    def shutdown(self, timeout=EXIT_WAIT):
        """Stop the executor and join the thread (bounded by ``timeout`` s); whether it ended."""
        self.executor.shutdown(timeout_sec=timeout)
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)
        return not self.thread.is_alive()


def spin_in_background(node, executor=None):
    """Spin ``node`` (a SingleThreadedExecutor, or ``executor``) in a background thread.

    Returns a :class:`BackgroundSpin`. End with ``rclpy.shutdown()`` (or its
    ``shutdown()`` first): the process waits for the thread when it exits.
    """
    return BackgroundSpin(node, executor)


_SPINS = weakref.WeakSet()
_EXIT_HOOK = []


def _exit_wait():
    """Register :func:`_join_executor_threads` at exit, once."""
    if not _EXIT_HOOK:
        _EXIT_HOOK.append(True)
        atexit.register(_join_executor_threads)


def _executor_threads():
    """{thread id: Executor} of the threads (other than this one) inside an rclpy executor."""
    found = {}
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame is not None:
            candidate = frame.f_locals.get('self')
            if isinstance(candidate, Executor):
                found[ident] = candidate
                break
            frame = frame.f_back
    return found


def _join_executor_threads(timeout=EXIT_WAIT):
    """At exit: stop every executor that still spins in a thread and wait for the threads.

    A daemon thread left waiting in an rclpy executor is woken by ``rclpy.shutdown()``
    (or by a message) while Python finalises; taking the interpreter back then ends the
    thread from inside C++ and the process aborts ("terminate called without an active
    exception", exit code 134). Waiting here, before finalisation, avoids it.
    """
    deadline = time.monotonic() + timeout
    for spin in list(_SPINS):
        spin.shutdown(max(0.1, deadline - time.monotonic()))
    for executor in set(_executor_threads().values()):
        try:
            executor.shutdown(timeout_sec=max(0.1, deadline - time.monotonic()))
        except Exception:       # noqa: BLE001 - its context is gone: nothing to stop
            pass
    while _executor_threads() and time.monotonic() < deadline:
        time.sleep(0.01)


class GravityQueryError(RuntimeError):
    """An error reply from the gravity (or dynamics) service, or no reply in time."""


class InverseDynamics(NamedTuple):
    """A dynamics_result in the order of the joints asked (N·m, each (n,))."""

    total: np.ndarray
    rigid_body: np.ndarray
    friction: np.ndarray


class GravityClient:
    """Gravity torques for a joint configuration, as a blocking or an async call.

    Parameters
    ----------
    node : rclpy.node.Node
        Node that owns the publisher and subscription; something must spin it
        (for :meth:`call`, in another thread than the caller's).
    query_topic, result_topic : str
        Topic names (relative names follow the node's namespace).
    depth : int
        QoS depth (reliable, volatile).
    """

    result_name = 'gravity_result'

    def __init__(self, node, query_topic='gravity_query', result_topic='gravity_result',
                 depth=100):
        qos = stream_qos(depth)
        self.node = node
        self.resends = 0            # queries sent again by call() (see its resend_period)
        self._prefix = uuid.uuid4().hex[:12]
        self._counter = itertools.count()
        self._pending = {}
        self._lock = threading.Lock()
        _exit_wait()
        self._pub = node.create_publisher(JointState, query_topic, qos)
        self._sub = node.create_subscription(JointState, result_topic, self._on_result, qos)

    def server_ready(self):
        """True when the service subscribes to the queries and publishes results."""
        return self._pub.get_subscription_count() > 0 and self._sub.get_publisher_count() > 0

    def wait_for_server(self, timeout=5.0):
        """Wait (bounded) until :meth:`server_ready`; returns whether it is."""
        deadline = time.monotonic() + timeout
        while not self.server_ready():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def call_async(self, joint_names, positions):
        """Send a query; returns an :class:`rclpy.task.Future`.

        The future's result is the torque array (N·m) in the order of
        ``joint_names``; on an error reply its exception is a
        :class:`GravityQueryError`. Nothing times out here: cancel it yourself.
        """
        future, msg = self._query(joint_names, positions)
        self._pub.publish(msg)
        return future

    @staticmethod
    def _floats(values):
        return [float(x) for x in np.asarray(values, dtype=float).ravel()]

    def _query(self, joint_names, positions, velocities=None, accelerations=None):
        names = [str(n) for n in joint_names]
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = f'{self._prefix}-{next(self._counter)}'
        msg.name = names
        msg.position = self._floats(positions)
        if velocities is not None:
            msg.velocity = self._floats(velocities)
        if accelerations is not None:
            msg.effort = self._floats(accelerations)
        future = Future()
        with self._lock:
            self._pending[msg.header.frame_id] = (future, names)
        future.add_done_callback(lambda _f, key=msg.header.frame_id: self._forget(key))
        return future, msg

    def call(self, joint_names, positions, timeout=1.0, resend_period=0.05):
        """Blocking query; returns G(q) (N·m) in the order of ``joint_names``.

        A query still unanswered after ``resend_period`` s is sent again with the same
        id (the first reply wins; ``resends`` counts them): a lost or late DDS sample
        then costs one period instead of a reliable-transport repair, which took
        0.3-1.8 s for 2 of 1000 queries on a loaded 2-core machine (docs/benchmarks.md).

        Raises
        ------
        GravityQueryError
            On an error reply (its message) or when no reply came within ``timeout`` s.
        """
        return self._call(self._query(joint_names, positions), timeout, resend_period)

    def _call(self, query, timeout, resend_period):
        event = threading.Event()
        future, msg = query
        future.add_done_callback(lambda _f: event.set())
        deadline = time.monotonic() + timeout
        self._pub.publish(msg)
        while not event.wait(max(0.0, min(resend_period or timeout,
                                          deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                break
            self.resends += 1
            self._pub.publish(msg)
        if not future.done():
            future.cancel()
            raise GravityQueryError(
                f'no {self.result_name} within {timeout} s (is identifier_node running, and '
                'is this node spun in another thread?)')
        return future.result()

    def _forget(self, key):
        with self._lock:
            self._pending.pop(key, None)

    def _on_result(self, msg):
        with self._lock:
            entry = self._pending.get(msg.header.frame_id)
        if entry is None:
            return          # another client's reply, or one we stopped waiting for
        future, names = entry
        if future.done():
            return          # a second reply to a query that was sent again
        if len(msg.effort) == 0 and msg.name and msg.name[0].startswith(ERROR_PREFIX):
            future.set_exception(GravityQueryError(msg.name[0][len(ERROR_PREFIX):]))
            return
        where = {n: i for i, n in enumerate(msg.name)}
        try:
            order = [where[n] for n in names]
        except KeyError as exc:
            future.set_exception(GravityQueryError(f'reply lacks joint {exc}'))
            return
        try:
            future.set_result(self._result(msg, order))
        except (IndexError, ValueError) as exc:
            future.set_exception(GravityQueryError(f'malformed reply: {exc}'))

    @staticmethod
    def _result(msg, order):
        return np.asarray(msg.effort, dtype=float)[order]


class DynamicsClient(GravityClient):
    """Inverse dynamics of a full model, as a blocking or an async call.

    Same protocol and resend as :class:`GravityClient` on ``dynamics_query`` ->
    ``dynamics_result``: the query's ``position``, ``velocity`` and ``effort`` carry
    q (rad), q̇ (rad/s) and q̈ (rad/s²); the reply's ``effort`` the total torque,
    ``position`` its rigid-body part ``M q̈ + C q̇ + G`` and ``velocity`` its friction
    part (N·m), in the model's order (reordered here to the order asked).
    """

    result_name = 'dynamics_result'

    def __init__(self, node, query_topic='dynamics_query', result_topic='dynamics_result',
                 depth=100):
        super().__init__(node, query_topic, result_topic, depth)

    def call_async(self, joint_names, positions, velocities, accelerations):
        """Send a query; an :class:`rclpy.task.Future` of :class:`InverseDynamics`."""
        future, msg = self._query(joint_names, positions, velocities, accelerations)
        self._pub.publish(msg)
        return future

    def call(self, joint_names, positions, velocities, accelerations, timeout=1.0,
             resend_period=0.05):
        """Blocking query; :class:`InverseDynamics` in the order of ``joint_names``.

        Raises
        ------
        GravityQueryError
            On an error reply (its message) or when no reply came within ``timeout`` s.
        """
        return self._call(self._query(joint_names, positions, velocities, accelerations),
                          timeout, resend_period)

    @staticmethod
    def _result(msg, order):
        return InverseDynamics(*(np.asarray(values, dtype=float)[order]
                                 for values in (msg.effort, msg.position, msg.velocity)))


class ResidualMonitor:
    """The latest residual (external torque estimate) and contact flag of a full model.

    Subscribes ``external_torques`` (sensor_msgs/JointState: the residual in
    ``effort``, N·m) and ``contact`` (std_msgs/Bool, only published when the node has
    ``contact_thresholds``). Something must spin ``node``.

    Parameters
    ----------
    node : rclpy.node.Node
    callback : callable, optional
        Called as ``callback(msg)`` with every external_torques message.
    depth : int
        QoS depth (reliable, volatile; the node's publishers are reliable).

    Attributes
    ----------
    count : int
        external_torques messages received.
    contact : bool or None
        The last contact flag (None before the first).
    contacts : int
        Rising edges of the contact flag seen.
    """

    def __init__(self, node, callback=None, depth=100, residual_topic='external_torques',
                 contact_topic='contact'):
        qos = stream_qos(depth)
        self.count = 0
        self.contact = None
        self.contacts = 0
        self._latest = None
        self._callback = callback
        self._lock = threading.Lock()
        _exit_wait()
        self._sub = node.create_subscription(JointState, residual_topic, self._on_residual,
                                             qos)
        self._contact_sub = node.create_subscription(Bool, contact_topic, self._on_contact,
                                                     qos)

    def _on_residual(self, msg):
        with self._lock:
            self._latest = msg
            self.count += 1
        if self._callback is not None:
            self._callback(msg)

    def _on_contact(self, msg):
        with self._lock:
            if msg.data and not self.contact:
                self.contacts += 1
            self.contact = bool(msg.data)

    def latest(self, joint_names=None):
        """(stamp s, external torque (n,) N·m) of the last message, or None.

        ``joint_names`` reorders the torque (the message is in the model's order).
        """
        with self._lock:
            msg = self._latest
        if msg is None:
            return None
        tau = np.asarray(msg.effort, dtype=float)
        if joint_names is not None:
            where = {n: i for i, n in enumerate(msg.name)}
            tau = tau[[where[n] for n in joint_names]]
        return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, tau
