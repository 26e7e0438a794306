"""Chunked normal-equation gravity fit equals the in-memory WLS fit."""

from pathlib import Path

import numpy as np

from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.identification.estimators import fit_wls
from arm_dyn_id.identification.estimators import fit_gravity_chunked
from arm_dyn_id.model.robot import RobotModel

URDF = Path(__file__).resolve().parent.parent / 'urdf' / 'humanoid_arm.urdf'


def test_chunked_fit_matches_fit_wls():
    robot = RobotModel.from_urdf(URDF)
    base = gravity_base_parameters(robot)
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.5, 1.5, size=(5000, robot.n_joints))
    noise = np.array([0.02, 0.02, 0.005, 0.005, 0.0005, 0.0002])
    tau = robot.gravity_torques(q) + rng.standard_normal(q.shape) * noise
    tau[17] = np.nan
    reference = fit_wls(base.reduce(robot.gravity_regressor(q)), tau, base.names, noise=noise)
    for workers in (1, 2):
        fast = fit_gravity_chunked(robot, base, q, tau, noise=noise, chunk=700,
                                   workers=workers)
        np.testing.assert_allclose(fast.beta, reference.beta, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(fast.std_errors, reference.std_errors, rtol=1e-6)
        np.testing.assert_allclose(fast.noise_std, reference.noise_std, rtol=1e-6)
        assert fast.n_samples == reference.n_samples == 4999
        assert abs(fast.condition_number - reference.condition_number) < 1e-6 * \
            reference.condition_number
