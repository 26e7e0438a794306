"""Oracle tests of the model core against pinocchio (issue 2)."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.model.base_parameters import gravity_base_parameters, inertial_base_parameters
from arm_dyn_id.errors import JointNameError, URDFError
from arm_dyn_id.model.robot import Payload, RobotModel

URDF_DIR = Path(__file__).resolve().parent.parent / 'urdf'
ARMS = ['humanoid_arm.urdf', 'staubli_tx60.urdf']


@pytest.fixture(scope='module', params=ARMS)
def robot(request):
    return RobotModel.from_urdf(URDF_DIR / request.param)


def random_q(robot, n, seed):
    return np.random.default_rng(seed).uniform(-np.pi, np.pi, size=(n, robot.n_joints))


def test_gravity_regressor_times_parameters_is_pinocchio_gravity(robot):
    q = random_q(robot, 100, seed=1)
    theta = robot.parameters('gravity')
    Y = robot.gravity_regressor(q)
    for qi, Yi in zip(q, Y):
        expected = pin.computeGeneralizedGravity(robot.model, robot.data, qi)
        np.testing.assert_allclose(Yi @ theta, expected, atol=1e-9, rtol=0)


def test_batch_regressor_equals_pinocchio_regressor_columns(robot):
    q = random_q(robot, 50, seed=2)
    Y = robot.gravity_regressor(q)
    for qi, Yi in zip(q, Y):
        np.testing.assert_allclose(Yi, robot.gravity_regressor_pin(qi), atol=1e-9, rtol=0)
    # one configuration gives the 2-D form
    assert robot.gravity_regressor(q[0]).shape == (robot.n_joints, 4 * robot.n_bodies)


def test_base_regressor_reproduces_gravity(robot):
    base = gravity_base_parameters(robot)
    beta = base.beta(robot.parameters('gravity'))
    q = random_q(robot, 100, seed=3)
    Yb = base.reduce(robot.gravity_regressor(q))
    np.testing.assert_allclose(np.einsum('nij,j->ni', Yb, beta), robot.gravity_torques(q),
                               atol=1e-9, rtol=0)


def test_a_fitted_gravity_under_another_direction_keeps_the_urdf_where_undetermined(robot):
    """Under gravity along another direction (a tilt's columns), the parameters an upright
    fit leaves undetermined carry torque: with zeros on them, the TX-60's first joint under a
    horizontal gravity missed most of its torque. A model whose base values are the URDF's
    gives the URDF's torque along any direction, and its own along the fit's."""
    from arm_dyn_id.model.gravity import GravityModel
    base = gravity_base_parameters(robot)
    theta = robot.parameters('gravity')
    model = GravityModel(robot.copy(), base, base.beta(theta))
    q = random_q(robot, 50, seed=4)
    for vector in ([9.81, 0.0, 0.0], [0.0, 6.0, -7.76], [0.0, 0.0, -9.81]):
        np.testing.assert_allclose(model.gravity_torques_along(q, vector),
                                   robot.gravity_torques_batch(q, theta, gravity=vector),
                                   atol=1e-9, rtol=0)
    np.testing.assert_allclose(model.gravity_torques_along(q, robot.gravity_vector),
                               model.gravity_torques(q), atol=1e-9, rtol=0)
    # with a payload set, its whole parameters too (a review: 2.1 N·m off of 19 for 2 kg)
    load = Payload(mass=2.0, com=(0.03, -0.02, 0.05), frame=robot.model.frames[-1].name)
    model.set_payload(load)
    loaded = robot.with_payload(load)
    np.testing.assert_allclose(model.gravity_torques_along(q, [9.81, 0.0, 0.0]),
                               loaded.gravity_torques_batch(q, loaded.parameters('gravity'),
                                                            gravity=[9.81, 0.0, 0.0]),
                               atol=1e-9, rtol=0)


def test_humanoid_has_twelve_gravity_base_parameters_as_seed_000_eq_8():
    robot = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    base = gravity_base_parameters(robot)
    assert base.count == 12
    expressions = base.expressions()
    # eq. 8: m2 g ly2 + m3 g lz3 - (m3 + m4 + m5 + m6) g l1, l1 = 0.35 m
    assert any('my2' in e and 'mz3' in e and '0.35*m6' in e for e in expressions)
    # eq. 8: m4 g ly4 - m5 g lz5 + (m5 + m6) g l2, l2 = 0.25 m
    assert any('my4' in e and 'mz5' in e and '0.25*m6' in e for e in expressions)
    assert set(base.unidentifiable()) == {'m1', 'mz1', 'm2'}


def test_humanoid_with_vertical_joint_one_has_ten():
    robot = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    # Turn gravity so that it is parallel to joint 1's axis (in the root frame).
    data = robot.model.createData()
    pin.forwardKinematics(robot.model, data, pin.neutral(robot.model))
    axis = data.oMi[1].rotation @ np.array([0.0, 0.0, 1.0])
    assert gravity_base_parameters(robot.with_gravity(9.81, -axis)).count == 10


def test_tx60_inertial_base_counts():
    robot = RobotModel.from_urdf(URDF_DIR / 'staubli_tx60.urdf')
    assert inertial_base_parameters(robot, friction=False).count == 36
    assert inertial_base_parameters(robot, friction=True).count == 48


def test_full_regressor_reproduces_rnea_plus_friction():
    robot = RobotModel.from_urdf(URDF_DIR / 'staubli_tx60.urdf')
    rng = np.random.default_rng(4)
    theta = robot.parameters('inertial')
    fc, fv = rng.uniform(0.1, 2, robot.n_joints), rng.uniform(0.1, 1, robot.n_joints)
    friction = np.ravel(np.column_stack([fc, fv]))
    for _ in range(20):
        q, dq, ddq = rng.normal(size=(3, robot.n_joints))
        expected = robot.inverse_dynamics(q, dq, ddq) + fc * np.sign(dq) + fv * dq
        Y = robot.full_regressor(q, dq, ddq, friction=True)
        np.testing.assert_allclose(Y @ np.concatenate([theta, friction]), expected, atol=1e-9)


def test_gravity_scales_linearly_with_g(robot):
    q = random_q(robot, 20, seed=5)
    moon = robot.with_gravity(1.63)
    np.testing.assert_allclose(moon.gravity_torques(q), robot.gravity_torques(q) * 1.63 / 9.81,
                               atol=1e-12)
    assert robot.gravity_magnitude == pytest.approx(9.81)   # the copy left it alone


def test_payload_adds_its_own_gravity():
    robot = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    payload = Payload(mass=0.3, com=(0.0, 0.0, 0.05), frame='flange')
    loaded = robot.with_payload(payload)
    q = random_q(robot, 10, seed=6)
    # the payload's own gravity torque: J_com^T m g at the payload's centre of mass
    fid = robot.model.getFrameId('flange')
    for qi in q:
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, qi)
        frame = data.oMf[fid]
        com_world = frame.act(np.array(payload.com))
        J = pin.computeFrameJacobian(robot.model, data, qi, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        # shift the linear Jacobian from the frame origin to the payload's com
        offset = com_world - frame.translation
        J_com = J - pin.skew(offset) @ pin.computeFrameJacobian(
            robot.model, data, qi, fid, pin.LOCAL_WORLD_ALIGNED)[3:]
        extra = -J_com.T @ (payload.mass * robot.gravity_vector)
        np.testing.assert_allclose(loaded.gravity_torques(qi) - robot.gravity_torques(qi),
                                   extra, atol=1e-9)


def test_joint_order_follows_the_configuration():
    forward = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    order = ['joint_6', 'joint_2', 'joint_4', 'joint_1', 'joint_3', 'joint_5']
    shuffled = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf', joints=order)
    q = random_q(forward, 5, seed=7)
    perm = [forward.joint_names.index(j) for j in order]
    np.testing.assert_allclose(shuffled.gravity_torques(q[:, perm]),
                               forward.gravity_torques(q)[:, perm], atol=1e-12)
    theta = shuffled.parameters()
    Y = shuffled.gravity_regressor(q[:, perm])
    np.testing.assert_allclose(np.einsum('nij,j->ni', Y, theta),
                               forward.gravity_torques(q)[:, perm], atol=1e-9)


def test_subset_of_joints_locks_the_others_at_zero():
    full = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    sub = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf',
                               joints=['joint_1', 'joint_2', 'joint_3'])
    q = random_q(sub, 5, seed=8)
    q_full = np.hstack([q, np.zeros((5, 3))])
    np.testing.assert_allclose(sub.gravity_torques(q), full.gravity_torques(q_full)[:, :3],
                               atol=1e-12)
    Y = sub.gravity_regressor(q)
    np.testing.assert_allclose(np.einsum('nij,j->ni', Y, sub.parameters()),
                               sub.gravity_torques(q), atol=1e-9)


def test_missing_urdf_names_the_file(tmp_path):
    path = tmp_path / 'nope.urdf'
    with pytest.raises(URDFError, match='nope.urdf'):
        RobotModel.from_urdf(path)


def test_malformed_urdf_names_the_file(tmp_path):
    path = tmp_path / 'broken.urdf'
    path.write_text('<robot name="x"><link name="a"></robot')
    with pytest.raises(URDFError, match='broken.urdf'):
        RobotModel.from_urdf(path)


def test_unknown_joint_is_named():
    with pytest.raises(JointNameError, match='elbow_joint'):
        RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf', joints=['joint_1', 'elbow_joint'])


def test_unknown_payload_frame_is_named():
    robot = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    with pytest.raises(JointNameError, match='gripper'):
        robot.with_payload(Payload(mass=1.0, frame='gripper'))


def test_wrong_q_length_is_refused():
    robot = RobotModel.from_urdf(URDF_DIR / 'humanoid_arm.urdf')
    with pytest.raises(ValueError, match='expected'):
        robot.gravity_regressor(np.zeros((3, 5)))
    with pytest.raises(ValueError, match='expected'):
        robot.gravity_torques(np.zeros(5))
