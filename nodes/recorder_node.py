"""Recorder node: motor current -> joint torque at 1 kHz, recorded losslessly to MCAP.

Subscribes ``joint_states`` (sensor_msgs/JointState, motor current in ``effort``),
publishes ``joint_torques`` (same stamp, position, velocity, effort = k_e·I in N·m,
names in config order) for every usable input, records the raw inputs, the
torques, ``excitation_segments`` and its configuration to a rosbag2 MCAP bag
(arm_dyn_id.data.bag_writer.BagRecorder), and reports stream quality on ``diagnostics``.
Services: ``~/start_recording``, ``~/stop_recording`` (std_srvs/Trigger).

A run ends the recording: when the excitation reports ``done`` on
``excitation_segments``, the bag is closed ``done_tail`` s of samples later
(``on_done: stop``; ``rotate`` opens a new bag at once, ``continue`` keeps it),
and a later ``start`` marker opens a new one. A floating-base robot (config
``floating_base``) also has its odometry, imu and sole-sensor topics recorded as received
(``data.floating.read_floating_bag`` reads them); its joint_states need no effort. Every
closed bag is summarised in
one log line: samples per second against ``expected_rate``, drops and gaps; below
``min_delivered_fraction`` that line is a warning. An ``output_dir`` that cannot
be written ends the node with exit code 2. See docs/recorder.md.
"""

import json
import os
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
import yaml

from arm_dyn_id.config import file_sha256
from arm_dyn_id.data.joint_states import LENGTH_MISMATCH, JointStateCheck, Rejection
from arm_dyn_id.nodes.executors import (
    create_command_node, publish_diagnostics, run_node, service_name, try_publish)
from arm_dyn_id.nodes.messages import StreamMessage
from arm_dyn_id.nodes.qos import MARKER_QOS, stream_qos
from arm_dyn_id.nodes.params import (
    ARM_FIELDS, Param, arm_config, declare_arm_parameters, declare_parameters, descriptor)
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.data.motor import CurrentToTorque, StampJoiner
from arm_dyn_id.data.quality import StreamQuality
from arm_dyn_id.data.bag_format import FLOAT64_ARRAY, JOINT_STATE, STRING
from arm_dyn_id.data.bag_writer import BagRecorder, config_document
from arm_dyn_id.data.floating import IMU, ODOMETRY, WRENCH
from arm_dyn_id.data.recovery import is_unfinished, recover_unfinished

NODE_NAME = 'recorder_node'
ON_DONE = ('stop', 'rotate', 'continue')
# joint_states positions joined with currents from current_topic, recorded for offline fits
JOINED_TOPIC = '/arm_dyn_id/joint_states_with_current'
DIAGNOSTIC_ARRAY = 'diagnostic_msgs/msg/DiagnosticArray'


class RecorderNode(Node):
    """Convert motor currents to torques, republish, record and report quality."""

    node_name = NODE_NAME

    def __init__(self):
        super().__init__(NODE_NAME)
        self.config = self._load_config()
        self._declare_parameters()
        self.converter = CurrentToTorque.from_config(self.config)
        self.joint_names = list(self.config.joints)
        self._torques_out, self._joined_out = StreamMessage(), StreamMessage()
        self.check = JointStateCheck(self.config.joints)
        p = self.get_parameter
        self.expected_rate = p('expected_rate').value
        self.gap_threshold = p('gap_threshold').value
        self.output_dir = p('output_dir').value
        self.file_prefix = p('file_prefix').value
        self.flush_period = p('flush_period').value
        self.fsync = p('fsync').value
        self.on_done = p('on_done').value
        if self.on_done not in ON_DONE:
            raise ConfigError(f'parameter on_done = {self.on_done!r} must be one of '
                              f'{", ".join(ON_DONE)}')
        self.done_tail = p('done_tail').value
        self.min_delivered = p('min_delivered_fraction').value
        check_writable(self.output_dir)
        self.quality = StreamQuality(self.expected_rate, self.gap_threshold)
        self.file_quality = None
        self.recorder = None
        self._failure = None   # why the last recording failed or could not start
        self._closing = []
        self._done_at = None        # stamp (s) of the plan's end while recording its tail
        self._done_wall = None      # monotonic time the done marker arrived
        self._run_ended = False     # stopped at `done`: the next `start` marker records again
        self._opened_ns = None      # node-clock time the current bag was opened
        self._marker_lock = threading.Lock()
        self._window = (0, 0.0)
        self._log_throttle = 5.0

        depth = p('queue_depth').value
        sensor_qos = stream_qos(depth)
        self.torque_pub = self.create_publisher(JointState, 'joint_torques', sensor_qos)
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        # raw subscriptions: the CDR bytes go to the bag unchanged (lossless, no re-serialising)
        self.state_sub = self.create_subscription(JointState, 'joint_states', self._on_state,
                                                  sensor_qos, raw=True)
        self.marker_sub = self.create_subscription(String, 'excitation_segments',
                                                   self._on_marker, MARKER_QOS, raw=True)
        # a floating base: odometry / imu / sole sensors recorded as received, same bag
        self.floating_subs = self._floating_subscriptions(sensor_qos)
        self._h_floating = {}
        # currents on a topic of their own, paired with joint_states by time
        self.current_sub = None
        self.joiner = None
        current_topic = p('current_topic').value
        if current_topic:
            self.current_type = p('current_type').value
            types = {'joint_state': JointState, 'float64_array': Float64MultiArray}
            if self.current_type not in types:
                raise ConfigError(f'parameter current_type = {self.current_type!r} must be '
                                  f'one of {sorted(types)}')
            try:
                self.current_joints = list(p('current_joints').value or []) or self.joint_names
            except ParameterUninitializedException:
                self.current_joints = self.joint_names
            if self.current_type == 'float64_array':
                # the array's order is given once; map it onto the config's order
                self._current_index = self.check.index(self.current_joints)
                if isinstance(self._current_index, Rejection):
                    raise ConfigError(f'parameter current_joints = {self.current_joints}: '
                                      f'{self._current_index.detail}')
            self.joiner = StampJoiner(p('pairing_tolerance').value)
            self.current_sub = self.create_subscription(
                types[self.current_type], current_topic, self._on_current, sensor_qos,
                raw=True)
        # services and the diagnostics timer live on a companion node (nodes/executors.py)
        self.commands = create_command_node(self)
        self.commands.create_service(Trigger, service_name(self, 'start_recording'),
                                     self._start_srv)
        self.commands.create_service(Trigger, service_name(self, 'stop_recording'),
                                     self._stop_srv)
        self.diag_timer = self.commands.create_timer(p('diagnostics_period').value,
                                                     self._publish_diagnostics)

        if p('recover_on_start').value:
            for result in recover_unfinished(self.output_dir):
                if 'error' in result:
                    self.get_logger().error(
                        f'could not recover unfinished bag {result["path"]}: {result["error"]}; '
                        f'run arm_dyn_id.data.recovery.recover_bag on it by hand')
                else:
                    self.get_logger().warning(
                        f'recovered unfinished bag {result["path"]} (a previous recorder '
                        f'stopped without closing it): {result["messages"]} messages kept')
        self.get_logger().info(
            f'converting currents of {self.joint_names} with gains '
            f'{np.round(self.converter.gains, 6).tolist()} N·m/A; output_dir {self.output_dir}')
        if p('record_on_start').value:
            ok, message = self.start_recording()
            if not ok:
                # asked to record and cannot: end (exit 2) rather than idle
                raise ConfigError(f'parameter output_dir = {self.output_dir!r}: {message}')
            self.get_logger().info(message)

    # -- parameters -------------------------------------------------------
    def _declare_parameters(self):
        declare_parameters(self, [
            Param('current_topic', '', 'topic carrying the motor currents when '
                  'joint_states.effort does not; empty: currents in joint_states.effort',
                  read_only=True),
            Param('current_type', 'joint_state', 'type of current_topic: joint_state '
                  '(sensor_msgs/JointState, currents in effort, paired by header stamp) or '
                  'float64_array (std_msgs/Float64MultiArray in the order of current_joints, '
                  'paired by arrival time)', read_only=True),
            Param('pairing_tolerance', 0.0005, 'largest time difference between a position '
                  'and its current (s)', read_only=True, low=0.0, high=1.0),
            Param('record_on_start', False, 'start recording when the node starts'),
            Param('output_dir', 'recordings', 'folder of the bags; each recording is a new '
                  'timestamped bag folder', read_only=True),
            Param('file_prefix', 'recording', 'bag folder name prefix', read_only=True),
            Param('expected_rate', 1000.0, 'nominal joint_states rate (Hz); drops are '
                  'inferred at this period', read_only=True, low=1.0, high=100000.0),
            Param('gap_threshold', 0.002, 'stamp step counted as a gap (s)', read_only=True,
                  low=1e-6, high=10.0),
            Param('flush_period', 0.5, 'seconds between file flushes; data older than this '
                  'survives a crash (s)', read_only=True, low=0.01, high=1.0),
            Param('fsync', False, 'fsync at every flush (survives power loss)',
                  read_only=True),
            Param('queue_depth', 1000, 'QoS depth of joint_states and joint_torques',
                  read_only=True),
            Param('diagnostics_period', 1.0, 'period of diagnostics messages (s)',
                  read_only=True, low=0.05, high=60.0),
            Param('recover_on_start', True, 'recover unfinished bags found in output_dir at '
                  'start', read_only=True),
            Param('on_done', 'stop', 'when the excitation reports done: stop (close the bag; '
                  'the next start marker opens a new one), rotate (close it and open a new '
                  'one at once) or continue', read_only=True),
            Param('done_tail', 1.0, 'samples kept after the done marker before the bag is '
                  'closed (s of joint_states stamps)', read_only=True, low=0.0, high=60.0),
            Param('min_delivered_fraction', 0.99, 'a closed bag holding less than this share '
                  'of the samples expected at expected_rate is reported as a warning (1)',
                  read_only=True, low=0.0, high=1.0),
        ], self.config)
        self.declare_parameter('current_joints', Parameter.Type.STRING_ARRAY, descriptor(
            'joint order of a float64_array current topic (default: joints)', read_only=True))

    def _load_config(self):
        declare_arm_parameters(self, tuple(ARM_FIELDS))
        try:
            return arm_config(self, NODE_NAME, tuple(ARM_FIELDS))
        except ConfigError as exc:
            raise ConfigError(f'{NODE_NAME}: {exc} (give config_file:=<arm yaml> or the '
                              f'parameters joints, urdf, torque_constants, ... in a '
                              f'--params-file)') from exc

    def _floating_subscriptions(self, qos):
        """Raw subscriptions to the topics of ``floating_base``: [(key, subscription, type)]."""
        fb = self.config.floating_base
        if fb is None:
            return []
        topics = []
        if fb.odometry_topic:
            topics.append(('odometry', fb.odometry_topic, Odometry, ODOMETRY))
        if fb.imu_topic:
            topics.append(('imu', fb.imu_topic, Imu, IMU))
        topics += [(f'sole_sensor_{i}', s.topic, WrenchStamped, WRENCH)
                   for i, s in enumerate(fb.sole_sensors)]
        subs = []
        for key, topic, cls, type_name in topics:
            sub = self.create_subscription(cls, topic, partial(self._on_floating, key), qos,
                                           raw=True)
            subs.append((key, sub, type_name))
        self.get_logger().info(f'floating base ({fb.method}): recording '
                               f'{", ".join(sub.topic_name for _, sub, _ in subs)}')
        return subs

    # -- hot path ---------------------------------------------------------
    def _on_floating(self, key, data):
        """Record one base or sole-sensor message as received (checked by the reader)."""
        recorder = self.recorder
        if recorder is not None:
            recorder.write(self._h_floating[key], self.get_clock().now().nanoseconds, data)

    def _reject(self, rejection, what='joint_states'):
        reason = rejection.reason
        self.quality.reject(reason)
        file_quality = self.file_quality
        if file_quality is not None:
            file_quality.reject(reason)
        self.get_logger().warning(f'rejected {what} message ({reason}): {rejection.detail}; '
                                  f'{self.quality.rejected[reason]} so far',
                                  throttle_duration_sec=self._log_throttle)

    def _on_state(self, data):
        now = self.get_clock().now().nanoseconds
        recorder = self.recorder
        if recorder is not None:
            recorder.write(self._h_states, now, data)
        msg = deserialize_message(data, JointState)
        separate = self.joiner is not None
        floating = self.config.floating_base is not None
        # currents in effort unless they come on a topic of their own (or the robot floats:
        # its joint_states may carry no effort); NaN/inf are counted by the stream quality
        # after joining, not rejected here
        sample = self.check.check(msg.name, msg.position, msg.velocity, msg.effort,
                                  require=('position',) if separate or floating
                                  else ('effort', 'position'), finite=())
        if isinstance(sample, Rejection):
            self._reject(sample)
            return
        stamp = msg.header.stamp
        t = stamp.sec + stamp.nanosec * 1e-9
        done_at = self._done_at
        if done_at is not None and t >= done_at + self.done_tail:
            self._end_of_run('the excitation reported done')
        if not separate and sample.effort is None:
            # a floating robot without joint torques: recorded and counted, nothing to convert
            self.quality.update(t, sample.position)
            file_quality = self.file_quality
            if file_quality is not None:
                file_quality.update(t, sample.position)
            return
        if not separate:
            self._emit(msg.header, t, sample.position, sample.velocity, sample.effort, now)
            return
        key = t if self.current_type == 'joint_state' else now * 1e-9
        for (header, t_s, pos, vel, now_s), current in self.joiner.add_position(
                key, (msg.header, t, sample.position, sample.velocity, now)):
            self._emit(header, t_s, pos, vel, current, now_s)

    def _on_current(self, data):
        now = self.get_clock().now().nanoseconds
        recorder = self.recorder
        if recorder is not None:
            recorder.write(self._h_currents, now, data)
        if self.current_type == 'joint_state':
            msg = deserialize_message(data, JointState)
            sample = self.check.check(msg.name, effort=msg.effort, require=('effort',),
                                      finite=())
            if isinstance(sample, Rejection):
                self._reject(sample, 'current')
                return
            key = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            current = sample.effort
        else:
            msg = deserialize_message(data, Float64MultiArray)
            if len(msg.data) != len(self.current_joints):
                self._reject(Rejection(LENGTH_MISMATCH, f'{len(msg.data)} currents for '
                                       f'current_joints {self.current_joints}'), 'current')
                return
            key = now * 1e-9
            current = np.asarray(msg.data)[self._current_index]
        for (header, t, pos, vel, now_s), cur in self.joiner.add_current(key, current):
            self._emit(header, t, pos, vel, cur, now_s)

    def _emit(self, header, t, position, velocity, current, now):
        """Check, convert, publish and record one sample (currents in config order)."""
        recorder = self.recorder
        with np.errstate(over='ignore', invalid='ignore'):
            torque = self.converter.convert_many(current[np.newaxis])[0]
        # a finite current whose torque is not (beyond the float range once times its
        # gain) is excluded like a NaN one: joint_torques never carry NaN/inf
        values = np.concatenate((current, position, torque))
        self.quality.update(t, values)   # duplicates/out-of-order: counted, still converted
        file_quality = self.file_quality
        if file_quality is not None:
            file_quality.update(t, values)
        if not np.isfinite(values).all():
            self.get_logger().warning(
                f'joint_states sample at {t:.6f} s has NaN/inf current or position, or a '
                f'current whose torque overflows: excluded ({self.quality.nonfinite} so far)',
                throttle_duration_sec=self._log_throttle)
            return
        # serialised once (nodes/messages.py): the same bytes are published and recorded
        out = self._torques_out.fill(header, self.joint_names, position, torque, velocity)
        try_publish(self, self.torque_pub, out)     # recorded whether or not it went out
        if recorder is not None:
            recorder.write(self._h_torques, now, out)
            if self.joiner is not None:
                # positions and currents joined, so that offline fits read one topic
                recorder.write(self._h_joined, now, self._joined_out.fill(
                    header, self.joint_names, position, current, velocity))

    def _on_marker(self, data):
        now = self.get_clock().now().nanoseconds
        try:
            marker = json.loads(deserialize_message(data, String).data)
            phase, t = marker.get('phase'), float(marker.get('t', 0.0))
        except (ValueError, TypeError, AttributeError):
            phase, t = None, 0.0
        opened = self._opened_ns
        # markers are latched (transient_local): one from before this bag is history
        old = opened is not None and t * 1e9 < opened - 1e6
        if phase == 'start' and self.recorder is None and self._run_ended and not old:
            self._run_ended = False
            ok, message = self.start_recording()
            log = self.get_logger().info if ok else self.get_logger().error
            log(f'a new excitation run started: {message}')
        recorder = self.recorder
        if recorder is not None:
            recorder.write(self._h_markers, now, data)
        if phase == 'done' and recorder is not None and not old and self.on_done != 'continue':
            with self._marker_lock:
                if self._done_at is None:
                    self._done_at, self._done_wall = t, time.monotonic()
                    self.get_logger().info(
                        f'the excitation reported done: closing {recorder.path.name} after '
                        f'{self.done_tail:g} s more of joint_states (on_done: {self.on_done})')

    def _end_of_run(self, why):
        """Close the bag at the end of a run; rotate to a new one if asked."""
        with self._marker_lock:
            if self._done_at is None:
                return
            self._done_at = self._done_wall = None
        ok, message = self.stop_recording()
        self.get_logger().info(f'{why}: {message}')
        if self.on_done == 'rotate':
            ok, message = self.start_recording()
            log = self.get_logger().info if ok else self.get_logger().error
            log(f'rotated: {message}')
        else:
            self._run_ended = True

    # -- recording --------------------------------------------------------
    def start_recording(self):
        """Open a new bag; returns (success, message)."""
        if self.recorder is not None:
            return False, f'already recording to {self.recorder.path}; call ~/stop_recording first'
        rec = BagRecorder(self.output_dir, prefix=self.file_prefix,
                          flush_period=self.flush_period, fsync=self.fsync,
                          on_error=self._on_writer_error)
        topics = {'states': self.state_sub.topic_name, 'torques': self.torque_pub.topic_name,
                  'markers': self.marker_sub.topic_name}
        self._h_states = rec.add_topic(topics['states'], JOINT_STATE)
        self._h_torques = rec.add_topic(topics['torques'], JOINT_STATE)
        self._h_markers = rec.add_topic(topics['markers'], STRING)
        current_source = 'joint_states.effort'
        for key, sub, type_name in self.floating_subs:
            topics[key] = sub.topic_name
            self._h_floating[key] = rec.add_topic(sub.topic_name, type_name)
        if self.joiner is not None:
            topics['currents'] = self.current_sub.topic_name
            self._h_currents = rec.add_topic(
                topics['currents'],
                JOINT_STATE if self.current_type == 'joint_state' else FLOAT64_ARRAY)
            # read_bag reads the joined samples (stored config topics.states)
            topics['raw_states'], topics['states'] = topics['states'], JOINED_TOPIC
            self._h_joined = rec.add_topic(JOINED_TOPIC, JOINT_STATE)
            current_source = (f'{topics["currents"]} ({self.current_type}), paired with '
                              f'{topics["raw_states"]} within {self.joiner.tolerance} s; '
                              f'joined samples on {JOINED_TOPIC}')
        extra = {'topics': topics, 'expected_rate': self.expected_rate,
                 'gap_threshold': self.gap_threshold, 'current_source': current_source,
                 'node': self.get_fully_qualified_name()}
        if self.config.source is not None:
            extra['config_file_sha256'] = file_sha256(self.config.source)
        if self.config.floating_base is not None:
            extra['floating_base'] = self.config.floating_base.to_dict()
        text = yaml.safe_dump(config_document(self.config, **extra), sort_keys=False)
        try:
            path = rec.open(config_text=text,
                            timestamp_ns=self.get_clock().now().nanoseconds)
        except Exception as exc:
            message = (f'not recording: {exc}. Free disk space or fix that folder (or '
                       f'restart the node with another output_dir, a read-only parameter), '
                       f'then call ~/start_recording; joint_torques are still published')
            self._failure = f'cannot record: {exc}'
            self.get_logger().error(message)
            return False, message
        self.file_quality = StreamQuality(self.expected_rate, self.gap_threshold)
        self._failure = None
        self._opened_ns = self.get_clock().now().nanoseconds
        self.recorder = rec
        return True, f'recording to {path}'

    def _on_writer_error(self, rec):
        """The bag writer failed (writer thread or closing thread): log it once."""
        stats = rec.stats()
        where = (f'a recorder starting on output_dir {self.output_dir} recovers it '
                 f'(recover_on_start), or run arm_dyn_id.data.recovery.recover_bag('
                 f'{str(rec.path)!r})')
        if not rec.closed:   # while recording
            age = stats['failed_after_flush_s']
            age = f'{age:.2f} s' if age is not None else 'at most flush_period'
            failure = f'recording to {rec.path} failed: {rec.error}'
            if self.recorder in (rec, None):
                self._failure = failure
            self.get_logger().error(
                f'{failure}. Nothing more is written to this bag; joint_torques are '
                f'still published. Everything up to the last flush is on disk and readable: '
                f'{stats["flushed"]} messages, flushed {age} before the failure '
                f'(flush_period {self.flush_period} s); {where}. Free disk space or fix '
                f'output_dir, then call ~/stop_recording and ~/start_recording for a new bag.')
        else:
            if self.recorder is None:
                self._failure = f'closing {rec.path} failed: {rec.error}'
            if is_unfinished(rec.path):
                self.get_logger().error(
                    f'closing {rec.path} failed: {rec.error}. The bag stays unfinished with '
                    f'everything up to its last flush; {where}.')
            else:
                self.get_logger().error(f'closing {rec.path}: {rec.error}; the bag itself is '
                                        f'complete')

    def stop_recording(self, wait=False):
        """Close the current bag (in a background thread unless ``wait``); (success, message)."""
        rec, self.recorder = self.recorder, None
        if rec is None:
            return False, 'not recording; call ~/start_recording first'
        quality = self.file_quality.summary() if self.file_quality else None
        summary = {'quality': quality}
        self.file_quality = None
        self._done_at = self._done_wall = None
        self._report_loss(rec, quality)
        error = rec.error
        if wait:
            rec.close(summary)
        else:
            thread = threading.Thread(target=rec.close, args=(summary,), daemon=False,
                                      name='bag-close')
            thread.start()
            self._closing.append(thread)
        if error is not None:
            # stopped all the same: success=False says the bag is incomplete
            return False, (f'stopped, but the recording had failed: {error}. {rec.path} keeps '
                           f'everything up to the last flush before the failure; it is '
                           f'recovered at the next recorder start or with '
                           f'arm_dyn_id.data.recovery.recover_bag. Free disk space or fix '
                           f'output_dir, then call ~/start_recording')
        return True, f'stopped; bag {rec.path} is being closed'

    def _report_loss(self, rec, quality):
        """One line on what the bag holds against what the arm should have sent."""
        if not quality or not quality['messages']:
            self.get_logger().warning(f'{rec.path.name}: no joint_states samples recorded')
            return
        writer = rec.stats()
        text = loss_summary(quality, writer.get('dropped', 0))
        if quality['delivered_fraction'] < self.min_delivered or writer.get('dropped'):
            self.get_logger().warning(
                f'{rec.path.name}: {text}; samples were lost (below '
                f'min_delivered_fraction {self.min_delivered:g}): the arm or this node '
                f'could not keep up (see docs/recorder.md)')
        else:
            self.get_logger().info(f'{rec.path.name}: {text}')

    def _start_srv(self, request, response):
        response.success, response.message = self.start_recording()
        return response

    def _stop_srv(self, request, response):
        response.success, response.message = self.stop_recording()
        return response

    # -- diagnostics ------------------------------------------------------
    def _publish_diagnostics(self):
        s = self.quality.summary()
        count, t_prev = self._window
        # message rate per wall second (the node clock may be a paused or fast sim clock)
        now = time.monotonic()
        rate = (s['messages'] - count) / (now - t_prev) if t_prev and now > t_prev else 0.0
        self._window = (s['messages'], now)
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: joint_states'
        status.hardware_id = self.config.robot_name
        rec = self.recorder
        writer = rec.stats() if rec is not None else None
        problems = []
        if s['drops'] or s['gaps']:
            problems.append(f'{s["drops"]} drops, {s["gaps"]} gaps')
        if s['nonfinite']:
            problems.append(f'{s["nonfinite"]} NaN/inf samples excluded')
        if s['rejected']:
            problems.append(f'rejected {s["rejected"]}')
        if writer is not None and writer['error']:
            status.level = DiagnosticStatus.ERROR
            problems.insert(0, f'{writer["error"]}; {writer["dropped"]} messages not '
                               f'recorded; fix output_dir, then ~/stop_recording and '
                               f'~/start_recording')
        elif writer is not None and writer['dropped']:
            status.level = DiagnosticStatus.ERROR
            problems.insert(0, f'{writer["dropped"]} messages not recorded (writer queue full)')
        elif writer is None and self._failure:
            # stays until a recording starts again
            status.level = DiagnosticStatus.ERROR
            problems.insert(0, self._failure)
        elif problems:
            status.level = DiagnosticStatus.WARN
        else:
            status.level = DiagnosticStatus.OK
        state = 'not recording' if rec is None else f'recording to {rec.path.name}' + (
            ' FAILED' if writer['error'] else '')
        status.message = '; '.join([state] + problems)
        values = {'window_rate_hz': rate, **{k: v for k, v in s.items() if k != 'rejected'},
                  'publish_failures': json.dumps(getattr(self, 'publish_failures', {})),
                  'rejected': json.dumps(s['rejected']),
                  'recording': str(rec.path) if rec is not None else '',
                  'writer_error': (writer or {}).get('error') or self._failure or ''}
        if writer is not None:
            values.update({'writer_backlog': writer['backlog'],
                           'writer_dropped': writer['dropped'],
                           'writer_written': writer['written'],
                           'writer_flushed': writer['flushed'],
                           'seconds_since_flush': writer['seconds_since_flush']})
        status.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        done_wall = self._done_wall
        if done_wall is not None and time.monotonic() - done_wall > self.done_tail + 5.0:
            # no sample reached the end of the tail (the arm went quiet): close all the same
            self._end_of_run('the excitation reported done and joint_states stopped')
        publish_diagnostics(self, status)

    def shutdown(self):
        """Close an open bag and wait for bags being closed."""
        if self.recorder is not None:
            self.stop_recording(wait=True)
        for thread in self._closing:
            thread.join(30.0)


def check_writable(output_dir):
    """Raise ConfigError unless bags can be created in ``output_dir`` (or it can be made)."""
    path = Path(output_dir).expanduser().absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    problem = None
    if probe == path and not path.is_dir():
        problem = 'is not a folder'
    elif not probe.is_dir():
        problem = f'cannot be created: {probe} is not a folder'
    elif not os.access(probe, os.W_OK | os.X_OK):
        problem = ('is not writable' if probe == path
                   else f'cannot be created: {probe} is not writable')
    if problem:
        raise ConfigError(f'parameter output_dir = {str(output_dir)!r} ({path}) {problem}; '
                          f'give a folder this user can write (output_dir:=...)')


def loss_summary(quality, writer_dropped=0):
    """``N samples in T s = R samples/s of E (P %), D drops, G gaps (largest L s)``."""
    q = quality
    text = (f'{q["accepted"]} samples in {q["duration_s"]:.1f} s = {q["rate_hz"]:.0f} '
            f'samples/s of {q["expected_rate_hz"]:.0f} ({100 * q["delivered_fraction"]:.1f} % '
            f'delivered), {q["drops"]} drops, {q["gaps"]} gaps (largest {q["max_gap_s"]:.3f} s)')
    if writer_dropped:
        text += f', {writer_dropped} messages not written (writer queue full)'
    return text


def main(args=None):
    """Run the recorder node (hot path on an EventsExecutor); returns the exit code."""
    return run_node(RecorderNode, args, split=True, threads=2)


if __name__ == '__main__':
    raise SystemExit(main())
