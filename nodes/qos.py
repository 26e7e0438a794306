"""The QoS profiles the nodes share (docs/interfaces.md), defined once.

- :func:`stream_qos`: 1 kHz streams (``joint_states``, ``joint_torques``,
  ``gravity_torques``, queries): reliable, volatile, keep the last ``depth``;
- :data:`MARKER_QOS`: ``excitation_segments``: reliable, transient_local, depth 100,
  so a node started late still gets every marker of the run;
- :data:`LATCHED_QOS`: the model and URDF text: reliable, transient_local, depth 1.
"""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


def stream_qos(depth):
    """Reliable, volatile, keep-last ``depth`` (messages)."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=int(depth),
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


MARKER_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                        reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
