"""Gravity compensation node: joint_states in, effort (or current) commands out.

For every ``joint_states`` message it publishes the model's gravity torque, plus an
optional friction feed-forward, clamped to the URDF effort limits, as
``std_msgs/Float64MultiArray`` on ``<controller>/commands`` - the input of
ros2_control's ``effort_controllers/JointGroupEffortController`` (``output: effort``,
N·m) or of a current-controlled driver (``output: current``, A = N·m / k). The
array is in the order of ``joints``: configure the controller's ``joints`` alike.

The model: ``model_file`` (a model YAML written by ``arm-dyn-id fit`` or the
identifier), else the identifier's ``model_topic`` (``std_msgs/String`` YAML,
transient_local; the newest one is used), or ``nominal_urdf: true`` for the URDF's
own inertial values. ``output: current`` divides by the configured torque constants,
else by those of the model file (its ``measurement`` section: a model fitted from
currents needs no constants configured); the diagnostics say which.

Safety: when no usable ``joint_states`` arrived for ``stale_timeout`` s the node
publishes zeros (every ``stale_timeout / 2`` s while stale), logs a warning once and
reports ``stale`` in ``diagnostics``; fresh states resume the compensation.

At run time: ``gravity_vector`` (m/s², URDF root frame: tilted, wall or ceiling
mounts), ``payload_mass`` / ``payload_com`` / ``payload_frame`` and the friction
parameters may be set (``ros2 param set``). Core: arm_dyn_id.service.compensation;
docs/compensation.md.
"""

import json
import threading
import time

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String

from arm_dyn_id.config import ArmConfig, load_arm_config, read_parameter_file
from arm_dyn_id.data.joint_states import Rejection
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError
from arm_dyn_id.model.gate import ModelRefused, admit_doc, admit_model, admit_urdf
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.nodes.executors import (
    create_command_node, publish_diagnostics, run_node, try_publish)
from arm_dyn_id.nodes.params import (
    Param, declare_arm_parameters, declare_parameters, descriptor, given_arm_parameters, plain)
from arm_dyn_id.nodes.qos import LATCHED_QOS
from arm_dyn_id.service.compensation import (
    ACTIVE, OUTPUTS, STALE, Compensator, GravityTorques, friction_feedforward,
    gravity_vector_from, model_friction, output_gains)
from arm_dyn_id.service.gravity import payload_from

NODE_NAME = 'gravity_compensation_node'
ARM_FIELDS = ('joints', 'urdf', 'torque_constants', 'current_signs', 'gear_ratios',
              'efficiencies')
#: Parameters that act while running.
RUNTIME = ('gravity_vector', 'payload_mass', 'payload_com', 'payload_frame',
           'friction_compensation', 'friction_breakaway_velocity', 'friction_coulomb',
           'friction_viscous')


class GravityCompensationNode(Node):
    """Publish gravity (and friction) compensation for every joint state (module docstring)."""

    node_name = NODE_NAME

    def __init__(self):
        super().__init__(NODE_NAME)
        self._lock = threading.Lock()
        declare_arm_parameters(self, ARM_FIELDS)
        self.declare_parameter('output', 'effort', descriptor(
            f'what is published: {" or ".join(OUTPUTS)} (N·m, or A = N·m / k_e for '
            'current-controlled drivers)', read_only=True))
        output = self.get_parameter('output').value
        if output not in OUTPUTS:
            raise ConfigError(f'parameter output = {output!r} must be one of {list(OUTPUTS)}')
        self.config = self._load_config()
        p = self._declare(output)
        self.robot = self._robot()
        self.model = None
        self.model_source = 'none yet'
        self.compensator = None
        self.notes = []
        self.reload_error = ''
        self._stale_since = None
        self._last_rejection = ''
        self._extra = {'publish_failures': 0}

        controller = p['controller']
        self.topic = f'{controller}/commands' if controller else 'commands'
        # ForwardCommandController subscribes with SystemDefaultsQoS (reliable)
        self.pub = self.create_publisher(Float64MultiArray, self.topic, QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE))
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        # only the newest joint state matters; best effort matches any publisher
        self.create_subscription(JointState, 'joint_states', self._on_state, QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=1,
            reliability=ReliabilityPolicy.BEST_EFFORT))
        self.commands = create_command_node(self)
        self._msg = Float64MultiArray()
        dim = MultiArrayDimension(label='joints', size=self.config.n_joints,
                                  stride=self.config.n_joints)
        self._msg.layout.dim = [dim]

        # every model passes the model gate (arm_dyn_id.model.gate): a refusal at start is
        # one FATAL line and exit 2, a refused model_topic message keeps the served model
        self.accept = {'allow_rejected': p['accept_rejected'],
                       'allow_other_urdf': p['accept_other_urdf']}
        if p['nominal_urdf']:
            try:
                admit_urdf(self.config.urdf)
            except ModelRefused as exc:
                raise ConfigError(f'nominal_urdf: {exc}') from exc
            self._use(None, 'URDF nominal parameters')
        elif p['model_file']:
            try:
                model = self._joints_of(admit_model(
                    p['model_file'], urdf=self.config.urdf, what='model_file', **self.accept))
            except ModelRefused as exc:
                raise ConfigError(str(exc)) from exc
            self._use(model, f'model file {p["model_file"]}')
        elif p['model_topic']:
            self.commands.create_subscription(String, p['model_topic'], self._on_model,
                                              LATCHED_QOS)
            self.get_logger().info(f'waiting for a model on {p["model_topic"]}; nothing is '
                                   'published until one arrives')
        else:
            raise ConfigError('no model: give model_file, model_topic (e.g. '
                              '/identifier_node/model) or nominal_urdf:=true')
        self.add_on_set_parameters_callback(self._on_set_parameters)
        timeout = p['stale_timeout']
        self.commands.create_timer(timeout / 2.0, self._check_stale)
        self.commands.create_timer(p['diagnostics_period'], self._publish_diagnostics)
        self.get_logger().info(
            f'{self.config.robot_name}: {output} commands on {self.pub.topic_name} for '
            f'{list(self.config.joints)}; gravity {self.gravity_vector.tolist()} m/s²; '
            f'zeros after {timeout:g} s without joint_states')

    # -- configuration ---------------------------------------------------------
    def _load_config(self):
        path = self.get_parameter('config_file').value
        overrides = given_arm_parameters(self, ARM_FIELDS)
        # output current: torque constants not configured come from the model file
        options = {'need_limits': False, 'need_torque_constants': False}
        if path:
            config = load_arm_config(path, node_name=NODE_NAME, overrides=overrides, **options)
            given = read_parameter_file(config.source, NODE_NAME)
        elif not overrides:
            raise ConfigError('parameter config_file is empty: give the arm config YAML')
        else:
            config, given = ArmConfig.from_params(overrides, **options), {}
        self._gains_configured = 'torque_constants' in overrides or 'torque_constants' in given
        return config

    def _declare(self, output):
        config = self.config
        values = declare_parameters(self, [
            Param('controller', 'effort_controller', 'controller whose <controller>/commands '
                  'receives the array (JointGroupEffortController)', read_only=True),
            Param('model_file', '', 'model YAML to serve (path); empty: model_topic',
                  read_only=True),
            Param('model_topic', '', 'std_msgs/String model YAML topic (transient_local), '
                  'e.g. /identifier_node/model; used when model_file is empty', read_only=True),
            Param('nominal_urdf', False, 'compensate with the URDF\'s nominal inertial '
                  'parameters instead of an identified model', read_only=True),
            Param('accept_rejected', False, 'use a model marked rejected (arm-dyn-id fit '
                  '--force wrote it although the data could not support it)', read_only=True),
            Param('accept_other_urdf', False, 'use a model fitted with another URDF than the '
                  'config\'s (kinematics may not match)', read_only=True),
            Param('gravity_vector', [float(v) for v in config.gravity_vector],
                  'gravity [gx, gy, gz] in the URDF root frame (m/s^2): floor [0, 0, -9.81]; '
                  'tilted, wall or ceiling mounts rotate it. Changeable at run time'),
            Param('payload_mass', 0.0, 'payload mass at payload_frame (kg); changeable at run '
                  'time', low=0.0, high=1000.0),
            Param('payload_com', [0.0, 0.0, 0.0], 'payload centre of mass [x, y, z] in '
                  'payload_frame (m)'),
            Param('payload_frame', 'flange', 'URDF frame carrying the payload'),
            Param('friction_compensation', 0.0, 'fraction of the friction fed forward (1): '
                  '0 off, 1 full', low=0.0, high=1.0),
            Param('friction_breakaway_velocity', 0.05, 'velocity of the tanh replacing '
                  'sign(v) in the Coulomb feed-forward (rad/s)', low=1e-6, high=10.0),
            Param('friction_coulomb', None, 'Coulomb friction per joint (N·m); unset: the '
                  'model\'s (0 where it has none)'),
            Param('friction_viscous', None, 'viscous friction per joint (N·m·s/rad); unset: '
                  'the model\'s (0 where it has none)'),
            Param('effort_limits', None, 'clamp per joint (N·m); unset: the URDF\'s <limit '
                  'effort>', read_only=True),
            Param('stale_timeout', 0.1, 'zeros are sent after this long without a usable '
                  'joint_states message (s)', read_only=True, low=1e-3, high=10.0),
            Param('diagnostics_period', 1.0, 'period of diagnostics messages (s)',
                  read_only=True, low=0.05, high=60.0),
        ], config)
        self.gravity_vector = gravity_vector_from(values['gravity_vector'])
        self.payload = self._payload(values)
        self._friction_values = {k: values[k] for k in RUNTIME if k.startswith('friction')}
        if values['effort_limits'] is not None:
            self._effort_limits = np.asarray(values['effort_limits'], dtype=float)
        else:
            self._effort_limits = None
        self.output = output
        return values

    @staticmethod
    def _payload(values):
        try:
            return payload_from(values['payload_mass'], values['payload_com'],
                                values['payload_frame'])
        except (ValueError, TypeError) as exc:
            raise ConfigError(f'parameter {exc}') from exc

    def _robot(self):
        try:
            return RobotModel.from_config(self.config)
        except (JointNameError, URDFError) as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc

    def _joints_of(self, model):
        """``model`` if it has the config's joints (in any order: the controller's), else
        ModelRefused ``other_robot``."""
        if sorted(model.joint_names) != sorted(self.config.joints):
            raise ModelRefused(f'model {model.gate["file"]} is of joints '
                               f'{list(model.joint_names)}, the config has '
                               f'{list(self.config.joints)}: a model of another robot',
                               'other_robot', model.gate['file'])
        return model

    def _friction(self, model, values):
        """(FrictionFeedforward, notes): the model's friction where it is physical, the
        values given by the user where given (service.compensation.friction_feedforward)."""
        n = self.config.n_joints
        fc, fv = (model_friction(model) if model is not None else
                  (np.full(n, np.nan), np.full(n, np.nan)))
        order = [list(self.robot.joint_names).index(j) for j in self.config.joints] \
            if model is None else [list(model.joint_names).index(j) for j in self.config.joints]
        law = getattr(model, 'friction_model', None)
        return friction_feedforward(fc[order], fv[order], self.config.joints,
                                    values.get('friction_coulomb'),
                                    values.get('friction_viscous'),
                                    values['friction_breakaway_velocity'],
                                    values['friction_compensation'],
                                    model_width=law.smooth_velocity if law is not None and
                                    law.coulomb == 'tanh' else 0.0)

    def _gravity(self, model, gravity_vector, payload):
        if model is None:
            return GravityTorques.from_robot(self.robot, gravity_vector, payload)
        return GravityTorques.from_model(model, gravity_vector, payload)

    def _build(self, model, gravity_vector, payload, friction_values):
        """A new Compensator (slow part: pinocchio copies), not yet in use."""
        gravity = self._gravity(model, gravity_vector, payload)
        friction, notes = self._friction(model, friction_values)
        gains, source = output_gains(self.output, self.config.joints, model,
                                     self.config if self._gains_configured else None)
        compensator = Compensator(
            gravity, joints=self.config.joints, effort_limits=self._effort_limits,
            output=self.output, torque_gains=gains, gains_source=source, friction=friction,
            stale_timeout=float(self.get_parameter('stale_timeout').value))
        return compensator, notes

    def _use(self, model, source):
        compensator, friction_notes = self._build(model, self.gravity_vector, self.payload,
                                                  self._friction_values)
        with self._lock:
            old = self.compensator
            if old is not None:
                # keep the freshness of the input across a model swap
                compensator._last, compensator.state = old._last, old.state
                compensator.counts = old.counts
            self.model, self.model_source, self.compensator = model, source, compensator
            self.notes = self._notes(compensator, friction_notes, model)
            self.reload_error = ''
        self.get_logger().info(f'compensating with {source}; effort limits '
                               f'{compensator.effort_limits.tolist()} N·m' + (
                                   f'; currents by the {compensator.gains_source}'
                                   if compensator.gains_source else ''))
        for note in self.notes:
            self.get_logger().warning(note)

    def _on_model(self, msg):
        topic = self.get_parameter('model_topic').value
        try:
            try:
                doc = yaml.safe_load(msg.data)
            except yaml.YAMLError as exc:
                raise ModelRefused(f'model on {topic} is not valid YAML '
                                   f'({getattr(exc, "problem", None) or type(exc).__name__})',
                                   'unreadable', topic) from None
            model = self._joints_of(admit_doc(doc, source=topic, urdf=self.config.urdf,
                                              what='model on', **self.accept))
            self._use(model, 'model from ' + topic)
        except (ConfigError, DataError, URDFError, JointNameError, ValueError) as exc:
            # one error line; the model served so far (if any) stays in use
            self.reload_error = str(exc)
            self.get_logger().error(f'{exc}; ' + (
                f'still compensating with {self.model_source}' if self.compensator else
                'no model in use yet: nothing is published until one is accepted'))

    def _on_set_parameters(self, params):
        changes = {p.name: plain(p.value) for p in params}
        if not set(changes) & set(RUNTIME) or not hasattr(self, 'output'):
            return SetParametersResult(successful=True)
        p = self.get_parameter
        values = {name: changes.get(name, plain(p(name).value)) for name in RUNTIME}
        try:
            gravity_vector = gravity_vector_from(values['gravity_vector'])
            payload = self._payload(values)
            friction_values = {k: values[k] for k in RUNTIME if k.startswith('friction')}
            if self.compensator is not None or self.model is not None:
                compensator, friction_notes = self._build(self.model, gravity_vector, payload,
                                                          friction_values)
            else:
                compensator, friction_notes = None, []
        except (ConfigError, ValueError, TypeError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        with self._lock:
            self.gravity_vector, self.payload = gravity_vector, payload
            self._friction_values = friction_values
            if compensator is not None:
                old = self.compensator
                compensator._last, compensator.state = old._last, old.state
                compensator.counts = old.counts
                self.compensator = compensator
                self.notes = self._notes(compensator, friction_notes, self.model)
        what = 'none' if payload is None else f'{payload.mass:g} kg at {list(payload.com)} m'
        self.get_logger().info(f'now: gravity {gravity_vector.tolist()} m/s², payload {what}, '
                               f'friction fraction {values["friction_compensation"]:g}')
        return SetParametersResult(successful=True)

    @staticmethod
    def _notes(compensator, friction_notes, model):
        """The diagnostics' notes: the compensator's and its friction's, and what the model
        gate admitted the model with (a fit's warning among them), after every rebuild."""
        return list(compensator.gravity.notes) + friction_notes + list(
            (getattr(model, 'metadata', None) or {}).get('warnings', []))

    # -- the hot path ------------------------------------------------------------
    def _on_state(self, msg):
        with self._lock:
            compensator = self.compensator
            if compensator is None:
                return
            was = compensator.state
            result = compensator.update(time.monotonic(), msg.name, msg.position, msg.velocity)
            if isinstance(result, Rejection):
                self._last_rejection = f'{result.reason}: {result.detail}'
                self.get_logger().warning(
                    f'joint_states rejected ({result.reason}): {result.detail}; '
                    f'{compensator.counts["rejected"]} so far', throttle_duration_sec=5.0)
                return
            self._publish(result.values)
        if was == STALE:
            self.get_logger().info(f'joint_states back after {self._stale_for():.3f} s: '
                                   'compensating again')
            self._stale_since = None

    def _publish(self, values):
        self._msg.data = values.tolist()
        if not try_publish(self, self.pub, self._msg):
            self._extra['publish_failures'] += 1

    def _stale_for(self):
        return 0.0 if self._stale_since is None else time.monotonic() - self._stale_since

    def _check_stale(self):
        with self._lock:
            compensator = self.compensator
            if compensator is None:
                return
            now = time.monotonic()
            zeros, became = compensator.poll(now)
            if zeros is not None:
                self._publish(zeros.values)
            age = compensator.age(now)
        if became:
            self._stale_since = now
            self.get_logger().warning(
                f'joint_states stale: none usable for {age:.3f} s (stale_timeout '
                f'{compensator.stale_timeout:g} s); sending zeros on {self.pub.topic_name} '
                'until they come back')

    def _publish_diagnostics(self):
        compensator = self.compensator
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: gravity compensation'
        status.hardware_id = self.config.robot_name
        state = compensator.state if compensator is not None else 'no model'
        if state == ACTIVE:
            status.level = DiagnosticStatus.OK
            status.message = f'compensating ({self.output}) with {self.model_source}'
        elif state == STALE:
            status.level = DiagnosticStatus.WARN
            status.message = (f'joint_states stale for {self._stale_for():.2f} s: sending '
                              'zeros')
        else:
            status.level = DiagnosticStatus.WARN
            status.message = ('no model yet' if compensator is None else
                              'waiting for joint_states')
        if self.reload_error:
            status.level = DiagnosticStatus.WARN
            using = f'still compensating with {self.model_source}' if compensator is not None \
                else 'none in use yet'
            status.message += f'; model refused ({using}): {self.reload_error}'
        counts = compensator.counts if compensator is not None else {}
        values = {
            'state': state,
            'model_source': self.model_source,
            'output': self.output,
            'torque_constants_from': compensator.gains_source if compensator is not None
            else '',
            'topic': self.pub.topic_name,
            'gravity_vector': json.dumps(self.gravity_vector.tolist()),
            'payload': 'none' if self.payload is None else
            f'{self.payload.mass:g} kg at {list(self.payload.com)} m in {self.payload.frame}',
            'friction_fraction': self._friction_values['friction_compensation'],
            'joint_state_age_s': f'{compensator.age(time.monotonic()):.4f}'
            if compensator is not None else 'inf',
            'last_rejection': self._last_rejection,
            'reload_error': self.reload_error,
            'notes': json.dumps(self.notes),
            'publish_failures': self._extra['publish_failures'],
        }
        values.update(counts)
        publish_diagnostics(self, status, values)


def main(args=None):
    """Run the node (nodes/executors.py ``run_node``): 0 on Ctrl-C, 2 on a bad config."""
    return run_node(GravityCompensationNode, args, split=True, threads=2)


if __name__ == '__main__':
    raise SystemExit(main())
