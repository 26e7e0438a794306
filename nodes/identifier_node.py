"""Identifier node: fits the gravity or the full-dynamics model live and serves it.

Accumulates ``joint_torques`` (sensor_msgs/JointState, effort in N·m) and
``excitation_segments`` markers, fits on ``~/fit`` or when the excitation is
``done`` (in a worker thread): gravity or full dynamics, chosen by the ``dynamics``
parameter (``auto``: the pipeline's choose_dynamics, a Fourier plan -> full). What is
done with the samples (the fit and its gate, the folder, the contact thresholds,
``~/check``, ``~/identify_payload``) is arm_dyn_id.service.live_fit; what serves a model
is arm_dyn_id.service.live_model. This node is their wiring.

It publishes the model on ``~/model`` (YAML) and ``robot_description_identified`` (URDF,
arm_dyn_id.model.export), both transient_local, with the base parameters as parameters
``base_parameters.<name>``, and writes every fit to
``<model_dir>/<YYYYmmdd-HHMMSS>/`` with a ``latest`` link (arm_dyn_id.service.model_dir).

Serves G(q): a ``gravity_torques`` message for every ``joint_states`` message,
and ``gravity_query`` -> ``gravity_result`` queries matched by ``header.frame_id``
(error replies: empty effort, ``name = ['error: <message>']``). A full model also
answers ``dynamics_query`` -> ``dynamics_result`` (inverse dynamics, rigid body and
friction apart) and streams, for every ``joint_states``, ``model_torques``,
``external_torques`` (the momentum-observer residual) and ``contact``
(arm_dyn_id.service.dynamics). With ``serve_only: true`` it only serves
``model_file`` (default ``<model_dir>/latest/model.yaml``) and reloads it when it
changes; without ``config_file`` the model file's own URDF and joints are used (any arm).
Every model file passes the model gate (arm_dyn_id.model.gate): one refused at start, or
nothing to serve in serve_only, is one FATAL line and exit 2; at a reload the previous
model stays served and the log and diagnostics (``reload_error``) say why.
``accept_rejected`` / ``accept_other_urdf`` are the opt-ins. ``~/identify_payload`` /
``~/apply_payload`` identify a payload from the recent samples with the arm model frozen
and add it to the served model.

``~/check`` runs the pre-flight check (arm_dyn_id.validation.check) on the samples
held: the measured torques of the still or slow parts against the URDF's gravity,
answering with the table (success false when a sign, a swap or a scale fails).

The Trigger services ``~/fit``, ``~/check``, ``~/save``, ``~/reload`` live on a small helper
node spun in its own thread: a fit takes seconds and its reply waits for it, while
the 1 kHz paths keep running on the EventsExecutor. See docs/identifier.md.
"""

import concurrent.futures
import json
import math
import threading
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from arm_dyn_id.data.angles import unwrap_note
from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError
from arm_dyn_id.identification.estimators import ESTIMATORS
from arm_dyn_id.model.export import InconsistentParametersError, identified_urdf
from arm_dyn_id.model.gate import ModelRefused, admit_model
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.nodes.executors import (
    create_command_node, publish_diagnostics, run_node, try_publish)
from arm_dyn_id.nodes.messages import StreamMessage, joint_state
from arm_dyn_id.nodes.qos import LATCHED_QOS, MARKER_QOS, stream_qos
from arm_dyn_id.nodes.query_first import QueryFirst
from arm_dyn_id.nodes.params import (
    Param, arm_config, declare_arm_parameters, declare_parameters, descriptor)
from arm_dyn_id.service.dynamics import is_full
from arm_dyn_id.service.gravity import payload_from
from arm_dyn_id.service.friction_drift import TrackerSettings, state_path
from arm_dyn_id.service.live_fit import (
    FitSettings, check_held_samples, fit_samples, fit_thresholds, payload_from_samples,
    without_warnings, write_live_fit)
from arm_dyn_id.service.live_model import (
    LiveFriction, LiveModel, LiveWatch, ResidualSettings, build_served)
from arm_dyn_id.service.model_dir import (
    latest_model_file, render_report, resolve_model_dir)
from arm_dyn_id.service.payload_watch import WatchSettings
from arm_dyn_id.service.samples import MarkerLog, SampleBuffer

NODE_NAME = 'identifier_node'
BASE_PREFIX = 'base_parameters.'
ARM_FIELDS = ('joints', 'urdf')     # arm config fields that parameters may override
FIT_TIMEOUT = 600.0     # s a Trigger reply waits for a fit
DYNAMICS_MODES = ('auto', 'gravity', 'full')
EFFORT_KINDS = ('auto', 'current', 'torque')


class IdentifierNode(Node):
    """Fit the gravity or full-dynamics model from live data and serve it."""

    node_name = NODE_NAME

    def __init__(self):
        super().__init__(NODE_NAME)
        self.config = self._load_config()
        self._declare_parameters()
        p = self.get_parameter
        self.serve_only = p('serve_only').value
        self.model_file = p('model_file').value
        self.methods = tuple(p('methods').value)
        self.fit_on_done = p('fit_on_done').value
        self.gravity = p('gravity').value
        self.payload = payload_from(p('payload_mass').value, p('payload_com').value,
                                    p('payload_frame').value)
        self.residual_settings = ResidualSettings(
            p('residual').value, p('joint_states_effort').value, self.config,
            tuple(p('contact_thresholds').value), tuple(p('observer_gains').value),
            p('observer_max_gap').value, p('velocity_cutoff').value)
        # the served model, its residual stream, friction drift, payload watch
        # (service.live_model)
        friction, watch = self._friction_settings(), self._payload_watch_settings()
        self.live = LiveModel(
            None if friction is None else LiveFriction(
                friction, self._friction_file, self._publish_friction, self._live_log),
            None if watch is None else LiveWatch(
                watch, p('payload_frame').value, self.payload,  # a put-down reverts to it
                self.config.torque_noise if self.config else None, self._publish_payload_event,
                self._watch_apply, self._live_log))
        self.dynamics_mode = p('dynamics').value
        robot_name = self.config.robot_name if self.config else ''
        try:
            self.model_root = resolve_model_dir(p('model_dir').value, robot_name)
        except ConfigError as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc
        if self.serve_only and not self.model_file:
            self.model_file = str(latest_model_file(self.model_root))
        try:
            self.robot = RobotModel.from_config(self.config) if self.config else None
        except (JointNameError, URDFError) as exc:
            # the config names joints or a URDF that do not match: refused like a
            # ConfigError (one fatal line, exit 2), not a traceback
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc
        self.buffer = SampleBuffer(self.config.n_joints, p('initial_capacity').value) \
            if self.config else None
        self.torque_check = JointStateCheck(self.config.joints) if self.config else None
        self.marker_log = MarkerLog()
        self.model = None
        self.contact = False
        self._velocity_note = None      # the last stream's "velocity not used", said once
        self.served_file = ''           # the served model's file (its folder: thresholds)
        self.payload_fit = None
        self.last_fit_dir = ''
        self.model_source = ''
        self.fit_status = 'no fit yet'
        self.urdf_status = 'no model yet'
        self.reload_error = ''
        self.counts = {'samples_rejected': 0, 'queries': 0, 'query_errors': 0,
                       'stream': 0, 'stream_skipped': 0, 'dynamics_queries': 0,
                       'dynamics_query_errors': 0, 'residual': 0, 'residual_skipped': 0,
                       'contacts': 0}
        self.errors = {}
        self._internal_set = False
        self._base_names = set()
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='fit')
        self._lock = threading.Lock()     # model / served / parameter updates
        self._fit_pending = None
        self._reload_pending = None
        self._stopping = False
        self._seen_stat = None
        self._throttle = 5.0
        # what a model file must match: the config's URDF and joints, else (serve_only
        # without a config) those of the model admitted at start
        self.urdf = self.config.urdf if self.config else None
        self.joints = tuple(self.config.joints) if self.config else None
        self.accept = {'allow_rejected': p('accept_rejected').value,
                       'allow_other_urdf': p('accept_other_urdf').value}

        depth = p('queue_depth').value
        streams = stream_qos(depth)
        self.model_pub = self.create_publisher(String, '~/model', LATCHED_QOS)
        self.urdf_pub = self.create_publisher(String, 'robot_description_identified', LATCHED_QOS)
        self.gravity_pub = self.create_publisher(JointState, 'gravity_torques', streams)
        self.result_pub = self.create_publisher(JointState, 'gravity_result', streams)
        self.dyn_result_pub = self.create_publisher(JointState, 'dynamics_result', streams)
        self.model_torque_pub = self.create_publisher(JointState, 'model_torques', streams)
        self.external_pub = self.create_publisher(JointState, 'external_torques', streams)
        self.contact_pub = self.create_publisher(Bool, 'contact', streams)
        # one reusable message per 1 kHz stream, refilled on the stream thread (nodes.messages)
        self._gravity_out, self._model_out, self._external_out = (
            StreamMessage(), StreamMessage(), StreamMessage())
        # payload watch events, JSON (docs/identifier.md); latched: a late joiner gets the last
        self.payload_event_pub = self.create_publisher(String, '~/payload_events', LATCHED_QOS)
        # the served friction's version and values, JSON (docs/identifier.md), latched
        self.friction_pub = self.create_publisher(String, '~/friction', LATCHED_QOS)
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        self.create_subscription(JointState, 'joint_states', self._on_state, streams)
        # the queries on the stream's thread: answered on a thread of their own they starved
        # it (2 of 5 benchmark runs lost 1 kHz inputs; docs/identifier.md, "Threads"). The
        # stream answers waiting queries before each input unless it is behind (query_first)
        self.query_first = QueryFirst((
            (self.create_subscription(JointState, 'gravity_query', self._on_query, streams),
             self._on_query),
            (self.create_subscription(JointState, 'dynamics_query', self._on_dynamics_query,
                                      streams), self._on_dynamics_query)))
        if not self.serve_only:
            self.create_subscription(JointState, 'joint_torques', self._on_torques, streams)
            self.create_subscription(String, 'excitation_segments', self._on_marker, MARKER_QOS)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.commands = self._create_command_node()

        if self.serve_only or (self.model_file and Path(self.model_file).exists()):
            self._load_at_start()
        what = 'serving only' if self.serve_only else \
            f'fitting {list(self.config.joints)} ({self.dynamics_mode} dynamics) with ' \
            f'{list(self.methods)}; every fit written under {self.model_root}'
        self.get_logger().info(f'{what}; model_file {self.model_file or "(none)"}')

    def _load_at_start(self):
        """Admit ``model_file`` through the model gate before anything is served.

        A file that the gate refuses, or none to serve in serve_only, is a configuration
        error (one FATAL line, exit 2): the node never runs serving nothing or a wrong model.
        """
        path = Path(self.model_file)
        if self.serve_only and not path.exists():
            given = self.get_parameter('model_file').value
            if not given and self.config is None and not self.get_parameter('model_dir').value:
                why = 'serve_only with neither model_file nor config_file: nothing to serve'
            else:
                why = f'serve_only: model_file {path} does not exist: nothing to serve' + (
                    '' if given else ' (no fit of this robot under model_dir yet)')
            raise ConfigError(f'{NODE_NAME}: {why}; give model_file:=<fit folder>/model.yaml')
        try:
            self._seen_stat = self._stat(path)
        except OSError:
            pass
        prepared, message = self._reload_job(str(path))
        with self._lock:
            self._apply_model(prepared)
        if self.config is None:
            self.urdf = prepared['model'].robot.source
            self.joints = tuple(prepared['model'].joint_names)
        self.get_logger().info(message)

    # -- parameters -------------------------------------------------------
    def _load_config(self):
        declare_arm_parameters(self, ARM_FIELDS, required=False)
        self.declare_parameter('serve_only', False, descriptor(
            'only serve model_file (no fitting); reload it when it changes', read_only=True))
        try:
            return arm_config(self, NODE_NAME, ARM_FIELDS,
                              required=not self.get_parameter('serve_only').value)
        except ConfigError as exc:
            raise ConfigError(f'{NODE_NAME}: {exc} (give config_file:=<arm yaml>, or '
                              'serve_only:=true with model_file)') from exc

    def _declare_parameters(self):
        default_g = self.config.gravity if self.config else 0.0
        declare_parameters(self, [
            Param('gravity', float(default_g), 'gravity magnitude served (m/s^2; 9.81 Earth, '
                  '1.63 Moon); 0 = the gravity the model was fitted at. Changeable at run '
                  'time', low=0.0, high=100.0),
            Param('payload_mass', 0.0, 'known payload mass added analytically to the served '
                  'model (kg)', low=0.0, high=1000.0),
            Param('payload_com', [0.0, 0.0, 0.0],
                  'payload centre of mass [x, y, z] in payload_frame (m)'),
            Param('payload_frame', 'flange', 'URDF frame carrying the payload'),
            Param('methods', ['wls', 'joint_by_joint'], 'estimators to run; the best is kept '
                  f'({", ".join(sorted(ESTIMATORS))})'),
            Param('fit_on_done', True,
                  'fit automatically when a segment marker with phase "done" arrives'),
            Param('model_file', '', 'model YAML written by ~/save and read by ~/reload (path); '
                  'served from the start when it exists (serve_only: it must)',
                  read_only=True),
            Param('accept_rejected', False, 'serve a model file marked rejected (arm-dyn-id '
                  'fit --force wrote it although the data could not support it)',
                  read_only=True),
            Param('accept_other_urdf', False, 'serve a model file fitted with another URDF '
                  'than the config\'s (kinematics may not match)', read_only=True),
            Param('model_poll_period', 1.0, 'serve_only: period of the model_file '
                  'modification check (s)', read_only=True, low=0.05, high=3600.0),
            Param('diagnostics_period', 1.0, 'period of diagnostics messages (s)',
                  read_only=True, low=0.05, high=60.0),
            Param('queue_depth', 1000, 'QoS depth of joint_torques, joint_states, gravity_* '
                  'topics (messages)', read_only=True, low=1, high=100000),
            Param('initial_capacity', 65536, 'initial sample buffer size (samples); it '
                  'doubles when full', read_only=True, low=1, high=100000000),
            Param('full_methods', ['wls', 'irls', 'consistent'], 'estimators of a full-dynamics '
                  'fit; the best held-out score is kept (consistent: every link physically '
                  'consistent, needed for the identified URDF)'),
            Param('dynamics', 'auto', 'model to fit: auto (full for a Fourier excitation or '
                  'rich motion, gravity for sweeps), gravity or full'),
            Param('model_dir', '', 'absolute folder every fit is written to (a '
                  '<YYYYmmdd-HHMMSS> folder each, and a latest link); empty: '
                  '$ROS_HOME/arm_dyn_id/<robot_name> (~/.ros when ROS_HOME is unset)',
                  read_only=True),
            Param('write_report', True, 'render report.html into each fit folder'),
            Param('write_thresholds', True, 'full fits: contact_thresholds.yaml in each fit '
                  'folder from the fit\'s own held-out residuals (what arm-dyn-id fit '
                  'writes), served unless contact_thresholds is given'),
            Param('residual', True, 'full model: publish model_torques, external_torques '
                  '(and contact) for every joint_states', read_only=True),
            Param('joint_states_effort', 'auto', 'what joint_states.effort carries for the '
                  'residual: current (A, converted with torque_constants, current_offsets, '
                  '...), torque (N·m), or auto: current converted by config_file when given, '
                  'else what the model file\'s measurement section says', read_only=True),
            Param('observer_gains', [25.0], 'momentum observer bandwidth K per joint, or one '
                  'for all (1/s): the residual follows an external torque with time '
                  'constant 1/K', read_only=True),
            Param('contact_thresholds', [0.0], 'contact when |external torque| of a joint '
                  'exceeds its threshold (N·m), one for all or one per joint; 0 = the '
                  'calibrated contact_thresholds.yaml beside model_file when there is one '
                  '(arm-dyn-id residual --calibrate, docs/contact.md), else no contact flag '
                  '(no contact topic messages)', read_only=True),
            Param('observer_max_gap', 0.05, 'a joint_states stamp step longer than this '
                  'restarts the residual observer (s)', read_only=True, low=1e-4, high=10.0),
            Param('velocity_cutoff', 20.0, 'cut-off of the causal velocity estimate used '
                  'when joint_states has no velocity (Hz)', read_only=True, low=0.1,
                  high=10000.0),
            Param('payload_window', 60.0, '~/identify_payload uses the joint_torques samples '
                  'of the last payload_window seconds (s)', low=0.1, high=1e6),
            Param('payload_watch', False, 'full model: follow a payload picked up or put down '
                  'from the residual; events on ~/payload_events (docs/identifier.md)',
                  read_only=True),
            Param('payload_watch_apply', False, 'payload_watch: serve a picked-up payload '
                  'after payload_watch_confirm seconds, revert when it is put down',
                  read_only=True),
            Param('payload_watch_window', 1.0, 'payload_watch: seconds of motion of the '
                  'shortest fit of the flange load (s)', read_only=True, low=0.3, high=60.0),
            Param('payload_watch_max_window', 30.0, 'payload_watch: the longest fit of the '
                  'flange load; fits grow from payload_watch_window until precise, and an '
                  'event waits at most this long after its candidate began (s)',
                  read_only=True, low=0.3, high=600.0),
            Param('payload_watch_support', 0.8, 'payload_watch: a change must last this '
                  'long before its event (s)', read_only=True, low=0.05, high=60.0),
            Param('payload_watch_confirm', 0.5, 'payload_watch_apply: seconds after a '
                  'picked_up / changed event before it is served (s)', read_only=True,
                  low=0.01, high=60.0),
            Param('payload_watch_enter_mass', 0.3, 'payload_watch: a load change of at least '
                  'this mass starts a candidate (kg)', read_only=True, low=1e-3, high=1000.0),
            Param('payload_watch_exit_mass', 0.15, 'payload_watch: a candidate ends when the '
                  'change falls below this mass (kg, < enter mass: hysteresis)',
                  read_only=True, low=1e-3, high=1000.0),
            Param('payload_watch_max_mass_std', 0.1, 'payload_watch: no event while the '
                  'standard error of the mass exceeds this (kg)', read_only=True, low=1e-6,
                  high=1000.0),
            Param('payload_watch_max_relative_std', 0.1, 'payload_watch: no event while the '
                  'standard error of the mass exceeds this fraction of the change',
                  read_only=True, low=1e-6, high=10.0),
            Param('friction_tracking', False, 'full model: follow the friction drift '
                  '(Coulomb, viscous) online from the residual, rigid body frozen; '
                  'versions on ~/friction, ~/rollback_friction (docs/identifier.md)',
                  read_only=True),
            Param('friction_forgetting_time', 30.0, 'friction_tracking: time constant of '
                  'the RLS forgetting (s)', read_only=True, low=0.1, high=1e6),
            Param('friction_period', 5.0, 'friction_tracking: stream time between two '
                  'proposed friction versions (s)', read_only=True, low=0.01, high=1e6),
            Param('friction_rate', 100.0, 'friction_tracking: largest rate of RLS steps '
                  '(Hz)', read_only=True, low=0.1, high=100000.0),
            Param('friction_bounds', [0.5, 1.5], 'friction_tracking: [low, high] factors '
                  'of the fitted value each coefficient must stay within; an update '
                  'outside is refused (refit)', read_only=True),
            Param('friction_bound_margin', 0.01, 'friction_tracking: absolute widening of '
                  'the bounds (N·m, N·m·s/rad)', read_only=True, low=0.0, high=1000.0),
            Param('friction_min_speed', 0.05, 'friction_tracking: a joint is updated '
                  'only while |velocity| exceeds this (rad/s)', read_only=True, low=0.0,
                  high=100.0),
        ], self.config)
        p = self.get_parameter
        if p('dynamics').value not in DYNAMICS_MODES:
            raise ConfigError(f'{NODE_NAME}: dynamics = {p("dynamics").value!r}; choose from '
                              f'{list(DYNAMICS_MODES)}')
        if p('joint_states_effort').value not in EFFORT_KINDS:
            raise ConfigError(f'{NODE_NAME}: joint_states_effort = '
                              f'{p("joint_states_effort").value!r}; choose from '
                              f'{list(EFFORT_KINDS)}')
        n = self.config.n_joints if self.config else None
        for name, allow_zero in (('observer_gains', False), ('contact_thresholds', True)):
            values = np.asarray(p(name).value, dtype=float)
            bad = not np.all(np.isfinite(values)) or np.any(values < 0) or \
                (not allow_zero and np.any(values == 0)) or \
                (values.size != 1 and n is not None and values.size != n)
            if bad or values.size == 0:
                raise ConfigError(f'{NODE_NAME}: {name} = {values.tolist()} must be one '
                                  f'{"non-negative" if allow_zero else "positive"} number, or '
                                  'one per joint')
        methods = list(self.get_parameter('methods').value)
        unknown = [m for m in methods if m not in ESTIMATORS]
        if unknown or not methods:
            raise ConfigError(f'{NODE_NAME}: methods = {methods}: unknown estimator '
                              f'{unknown[:1]}; choose from {sorted(ESTIMATORS)}')
        payload_from(p('payload_mass').value, p('payload_com').value, p('payload_frame').value)

    def _on_set_parameters(self, params):
        new = {p.name: p.value for p in params}
        for name in new:
            if name.startswith(BASE_PREFIX) and not self._internal_set:
                return SetParametersResult(
                    successful=False, reason=f'{name} is read-only: it is set by ~/fit and '
                    '~/reload')
        if 'dynamics' in new and new['dynamics'] not in DYNAMICS_MODES:
            return SetParametersResult(successful=False, reason=(
                f'dynamics {new["dynamics"]!r}: choose from {list(DYNAMICS_MODES)}'))
        if 'dynamics' in new:
            self.dynamics_mode = new['dynamics']
        if not ({'gravity', 'payload_mass', 'payload_com', 'payload_frame', 'methods'} & set(new)):
            return SetParametersResult(successful=True)
        if 'methods' in new:
            bad = [m for m in new['methods'] if m not in ESTIMATORS]
            if bad or not new['methods']:
                return SetParametersResult(successful=False, reason=(
                    f'unknown estimator {bad[:1]}; choose from {sorted(ESTIMATORS)}'))
        if not hasattr(self, 'live'):     # still declaring
            return SetParametersResult(successful=True)
        g = float(new.get('gravity', self.gravity))
        with self._lock:
            try:
                payload = payload_from(
                    new.get('payload_mass', self.get_parameter('payload_mass').value),
                    new.get('payload_com', self.get_parameter('payload_com').value),
                    new.get('payload_frame', self.get_parameter('payload_frame').value))
                built = self._build_served(self.model, g, payload) \
                    if self.model is not None else None
            except (ValueError, KeyError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
            self.gravity, self.payload = g, payload
            if 'methods' in new:
                self.methods = tuple(new['methods'])
            if built is not None:
                self._install(built)
        return SetParametersResult(successful=True)

    def _build_served(self, model, gravity, payload, model_file=None):
        """What serves a model (service.live_model.build_served); ``model_file``: the
        model's file, whose folder may hold contact thresholds (default: that of the model
        served now)."""
        return build_served(model, gravity, payload, self.residual_settings,
                            self.served_file if model_file is None else model_file)

    def _install(self, built):
        """Swap the served objects in (each one reference: the 1 kHz paths take no lock)."""
        self.contact = False
        self.live.install(built)

    def _publish_base_parameters(self, model):
        wanted = {BASE_PREFIX + n: float(v) for n, v in zip(model.base.names, model.beta)}
        self._internal_set = True
        try:
            for name in self._base_names - set(wanted):
                self.undeclare_parameter(name)
            self._base_names = set(wanted)
            for name, value in wanted.items():
                if self.has_parameter(name):
                    self.set_parameters([Parameter(name, Parameter.Type.DOUBLE, value)])
                else:
                    self.declare_parameter(name, value, descriptor(
                        'identified gravity base parameter (kg·m; set by ~/fit and '
                        '~/reload, read-only for others)'))
        finally:
            self._internal_set = False

    # -- data in ------------------------------------------------------------
    def _error(self, kind):
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def _on_torques(self, msg):
        sample = self.torque_check.check(msg.name, position=msg.position, effort=msg.effort,
                                         require=('position', 'effort'),
                                         finite=('position', 'effort'))
        if isinstance(sample, Rejection):
            self._reject(sample)
            return
        stamp = msg.header.stamp
        self.buffer.append(stamp.sec + stamp.nanosec * 1e-9, sample.position, sample.effort)

    def _reject(self, rejection):
        self.counts['samples_rejected'] += 1
        self._error(f'joint_torques {rejection.reason}')
        self.get_logger().warning(f'joint_torques sample rejected ({rejection.reason}): '
                                  f'{rejection.detail}; {self.counts["samples_rejected"]} so far',
                                  throttle_duration_sec=self._throttle)

    def _on_marker(self, msg):
        try:
            marker = self.marker_log.add(msg.data)
        except DataError as exc:
            self._error('bad marker')
            self.get_logger().warning(f'excitation_segments message ignored: {exc}',
                                      throttle_duration_sec=self._throttle)
            return
        if marker is None:
            return          # transient_local re-delivery
        if marker['phase'] == 'done' and self.fit_on_done:
            self.get_logger().info('excitation done: fitting')
            future = self.request_fit('excitation done')
            future.add_done_callback(self._log_auto_fit)

    def _log_auto_fit(self, future):
        ok, message = future.result()
        if ok:      # its warnings were logged by _fit_job, one WARN line each
            self.get_logger().info(f'fit: {without_warnings(message)}')
        else:
            self.get_logger().error(f'fit: {message}')

    # -- fitting and loading (worker thread) ----------------------------
    def request_fit(self, reason='~/fit'):
        """Start a fit in the worker; returns a concurrent Future of (success, message)."""
        done = concurrent.futures.Future()
        if self.serve_only:
            done.set_result((False, 'serve_only is true: this node does not fit; start one '
                             'without serve_only to fit'))
            return done
        t, q, tau = self.buffer.snapshot()
        markers = list(self.marker_log.markers)
        if len(t) == 0:
            done.set_result((False, 'no data: no joint_torques samples received yet; run the '
                             'excitation (or play a bag) with the recorder publishing '
                             'joint_torques'))
            return done
        self.fit_status = f'fitting ({reason})'
        job = self._worker.submit(self._fit_job, t, q, tau, markers)
        self._chain(job, done, self._apply_model, 'fit')
        return done

    def _fit_job(self, t, q, tau, markers):
        """In the worker: fit (service.live_fit), prepare for serving, write the folder."""
        p = self.get_parameter
        unwrapped = unwrap_note(self.joints, self.buffer.wraps)
        if unwrapped:
            self.get_logger().info(f'fit: {unwrapped}')
        fit = fit_samples(self.robot, self.config, t, q, tau, markers, FitSettings(
            self.dynamics_mode, self.methods, tuple(p('full_methods').value),
            p('joint_states_effort').value))
        prepared = self._prepare(fit.model, source=f'fit of {len(t)} samples '
                                 f'({fit.choice.kind})', model_file='')
        written, folder = self._write_fit(fit, prepared['urdf'])
        if folder is not None:
            prepared['model_file'] = str(folder / 'model.yaml')
            if fit.choice.kind == 'full' and p('write_thresholds').value:
                written += self._fit_thresholds(fit, t, q, tau, prepared)
        prepared['written'] = written
        for text in fit.warnings:
            self.get_logger().warning(f'fitted with a warning: {text}')
        return prepared, fit.message(written)

    def _write_fit(self, fit, urdf):
        """Write the fit's folder under model_dir and move ``latest``; a sentence saying
        where (or why not: the model is served either way), and the folder or None."""
        try:
            paths = write_live_fit(self.model_root, fit, urdf)
        except OSError as exc:
            self._error('model_dir write failed')
            self.get_logger().error(f'could not write the fit under {self.model_root}: {exc}')
            return f'NOT written to {self.model_root}: {exc}', None
        self.last_fit_dir = str(paths['folder'])
        if self.get_parameter('write_report').value:
            # the plots take seconds: rendered after the reply, by a child process
            self._worker.submit(render_report, paths['folder'], self._report_failed)
        return f'written to {paths["folder"]} (latest -> it)', Path(paths['folder'])

    def _fit_thresholds(self, fit, t, q, tau, prepared):
        """contact_thresholds.yaml in the fit's folder (service.live_fit.fit_thresholds)
        and the residual stream rebuilt to use them; the sentence to add to the message."""
        path = prepared['model_file']
        try:
            said = fit_thresholds(self.robot, fit, t, q, tau, path,
                                  self.get_parameter('observer_gains').value)
        except (ConfigError, DataError, OSError, ValueError) as exc:
            self.get_logger().warning(f'no contact thresholds from this fit: {exc}')
            return f'; no contact thresholds ({exc})'
        prepared['built'] = self._build_served(fit.model, self.gravity, self.payload, path)
        return said

    def _report_failed(self, folder, why):
        if self._stopping:
            return
        self._error('report failed')
        self.get_logger().warning(f'report.html not rendered in {folder}: {why}')

    def _prepare(self, model, source, model_file):
        """Everything that is slow about a new model, done in the worker; ``model_file``:
        where the model is (or will be) written."""
        if self.config is not None and tuple(model.joint_names) != tuple(self.config.joints):
            raise DataError(f'model joints {list(model.joint_names)} differ from the config '
                            f'joints {list(self.config.joints)}')
        built = self._build_served(model, self.gravity, self.payload, model_file)
        urdf = None
        nominal = self.config.urdf if self.config is not None else model.robot.source
        try:
            urdf = identified_urdf(model, nominal)
            urdf_status = 'published'
        except InconsistentParametersError as exc:
            urdf_status = f'not published: {exc}'
        return {'model': model, 'built': built, 'yaml': model.to_yaml(), 'urdf': urdf,
                'urdf_status': urdf_status, 'source': source, 'model_file': model_file}

    def request_reload(self, reason='~/reload'):
        """Load ``model_file`` in the worker; a concurrent Future of (success, message)."""
        done = concurrent.futures.Future()
        path = self.model_file
        if not path:
            done.set_result((False, 'parameter model_file is empty; give the model YAML path'))
            return done
        try:
            self._seen_stat = self._stat(path)
        except OSError:
            pass
        job = self._worker.submit(self._reload_job, path)
        self._chain(job, done, self._apply_model, 'reload')
        return done

    def _reload_job(self, path):
        """Admit ``path`` through the model gate (ModelRefused: one line, the reason) and
        prepare it for serving."""
        try:
            model = admit_model(path, urdf=self.urdf, joints=self.joints,
                                kinds=('gravity', 'full'), what='model_file', **self.accept)
        except ModelRefused as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc
        for warning in model.metadata.get('warnings', []):
            self.get_logger().warning(warning)
        kind = 'full-dynamics' if is_full(model) else 'gravity'
        return self._prepare(model, source=path, model_file=path), (
            f'loaded {path} ({kind} model, {model.base.count} base parameters, fitted at '
            f'{model.fit_gravity} m/s^2)')

    def _chain(self, job, done, apply, kind):
        """When ``job`` ends (in the worker), apply its result, then resolve ``done``."""
        def finished(job):
            exc = job.exception()
            if exc is not None:
                outcome = (False, str(exc) if isinstance(exc, ConfigError) else
                           f'{type(exc).__name__}: {exc}')
                self._failed(kind, outcome[1])
            else:
                prepared, message = job.result()
                outcome = (True, message)
                try:
                    with self._lock:
                        apply(prepared)
                except Exception as exc:     # a bad model must not stop the node
                    outcome = (False, f'could not apply the result: '
                                      f'{type(exc).__name__}: {exc}')
            done.set_result(outcome)
        job.add_done_callback(finished)

    def _failed(self, kind, message):
        self._error(f'{kind} failed')
        if kind == 'fit':
            self.fit_status = f'failed: {message}'
        else:
            self.reload_error = message
            self.get_logger().error(f'model reload failed, still serving '
                                    f'{self.model_source or "no model"}: {message}')

    def _apply_model(self, prepared):
        self.model = prepared['model']
        self.served_file = prepared['model_file']
        built = prepared['built']
        fast = built['served'].fast
        if fast.gravity != (self.gravity or fast.fit_gravity) or fast.payload != self.payload:
            built = self._build_served(self.model, self.gravity, self.payload)  # changed since
        self._install(built)
        self.model_source = prepared['source']
        self.model_pub.publish(String(data=prepared['yaml']))
        if prepared['urdf'] is not None:
            self.urdf_pub.publish(String(data=prepared['urdf']))
        self.urdf_status = prepared['urdf_status']
        self._publish_base_parameters(self.model)
        if prepared['source'].startswith('fit'):
            self.fit_status = f'ok ({self.model.metadata.get("fit", {}).get("method")})'
        else:
            self.reload_error = ''

    @staticmethod
    def _stat(path):
        st = Path(path).stat()
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _poll_model_file(self):
        if self._reload_pending is not None and not self._reload_pending.done():
            return
        try:
            stat = self._stat(self.model_file)
        except OSError:
            return
        if stat != self._seen_stat:
            self.get_logger().info(f'{self.model_file} changed: reloading')
            self._reload_pending = self.request_reload('file changed')

    def check(self):
        """The pre-flight check on the samples held (service.live_fit.check_held_samples);
        (success, table or reason)."""
        if self.serve_only or self.buffer is None:
            return False, 'serve_only is true: this node holds no samples to check'
        return check_held_samples(self.robot, self.config, *self.buffer.snapshot())

    def save(self):
        """Write the current model to ``model_file`` (atomic); (success, message)."""
        model = self.model
        if model is None:
            return False, 'no model to save: call ~/fit (or ~/reload) first'
        if not self.model_file:
            return False, 'parameter model_file is empty; start the node with model_file:=<path>'
        try:
            path = model.save(self.model_file)
        except OSError as exc:
            return False, f'cannot write {self.model_file}: {exc}'
        try:
            self._seen_stat = self._stat(path)
        except OSError:
            pass
        return True, f'saved to {path}'

    # -- serving ------------------------------------------------------------
    def _on_state(self, msg):
        stamp = msg.header.stamp
        t = stamp.sec + stamp.nanosec * 1e-9
        self.query_first.before_input(t)
        out = self.live.stream(msg.name, t, msg.position, msg.velocity, msg.effort)
        if out.served is None:
            self.counts['stream_skipped'] += 1
            self._error('stream: no_model')
            return
        if out.residual is not None:
            self._residual(out.stream, msg, t, out.residual)
        if self._rejected(out.gravity, 'stream', 'not served'):
            return
        q, tau = out.gravity
        self.query_first.between()
        if try_publish(self, self.gravity_pub,
                       self._gravity_out.fill(msg.header, out.served.joints, q, tau)):
            self.counts['stream'] += 1

    def _rejected(self, answer, what, says):
        """Count, report and warn (throttled) when ``answer`` is a Rejection."""
        if not isinstance(answer, Rejection):
            return False
        self.counts[f'{what}_skipped'] += 1
        self._error(f'{what}: {answer.reason}')
        self.get_logger().warning(f'joint_states message {says} ({answer.reason}): '
                                  f'{answer.detail}', throttle_duration_sec=self._throttle)
        return True

    def _residual(self, residual, msg, t, answer):
        """model_torques, external_torques (and contact) of one joint_states message
        (``answer``: what ``residual.update`` made of it at stamp ``t``)."""
        if self._rejected(answer, 'residual', 'gives no residual'):
            return
        q, dq, model, external, contact = answer
        note = residual.velocity_check.note     # data.velocity: estimated from q from now
        if note is not None and note is not self._velocity_note:
            self._velocity_note = note
            self.get_logger().warning(f'residual: {note}')
        self.query_first.between()      # queries that came while the residual was computed
        try_publish(self, self.model_torque_pub,
                    self._model_out.fill(msg.header, residual.joints, q, model, dq))
        self.query_first.between()
        try_publish(self, self.external_pub,
                    self._external_out.fill(msg.header, residual.joints, q, external, dq))
        if residual.flags_contact:     # constant thresholds or calibrated bands
            try_publish(self, self.contact_pub, Bool(data=contact))
            if contact and not self.contact:
                self.counts['contacts'] += 1
                joint = residual.contact_joint(external)
                self.get_logger().warning(
                    f'contact: external torque {np.round(external, 3).tolist()} N·m exceeds '
                    f'the threshold at {joint}', throttle_duration_sec=1.0)
            self.contact = contact
        self.counts['residual'] += 1

    def _on_dynamics_query(self, msg):
        """Inverse dynamics: position, velocity, effort = acceleration in; torques out."""
        served, answer = self.live.dynamics_query(msg.name, msg.position, msg.velocity,
                                                  msg.effort)
        if not isinstance(answer, Rejection):
            _, _, _, rigid, friction = answer
            # total in effort, rigid body in position, friction in velocity
            answer = joint_state(msg.header, served.joints, rigid, rigid + friction, friction)
        self._reply(self.dyn_result_pub, msg, answer, 'dynamics_query', 'dynamics_queries')

    def _on_query(self, msg):
        served, answer = self.live.query(msg.name, msg.position)
        if not isinstance(answer, Rejection):
            answer = joint_state(msg.header, served.joints, *answer)
        self._reply(self.result_pub, msg, answer, 'query', 'queries')

    def _reply(self, publisher, msg, answer, what, count):
        """Publish a query's reply, or its error reply (``name = ['error: ...']``)."""
        if isinstance(answer, Rejection):
            out = JointState()
            out.header = msg.header
            out.name = [f'error: {answer.detail}']
            self.counts[f'{what}_errors'] += 1
            self._error(f'{what}: {answer.reason}')
        else:
            out = answer
            self.counts[count] += 1
        try_publish(self, publisher, out)

    # -- services -----------------------------------------------------------
    def _create_command_node(self):
        """Services and timers on a helper node spun by its own executor thread(s).

        A service reply may wait for a fit; and timers did not fire under the
        EventsExecutor of the rclpy wheels used here, so the periodic work lives here too.
        """
        commands = create_command_node(self)
        base = self.get_fully_qualified_name()
        services = ReentrantCallbackGroup()
        timers = MutuallyExclusiveCallbackGroup()
        commands.create_service(Trigger, f'{base}/fit', self._fit_srv, callback_group=services)
        commands.create_service(Trigger, f'{base}/check', self._check_srv,
                                callback_group=services)
        commands.create_service(Trigger, f'{base}/save', self._save_srv,
                                callback_group=services)
        commands.create_service(Trigger, f'{base}/reload', self._reload_srv,
                                callback_group=services)
        commands.create_service(Trigger, f'{base}/identify_payload', self._identify_payload_srv,
                                callback_group=services)
        commands.create_service(Trigger, f'{base}/apply_payload', self._apply_payload_srv,
                                callback_group=services)
        commands.create_service(Trigger, f'{base}/rollback_friction',
                                self._rollback_friction_srv, callback_group=services)
        p = self.get_parameter
        commands.create_timer(p('diagnostics_period').value, self._publish_diagnostics,
                              callback_group=timers)
        if self.serve_only:
            commands.create_timer(p('model_poll_period').value, self._poll_model_file,
                                  callback_group=timers)
        return commands

    @staticmethod
    def _wait(future, response):
        try:
            response.success, response.message = future.result(timeout=FIT_TIMEOUT)
        except concurrent.futures.TimeoutError:
            response.success = False
            response.message = f'still running after {FIT_TIMEOUT} s; see diagnostics'
        return response

    def _fit_srv(self, request, response):
        return self._wait(self.request_fit(), response)

    def _reload_srv(self, request, response):
        return self._wait(self.request_reload(), response)

    def _check_srv(self, request, response):
        response.success, response.message = self.check()
        return response

    def _save_srv(self, request, response):
        response.success, response.message = self.save()
        return response

    def _identify_payload_srv(self, request, response):
        response.success, response.message = self.identify_payload()
        return response

    def _apply_payload_srv(self, request, response):
        response.success, response.message = self.apply_payload()
        return response

    # -- payload ------------------------------------------------------------
    def identify_payload(self):
        """Payload from the last ``payload_window`` s of samples at ``payload_frame``, the
        served arm model frozen (service.live_fit.payload_from_samples, the entry point of
        ``arm-dyn-id payload``). (success, message): the message is JSON ``{mass, com,
        frame, mass_std, com_std, samples}``.
        """
        if self.serve_only or self.buffer is None:
            return False, 'serve_only is true: this node holds no samples to identify from'
        model = self.model
        if model is None:
            return False, 'no arm model yet: fit one (~/fit) or ~/reload before the payload'
        p = self.get_parameter
        try:
            self.payload_fit, doc = payload_from_samples(
                model, *self.buffer.snapshot(), list(self.marker_log.markers),
                p('payload_window').value, p('payload_frame').value, self.config.torque_noise)
        except DataError as exc:
            return False, str(exc)
        return True, doc

    def apply_payload(self, payload=None):
        """Serve the last identified payload, or ``payload`` (the payload watch's; False:
        none) by setting payload_mass, payload_com, payload_frame."""
        if payload is None:
            fit = self.payload_fit
            if fit is None:
                return False, 'no payload identified yet: call ~/identify_payload first'
            payload = fit.payload
        elif payload is False:
            payload = Payload(0.0, (0.0, 0.0, 0.0), self.get_parameter('payload_frame').value)
        results = self.set_parameters([
            Parameter('payload_frame', Parameter.Type.STRING, payload.frame),
            Parameter('payload_com', Parameter.Type.DOUBLE_ARRAY,
                      [float(c) for c in payload.com]),
            Parameter('payload_mass', Parameter.Type.DOUBLE, float(payload.mass))])
        refused = [r.reason for r in results if not r.successful]
        if refused:
            return False, f'payload not applied: {refused[0]}'
        return True, (f'serving the payload {payload.mass:.4g} kg at '
                      f'{np.round(payload.com, 4).tolist()} m in {payload.frame}')

    # -- payload watch (service.payload_watch) ------------------------------
    def _payload_watch_settings(self):
        """WatchSettings from the payload_watch_* parameters, None when it is off."""
        p = self.get_parameter
        if not p('payload_watch').value:
            return None
        try:
            return WatchSettings(**{key: p(f'payload_watch_{key}').value for key in (
                'apply', 'window', 'support', 'confirm', 'enter_mass', 'exit_mass',
                'max_mass_std', 'max_relative_std', 'max_window')})
        except ValueError as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc

    def _publish_payload_event(self, event):
        try_publish(self, self.payload_event_pub, String(data=json.dumps(event)))

    def _watch_apply(self, event):
        ok, message = self.apply_payload(event.payload or False)
        log = self.get_logger().info if ok else self.get_logger().error
        log(f'payload watch {event.kind}: {message}')

    # -- friction drift (service.friction_drift) ----------------------------
    def _friction_settings(self):
        """TrackerSettings from the friction_* parameters, None when tracking is off."""
        p = self.get_parameter
        if not p('friction_tracking').value:
            return None
        try:
            return TrackerSettings(
                forgetting_time=p('friction_forgetting_time').value,
                period=p('friction_period').value, rate=p('friction_rate').value,
                bounds=tuple(p('friction_bounds').value),
                margin=p('friction_bound_margin').value,
                min_speed=p('friction_min_speed').value)
        except ValueError as exc:
            raise ConfigError(f'{NODE_NAME}: {exc}') from exc

    def _friction_file(self):
        """friction_drift.yaml beside the served model's file, None when it has none."""
        if self.model_source.startswith('fit'):
            return state_path(Path(self.last_fit_dir) / 'model.yaml') \
                if self.last_fit_dir else None
        return state_path(self.model_source) if self.model_source else None

    def _publish_friction(self, doc):
        """~/friction: the served friction's version, values and status (JSON)."""
        try_publish(self, self.friction_pub, String(data=json.dumps(doc)))

    def _live_log(self, level, text):
        getattr(self.get_logger(), level)(text)

    def rollback_friction(self):
        """Serve the friction version before the current one again; (success, message)."""
        ok, message = self.live.rollback_friction()
        if ok:
            self.get_logger().info(message)
        return ok, message

    def _rollback_friction_srv(self, request, response):
        response.success, response.message = self.rollback_friction()
        return response

    # -- diagnostics --------------------------------------------------------
    def _publish_diagnostics(self):
        live = self.live
        status = DiagnosticStatus()
        status.name = f'{self.get_name()}: identification and gravity service'
        status.hardware_id = self.config.robot_name if self.config else ''
        fast = live.served.fast if live.served is not None else None
        problems = []
        if live.served is None:
            problems.append('no model loaded')
        if self.fit_status.startswith('failed'):
            problems.append(f'fit {self.fit_status}')
        if self.reload_error:
            problems.append(f'reload failed (serving the previous model): {self.reload_error}')
        status.level = DiagnosticStatus.OK if not problems else DiagnosticStatus.WARN
        status.message = '; '.join(problems) or f'serving {self.model_source}'
        values = {
            'samples': self.buffer.count if self.buffer else 0,
            'markers': len(self.marker_log),
            'fit_status': self.fit_status,
            'model_loaded': live.served is not None,
            'model_source': self.model_source,
            'urdf': self.urdf_status,
            'gravity_served': fast.gravity if fast else math.nan,
            'payload_mass': self.payload.mass if self.payload else 0.0,
            'fast_path': fast.exact if fast else False,
            'queries_served': self.counts['queries'],
            'query_errors': self.counts['query_errors'],
            'stream_served': self.counts['stream'],
            'stream_skipped': self.counts['stream_skipped'],
            'queries_ahead_of_stream': self.query_first.answered,
            'inputs_with_queries_in_turn': self.query_first.deferred,
            'dynamics': 'full' if live.dynamics is not None else (
                'gravity' if live.served is not None else 'none'),
            'dynamics_queries_served': self.counts['dynamics_queries'],
            'dynamics_query_errors': self.counts['dynamics_query_errors'],
            'residual': live.residual_status,
            'residual_served': self.counts['residual'],
            'residual_skipped': self.counts['residual_skipped'],
            'observer_restarts': live.residual.observer.restarts if live.residual else 0,
            'contact': self.contact,
            'contacts': self.counts['contacts'],
            'payload_watch': 'off' if live.watch is None else live.watch.status,
            'model_dir': str(self.model_root),
            'last_fit_dir': self.last_fit_dir,
            'samples_rejected': self.counts['samples_rejected'],
            'publish_failures': json.dumps(getattr(self, 'publish_failures', {})),
            'errors': json.dumps(self._errors_with_saves()),
            'reload_error': self.reload_error,
            'friction_tracking': 'off' if live.friction is None else live.friction.status,
            'friction_version': 0 if live.friction is None else live.friction.version,
        }
        publish_diagnostics(self, status, values)

    def _errors_with_saves(self):
        """The error counts, friction_drift.yaml writes that failed included."""
        failed = 0 if self.live.friction is None else self.live.friction.save_errors
        return {**self.errors, 'friction save failed': failed} if failed else self.errors

    def shutdown(self):
        self._stopping = True
        self._worker.shutdown(wait=False, cancel_futures=True)
        if self.live.watch is not None:
            self.live.watch.shutdown()


def main(args=None):
    """Run the node and its service helper (nodes/executors.py); returns the exit code."""
    # three threads for the services: ~/fit waits for the fit, queries keep going
    return run_node(IdentifierNode, args, split=True, threads=3)


if __name__ == '__main__':
    raise SystemExit(main())
