"""Excitation node: drives the arm through an excitation plan, safely.

Loads a plan (``plan_file``) or designs one at start-up from the arm config
(``config_file``); without a usable plan it exits with code 2. ``~/start`` approaches
the plan's first pose slowly from the measured position, then runs the plan, either as
short ``JointTrajectory`` windows on ``<controller>/joint_trajectory`` (each carries
``lookahead`` s of plan and then its own stop ramp to rest, and replaces the previous
one from its start: if windows stop arriving the arm brakes by itself) or as position
commands streamed on ``<controller>/commands``. Segment markers go to
``excitation_segments`` (docs/interfaces.md). ``~/stop`` and the watchdog (joint states
missing, tracking error, the node itself too late to extend the look-ahead) brake the
commanded motion to rest within the acceleration limits (arm_dyn_id/excitation/
stopping.py) and do not resume by themselves. Every command is checked against the
configured limits before it is published. All timing uses the node clock
(``use_sim_time`` works). Under ``use_sim_time`` the joint-state watchdog measures the
age of the last ``joint_states`` in simulated time (a simulator that pauses, e.g. in
lockstep with a busy recorder, pauses its arm too) and, on the steady clock, holds when
the simulated clock itself has stood still for ``clock_stall_timeout`` s (the simulator
is gone). The node takes the newest ``joint_states`` when it needs it (each tick, each
watchdog check every 20 ms of the steady clock, ``~/start``; nodes/polled.py) and ages
count from its arrival, so a busy spell of this node is not silence of the arm; a stale
reading holds the arm only when the next check, 20 ms later, still finds it stale.
"""

import json
import time

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError
from arm_dyn_id.excitation.plans import START_TOLERANCE, Plan, check_limits, check_point
from arm_dyn_id.excitation.stopping import PlanStream, held_time_rate
from arm_dyn_id.nodes.executors import publish_diagnostics, run_node
from arm_dyn_id.nodes.polled import PolledSubscription
from arm_dyn_id.nodes.qos import MARKER_QOS
from arm_dyn_id.nodes.params import Param, arm_config, declare_arm_parameters, declare_parameters

NODE_NAME = 'excitation_node'
#: How ~/start's refusal begins while the node has not heard the arm (or, under
#: use_sim_time, the simulated clock) recently: a caller may ask again once it is ready.
NOT_READY = 'not ready'
_CORE_ERRORS = (ConfigError, DataError, JointNameError, URDFError, OSError, ValueError)


PARAMETERS = (
    Param('plan_file', '', 'plan YAML from `arm-dyn-id design`; empty: design at start-up',
          read_only=True),
    Param('controller', 'arm_controller', 'controller namespace of the command topics',
          read_only=True),
    Param('output', 'trajectory', 'trajectory (JointTrajectory) or commands (streamed '
          'Float64MultiArray positions)', read_only=True),
    Param('command_rate', 100.0, 'command stream and progress rate (Hz), > 0', read_only=True),
    Param('trajectory_point_period', 0.01, 'spacing of JointTrajectory points (s), > 0',
          read_only=True),
    Param('lookahead', 0.25, 'plan each JointTrajectory window carries before its stop ramp, '
          'in wall-clock time (s; times the simulator\'s speed-up under use_sim_time), >= '
          'trajectory_point_period; a new window is sent when half is used', read_only=True),
    Param('stop_acceleration', 0.0, 'braking rate of a stop (rad/s²), capped at (and raised '
          'to, where a position limit needs it) the acceleration limits; <= 0: the limits',
          read_only=True),
    Param('start_delay', 0.2, 'the run starts this long after ~/start (s, >= 0): the '
          'trajectory is stamped with that future start time so that the controller and '
          'this node share it however late the message arrives'),
    Param('approach_speed', 0.2, 'peak speed of the approach to the plan start (rad/s), > 0'),
    Param('approach_acceleration', 0.5, 'peak acceleration of the approach (rad/s²), > 0'),
    Param('joint_state_timeout', 0.5, 'watchdog: hold when joint_states are older (s), > 0; '
          'under use_sim_time in simulated seconds'),
    Param('clock_stall_timeout', 10.0, 'watchdog under use_sim_time: hold when neither '
          'joint_states nor the simulated clock moved for this many wall seconds (the '
          'simulator is gone; one paused for a busy recorder is waited for), > 0'),
    Param('tracking_error_threshold', 0.1, 'watchdog: hold when |measured - commanded| '
          'exceeds this (rad), > 0'),
    Param('hold_time', 0.02, 'time_from_start of a hold trajectory point (s), >= 0'),
    Param('plan_kind', 'reciprocating', 'plan designed at start-up: reciprocating or fourier'),
    Param('quick', False, 'design the short plan (about 3 min)'),
    Param('optimise', False, 'optimise the static poses at start-up (takes a while)'),
    Param('optimiser_budget', 1000, 'objective evaluations of the start-up optimisation'),
    Param('seed', 0, 'random seed of the start-up design'),
    Param('speed', float(np.deg2rad(3.0)), 'sweep speed (rad/s), > 0'),
    Param('sweep_range', 0.0, 'angle swept per pose (rad); 0: default (1.2, quick 0.5)'),
    Param('settle_time', -1.0, 'hold before each sweep (s); < 0: default (2, quick 1)'),
)


def _stamp(seconds):
    """builtin_interfaces/Time of a node-clock time in seconds."""
    sec, nanosec = divmod(int(round(seconds * 1e9)), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def _duration(seconds):
    """builtin_interfaces/Duration; rounded to the nanosecond as a whole, so that a time
    just below a second (1.9999999999) does not come out as 1 s."""
    sec, nanosec = divmod(int(round(seconds * 1e9)), 1_000_000_000)
    return Duration(sec=sec, nanosec=nanosec)


def design_plan(config, kind='reciprocating', quick=False, optimise=False, budget=1000,
                seed=0, speed=None, sweep_range=None, settle_time=None):
    """The plan the node designs at start-up when no plan file is given (core calls)."""
    from arm_dyn_id.excitation.collision import ClearanceChecker
    from arm_dyn_id.excitation.plans import DEFAULT_SPEED, reciprocating_plan
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.excitation.design import design_fourier, design_poses
    robot = RobotModel.from_config(config)
    checker = ClearanceChecker.from_config(config)
    rng = np.random.default_rng(seed)
    if kind == 'fourier':
        return design_fourier(robot, config, 'hybrid', budget, rng, quick=quick, checker=checker)
    if kind != 'reciprocating':
        raise ConfigError(f'parameter plan_kind = {kind!r} must be reciprocating or fourier')
    poses = None
    if optimise:
        poses, _ = design_poses(robot, config, 'hybrid', budget, rng, quick=quick,
                                sweep_range=sweep_range, checker=checker)
    return reciprocating_plan(robot, config, poses=poses, quick=quick,
                              speed=DEFAULT_SPEED if speed is None else speed,
                              sweep_range=sweep_range, settle_time=settle_time, checker=checker)


class ExcitationNode(Node):
    """Runs excitation plans on a position-controlled arm (see the module docstring)."""

    node_name = NODE_NAME

    def __init__(self):
        super().__init__(NODE_NAME)
        self.config = None
        self.load_error = None
        declare_arm_parameters(self)
        try:
            self.config = arm_config(self, NODE_NAME)
        except _CORE_ERRORS as exc:
            raise ConfigError(f'no plan to run: {exc}') from exc
        declare_parameters(self, PARAMETERS, self.config)
        p = self._param
        self.controller = p('controller').rstrip('/')
        self.output = p('output')
        self.plan = None
        self.state = 'idle'
        self.reason = ''
        self.run_plan = None
        self.stream = None
        self.t0 = None
        self.t_rest = None
        self.next_segment = 0
        self.last_command = None        # (node time s, q)
        self.q_meas = None
        self.js_node_time = None
        self.js_steady_time = None
        self.js_receipt_time = None     # node clock at the last joint_states
        self.stale_once = False         # the watchdog found joint_states stale once
        self.sim_time = bool(self.get_parameter('use_sim_time').value)
        self.check = JointStateCheck(self.config.joints)
        self.rejected = {}      # joint_states rejection reason -> count
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._load()
        if self.plan is None:
            # nothing to do: say why and end (exit code 2) rather than idle
            raise ConfigError(f'no plan to run: {self.load_error}')

        self.marker_pub = self.create_publisher(String, 'excitation_segments', MARKER_QOS)
        self.traj_pub = self.create_publisher(
            JointTrajectory, f'{self.controller}/joint_trajectory', 10)
        self.cmd_pub = self.create_publisher(Float64MultiArray, f'{self.controller}/commands', 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        # the newest joint state, taken at the tick, the watchdog and ~/start
        # (nodes/polled.py): a callback per 1 kHz message was most of this node's work
        # the newest state only, best effort: a reliable reader is given its samples in
        # order, so one lost on a busy machine held every newer one back until the writer
        # repaired it (the full demo: states up to 1.8 s old at the tick)
        self.states = PolledSubscription(
            self, 'states', 'joint_states', JointState,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.create_service(Trigger, '~/start', self._on_start)
        self.create_service(Trigger, '~/stop', self._on_stop)
        rate = p('command_rate')
        self.tick_timer = self.create_timer(1.0 / rate, self._tick)          # node clock
        self.watchdog_timer = self.create_timer(0.02, self._watchdog, clock=self._steady)
        self.diag_timer = self.create_timer(1.0, self._publish_diagnostics, clock=self._steady)
        # node-clock seconds per wall second (> 1 with a simulator faster than real time)
        self.time_rate = 1.0
        self._rate_probe = None
        if self.get_parameter('use_sim_time').value:
            self.rate_timer = self.create_timer(0.5, self._measure_time_rate,
                                                clock=self._steady)
        self.get_logger().info(
            f'plan {self.plan.name!r} ({self.plan.kind}) ready: {self.plan.duration:.1f} s, '
            f'{len(self.plan.segments)} segments; output {self.output} on '
            f'{self.controller}/; call ~/start')

    # parameters ---------------------------------------------------------------
    def _param(self, name):
        """A parameter's value: given to the node, else the config file's, else the default
        (nodes/params.py); the writable ones may change at run time."""
        return self.get_parameter(name).value

    def _load(self):
        p = self._param
        try:
            if self.output not in ('trajectory', 'commands'):
                raise ConfigError(f'parameter output = {self.output!r} must be trajectory or '
                                  'commands')
            for name in ('command_rate', 'trajectory_point_period', 'approach_speed',
                         'approach_acceleration', 'joint_state_timeout',
                         'tracking_error_threshold', 'speed', 'lookahead',
                         'clock_stall_timeout'):
                if not p(name) > 0:
                    raise ConfigError(f'parameter {name} = {p(name)} must be > 0')
            if not p('start_delay') >= 0:
                raise ConfigError(f'parameter start_delay = {p("start_delay")} must be >= 0')
            if not p('lookahead') >= p('trajectory_point_period'):
                raise ConfigError(f'parameter lookahead = {p("lookahead")} s must be at least '
                                  f'trajectory_point_period = {p("trajectory_point_period")} s')
            if p('plan_file'):
                plan = Plan.from_yaml(p('plan_file'))
            else:
                self.get_logger().info('no plan_file: designing a plan from the config')
                plan = design_plan(
                    self.config, p('plan_kind'), p('quick'), p('optimise'),
                    int(p('optimiser_budget')), int(p('seed')), p('speed'),
                    p('sweep_range') if p('sweep_range') > 0 else None,
                    p('settle_time') if p('settle_time') >= 0 else None)
            check_limits(plan, self.config)
            self.plan = plan
        except _CORE_ERRORS as exc:
            self.load_error = str(exc)

    # inputs ---------------------------------------------------------------------
    def _take_states(self):
        """Take the waiting joint_states; the newest is the arm's state."""
        taken = self.states.take_newest()
        if taken is not None:
            data, age = taken
            self._on_joint_states(deserialize_message(data, JointState), age)

    def _on_joint_states(self, msg, age=0.0):
        """The newest joint_states message, which arrived ``age`` s ago (wall time)."""
        sample = self.check.check(msg.name, position=msg.position)
        if isinstance(sample, Rejection):
            # not a measurement: the watchdog holds the arm if no usable one follows
            self.rejected[sample.reason] = self.rejected.get(sample.reason, 0) + 1
            self.get_logger().warn(f'joint_states rejected ({sample.reason}): {sample.detail}; '
                                   f'{self.rejected[sample.reason]} so far',
                                   throttle_duration_sec=5.0)
            return
        self.q_meas = sample.position
        # when the arm measured it (header stamp; receipt time if the driver leaves it 0):
        # the tracking error compares with the plan at that instant, not at processing
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.js_node_time = stamp if stamp > 0 else self._now()
        first = self.js_steady_time is None
        self.js_steady_time = time.monotonic() - age
        # node clock when taken (a simulated clock's rate is no measure of a wall age)
        self.js_receipt_time = self._now()
        self.stale_once = False
        if first:       # say 'ready' now rather than at the next 1 s diagnostics tick
            self._publish_diagnostics()

    def _now(self):
        return self.get_clock().now().nanoseconds * 1e-9

    def _has_recent_state(self):
        """True while joint_states with every configured joint arrive (what ~/start needs;
        the ages as the watchdog measures them)."""
        return self.q_meas is not None and self.js_steady_time is not None and \
            self._stale_states() is None

    def _stale_states(self):
        """Why the last joint_states are too old, or None. Wall time: their age on the
        steady clock. Under ``use_sim_time``: their age in simulated time (a paused
        simulator pauses its arm too), or the steady age once the simulated clock stood
        still too for ``clock_stall_timeout`` s."""
        timeout = self._param('joint_state_timeout')
        wall_age = time.monotonic() - (self.js_steady_time or 0.0)
        if not self.sim_time:
            if wall_age > timeout:
                return (f'joint_states stopped arriving (last {wall_age:.3f} s ago, '
                        f'joint_state_timeout {timeout} s)')
            return None
        if self._now() <= 0.0:
            # no /clock heard yet: a plan anchored now would start at time 0, seconds
            # behind the arm's stamps (the quick demo's arm ran 11 s ahead and was
            # stopped at once for a tracking error)
            return ('no simulated time yet (use_sim_time, /clock not heard): is the '
                    'simulator publishing /clock?')
        sim_age = self._now() - (self.js_receipt_time or 0.0)
        stall = self._param('clock_stall_timeout')
        if sim_age > timeout:
            return (f'joint_states stopped arriving (last {sim_age:.3f} s of simulated '
                    f'time ago, joint_state_timeout {timeout} s)')
        if wall_age > stall:
            return (f'joint_states and the simulated clock stood still for {wall_age:.1f} s '
                    f'(clock_stall_timeout {stall} s): the simulator is gone')
        return None

    # services -------------------------------------------------------------------
    def _on_start(self, request, response):
        response.success = False
        self._take_states()
        if self.state in ('approach', 'running'):
            response.message = 'already running; call ~/stop first'
            return response
        if self.state == 'stopping':
            response.message = (f'still braking to rest (until t = {self.t_rest:.3f} s); '
                                'call ~/start again once stopped')
            return response
        if not self._has_recent_state():
            why = None if self.q_meas is None else self._stale_states()
            response.message = (f'{NOT_READY}: ' + (
                'no recent joint_states with every configured joint; is the arm driver '
                'running?' if why is None or why.startswith('joint_states') else why))
            return response
        p = self._param
        try:
            run = self.plan.with_approach(self.q_meas, self.config, p('approach_speed'),
                                          p('approach_acceleration'))
            check_limits(run, self.config)
        except _CORE_ERRORS as exc:
            response.message = f'refused: {exc}'
            self.get_logger().error(response.message)
            return response
        self.run_plan = run
        self.t0 = self._now() + p('start_delay')
        stop_acc = p('stop_acceleration')
        self.stream = PlanStream(run, self.t0, self.config, p('trajectory_point_period'),
                                 p('lookahead') * self.time_rate,
                                 stop_acc if stop_acc > 0 else None)
        self.next_segment = 0
        self.last_command = (self.t0, np.array(self.q_meas))
        self.state = 'running'
        self.reason = ''
        self.t_rest = None
        start = {'segment_id': -1, 'joint': None, 'joint_index': -1, 'direction': 0,
                 'phase': 'start', 't': self.t0, 'plan': self.plan.name,
                 'plan_kind': self.plan.kind}
        if self.plan.top_harmonic_hz is not None:
            # the band the fit of this recording needs (identification.pipeline)
            start['harmonic_hz'] = self.plan.top_harmonic_hz
        self._marker(start)
        if self.output == 'trajectory' and not self._send_window(self.t0):
            response.message = f'refused: {self.reason}'
            return response
        self._tick()
        response.success = True
        response.message = (f'running plan {self.plan.name!r}: approach '
                            f'{run.info.get("approach_duration", 0.0):.1f} s + '
                            f'{self.plan.duration:.1f} s')
        self.get_logger().info(response.message)
        return response

    def _on_stop(self, request, response):
        was = self.state
        response.success = True
        if was == 'stopping':
            response.message = f'already braking to rest (until t = {self.t_rest:.3f} s)'
        elif was == 'running':
            self.stop('stop requested')
            response.message = (f'braking to rest by t = {self.t_rest:.3f} s (was running); '
                                f'{self.reason}')
        elif self.hold('stop requested'):
            response.message = f'holding the measured position (was {was})'
        else:
            response.message = f'stopped (was {was}); {self.reason}'
        return response

    # output ---------------------------------------------------------------------
    def _trajectory_msg(self, window):
        msg = JointTrajectory()
        msg.header.stamp = _stamp(window.start)
        msg.joint_names = list(self.config.joints)
        for k in range(len(window.times)):
            # positions and velocities: a cubic spline through them reproduces the stop ramp
            msg.points.append(JointTrajectoryPoint(
                positions=window.q[k].tolist(), velocities=window.dq[k].tolist(),
                time_from_start=_duration(window.times[k])))
        return msg

    def _send_window(self, t_from):
        """Send the window of plan from node time ``t_from``; False (and braking) if the
        look-ahead ran out or a point fails the limits."""
        try:
            window = self.stream.window(t_from)
        except ValueError as exc:
            self.stop(f'commands late: {exc}; the arm brakes on the last window\'s ramp '
                      '(a busy machine: raise the parameter lookahead)')
            return False
        problem = check_point(window.q, window.dq, window.ddq, self.config,
                              t=window.absolute_times)
        if problem:
            self.stop(f'refused to send the trajectory: {problem}')
            return False
        self.traj_pub.publish(self._trajectory_msg(window))
        return True

    def _command(self, now):
        """Publish the streamed command for node time ``now``; False if it fails a check."""
        q, dq, ddq = self.stream.reference(max(now, self.t0))
        problem = check_point(q, dq, ddq, self.config)
        if problem is None:
            t_last, q_last = self.last_command
            dt = max(now - t_last, 1.0 / self._param('command_rate'))
            step = np.abs(q - q_last)
            over = step > self.config.velocity_limits * dt * 1.5 + 1e-6
            if over.any():
                i = int(np.argmax(over))
                problem = (f'command step of {self.config.joints[i]} = {step[i]:.4f} rad in '
                           f'{dt:.4f} s exceeds its velocity limit')
        if problem:
            if self.state == 'running':
                self.stop(f'refused to publish: {problem}')
            else:       # already braking: the last good command stands
                self.state = 'stopped'
                self.get_logger().error(f'refused to publish while braking: {problem}')
            return False
        self.cmd_pub.publish(Float64MultiArray(data=q.tolist()))
        self.last_command = (now, q)
        return True

    def _tick(self):
        """Node-clock tick: stream commands or windows, announce segments, check
        tracking, finish braking."""
        if self.state not in ('running', 'stopping'):
            return
        self._take_states()
        now = self._now()
        if self.state == 'stopping':
            if self.output == 'commands' and not self._command(now):
                return
            if now >= self.t_rest:
                self.state = 'stopped'
                self.get_logger().info(f'at rest: {self.reason}')
                self._publish_diagnostics()
            return
        t = now - self.t0
        run = self.run_plan
        segs = run.segments
        while self.next_segment < len(segs) and segs[self.next_segment].t_start <= t:
            seg = segs[self.next_segment]
            self._marker(seg.marker(self.t0 + seg.t_start))
            self.next_segment += 1
        if self.output == 'commands':
            if not self._command(now):
                return
        elif t < run.duration:
            # lookahead is wall time: with a simulator at x4 a window carries 4x the plan
            self.stream.lookahead = self._param('lookahead') * self.time_rate
            tail = self.stream.tail
            # the next window begins one tick ahead, so that it arrives before it begins
            t_from = now + 1.0 / self._param('command_rate')
            if t_from >= tail.t0 - 0.5 * self.stream.lookahead and tail.t0 < self.stream.end:
                if not self._send_window(min(t_from, self.stream.end)):
                    return
        if self.q_meas is not None and self.js_node_time is not None:
            q_des = self.stream.plan_state(min(max(self.js_node_time, self.t0),
                                               self.stream.end))[0]
            err = np.abs(self.q_meas - q_des)
            limit = self._param('tracking_error_threshold')
            if err.max() > limit:
                i = int(np.argmax(err))
                self.stop(f'tracking error of {self.config.joints[i]} = {err[i]:.4f} rad '
                          f'exceeds tracking_error_threshold {limit} rad (measured '
                          f'{self.q_meas[i]:.4f} rad at t = {self.js_node_time - self.t0:.3f} s '
                          f'of the plan, planned {q_des[i]:.4f} rad; node clock at '
                          f'{t:.3f} s)')
                return
        if t >= run.duration:
            self.state = 'done'
            self._marker({'segment_id': -1, 'joint': None, 'joint_index': -1, 'direction': 0,
                          'phase': 'done', 't': self.t0 + run.duration})
            self.get_logger().info(f'plan {self.plan.name!r} done')
            self._publish_diagnostics()

    def _measure_time_rate(self):
        """Node-clock seconds per steady second (sim time only), held at its peak
        (excitation/stopping.py ``held_time_rate``), every 0.5 s."""
        probe = (self._now(), time.monotonic())
        if self._rate_probe is not None:
            self.time_rate = held_time_rate(self.time_rate, probe[0] - self._rate_probe[0],
                                            probe[1] - self._rate_probe[1])
        self._rate_probe = probe

    def _watchdog(self):
        """Steady-clock check (every 20 ms): joint states must keep arriving while running
        (ages: ``_stale_states``). Stale twice in a row holds the arm."""
        self._take_states()
        if self.state != 'running':
            self.stale_once = False
            return
        problem = self._stale_states()
        if problem is None:
            self.stale_once = False
        elif not self.stale_once:
            self.stale_once = True      # confirm at the next check
        else:
            self.stop(problem)

    def stop(self, reason):
        """Brake the running plan to rest within the limits; report; do not resume.

        Trajectory output: one window that brakes from one tick (``1/command_rate``)
        from now replaces the current one.
        Commands output: the ticks stream the braking from now on.
        """
        now = self._now()
        if self.output == 'trajectory':
            # one tick ahead: the braking window reaches the controller before it begins
            t_stop = max(now + 1.0 / self._param('command_rate'), self.t0)
        else:
            t_stop = max(now, self.t0)
        window = self.stream.stop(t_stop)
        self.state = 'stopping'
        self.reason = reason
        self.t_rest = window.rest_time
        sent = False
        if self.output == 'trajectory':
            problem = check_point(window.q, window.dq, window.ddq, self.config,
                                  t=window.absolute_times)
            if problem is None:
                self.traj_pub.publish(self._trajectory_msg(window))
                sent = True
            else:       # cannot happen for a checked plan; the last window brakes by itself
                self.reason = reason = f'{reason}; braking window refused: {problem}'
        self._marker({'segment_id': -1, 'joint': None, 'joint_index': -1, 'direction': 0,
                      'phase': 'stopped', 't': now, 'reason': reason,
                      'braking_from': t_stop, 'rest_time': self.t_rest})
        log = self.get_logger().warn if reason == 'stop requested' else self.get_logger().error
        log(f'braking to rest from t = {t_stop:.3f} s to {self.t_rest:.3f} s'
            f'{"" if sent or self.output == "commands" else " (on the last window)"}: '
            f'{reason}; call ~/start to run the plan again')
        self._publish_diagnostics()

    def hold(self, reason):
        """Hold the measured position (or the last command) of an arm that is not running;
        report. Returns True if a hold was sent.

        The hold is clipped into the position limits (a trajectory hold reaches it within
        the velocity limits). When the arm stands outside its limits (more than
        START_TOLERANCE), nothing is commanded.
        """
        q = self.q_meas if self.q_meas is not None else (
            self.last_command[1] if self.last_command is not None else None)
        self.state = 'stopped'
        self.reason = reason
        sent = False
        if q is not None:
            cfg = self.config
            held = np.clip(q, cfg.position_limits_lower, cfg.position_limits_upper)
            jump = np.abs(held - q)
            if jump.max() > START_TOLERANCE:
                # not ours to move: holding "here" would command a position outside the
                # limits, and holding at the limit would jump the arm there at once
                i = int(np.argmax(jump))
                reason += (f'; measured position of {cfg.joints[i]} = {q[i]:.4f} rad is '
                           f'outside its limits [{cfg.position_limits_lower[i]}, '
                           f'{cfg.position_limits_upper[i]}]: no hold command sent')
                self.reason = reason
            elif self.output == 'trajectory':
                # reach a clipped hold no faster than the velocity limits
                hold_time = max(self._param('hold_time'),
                                float(np.max(jump / cfg.velocity_limits)))
                msg = JointTrajectory()
                msg.header.stamp = self.get_clock().now().to_msg()
                msg.joint_names = list(cfg.joints)
                msg.points.append(JointTrajectoryPoint(
                    positions=held.tolist(), velocities=[0.0] * len(q),
                    accelerations=[0.0] * len(q), time_from_start=_duration(hold_time)))
                self.traj_pub.publish(msg)
                sent = True
            else:
                self.cmd_pub.publish(Float64MultiArray(data=held.tolist()))
                sent = True
        self._marker({'segment_id': -1, 'joint': None, 'joint_index': -1, 'direction': 0,
                      'phase': 'stopped', 't': self._now(), 'reason': reason})
        self.get_logger().warn(f'{"holding" if sent else "stopped, not holding"}: {reason}; '
                               'call ~/start to run the plan')
        self._publish_diagnostics()
        return sent

    def _marker(self, data):
        self.marker_pub.publish(String(data=json.dumps(data)))

    def _publish_diagnostics(self):
        status = DiagnosticStatus(name=f'{self.get_name()}: excitation',
                                  hardware_id=self.config.robot_name)
        if self.state in ('stopped', 'stopping') and self.reason != 'stop requested':
            status.level, status.message = DiagnosticStatus.ERROR, f'held: {self.reason}'
        else:
            status.level, status.message = DiagnosticStatus.OK, self.state
        progress = 0.0
        if self.state == 'running':
            progress = min(1.0, (self._now() - self.t0) / max(self.run_plan.duration, 1e-9))
        status.values = [KeyValue(key='state', value=self.state),
                         KeyValue(key='reason', value=self.reason),
                         KeyValue(key='progress', value=f'{progress:.3f}'),
                         KeyValue(key='plan', value=self.plan.name),
                         KeyValue(key='rejected', value=json.dumps(self.rejected)),
                         # ready: ~/start would be accepted now (plan loaded, arm heard)
                         KeyValue(key='ready', value=str(self._has_recent_state()).lower())]
        publish_diagnostics(self, status)


def main(args=None):
    """Run the node; returns the process exit code (nodes/executors.py ``run_node``)."""
    return run_node(ExcitationNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
