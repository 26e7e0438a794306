"""The 1 kHz streams' JointState bytes (nodes/messages.py) are what rclpy's own
serialisation gives (same layout, same message read back), for any joint names,
frame_id, stamp and values (NaN and inf included), with and without velocity, and bad
lengths are refused."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip('rclpy')

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from arm_dyn_id.nodes.messages import StreamMessage, joint_state  # noqa: E402

# no NUL: ROS strings are C strings (rclpy itself cuts them there)
text_st = st.text(st.characters(blacklist_characters='\x00', blacklist_categories=('Cs',)),
                  max_size=12)
names_st = st.lists(text_st, min_size=0, max_size=9)
value_st = st.floats(allow_nan=True, allow_infinity=True, width=64)


def fields(msg):
    """A JointState's content, NaN-safe (bytes of the float arrays)."""
    return (msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id,
            list(msg.name), *(np.asarray(getattr(msg, f), dtype=float).tobytes()
                              for f in ('position', 'velocity', 'effort')))


def header(sec, nanosec, frame_id):
    h = Header()
    h.stamp.sec, h.stamp.nanosec, h.frame_id = sec, nanosec, frame_id
    return h


@settings(max_examples=150, deadline=None)
@given(names=names_st, frame_id=text_st,
       sec=st.integers(-2**31, 2**31 - 1), nanosec=st.integers(0, 999_999_999),
       with_velocity=st.booleans(), data=st.data())
def test_bytes_equal_rclpy_serialisation(names, frame_id, sec, nanosec, with_velocity, data):
    n = len(names)
    arrays = [np.array(data.draw(st.lists(value_st, min_size=n, max_size=n)), dtype=float)
              for _ in range(3)]
    velocity = arrays[2] if with_velocity else None
    h = header(sec, nanosec, frame_id)
    stream = StreamMessage()
    got = stream.fill(h, names, arrays[0], arrays[1], velocity)
    reference = serialize_message(joint_state(h, names, arrays[0], arrays[1], velocity))
    # the same layout (the alignment padding holds whatever the serialiser's buffer held:
    # rclpy's own bytes differ there from one call to the next), the same message
    assert len(got) == len(reference)
    assert fields(deserialize_message(got, JointState)) == \
        fields(deserialize_message(reference, JointState))
    # the next message of the stream reuses the template: other stamp and values
    again = stream.fill(header(sec // 2, nanosec // 3, frame_id), names, arrays[1],
                        arrays[0], velocity)
    msg = deserialize_message(again, JointState)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (sec // 2, nanosec // 3)
    assert list(msg.name) == names and msg.header.frame_id == frame_id
    np.testing.assert_array_equal(msg.position, arrays[1])
    np.testing.assert_array_equal(msg.effort, arrays[0])
    assert len(msg.velocity) == (n if with_velocity else 0)


def test_new_names_frame_ids_and_wrong_lengths():
    stream = StreamMessage()
    q = np.array([0.1, -0.2, math.nan])
    first = deserialize_message(stream.fill(header(1, 2, ''), ['a', 'b', 'c'], q, q),
                                JointState)
    other = deserialize_message(stream.fill(header(1, 2, 'base'), ['x', 'y'], q[:2], q[:2],
                                            q[:2]), JointState)
    assert list(first.name) == ['a', 'b', 'c'] and list(other.name) == ['x', 'y']
    assert other.header.frame_id == 'base' and list(other.velocity) == [0.1, -0.2]
    with pytest.raises(ValueError, match='2 joints'):
        stream.fill(header(1, 2, ''), ['x', 'y'], q, q[:2])
    # frame_ids that change at every message do not grow the templates without bound
    names = ['x', 'y']
    for k in range(50):
        stream.fill(header(k, 0, f'frame-{k}'), names, q[:2], q[:2])
    assert len(stream._layouts) <= 8
