"""Friction drift tracked while serving (arm_dyn_id.service.friction_drift, issue 24 item 6):
the online update follows a simulated fall of Coulomb and viscous friction with the rigid
body frozen, refuses one beyond its bounds (and keeps serving the last good), rolls back,
persists beside the model; and identifier_node serves it (versions in diagnostics and on
~/friction, ~/rollback_friction)."""

import json

import numpy as np
import pytest
import yaml

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.service.dynamics import ServedDynamics
from arm_dyn_id.service.friction_drift import (
    STATE_FILE, FrictionTracker, TrackerSettings, save_state, state_path, track_recording)
from arm_dyn_id.sim.warmup import warm_up
from test_service_dynamics import JOINTS, full_model

FC = np.array([0.3, 0.3, 0.06, 0.06, 0.01, 0.005])     # N·m
FV = np.array([0.5, 0.5, 0.1, 0.1, 0.02, 0.01])        # N·m·s/rad
GAINS = 25.0
FAST = TrackerSettings(forgetting_time=10.0, period=2.0, rate=100.0)


@pytest.fixture(scope='module')
def model():
    robot = RobotModel.from_config(load_arm_config('humanoid_arm.yaml'))
    return full_model(robot, coulomb='tanh', fc=FC, fv=FV, smooth_velocity=0.01)


def run(model, data, tracker=None):
    """The node's residual path on a warm-up; residual (N, n) and the updates served."""
    return track_recording(model, data.t, data.q, data.dq, data.tau, GAINS, tracker)


def rms(x, mask):
    return np.sqrt(np.mean(x[mask] ** 2, axis=0))


@pytest.fixture(scope='module')
def tracked(model):
    data = warm_up(model, 120.0)        # friction -30 % over 90 s, then held
    frozen, _ = run(model, data)
    tracker = FrictionTracker(model, GAINS, FAST)
    residual, updates = run(model, data, tracker)
    return data, frozen, residual, updates, tracker


def in_bounds(tracker, phi):
    cols = np.asarray(phi).reshape(6, 2)
    return np.all((cols >= tracker.lower) & (cols <= tracker.upper))


def test_online_update_tracks_a_30_percent_fall_of_coulomb_and_viscous(model, tracked):
    (t, _, _, _, scale), frozen, residual, updates, tracker = tracked
    cold, end = t < 5.0, t >= 100.0
    # the frozen model's residual grows with the drift; the tracked one's stays near cold
    assert np.all(rms(frozen, end)[:4] > 3.0 * rms(frozen, cold)[:4])
    assert np.all(rms(residual, end) < 1.5 * rms(frozen, cold) + 1e-3)
    assert np.all(rms(residual, end)[:4] < 0.3 * rms(frozen, end)[:4])
    # the served friction follows the 30 % fall (the four joints with real friction)
    got = tracker.phi.reshape(6, 2)
    truth = scale[-1] * np.column_stack([FC, FV])
    np.testing.assert_allclose(got[:4].sum(axis=1), truth[:4].sum(axis=1), rtol=0.06)
    # versions: monotonic, every one inside the bounds, the rigid body never touched
    versions = [u.version for u in updates]
    assert versions == list(range(1, len(updates) + 1)) and tracker.version == versions[-1]
    assert all(in_bounds(tracker, u.phi) for u in updates)
    # only the wrists' tiny friction (5 mN·m) may, with 10 s of forgetting, touch a bound
    # (the sign); the four joints with real friction are never refused
    assert tracker.refusals == 0 or not any(f'{j} ' in tracker.status for j in JOINTS[:4])


def test_an_update_beyond_the_bounds_is_refused_and_the_last_good_one_served(model):
    # friction falls 70 %: below the lower bound (half the fitted value)
    data = warm_up(model, seconds=90.0, fall=0.7, ramp=60.0)
    tracker = FrictionTracker(model, GAINS, FAST)
    _, updates = run(model, data, tracker)
    assert tracker.refusals > 0
    assert 'refused' in tracker.status and 'refit' in tracker.status
    assert any(f'{j} ' in tracker.status for j in JOINTS)
    assert 'coulomb' in tracker.status or 'viscous' in tracker.status
    # never left its bounds: every version served and the one served now
    assert updates and all(in_bounds(tracker, u.phi) for u in updates)
    np.testing.assert_array_equal(tracker.phi, updates[-1].phi)
    assert tracker.version == updates[-1].version
    # it followed the fall down to the bounds, then stopped there
    assert np.min(tracker.phi.reshape(6, 2)[:4] / np.column_stack([FC, FV])[:4]) < 0.65


def test_bounds_and_settings_are_checked(model):
    tracker = FrictionTracker(model, GAINS, TrackerSettings(bounds=(0.5, 1.5), margin=0.01))
    np.testing.assert_allclose(tracker.lower[:, 0], np.maximum(0.5 * FC - 0.01, 0.0))
    np.testing.assert_allclose(tracker.upper[:, 1], 1.5 * FV + 0.01)
    assert np.all(tracker.lower >= 0)
    for bad in ({'bounds': (1.2, 1.5)}, {'forgetting_time': 0.0}, {'period': -1.0},
                {'min_steps': 0}):
        with pytest.raises(ValueError):
            TrackerSettings(**bad)


def test_rollback_to_the_previous_version_and_to_the_fitted_friction(model, tracked):
    *_, updates, _ = tracked
    tracker = FrictionTracker(model, GAINS, FAST)
    run(model, warm_up(model, seconds=40.0), tracker)
    last = tracker.version
    assert last >= 3
    before = tracker.history[-2]
    back = tracker.rollback()
    assert back.version == before[0] < last and tracker.version == before[0]
    np.testing.assert_array_equal(tracker.phi, before[1])
    assert 'rolled back' in tracker.status
    assert tracker.rollback(0).version == 0
    np.testing.assert_array_equal(tracker.phi, model.phi)
    with pytest.raises(ValueError, match='not kept'):
        tracker.rollback(last)
    # tracking goes on after a rollback; a new version never reuses a number
    _, more = run(model, warm_up(model, seconds=20.0, seed=5), tracker)
    assert more and more[0].version == last + 1


def test_state_persists_beside_the_model_and_another_models_is_ignored(model, tmp_path):
    tracker = FrictionTracker(model, GAINS, FAST)
    run(model, warm_up(model, seconds=20.0), tracker)
    assert tracker.version > 0
    path = state_path(tmp_path / 'model.yaml')
    assert path.name == STATE_FILE
    save_state(tracker.to_dict(), path)
    assert not list(tmp_path.glob('*.tmp'))
    doc = yaml.safe_load(path.read_text())
    assert doc['version'] == tracker.version and doc['model_id'] == tracker.model_id

    again = FrictionTracker(model, GAINS, FAST)
    update, message = again.restore(path)
    assert update.version == tracker.version and f'version {tracker.version}' in message
    np.testing.assert_allclose(again.phi, tracker.phi)
    assert again.versions == tracker.versions
    assert again.next_version == tracker.next_version

    other = full_model(model.robot, coulomb='tanh', fc=FC * 1.1, fv=FV, smooth_velocity=0.01)
    stranger = FrictionTracker(other, GAINS, FAST)
    update, message = stranger.restore(path)
    assert update is None and 'ignored' in message and stranger.version == 0
    np.testing.assert_array_equal(stranger.phi, other.phi)
    update, message = stranger.restore(tmp_path / 'none' / STATE_FILE)
    assert update is None and 'fitted friction' in message


def test_served_dynamics_with_friction_keeps_the_rigid_body(model):
    served = ServedDynamics(model)
    phi = 0.7 * model.phi
    other = served.with_friction(phi)
    rng = np.random.default_rng(2)
    q, dq, ddq = rng.uniform(-1, 1, (3, 6))
    np.testing.assert_allclose(other.fast.friction(dq), 0.7 * served.fast.friction(dq))
    np.testing.assert_array_equal(other.fast.rigid_body(q, dq, ddq),
                                  served.fast.rigid_body(q, dq, ddq))
    np.testing.assert_array_equal(served.model.phi, model.phi)     # not changed
    assert other.fast._friction is not None      # the closed form, not the generic path


# -- the node ------------------------------------------------------------------------
@pytest.mark.ros
@pytest.mark.slow
def test_identifier_node_tracks_friction_serves_versions_and_rolls_back(model, ros_env,
                                                                        tmp_path):
    pytest.importorskip('rclpy')
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from std_srvs.srv import Trigger
    from ros_utils import RosHarness, node_output, start_node, stop
    from test_identifier_full import diagnostics, joint_state

    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    folder = tmp_path / 'fit'
    path = model.save(folder / 'model.yaml')
    proc = start_node('arm_dyn_id.nodes.identifier_node', {
        'serve_only': True, 'model_file': str(path), 'joint_states_effort': 'torque',
        'observer_gains': [GAINS], 'friction_tracking': True,
        'friction_forgetting_time': 10.0, 'friction_period': 2.0}, ros_env,
        name='identifier')
    t, q, dq, tau, _ = warm_up(model, seconds=30.0, ramp=20.0)
    with RosHarness(ros_env.domain_id, name='friction_probe') as h:
        versions, residuals = [], []
        diags = diagnostics(h)
        h.node.create_subscription(String, 'identifier_node/friction',
                                   lambda m: versions.append(json.loads(m.data)), latched)
        h.node.create_subscription(JointState, 'external_torques', residuals.append, qos)
        states = h.node.create_publisher(JointState, 'joint_states', qos)
        rollback = h.node.create_client(Trigger, 'identifier_node/rollback_friction')
        h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', 60.0,
                   what='the full model served')
        assert diags[-1]['friction_version'] == '0', diags[-1]
        h.wait_for_subscribers(states, timeout=30.0)
        h.publish_paced(states, (joint_state(t[k] + 100.0, JOINTS, q[k], dq[k], tau[k])
                                 for k in range(len(t))), lambda: len(residuals),
                        why=lambda: f'{diags[-1:]}\n{node_output(proc)}')
        h.wait_for(lambda: versions and versions[-1]['version'] >= 3, 60.0,
                   what='friction versions on ~/friction')
        last = versions[-1]
        assert [v['version'] for v in versions] == sorted(v['version'] for v in versions)
        assert last['coulomb'][0] < FC[0] and last['model_id']
        h.wait_for(lambda: int(diags[-1].get('friction_version', -1)) == last['version'],
                   60.0, what='the version in diagnostics')
        assert diags[-1]['friction_tracking'].startswith('tracking')
        h.wait_for(lambda: yaml.safe_load((folder / STATE_FILE).read_text())['version']
                   == last['version'] if (folder / STATE_FILE).exists() else False, 60.0,
                   what=f'{STATE_FILE} beside the model')

        assert rollback.wait_for_service(timeout_sec=30.0)
        reply = h.call(rollback, Trigger.Request(), timeout=30.0)
        assert reply.success, reply.message
        h.wait_for(lambda: versions[-1]['version'] < last['version'], 60.0,
                   what='the rollback on ~/friction')
        back = versions[-1]['version']
        assert f'version {back}' in reply.message
        h.wait_for(lambda: int(diags[-1].get('friction_version', -1)) == back, 60.0,
                   what='the rollback in diagnostics')
        assert 'rolled back' in diags[-1]['friction_tracking']
    assert stop(proc) == 0, node_output(proc)
