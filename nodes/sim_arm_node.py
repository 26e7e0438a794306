"""Simulated arm node: a MuJoCo arm that follows trajectories and publishes joint states.

Stands in for a real arm driven by ros2_control (see docs/simulation.md):

- subscribes ``<controller>/joint_trajectory`` (trajectory_msgs/JointTrajectory,
  joint_trajectory_controller semantics) and ``<controller>/commands``
  (std_msgs/Float64MultiArray, positions in the order of ``joints``);
- publishes ``joint_states`` (sensor_msgs/JointState: position rad, velocity
  rad/s, motor current A in ``effort``) at ``publish_rate``, ``diagnostics`` once a
  second of simulated time, and in sim-time mode ``/clock`` at ``clock_rate`` (every
  step by default);
- services ``~/attach_payload``, ``~/detach_payload``, ``~/set_gravity``
  (std_srvs/Trigger, reading the parameters ``payload_mass``, ``payload_com``,
  ``gravity``); the same parameters also act when set at run time.

Time: with ``use_sim_time`` false the arm steps in real time on a dedicated thread
and stamps samples with the wall clock (start time + simulated time). With
``use_sim_time`` true the node *is* the clock: every 1 ms step it publishes
``/clock`` (every ``clock_rate`` period: each message wakes every node on sim time) and
then ``joint_states``, paced at ``real_time_factor`` (0 = as fast as possible).

Nothing is lost silently (docs/simulation.md): in sim-time mode with
``lockstep_topic`` set (``joint_torques``: the recorder republishes every sample it
took, with the same stamp), the arm never runs more than ``lockstep_window`` s of
simulated time ahead of the last stamp seen there, so a recorder that cannot keep up
slows the simulation down instead of losing samples; the diagnostics report the
achieved real-time factor and the time spent waiting. In wall-time mode an arm that
falls behind real time restarts its schedule and says so (a gap in the stamps).
"""

import struct

import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.nodes.executors import run_node, try_publish
from arm_dyn_id.nodes.polled import PolledSubscription
from arm_dyn_id.nodes.params import (
    Param, arm_config, declare_arm_parameters, declare_parameters, plain)
from arm_dyn_id.sim.arm import SimArm, SimParams
from arm_dyn_id.excitation.follow import JointTrajectoryFollower

NODE_NAME = 'sim_arm_node'
STATE_QUEUE_DEPTH = 1000

#: SimParams keys that may change while running (the rest are read-only).
_RUNTIME_KEYS = ('gravity', 'payload_mass', 'payload_com', 'payload_attached')

_DESCRIPTIONS = {
    'friction_coulomb': 'Coulomb friction per joint (N·m)',
    'friction_viscous': 'viscous friction per joint (N·m·s/rad)',
    'stribeck_torque': 'static friction above Coulomb at zero speed per joint (N·m); 0 = off',
    'stribeck_velocity': 'Stribeck velocity (rad/s)',
    'friction_smoothing_velocity': 'velocity of the tanh replacing sign(v) in friction (rad/s)',
    'current_noise': 'white current noise sigma per joint (A)',
    'current_quantisation': 'current resolution per joint (A); 0 = none',
    'gross_error_rate': 'probability of a gross current error per sample and joint (1)',
    'gross_error_amplitude': 'gross error size per joint in joint torque (N·m), random sign',
    'encoder_noise': 'position noise sigma per joint (rad)',
    'gravity': 'gravity magnitude (m/s^2): 9.81 Earth, 1.63 Moon',
    'payload_mass': 'payload mass at the flange (kg) used by ~/attach_payload',
    'payload_com': 'payload centre of mass in the flange frame (m), 3 values',
    'payload_attached': 'payload attached (true/false); settable while running',
    'position_gains': 'drive kp per joint (N·m/rad); empty = from control_bandwidth',
    'velocity_gains': 'drive kd per joint (N·m·s/rad); empty = from control_bandwidth',
    'integral_gains': 'drive ki per joint (N·m/(rad·s)); empty = from control_bandwidth',
    'acceleration_feedforward': 'drive inertia feed-forward per joint (kg·m^2)',
    'control_bandwidth': 'drive bandwidth used for gains left empty (Hz)',
    'initial_positions': 'start pose (rad); empty = zero clipped into the limits',
    'timestep': 'physics step (s)',
    'seed': 'seed of the noise generator',
}


def steps_per_message(name, rate, timestep):
    """Simulation steps between two messages published at ``rate`` Hz (parameter ``name``).

    The messages go out on steps, so ``rate`` must divide the step rate: any other rate
    was rounded to the nearest whole number of steps without a word (``clock_rate:=7``
    gave /clock at 6.99 Hz, seen under ros2 launch). Raises ConfigError naming the
    parameter and the nearest rates that work.
    """
    step_rate = 1.0 / timestep
    steps = step_rate / rate
    whole = max(1, int(round(steps)))
    if abs(steps - whole) > 1e-6 * steps:
        n = max(1, int(steps))
        raise ConfigError(
            f'parameter {name}: {rate:g} Hz is not a divisor of the {step_rate:g} Hz step '
            f'rate (1 / timestep), and messages go out on steps; the nearest rates that '
            f'are: {step_rate / (n + 1):.6g} Hz (every {n + 1} steps) and '
            f'{step_rate / n:.6g} Hz (every {n} steps)')
    return whole


class SimArmNode(Node):
    """MuJoCo arm behind a ros2_control-like interface (see module docstring)."""

    node_name = NODE_NAME

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        declare_arm_parameters(self, config_file='humanoid_arm.yaml')
        self.config = arm_config(self, NODE_NAME)
        specs = [
            Param('controller', 'arm_controller', 'controller namespace of the command topics',
                  read_only=True),
            Param('publish_rate', 1000.0, 'joint_states rate (Hz), a divisor of the step rate',
                  read_only=True, low=1.0, high=1000.0),
            Param('clock_rate', 1000.0, 'sim time only: /clock rate (Hz), a divisor of the '
                  'step rate; every node on sim time takes each /clock message',
                  read_only=True, low=1.0, high=1000.0),
            Param('real_time_factor', 1.0, 'sim time only: simulated/wall speed; 0 = as fast '
                  'as possible', low=0.0, high=1000.0),
            Param('lockstep_topic', '', 'sim time only: sensor_msgs/JointState topic whose '
                  'header stamps say how far a consumer got (joint_torques of the recorder); '
                  'the arm waits when it is lockstep_window ahead. Empty: off',
                  read_only=True),
            Param('lockstep_window', 0.5, 'largest lead over the lockstep_topic stamps (s of '
                  'simulated time); below the joint_states queue (1000 samples = 1 s at '
                  '1 kHz)', read_only=True, low=0.001, high=0.9),
            Param('lockstep_timeout', 2.0, 'wall seconds without lockstep_topic messages '
                  'after which the arm stops waiting if the topic has no publisher left (the '
                  'consumer is gone) and warns; a slow consumer is waited for',
                  read_only=True, low=0.1, high=600.0)]
        for key in SimParams.keys():
            # the sim_arm_node section of the config gives the defaults; None: SimParams'
            default = float(self.config.gravity) if key == 'gravity' else None
            specs.append(Param(key, default, _DESCRIPTIONS[key],
                               read_only=key not in _RUNTIME_KEYS, dynamic=True))
        values = declare_parameters(self, specs, self.config)
        values = {key: values[key] for key in SimParams.keys()}
        self.params = SimParams.from_params(values, self.config.n_joints)
        self.arm = SimArm(self.config, self.params)
        n = self.config.n_joints
        self.joints = tuple(self.config.joints)
        self.check = JointStateCheck(self.joints)
        self.follower = JointTrajectoryFollower(self.arm.initial_positions)
        self._lock = threading.Lock()
        self._sim_time = bool(self.get_parameter('use_sim_time').value)
        self._rtf = float(self.get_parameter('real_time_factor').value)
        dt = self.params.timestep
        self._decimation = steps_per_message(
            'publish_rate', float(self.get_parameter('publish_rate').value), dt)
        self._clock_decimation = steps_per_message(
            'clock_rate', float(self.get_parameter('clock_rate').value), dt)
        self._time_base = 0.0          # ROS time (s) = time_base + simulated time
        if self._sim_time:
            # This node is the clock: do not listen to its own /clock messages.
            ts = self._time_source
            if getattr(ts, '_clock_sub', None) is not None:
                self.destroy_subscription(ts._clock_sub)
                ts._clock_sub = None
        # messages built once; the loop writes into their arrays through NumPy views
        self._js = JointState()
        self._js.name = list(self.joints)
        self._js.position = [0.0] * n
        self._js.velocity = [0.0] * n
        self._js.effort = [0.0] * n
        self._pos = np.frombuffer(self._js.position, dtype=float)
        self._vel = np.frombuffer(self._js.velocity, dtype=float)
        self._cur = np.frombuffer(self._js.effort, dtype=float)
        self._clock_msg = Clock()
        # 1 s of samples at 1 kHz: a consumer may lag up to that much before a sample is
        # overwritten unread (the lockstep window stays below it)
        state_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=STATE_QUEUE_DEPTH,
                               reliability=ReliabilityPolicy.RELIABLE)
        self.pub_states = self.create_publisher(JointState, 'joint_states', state_qos)
        self.pub_clock = self.create_publisher(Clock, '/clock', QoSProfile(depth=10)) \
            if self._sim_time else None
        self.pub_diag = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        controller = self.get_parameter('controller').value
        self.create_subscription(JointTrajectory, f'{controller}/joint_trajectory',
                                 self._on_trajectory, 10)
        self.create_subscription(Float64MultiArray, f'{controller}/commands',
                                 self._on_commands, 10)
        self.create_service(Trigger, '~/attach_payload', self._srv_attach)
        self.create_service(Trigger, '~/detach_payload', self._srv_detach)
        self.create_service(Trigger, '~/set_gravity', self._srv_gravity)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._stop = threading.Event()
        self._started = None
        self._stats = {'overruns': 0, 'resyncs': 0, 'rejected': 0, 'lockstep_wait': 0.0,
                       'lockstep_released': 0, 'late_trajectories': 0, 'largest_delay': 0.0}
        # lockstep: the stamp (s) the consumer has reached, and when it was heard (monotonic)
        self._lock_topic = self.get_parameter('lockstep_topic').value
        self._lock_window = float(self.get_parameter('lockstep_window').value)
        self._lock_timeout = float(self.get_parameter('lockstep_timeout').value)
        self._acked = None
        self._acked_wall = None
        self._lock_sub = None
        if self._lock_topic and not self._sim_time:
            self.get_logger().warning(
                f'lockstep_topic {self._lock_topic!r} ignored: a wall-time arm does not wait '
                '(use_sim_time:=true to step in lock with the recorder)')
            self._lock_topic = ''
        if self._lock_topic:
            # taken by the stepping thread, only when it is a window ahead (nodes/polled.py):
            # a callback per 1 kHz message on this node's executor thread took the GIL
            # from the stepping thread at every step
            self._lock_sub = PolledSubscription(
                self, 'lockstep', self._lock_topic, JointState,
                QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                           reliability=ReliabilityPolicy.RELIABLE))
        self._thread = threading.Thread(target=self._run, name='sim_arm_loop', daemon=True)
        mode = f'sim time x{self._rtf:g}' if self._sim_time else 'wall time'
        if self._lock_topic:
            mode += (f', in lock with {self._lock_topic} (at most {self._lock_window:g} s '
                     'ahead)')
        self.get_logger().info(
            f'{self.config.robot_name}: {n} joints, {mode}, joint_states every '
            f'{self._decimation} step(s) of {dt * 1e3:g} ms, '
            f'gravity {self.arm.gravity:g} m/s², commands on {controller}/')

    # lifecycle -------------------------------------------------------------
    def start(self):
        """Start the stepping thread (call once, after the executor has the node)."""
        if not self._sim_time:
            self._time_base = time.time() - self.arm.time
        self._started = time.monotonic()
        self._thread.start()

    def shutdown(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        wall = time.monotonic() - self._started if self._started else 0.0
        if wall > 0:
            stats = self._stats
            self.get_logger().info(
                f'simulated {self.arm.time:.1f} s in {wall:.1f} s wall '
                f'(x{self.arm.time / wall:.2f} real time); waited {stats["lockstep_wait"]:.1f} s '
                f'for {self._lock_topic or "nothing (no lockstep)"}; '
                f'{stats["resyncs"]} schedule restarts, {stats["overruns"]} late steps, '
                f'{stats["late_trajectories"]} trajectories after their stamp (the largest '
                f'delay {stats["largest_delay"] * 1e3:.0f} ms)')

    def _take_lockstep(self):
        """Take the waiting lockstep messages: the newest stamp is how far the consumer
        got, its arrival (monotonic) when it was last heard."""
        taken = self._lock_sub.take_newest()
        if taken is None:
            return
        data, age = taken
        # header.stamp is the first field after the 4-byte CDR encapsulation header
        sec, nanosec = struct.unpack_from('<iI' if data[1] == 1 else '>iI', data, 4)
        stamp = sec + nanosec * 1e-9
        if self._acked is None or stamp > self._acked:
            self._acked = stamp
        self._acked_wall = time.monotonic() - age

    def _wait_for_consumer(self, t_next):
        """Lockstep: block while the consumer is ``lockstep_window`` behind ``t_next``.

        Returns the wall seconds waited. Not before the consumer was first heard. A
        consumer silent for ``lockstep_timeout`` s is released only when it is gone (no
        publisher left on the topic: counted and logged); one that is still there but
        slow (a busy machine) is waited for, with a warning every 10 s, so that nothing
        is lost.
        """
        waited = 0.0
        acked = self._acked
        if acked is not None and t_next - acked <= self._lock_window:
            return waited       # within the window: nothing to take
        while not self._stop.is_set():
            self._take_lockstep()
            acked, heard = self._acked, self._acked_wall
            if acked is None or t_next - acked <= self._lock_window:
                return waited
            silent = time.monotonic() - heard
            if silent > self._lock_timeout:
                if self.count_publishers(self._lock_topic) == 0:
                    self._stats['lockstep_released'] += 1
                    self.get_logger().warning(
                        f'{self._lock_topic} has no publisher any more and was silent for '
                        f'{silent:.1f} s: running on without waiting for it (its last stamp '
                        f'{acked:.3f} s, simulated time {t_next:.3f} s)',
                        throttle_duration_sec=10.0)
                    self._acked = None      # wait again once it is back
                    return waited
                self.get_logger().warning(
                    f'waiting for {self._lock_topic}: silent for {silent:.1f} s, '
                    f'{t_next - acked:.3f} s of simulated time behind (a busy machine: the '
                    'simulation waits rather than lose samples)', throttle_duration_sec=10.0)
            start = time.monotonic()
            time.sleep(0.001)       # polled: the consumer publishes every 1 ms sample
            waited += time.monotonic() - start
        return waited

    def now_sim(self):
        """Simulated time (s) of the next sample."""
        return self.arm.time

    # stepping loop -----------------------------------------------------------
    def _run(self):
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - report, never die silently
            if self._stop.is_set() or not self.context.ok():
                return          # shutting down: publishers went away under the loop
            self.get_logger().fatal(f'simulation stopped: {exc!r}')
            raise

    def _loop(self):
        arm, follower, lock = self.arm, self.follower, self._lock
        js, clock_msg = self._js, self._clock_msg
        stamp, cstamp = js.header.stamp, clock_msg.clock
        pub_states, pub_clock = self.pub_states, self.pub_clock
        pos, vel, cur = self._pos, self._vel, self._cur
        dt = self.params.timestep
        decimation, clock_decimation = self._decimation, self._clock_decimation
        sim_time = self._sim_time
        base = self._time_base
        wall0 = time.monotonic()
        sim0 = arm.time
        k = 0
        diag_every = int(round(1.0 / dt))
        window_wall, window_steps = time.monotonic(), 0
        lockstep = bool(self._lock_topic)
        with lock:      # the sample at t = 0 is not published (a zero stamp means "now")
            q, dq, ddq = follower.sample(arm.time)
            arm.step(q, dq, ddq)
        while not self._stop.is_set():
            if lockstep:
                waited = self._wait_for_consumer(arm.time + dt)
                if waited:
                    self._stats['lockstep_wait'] += waited
                    wall0 += waited     # time spent waiting is not lag to catch up
            with lock:
                t_next = arm.time
                q, dq, ddq = follower.sample(t_next)
                arm.step(q, dq, ddq)
                t = arm.measure_into(pos, vel, cur)
            k += 1
            ros_t = base + t
            sec = int(ros_t)
            nsec = int(round((ros_t - sec) * 1e9))
            if nsec >= 1_000_000_000:
                sec, nsec = sec + 1, nsec - 1_000_000_000
            if sim_time and k % clock_decimation == 0:
                cstamp.sec, cstamp.nanosec = sec, nsec
                try_publish(self, pub_clock, clock_msg)
            if k % decimation == 0:
                stamp.sec, stamp.nanosec = sec, nsec
                try_publish(self, pub_states, js)     # a slow listener does not stop the arm
            if k % diag_every == 0:
                now = time.monotonic()
                rate = (k - window_steps) / max(now - window_wall, 1e-9)
                window_wall, window_steps = now, k
                self._publish_diagnostics(sec, nsec, rate)
            # pacing
            rtf = self._rtf if sim_time else 1.0
            if rtf > 0:
                due = wall0 + (t - sim0 + dt) / rtf
                lag = time.monotonic() - due
                if lag < 0:
                    time.sleep(-lag)
                elif lag > 0.05:
                    # too far behind: restart the schedule here (counted, stamps stay
                    # consistent: wall time mode shifts its time base by the gap)
                    self._stats['resyncs'] += 1
                    wall0, sim0 = time.monotonic(), t + dt
                    if not sim_time:
                        base += lag
                        self._time_base = base
                        self.get_logger().warning(
                            f'the simulation fell {lag:.3f} s behind real time: its stamps '
                            f'jump by that much, a gap in joint_states '
                            f'({self._stats["resyncs"]} so far; docs/simulation.md)',
                            throttle_duration_sec=5.0)
                elif lag > dt:
                    self._stats['overruns'] += 1

    def _publish_diagnostics(self, sec, nsec, rate):
        arm = self.arm
        msg = DiagnosticArray()
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nsec
        status = DiagnosticStatus()
        status.level = DiagnosticStatus.OK
        status.name = f'{self.get_name()}: simulation'
        status.hardware_id = self.config.robot_name
        status.message = f'{rate:.0f} steps/s (x{rate * self.params.timestep:.2f} real time)'
        if self._stats['lockstep_wait']:
            status.message += f', waited {self._stats["lockstep_wait"]:.1f} s for ' \
                              f'{self._lock_topic}'
        payload = arm.payload
        values = {
            'steps_per_second': f'{rate:.1f}',
            'simulated_time_s': f'{arm.time:.3f}',
            'steps': str(arm.steps),
            'gravity_m_s2': f'{arm.gravity:g}',
            'payload': 'none' if payload is None else
            f'{payload[0]:g} kg at {np.round(payload[1], 4).tolist()} m',
            'real_time_factor_achieved': f'{rate * self.params.timestep:.3f}',
            'lockstep_topic': self._lock_topic,
            'lockstep_wait_s': f'{self._stats["lockstep_wait"]:.3f}',
            'lockstep_released': str(self._stats['lockstep_released']),
            'late_steps': str(self._stats['overruns']),
            'late_trajectories': str(self._stats['late_trajectories']),
            'largest_trajectory_delay_s': f'{self._stats["largest_delay"]:.3f}',
            'schedule_resyncs': str(self._stats['resyncs']),
            'rejected_commands': str(self._stats['rejected']),
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg.status = [status]
        self.pub_diag.publish(msg)

    # commands ----------------------------------------------------------------
    def _reject(self, what, rejection):
        self._stats['rejected'] += 1
        self.get_logger().warning(f'{what} rejected ({rejection.reason}): {rejection.detail}',
                                  throttle_duration_sec=1.0)

    def _on_trajectory(self, msg):
        if not msg.points:
            # JTC: an empty trajectory stops the current one and holds position
            with self._lock:
                q, _, _ = self.follower.sample(self.arm.time)
                self.follower.hold(q)
            return
        index = self.check.place(msg.joint_names)
        if isinstance(index, Rejection):
            self._reject('trajectory', index)
            return
        m, k = len(msg.points), len(index)
        times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                          for p in msg.points])

        def field(name):
            rows = [getattr(p, name) for p in msg.points]
            if all(len(r) == 0 for r in rows):
                return None
            if any(len(r) != k for r in rows):
                raise ValueError(f'every point needs {k} {name} (one per joint name) or none')
            return np.array(rows, dtype=float).reshape(m, k)

        try:
            positions = field('positions')
            velocities = field('velocities')
            accelerations = field('accelerations')
            if positions is None:
                raise ValueError('points need positions')
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            with self._lock:
                now = self.arm.time
                start = now if stamp == 0 else stamp - self._time_base
                # a trajectory that arrives after its stamp starts now, its points on
                # their own times (JTC): the arm stays on the sender's plan
                self.follower.replace(start, times, positions, velocities, accelerations,
                                      joint_index=index, now=now)
            if start < now - 0.002:
                self._late_trajectory(now - start)
        except ValueError as exc:
            self._reject('trajectory', Rejection('invalid_trajectory', str(exc)))

    def _late_trajectory(self, delay):
        """Count a trajectory that arrived ``delay`` s (simulated) after its stamp."""
        stats = self._stats
        stats['late_trajectories'] += 1
        stats['largest_delay'] = max(stats['largest_delay'], delay)
        if delay > 0.05:
            self.get_logger().warning(
                f'a trajectory arrived {delay * 1e3:.0f} ms (simulated) after its stamp; '
                f'{stats["late_trajectories"]} late so far, the largest '
                f'{stats["largest_delay"] * 1e3:.0f} ms (its points keep their times)',
                throttle_duration_sec=5.0)

    def _on_commands(self, msg):
        data = self.check.check_values(msg.data, 'positions')
        if isinstance(data, Rejection):
            self._reject('command', data)
            return
        with self._lock:
            self.follower.hold(data)

    # payload and gravity -------------------------------------------------------
    def _payload_from_parameters(self):
        mass = float(self.get_parameter('payload_mass').value)
        com = np.asarray(plain(self.get_parameter('payload_com').value), dtype=float)
        return mass, com

    def _attach(self, mass, com):
        with self._lock:
            self.arm.attach_payload(mass, com)
        self.get_logger().info(f'payload {mass:g} kg at {com.tolist()} m attached')

    def _detach(self):
        with self._lock:
            self.arm.detach_payload()
        self.get_logger().info('payload detached')

    def _srv_attach(self, request, response):
        try:
            mass, com = self._payload_from_parameters()
            self._attach(mass, com)
            response.success, response.message = True, f'attached {mass:g} kg at {com.tolist()} m'
        except (ConfigError, ValueError, TypeError) as exc:
            response.success = False
            response.message = f'{exc}; set payload_mass (kg) and payload_com (m) and retry'
        return response

    def _srv_detach(self, request, response):
        had = self.arm.payload is not None
        self._detach()
        response.success = True
        response.message = 'payload detached' if had else 'no payload was attached'
        return response

    def _srv_gravity(self, request, response):
        try:
            g = float(self.get_parameter('gravity').value)
            with self._lock:
                self.arm.set_gravity(g)
            response.success, response.message = True, f'gravity {g:g} m/s²'
        except (ConfigError, ValueError, TypeError) as exc:
            response.success, response.message = False, f'{exc}; set the gravity parameter'
        return response

    def _on_set_parameters(self, parameters):
        changes = {p.name: plain(p.value) for p in parameters}
        try:
            if 'real_time_factor' in changes:
                rtf = float(changes['real_time_factor'])
                if rtf < 0:
                    raise ConfigError(f'parameter real_time_factor = {rtf} must be >= 0')
                self._rtf = rtf
            if 'gravity' in changes:
                with self._lock:
                    self.arm.set_gravity(float(changes['gravity']))
            payload_keys = {'payload_mass', 'payload_com', 'payload_attached'} & set(changes)
            if payload_keys:
                mass, com = self._payload_from_parameters()
                mass = float(changes.get('payload_mass', mass))
                com = np.asarray(changes.get('payload_com', com), dtype=float)
                attached = changes.get('payload_attached', self.arm.payload is not None)
                if not isinstance(attached, bool):
                    raise ConfigError(f'parameter payload_attached = {attached!r} must be a bool')
                if com.shape != (3,):
                    raise ConfigError(f'parameter payload_com = {com.tolist()} needs 3 values (m)')
                if attached and mass <= 0:
                    raise ConfigError(f'parameter payload_mass = {mass} must be > 0 (kg)')
                if attached:
                    self._attach(mass, com)
                elif self.arm.payload is not None:
                    self._detach()
        except (ConfigError, ValueError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)


def main(args=None):
    """Run the node; returns the process exit code (nodes/executors.py ``run_node``).

    The 1 kHz path is the stepping thread's publishing; the executor only serves
    commands and services. EventsExecutor (Kilted wheels) stopped dispatching
    callbacks here while another thread published, so ``run_node`` spins it on a
    SingleThreadedExecutor and calls ``start()`` once the executor holds the node.
    """
    return run_node(SimArmNode, args)


if __name__ == '__main__':
    raise SystemExit(main())
