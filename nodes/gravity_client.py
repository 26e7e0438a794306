"""Client of the identifier node's gravity query: ``gravity_query`` -> ``gravity_result``.

The request is a sensor_msgs/JointState with joint names and positions (rad); the
reply carries G(q) (N·m) in ``effort`` and the same ``header.frame_id``
(the correlation id). An error reply has an empty ``effort`` and
``name = ['error: <message>']`` (docs/interfaces.md).

Example::

    client = GravityClient(node)          # node spun by an executor in another thread
    client.wait_for_server(5.0)
    tau = client.call(['joint_1', 'joint_2'], [0.1, 0.2])   # N·m, in the order asked
"""

import itertools
import threading
import time
import uuid

import numpy as np
from rclpy.task import Future
from sensor_msgs.msg import JointState

from arm_dyn_id.nodes.qos import stream_qos

ERROR_PREFIX = 'error: '


class GravityQueryError(RuntimeError):
    """An error reply from the gravity service, or no reply within the timeout."""


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

    def __init__(self, node, query_topic='gravity_query', result_topic='gravity_result',
                 depth=100):
        qos = stream_qos(depth)
        self.node = node
        self.resends = 0            # queries sent again by call() (see its resend_period)
        self._prefix = uuid.uuid4().hex[:12]
        self._counter = itertools.count()
        self._pending = {}
        self._lock = threading.Lock()
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

    def _query(self, joint_names, positions):
        names = [str(n) for n in joint_names]
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = f'{self._prefix}-{next(self._counter)}'
        msg.name = names
        msg.position = [float(x) for x in np.asarray(positions, dtype=float).ravel()]
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
        event = threading.Event()
        future, msg = self._query(joint_names, positions)
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
                f'no gravity_result within {timeout} s (is identifier_node running, and is '
                'this node spun in another thread?)')
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
        future.set_result(np.asarray(msg.effort, dtype=float)[order])
