"""Identified URDF export: consistent link parameters that reproduce β exactly."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.identification.estimators import fit_wls
from arm_dyn_id.model.export import (InconsistentParametersError, identified_parameters,
                                     identified_urdf, link_boxes)
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import RobotModel

URDF_DIR = Path(__file__).resolve().parent.parent / 'urdf'
ARMS = ['humanoid_arm.urdf', 'staubli_tx60.urdf']


def fitted_model(urdf, seed=0, noise=1e-3):
    """A gravity model fitted on synthetic data of a slightly different arm."""
    robot = RobotModel.from_urdf(urdf)
    base = gravity_base_parameters(robot)
    rng = np.random.default_rng(seed)
    # the "true" arm: nominal parameters perturbed by a few per cent
    theta = robot.parameters('gravity') * (1 + 0.03 * rng.standard_normal(4 * robot.n_bodies))
    q = rng.uniform(-1.5, 1.5, size=(2000, robot.n_joints))
    Y = robot.gravity_regressor(q)
    tau = Y @ theta + noise * rng.standard_normal((len(q), robot.n_joints))
    result = fit_wls(base.reduce(Y), tau, base.names)
    return GravityModel(robot, base, result.beta, result.std_errors)


def pin_gravity(urdf_text, tmp_path, q, joints):
    path = tmp_path / 'identified.urdf'
    path.write_text(urdf_text)
    exported = RobotModel.from_urdf(path, joints=joints)
    return exported, np.array([pin.computeGeneralizedGravity(
        exported.model, exported.data, exported._pin_q(qi))[exported._idx_v] for qi in q])


def check_export(model, urdf, tmp_path):
    text = identified_urdf(model, urdf)
    q = np.random.default_rng(5).uniform(-np.pi, np.pi, size=(50, model.robot.n_joints))
    exported, torques = pin_gravity(text, tmp_path, q, model.joint_names)
    expected = model.gravity_torques(q)
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(torques, expected, atol=1e-6 * scale, rtol=0)
    # the exported arm's base parameters are the identified ones
    np.testing.assert_allclose(model.base.beta(exported.parameters('gravity')), model.beta,
                               atol=1e-9 * np.max(np.abs(model.beta)))
    # physically consistent: positive masses, CoMs inside the boxes
    root = ET.fromstring(text)
    children = [j.find('child').get('link') for j in root.findall('joint')
                if j.get('name') in model.joint_names]
    boxes = link_boxes(urdf, children)
    for link in root.findall('link'):
        if link.get('name') not in children:
            continue
        inertial = link.find('inertial')
        mass = float(inertial.find('mass').get('value'))
        com = np.array([float(v) for v in inertial.find('origin').get('xyz').split()])
        assert mass > 0
        box = boxes[link.get('name')]
        inside = np.all(com >= box.lower - 1e-9) and np.all(com <= box.upper + 1e-9)
        assert inside, link.get('name')
    return text


def without_inertials(text):
    return re.sub(r'<inertial>.*?</inertial>', '', text, flags=re.S)


@pytest.mark.parametrize('arm', ARMS)
def test_export_reproduces_fitted_model(arm, tmp_path):
    urdf = URDF_DIR / arm
    model = fitted_model(urdf)
    text = check_export(model, urdf, tmp_path)
    nominal = urdf.read_text()
    # everything outside the <inertial> elements is byte-for-byte the nominal file
    assert without_inertials(text) == without_inertials(nominal)
    # and inside them only mass values and origin xyz changed
    strip = r'(value|xyz)="[^"]*"'
    assert re.sub(strip, '', text) == re.sub(strip, '', nominal)


def test_export_of_nominal_model_is_nominal(tmp_path):
    urdf = URDF_DIR / 'humanoid_arm.urdf'
    robot = RobotModel.from_urdf(urdf)
    base = gravity_base_parameters(robot)
    model = GravityModel(robot, base, base.beta(robot.parameters('gravity')))
    theta = identified_parameters(model, urdf)
    np.testing.assert_allclose(theta, robot.parameters('gravity'), atol=1e-9)


def test_export_of_perturbed_combination(tmp_path):
    """+5 % on the base parameter that carries link 3's mass (my2 - 0.35 m3 + ...)."""
    urdf = URDF_DIR / 'humanoid_arm.urdf'
    model = fitted_model(urdf, seed=1)
    k = next(i for i, e in enumerate(model.base.expressions()) if 'm3' in e)
    model.beta[k] *= 1.05
    check_export(model, urdf, tmp_path)


def test_flange_payload_merged_body_keeps_fixed_child(tmp_path):
    """A mass on a fixed child link (flange) stays nominal; the moving link absorbs
    the identified difference."""
    urdf = URDF_DIR / 'humanoid_arm.urdf'
    text = urdf.read_text().replace(
        '<link name="flange"/>',
        '<link name="flange"><inertial><origin xyz="0 0 0.02" rpy="0 0 0"/>'
        '<mass value="0.1"/><inertia ixx="1e-5" ixy="0" ixz="0" iyy="1e-5" iyz="0" '
        'izz="1e-5"/></inertial></link>')
    loaded = tmp_path / 'with_flange_mass.urdf'
    loaded.write_text(text)
    model = fitted_model(loaded, seed=2)
    out = check_export(model, loaded, tmp_path)
    flange = [ln for ln in ET.fromstring(out).findall('link') if ln.get('name') == 'flange'][0]
    assert float(flange.find('inertial/mass').get('value')) == 0.1


def test_infeasible_beta_names_the_link():
    urdf = URDF_DIR / 'humanoid_arm.urdf'
    model = fitted_model(urdf)
    k = model.base.names.index('mx6')      # link 6's first moment alone
    model.beta[k] = -50.0                  # kg·m: 250 m off-axis for a 0.2 kg link
    with pytest.raises(InconsistentParametersError, match=r'link_6') as excinfo:
        identified_urdf(model, urdf)
    assert 'centre of mass' in str(excinfo.value) or 'mass' in str(excinfo.value)


def test_huge_negative_combination_is_reported():
    urdf = URDF_DIR / 'staubli_tx60.urdf'
    model = fitted_model(urdf)
    # mx2 + 0.29 (m3 + m4 + m5 + m6): masses are positive, mx2 is bounded by m2 and its box
    k = next(i for i, e in enumerate(model.base.expressions()) if e.startswith('mx2'))
    model.beta[k] = -1000.0
    with pytest.raises(InconsistentParametersError, match=r'link_\d'):
        identified_parameters(model, urdf)


# ---------------------------------------------------------------------------
# full-dynamics models: whole inertias
# ---------------------------------------------------------------------------
def full_model(urdf, seed=0, consistent=True):
    """A DynamicsModel of a slightly different, physically valid arm."""
    from arm_dyn_id.model.dynamics import DynamicsModel, rigid_base_parameters
    robot = RobotModel.from_urdf(urdf)
    base = rigid_base_parameters(robot)
    rng = np.random.default_rng(seed)
    theta = []
    for j in range(1, robot.model.njoints):
        body = robot.model.inertias[j]
        # scale mass and inertia, move the CoM a little: still a real body
        other = pin.Inertia(body.mass * (1 + 0.1 * rng.random()),
                            body.lever + 0.01 * rng.standard_normal(3),
                            body.inertia * (1 + 0.1 * rng.random()))
        theta.append(other.toDynamicParameters())
    theta = np.concatenate(theta)
    return DynamicsModel(robot, base, base.beta(theta),
                         standard=theta if consistent else None, consistent=consistent)


@pytest.mark.parametrize('urdf', ARMS)
@pytest.mark.parametrize('consistent', [True, False])
def test_full_export_reproduces_rigid_body_torques(urdf, consistent, tmp_path):
    model = full_model(URDF_DIR / urdf, consistent=consistent)
    text = identified_urdf(model, URDF_DIR / urdf)
    path = tmp_path / 'identified.urdf'
    path.write_text(text)
    exported = RobotModel.from_urdf(path, joints=model.joint_names)
    rng = np.random.default_rng(3)
    n = model.robot.n_joints
    q, dq, ddq = (rng.uniform(-r, r, (30, n)) for r in (np.pi, 2.0, 5.0))
    torques = np.array([exported.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    expected = model.rigid_body_torques(q, dq, ddq)
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(torques, expected, atol=1e-6 * scale, rtol=0)
    # whole inertias were written, and every link is a real body
    root = ET.fromstring(text)
    for link in root.findall('link'):
        inertial = link.find('inertial')
        if inertial is None:
            continue
        el = inertial.find('inertia')
        inertia = np.array([[float(el.get('ixx')), float(el.get('ixy')), float(el.get('ixz'))],
                            [float(el.get('ixy')), float(el.get('iyy')), float(el.get('iyz'))],
                            [float(el.get('ixz')), float(el.get('iyz')), float(el.get('izz'))]])
        assert np.linalg.eigvalsh(inertia)[0] >= -1e-9
    # the nominal URDF would not do
    nominal = RobotModel.from_urdf(URDF_DIR / urdf)
    plain = np.array([nominal.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    assert np.max(np.abs(plain - expected)) > 1e-3 * scale


def test_full_export_refuses_an_inconsistent_model():
    model = full_model(URDF_DIR / 'humanoid_arm.urdf', consistent=False)
    # a base parameter set no rigid bodies give: negate every mass-like combination
    model.beta = -np.abs(model.beta) - 1.0
    with pytest.raises(InconsistentParametersError, match='no physically consistent'):
        identified_urdf(model, URDF_DIR / 'humanoid_arm.urdf')


@pytest.mark.parametrize('consistent', [True, False])
def test_full_export_of_a_model_with_rotor_inertias_says_them(consistent, tmp_path):
    """URDF holds no rotor inertia: the file says the model's in a comment, and the
    exported links plus those rotor inertias give the model's torques. Before, they were
    left out silently and the file's torques missed Ia·q̈."""
    import re
    from arm_dyn_id.model.dynamics import DynamicsModel, rigid_base_parameters
    urdf = URDF_DIR / 'humanoid_arm.urdf'
    plain = full_model(urdf, consistent=True)
    robot = plain.robot
    base = rigid_base_parameters(robot, armature=True)
    rotors = np.linspace(0.05, 0.3, robot.n_joints)
    theta = np.concatenate([plain.standard, rotors])
    model = DynamicsModel(robot, base, base.beta(theta),
                          standard=theta if consistent else None, consistent=consistent)
    text = identified_urdf(model, urdf)
    said = re.search(r'<!-- arm_dyn_id: the identified rotor inertias[^:]*: ([^>]*) -->', text)
    assert said, text[:400]
    values = dict(item.rsplit(' ', 1) for item in said.group(1).split(', '))
    assert list(values) == list(model.joint_names)
    Ia = np.array([float(v) for v in values.values()])
    path = tmp_path / 'identified.urdf'
    path.write_text(text)
    exported = RobotModel.from_urdf(path, joints=model.joint_names)
    rng = np.random.default_rng(3)
    q, dq, ddq = (rng.uniform(-r, r, (30, robot.n_joints)) for r in (np.pi, 2.0, 5.0))
    torques = np.array([exported.inverse_dynamics(*s) for s in zip(q, dq, ddq)]) + ddq * Ia
    expected = model.rigid_body_torques(q, dq, ddq)
    np.testing.assert_allclose(torques, expected, atol=1e-6 * np.max(np.abs(expected)), rtol=0)
    if consistent:
        np.testing.assert_allclose(Ia, rotors)
