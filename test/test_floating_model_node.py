"""floating_model_node across processes: CoM and momentum queries answered as the core
answers them, error replies, the com / momentum streams paired with odometry (space robot)
or placed by the stance foot (biped), malformed odometry counted (not a crash), the
nominal fallback switching to a fit that appears, SIGINT exit 0, bad configs exit 2."""

import itertools
import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel
from arm_dyn_id.service.floating import BASE_NAMES, MOMENTUM_NAMES, ServedFloating
from ros_utils import RosHarness, node_output, refusal_line, start_node, stop

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import PointStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

NODE = 'arm_dyn_id.nodes.floating_model_node'
REPO = Path(__file__).resolve().parent.parent
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
FAST = {'diagnostics_period': 0.1, 'model_poll_period': 0.1}
TIMEOUT = 60.0      # a cold node start on a busy 2-core machine


def fitted(config_name, tmp_path, seed, scale=0.2):
    """A FloatingIdentification off the URDF by up to ±scale, saved as model.yaml."""
    config = load_arm_config(config_name)
    model = FloatingModel(config.urdf)
    rng = np.random.default_rng(seed)
    phi = model.parameters()
    for b in range(len(model.body_names)):
        i = pin.Inertia.FromDynamicParameters(phi[10 * b:10 * b + 10])
        phi[10 * b:10 * b + 10] = pin.Inertia(
            i.mass * rng.uniform(1 - scale, 1 + scale), i.lever + rng.uniform(-0.02, 0.02, 3),
            i.inertia).toDynamicParameters()
    ident = FloatingIdentification(config.robot_name, str(config.urdf), None,
                                   config.floating_base.method, 'linear', model.body_names,
                                   phi, float(phi[::10].sum()))
    folder = tmp_path / f'fit_{seed}'
    folder.mkdir(parents=True, exist_ok=True)
    path = ident.save(folder / 'model.yaml')
    return config, model, phi, path


def stamp_of(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def set_stamp(msg, ns):
    msg.header.stamp.sec = int(ns // 1_000_000_000)
    msg.header.stamp.nanosec = int(ns % 1_000_000_000)


def joint_state(names, position, velocity=None, ns=0, frame_id=''):
    msg = JointState()
    set_stamp(msg, ns)
    msg.header.frame_id = frame_id
    msg.name = list(names)
    msg.position = [float(x) for x in position]
    if velocity is not None:
        msg.velocity = [float(x) for x in velocity]
    return msg


def odometry(ns, position, quaternion, linear_child, angular_child, child='satellite'):
    msg = Odometry()
    set_stamp(msg, ns)
    msg.header.frame_id = 'world'
    msg.child_frame_id = child
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    p.x, p.y, p.z = (float(v) for v in position)
    o.x, o.y, o.z, o.w = (float(v) for v in quaternion)
    t = msg.twist.twist
    t.linear.x, t.linear.y, t.linear.z = (float(v) for v in linear_child)
    t.angular.x, t.angular.y, t.angular.z = (float(v) for v in angular_child)
    return msg


class Probe(RosHarness):
    """Subscriptions and publishers made before the harness spins."""

    def __init__(self, domain_id, odometry_topic='base_odometry'):
        super().__init__(domain_id, name='floating_probe')
        self.odometry_topic = odometry_topic

    def __enter__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=self.domain_id)
        self.node = node = rclpy.create_node(self.name, context=self.context)
        self.replies = {'com': {}, 'momentum': {}}
        self.com, self.momentum, self.models, self.urdfs, self.diags = {}, {}, [], [], []
        self._ids = itertools.count()
        self._lock = threading.Lock()
        for kind in ('com', 'momentum'):
            node.create_subscription(JointState, f'{kind}_result',
                                     lambda m, k=kind: self.replies[k].setdefault(
                                         m.header.frame_id, m), QOS)
        node.create_subscription(PointStamped, 'com',
                                 lambda m: self.com.__setitem__(stamp_of(m), m), QOS)
        node.create_subscription(JointState, 'momentum',
                                 lambda m: self.momentum.__setitem__(stamp_of(m), m), QOS)
        node.create_subscription(String, '/floating_model_node/model',
                                 lambda m: self.models.append(m.data), LATCHED)
        node.create_subscription(String, 'robot_description_identified',
                                 lambda m: self.urdfs.append(m.data), LATCHED)
        node.create_subscription(DiagnosticArray, 'diagnostics', self._on_diag, 10)
        self.queries = {k: node.create_publisher(JointState, f'{k}_query', QOS)
                        for k in ('com', 'momentum')}
        self.states = node.create_publisher(JointState, 'joint_states', QOS)
        self.odometry = node.create_publisher(Odometry, self.odometry_topic, QOS)
        self.reload = node.create_client(Trigger, '/floating_model_node/reload')
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(node)
        self._thread = threading.Thread(target=self._spin, daemon=True, name='probe')
        self._thread.start()
        return self

    def _on_diag(self, msg):
        for status in msg.status:
            if status.name.startswith('floating_model_node'):
                values = {kv.key: kv.value for kv in status.values}
                values['_level'] = status.level
                values['_message'] = status.message
                self.diags.append(values)

    def diag(self, key):
        return self.diags[-1].get(key) if self.diags else None

    def count(self, key):
        return int(self.diag(key) or 0)

    def errors(self):
        return json.loads(self.diag('errors') or '{}')

    def ask(self, kind, names, position, velocity=None, timeout=30.0):
        """One query; resent every 0.5 s until its reply comes (the first one wins)."""
        key = f'test-{next(self._ids)}'
        msg = joint_state(names, position, velocity, frame_id=key)
        deadline = time.monotonic() + timeout
        while key not in self.replies[kind]:
            assert time.monotonic() < deadline, f'no {kind}_result for {key}'
            self.queries[kind].publish(msg)
            try:
                self.wait_for(lambda: key in self.replies[kind], 0.5)
            except TimeoutError:
                pass
        return self.replies[kind][key]


def value(reply):
    assert not reply.name[0].startswith('error: '), reply.name[0]
    return np.array(reply.effort)


def error(reply):
    assert len(reply.name) == 1 and reply.name[0].startswith('error: '), reply
    assert len(reply.effort) == 0
    return reply.name[0]


def start(ros_env, params, name='floating'):
    return start_node(NODE, {**FAST, **params}, ros_env, name=name)


def random_state(rng, n):
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    return (rng.uniform(-1, 1, 3), quat, rng.uniform(-1, 1, n), rng.uniform(-0.5, 0.5, 3),
            rng.uniform(-0.5, 0.5, 3), rng.uniform(-1, 1, n))


def test_space_robot_queries_streams_and_malformed_odometry(ros_env, tmp_path):
    config, model, phi, path = fitted('space_manipulator.yaml', tmp_path, seed=1)
    core = ServedFloating(FloatingIdentification.load(path))
    joints = list(model.joint_names)
    names = list(BASE_NAMES) + joints
    rng = np.random.default_rng(2)
    proc = start(ros_env, {'config_file': 'space_manipulator.yaml', 'model_file': str(path)})
    with Probe(ros_env.domain_id) as h:
        h.wait_for(lambda: h.models and h.urdfs, TIMEOUT, what='~/model and the URDF')
        assert 'arm_dyn_id/floating_model' in h.models[-1]
        # the identified URDF, read by pinocchio, has the fitted whole-body CoM
        urdf_model = pin.buildModelFromXML(h.urdfs[-1], pin.JointModelFreeFlyer())
        urdf_data = urdf_model.createData()

        # queries in any order, against the core and pinocchio on the published URDF
        perm = rng.permutation(len(names))
        for _ in range(5):
            pos, quat, q, lin, ang, dq = random_state(rng, model.n)
            position = np.r_[pos, quat, q]
            velocity = np.r_[lin, ang, 0.0, dq]
            com = value(h.ask('com', [names[i] for i in perm], position[perm]))
            np.testing.assert_allclose(com, core.query_com(names, position)[1], atol=1e-12)
            np.testing.assert_allclose(com, pin.centerOfMass(urdf_model, urdf_data, position),
                                       atol=1e-8)
            h_reply = h.ask('momentum', [names[i] for i in perm], position[perm],
                            velocity[perm])
            assert list(h_reply.name) == list(MOMENTUM_NAMES)
            Q = model.configuration(pos, quat, q)
            V = model.velocity(Q, lin, ang, dq)
            np.testing.assert_allclose(value(h_reply), model.momentum(Q, V, phi)[0],
                                       rtol=1e-9, atol=1e-9)

        # error replies, one line each
        bad = position.copy()
        bad[3:7] = [0, 0, 0, 2.0]
        assert 'norm 2' in error(h.ask('com', names, bad))
        assert 'unknown joint' in error(h.ask('com', names + ['gripper'], np.r_[position, 0]))
        assert 'names but' in error(h.ask('com', names, position[:-1]))
        bad = position.copy()
        bad[0] = np.nan
        assert 'NaN' in error(h.ask('com', names, bad))
        assert 'is empty' in error(h.ask('momentum', names, position, []))

        # joint_states before any odometry: nothing streamed, counted
        h.wait_for_subscribers(h.states, timeout=TIMEOUT)
        h.wait_for_subscribers(h.odometry, timeout=TIMEOUT)
        t0 = 5_000_000_000_000
        stream_names = ['gripper'] + joints[::-1]
        h.states.publish(joint_state(stream_names, np.r_[0.3, q[::-1]], np.r_[0, dq[::-1]],
                                     ns=t0 - 1))
        h.wait_for(lambda: 'stream: no_base' in h.errors(), 30.0, what='no_base counted')
        assert not h.com

        # odometry (twist in the satellite's axes), then joint_states near its stamp
        expected = {}
        for k in range(2):
            pos, quat, q, lin, ang, dq = random_state(rng, model.n)
            R = pin.Quaternion(quat).toRotationMatrix()
            base_ns = t0 + k * 1_000_000_000
            h.odometry.publish(odometry(base_ns, pos, quat, R.T @ lin, ang))
            h.wait_for(lambda: h.count('odometry') >= k + 1, 30.0, what='odometry taken')
            for j in range(5):
                qj, dqj = q + 0.01 * j, dq - 0.01 * j
                ns = base_ns + j * 10_000_000
                h.states.publish(joint_state(stream_names, np.r_[0.3, qj[::-1]],
                                             np.r_[0, dqj[::-1]], ns=ns))
                Q = model.configuration(pos, quat, qj)
                expected[ns] = (model.com(Q, phi)[0],
                                model.momentum(Q, model.velocity(Q, lin, ang, dqj), phi)[0])
            # streamed before the next odometry goes out (topics are not ordered)
            h.wait_for(lambda: all(ns in h.com and ns in h.momentum for ns in expected),
                       30.0, what='com and momentum for every joint_states message')
        for ns, (com, mom) in expected.items():
            point = h.com[ns]
            assert point.header.frame_id == 'world'
            np.testing.assert_allclose([point.point.x, point.point.y, point.point.z], com,
                                       atol=1e-10)
            np.testing.assert_allclose(h.momentum[ns].effort, mom, rtol=1e-9, atol=1e-9)

        # malformed odometry: counted and warned, never a crash
        h.odometry.publish(odometry(t0, [np.nan, 0, 0], [0, 0, 0, 1], [0] * 3, [0] * 3))
        h.odometry.publish(odometry(t0, [0, 0, 0], [0, 0, 0, 3.0], [0] * 3, [0] * 3))
        h.odometry.publish(odometry(t0, [0, 0, 0], [0, 0, 0, 1], [0] * 3, [0] * 3,
                                    child='camera'))
        h.wait_for(lambda: h.count('odometry_rejected') == 3, 30.0,
                   what='3 odometry messages rejected in diagnostics')
        assert {'odometry: non_finite', 'odometry: non_unit_quaternion',
                'odometry: wrong_frame'} <= set(h.errors()), h.errors()
        assert h.diags[-1]['_level'] == DiagnosticStatus.WARN
        assert proc.poll() is None, node_output(proc)
        value(h.ask('com', names, position))            # still answering
        # a joint_states far from the last good odometry stamp: stale, not streamed
        h.states.publish(joint_state(stream_names, np.r_[0.3, q[::-1]], np.r_[0, dq[::-1]],
                                     ns=t0 + 60_000_000_000))
        h.wait_for(lambda: 'stream: stale_base' in h.errors(), 30.0, what='stale_base counted')
        assert h.count('com_queries') >= 6 and h.count('com_query_errors') >= 4
    assert stop(proc) == 0, node_output(proc)
    assert 'odometry rejected' in node_output(proc)


def test_biped_nominal_until_a_fit_appears_and_com_from_the_stance_foot(ros_env, tmp_path):
    config = load_arm_config('biped.yaml')
    fb = config.floating_base
    model = FloatingModel(config.urdf)
    nominal = ServedFloating.nominal(model)
    joints = list(model.joint_names)
    names = list(BASE_NAMES) + joints
    rng = np.random.default_rng(3)
    # no model_file, no fit under $ROS_HOME/arm_dyn_id/biped: the nominal URDF, warned
    proc = start(ros_env, {'config_file': 'biped.yaml'})
    with Probe(ros_env.domain_id) as h:
        h.wait_for(lambda: h.diags, TIMEOUT, what='diagnostics')
        assert h.diag('model_source') == 'nominal URDF'
        assert 'nominal' in h.diags[-1]['_message']
        assert h.diags[-1]['_level'] == DiagnosticStatus.WARN
        position = np.r_[0.0, 0.0, 0.8, 0, 0, 0, 1, rng.uniform(-0.3, 0.3, model.n)]
        np.testing.assert_allclose(value(h.ask('com', names, position)),
                                   model.com(position[None])[0], atol=1e-12)

        # the CoM stream from joint_states alone: the stance foot places the torso
        h.wait_for_subscribers(h.states, timeout=TIMEOUT)
        stamps = 7_000_000_000_000 + np.arange(5) * 1_000_000
        qs = rng.uniform(-0.3, 0.3, (len(stamps), model.n))
        dqs = rng.uniform(-0.3, 0.3, (len(stamps), model.n))
        for ns, q, dq in zip(stamps, qs, dqs):
            h.states.publish(joint_state(joints, q, dq, ns=ns))
        h.wait_for(lambda: all(int(ns) in h.com and int(ns) in h.momentum for ns in stamps),
                   30.0, what='com and momentum from joint_states')
        for ns, q, dq in zip(stamps, qs, dqs):
            base = nominal.base_from_stance_foot(0, q, fb.stance_foot, fb.stance_foot_pose, dq)
            config_q = np.r_[base.position, base.quaternion, q]
            point = h.com[int(ns)].point
            np.testing.assert_allclose([point.x, point.y, point.z],
                                       model.com(config_q[None])[0], atol=1e-10)
            np.testing.assert_allclose(h.momentum[int(ns)].effort,
                                       nominal.stream_momentum(base, q, dq), atol=1e-9)
        # the foot is on the ground at its configured pose
        pose = model.frame_pose(config_q, fb.stance_foot)
        np.testing.assert_allclose(pose.translation, fb.stance_foot_pose[:3], atol=1e-12)

        # a fit lands in <model_dir>/latest: served from then on
        _, _, phi, path = fitted('biped.yaml', tmp_path, seed=4)
        root = Path(ros_env['ROS_HOME']) / 'arm_dyn_id' / 'biped'
        root.mkdir(parents=True)
        (root / 'run1').mkdir()
        (root / 'run1' / 'model.yaml').write_text(path.read_text())
        (root / 'latest').symlink_to('run1')
        expected = model.com(position[None], phi)[0]
        h.wait_for(lambda: np.allclose(value(h.ask('com', names, position)), expected,
                                       atol=1e-12), 30.0, poll=0.1, what='the fit served')
        h.wait_for(lambda: h.diag('model_source') and
                   h.diag('model_source').endswith('latest/model.yaml'), 30.0,
                   what='diagnostics naming the fit')
        # a broken fit: the previous one kept, the reason in diagnostics and ~/reload
        (root / 'run1' / 'model.yaml').write_text('schema: something else\n')
        h.wait_for(lambda: 'not an arm_dyn_id model file' in (h.diag('reload_error') or ''),
                   30.0, what='reload error in diagnostics')
        np.testing.assert_allclose(value(h.ask('com', names, position)), expected, atol=1e-12)
        res = h.call(h.reload, Trigger.Request(), timeout=30.0)
        assert not res.success and 'not an arm_dyn_id model file' in res.message
    # SIGTERM (what a process manager sends) ends it cleanly too
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(TIMEOUT)
    finally:
        stop(proc)
    assert code == 0, node_output(proc)


@pytest.mark.parametrize('params, named', [
    ({'config_file': 'humanoid_arm.yaml'}, 'floating_base'),
    ({'config_file': 'space_manipulator.yaml', 'model_file': '/nonexistent/model.yaml'},
     'model_file'),
    ({}, 'config_file'),
])
def test_bad_configuration_is_one_fatal_line_and_exit_2(ros_env, params, named):
    proc = start(ros_env, params, name='floating_bad')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert named in fatal, node_output(proc)


def test_a_broken_latest_fit_at_start_is_refused(ros_env, tmp_path):
    """The latest fit exists but is not a model: the node does not serve the nominal URDF
    in its place (that is only for a model_dir with no fit): one FATAL line, exit 2."""
    root = tmp_path / 'fits'
    (root / 'run1').mkdir(parents=True)
    (root / 'run1' / 'model.yaml').write_text('schema: something else\n')
    (root / 'latest').symlink_to('run1')
    proc = start(ros_env, {'config_file': 'space_manipulator.yaml', 'model_dir': str(root)},
                 name='floating_broken_latest')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert 'not an arm_dyn_id model file' in fatal and 'fix or remove that fit' in fatal, fatal


def test_a_fit_of_a_recorded_bag_is_served_and_conserves_its_momentum(ros_env, tmp_path):
    """End to end: a space robot's bag (test/floating_bags.py: MuJoCo truth, noisy like a
    real recording) -> `arm-dyn-id fit` -> the node serves the folder's model.yaml; the
    bag's odometry and joint_states replayed through it give the momentum the core gives,
    close to the conserved zero, where the nominal URDF is far off."""
    from arm_dyn_id.cli import main
    from arm_dyn_id.data.floating import read_floating_bag
    from arm_dyn_id.service.floating import base_from_odometry
    from floating_bags import space_bag
    config_path, config, bag = space_bag(tmp_path / 'space')
    out = tmp_path / 'fit'
    assert main(['fit', str(bag), '--config', str(config_path), '--out', str(out),
                 '--no-report']) == 0
    data = read_floating_bag(bag, config)
    core = ServedFloating(FloatingIdentification.load(out / 'model.yaml'))
    nominal = ServedFloating.nominal(FloatingModel(config.urdf))
    fb = config.floating_base
    # max_base_age below the sample spacing: a joint_states paired with the wrong
    # odometry is stale (and sent again) rather than answered with another base pose
    proc = start(ros_env, {'config_file': str(config_path),
                           'model_file': str(out / 'model.yaml'), 'max_base_age': 0.001})
    with Probe(ros_env.domain_id, odometry_topic=fb.odometry_topic) as h:
        h.wait_for(lambda: h.models, TIMEOUT, what='the fit served')
        h.wait_for_subscribers(h.states, timeout=TIMEOUT)
        h.wait_for_subscribers(h.odometry, timeout=TIMEOUT)
        served, expected, against = [], [], []
        for k in np.linspace(0, len(data.t) - 1, 30).astype(int):
            ns = int(round(data.t[k] * 1e9))
            quat = data.base_quaternion[k] / np.linalg.norm(data.base_quaternion[k])
            R = pin.Quaternion(quat).toRotationMatrix()
            args = (data.base_position[k], quat, R.T @ data.base_linear[k],
                    data.base_angular[k])
            h.odometry.publish(odometry(ns, *args, child=fb.base_frame))
            msg = joint_state(config.joints, data.q[k], data.dq[k], ns=ns)
            deadline = time.monotonic() + 30.0
            while ns not in h.momentum:
                assert time.monotonic() < deadline, f'no momentum for sample {k}'
                h.states.publish(msg)
                try:
                    h.wait_for(lambda: ns in h.momentum, 0.5)
                except TimeoutError:
                    pass
            base = base_from_odometry(data.t[k], *args)
            served.append(h.momentum[ns].effort)
            expected.append(core.stream_momentum(base, data.q[k], data.dq[k]))
            against.append(nominal.stream_momentum(base, data.q[k], data.dq[k]))
        np.testing.assert_allclose(served, expected, rtol=1e-9, atol=1e-9)
        rms = np.sqrt(np.mean(np.square(served), axis=0))
        rms_nominal = np.sqrt(np.mean(np.square(against), axis=0))
        assert np.all(rms < 0.1 * rms_nominal), (rms, rms_nominal)
        h.wait_for(lambda: h.count('momentum_stream') >= 30, 30.0,
                   what='diagnostics counting the 30 streamed samples')
    assert stop(proc) == 0, node_output(proc)


def test_a_fit_marked_rejected_is_not_served(ros_env, tmp_path):
    """`arm-dyn-id fit --force` writes a refused fit marked rejected: a named model_file
    marked so is a configuration error (exit 2), as the identifier refuses one."""
    _, _, _, path = fitted('space_manipulator.yaml', tmp_path, seed=5)
    ident = FloatingIdentification.load(path)
    ident.metrics['rejected'] = 'predicts the linear momentum 3.0 x worse than the URDF'
    ident.save(path)
    proc = start(ros_env, {'config_file': 'space_manipulator.yaml', 'model_file': str(path)},
                 name='floating_rejected')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert 'marked rejected' in fatal, node_output(proc)
