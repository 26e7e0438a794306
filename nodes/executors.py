"""How the nodes are spun: :func:`run_node` is every node's ``main()``.

The 1 kHz subscriptions need ``rclpy.experimental.EventsExecutor`` (measured: the
single-threaded executor loses 0.2-1 % at 1 kHz, the multi-threaded one over half).
With the rclpy 9 (Kilted) wheels used here, however, the EventsExecutor does not
answer services, fires timers irregularly and its ``spin()`` ignores SIGINT. So a
node keeps its hot path on an EventsExecutor spun in short slices, and puts its
services and timers on a companion node (``<name>_commands``, same namespace)
spun by an ordinary executor in a background thread. The services keep the
owning node's names (``/<node>/<service>``).

Shutdown (docs/safety.md): rclpy's own SIGINT handler shuts the context down at
once and then raises ``KeyboardInterrupt`` wherever the main thread happens to
be, inside a subscription callback or in ``destroy_node``. Publishes after that
fail ("publisher's context is invalid"), the EventsExecutor logs the exception
as FATAL, and a second SIGINT (``ros2 launch`` forwards one after the terminal's)
kills the process with -2. So :func:`run_node` installs its own SIGINT and
SIGTERM handlers (:class:`StopRequest`): a signal only *asks* to stop; the spin
loop notices within ``period`` s, the executors stop, the node's ``shutdown()``
runs (the recorder closes its bag) while the context is still valid, then the
context is shut down (the DDS participant leaves the graph) and the process ends at
once, without destroying the nodes: ``rcl_node_fini`` hung, holding the interpreter,
in about 1 of 40 SIGINTs to a group of our nodes. Further signals while that runs
are ignored; exit code 0.
"""

import faulthandler
import os
import signal
import threading
import time
import traceback

import rclpy
from rclpy.exceptions import ParameterException
from rclpy.executors import (
    ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor)
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from arm_dyn_id.errors import ConfigError, URDFError
from arm_dyn_id.process_exit import end_process


def create_command_node(node):
    """The companion node that carries ``node``'s services and timers."""
    return rclpy.create_node(f'{node.get_name()}_commands', namespace=node.get_namespace(),
                             context=node.context, use_global_arguments=False,
                             start_parameter_services=False)


def service_name(node, name):
    """Absolute name of ``~/name`` of ``node`` (for services on the companion)."""
    return f'{node.get_fully_qualified_name()}/{name}'


def shutting_down(context, wait=1.0):
    """Whether ``context`` is shutting down, allowing it ``wait`` s to say so.

    At SIGINT a take can fail ('Unable to convert call argument') while the signal
    handler is still shutting the context down: ``context.ok()`` read at once can
    still be True.
    """
    deadline = time.monotonic() + wait
    while context.ok():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def try_publish(node, publisher, msg):
    """Publish on a 1 kHz path; a publish that DDS refuses is counted, not raised.

    Fast DDS refuses a reliable write when a subscriber has not acknowledged the
    history for longer than its blocking time (``cannot publish data``): a slow
    listener must not stop the recorder or the gravity stream. The count per topic is
    in ``node.publish_failures`` (shown in diagnostics), with a throttled warning.
    Returns whether the message went out.
    """
    try:
        publisher.publish(msg)
        return True
    except RuntimeError as exc:     # rclpy's RCLError
        if not node.context.ok():
            return False            # shutting down
        failures = node.__dict__.setdefault('publish_failures', {})
        try:
            topic = publisher.topic_name
        except RuntimeError:        # the publisher itself is gone
            topic = '(destroyed publisher)'
        failures[topic] = failures.get(topic, 0) + 1
        node.get_logger().warning(
            f'could not publish on {topic} ({failures[topic]} so far): {exc}; a subscriber '
            'is not keeping up with the reliable stream', throttle_duration_sec=5.0)
        return False


def publish_diagnostics(node, status, values=None):
    """Publish one DiagnosticStatus on ``node.diag_pub``, stamped with the node clock;
    ``values`` (a mapping) become its key/value pairs (str of each value)."""
    from diagnostic_msgs.msg import DiagnosticArray, KeyValue
    if values is not None:
        status.values = [KeyValue(key=str(k), value=str(v)) for k, v in values.items()]
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = node.get_clock().now().to_msg()
    node.diag_pub.publish(msg)


# From the first SIGINT / SIGTERM (or stop of any kind): print every stack if the process
# still runs after STALL_DUMP s, and end it, stacks printed, after EXIT_BUDGET s should the
# context's shutdown hang. ros2 launch sends SIGTERM 5 s after SIGINT and SIGKILL 10 s after.
STALL_DUMP = 6.0
EXIT_BUDGET = 8.0


class StopRequest:
    """SIGINT / SIGTERM as a request to stop: a flag, never an exception in a callback.

    ``install()`` replaces the handlers of both signals (main thread only); every
    signal after the first is ignored, so a node that is already closing its bag
    is not interrupted by the second SIGINT that ``ros2 launch`` sends.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        # A plain flag, not a threading.Event: Event.set takes a lock, and a second signal
        # whose handler runs while the first handler is inside Event.set (Python runs
        # handlers between any two bytecodes of the main thread) waited for that lock
        # forever: a double SIGINT once hung identifier_node (CI, test_shutdown). Reading
        # and writing one attribute is atomic under the interpreter lock.
        self._requested = False
        self.signal = None
        self.first = None           # monotonic time of the first stop request
        self._dump_lock = threading.Lock()
        self._dump_armed = False

    def _handle(self, signum, frame):
        if self.signal is None:
            self.signal = signum
        self._requested = True

    def install(self):
        """Take SIGINT and SIGTERM over (rclpy's handlers must be off: SignalHandlerOptions.NO).

        A watchdog thread also hears each signal at C level, through the interpreter's
        wakeup fd: should the main thread be stuck where the Python handler cannot run
        (in a middleware call, or in a callback that never returns), every thread's
        stack is printed :data:`STALL_DUMP` s after the signal. One Ctrl-C in 140 under
        ``ros2 launch`` left excitation_node hanging with nothing in its log until
        launch's SIGKILL 10 s later; the next one says where it waits.
        """
        for sig in self.SIGNALS:
            signal.signal(sig, self._handle)
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(read_end,), name='stop-watchdog',
                         daemon=True).start()
        return self

    def _watch(self, read_end):
        try:
            os.read(read_end, 1)        # the first SIGINT / SIGTERM
        except OSError:
            return
        self.arm_stall_dump()

    def arm_stall_dump(self):
        """From the first stop request on, print every thread's stack if the process
        still runs :data:`STALL_DUMP` s later (once; the process goes on)."""
        with self._dump_lock:
            if self._dump_armed:
                return
            self._dump_armed = True
            self.first = time.monotonic()
        faulthandler.dump_traceback_later(STALL_DUMP)

    def remaining(self, budget):
        """Seconds left of ``budget`` s counted from the first stop request (at least 1)."""
        first = self.first if self.first is not None else time.monotonic()
        return max(1.0, budget - (time.monotonic() - first))

    def is_set(self):
        return self._requested

    def ignore(self):
        """Ignore both signals from now on: the process is about to exit.

        Python's finalisation resets handlers it installed to the default action
        (but leaves SIG_IGN alone); on a loaded machine the finalisation of a node
        took over 5 s, and ``ros2 launch``'s SIGTERM then killed it (exit code -15).
        """
        for sig in self.SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    def set(self):
        self._requested = True


def spin_split(node, commands, threads=2, period=0.2, stop=None):
    """Spin ``node`` on an EventsExecutor and ``commands`` in a background thread.

    Returns when ``stop`` (a :class:`StopRequest` or threading.Event) is set or the
    context shuts down; the caller ends the nodes (run_node).
    """
    stop = stop if stop is not None else threading.Event()
    commands_executor = MultiThreadedExecutor(num_threads=threads, context=node.context)
    commands_executor.add_node(commands)

    closing = threading.Event()

    def spin_commands():
        try:
            commands_executor.spin()
        except (ExternalShutdownException, RuntimeError, ValueError):
            # the context shut down under a wait (SIGINT): the main thread reports; or the
            # executor was shut down under a callback that still triggers its guard
            # condition (rclpy's InvalidHandle 'destruction was requested', a RuntimeError)
            if not (closing.is_set() or shutting_down(node.context)):
                raise
    thread = threading.Thread(target=spin_commands, daemon=True,
                              name=f'{node.get_name()}-commands')
    thread.start()
    executor = EventsExecutor(context=node.context)
    executor.add_node(node)
    try:
        # spin_once in slices: EventsExecutor.spin() stays in C++ and never sees SIGINT
        while node.context.ok() and not stop.is_set():
            try:
                executor.spin_once(timeout_sec=period)
            except RuntimeError:
                # a take interrupted by the shutdown of the context (SIGINT)
                if not shutting_down(node.context):
                    raise
                break
    finally:
        closing.set()
        # an EventsExecutor left running when the process exits aborts it
        # ("terminate called without an active exception"); after a burst of 1 kHz
        # traffic on a loaded machine 1 s was not always enough
        for ex in (executor, commands_executor):
            if not ex.shutdown(timeout_sec=5.0):
                node.get_logger().warning('executor did not shut down within 5 s')
        thread.join(5.0)


def spin(node, stop, period=0.1):
    """Spin ``node`` on a SingleThreadedExecutor until ``stop`` is set; returns the executor.

    ``spin_once`` in slices of ``period`` s: with rclpy's signal handlers off, a
    wait is not woken by SIGINT, so the loop looks at ``stop`` at least this often.
    """
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    start = getattr(node, 'start', None)
    if start is not None:
        start()
    while node.context.ok() and not stop.is_set():
        executor.spin_once(timeout_sec=period)
    return executor


def parameter_error(exc):
    """One line for an rclpy parameter exception: which parameter, what was wrong.

    rclpy raises them from ``declare_parameter`` when a value given on the command
    line or in a parameter file has the wrong type (``gravity:=earth``) or lies
    outside the declared range (``payload_mass:=-1``).
    """
    # rclpy's text is '<what was wrong>: <parameter name(s)>'
    text, _, name = str(exc).rpartition(': ')
    if not text:
        text, name = name, ''
    prefix = f'parameter {name}: ' if name else ''
    return (f'{prefix}{text}. Fix it on the command line (-p {name or "name"}:=...) or in '
            f'the parameter / config file')


def exit_process(code):
    """End the process now with ``code``, without Python's finalisation
    (:func:`arm_dyn_id.process_exit.end_process`, without the exit handlers).

    Called once the context is shut down (the DDS participant is gone, logging
    finished, the bag closed). Tearing down the
    interpreter's modules (NumPy, MuJoCo, pinocchio, rclpy) took about 85 % of a
    node's exit time (0.45 of 0.5 s on a quiet machine); with four nodes ending
    together on a loaded 2-core machine that passed ``ros2 launch``'s 5 s SIGINT
    timeout. Threads still running (a fit in progress) end with the process. Under
    coverage the normal exit is kept so that its data is saved (``code`` is returned).
    """
    return end_process(code, exit_handlers=False)


def run_node(node_class, args=None, split=False, threads=2, exit=True):
    """``main()`` of every node: init, spin, clean shutdown; returns the exit code.

    ``node_class()`` builds the node; its class attribute ``node_name`` names the
    logger of a start-up failure. ``split``: the node has a ``commands`` companion
    and is spun by :func:`spin_split` (1 kHz paths on the EventsExecutor);
    otherwise a SingleThreadedExecutor spins it (:func:`spin`), and a ``start()``
    method, if the node has one, is called once the executor holds the node. A
    ``shutdown()`` method, if any, runs after the executors stopped and before the
    nodes are destroyed, while the context is still valid.

    Exit codes, the same for every node: 0 on a normal end, Ctrl-C (SIGINT, also
    to the whole process group as ``ros2 launch`` sends it), SIGTERM or an
    external shutdown; 2 for a configuration error refused at start-up
    (ConfigError, URDFError, a parameter of the wrong type or out of its range:
    one FATAL line naming the parameter, no traceback); 1 for an unexpected crash
    (FATAL line and traceback). A signal during start-up ends the node as soon as
    it is built. With ``exit`` (the default) it ends the process with that code
    (:func:`exit_process`, no interpreter finalisation); otherwise it returns the
    code, and SIGINT and SIGTERM stay ignored (see :meth:`StopRequest.ignore`): call
    it as the last thing of a process.
    """
    stop = StopRequest().install()
    # `kill -USR1 <pid>` prints every thread's Python stack (a node that seems stuck)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    name = getattr(node_class, 'node_name', node_class.__name__)
    node = None
    executor = None
    code = 0
    failure = None      # keeps a half-built node alive (see below)
    try:
        node = node_class()
        if stop.is_set():
            pass        # a signal arrived while the node was being built
        elif split:
            spin_split(node, node.commands, threads=threads, stop=stop)
        else:
            executor = spin(node, stop)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (ConfigError, URDFError) as exc:
        # a configuration error is reported, not a traceback
        failure = exc
        rclpy.logging.get_logger(name).fatal(str(exc))
        code = 2
    except ParameterException as exc:
        failure = exc
        rclpy.logging.get_logger(name).fatal(parameter_error(exc))
        code = 2
    except Exception as exc:    # noqa: BLE001 - reported once, with its exit code
        failure = exc
        context = node.context if node is not None else rclpy.utilities.get_default_context()
        # a take interrupted by the shutdown of the context is a normal end
        if not (isinstance(exc, RuntimeError) and shutting_down(context)):
            rclpy.logging.get_logger(name).fatal(
                f'crashed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}')
            code = 1
    finally:
        stop.set()      # from here on, signals are ignored (the handler only sets the flag)
        # a shutdown that hangs prints every thread's stack (STALL_DUMP s after the signal
        # or from here), so that any occurrence says where it waits
        stop.arm_stall_dump()
        if executor is not None:
            # stop the executor before its node goes: destroying a node that an executor
            # may still be waiting on crashed the process now and then at Ctrl-C
            executor.shutdown(timeout_sec=5.0)
        try:
            shutdown = getattr(node, 'shutdown', None)
            if shutdown is not None:
                shutdown()          # the recorder closes its bag: the context is valid
        finally:
            if not exit:
                _destroy_nodes(node if node is not None else _half_built_node(failure))
            else:
                # A node whose constructor raised is not destroyed either: the context's
                # shutdown below would (it tracks every node), and destroying such a node
                # some 20 ms after it was created crashed twice in CI in hundreds of
                # start-up refusals (SIGSEGV in rcl_node_fini, test_excitation_limits).
                # Its handles go with the process, as a finished node's would.
                # the process ends right after: should the context's shutdown hang in
                # the middleware, print every stack and end (exit code 1), EXIT_BUDGET s
                # after the stop began (before launch's SIGKILL)
                faulthandler.dump_traceback_later(stop.remaining(EXIT_BUDGET), exit=True)
                half_built = _half_built_node(failure) if node is None else None
                for made in (half_built, getattr(half_built, 'commands', None)):
                    if made is not None:        # and its companion, if it was made
                        made.context.untrack_node(made)
            # the DDS participant leaves the graph here: peers saw the endpoints of a
            # node ended this way go within 0.05 s (20 s, its lease, without it)
            rclpy.try_shutdown()
            stop.ignore()
            faulthandler.cancel_dump_traceback_later()
    if exit:
        # run_node destroyed no node itself (the context's shutdown above destroyed the
        # nodes it tracks, under EXIT_BUDGET's dump): an explicit destroy_node hung with
        # the interpreter held in about 1 of 40 SIGINTs to a process group of our nodes
        # (test_shutdown, excitation_node), and the process ends now anyway. A node whose
        # constructor raised, untracked above, is held by ``failure``'s traceback until
        # the process ends: left to the garbage collector, its rclpy handles (clocks,
        # time source, parameter services) were freed in no set order, and one start-up
        # refusal in CI ended with SIGSEGV instead of exit code 2.
        return exit_process(code)
    del failure
    return code


def _half_built_node(failure):
    """The node whose constructor raised ``failure`` (found in its traceback), or None."""
    tb = failure.__traceback__ if failure is not None else None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get('self')
        if isinstance(candidate, Node):
            return candidate
        tb = tb.tb_next
    return None


def _destroy_nodes(node):
    """Destroy ``node`` and its ``commands`` companion (a run_node that returns)."""
    if node is None:
        return
    commands = getattr(node, 'commands', None)
    if commands is not None:
        commands.destroy_node()
    node.destroy_node()
