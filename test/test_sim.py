"""Simulated arm core (MuJoCo) against pinocchio, and the trajectory follower."""

import dataclasses

import numpy as np
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.sim.arm import SimArm, SimParams
from arm_dyn_id.excitation.follow import JointTrajectoryFollower

POSE = np.array([0.5, 0.8, 0.3, 1.0, 0.2, 0.3])


def humanoid(**overrides):
    config = load_arm_config('humanoid_arm.yaml', node_name='sim_arm_node')
    values = dict(config.extra)
    values.update(overrides)
    return config, SimParams.from_params(values, config.n_joints)


def move(arm, target, seconds=2.0, hold=3.0):
    """Smooth (cubic) move to target, then hold."""
    start = arm.positions
    steps = int(seconds / 0.001)
    for k in range(steps):
        s = (k + 1) / steps
        arm.step(start + (3 * s * s - 2 * s ** 3) * (target - start),
                 (6 * s - 6 * s * s) / seconds * (target - start))
    for _ in range(int(hold / 0.001)):
        arm.step(target)


def test_current_at_rest_is_pinocchio_gravity_over_gain_within_noise():
    config, params = humanoid()
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    move(arm, POSE)
    gains = config.joint_torque_gains
    samples = []
    for _ in range(2000):
        arm.step(POSE)
        samples.append(arm.measure()[3])
    current = np.array(samples)
    expected = robot.gravity_torques(POSE) / gains + config.current_offsets
    # gross errors are rare; the median is robust to them
    sigma = np.sqrt(params.current_noise ** 2 + params.current_quantisation ** 2 / 12)
    err = np.median(current, axis=0) - expected
    assert np.all(np.abs(err) < 4 * sigma / np.sqrt(2000) * 1.3 + 1e-6 +
                  2e-3 * np.abs(expected)), err
    # and every single sample within 5 sigma except gross errors
    inliers = np.abs(current - expected) < 5 * sigma + 1e-12
    assert inliers.mean() > 0.99
    # the noise-free torque is pinocchio's gravity at rest
    np.testing.assert_allclose(arm.drive_torque(), robot.gravity_torques(arm.positions),
                               atol=2e-3 * np.abs(robot.gravity_torques(POSE)).max())


def test_noise_statistics_match_sigma():
    config, params = humanoid(gross_error_rate=0.0, current_quantisation=0.0)
    arm = SimArm(config, params)
    for _ in range(200):
        arm.step(arm.initial_positions)
    q, current = [], []
    for _ in range(6000):
        arm.step(arm.initial_positions)
        t, qm, _, i = arm.measure()
        q.append(qm - arm._q)
        current.append(i - arm.drive_torque() / config.joint_torque_gains)
    q, current = np.array(q), np.array(current)
    np.testing.assert_allclose(current.std(axis=0), params.current_noise, rtol=0.06)
    np.testing.assert_allclose(q.std(axis=0), params.encoder_noise, rtol=0.06)
    assert np.all(np.abs(current.mean(axis=0) - config.current_offsets) <
                  4 * params.current_noise / np.sqrt(6000))


def test_quantisation_and_gross_errors_at_the_configured_rate():
    rate, n = 0.02, 6000
    config, params = humanoid(gross_error_rate=rate, current_noise=0.0,
                              current_quantisation=0.01)
    arm = SimArm(config, params)
    samples, clean = [], []
    for _ in range(n):
        arm.step(arm.initial_positions)
        samples.append(arm.measure()[3])
        clean.append(arm.drive_torque() / config.joint_torque_gains + config.current_offsets)
    samples, clean = np.array(samples), np.array(clean)
    ratio = samples / 0.01
    np.testing.assert_allclose(ratio, np.round(ratio), atol=1e-9)
    amplitude = params.gross_error_amplitude / np.abs(config.joint_torque_gains)
    gross = np.abs(samples - clean) > amplitude / 2
    observed = gross.mean(axis=0)
    assert np.all(np.abs(observed - rate) < 5 * np.sqrt(rate * (1 - rate) / n)), observed
    size = np.abs(samples - clean)[gross]
    assert np.all(size < np.repeat(amplitude[None], n, 0)[gross] + 0.01)


def test_friction_sign_follows_velocity():
    config, params = humanoid(current_noise=0.0, gross_error_rate=0.0, encoder_noise=0.0)
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    move(arm, POSE, hold=1.0)
    speed = np.deg2rad(3.0)
    for j in range(6):
        means = {}
        for direction in (1, -1):
            start = arm.positions
            residual = []
            for k in range(900):
                ref = start.copy()
                ref[j] += direction * speed * k * 0.001
                vel = np.zeros(6)
                vel[j] = direction * speed
                arm.step(ref, vel)
                if k > 400:
                    t, q, dq, current = arm.measure()
                    tau = config.joint_torque_gains * (current - config.current_offsets)
                    residual.append(tau[j] - robot.gravity_torques(arm._q)[j])
            means[direction] = np.mean(residual)
            for _ in range(100):
                arm.step(ref)
        expected = params.friction_coulomb[j] + params.friction_viscous[j] * speed
        assert means[1] > 0 > means[-1], (j, means)
        np.testing.assert_allclose([means[1], -means[-1]], expected, rtol=0.05, atol=2e-4)


def test_payload_changes_gravity_torque_as_pinocchio_predicts():
    config, params = humanoid()
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    move(arm, POSE, hold=1.0)
    before = arm.drive_torque()
    com = (0.01, 0.02, 0.05)
    arm.attach_payload(0.3, com)
    assert arm.payload[0] == 0.3
    move(arm, POSE, seconds=0.1, hold=4.0)
    after = arm.drive_torque()
    q = arm.positions
    loaded = robot.with_payload(Payload(0.3, com))
    predicted = loaded.gravity_torques(q) - robot.gravity_torques(q)
    assert np.abs(predicted).max() > 0.3
    np.testing.assert_allclose(after - before, predicted, atol=2e-3)
    arm.detach_payload()
    assert arm.payload is None
    move(arm, POSE, seconds=0.1, hold=4.0)
    np.testing.assert_allclose(arm.drive_torque(), robot.gravity_torques(arm.positions),
                               atol=2e-3)


def test_moon_gravity_scales_torques():
    config, params = humanoid(gravity=1.63)
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    assert arm.gravity == pytest.approx(1.63)
    move(arm, POSE)
    np.testing.assert_allclose(arm.drive_torque(),
                               robot.gravity_torques(arm.positions) * 1.63 / 9.81, atol=1e-3)
    arm.set_gravity(9.81)
    move(arm, POSE, seconds=0.1)
    np.testing.assert_allclose(arm.drive_torque(), robot.gravity_torques(arm.positions),
                               atol=2e-3)


def test_tracking_error_at_3_deg_per_s_is_small():
    config, params = humanoid()
    arm = SimArm(config, params)
    move(arm, POSE, hold=0.5)
    speed = np.deg2rad(3.0)
    worst = 0.0
    start = arm.positions
    for k in range(3000):
        ref = start + speed * k * 0.001
        arm.step(ref, np.full(6, speed))
        if k > 300:
            worst = max(worst, np.abs(arm.positions - ref).max())
    assert worst < np.deg2rad(0.05), worst


def test_simparams_validation_names_the_parameter():
    with pytest.raises(ConfigError, match='friction_coulomb'):
        SimParams.from_params({'friction_coulomb': [0.1, 0.2]}, 6)
    with pytest.raises(ConfigError, match=r'current_noise\[2\] = -1'):
        SimParams.from_params({'current_noise': [0, 0, -1, 0, 0, 0]}, 6)
    with pytest.raises(ConfigError, match='gross_error_rate'):
        SimParams.from_params({'gross_error_rate': 2.0}, 6)
    with pytest.raises(ConfigError, match='payload_com'):
        SimParams.from_params({'payload_com': [0.0, 1.0]}, 6)
    with pytest.raises(ConfigError, match='timestep'):
        SimParams.from_params({'timestep': 0.0}, 6)
    with pytest.raises(ConfigError, match='seed'):
        SimParams.from_params({'seed': -3}, 6)
    params = SimParams.from_params({'friction_coulomb': 0.2}, 6)
    np.testing.assert_array_equal(params.friction_coulomb, np.full(6, 0.2))
    assert params.gravity is None and params.position_gains is None
    config, _ = humanoid()
    with pytest.raises(ConfigError, match='payload_mass'):
        SimArm(config, params).attach_payload(-1.0)


def test_staubli_config_loads_and_holds():
    config = load_arm_config('staubli_tx60.yaml', node_name='sim_arm_node')
    params = SimParams.from_params(config.extra, config.n_joints)
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    target = np.array([0.3, -0.4, 0.8, 0.2, 0.5, 0.1])
    move(arm, target)
    np.testing.assert_allclose(arm.positions, target, atol=5e-3)   # joint 6 creeps (stiction)
    # joints 4-6 carry < 0.3 N·m of gravity but up to 0.4 N·m of Coulomb friction, which
    # holds part of the load after the move (stiction creep); check the big ones
    np.testing.assert_allclose(arm.drive_torque()[:3], robot.gravity_torques(arm.positions)[:3],
                               atol=0.05)


# trajectory follower ----------------------------------------------------------

def test_follower_holds_and_interpolates_linear_cubic_quintic():
    f = JointTrajectoryFollower([0.0, 1.0])
    q, dq, ddq = f.sample(5.0)
    np.testing.assert_array_equal(q, [0.0, 1.0])
    assert not dq.any() and not ddq.any()
    # linear (positions only): from the held state to the first point, then on
    f.replace(10.0, [1.0, 2.0], [[1.0, 1.0], [3.0, 1.0]])
    np.testing.assert_allclose(f.sample(9.5)[0], [0.0, 1.0])       # not started yet
    np.testing.assert_allclose(f.sample(10.5)[0], [0.5, 1.0])
    np.testing.assert_allclose(f.sample(11.5)[:2], [[2.0, 1.0], [2.0, 0.0]])
    np.testing.assert_allclose(f.sample(20.0)[0], [3.0, 1.0])     # held after the end
    # cubic: positions + velocities, boundary values met
    f = JointTrajectoryFollower([0.0])
    f.replace(0.0, [1.0, 2.0], [[1.0], [2.0]], velocities=[[0.5], [0.0]])
    for t, p, v in ((1.0, 1.0, 0.5), (2.0, 2.0, 0.0)):
        q, dq, _ = f.sample(t - 1e-9)
        np.testing.assert_allclose([q[0], dq[0]], [p, v], atol=1e-6)
    # quintic: accelerations too
    f = JointTrajectoryFollower([0.0])
    f.replace(0.0, [0.0, 1.0], [[0.0], [1.0]], velocities=[[0.0], [0.0]],
              accelerations=[[0.0], [0.0]])
    q, dq, ddq = f.sample(0.5)
    np.testing.assert_allclose([q[0], dq[0], ddq[0]], [0.5, 1.875, 0.0], atol=1e-9)
    q, dq, ddq = f.sample(1.0 - 1e-9)
    np.testing.assert_allclose([q[0], dq[0], ddq[0]], [1.0, 0.0, 0.0], atol=1e-6)


def test_follower_replace_semantics_and_partial_joints():
    f = JointTrajectoryFollower([0.0, 0.0])
    f.replace(0.0, [10.0], [[10.0, 10.0]])            # 1 rad/s on both joints
    np.testing.assert_allclose(f.sample(2.0)[0], [2.0, 2.0])
    # a new trajectory for joint 0 only, from t = 4: the old one runs until then
    f.replace(4.0, [1.0], [[0.0]], joint_index=[1])
    np.testing.assert_allclose(f.sample(3.0)[0], [3.0, 3.0])
    np.testing.assert_allclose(f.sample(4.0)[0], [4.0, 4.0])   # continuous at the switch
    np.testing.assert_allclose(f.sample(4.5)[0], [4.0, 2.0])   # joint 0 holds, joint 1 moves
    np.testing.assert_allclose(f.sample(6.0)[0], [4.0, 0.0])
    # queued trajectories starting after a newer one's start are dropped
    f.replace(10.0, [1.0], [[1.0, 1.0]])
    f.replace(8.0, [1.0], [[-1.0, -1.0]])
    np.testing.assert_allclose(f.sample(12.0)[0], [-1.0, -1.0])
    assert f.end_time() == pytest.approx(9.0)
    # time_from_start 0 jumps; hold() cancels
    f.replace(13.0, [0.0, 1.0], [[5.0, 5.0], [6.0, 6.0]])
    np.testing.assert_allclose(f.sample(13.0)[0], [5.0, 5.0])
    f.hold([1.0, 2.0])
    np.testing.assert_allclose(f.sample(13.5)[0], [1.0, 2.0])
    with pytest.raises(ValueError, match='time_from_start'):
        f.replace(0.0, [1.0, 1.0], [[0, 0], [1, 1]])
    with pytest.raises(ValueError, match='positions has shape'):
        f.replace(0.0, [1.0], [[0, 0, 0]])


def test_simparams_keys_cover_the_dataclass():
    assert set(SimParams.keys()) == {f.name for f in dataclasses.fields(SimParams)}


def test_follower_a_late_trajectory_keeps_its_points_on_their_times():
    """A window that arrives after its stamp (a busy machine) starts at once and its points
    stay due when the sender planned them (JTC): the arm is not put behind the plan by
    the delivery delay, which a shift of the whole window would do."""
    plan = lambda t: 0.1 * t                            # noqa: E731 - a 0.1 rad/s ramp
    f = JointTrajectoryFollower([0.0])
    times = np.arange(0.0, 2.01, 0.1)
    f.replace(0.0, times, plan(times)[:, None], np.full((times.size, 1), 0.1), now=0.0)
    f.sample(0.5)
    # the next window, stamped t = 1.0, arrives 0.3 s late (at t = 1.3)
    t_next = 1.0 + times
    f.replace(1.0, times, plan(t_next)[:, None], np.full((times.size, 1), 0.1), now=1.3)
    for t in (1.3, 1.35, 1.6, 2.5):
        assert f.sample(t)[0][0] == pytest.approx(plan(t), abs=1e-9), t
    assert f.end_time() == pytest.approx(3.0)
