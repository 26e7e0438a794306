"""The served full model without a Node (arm_dyn_id.service.dynamics, service.model_dir):
inverse-dynamics answers equal to DynamicsModel, error rejections, the momentum-observer
residual on a simulated arm (MuJoCo) pushed by an external force, and the model directory."""

import os

import mujoco
import numpy as np
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.data.joint_states import (
    DUPLICATE_JOINTS, EMPTY_ARRAY, LENGTH_MISMATCH, MISSING_JOINTS, NON_FINITE, UNKNOWN_JOINTS,
    Rejection)
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.model import load_model
from arm_dyn_id.model.dynamics import (
    DynamicsModel, FrictionModel, nominal_standard_parameters, rigid_base_parameters)
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.service.dynamics import (
    NO_MODEL, EquivalentDynamics, ResidualStream, ServedDynamics, answer_dynamics_query)
from arm_dyn_id.service.gravity import ServedModel
from arm_dyn_id.service.model_dir import (
    LATEST, default_model_dir, latest_model_file, resolve_model_dir, write_fit)
from arm_dyn_id.sim.arm import SimArm, SimParams, true_model

JOINTS = ('joint_1', 'joint_2', 'joint_3', 'joint_4', 'joint_5', 'joint_6')
PERM = [3, 0, 5, 1, 4, 2]


def full_model(robot, armature=False, seed=0, coulomb='sign', fc=None, fv=None,
               smooth_velocity=0.01):
    """A DynamicsModel whose link parameters are the URDF's, moved by a few per cent."""
    rng = np.random.default_rng(seed)
    base = rigid_base_parameters(robot, armature=armature)
    theta = nominal_standard_parameters(robot, armature=armature)
    theta = theta * (1 + 0.05 * rng.standard_normal(theta.shape))
    if armature:
        theta[-robot.n_joints:] = rng.uniform(0.001, 0.01, robot.n_joints)
    n = robot.n_joints
    fc = rng.uniform(0.01, 0.2, n) if fc is None else np.asarray(fc, dtype=float)
    fv = rng.uniform(0.01, 0.1, n) if fv is None else np.asarray(fv, dtype=float)
    friction = FrictionModel(coulomb=coulomb, smooth_velocity=smooth_velocity)
    return DynamicsModel(robot, base, base.beta(theta), friction,
                         np.column_stack([fc, fv]).ravel())


@pytest.fixture(scope='module')
def robot():
    config = load_arm_config('humanoid_arm.yaml')
    return RobotModel.from_config(config)


@pytest.mark.parametrize('armature', [False, True])
def test_inverse_dynamics_answer_equals_the_model_in_any_joint_order(robot, armature):
    model = full_model(robot, armature=armature)
    served = ServedDynamics(model)
    assert served.fast.exact and served.fast.max_error < 1e-9
    rng = np.random.default_rng(1)
    for _ in range(10):
        q, dq, ddq = rng.uniform(-2, 2, (3, 6))
        answer = served.query([JOINTS[i] for i in PERM], q[PERM], dq[PERM], ddq[PERM])
        q_used, dq_used, ddq_used, rigid, friction = answer
        np.testing.assert_allclose(q_used, q)
        np.testing.assert_allclose(ddq_used, ddq)
        scale = np.max(np.abs(model.torques(q, dq, ddq)))
        np.testing.assert_allclose(rigid, model.rigid_body_torques(q, dq, ddq),
                                   atol=1e-10 * scale)
        np.testing.assert_allclose(friction, model.friction_torques(dq), atol=1e-12)
        np.testing.assert_allclose(rigid + friction, model.torques(q, dq, ddq),
                                   atol=1e-10 * scale)


@pytest.mark.parametrize('friction', [
    FrictionModel(coulomb='tanh', smooth_velocity=0.02),
    FrictionModel(coulomb='sign', offset=True, stribeck=True, stribeck_velocity=0.1),
    FrictionModel(coulomb='tanh', smooth_velocity=0.005, offset=True, stribeck=True)])
def test_every_friction_law_is_served_as_the_model_computes_it(robot, friction):
    model = full_model(robot)
    k = friction.per_joint
    rng = np.random.default_rng(9)
    model = DynamicsModel(robot, model.base, model.beta, friction,
                          rng.uniform(0.01, 0.3, 6 * k) * np.tile([1, 1, -1, 1][:k], 6))
    served = ServedDynamics(model)
    assert served.fast._friction is not None        # the closed form, checked at load
    for dq in np.concatenate([rng.uniform(-2, 2, (20, 6)), rng.uniform(-0.01, 0.01, (20, 6)),
                              np.zeros((1, 6))]):
        np.testing.assert_allclose(served.query(list(JOINTS), dq, dq, dq)[4],
                                   model.friction_torques(dq), rtol=1e-12, atol=1e-14)


def test_gravity_and_payload_of_a_full_model_as_the_model_computes_them(robot):
    model = full_model(robot, armature=True, seed=2)
    payload = Payload(mass=0.3, com=(0.0, 0.01, 0.05), frame='flange')
    rng = np.random.default_rng(3)
    q, dq, ddq = rng.uniform(-2, 2, (3, 6))
    plain = ServedModel(model)          # a gravity query served from a full model
    np.testing.assert_allclose(plain.query(list(JOINTS), q)[1], model.gravity_torques(q),
                               atol=1e-12)
    moon = ServedDynamics(model, gravity=1.63, payload=payload)
    loaded = full_model(robot, armature=True, seed=2)
    loaded.set_payload(payload)
    np.testing.assert_allclose(moon.fast.gravity_torques(q),
                               loaded.gravity_torques(q, gravity=1.63), atol=1e-12)
    # the payload's inertia moves with the arm: the whole inverse dynamics changes
    earth = ServedDynamics(model, payload=payload)
    np.testing.assert_allclose(earth.query(list(JOINTS), q, dq, ddq)[3],
                               loaded.rigid_body_torques(q, dq, ddq), atol=1e-10)
    assert not np.allclose(earth.query(list(JOINTS), q, dq, ddq)[3],
                           model.rigid_body_torques(q, dq, ddq))


def test_wrong_queries_are_named_rejections(robot):
    served = ServedDynamics(full_model(robot))
    ok = np.zeros(6)
    nan = ok.copy()
    nan[2] = np.nan
    cases = [
        ((list(JOINTS), ok, ok, ok[:5]), LENGTH_MISMATCH, '6 names but 5 accelerations'),
        ((list(JOINTS), ok, ok[:4], ok), LENGTH_MISMATCH, '6 names but 4 velocities'),
        ((list(JOINTS), ok[:5], ok, ok), LENGTH_MISMATCH, '6 names but 5 positions'),
        ((list(JOINTS), ok, ok, []), EMPTY_ARRAY, 'acceleration (effort) is empty'),
        ((list(JOINTS), ok, nan, ok), NON_FINITE, 'velocity of joint_3 is NaN'),
        ((list(JOINTS), ok, ok, nan), NON_FINITE, 'acceleration (effort) of joint_3'),
        ((list(JOINTS) + ['gripper'], np.zeros(7), np.zeros(7), np.zeros(7)),
         UNKNOWN_JOINTS, "unknown joint 'gripper'"),
        ((list(JOINTS[:5]), ok[:5], ok[:5], ok[:5]), MISSING_JOINTS, "'joint_6' is missing"),
        ((list(JOINTS[:5]) + ['joint_1'], ok, ok, ok), DUPLICATE_JOINTS, 'joint_1'),
    ]
    for args, reason, text in cases:
        answer = served.query(*args)
        assert isinstance(answer, Rejection), args
        assert answer.reason == reason and text in answer.detail, answer
    missing = answer_dynamics_query(None, list(JOINTS), ok, ok, ok)
    assert missing.reason == NO_MODEL and 'no full-dynamics model' in missing.detail


# -- the residual on a simulated arm -------------------------------------------------
T_ON, T_OFF = 2.0, 2.6          # s, the external force acts in [T_ON, T_OFF)
FORCE = np.array([0.0, 0.0, -2.0])      # N on link_4, world frame (a hand pressing down)
THRESHOLDS = np.array([0.1, 0.1, 0.03, 0.03, 0.01, 0.01])     # N·m


def simulated_contact(force=FORCE, seconds=3.4):
    """The humanoid arm in MuJoCo (friction, current noise and gross errors as configured)
    tracking slow sinusoids on every joint, pushed on link_4 in [T_ON, T_OFF).

    Returns the config, the true model (URDF inertias, the simulator's tanh friction) and
    per sample: t, q, dq (measured), current (A), the external joint torque Jᵀ F (N·m).
    """
    config = load_arm_config('humanoid_arm.yaml', node_name='sim_arm_node')
    values = dict(config.extra)
    q0 = np.array([0.3, 0.6, 0.2, 0.8, 0.1, 0.2])
    values['initial_positions'] = q0.tolist()
    params = SimParams.from_params(values, config.n_joints)
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    model = true_model(robot, params)
    body = mujoco.mj_name2id(arm.model, mujoco.mjtObj.mjOBJ_BODY, 'link_4')
    w, amp, dt = 2 * np.pi * 0.25, 0.3, params.timestep
    rows = []
    for k in range(int(seconds / dt)):
        t = k * dt
        on = T_ON <= t < T_OFF
        arm.data.xfrc_applied[body, :3] = force if on else 0.0
        arm.step(q0 + amp * (1 - np.cos(w * t)), np.full(6, amp * w * np.sin(w * t)),
                 np.full(6, amp * w * w * np.cos(w * t)))
        ext = np.zeros(arm.model.nv)
        if on:
            mujoco.mj_applyFT(arm.model, arm.data, force, np.zeros(3), arm.data.xipos[body],
                              body, ext)
        _, q, dq, current = arm.measure()
        rows.append((t, q, dq, current, ext.copy()))
    t, q, dq, current, ext = (np.array(c) for c in zip(*rows))
    return config, model, t, q, dq, current, ext


@pytest.fixture(scope='module')
def contact_run():
    return simulated_contact()


def run_residual(config, model, t, q, dq, current, velocity=True, names=JOINTS):
    stream = ResidualStream(ServedDynamics(model), 25.0, THRESHOLDS,
                            torque_gains=config.joint_torque_gains,
                            offsets=config.current_offsets)
    out = [stream.update(list(names), t[k], q[k], dq[k] if velocity else [], current[k])
           for k in range(len(t))]
    assert not any(isinstance(o, Rejection) for o in out)
    residual = np.array([o[3] for o in out])
    contact = np.array([o[4] for o in out])
    model_torque = np.array([o[2] for o in out])
    return residual, contact, model_torque, stream


def test_residual_flags_a_simulated_contact_and_nothing_without_it(contact_run):
    config, model, t, q, dq, current, ext = contact_run
    residual, contact, model_torque, stream = run_residual(config, model, t, q, dq, current)
    before = (t > 0.2) & (t < T_ON)
    during = (t >= T_ON + 0.15) & (t < T_OFF)     # 1/K = 40 ms: risen by then
    after = t >= T_OFF + 0.3
    assert not contact[before].any(), np.abs(residual[before]).max(axis=0)
    assert contact[during].all()
    assert not contact[after].any(), np.abs(residual[after]).max(axis=0)
    # the residual is the external torque: Jᵀ F on the joints the push loads
    late = (t >= T_OFF - 0.1) & (t < T_OFF)
    err = np.abs(residual[late] - ext[late]).max(axis=0)
    assert np.all(err[:3] < 0.25 * np.abs(ext[late]).max(axis=0)[:3] + 0.03), (err, ext[late][-1])
    # measured = model + residual, sample by sample
    tau = config.joint_torque_gains * (current - config.current_offsets)
    np.testing.assert_allclose(model_torque + residual, tau, atol=1e-12)
    assert stream.observer.restarts == 0


def test_residual_without_velocity_estimates_it_and_still_flags_the_contact(contact_run):
    config, model, t, q, dq, current, ext = contact_run
    residual, contact, _, stream = run_residual(config, model, t, q, dq, current,
                                                velocity=False)
    assert not contact[(t > 0.3) & (t < T_ON)].any()
    assert contact[(t >= T_ON + 0.15) & (t < T_OFF)].mean() > 0.95
    assert not contact[t >= T_OFF + 0.3].any()


def test_no_force_no_flag_and_a_gap_restarts_the_observer(contact_run):
    config, model, *_ = contact_run
    _, _, t, q, dq, current, ext = simulated_contact(force=np.zeros(3), seconds=2.5)
    assert not ext.any()
    residual, contact, _, stream = run_residual(config, model, t, q, dq, current)
    assert not contact.any(), np.abs(residual).max(axis=0)
    # a 0.2 s hole in the stamps and a stamp that goes back: restarted, r = 0 there
    keep = (t < 1.0) | (t >= 1.2)
    residual, _, _, stream = run_residual(config, model, t[keep], q[keep], dq[keep],
                                          current[keep])
    assert stream.observer.restarts == 1
    assert np.all(residual[np.searchsorted(t[keep], 1.2)] == 0)
    t2 = t.copy()
    t2[1500] = t2[1498]
    stream = ResidualStream(ServedDynamics(model), 25.0, torque_gains=config.joint_torque_gains)
    for k in range(1505):
        stream.update(list(JOINTS), t2[k], q[k], dq[k], current[k])
    assert stream.observer.restarts == 1


def test_residual_stream_skips_unusable_joint_states(robot):
    stream = ResidualStream(ServedDynamics(full_model(robot)), [20.0] * 6, None)
    z = np.zeros(6)
    assert stream.update(list(JOINTS[:5]), 0.0, z[:5], z[:5], z[:5]).reason == MISSING_JOINTS
    assert stream.update(list(JOINTS), 0.0, z, z, []).reason == EMPTY_ARRAY
    bad = z.copy()
    bad[4] = np.inf
    assert stream.update(list(JOINTS), 0.0, z, z, bad).reason == NON_FINITE
    # extra joints (a gripper) are fine; no thresholds: never a contact
    out = stream.update(['gripper'] + list(JOINTS), 0.0, np.zeros(7), np.zeros(7),
                        np.r_[5.0, z + 1.0])
    assert out[4] is False
    with pytest.raises(ValueError):
        ResidualStream(ServedDynamics(full_model(robot)), [20.0] * 5)
    with pytest.raises(ValueError):
        ResidualStream(ServedDynamics(full_model(robot)), 20.0, [0.1] * 5 + [-1.0])


# -- model directory ---------------------------------------------------------------
def test_every_fit_gets_a_folder_and_latest_moves_atomically(tmp_path, robot):
    import datetime
    root = tmp_path / 'models'
    first = full_model(robot, seed=4)
    second = full_model(robot, seed=5)
    now = datetime.datetime(2026, 11, 23, 21, 0, 0)
    a = write_fit(root, first, '<robot name="x"/>', {'training': {}}, report=False, now=now)
    b = write_fit(root, second, None, None, report=False, now=now)      # same second
    assert a['folder'].name == '20261123-210000' and b['folder'].name == '20261123-210000-2'
    assert (a['folder'] / 'identified.urdf').read_text() == '<robot name="x"/>'
    assert (a['folder'] / 'validation.json').is_file()
    link = root / LATEST
    assert link.is_symlink() and os.readlink(link) == b['folder'].name      # relative
    q = np.full(6, 0.3)
    np.testing.assert_allclose(load_model(latest_model_file(root)).torques(q, q, q),
                               second.torques(q, q, q))
    assert not list(root.glob('.latest*'))      # no temporary link left behind


def test_model_dir_must_be_absolute_and_defaults_under_ros_home(tmp_path):
    assert default_model_dir('ur10e', {'ROS_HOME': str(tmp_path)}) == \
        tmp_path / 'arm_dyn_id' / 'ur10e'
    assert default_model_dir('ur10e', {}) == \
        resolve_model_dir('~/.ros/arm_dyn_id/ur10e', 'x')
    assert resolve_model_dir('', 'arm', {'ROS_HOME': str(tmp_path)}) == \
        tmp_path / 'arm_dyn_id' / 'arm'
    with pytest.raises(ConfigError, match='absolute'):
        resolve_model_dir('models/here', 'arm')


def test_no_equivalent_means_no_observer_but_answers_from_the_model(robot):
    model = full_model(robot)
    fast = EquivalentDynamics(model)
    assert fast.exact
    fast.exact = False      # as when a body of zero mass carries a first moment
    from arm_dyn_id.service.dynamics import MomentumObserver
    with pytest.raises(Exception, match='equivalent'):
        MomentumObserver(fast, 10.0)
    q = np.full(6, 0.2)
    np.testing.assert_allclose(fast.rigid_body(q, q, q), model.rigid_body_torques(q, q, q))
