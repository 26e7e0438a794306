"""Gravity compensation core (arm_dyn_id.service.compensation), no ROS.

Oracle: pinocchio's computeGeneralizedGravity on the URDF (rotated gravity, payload
added with RobotModel.with_payload) and GravityModel's own regressor path.
"""

import numpy as np
import pytest

from arm_dyn_id.data.joint_states import Rejection
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.model.base_parameters import gravity_base_parameters, inertial_base_parameters
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.paths import resolve_data_file
from arm_dyn_id.service.compensation import (
    ACTIVE, STALE, WAITING, Compensator, FrictionFeedforward, GravityTorques,
    friction_feedforward, gravity_vector_from, model_friction)

JOINTS = tuple(f'joint_{i}' for i in range(1, 7))
PAYLOAD = Payload(mass=0.4, com=(0.0, 0.02, 0.05), frame='flange')


@pytest.fixture(scope='module')
def robot():
    return RobotModel.from_urdf(resolve_data_file('humanoid_arm.urdf', 'urdf'), joints=JOINTS)


@pytest.fixture(scope='module')
def model(robot):
    """An 'identified' model whose base parameters differ from the URDF's by 5-15 %."""
    base = gravity_base_parameters(robot)
    beta = base.beta(robot.parameters('gravity'))
    scale = np.random.default_rng(3).uniform(0.85, 1.15, base.count)
    return GravityModel(robot.copy(), base, beta * scale)


@pytest.fixture(scope='module')
def poses():
    return np.random.default_rng(0).uniform(-1.2, 1.2, size=(12, len(JOINTS)))


def _single(gravity, poses):
    return np.array([gravity.torques(q) for q in poses])


def rotated(robot, vector, payload=None):
    other = robot.with_payload(payload) if payload is not None else robot.copy()
    vector = np.asarray(vector, dtype=float)
    return other.set_gravity(float(np.linalg.norm(vector)), vector)


# -- G(q): the identified model, any gravity vector, payloads ---------------------------
def test_identified_model_is_served_exactly_at_its_fit_gravity(model, poses):
    gravity = GravityTorques.from_model(model)
    expected = model.gravity_torques(poses)
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(_single(gravity, poses), expected, atol=1e-10)
    np.testing.assert_allclose(gravity.batch(poses), expected, atol=1e-10)
    assert gravity.source == 'model' and gravity.notes == []
    # not the nominal URDF: the model's own parameters are served
    nominal = GravityTorques.from_robot(model.robot)
    assert np.abs(_single(nominal, poses) - expected).max() > 0.05


@pytest.mark.parametrize('vector', [(0.0, 0.0, 9.81),                 # ceiling
                                    (9.81, 0.0, 0.0),                 # wall
                                    (0.0, -4.905, -8.4957)])          # tilted 30°
def test_gravity_vector_turns_gravity_like_pinocchio(robot, poses, vector):
    gravity = GravityTorques.from_robot(robot, vector)
    oracle = rotated(robot, vector)
    np.testing.assert_allclose(_single(gravity, poses),
                               [oracle.gravity_torques(q) for q in poses], atol=1e-10)
    floor = GravityTorques.from_robot(robot, (0.0, 0.0, -9.81))
    assert np.abs(_single(gravity, poses) - _single(floor, poses)).max() > 0.1


def test_ceiling_mount_flips_the_identified_model(model, poses):
    floor = GravityTorques.from_model(model)
    ceiling = floor.with_gravity((0.0, 0.0, 9.81))
    np.testing.assert_allclose(_single(ceiling, poses), -_single(floor, poses), atol=1e-10)
    # the same direction line: nothing unseen, but the note names another direction
    assert ceiling.notes and 'differs' in ceiling.notes[0]


def test_wall_mount_of_a_model_uses_urdf_values_only_where_the_fit_was_blind(robot, poses):
    """A model equal to the URDF on its base parameters serves the URDF at any direction."""
    base = gravity_base_parameters(robot)
    consistent = GravityModel(robot.copy(), base, base.beta(robot.parameters('gravity')))
    wall = GravityTorques.from_model(consistent, (9.81, 0.0, 0.0))
    oracle = rotated(robot, (9.81, 0.0, 0.0))
    np.testing.assert_allclose(_single(wall, poses),
                               [oracle.gravity_torques(q) for q in poses], atol=1e-10)
    assert any('could not see' in note for note in wall.notes)


def test_payload_switch_adds_the_payload_and_removes_it_again(robot, model, poses):
    bare = GravityTorques.from_model(model)
    loaded = bare.with_payload(PAYLOAD)
    delta = _single(loaded, poses) - _single(bare, poses)
    oracle = rotated(robot, robot.gravity_vector, PAYLOAD)
    expected = np.array([oracle.gravity_torques(q) - robot.gravity_torques(q) for q in poses])
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(delta, expected, atol=1e-10)
    # the model's own payload path agrees
    ref = GravityModel(model.robot.copy(), model.base, model.beta).set_payload(PAYLOAD)
    np.testing.assert_allclose(_single(loaded, poses), ref.gravity_torques(poses), atol=1e-10)
    np.testing.assert_allclose(_single(loaded.with_payload(None), poses), _single(bare, poses),
                               atol=1e-12)
    # payload and gravity vector together
    both = loaded.with_gravity((9.81, 0.0, 0.0))
    np.testing.assert_allclose(
        _single(both, poses) - _single(bare.with_gravity((9.81, 0.0, 0.0)), poses),
        [rotated(robot, (9.81, 0.0, 0.0), PAYLOAD).gravity_torques(q)
         - rotated(robot, (9.81, 0.0, 0.0)).gravity_torques(q) for q in poses], atol=1e-10)


def test_a_payload_on_a_frame_the_urdf_lacks_is_refused(model):
    with pytest.raises(ConfigError, match="payload_frame = 'nowhere'"):
        GravityTorques.from_model(model, payload=Payload(1.0, frame='nowhere'))


def test_full_dynamics_model_with_friction_is_served(robot, poses):
    """A model on the inertial base (with friction columns), as the full fit writes."""
    base = inertial_base_parameters(robot, friction=True, n_samples=60)
    n = len(JOINTS)
    fc, fv = np.linspace(0.1, 0.6, n), np.linspace(0.01, 0.06, n)
    theta = np.concatenate([robot.parameters('inertial'), np.ravel(np.column_stack([fc, fv]))])

    class FullModel:            # the attributes the compensation reads
        def __init__(self):
            self.robot, self.base, self.beta = robot.copy(), base, base.beta(theta)
            self.fit_gravity = 9.81
            self.joint_names = robot.joint_names

    full = FullModel()
    gravity = GravityTorques.from_model(full)
    np.testing.assert_allclose(_single(gravity, poses),
                               [robot.gravity_torques(q) for q in poses], atol=1e-9)
    got_fc, got_fv = model_friction(full)
    np.testing.assert_allclose(got_fc, fc, atol=1e-9)
    np.testing.assert_allclose(got_fv, fv, atol=1e-9)


def test_gravity_vector_is_checked():
    np.testing.assert_array_equal(gravity_vector_from([0, 0, -9.81]), [0, 0, -9.81])
    for bad in ([0, 0, 0], [1, 2], 'earth', [0, float('nan'), 1]):
        with pytest.raises(ConfigError, match='gravity_vector'):
            gravity_vector_from(bad)


# -- commands: clamping, currents, friction, order ------------------------------------
def test_clamped_to_the_urdf_effort_limits(robot):
    strong = GravityTorques.from_robot(robot, (0.0, 0.0, -9.81 * 8))
    comp = Compensator(strong)
    np.testing.assert_array_equal(comp.effort_limits, [20, 20, 10, 10, 5, 5])
    q = np.array([0.0, 1.5, 0.0, 0.0, 0.0, 0.0])        # upper arm horizontal
    raw = strong.torques(q)
    assert abs(raw[1]) > 20
    cmd = comp.update(0.0, JOINTS, q)
    assert cmd.state == ACTIVE
    assert cmd.torques[1] == pytest.approx(np.sign(raw[1]) * 20.0)
    assert np.all(np.abs(cmd.torques) <= comp.effort_limits)
    np.testing.assert_array_equal(cmd.saturated, np.abs(raw) > comp.effort_limits)
    unsaturated = ~cmd.saturated
    np.testing.assert_allclose(cmd.torques[unsaturated], raw[unsaturated])
    assert comp.counts['saturated'] == 1
    # a tighter clamp given by the user
    tight = Compensator(strong, effort_limits=[1, 1, 1, 1, 1, 1])
    assert np.abs(tight.update(0.0, JOINTS, q).values).max() == pytest.approx(1.0)
    with pytest.raises(ConfigError, match='effort_limits'):
        Compensator(strong, effort_limits=[1, 1, 1])


def test_currents_are_torques_divided_by_the_gains(robot):
    gravity = GravityTorques.from_robot(robot)
    gains = np.array([1.5, -1.5, 0.8, 0.8, -0.2, 0.1])
    comp = Compensator(gravity, output='current', torque_gains=gains)
    q = np.array([0.3, 1.2, -0.4, 0.9, 0.2, 0.1])
    cmd = comp.update(0.0, JOINTS, q)
    np.testing.assert_allclose(cmd.values, gravity.torques(q) / gains)
    np.testing.assert_allclose(cmd.torques, gravity.torques(q))
    with pytest.raises(ConfigError, match='torque_constants'):
        Compensator(gravity, output='current')
    with pytest.raises(ConfigError, match='must not be zero'):
        Compensator(gravity, output='current', torque_gains=[1, 0, 1, 1, 1, 1])
    with pytest.raises(ConfigError, match='output'):
        Compensator(gravity, output='torque')


def test_output_order_follows_the_controller_joints(robot):
    gravity = GravityTorques.from_robot(robot)
    order = ('joint_3', 'joint_1', 'joint_6', 'joint_2', 'joint_5', 'joint_4')
    comp = Compensator(gravity, joints=order)
    q_model = np.array([0.1, 1.0, -0.5, 0.8, 0.3, -0.2])
    index = [JOINTS.index(j) for j in order]
    # a joint_states message in yet another order (names carry the mapping)
    message_names = list(reversed(JOINTS))
    cmd = comp.update(0.0, message_names, q_model[::-1])
    np.testing.assert_allclose(cmd.values, gravity.torques(q_model)[index])
    with pytest.raises(ConfigError, match='joints'):
        Compensator(gravity, joints=JOINTS[:5])


def test_friction_feedforward_smooth_breakaway(robot):
    fc = np.array([0.3, 0.3, 0.06, 0.06, 0.003, 0.001])
    fv = np.array([0.5, 0.5, 0.1, 0.1, 0.005, 0.001])
    ff = FrictionFeedforward(fc, fv, breakaway_velocity=0.05, fraction=0.8)
    np.testing.assert_array_equal(ff.torques(np.zeros(6)), np.zeros(6))
    fast = ff.torques(np.full(6, 1.0))
    np.testing.assert_allclose(fast, 0.8 * (fc * np.tanh(20.0) + fv))
    slow = ff.torques(np.full(6, -0.05))
    np.testing.assert_allclose(slow, 0.8 * (-fc * np.tanh(1.0) - 0.05 * fv))
    gravity = GravityTorques.from_robot(robot)
    comp = Compensator(gravity, friction=ff)
    q, dq = np.zeros(6), np.array([0.2, -0.2, 0.0, 0.1, 0.0, 0.0])
    cmd = comp.update(0.0, JOINTS, q, dq)
    np.testing.assert_allclose(cmd.torques, gravity.torques(q) + ff.torques(dq))
    # a message without velocities: gravity only, and counted
    cmd = comp.update(0.0, JOINTS, q, ())
    np.testing.assert_allclose(cmd.torques, gravity.torques(q))
    assert comp.counts['no_velocity'] == 1
    for bad in (dict(fraction=1.5), dict(breakaway_velocity=0.0)):
        with pytest.raises(ConfigError):
            FrictionFeedforward(fc, fv, **bad)
    with pytest.raises(ConfigError, match='friction_coulomb'):
        FrictionFeedforward(-fc, fv)


def test_a_models_wide_coulomb_term_is_not_fed_forward_faster_than_the_model_rises():
    """A full fit may choose its smooth sign 0.16 rad/s wide (a friction that rises
    slowly): with the model's Coulomb coefficients the feed-forward's breakaway velocity is
    at least that (at 0.05 rad/s it would feed 2.5x the model's Coulomb torque forward);
    a narrower model keeps the parameter's value, and a user's own Coulomb values keep it."""
    coulomb, viscous = np.full(6, 0.5), np.zeros(6)
    wide, _ = friction_feedforward(coulomb, viscous, JOINTS, breakaway_velocity=0.05,
                                   fraction=1.0, model_width=0.16)
    assert wide.breakaway_velocity == 0.16
    model_torque = 0.5 * np.tanh(0.05 / 0.16)
    np.testing.assert_allclose(wide.torques(np.full(6, 0.05)), model_torque)
    narrow, _ = friction_feedforward(coulomb, viscous, JOINTS, breakaway_velocity=0.05,
                                     fraction=1.0, model_width=0.01)
    assert narrow.breakaway_velocity == 0.05
    given, _ = friction_feedforward(coulomb, viscous, JOINTS, coulomb=[0.3] * 6,
                                    breakaway_velocity=0.05, model_width=0.16)
    assert given.breakaway_velocity == 0.05


# -- stale input -> zeros -------------------------------------------------------------
def test_a_models_negative_friction_is_not_fed_forward_and_said_once():
    """A gravity fit from single-speed sweeps wrote negative viscous friction: those terms
    get no feed-forward (one note naming them), the rest is served; only a value the user
    gave is refused, and the error names that parameter."""
    coulomb = np.array([0.05, 0.05, np.nan, 0.05, 0.05, 0.05])
    viscous = np.array([0.01, -0.02, 0.01, -0.003, 0.0, 0.001])
    friction, notes = friction_feedforward(coulomb, viscous, JOINTS, fraction=1.0)
    np.testing.assert_array_equal(friction.viscous, [0.01, 0.0, 0.01, 0.0, 0.0, 0.001])
    np.testing.assert_array_equal(friction.coulomb, [0.05, 0.05, 0.0, 0.05, 0.05, 0.05])
    assert len(notes) == 1
    assert 'joint_2 viscous -0.02' in notes[0] and 'joint_4 viscous -0.003' in notes[0]
    # the user's values win over the model's, and need no note
    given, notes = friction_feedforward(coulomb, viscous, JOINTS, viscous=[0.1] * 6)
    np.testing.assert_array_equal(given.viscous, [0.1] * 6)
    assert notes == []
    with pytest.raises(ConfigError, match='friction_coulomb') as info:
        friction_feedforward(coulomb, viscous, JOINTS, coulomb=[0.1] * 5 + [-0.1])
    assert 'friction_viscous' not in str(info.value)


def test_stale_joint_states_give_zeros_until_fresh_ones_come_back(robot):
    comp = Compensator(GravityTorques.from_robot(robot), stale_timeout=0.1)
    q = np.array([0.0, 1.0, 0.0, 0.5, 0.0, 0.0])
    assert comp.state == WAITING
    assert comp.poll(5.0) == (None, False)      # nothing to go stale yet
    first = comp.update(10.0, JOINTS, q)
    assert np.abs(first.values).max() > 1.0
    assert comp.poll(10.05) == (None, False)
    # a message that cannot be used does not count as fresh
    assert isinstance(comp.update(10.08, JOINTS, [np.nan] * 6), Rejection)
    assert isinstance(comp.update(10.09, JOINTS[:5], q[:5]), Rejection)
    assert comp.counts['rejected'] == 2
    zeros, became = comp.poll(10.11)
    assert became and comp.state == STALE
    np.testing.assert_array_equal(zeros.values, np.zeros(6))
    assert zeros.state == STALE
    zeros, became = comp.poll(10.2)           # still stale: zeros again, said once
    np.testing.assert_array_equal(zeros.values, np.zeros(6))
    assert not became and comp.counts['stale_events'] == 1
    back = comp.update(10.3, JOINTS, q)
    assert comp.state == ACTIVE
    np.testing.assert_allclose(back.values, first.values)
    assert comp.poll(10.35) == (None, False)
    with pytest.raises(ConfigError, match='stale_timeout'):
        Compensator(GravityTorques.from_robot(robot), stale_timeout=0.0)


def test_swapping_the_gravity_model_keeps_the_output_order(robot, model):
    order = tuple(reversed(JOINTS))
    comp = Compensator(GravityTorques.from_robot(robot), joints=order)
    q = np.array([0.2, 1.1, -0.3, 0.7, 0.1, 0.0])
    before = comp.update(0.0, JOINTS, q).values
    loaded = GravityTorques.from_model(model).with_payload(PAYLOAD)
    comp.set_gravity_model(loaded)
    after = comp.update(0.01, JOINTS, q).values
    np.testing.assert_allclose(after, loaded.torques(q)[::-1])
    assert np.abs(after - before).max() > 0.05


# -- the consumer on a torque-controlled MuJoCo arm (arm_dyn_id.sim.control) ----------
@pytest.mark.parametrize('vector', [(0.0, 0.0, -9.81), (9.81, 0.0, 0.0)])
def test_compensation_holds_a_torque_controlled_mujoco_arm_that_falls_without(robot, vector):
    """MuJoCo is an independent oracle: pinocchio's G (through the Compensator) holds the
    floating MuJoCo arm (zero stiffness, no friction) still, at a wall mount too."""
    from arm_dyn_id.sim.control import EffortArm, run_pd
    arm = EffortArm(robot.source, JOINTS, gravity_vector=vector)
    q0 = np.array([0.3, 1.2, -0.4, 0.9, 0.3, 0.2])
    comp = Compensator(GravityTorques.from_robot(robot, vector))
    zero = np.zeros(len(JOINTS))

    def hold(t):
        return q0, zero

    arm.reset(q0)
    np.testing.assert_allclose(arm.gravity_torques(), comp.command_for(q0).torques, atol=1e-9)
    floating = run_pd(arm, hold, 1.0, zero, zero, lambda q, dq: comp.command_for(q, dq).torques)
    assert np.abs(floating.q - q0).max() < 1e-6
    arm.reset(q0)
    falling = run_pd(arm, hold, 1.0, zero, zero, None)
    assert np.abs(falling.q[-1] - q0).max() > 0.1
    # a PD alone sags; with the compensation it holds
    arm.reset(q0)
    inertia, omega = arm.joint_inertia(), 2 * np.pi * 2.0
    kp, kd = inertia * omega ** 2, 2 * inertia * omega
    sag = run_pd(arm, hold, 1.0, kp, kd, None)
    arm.reset(q0)
    held = run_pd(arm, hold, 1.0, kp, kd, lambda q, dq: comp.command_for(q, dq).torques)
    assert np.abs(sag.error[-1]).max() > 0.05
    assert np.abs(held.error).max() < 1e-6


def test_full_dynamics_model_file_from_load_model(robot, poses, tmp_path):
    """A DynamicsModel (rigid base with armature, friction apart) saved and read back with
    arm_dyn_id.model.load_model: its G is served, its friction feeds the feed-forward."""
    from arm_dyn_id.model import load_model
    from arm_dyn_id.model.dynamics import (
        DynamicsModel, nominal_standard_parameters, rigid_base_parameters)
    base = rigid_base_parameters(robot, armature=True, n_samples=60)
    theta = nominal_standard_parameters(robot, armature=True)
    theta[-len(JOINTS):] = 0.02                      # rotor inertia: no effect on gravity
    n = len(JOINTS)
    model = DynamicsModel(robot.copy(), base, base.beta(theta),
                          phi=np.ravel(np.column_stack([np.linspace(0.1, 0.6, n),
                                                        np.linspace(0.01, 0.06, n)])))
    loaded = load_model(model.save(tmp_path / 'full.yaml'))
    assert type(loaded).__name__ == 'DynamicsModel'
    gravity = GravityTorques.from_model(loaded)
    np.testing.assert_allclose(_single(gravity, poses),
                               [robot.gravity_torques(q) for q in poses], atol=1e-9)
    fc, fv = model_friction(loaded)
    np.testing.assert_allclose(fc, loaded.friction['coulomb'])
    np.testing.assert_allclose(fv, loaded.friction['viscous'])
    assert np.all(fc > 0.05) and np.all(fv > 0.005)
