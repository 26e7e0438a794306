"""JointState messages built for the 1 kHz streams, at a fraction of the usual cost.

A ``JointState()`` built per message and filled from lists costs more than the
model it carries: the constructor builds a Header and a Time, and each float array
setter checks every value in Python. At 1 kHz with four publishes per input that was
about a quarter of the identifier's time on its stream thread, and queries wait
behind it (docs/benchmarks.md, "Full-dynamics service"). Here:

- :func:`joint_state` builds one message without the per-value checks (the values
  come from NumPy, finite or not as the model computed them) and copies each array
  as one buffer;
- :class:`StreamMessage` keeps one message per stream and refills it: the joint
  names are set once, the header and the arrays are replaced. ``publish`` serialises
  the message before it returns, so refilling it for the next input is safe as long
  as one thread publishes it (the node's stream thread).
"""

from array import array

import numpy as np
from sensor_msgs.msg import JointState


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


class StreamMessage:
    """One reusable JointState for a 1 kHz stream (see the module docstring)."""

    __slots__ = ('msg', '_names')

    def __init__(self):
        self.msg = JointState(check_fields=False)
        self._names = None

    def fill(self, header, names, position, effort, velocity=None):
        """The message, refilled; ``names`` is copied only when it is another sequence."""
        msg = self.msg
        if names is not self._names:
            msg.name = list(names)
            self._names = names
        msg.header = header
        msg.position = doubles(position)
        msg.velocity = doubles(velocity) if velocity is not None else array('d')
        msg.effort = doubles(effort)
        return msg
