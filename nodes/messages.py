"""JointState messages built for the 1 kHz streams, at a fraction of the usual cost.

A ``JointState()`` built per message and filled from lists costs more than the
model it carries: the constructor builds a Header and a Time, and each float array
setter checks every value in Python. At 1 kHz with four publishes per input that was
about a quarter of the identifier's time on its stream thread, and queries wait
behind it (docs/benchmarks.md, "Full-dynamics service"). Here:

- :func:`joint_state` builds one message without the per-value checks (the values
  come from NumPy, finite or not as the model computed them) and copies each array
  as one buffer;
- :class:`StreamMessage` writes a stream's messages already serialised, as
  ``rclpy.serialization.serialize_message`` lays them out (tested: the same length,
  the same message read back; rclpy leaves the alignment padding unzeroed too), from a
  template serialised once per joint names, frame_id and velocity-or-not, with the
  stamp and the arrays written in place. ``Publisher.publish`` takes bytes as they are, so
  neither the message's conversion to C nor the middleware's serialisation runs per
  message (85 against 115 µs per publish in a micro-benchmark; the nodes' CPU beside
  the 1 kHz stream did not measurably change: the middleware's write dominates,
  docs/benchmarks.md), and a recorder writes the same bytes into its bag.
"""

import struct
from array import array

import numpy as np
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

#: sentinels that mark where the stamp and each array sit in a serialised template
_SEC, _NANOSEC = 0x5EC0_5EC0, 0x1A2B_3C4D
_SENTINELS = {'position': 1.5e10, 'velocity': 2.5e10, 'effort': 3.5e10}


def doubles(values):
    """A float64 ``array.array`` of ``values`` (what the message's C conversion copies)."""
    return array('d', np.ascontiguousarray(values, dtype=np.float64).tobytes())


def joint_state(header, names, position, effort, velocity=None):
    """A JointState reply or stream message: NumPy arrays in, one buffer copy each."""
    out = JointState(check_fields=False)
    out.header = header
    out.name = list(names)
    out.position = doubles(position)
    if velocity is not None:
        out.velocity = doubles(velocity)
    out.effort = doubles(effort)
    return out


class _Layout:
    """Where the stamp and the arrays of one JointState shape sit in its CDR bytes."""

    __slots__ = ('template', 'stamp', 'arrays')

    def __init__(self, names, frame_id, velocity):
        n = len(names)
        msg = JointState(check_fields=False)
        msg.header.stamp.sec, msg.header.stamp.nanosec = _SEC, _NANOSEC
        msg.header.frame_id = frame_id
        msg.name = list(names)
        marks = {}
        for field, base in _SENTINELS.items():
            if n == 0 or (field == 'velocity' and not velocity):
                continue
            marks[field] = (base + np.arange(n)).astype(np.float64).tobytes()
            setattr(msg, field, array('d', marks[field]))
        self.template = serialize_message(msg)
        self.stamp = _find(self.template, struct.pack('=iI', _SEC, _NANOSEC))
        self.arrays = tuple(_find(self.template, marks[f]) if f in marks else None
                            for f in ('position', 'velocity', 'effort'))


def _find(template, mark):
    at = template.find(mark)
    if at < 0 or template.find(mark, at + 1) >= 0:
        raise ValueError('a JointState template whose sentinel is missing or repeated '
                         '(a change in the serialisation): cannot serialise in place')
    return at


class StreamMessage:
    """One stream's JointState messages, serialised in place (see the module docstring)."""

    __slots__ = ('_names', '_n', '_layouts')

    def __init__(self):
        self._names = None
        self._n = 0
        self._layouts = {}

    def fill(self, header, names, position, effort, velocity=None):
        """The CDR bytes of a JointState of ``names`` (a new sequence object builds new
        templates), ``header`` (stamp and frame_id) and the arrays, which must have one
        value per name. ``Publisher.publish`` sends them as they are;
        ``rclpy.serialization.deserialize_message(data, JointState)`` reads them back."""
        if names is not self._names:
            self._names, self._n, self._layouts = names, len(names), {}
        frame_id = header.frame_id
        key = (frame_id, velocity is not None)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= 8:     # frame_ids that keep changing: no growth
                self._layouts.clear()
            layout = self._layouts[key] = _Layout(names, frame_id, velocity is not None)
        buf = bytearray(layout.template)
        stamp = header.stamp
        struct.pack_into('=iI', buf, layout.stamp, stamp.sec, stamp.nanosec)
        n = self._n
        for at, values in zip(layout.arrays, (position, velocity, effort)):
            if at is not None:
                buf[at:at + 8 * n] = _exact(values, n)
        return bytes(buf)


def _exact(values, n):
    data = np.ascontiguousarray(values, dtype=np.float64)
    if data.shape != (n,):
        raise ValueError(f'{data.shape} values for a JointState of {n} joints')
    return data.data
