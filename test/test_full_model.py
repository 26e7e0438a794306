"""The full-dynamics model: pinocchio oracles, friction, files (old and new), bad inputs."""

import numpy as np
import pinocchio as pin
import pytest
import yaml

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.model import load_model
from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.model.dynamics import (RNEA_CHECKS, DynamicsModel, FrictionModel,
                                       _rnea_torques, nominal_standard_parameters,
                                       rigid_base_parameters, rigid_regressor, rigid_torques)
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import Payload


@pytest.fixture(scope='module')
def base(robot):
    return rigid_base_parameters(robot)


def states(robot, count=20, seed=0):
    rng = np.random.default_rng(seed)
    n = robot.n_joints
    return (rng.uniform(-np.pi, np.pi, (count, n)), rng.uniform(-2, 2, (count, n)),
            rng.uniform(-5, 5, (count, n)))


def nominal_model(robot, base, friction=None, phi=None):
    return DynamicsModel(robot.copy(), base, base.beta(robot.parameters('inertial')),
                         friction, phi)


def test_rigid_body_torques_equal_pinocchio_rnea(robot, base):
    model = nominal_model(robot, base)
    q, dq, ddq = states(robot)
    expected = np.array([pin.rnea(robot.model, robot.data, *s) for s in zip(q, dq, ddq)])
    np.testing.assert_allclose(model.rigid_body_torques(q, dq, ddq), expected, atol=1e-9)
    # one state in, one state out
    np.testing.assert_allclose(model.rigid_body_torques(q[0], dq[0], ddq[0]), expected[0],
                               atol=1e-9)


def test_many_samples_go_through_rnea_with_a_rigid_body_theta_of_the_same_base(robot):
    """Past 4 x RNEA_CHECKS samples the torques of a model come from pinocchio's RNEA on
    a θ of its base values with positive masses (the URDF's moved by B⁺, or the consistent
    fit's own), rotor inertias added: the regressor's torques, at a third of its cost."""
    q, dq, ddq = states(robot, count=10 * RNEA_CHECKS, seed=3)
    rng = np.random.default_rng(4)
    for armature in (False, True):
        base = rigid_base_parameters(robot, armature=armature)
        theta = nominal_standard_parameters(robot, armature=armature)
        theta *= 1 + 0.2 * rng.uniform(-1, 1, theta.shape)      # another arm, same URDF
        if armature:
            theta[-robot.n_joints:] = 0.05
        model = DynamicsModel(robot.copy(), base, base.beta(theta))
        expected = rigid_regressor(robot, q, dq, ddq, armature=armature) @ theta
        physical = model._physical_theta()
        assert np.all(physical[:10 * robot.n_bodies:10] > 0)
        np.testing.assert_allclose(base.beta(physical), base.beta(theta), atol=1e-10)
        fast = _rnea_torques(robot, q, dq, ddq, physical, armature)
        np.testing.assert_allclose(fast, expected, atol=1e-9)
        np.testing.assert_allclose(model.rigid_body_torques(q, dq, ddq), expected, atol=1e-9)
        # the consistent fit's own θ is the one used when the model has it
        model.standard = theta
        assert model._physical_theta() is theta
        # ... and not one that does not give the model's base values
        model.standard = theta * 1.1
        assert model._physical_theta() is not model.standard
        np.testing.assert_allclose(base.beta(model._physical_theta()), model.beta, atol=1e-10)
        model.standard = theta
        # ... nor with a payload added to its base values
        payload = Payload(mass=1.5, com=(0.01, 0.02, 0.05), frame=robot.model.frames[-1].name)
        model.set_payload(payload)
        assert model._physical_theta() is not theta
        loaded = robot.with_payload(payload)
        added = np.array([pin.rnea(loaded.model, loaded.data, *s) - pin.rnea(
            robot.model, robot.data, *s) for s in zip(q, dq, ddq)])     # the payload's own
        np.testing.assert_allclose(model.rigid_body_torques(q, dq, ddq), expected + added,
                                   atol=1e-8)


def test_rnea_is_held_to_the_regressor_and_left_when_it_differs(robot, base):
    """A θ whose links are no rigid bodies (a mass ≤ 0) is not converted; one that
    converts but is not the model's (here another arm's) is caught by the check on
    RNEA_CHECKS samples, and the regressor gives the torques: never a wrong value."""
    q, dq, ddq = states(robot, count=10 * RNEA_CHECKS, seed=5)
    theta = nominal_standard_parameters(robot)
    expected = rigid_regressor(robot, q, dq, ddq) @ theta
    massless = theta.copy()
    massless[10] = 0.0
    assert _rnea_torques(robot, q, dq, ddq, massless, False) is None
    other = theta * 1.3
    assert not np.allclose(_rnea_torques(robot, q, dq, ddq, other, False), expected)
    np.testing.assert_allclose(rigid_torques(robot, q, dq, ddq, theta, physical=other),
                               expected, atol=1e-9)
    np.testing.assert_allclose(rigid_torques(robot, q, dq, ddq, theta, physical=massless),
                               expected, atol=1e-9)
    np.testing.assert_allclose(rigid_torques(robot, q, dq, ddq, theta), expected, atol=1e-9)


def test_gravity_torques_equal_pinocchio_at_any_magnitude(robot, base):
    model = nominal_model(robot, base)
    q, _, _ = states(robot)
    expected = np.array([pin.computeGeneralizedGravity(robot.model, robot.data, s) for s in q])
    np.testing.assert_allclose(model.gravity_torques(q), expected, atol=1e-9)
    np.testing.assert_allclose(model.gravity_torques(q[3]), expected[3], atol=1e-9)
    np.testing.assert_allclose(model.gravity_torques(q, gravity=1.62),
                               expected * 1.62 / 9.81, atol=1e-9)


def test_friction_terms_and_total(robot, base):
    n = robot.n_joints
    fm = FrictionModel(coulomb='tanh', smooth_velocity=0.02, offset=True, stribeck=True,
                       stribeck_velocity=0.1)
    assert fm.names(2) == ('fc1', 'fv1', 'fo1', 'fs1', 'fc2', 'fv2', 'fo2', 'fs2')
    phi = np.tile([2.0, 0.5, -0.3, 1.0], n)
    model = nominal_model(robot, base, fm, phi)
    q, dq, ddq = states(robot)
    s = np.tanh(dq / 0.02)
    expected = 2.0 * s + 0.5 * dq - 0.3 + 1.0 * s * np.exp(-(dq / 0.1) ** 2)
    np.testing.assert_allclose(model.friction_torques(dq), expected, atol=1e-12)
    np.testing.assert_allclose(model.torques(q, dq, ddq),
                               model.rigid_body_torques(q, dq, ddq) + expected, atol=1e-9)
    assert model.friction_table()['offset'] == pytest.approx(np.full(n, -0.3))
    assert len(model.parameter_names) == base.count + 4 * n == len(model.parameter_values)


def test_armature_adds_rotor_inertia(robot):
    base = rigid_base_parameters(robot, armature=True)
    theta = nominal_standard_parameters(robot, armature=True)
    theta[-robot.n_joints:] = 0.1 * np.arange(1, robot.n_joints + 1)
    model = DynamicsModel(robot.copy(), base, base.beta(theta))
    assert model.armature
    q, dq, ddq = states(robot)
    plain = np.array([pin.rnea(robot.model, robot.data, *s) for s in zip(q, dq, ddq)])
    np.testing.assert_allclose(model.rigid_body_torques(q, dq, ddq),
                               plain + theta[-robot.n_joints:] * ddq, atol=1e-9)


def test_payload_matches_pinocchio_with_the_payload(robot, base):
    model = nominal_model(robot, base)
    frame = robot.model.frames[-1].name
    payload = Payload(mass=1.5, com=(0.01, 0.02, 0.05), frame=frame)
    loaded = robot.with_payload(payload)
    q, dq, ddq = states(robot)
    expected = np.array([pin.rnea(loaded.model, loaded.data, *s) for s in zip(q, dq, ddq)])
    model.set_payload(payload)
    np.testing.assert_allclose(model.rigid_body_torques(q, dq, ddq), expected, atol=1e-8)
    model.set_payload(None)
    assert not np.allclose(model.rigid_body_torques(q, dq, ddq), expected, atol=1e-3)


def test_save_load_round_trip_through_load_model(robot, base, tmp_path):
    fm = FrictionModel(coulomb='tanh', offset=True)
    rng = np.random.default_rng(1)
    model = nominal_model(robot, base, fm, rng.uniform(0, 2, 3 * robot.n_joints))
    model.metadata.update({'robot_name': 'humanoid', 'fit': {'method': 'wls'},
                           'preparation': {'cutoff_hz': 4.0}})
    path = model.save(tmp_path / 'model.yaml')
    doc = yaml.safe_load(path.read_text())
    assert (doc['dynamics'], doc['version'], doc['schema']) == (
        'full', 2, 'arm_dyn_id/dynamics_model')
    loaded = load_model(path)
    assert isinstance(loaded, DynamicsModel) and loaded.dynamics == 'full'
    assert loaded.friction_model == fm
    assert loaded.metadata['preparation'] == {'cutoff_hz': 4.0}
    q, dq, ddq = states(robot)
    np.testing.assert_allclose(loaded.torques(q, dq, ddq), model.torques(q, dq, ddq),
                               atol=1e-9)
    # a gravity-only reader refuses the file clearly
    with pytest.raises(ConfigError, match='not an arm_dyn_id gravity model file'):
        GravityModel.load(path)


def gravity_model(robot):
    base = gravity_base_parameters(robot)
    return GravityModel(robot.copy(), base, base.beta(robot.parameters('gravity')))


def test_gravity_files_version_2_and_version_1_both_load(robot, tmp_path):
    model = gravity_model(robot)
    path = model.save(tmp_path / 'gravity.yaml')
    doc = yaml.safe_load(path.read_text())
    assert doc['version'] == 2 and doc['dynamics'] == 'gravity'
    assert load_model(path).dynamics == 'gravity'
    # a file written before the bump: version 1, no dynamics key
    doc['version'] = 1
    del doc['dynamics']
    old = tmp_path / 'old.yaml'
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    for loaded in (load_model(old), GravityModel.load(old)):
        assert isinstance(loaded, GravityModel)
        q, _, _ = states(robot)
        np.testing.assert_allclose(loaded.gravity_torques(q), model.gravity_torques(q),
                                   atol=1e-9)


def test_unknown_files_and_kinds_are_config_errors(robot, tmp_path):
    doc = gravity_model(robot).to_dict()
    doc['dynamics'] = 'kinematic'
    path = tmp_path / 'odd.yaml'
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="dynamics 'kinematic'"):
        load_model(path)
    with pytest.raises(ConfigError, match='does not exist'):
        load_model(tmp_path / 'missing.yaml')
    (tmp_path / 'list.yaml').write_text('- 1\n- 2\n')
    with pytest.raises(ConfigError, match='not an arm_dyn_id model file'):
        load_model(tmp_path / 'list.yaml')
    newer = nominal_model(robot, rigid_base_parameters(robot)).to_dict()
    newer['version'] = 99
    (tmp_path / 'newer.yaml').write_text(yaml.safe_dump(newer))
    with pytest.raises(ConfigError, match='upgrade'):
        load_model(tmp_path / 'newer.yaml')


def test_bad_shapes_and_options_are_refused(robot, base):
    model = nominal_model(robot, base)
    q, dq, ddq = states(robot)
    with pytest.raises(DataError, match='expected'):
        model.torques(q[:, :3], dq, ddq)
    with pytest.raises(DataError, match='differ in shape'):
        model.rigid_body_torques(q, dq[:5], ddq)
    with pytest.raises(DataError, match='velocities'):
        model.friction_torques(dq[:, :2])
    with pytest.raises(DataError, match='positions'):
        model.gravity_torques(np.zeros(4))
    with pytest.raises(DataError, match='friction values'):
        DynamicsModel(robot, base, model.beta, FrictionModel(), np.zeros(3))
    with pytest.raises(ConfigError, match='coulomb'):
        FrictionModel(coulomb='smooth')
    with pytest.raises(ConfigError, match='smooth_velocity'):
        FrictionModel(smooth_velocity=0.0)


def test_regressor_is_linear_in_the_parameters(robot, base):
    q, dq, ddq = states(robot, count=5)
    Y = rigid_regressor(robot, q, dq, ddq)
    theta = robot.parameters('inertial')
    expected = np.array([pin.rnea(robot.model, robot.data, *s) for s in zip(q, dq, ddq)])
    np.testing.assert_allclose(Y @ theta, expected, atol=1e-9)
    np.testing.assert_allclose(base.reduce(Y) @ base.beta(theta), expected, atol=1e-8)
