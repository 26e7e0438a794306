"""Payload identification with the arm model frozen (issue 6)."""

import numpy as np
import pytest

from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import Payload
from arm_dyn_id.identification.payload import identify_payload, payload_regressor
from test_estimation import NOISE, sweep_data


@pytest.fixture(scope='module')
def arm_model(robot):
    """The arm without payload, as identification would give it (exact here)."""
    base = gravity_base_parameters(robot)
    return GravityModel(robot.copy(), base, base.beta(robot.parameters()))


def test_payload_regressor_reproduces_the_payload_torque(robot):
    payload = Payload(mass=0.3, com=(0.01, -0.02, 0.05), frame='flange')
    q = np.random.default_rng(0).uniform(-1.5, 1.5, (50, robot.n_joints))
    P = payload_regressor(robot, q)
    theta = np.array([0.3, 0.3 * 0.01, 0.3 * -0.02, 0.3 * 0.05])
    extra = robot.with_payload(payload).gravity_torques(q) - robot.gravity_torques(q)
    np.testing.assert_allclose(P @ theta, extra, atol=1e-12)


def test_identifies_mass_and_centre_of_mass_from_noisy_sweeps(robot, arm_model):
    payload = Payload(mass=0.3, com=(0.01, -0.02, 0.05), frame='flange')
    loaded = robot.with_payload(payload)
    rng = np.random.default_rng(1)
    # sweep data of the loaded arm: the generator takes gravity torques from `loaded`
    t, q, tau, markers = sweep_data(loaded, rng, noise=NOISE, coulomb=0.05)
    fit = identify_payload(arm_model, t, q, tau, markers, noise=NOISE)
    assert fit.payload.mass == pytest.approx(0.3, rel=0.01)
    np.testing.assert_allclose(fit.payload.com, payload.com, atol=0.002)
    assert np.all(fit.com_std_errors < 0.002)
    # serving the frozen arm plus the identified payload predicts the loaded arm
    arm_model.set_payload(fit.payload)
    qv = rng.uniform(-1.5, 1.5, (100, robot.n_joints))
    err = arm_model.gravity_torques(qv) - loaded.gravity_torques(qv)
    arm_model.set_payload(None)
    assert np.max(np.abs(err) / np.max(np.abs(loaded.gravity_torques(qv)), axis=0)) < 0.01


def test_data_without_payload_says_so(robot, arm_model):
    rng = np.random.default_rng(2)
    t, q, tau, markers = sweep_data(robot, rng, noise=NOISE)
    with pytest.raises(DataError, match='no payload detected'):
        identify_payload(arm_model, t, q, tau, markers, noise=NOISE)


def test_unknown_frame_is_named(robot, arm_model):
    with pytest.raises(JointNameError, match='gripper_tip'):
        payload_regressor(robot, np.zeros((1, robot.n_joints)), frame='gripper_tip')
