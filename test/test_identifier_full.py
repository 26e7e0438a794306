"""identifier_node with full dynamics, across processes: inverse-dynamics queries equal to
DynamicsModel, error replies, the residual stream flagging a MuJoCo contact (and nothing
without it), a live full fit from Fourier data written to model_dir with its latest link,
and a payload identified with the arm frozen and added to the served model."""

import json
import threading

import numpy as np
import pytest
import yaml

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.identification.pipeline import fit_full_samples
from arm_dyn_id.model import load_model
from arm_dyn_id.model.dynamics import DynamicsModel
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics
from ros_utils import RosHarness, node_output, start_node, stop
from test_service_dynamics import (
    JOINTS, PERM, T_OFF, T_ON, THRESHOLDS, full_model, simulated_contact)

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Bool, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from arm_dyn_id.nodes.gravity_client import (  # noqa: E402
    DynamicsClient, GravityClient, GravityQueryError, ResidualMonitor)

NODE = 'arm_dyn_id.nodes.identifier_node'
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
CONFIG = load_arm_config('humanoid_arm.yaml')


def joint_state(t, names, position, velocity=(), effort=()):
    msg = JointState()
    ns = int(round(t * 1e9))
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10 ** 9, ns % 10 ** 9
    msg.name = list(names)
    msg.position = [float(x) for x in position]
    msg.velocity = [float(x) for x in velocity]
    msg.effort = [float(x) for x in effort]
    return msg


def stamp_of(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def diagnostics(harness):
    """A list that collects the identifier's diagnostics values (dicts)."""
    got = []

    def on_diag(msg):
        for status in msg.status:
            if status.name.startswith('identifier_node'):
                got.append({kv.key: kv.value for kv in status.values})
    harness.node.create_subscription(DiagnosticArray, 'diagnostics', on_diag, 10)
    return got


def query_error(call):
    with pytest.raises(GravityQueryError) as info:
        call()
    return str(info.value)


def test_full_model_served_queries_errors_and_residual_contact(ros_env, tmp_path):
    config, model, t, q, dq, current, ext = simulated_contact()
    path = model.save(tmp_path / 'full.yaml')
    proc = start_node(NODE, {'serve_only': True, 'model_file': str(path),
                             'config_file': str(config.source),
                             'contact_thresholds': THRESHOLDS.tolist(),
                             'observer_gains': [25.0]}, ros_env, name='identifier')
    served = load_model(path)
    assert isinstance(served, DynamicsModel)
    with RosHarness(ros_env.domain_id, name='full_probe') as h:
        ids, gravity = DynamicsClient(h.node), GravityClient(h.node)
        residuals, contacts = [], []
        monitor = ResidualMonitor(h.node, callback=residuals.append, depth=1000)
        h.node.create_subscription(Bool, 'contact', lambda m: contacts.append(m.data), QOS)
        states = h.node.create_publisher(JointState, 'joint_states', QOS)
        diags = diagnostics(h)
        assert ids.wait_for_server(30.0) and gravity.wait_for_server(30.0), node_output(proc)
        h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', 30.0,
                   what='the full model loaded')

        # inverse dynamics: names in any order, equal to DynamicsModel (rigid body, friction)
        rng = np.random.default_rng(3)
        names = [JOINTS[i] for i in PERM]
        for _ in range(10):
            qq, vv, aa = rng.uniform(-2, 2, (3, 6))
            got = ids.call(names, qq[PERM], vv[PERM], aa[PERM], timeout=30.0)
            scale = max(1.0, np.abs(served.torques(qq, vv, aa)).max())
            np.testing.assert_allclose(got.total, served.torques(qq, vv, aa)[PERM],
                                       atol=1e-9 * scale)
            np.testing.assert_allclose(got.rigid_body,
                                       served.rigid_body_torques(qq, vv, aa)[PERM],
                                       atol=1e-9 * scale)
            np.testing.assert_allclose(got.friction, served.friction_torques(vv)[PERM],
                                       atol=1e-12)
            np.testing.assert_allclose(gravity.call(names, qq[PERM], timeout=30.0),
                                       served.gravity_torques(qq)[PERM], atol=1e-9 * scale)
        # error replies
        z = np.zeros(6)
        nan = z.copy()
        nan[1] = np.nan
        assert '6 names but 5 accelerations' in query_error(
            lambda: ids.call(JOINTS, z, z, z[:5], timeout=30.0))
        assert '6 names but 4 velocities' in query_error(
            lambda: ids.call(JOINTS, z, z[:4], z, timeout=30.0))
        assert 'velocity of joint_2 is NaN' in query_error(
            lambda: ids.call(JOINTS, z, nan, z, timeout=30.0))
        assert 'acceleration (effort) of joint_2' in query_error(
            lambda: ids.call(JOINTS, z, z, nan, timeout=30.0))
        assert "unknown joint 'gripper'" in query_error(
            lambda: ids.call(list(JOINTS) + ['gripper'], np.zeros(7), np.zeros(7),
                             np.zeros(7), timeout=30.0))
        assert "'joint_6' is missing" in query_error(
            lambda: ids.call(JOINTS[:5], z[:5], z[:5], z[:5], timeout=30.0))

        # the residual stream: the simulated arm's joint_states (currents in effort), a
        # push on link_4 in [T_ON, T_OFF); paced by what came back (reliable, depth 1000),
        # with gravity queries all along: the stream must lose nothing to them
        h.wait_for_subscribers(states, timeout=20.0)
        answered, enough = [], threading.Event()

        def ask():
            while not enough.is_set():
                answered.append(gravity.call(list(JOINTS), q[len(answered) % len(q)],
                                             timeout=30.0))
        asker = threading.Thread(target=ask, name='queries', daemon=True)
        asker.start()
        h.publish_paced(
            states, (joint_state(t[k] + 100.0, ['gripper'] + list(JOINTS), np.r_[0.0, q[k]],
                                 np.r_[0.0, dq[k]], np.r_[0.0, current[k]])
                     for k in range(len(t))),
            lambda: min(len(residuals), len(contacts)),
            why=lambda: (f'{len(residuals)} external_torques, {len(contacts)} contact; '
                         f'diagnostics {diags[-1:]}\n{node_output(proc)}'))
        enough.set()
        asker.join(60.0)
        assert not asker.is_alive() and answered
        got = np.array([np.asarray(m.effort) for m in residuals])
        assert list(residuals[0].name) == list(JOINTS)
        np.testing.assert_allclose([stamp_of(m) - 100.0 for m in residuals], t, atol=1e-6)
        # the node computes what the library computes, sample by sample
        stream = ResidualStream(ServedDynamics(served), 25.0, THRESHOLDS,
                                torque_gains=config.joint_torque_gains,
                                offsets=config.current_offsets)
        expected = [stream.update(list(JOINTS), t[k] + 100.0, q[k], dq[k], current[k])
                    for k in range(len(t))]
        np.testing.assert_allclose(got, [e[3] for e in expected], atol=1e-9)
        flags = np.array(contacts)
        assert flags.tolist() == [bool(e[4]) for e in expected]
        assert not flags[(t > 0.2) & (t < T_ON)].any()
        assert flags[(t >= T_ON + 0.15) & (t < T_OFF)].all()
        assert not flags[t >= T_OFF + 0.3].any()
        assert monitor.contacts == 1 and monitor.contact is False
        assert monitor.latest(list(reversed(JOINTS)))[1][0] == got[-1][-1]
        h.wait_for(lambda: diags and diags[-1].get('contacts') == '1'
                   and int(diags[-1].get('residual_served')) == len(t), 30.0,
                   what='diagnostics counting the residuals and one contact')
    assert stop(proc) == 0, node_output(proc)
    assert 'contact: external torque' in node_output(proc)


def test_a_query_is_answered_ahead_of_the_stream_backlog(ros_env, tmp_path):
    """A query that comes while 1 kHz inputs wait in the node's queue is answered at the
    node's next publish, not behind the queue (issue 24, query p99 beside the stream):
    its reply leaves the node before the stream's answers to inputs already waiting.
    Told apart by the writers' source timestamps, whatever order the probe takes the
    topics in; without the query-first take the reply leaves after the whole burst."""
    robot = RobotModel.from_config(CONFIG)
    path = full_model(robot, seed=3).save(tmp_path / 'full.yaml')
    proc = start_node(NODE, {'serve_only': True, 'model_file': str(path),
                             'config_file': str(CONFIG.source),
                             'contact_thresholds': THRESHOLDS.tolist()}, ros_env,
                      name='identifier')
    burst = 600     # inputs published at once: ~0.3 s of the node's work
    with RosHarness(ros_env.domain_id, name='backlog_probe') as h:
        gravity = GravityClient(h.node)
        sent, replies = {}, []     # stream answer's source time by input (ms); replies'

        def on_stream(msg, info):
            stamp = msg.header.stamp
            sent[stamp.sec * 1000 + stamp.nanosec // 10 ** 6] = info['source_timestamp']
        h.node.create_subscription(JointState, 'gravity_torques', on_stream, QOS)
        h.node.create_subscription(JointState, 'gravity_result',
                                   lambda _m, info: replies.append(info['source_timestamp']),
                                   QOS)
        states = h.node.create_publisher(JointState, 'joint_states', QOS)
        diags = diagnostics(h)
        assert gravity.wait_for_server(30.0), node_output(proc)
        h.wait_for_subscribers(states, timeout=20.0)
        h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', 30.0,
                   what='the full model loaded')
        q = np.array([0.3, 0.6, 0.2, 0.8, 0.1, 0.2])
        ahead = []
        # a burst whose backlog the node had worked off before the query came (the probe
        # descheduled) says nothing either way: up to three bursts
        for b in range(1, 4):
            first = 1000 * 1000 * b     # ms
            for k in range(burst):
                states.publish(joint_state((first + k) * 1e-3, JOINTS, q, np.zeros(6),
                                           np.zeros(6)))
            del replies[:]
            gravity.call(list(JOINTS), q, timeout=30.0)
            h.wait_for(lambda: replies, 30.0, what='the reply on the probe\'s subscription')
            reply = min(replies)
            h.wait_for(lambda: all(first + k in sent for k in range(burst)), 60.0,
                       what=f'the stream\'s answers to burst {b}')
            ahead.append(sum(sent[first + k] > reply for k in range(burst)))
            if ahead[-1] >= 50:
                break
        assert ahead[-1] >= 50, f'stream answers sent after the reply, per burst: {ahead}'
    assert stop(proc) == 0, node_output(proc)


# -- a live full fit -----------------------------------------------------------------
def fourier(seconds=30.0, rate=100.0, seed=0, harmonics=5, base_hz=0.1, amplitude=0.3):
    """A Fourier excitation (seed 001 eq. 19) of every joint: t, q, dq, ddq."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    wf = 2 * np.pi * base_hz
    q, dq, ddq = (np.zeros((len(t), 6)) for _ in range(3))
    for k in range(1, harmonics + 1):
        a, b = rng.uniform(-amplitude, amplitude, (2, 6))
        s, c = np.sin(k * wf * t)[:, None], np.cos(k * wf * t)[:, None]
        q += a / (k * wf) * s - b / (k * wf) * c
        dq += a * c + b * s
        ddq += -a * k * wf * s + b * k * wf * c
    return t, q, dq, ddq


def test_live_full_fit_written_to_model_dir_served_and_payload(ros_env, tmp_path):
    robot = RobotModel.from_config(CONFIG)
    truth = full_model(robot, seed=7)
    t, q, dq, ddq = fourier()
    noise = np.array([0.01, 0.01, 0.003, 0.003, 0.0003, 0.0001])
    rng = np.random.default_rng(8)
    tau = truth.torques(q, dq, ddq) + rng.normal(size=q.shape) * noise
    t0 = 1000.0
    model_dir = tmp_path / 'models'
    config_file = tmp_path / 'arm.yaml'
    config_file.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'robot_name': 'humanoid_arm', 'urdf': str(CONFIG.urdf), 'joints': list(JOINTS),
        'gravity': 9.81, 'torque_constants': [1.0] * 6, 'torque_noise': noise.tolist(),
        'position_limits_lower': [-3.0] * 6, 'position_limits_upper': [3.0] * 6,
        'velocity_limits': [2.0] * 6, 'acceleration_limits': [5.0] * 6}}}))
    proc = start_node(NODE, {'config_file': str(config_file), 'model_dir': str(model_dir),
                             'full_methods': ['wls'], 'fit_on_done': False,
                             'payload_window': 25.0}, ros_env, name='identifier')
    with RosHarness(ros_env.domain_id, name='fit_probe') as h:
        torques = h.node.create_publisher(JointState, 'joint_torques', QOS)
        markers = h.node.create_publisher(String, 'excitation_segments', LATCHED)
        models = []
        h.node.create_subscription(String, '/identifier_node/model',
                                   lambda m: models.append(m.data), LATCHED)
        diags = diagnostics(h)
        ids = DynamicsClient(h.node)
        fit = h.node.create_client(Trigger, '/identifier_node/fit')
        identify = h.node.create_client(Trigger, '/identifier_node/identify_payload')
        apply = h.node.create_client(Trigger, '/identifier_node/apply_payload')
        h.wait_for_subscribers(torques, timeout=30.0)

        def send(t, q, tau, count_before):
            for lo in range(0, len(t), 900):      # within the node's queue depth (1000)
                for k in range(lo, min(lo + 900, len(t))):
                    torques.publish(joint_state(t[k], JOINTS, q[k], (), tau[k]))
                sent = count_before + min(lo + 900, len(t))
                h.wait_for(lambda: diags and int(diags[-1]['samples']) >= sent, 30.0,
                           what=f'{sent} samples in diagnostics')

        # the excitation node announces a Fourier plan: auto dynamics picks full
        markers.publish(String(data=json.dumps({
            'segment_id': -1, 'joint': None, 'joint_index': -1, 'direction': 0,
            'phase': 'start', 't': t0 - 0.5, 'plan': 'fourier', 'plan_kind': 'fourier'})))
        send(t + t0, q, tau, 0)
        h.wait_for(lambda: diags[-1]['markers'] == '1', 30.0, what='the start marker')
        res = h.call(fit, Trigger.Request(), timeout=120.0)
        assert res.success, res.message + node_output(proc)
        assert res.message.startswith('full dynamics') and 'fourier' in res.message
        h.wait_for(lambda: models, 30.0, what='the model on ~/model')
        assert yaml.safe_load(models[-1])['dynamics'] == 'full'

        # written under model_dir, latest -> the fit's folder
        latest = model_dir / 'latest'
        assert latest.is_symlink(), list(model_dir.iterdir())
        folder = model_dir / latest.readlink()
        assert folder.parent == model_dir and folder.name[:8].isdigit()
        assert str(folder) in res.message
        fitted = load_model(latest / 'model.yaml')
        assert isinstance(fitted, DynamicsModel)
        assert json.loads((folder / 'validation.json').read_text())['held_out']
        # contact thresholds from the fit's own held-out residuals, as arm-dyn-id fit writes
        # them, and served by the residual stream (write_thresholds, on by default)
        assert 'contact thresholds from its last 7.49 s held out' in res.message, res.message
        assert (folder / 'contact_thresholds.yaml').is_file()
        h.wait_for(lambda: 'contact by the calibrated thresholds' in diags[-1]['residual'],
                   30.0, what='the residual stream on the fit\'s thresholds')
        # the same fit as the library's pipeline (that of arm-dyn-id fit) on the same
        # samples with the node's config (its friction choice, `auto` by default)
        ref = fit_full_samples(robot, t + t0, q, tau, config=load_arm_config(config_file),
                               methods=('wls',)).model
        np.testing.assert_allclose(fitted.parameter_values, ref.parameter_values,
                                   rtol=1e-6, atol=1e-9)
        # and a sane one on the data it was fitted on (a sanity bound: the accuracy of the
        # fit itself is test_full_dynamics.py's; the wrists' Coulomb steps cost most here)
        pred = fitted.torques(q, dq, ddq)
        rms = np.sqrt(np.mean((pred - truth.torques(q, dq, ddq)) ** 2, axis=0))
        assert np.all(rms < 0.1 * np.abs(tau).max(axis=0)), rms
        # served: inverse-dynamics queries answered with the fitted model
        assert ids.wait_for_server(30.0)
        got = ids.call(JOINTS, q[500], dq[500], ddq[500], timeout=30.0)
        np.testing.assert_allclose(got.total, fitted.torques(q[500], dq[500], ddq[500]),
                                   rtol=1e-9, atol=1e-9)
        h.wait_for(lambda: (folder / 'report.html').is_file(), 180.0,
                   what='report.html rendered in the fit folder')

        # a payload: the same motion again with 0.3 kg at the flange
        payload = Payload(mass=0.3, com=(0.0, 0.0, 0.05), frame='flange')
        loaded = full_model(robot, seed=7)
        loaded.set_payload(payload)
        t2 = t + t[-1] + 1.0 + t0
        tau2 = loaded.torques(q, dq, ddq) + rng.normal(size=q.shape) * noise
        res = h.call(apply, Trigger.Request(), timeout=10.0)
        assert not res.success and 'identify_payload first' in res.message
        send(t2, q, tau2, len(t))
        res = h.call(identify, Trigger.Request(), timeout=60.0)
        assert res.success, res.message
        found = json.loads(res.message)
        assert found['mass'] == pytest.approx(0.3, rel=0.05), found
        assert found['samples'] == int(np.sum(t2 >= t2[-1] - 25.0))
        res = h.call(apply, Trigger.Request(), timeout=30.0)
        assert res.success, res.message
        with_payload = ids.call(JOINTS, q[500], dq[500], ddq[500], timeout=30.0)
        mine = load_model(latest / 'model.yaml')
        mine.set_payload(Payload(mass=found['mass'], com=tuple(found['com']), frame='flange'))
        np.testing.assert_allclose(with_payload.total, mine.torques(q[500], dq[500], ddq[500]),
                                   rtol=1e-9, atol=1e-9)
    assert stop(proc) == 0, node_output(proc)


@pytest.mark.parametrize('param, value, needle', [
    ('model_dir', 'relative/models', "model_dir = 'relative/models' must be an absolute"),
    ('dynamics', 'rigid', "dynamics = 'rigid'; choose from"),
    ('contact_thresholds', [0.1, -1.0], 'contact_thresholds = [0.1, -1.0]'),
])
def test_bad_dynamics_parameters_end_the_node_with_one_line(ros_env, tmp_path, param, value,
                                                            needle):
    proc = start_node(NODE, {'config_file': str(CONFIG.source), param: value}, ros_env,
                      name='identifier')
    assert proc.wait(timeout=60) == 2, node_output(proc)
    out = node_output(proc)
    assert needle in out and 'Traceback' not in out, out
