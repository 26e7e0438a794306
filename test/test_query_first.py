"""nodes/query_first.py: how far behind its inputs the stream is, from their stamps, and
the queries taken ahead of an input only while the stream keeps up (issue 24). The node
answering a query ahead of a waiting burst, across processes, is in test_identifier_full
(test_a_query_is_answered_ahead_of_the_stream_backlog)."""

import pytest

from arm_dyn_id.nodes.query_first import QueryFirst, StreamLag

pytest.importorskip('rclpy')


class Clocks:
    """A wall clock and a monotonic one the test moves."""

    def __init__(self, wall=1000.0):
        self.wall, self.mono = wall, 0.0

    def advance(self, dt):
        self.wall += dt
        self.mono += dt


def lag(clocks, relax=0.01):
    return StreamLag(relax=relax, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_a_stream_that_keeps_up_is_never_behind_whatever_the_clocks_offset():
    c = Clocks(wall=1.7e9)
    s = lag(c)
    stamp = 5.0                 # the publisher's clock: another epoch
    for k in range(2000):       # 1 kHz, each input 0.2-0.4 ms of transport
        c.advance(1e-3)
        stamp += 1e-3
        assert s.behind(stamp - (0.0002 if k % 2 else 0.0004)) <= 0.0002 + 1e-9


def test_inputs_that_waited_show_how_long_and_the_floor_relearns_a_clock_step():
    c = Clocks()
    s = lag(c, relax=0.01)
    for k in range(100):
        c.advance(1e-3)
        s.behind(c.wall - 1e-4)             # keeping up: the floor is 0.1 ms
    # a backlog: 100 inputs stamped 1 ms apart over the last 0.1 s, taken in 10 ms
    first = c.wall - 0.1
    waits = []
    for k in range(100):
        c.advance(1e-4)
        waits.append(s.behind(first + k * 1e-3))
    assert waits[0] == pytest.approx(0.1, abs=3e-4)
    assert waits[-1] < 0.015 < 0.05 < waits[20]
    # the stamp clock steps back by 1 s (another publisher): behind at first, then the
    # floor rises 10 ms per s until it has the new offset
    behind = []
    for k in range(150_000):
        c.advance(1e-3)
        behind.append(s.behind(c.wall - 1.0001))
    assert behind[0] == pytest.approx(1.0, abs=1e-3)
    assert behind[-1] < 1e-6


class FakeHandle:
    """Stands in for an rclpy subscription handle: the queued messages, taken in order."""

    def __init__(self, messages):
        self.messages = list(messages)
        self.takes = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def take_message(self, _msg_type, _raw):
        self.takes += 1
        return (self.messages.pop(0), {}) if self.messages else None


class FakeSub:
    def __init__(self, messages):
        self.handle = FakeHandle(messages)


def test_queries_go_first_while_the_stream_keeps_up_and_wait_their_turn_when_behind():
    c = Clocks()
    answered = []
    gravity, dynamics = FakeSub(['g1', 'g2']), FakeSub(['d1'])
    first = QueryFirst(((gravity, answered.append), (dynamics, answered.append)),
                       limit=0.05, lag=lag(c))
    c.advance(1e-3)
    first.before_input(c.wall - 1e-4)
    assert answered == ['g1', 'g2', 'd1'] and first.answered == 3 and first.deferred == 0
    # nothing waiting: one empty take per subscription
    takes = gravity.handle.takes, dynamics.handle.takes
    c.advance(1e-3)
    first.before_input(c.wall - 1e-4)
    assert (gravity.handle.takes, dynamics.handle.takes) == (takes[0] + 1, takes[1] + 1)
    # the stream 0.2 s behind: the queries are left to the executor, in their turn
    gravity.handle.messages.append('g3')
    c.advance(1e-3)
    first.before_input(c.wall - 0.2)
    assert answered == ['g1', 'g2', 'd1'] and first.deferred == 1
    assert gravity.handle.messages == ['g3']
    # caught up again: first again
    c.advance(1e-3)
    first.before_input(c.wall - 1e-4)
    assert answered[-1] == 'g3' and first.answered == 4


def test_queries_that_come_during_an_input_are_taken_between_its_publishes():
    """A query that arrives while an input is worked on is answered at the next
    ``between`` (between the input's publishes), not after the whole input; while the
    stream is behind, ``between`` leaves it to the executor as ``before_input`` does."""
    c = Clocks()
    answered = []
    gravity, dynamics = FakeSub([]), FakeSub([])
    first = QueryFirst(((gravity, answered.append), (dynamics, answered.append)),
                       limit=0.05, lag=lag(c))
    c.advance(1e-3)
    first.before_input(c.wall - 1e-4)
    assert answered == []
    dynamics.handle.messages.append('d1')       # came during the residual
    first.between()
    assert answered == ['d1'] and first.answered == 1
    # behind: the input's between() takes nothing
    c.advance(1e-3)
    first.before_input(c.wall - 0.2)
    takes = gravity.handle.takes, dynamics.handle.takes
    gravity.handle.messages.append('g1')
    first.between()
    assert answered == ['d1'] and gravity.handle.messages == ['g1']
    assert (gravity.handle.takes, dynamics.handle.takes) == takes
    # a between() before any input takes nothing either
    fresh = QueryFirst(((FakeSub(['g2']), answered.append),), limit=0.05, lag=lag(c))
    fresh.between()
    assert answered == ['d1']
