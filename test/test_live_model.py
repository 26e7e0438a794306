"""The model the identifier serves while the arm works, without ROS
(arm_dyn_id.service.live_model): the stream and the queries share the served objects;
friction versions are served, rolled back, and never overwrite a model installed
meanwhile; the payload watch says why it stops."""

import numpy as np
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics
from arm_dyn_id.service.gravity import ServedModel
from arm_dyn_id.service.live_model import LiveFriction, LiveModel
from arm_dyn_id.sim.warmup import warm_up
from test_friction_drift import FAST, FC, FV, GAINS
from test_service_dynamics import JOINTS, full_model


@pytest.fixture(scope='module')
def model():
    """The humanoid arm with the friction test's Coulomb and viscous friction."""
    robot = RobotModel.from_config(load_arm_config('humanoid_arm.yaml'))
    return full_model(robot, coulomb='tanh', fc=FC, fv=FV, smooth_velocity=0.01)


def built(model):
    """What identifier_node builds to serve a full model (its _build_served)."""
    dynamics = ServedDynamics(model)
    return {'served': ServedModel(model, fast=dynamics.fast), 'dynamics': dynamics,
            'residual': ResidualStream(dynamics, GAINS), 'residual_status': 'on'}


def stream(live, data, start=0, stop=None):
    """Feed a recording through LiveModel.stream; the residuals (N, n)."""
    out = []
    for k in range(start, len(data.t) if stop is None else stop):
        answer = live.stream(JOINTS, data.t[k], data.q[k], data.dq[k], data.tau[k])
        out.append(answer.residual[3])
    return np.array(out)


@pytest.fixture(scope='module')
def data(model):
    return warm_up(model, 60.0)


def test_queries_between_stream_messages_get_the_answers_of_a_model_alone(model, data):
    """The stream and the queries share the served objects (and a full model's pinocchio
    data): interleaved, each gets what it gets alone."""
    live = LiveModel()
    live.install(built(model))
    reference = ServedDynamics(model)
    poses = np.random.default_rng(3).uniform(-1.5, 1.5, (300, 3, 6))
    residual = []
    for k, (q, dq, ddq) in enumerate(poses):
        out = live.stream(JOINTS, data.t[k], data.q[k], data.dq[k], data.tau[k])
        residual.append(out.residual[3])
        _, (_, _, _, rigid, friction) = live.dynamics_query(JOINTS, q, dq, ddq)
        _, (_, gravity) = live.query(JOINTS, q)
        want = reference.query(JOINTS, q, dq, ddq)
        np.testing.assert_allclose(rigid, want[3], rtol=0, atol=1e-9)
        np.testing.assert_allclose(friction, want[4], rtol=0, atol=1e-12)
        np.testing.assert_allclose(gravity, reference.fast.gravity_torques(q), rtol=0,
                                   atol=1e-9)
    alone = LiveModel()
    alone.install(built(model))
    np.testing.assert_allclose(residual, stream(alone, data, stop=len(poses)), rtol=0,
                               atol=1e-9)


def tracking(model):
    docs, logs = [], []
    friction = LiveFriction(FAST, lambda: None, docs.append,
                            lambda level, text: logs.append((level, text)))
    live = LiveModel(friction)
    live.install(built(model))
    return live, docs, logs


def coherent(live):
    """The served dynamics and the residual stream serve the tracker's current friction."""
    phi = live.friction.tracker.phi
    return (live.dynamics.fast is live.residual.observer.dynamics and
            np.allclose(live.dynamics.model.phi, phi, rtol=0, atol=0))


def test_friction_versions_are_served_rolled_back_and_published(model, data):
    live, docs, logs = tracking(model)
    fitted = live.dynamics
    stream(live, data)
    version = live.friction.version
    assert version >= 3 and live.dynamics is not fitted and coherent(live)
    assert [d['version'] for d in docs] == list(range(version + 1))     # 0 at the start
    assert docs[-1]['status'] == live.friction.status
    assert ('info', f'friction tracking on (model {live.friction.tracker.model_id}): no '
            'model file: the tracked friction is not saved') in logs
    ok, message = live.rollback_friction()
    assert ok and message == f'friction rolled back from version {version} to version ' \
        f'{version - 1}'
    assert live.friction.version == version - 1 and coherent(live)
    # the fitted friction back, then nothing left to roll back
    while live.friction.version:
        assert live.rollback_friction()[0]
    np.testing.assert_array_equal(live.dynamics.model.phi, fitted.model.phi)
    assert live.rollback_friction() == (False, 'already serving the fitted friction '
                                        '(version 0)')


def test_a_model_installed_while_tracking_is_served_with_the_tracked_friction(model, data):
    live, docs, _ = tracking(model)
    stream(live, data, stop=2000)
    version = live.friction.version
    assert version >= 1
    new = built(model)          # a payload or gravity change rebuilds what serves
    live.install(new)
    assert live.dynamics is new['dynamics']
    stream(live, data, start=2000, stop=2001)
    # the same model keeps its tracker: its version goes on being served by the new objects
    assert live.residual is new['residual'] and live.friction.version == version
    assert coherent(live) and live.dynamics.fast is new['residual'].observer.dynamics


def test_without_tracking_rollback_says_why():
    assert LiveModel().rollback_friction() == (
        False, 'friction_tracking is false: there is nothing to roll back')
    assert LiveModel().stream(JOINTS, 0.0, [0.0] * 6, [], [0.0] * 6).served is None


def test_the_gravity_stream_is_the_served_models_with_or_without_a_residual(model, data):
    live = LiveModel()
    live.install(built(model))
    alone = ServedModel(model)
    for k in range(0, 2000, 97):
        out = live.stream(JOINTS, data.t[k], data.q[k], data.dq[k], data.tau[k])
        np.testing.assert_allclose(out.gravity[1], alone.stream(JOINTS, data.q[k])[1],
                                   rtol=1e-12, atol=1e-12)
    # a message the residual refuses (NaN current) still gets its gravity torques
    bad = np.array(data.tau[2000])
    bad[2] = np.nan
    out = live.stream(JOINTS, data.t[2000], data.q[2000], data.dq[2000], bad)
    assert out.residual.reason == 'non_finite'
    np.testing.assert_allclose(out.gravity[1], alone.stream(JOINTS, data.q[2000])[1],
                               rtol=1e-12, atol=1e-12)


def test_a_payload_watch_on_a_frame_the_urdf_lacks_turns_off_and_says_why(model, data):
    from arm_dyn_id.service.live_model import LiveWatch
    from arm_dyn_id.service.payload_watch import WatchSettings
    events, applied, logs = [], [], []
    watch = LiveWatch(WatchSettings(), 'gripper_tip', None, None, events.append,
                      applied.append, lambda level, text: logs.append((level, text)))
    live = LiveModel(watch=watch)
    live.install(built(model))
    assert watch.status == 'no residual yet'
    stream(live, data, stop=50)
    assert watch.status.startswith('off: ') and 'gripper_tip' in watch.status
    assert [level for level, _ in logs] == ['error']         # said once, then quiet
    assert logs[0][1].startswith('payload watch off: ') and not events and not applied
