"""Joint angles a driver wrapped into one turn (arm_dyn_id.data.angles)."""

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from arm_dyn_id.data.angles import TURN, WRAP_TOLERANCE, Unwrapper, step, unwrap, unwrap_note

#: a motion: up to 0.4 rad between samples (a fast joint at a low rate), 1-3 joints
MOTIONS = st.integers(1, 3).flatmap(lambda n: arrays(
    float, st.tuples(st.integers(2, 300), st.just(n)),
    elements=st.floats(-0.4, 0.4, allow_nan=False)))


@settings(max_examples=200, deadline=None)
@given(steps=MOTIONS, start=st.floats(-20.0, 20.0), zero_to_two_pi=st.booleans())
def test_unwrapping_a_wrapped_motion_gives_the_motion_back_up_to_whole_turns(
        steps, start, zero_to_two_pi):
    q = start + np.cumsum(steps, axis=0)
    wrapped = np.mod(q, TURN) if zero_to_two_pi else np.angle(np.exp(1j * q))
    out, wraps = unwrap(wrapped)
    turns = (out - q) / TURN
    # the motion itself, shifted by the same whole number of turns on every sample
    np.testing.assert_allclose(turns, np.broadcast_to(np.rint(turns[0]), turns.shape), atol=1e-9)
    np.testing.assert_allclose(np.diff(out, axis=0), np.diff(q, axis=0), atol=1e-9)
    assert wraps.sum() == np.count_nonzero(np.abs(np.diff(wrapped, axis=0)) > np.pi)
    # the live stream, sample by sample, holds the same
    live = Unwrapper(q.shape[1])
    np.testing.assert_allclose([live(row) for row in wrapped], out, atol=1e-9)
    assert live.wraps.tolist() == wraps.tolist()


def test_a_continuous_record_is_returned_as_it_is_and_a_long_gap_is_left():
    q = np.array([[0.0, 1.0], [0.1, 1.0], [3.2, 1.0], [3.3, 1.0]])   # a 3.1 rad gap
    out, wraps = unwrap(q)
    assert out is q and wraps.tolist() == [0, 0]
    assert unwrap_note(['a', 'b'], wraps) is None
    # a step half a tolerance off a whole turn is a wrap; one a whole tolerance off is not
    near = np.array([[3.0], [3.0 - TURN + WRAP_TOLERANCE / 2]])
    far = np.array([[3.0], [3.0 - TURN + 1.5 * WRAP_TOLERANCE]])
    assert unwrap(near)[1].tolist() == [1] and unwrap(far)[1].tolist() == [0]
    # two turns at once is no driver's wrap (a value that is no angle): left
    assert unwrap(np.array([[3.0], [3.0 - 2 * TURN]]))[1].tolist() == [0]
    assert step(np.array([-3.1]), np.array([3.1]))[0] == TURN - 6.2
    assert 'j1 (2x)' in unwrap_note(['j1', 'j2'], np.array([2, 0]))
