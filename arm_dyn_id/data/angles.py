"""Joint angles that a driver wrapped into one turn, made continuous again.

Drivers of arms with continuous joints (a Kinova's, many ros2_control hardware
interfaces) report their angles within one turn, (-π, π] or [0, 2π): a joint that
passes the end of that turn jumps by 2π between two samples. Every joint this suite
models is revolute, so its dynamics repeat every turn and only the jump is wrong: the
velocity and acceleration differentiated across it are thousands of rad/s, a
reversal is read there, and a joint that crossed π looks as if it swept its whole
turn. A fit of such data was refused naming a swapped or flipped joint.

A step is a wrap when it is one turn, up or down, give or take
:data:`WRAP_TOLERANCE`: far more than a joint moves between two samples, far less
than the half turn that would make a real motion and a wrap alike. Steps of other
sizes (a long gap in the data, a value that is no angle) are left as they are. The
unwrapped angle starts at the first sample's.
"""

import numpy as np

TURN = 2.0 * np.pi
#: rad: how far from a whole turn a step may be and still be a wrap (a joint at
#: 3 rad/s moves 0.03 rad between samples at 100 Hz; a quarter turn is 1.57 rad)
WRAP_TOLERANCE = 0.5


def wrap_turns(step):
    """Turns (int array: -1, 0 or 1) that each step in ``step`` (rad) holds as a wrap; 0
    where the step is a motion (or too far from one turn to be either)."""
    step = np.asarray(step, dtype=float)
    turns = np.rint(step / TURN)
    wrapped = (np.abs(turns) == 1) & (np.abs(step - turns * TURN) < WRAP_TOLERANCE)
    return np.where(wrapped, turns, 0.0).astype(int)


def step(q, previous):
    """``q - previous`` (rad) with a wrap taken out: the motion between two samples (or
    sample by sample, arrays of them)."""
    d = np.asarray(q, dtype=float) - previous
    if not np.abs(d).max(initial=0.0) > np.pi:      # no step of half a turn: no wrap
        return d
    return d - TURN * wrap_turns(d)


def unwrap(q):
    """Angles (N, n) rad with each driver's wrap taken out, and the count per joint.

    Returns
    -------
    q : ndarray, (N, n)
        ``q`` itself when nothing wrapped, else a copy whose every joint is continuous.
    wraps : ndarray of int, (n,)
        Steps taken out, per joint.
    """
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or q.shape[0] < 2:
        return q, np.zeros(q.shape[-1] if q.ndim else 0, dtype=int)
    steps = np.diff(q, axis=0)
    if not np.abs(steps).max() > np.pi:          # no step of half a turn: nothing wrapped
        return q, np.zeros(q.shape[1], dtype=int)
    turns = wrap_turns(steps)
    wraps = np.count_nonzero(turns, axis=0)
    if not wraps.any():
        return q, wraps
    out = q.copy()
    out[1:] -= TURN * np.cumsum(turns, axis=0)
    return out, wraps


def unwrap_note(joints, wraps):
    """The reader's sentence for the user, or None when nothing wrapped."""
    named = [f'{j} ({int(w)}x)' for j, w in zip(joints, wraps) if w]
    if not named:
        return None
    return ('angles jump by a whole turn between samples (a driver that reports continuous '
            'joints within one turn): ' + ', '.join(named) + '; unwrapped, as a revolute '
            "joint's dynamics repeat every turn")


class Unwrapper:
    """The same for a live stream, one sample at a time: each joint's turns so far.

    Parameters
    ----------
    n_joints : int
    """

    def __init__(self, n_joints):
        self.offset = np.zeros(int(n_joints))
        self.wraps = np.zeros(int(n_joints), dtype=int)
        self._last = None

    def __call__(self, q):
        """``q`` (n,) rad as received -> continuous (n,) rad."""
        q = np.asarray(q, dtype=float)
        last, self._last = self._last, q
        if last is not None:
            step = q - last
            if np.abs(step).max() > np.pi:      # a whole turn or a long gap: which?
                turns = wrap_turns(step)
                self.offset -= TURN * turns
                self.wraps += turns != 0
        return q + self.offset if self.offset.any() else q
