"""Floating-base models (seeds 002 and 003): the generated URDFs, the momentum and
contact-wrench regressors against pinocchio, CoM, ZMP from sole sensors, bad input."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.errors import DataError, JointNameError, URDFError
from arm_dyn_id.model.floating import FloatingModel, zmp, zmp_from_sensors

URDF = Path(__file__).resolve().parent.parent / 'urdf'
SPACE = URDF / 'space_manipulator.urdf'
BIPED = URDF / 'biped.urdf'


def test_committed_urdfs_match_the_generator():
    out = subprocess.run([sys.executable, str(URDF / 'generate_floating_urdfs.py'), '--check'],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope='module', params=[SPACE, BIPED], ids=['space', 'biped'])
def model(request):
    return FloatingModel(request.param)


def _state(m, seed):
    rng = np.random.default_rng(seed)
    q = pin.randomConfiguration(m.model, -np.ones(m.nq), np.ones(m.nq))
    return q, rng.normal(size=m.nv), rng.normal(size=m.nv)


def test_models_have_the_papers_structure():
    space, biped = FloatingModel(SPACE), FloatingModel(BIPED)
    assert space.n == 6 and space.body_names[0] == 'satellite'
    assert biped.n == 12 and biped.body_names[0] == 'torso'
    # seed 002 Table 2 masses (kg)
    assert space.total_mass == pytest.approx(593.34 + 8.14 + 7.49 + 12.34 + 8.39 + 9.23
                                             + 10.28)
    for m in (space, biped):   # every body physically valid (MuJoCo would refuse it)
        for inertia in m.model.inertias[1:]:
            w = np.linalg.eigvalsh(inertia.inertia)
            assert w.min() > 0 and 2 * w.max() <= w.sum() + 1e-12


def test_momentum_regressor_equals_pinocchio(model):
    """h = A φ equals Σ_i oMi.act(I_i v_i) (pinocchio's own spatial algebra)."""
    for seed in range(3):
        q, v, _ = _state(model, seed)
        h = model.momentum(q[None], v[None])[0]
        d = model.data
        pin.forwardKinematics(model.model, d, q, v)
        ref = pin.Force.Zero()
        for i in range(1, model.model.njoints):
            ref += d.oMi[i].act(model.model.inertias[i] * d.v[i])
        np.testing.assert_allclose(h, ref.vector, atol=1e-9 * max(1, np.abs(h).max()))
        # and the centroidal momentum's linear part is M·ċ
        pin.ccrba(model.model, d, q, v)
        np.testing.assert_allclose(h[:3], d.hg.linear, atol=1e-9 * max(1, np.abs(h).max()))


def test_wrench_regressor_is_momentum_rate_minus_gravity(model):
    q, v, a = _state(model, 7)
    W = model.wrench_regressor(q[None], v[None], a[None])[0] @ model.parameters()
    dt = 1e-7
    h0 = model.momentum(pin.integrate(model.model, q, -v * dt)[None], (v - a * dt)[None])[0]
    h1 = model.momentum(pin.integrate(model.model, q, v * dt)[None], (v + a * dt)[None])[0]
    g = model.total_mass * model.model.gravity.linear
    c = model.com(q[None])[0]
    expect = (h1 - h0) / (2 * dt) - np.concatenate([g, np.cross(c, g)])
    np.testing.assert_allclose(W, expect, rtol=1e-5, atol=1e-5 * np.abs(expect).max())


def test_com_equals_pinocchio(model):
    q, _, _ = _state(model, 3)
    expect = pin.centerOfMass(model.model, model.data, q)
    np.testing.assert_allclose(model.com(q[None])[0], expect, atol=1e-12)


def test_static_zmp_is_the_com_projection():
    m = FloatingModel(BIPED)
    q, _, _ = _state(m, 4)
    zero = np.zeros((1, m.nv))
    W = m.wrench_regressor(q[None], zero, zero)
    np.testing.assert_allclose(zmp(W, m.parameters())[0], m.com(q[None])[0, :2], atol=1e-12)


def test_base_from_foot_inverts_kinematics():
    m = FloatingModel(BIPED)
    q, _, _ = _state(m, 5)
    foot = m.frame_pose(q, 'foot_r')
    Q = m.base_from_foot(q[None, 7:], 'foot_r', foot)
    np.testing.assert_allclose(m.frame_pose(Q[0], 'foot_r').homogeneous, foot.homogeneous,
                               atol=1e-12)
    np.testing.assert_allclose(Q[0, :3], q[:3], atol=1e-12)


def test_zmp_from_sensors():
    pos = np.array([[0.1, 0.05, 0], [0.1, -0.05, 0], [-0.1, 0.05, 0], [-0.1, -0.05, 0]])
    f = np.array([[10.0, 10, 10, 10], [30.0, 10, 0, 0], [10.0, 0, -0.3, 0]])
    np.testing.assert_allclose(zmp_from_sensors(f, pos),
                               [[0, 0], [0.1, 0.025], [0.1, 0.05]], atol=1e-12)


@pytest.mark.parametrize('forces, positions, words', [
    (np.ones(4), np.zeros((4, 3)), 'must be (samples, sensors)'),
    (np.ones((2, 4)), np.zeros((3, 3)), 'positions must be (4, 3)'),
    (np.array([[1.0, np.nan, 1, 1]]), np.zeros((4, 3)), 'not finite'),
    (np.array([[0.1, 0.1, 0.0, 0.2]]), np.zeros((4, 3)), 'not standing on them'),
])
def test_bad_foot_sensor_data_is_one_clear_error(forces, positions, words):
    with pytest.raises(DataError, match=words.replace('(', r'\(').replace(')', r'\)')) as info:
        zmp_from_sensors(forces, positions)
    assert '\n' not in str(info.value)


def test_bad_odometry_is_one_clear_error():
    m = FloatingModel(SPACE)
    with pytest.raises(DataError, match='not a unit quaternion'):
        m.configuration(np.zeros((2, 3)), [[0, 0, 0, 1], [0, 0, 0, 2]], np.zeros((2, 6)))
    with pytest.raises(DataError, match=r'joint angles \(N, 6\)'):
        m.configuration(np.zeros((2, 3)), [[0, 0, 0, 1]] * 2, np.zeros((2, 5)))
    Q = m.configuration(np.zeros((2, 3)), [[0, 0, 0, 1]] * 2, np.zeros((2, 6)))
    with pytest.raises(DataError, match='base velocities'):
        m.velocity(Q, np.zeros((2, 3)), np.zeros((3, 3)), np.zeros((2, 6)))
    with pytest.raises(DataError, match='not finite'):
        m.momentum_regressor(Q, np.full((2, m.nv), np.nan))
    with pytest.raises(JointNameError, match='link_9'):
        m.index('link_9', 'm')
    with pytest.raises(URDFError, match='does not exist'):
        FloatingModel(URDF / 'nope.urdf')


def test_identified_urdf_round_trip(tmp_path):
    m = FloatingModel(BIPED)
    phi = m.parameters()
    phi[m.index('thigh_l', 'm')] *= 1.1         # a changed mass (first moment kept)
    text = m.identified_urdf(phi)
    path = tmp_path / 'identified.urdf'
    path.write_text(text)
    np.testing.assert_allclose(FloatingModel(path).parameters(), phi, atol=1e-8)
    bad = phi.copy()
    bad[0] = -1.0
    with pytest.raises(DataError, match='torso: mass'):
        m.identified_urdf(bad)
