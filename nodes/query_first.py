"""Queries answered ahead of a 1 kHz stream on the same thread, unless the stream is behind.

The identifier node answers its queries (``gravity_query``, ``dynamics_query``) on the
stream's thread: answered on a thread of their own they starved it (docs/identifier.md,
"Threads and executors"). The executor takes events in their order of arrival, so a query
that came while ``joint_states`` inputs were queued waited for all of them: on a loaded
machine p99 12-400 ms beside the stream (docs/benchmarks.md). :class:`QueryFirst` takes the
waiting queries itself before each input, so a query waits for one input's work at most
while the stream keeps up.

Answering first is not free when the node cannot keep up: a client asking in a loop then
gets 5-15 times more answers, and the stream, which must lose nothing, fell more than its
queue depth behind (3 of 4 loaded runs). So the queries go first only while the stream is
less than ``limit`` s behind its inputs (:class:`StreamLag`); beyond that they wait in
their turn again, as before, and the stream catches up.
"""

import time

from sensor_msgs.msg import JointState

#: how far behind its inputs the stream may be for queries to go first (s)
QUERY_FIRST_LIMIT = 0.05


class StreamLag:
    """How far behind its inputs a stream's consumer is, from their stamps alone.

    ``lag = wall clock - stamp`` of each input holds the clocks' offset plus the transport
    plus the time the input waited; the smallest lag seen lately (the floor) is the offset
    plus the transport, so ``lag - floor`` is the wait. The floor rises by ``relax`` s per
    s since it was last set, so a stamp clock that jumps or runs slow is learnt again. A
    stamp clock that runs fast (simulated time above real time) only lowers the floor:
    never behind, queries go first.
    """

    def __init__(self, relax=0.01, clock=time.time, monotonic=time.monotonic):
        self.relax = float(relax)
        self._clock, self._monotonic = clock, monotonic
        self._floor = None          # (lag, monotonic time it was set)

    def behind(self, stamp):
        """Seconds the input stamped ``stamp`` (s) waited beyond the floor (>= 0)."""
        lag = self._clock() - stamp
        now = self._monotonic()
        if self._floor is None:
            self._floor = (lag, now)
            return 0.0
        floor = self._floor[0] + self.relax * (now - self._floor[1])
        if lag <= floor:
            self._floor = (lag, now)
            return 0.0
        return lag - floor


class QueryFirst:
    """Take and answer the queries waiting on ``subscriptions`` (pairs of an rclpy
    ``JointState`` subscription and its callback) before a stream input, unless the
    stream is more than ``limit`` s behind. Call from the thread that spins them.

    The executor's own event for a message taken here finds nothing and calls nothing.
    :meth:`between` takes them again between an input's publishes, so that a query waits
    for one or two publishes (~85 µs each), not an input's four: an empty take costs ~4.5 µs per
    subscription, and three more per input lowered the p99 beside the 1 kHz stream from
    0.94 to 0.82 ms (median of 7 runs each, docs/benchmarks.md).
    """

    def __init__(self, subscriptions, limit=QUERY_FIRST_LIMIT, lag=None):
        self.subscriptions = tuple(subscriptions)
        self.limit = float(limit)
        self.lag = lag if lag is not None else StreamLag()
        self.answered = 0           # queries answered ahead of the stream
        self.deferred = 0           # inputs after which queries waited their turn
        self._first = False         # whether the queries go first during this input

    def before_input(self, stamp):
        """Answer the waiting queries ahead of the input stamped ``stamp`` (s)."""
        self._first = self.lag.behind(stamp) <= self.limit
        if not self._first:
            self.deferred += 1
            return
        self.between()

    def between(self):
        """Answer the queries that came while the current input is worked on, unless
        :meth:`before_input` found the stream behind."""
        if not self._first:
            return
        for sub, answer in self.subscriptions:
            with sub.handle:
                taken = sub.handle.take_message(JointState, False)
                while taken is not None:
                    self.answered += 1
                    answer(taken[0])
                    taken = sub.handle.take_message(JointState, False)
