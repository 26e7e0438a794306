"""Floating model node: serves an identified floating-base model (a space robot, a biped).

Loads ``model_file`` (an ``arm_dyn_id/floating_model`` file written by ``arm-dyn-id fit``
on a config with a ``floating_base`` section; default ``<model_dir>/latest/model.yaml``)
and serves, through :class:`arm_dyn_id.service.floating.ServedFloating`:

- ``com_query`` -> ``com_result``: the whole-body centre of mass (world, m) of a
  configuration; ``momentum_query`` -> ``momentum_result``: the system momentum
  ``[p; L about the world origin]`` of a configuration and velocity. The JointState
  protocol of the gravity service (correlation id in ``header.frame_id``, error replies
  ``name = ['error: <message>']``); the base pose and twist under the names
  ``base_x ... base_qw`` (docs/interfaces.md);
- for every ``joint_states`` message, paired with the latest base state, ``com``
  (geometry_msgs/PointStamped, frame ``world_frame``) and ``momentum`` (JointState,
  names ``p_x p_y p_z L_x L_y L_z``, values in ``effort``). The base state comes from
  the config's ``floating_base.odometry_topic`` (nav_msgs/Odometry), or, without one,
  from the stance foot (``floating_base.stance_foot``/``stance_foot_pose``) by
  kinematics;
- ``robot_description_identified`` (the URDF with the identified inertias) and
  ``~/model`` (the model file's YAML), transient_local; ``diagnostics``; ``~/reload``.

Without a model file and no fit in the model directory it serves the nominal URDF's
parameters with a warning, and switches to the fit as soon as one appears (the
file is polled). Every model file passes the model gate (arm_dyn_id.model.gate): one
that fails at start (the one named, or the latest fit) is one FATAL line and exit 2; at
a reload the served model stays. ``accept_rejected`` / ``accept_other_urdf`` are the
opt-ins. See docs/floating_base.md ("Serving").
"""

import json
import math
import threading
from pathlib import Path

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped
from nav_msgs.msg import Odometry
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from arm_dyn_id.config import file_sha256
from arm_dyn_id.data.joint_states import Rejection
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError
from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel
from arm_dyn_id.model.gate import ModelRefused, admit_model, admit_urdf
from arm_dyn_id.nodes.executors import (
    create_command_node, publish_diagnostics, run_node, try_publish)
from arm_dyn_id.nodes.params import (
    Param, arm_config, declare_arm_parameters, declare_parameters)
from arm_dyn_id.nodes.qos import LATCHED_QOS, stream_qos
from arm_dyn_id.service.floating import (
    COM_NAMES, MOMENTUM_NAMES, BasePairing, ServedFloating, base_from_odometry, no_model)
from arm_dyn_id.service.model_dir import latest_model_file, resolve_model_dir

NODE_NAME = 'floating_model_node'
NOMINAL = 'nominal URDF'


def _stamp(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


class FloatingModelNode(Node):
    """Serve a floating-base model: CoM and momentum queries and streams."""

    node_name = NODE_NAME

    def __init__(self):
        super().__init__(NODE_NAME)
        declare_arm_parameters(self)
        self.config = arm_config(self, NODE_NAME)
        fb = getattr(self.config, 'floating_base', None)
        if fb is None:
            raise ConfigError(f'{NODE_NAME}: {self.config.source} has no floating_base '
                              'section: this node serves floating-base robots (see '
                              'docs/floating_base.md); a fixed arm is served by '
                              'identifier_node')
        self.floating_base = fb
        values = declare_parameters(self, [
            Param('model_file', '', 'floating model YAML to serve (path); empty: '
                  '<model_dir>/latest/model.yaml, or the nominal URDF until a fit appears',
                  read_only=True),
            Param('model_dir', '', 'absolute folder of the fits (a latest link); empty: '
                  '$ROS_HOME/arm_dyn_id/<robot_name>', read_only=True),
            Param('model_poll_period', 1.0, 'period of the model file modification check (s)',
                  read_only=True, low=0.05, high=3600.0),
            Param('max_base_age', 0.5, 'largest time between a joint_states stamp and the '
                  'base state paired with it (s); older: not streamed', read_only=True,
                  low=1e-4, high=3600.0),
            Param('world_frame', 'world', 'frame_id of the com and momentum streams',
                  read_only=True),
            Param('diagnostics_period', 1.0, 'period of diagnostics messages (s)',
                  read_only=True, low=0.05, high=60.0),
            Param('queue_depth', 1000, 'QoS depth of joint_states, odometry, query and '
                  'stream topics (messages)', read_only=True, low=1, high=100000),
            Param('accept_rejected', False, 'serve a model file marked rejected (arm-dyn-id '
                  'fit --force wrote it although it predicts worse than the URDF)',
                  read_only=True),
            Param('accept_other_urdf', False, 'serve a model file fitted with another URDF '
                  'than the config\'s (kinematics may not match)', read_only=True),
        ], self.config)
        self.accept = {'allow_rejected': values['accept_rejected'],
                       'allow_other_urdf': values['accept_other_urdf']}
        self.world_frame = values['world_frame']
        try:
            self.model_root = resolve_model_dir(values['model_dir'], self.config.robot_name)
            self.nominal_model = FloatingModel(self.config.urdf)
        except (ConfigError, URDFError) as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc
        self.explicit = bool(values['model_file'])
        self.model_file = values['model_file'] or str(latest_model_file(self.model_root))
        self.pairing = BasePairing(values['max_base_age'])
        if fb.odometry_topic:
            self.base_source = f'odometry ({fb.odometry_topic})'
        elif fb.stance_foot is not None and fb.stance_foot_pose is not None:
            self.base_source = f'stance foot {fb.stance_foot}'
        else:
            self.base_source = 'none'
        self.counts = {k: 0 for k in (
            'com_queries', 'com_query_errors', 'momentum_queries', 'momentum_query_errors',
            'com_stream', 'momentum_stream', 'stream_skipped', 'momentum_skipped',
            'odometry', 'odometry_rejected')}
        self.errors = {}
        self.served = None
        self.model_source = ''
        self.urdf_status = 'no model yet'
        self.reload_error = ''
        self.warnings = []
        self._seen_stat = None
        self._lock = threading.Lock()
        self._throttle = 5.0

        depth = values['queue_depth']
        streams = stream_qos(depth)
        self.model_pub = self.create_publisher(String, '~/model', LATCHED_QOS)
        self.urdf_pub = self.create_publisher(String, 'robot_description_identified', LATCHED_QOS)
        self.com_result_pub = self.create_publisher(JointState, 'com_result', streams)
        self.momentum_result_pub = self.create_publisher(JointState, 'momentum_result', streams)
        self.com_pub = self.create_publisher(PointStamped, 'com', streams)
        self.momentum_pub = self.create_publisher(JointState, 'momentum', streams)
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        self.create_subscription(JointState, 'com_query', self._on_com_query, streams)
        self.create_subscription(JointState, 'momentum_query', self._on_momentum_query,
                                 streams)
        self.create_subscription(JointState, 'joint_states', self._on_state, streams)
        if fb.odometry_topic:
            self.create_subscription(Odometry, fb.odometry_topic, self._on_odometry, streams)
        self.commands = self._create_command_node(values)

        ok, message = self.load()
        if not ok:
            # a model file that cannot be served (the one named, or the latest fit) is a
            # configuration error: the node does not run serving something else instead
            raise ConfigError(f'{NODE_NAME}: {message}' + (
                '' if self.explicit else '; fix or remove that fit (the nominal URDF is '
                'served only when model_dir holds no fit)'))
        self.get_logger().info(f'{message}; base state from {self.base_source}')
        if self.base_source == 'none':
            self.get_logger().warning(
                'floating_base has neither odometry_topic nor stance_foot with '
                'stance_foot_pose: the com and momentum streams stay silent (queries work)')

    # -- the model --------------------------------------------------------
    def _nominal(self):
        fb = self.floating_base
        model = self.nominal_model
        ident = FloatingIdentification(
            self.config.robot_name, str(self.config.urdf), file_sha256(self.config.urdf),
            fb.method, 'nominal', model.body_names, model.parameters(), fb.total_mass,
            provenance={'source': 'the nominal URDF: no fitted model'})
        return ServedFloating(ident, model=model)

    def load(self):
        """(Re)load ``model_file``; (success, message). Without a file and none given,
        the nominal URDF is served. A file that fails keeps the served model."""
        path = Path(self.model_file)
        with self._lock:
            try:
                self._seen_stat = self._stat(path)
            except OSError:
                self._seen_stat = None
            if not path.is_file():
                if self.explicit:
                    return False, f'model_file {path} does not exist'
                if self.served is None:
                    try:
                        admit_urdf(self.config.urdf)
                    except ModelRefused as exc:
                        return False, f'no fitted model at {path}, and the nominal {exc}'
                    self._install(self._nominal(), NOMINAL)
                    message = (f'no fitted model at {path}: serving the nominal URDF '
                               f'{self.config.urdf} until a fit appears there')
                    self.warnings = [message]
                    self.get_logger().warning(message)
                    return True, message
                return False, f'{path} does not exist (still serving {self.model_source})'
            try:
                ident = admit_model(path, urdf=self.config.urdf, kinds=('floating',),
                                    what='model_file', **self.accept)
                model = ident.model()
                if set(model.joint_names) != set(self.config.joints):
                    raise DataError(f'{path}: model joints {list(model.joint_names)} are not '
                                    f'the config joints {list(self.config.joints)}')
                served = ServedFloating(ident, model=model)
                text = path.read_text()
            except (DataError, ConfigError, URDFError, JointNameError, OSError) as exc:
                self.reload_error = str(exc)
                self._error('reload failed')
                if self.served is not None:
                    self.get_logger().error(f'model reload failed, still serving '
                                            f'{self.model_source}: {exc}')
                return False, str(exc)
            self.warnings = list(ident.warnings)
            for warning in self.warnings:
                self.get_logger().warning(warning)
            self.reload_error = ''
            self._install(served, str(path), text)
            return True, f'loaded {path}: {served.describe()}'

    def _install(self, served, source, text=None):
        try:
            urdf = served.floating.identified_urdf(served.phi)
            self.urdf_status = 'published'
        except DataError as exc:
            urdf, self.urdf_status = None, f'not published: {exc}'
        if text is None:
            text = yaml.safe_dump(served.identification.to_dict(), sort_keys=False)
        self.served = served        # one reference: the callbacks take no lock
        self.model_source = source
        self.model_pub.publish(String(data=text))
        if urdf is not None:
            self.urdf_pub.publish(String(data=urdf))

    @staticmethod
    def _stat(path):
        st = Path(path).stat()
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _poll_model_file(self):
        try:
            stat = self._stat(self.model_file)
        except OSError:
            return
        if stat != self._seen_stat:
            self.get_logger().info(f'{self.model_file} changed: reloading')
            self.load()

    # -- callbacks ----------------------------------------------------------
    def _error(self, kind):
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def _reply(self, publisher, msg, answer, names, values, kind):
        out = JointState()
        out.header = msg.header
        if isinstance(answer, Rejection):
            out.name = [f'error: {answer.detail}']
            self.counts[f'{kind}_query_errors'] += 1
            self._error(f'{kind}_query: {answer.reason}')
        else:
            out.name = list(names)
            out.effort = [float(v) for v in values]
            self.counts[f'{kind}_queries'] += 1
        try_publish(self, publisher, out)

    def _on_com_query(self, msg):
        served = self.served
        answer = no_model() if served is None else served.query_com(msg.name, msg.position)
        self._reply(self.com_result_pub, msg, answer, COM_NAMES,
                    None if isinstance(answer, Rejection) else answer[1], 'com')

    def _on_momentum_query(self, msg):
        served = self.served
        answer = no_model() if served is None else \
            served.query_momentum(msg.name, msg.position, msg.velocity)
        self._reply(self.momentum_result_pub, msg, answer, MOMENTUM_NAMES,
                    None if isinstance(answer, Rejection) else answer[2], 'momentum')

    def _on_odometry(self, msg):
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
        state = base_from_odometry(_stamp(msg), (p.x, p.y, p.z), (o.x, o.y, o.z, o.w),
                                   (lin.x, lin.y, lin.z), (ang.x, ang.y, ang.z),
                                   msg.child_frame_id, self.floating_base.base_frame)
        if isinstance(state, Rejection):
            self.counts['odometry_rejected'] += 1
            self._error(f'odometry: {state.reason}')
            self.get_logger().warning(
                f'odometry rejected ({state.reason}): {state.detail}; '
                f'{self.counts["odometry_rejected"]} so far',
                throttle_duration_sec=self._throttle)
            return
        self.counts['odometry'] += 1
        self.pairing.update(state)

    def _skip(self, key, rejection, what):
        self.counts[key] += 1
        self._error(f'{what}: {rejection.reason}')
        self.get_logger().warning(f'joint_states message gives no {what} ({rejection.reason}):'
                                  f' {rejection.detail}', throttle_duration_sec=self._throttle)

    def _on_state(self, msg):
        served = self.served
        if served is None or self.base_source == 'none':
            self.counts['stream_skipped'] += 1
            return
        sample = served.stream_joints(msg.name, msg.position, msg.velocity)
        if isinstance(sample, Rejection):
            self._skip('stream_skipped', sample, 'stream')
            return
        stamp = _stamp(msg)
        fb = self.floating_base
        if fb.odometry_topic:
            base = self.pairing.pair(stamp)
        else:
            try:
                base = served.base_from_stance_foot(stamp, sample.position, fb.stance_foot,
                                                    fb.stance_foot_pose, sample.velocity)
            except np.linalg.LinAlgError:
                base = Rejection('singular_foot', 'the stance foot Jacobian is singular')
        if isinstance(base, Rejection):
            self._skip('stream_skipped', base, 'stream')
            return
        com = served.stream_com(base, sample.position)
        point = PointStamped()
        point.header.stamp = msg.header.stamp
        point.header.frame_id = self.world_frame
        point.point.x, point.point.y, point.point.z = (float(c) for c in com)
        if try_publish(self, self.com_pub, point):
            self.counts['com_stream'] += 1
        if sample.velocity is None:
            self.counts['momentum_skipped'] += 1
            return
        h = served.stream_momentum(base, sample.position, sample.velocity)
        if isinstance(h, Rejection):
            self._skip('momentum_skipped', h, 'momentum')
            return
        out = JointState()
        out.header.stamp = msg.header.stamp
        out.header.frame_id = self.world_frame
        out.name = list(MOMENTUM_NAMES)
        out.effort = [float(v) for v in h]
        if try_publish(self, self.momentum_pub, out):
            self.counts['momentum_stream'] += 1

    # -- services, timers, diagnostics ----------------------------------------
    def _create_command_node(self, values):
        commands = create_command_node(self)
        base = self.get_fully_qualified_name()
        commands.create_service(Trigger, f'{base}/reload', self._reload_srv,
                                callback_group=ReentrantCallbackGroup())
        timers = MutuallyExclusiveCallbackGroup()
        commands.create_timer(values['diagnostics_period'], self._publish_diagnostics,
                              callback_group=timers)
        commands.create_timer(values['model_poll_period'], self._poll_model_file,
                              callback_group=timers)
        return commands

    def _reload_srv(self, request, response):
        response.success, response.message = self.load()
        return response

    def _publish_diagnostics(self):
        served = self.served
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: floating-base model service'
        status.hardware_id = self.config.robot_name
        problems = []
        if self.model_source == NOMINAL:
            problems.append(f'serving the nominal URDF (no fitted model at {self.model_file})')
        if self.reload_error:
            problems.append(f'reload failed (serving the previous model): {self.reload_error}')
        if self.counts['odometry_rejected']:
            problems.append(f'{self.counts["odometry_rejected"]} odometry messages rejected')
        status.level = DiagnosticStatus.OK if not problems else DiagnosticStatus.WARN
        status.message = '; '.join(problems) or f'serving {self.model_source}'
        values = {
            'model_source': self.model_source,
            'model_file': self.model_file,
            'method': served.identification.method if served else '',
            'estimator': served.identification.estimator if served else '',
            'total_mass': served.total_mass if served else math.nan,
            'fast_path': served.exact if served else False,
            'urdf': self.urdf_status,
            'base_source': self.base_source,
            'reload_error': self.reload_error,
            'warnings': json.dumps(self.warnings),
            'errors': json.dumps(self.errors),
            'publish_failures': json.dumps(getattr(self, 'publish_failures', {})),
            **{k: v for k, v in self.counts.items()},
        }
        publish_diagnostics(self, status, values)


def main(args=None):
    """Run the node and its service helper (nodes/executors.py); returns the exit code."""
    return run_node(FloatingModelNode, args, split=True)


if __name__ == '__main__':
    raise SystemExit(main())
