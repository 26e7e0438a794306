"""Subscriptions read on demand, for a node that only needs the newest message of a 1 kHz
stream.

A subscription callback costs the Python executor a wake-up, a take, a deserialisation
and a callback per message, whether the node needs every message or not. The simulator
only needs to know how far the recorder got when it is a window ahead of it, and the
excitation node only the newest joint state at its 100 Hz tick and 50 Hz watchdog: at
1 kHz those callbacks were most of their work (py-spy in the quick demo). A
:class:`PolledSubscription` lives on a companion node (``<node>_<what>``, in ``ros2 node
list``) that no executor spins; :meth:`PolledSubscription.take_newest` takes every
waiting message and returns the newest, raw, with its age. The topic is resolved by the
owning node, so its remappings apply. Call it from one thread only.
"""

import time

import rclpy


class PolledSubscription:
    """``msg_type`` messages on ``topic`` (resolved by ``owner``), taken on demand."""

    def __init__(self, owner, what, topic, msg_type, qos):
        self.topic = owner.resolve_topic_name(topic)
        self.msg_type = msg_type
        self.node = rclpy.create_node(
            f'{owner.get_name()}_{what}', namespace=owner.get_namespace(),
            context=owner.context, use_global_arguments=False,
            start_parameter_services=False)
        self._sub = self.node.create_subscription(msg_type, self.topic, _never_called, qos,
                                                  raw=True)

    def take_newest(self):
        """Take every waiting message: ``(bytes, age_s)`` of the newest (its age since it
        arrived, 0 when the middleware gives no arrival time), or None when none waits."""
        sub, latest = self._sub, None
        with sub.handle:
            while True:
                taken = sub.handle.take_message(self.msg_type, True)
                if taken is None:
                    break
                latest = taken
        if latest is None:
            return None
        data, info = latest
        received = info.get('received_timestamp', 0) if isinstance(info, dict) else 0
        age = max(time.time_ns() - received, 0) * 1e-9 if received else 0.0
        return data, age


def _never_called(_msg):
    """The subscription's callback: no executor spins the companion node."""
