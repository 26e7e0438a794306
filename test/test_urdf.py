"""The seed arms' URDFs: kinematics, base-parameter counts, loading, collisions.

The DH products below are written independently of urdf/generate_urdfs.py, from the
tables of seed 000 (Table 1) and seed 001 (Table 1, read as modified DH).
"""

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

pin = pytest.importorskip('pinocchio')

URDF_DIR = Path(__file__).resolve().parents[1] / 'urdf'
HUMANOID = URDF_DIR / 'humanoid_arm.urdf'
TX60 = URDF_DIR / 'staubli_tx60.urdf'

D = math.pi / 180.0
# Modified DH rows (alpha_{i-1} rad, a_{i-1} m, d_i m, theta offset rad).
L1, L2 = 0.350, 0.250
HUMANOID_DH = [
    (0 * D, 0.0, 0.0, 0 * D),
    (-90 * D, 0.0, 0.0, -90 * D),
    (-90 * D, 0.0, -L1, -90 * D),
    (-90 * D, 0.0, 0.0, 0 * D),
    (90 * D, 0.0, -L2, 0 * D),
    (-90 * D, 0.0, 0.0, 0 * D),
]
TX60_DH = [
    (0.0, 0.0, 0.0, 0.0),
    (-math.pi / 2, 0.0, 0.0, 0.0),
    (0.0, 0.290, 0.020, 0.0),
    (-math.pi / 2, 0.0, 0.310, 0.0),
    (math.pi / 2, 0.0, 0.0, 0.0),
    (-math.pi / 2, 0.0, 0.070, 0.0),
]
# seed 000 Table 2: centres of mass (mm, in DH frame i) and masses (kg).
HUMANOID_COMS_MM = [[0.5, 3.5, -70], [1.5, 4.0, 5.0], [5.5, 13, 150],
                    [7.5, -30, 4.5], [3.5, 11, 100], [2.0, 5.5, 3.0]]
HUMANOID_MASSES = [0.8, 0.7, 0.5, 0.3, 0.3, 0.2]
# seed 001 Tables 1 and 2.
TX60_POSITION_LIMITS = [2.6, 2.1, 2.1, 1.74, 1.74, 4.36]
TX60_VELOCITY_LIMITS = [5.23, 5.23, 6.97, 8.72, 10.46, 17.44]


def mdh(alpha, a, d, theta):
    """T_{i-1,i} = RotX(alpha) TransX(a) RotZ(theta) TransZ(d) (Craig)."""
    ca, sa, ct, st = math.cos(alpha), math.sin(alpha), math.cos(theta), math.sin(theta)
    return np.array([[ct, -st, 0.0, a],
                     [st * ca, ct * ca, -sa, -sa * d],
                     [st * sa, ct * sa, ca, ca * d],
                     [0.0, 0.0, 0.0, 1.0]])


def dh_chain(table, q):
    """Poses of DH frames 1..n in frame 0, each 4x4."""
    T, out = np.eye(4), []
    for (alpha, a, d, offset), qi in zip(table, q):
        T = T @ mdh(alpha, a, d, qi + offset)
        out.append(T)
    return out


@pytest.fixture(scope='module')
def humanoid():
    return pin.buildModelFromUrdf(str(HUMANOID))


@pytest.fixture(scope='module')
def tx60():
    return pin.buildModelFromUrdf(str(TX60))


def stacked_regressor(model, rng, n_samples, gravity_only):
    data = model.createData()
    rows = []
    for _ in range(n_samples):
        q = rng.uniform(-math.pi, math.pi, model.nq)
        if gravity_only:
            v = a = np.zeros(model.nv)
        else:
            v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        Y = pin.computeJointTorqueRegressor(model, data, q, v, a).copy()
        if gravity_only:
            Y = Y.reshape(model.nv, model.nv, 10)[:, :, :4].reshape(model.nv, -1)
        rows.append((Y, v))
    return rows


def numerical_rank(A, rtol=1e-9):
    s = np.linalg.svd(A, compute_uv=False)
    return int(np.sum(s > rtol * s[0]))


@pytest.mark.parametrize('which', ['humanoid', 'tx60'])
def test_forward_kinematics_equals_modified_dh_product(which, request):
    model = request.getfixturevalue(which)
    table = HUMANOID_DH if which == 'humanoid' else TX60_DH
    data = model.createData()
    base = model.getFrameId('base_link')
    flange = model.getFrameId('flange')
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.uniform(-math.pi, math.pi, 6)
        pin.forwardKinematics(model, data, q)
        pin.updateFramePlacements(model, data)
        o_T_0 = data.oMf[base].inverse()
        expected = dh_chain(table, q)
        for i in range(6):
            got = (o_T_0 * data.oMi[model.getJointId(f'joint_{i + 1}')]).homogeneous
            np.testing.assert_allclose(got, expected[i], atol=1e-9, err_msg=f'frame {i + 1}')
        np.testing.assert_allclose((o_T_0 * data.oMf[flange]).homogeneous, expected[5],
                                   atol=1e-9, err_msg='flange')


def test_humanoid_mounting(humanoid):
    # torso frame = world, gravity -z. Joint 1 axis horizontal and pointing out of
    # the right side (-y); at q = 0 the arm hangs straight down from the shoulder.
    data = humanoid.createData()
    pin.forwardKinematics(humanoid, data, pin.neutral(humanoid))
    np.testing.assert_allclose(humanoid.gravity.linear, [0.0, 0.0, -9.81])
    shoulder = data.oMi[1]
    np.testing.assert_allclose(shoulder.rotation[:, 2], [0.0, -1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(shoulder.translation, [0.0, -0.27, 0.20], atol=1e-12)
    for j, drop in [(3, L1), (4, L1), (5, L1 + L2), (6, L1 + L2)]:
        np.testing.assert_allclose(data.oMi[j].translation - shoulder.translation,
                                   [0.0, 0.0, -drop], atol=1e-12)


def test_humanoid_gravity_base_count_is_12(humanoid):
    # Columns m, m*cx, m*cy, m*cz of each body, stacked over random q: rank 12 as
    # in seed 000 eq. 8, because joint 1's axis is horizontal (torso_to_base).
    rng = np.random.default_rng(1)
    Y = np.vstack([r for r, _ in stacked_regressor(humanoid, rng, 200, True)])
    assert Y.shape == (1200, 24)
    assert numerical_rank(Y) == 12


def test_humanoid_with_vertical_joint_1_would_have_10(humanoid):
    # The reason for the mounting: with z0 vertical, link 1's m*cx, m*cy are lost.
    model = humanoid.copy()
    model.jointPlacements[1] = pin.SE3(np.eye(3), model.jointPlacements[1].translation)
    rng = np.random.default_rng(2)
    Y = np.vstack([r for r, _ in stacked_regressor(model, rng, 200, True)])
    assert numerical_rank(Y) == 10


def test_tx60_inertial_base_counts_36_and_48_with_friction(tx60):
    rng = np.random.default_rng(3)
    rows = stacked_regressor(tx60, rng, 200, False)
    Y = np.vstack([r for r, _ in rows])
    assert Y.shape == (1200, 60)
    assert numerical_rank(Y) == 36
    # Coulomb sign(v_i) and viscous v_i per joint: a diagonal 6x12 block per sample.
    friction = np.vstack([np.hstack([np.diag(np.sign(v)), np.diag(v)]) for _, v in rows])
    assert numerical_rank(np.hstack([Y, friction])) == 48


def test_humanoid_masses_and_coms_match_seed_table_2(humanoid):
    for i in range(6):
        inertia = humanoid.inertias[humanoid.getJointId(f'joint_{i + 1}')]
        assert inertia.mass == pytest.approx(HUMANOID_MASSES[i], abs=1e-12)
        np.testing.assert_allclose(inertia.lever, np.array(HUMANOID_COMS_MM[i]) / 1000.0,
                                   atol=1e-12)


@pytest.mark.parametrize('which', ['humanoid', 'tx60'])
def test_inertias_are_physical(which, request):
    model = request.getfixturevalue(which)
    for j in range(1, model.njoints):
        inertia = model.inertias[j]
        eig = np.linalg.eigvalsh(inertia.inertia)
        assert inertia.mass > 0.0 and eig.min() > 0.0, model.names[j]
        for k in range(3):  # triangle inequality of the principal moments
            assert eig[k] <= eig[(k + 1) % 3] + eig[(k + 2) % 3] + 1e-15, model.names[j]


def test_tx60_limits_match_seed_tables(tx60):
    np.testing.assert_allclose(tx60.upperPositionLimit, TX60_POSITION_LIMITS)
    np.testing.assert_allclose(tx60.lowerPositionLimit, -np.array(TX60_POSITION_LIMITS))
    np.testing.assert_allclose(tx60.velocityLimit, TX60_VELOCITY_LIMITS)


@pytest.mark.parametrize('which', ['humanoid', 'tx60'])
def test_limits_contain_zero_pose(which, request):
    model = request.getfixturevalue(which)
    assert np.all(model.lowerPositionLimit < 0.0) and np.all(model.upperPositionLimit > 0.0)
    assert np.all(model.velocityLimit > 0.0) and np.all(model.effortLimit > 0.0)


@pytest.mark.parametrize('path', [HUMANOID, TX60], ids=['humanoid', 'tx60'])
def test_loads_in_mujoco(path):
    mujoco = pytest.importorskip('mujoco')
    text = path.read_text()
    assert 'package://' not in text and '<mesh' not in text
    model = mujoco.MjSpec.from_string(text).compile()
    assert model.njnt == 6 and model.nv == 6
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(6)]
    assert names == [f'joint_{i}' for i in range(1, 7)]


@pytest.mark.parametrize('path', [HUMANOID, TX60], ids=['humanoid', 'tx60'])
def test_no_collision_between_non_adjacent_links_at_zero(path):
    model = pin.buildModelFromUrdf(str(path))
    geom = pin.buildGeomFromUrdf(model, str(path), pin.GeometryType.COLLISION)
    # the torso/pedestal hangs on the universe (joint 0): adjacent to link 1 only
    assert sorted(g.parentJoint for g in geom.geometryObjects) == list(range(7))
    geom.addAllCollisionPairs()
    for a, b in itertools.combinations(range(len(geom.geometryObjects)), 2):
        ja, jb = geom.geometryObjects[a].parentJoint, geom.geometryObjects[b].parentJoint
        if abs(ja - jb) <= 1:
            geom.removeCollisionPair(pin.CollisionPair(a, b))
    assert len(geom.collisionPairs) == 15  # C(7, 2) - 6 adjacent pairs
    data, gdata = model.createData(), pin.GeometryData(geom)
    q0 = pin.neutral(model)
    assert not pin.computeCollisions(model, data, geom, gdata, q0, False)
    pin.computeDistances(model, data, geom, gdata, q0)
    assert min(r.min_distance for r in gdata.distanceResults) > 0.005


def test_committed_urdfs_equal_generator_output():
    spec = importlib.util.spec_from_file_location('generate_urdfs',
                                                  URDF_DIR / 'generate_urdfs.py')
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for name, make in gen.GENERATORS.items():
        assert (URDF_DIR / name).read_text() == make(), f'{name}: rerun generate_urdfs.py'


def test_urdf_paths_resolve_to_the_file_named_and_never_to_a_namesake(tmp_path, monkeypatch):
    from arm_dyn_id.paths import resolve_data_file, share_dir
    monkeypatch.chdir(tmp_path)
    shipped = (share_dir() / 'urdf' / 'humanoid_arm.urdf').resolve()
    assert resolve_data_file('humanoid_arm.urdf', 'urdf') == shipped      # bare name
    assert resolve_data_file('urdf/humanoid_arm.urdf', 'urdf') == shipped  # inside the package
    # a path with folders that does not exist stays that path (the caller names it),
    # even though a shipped file has the same name
    missing = resolve_data_file('my_arm/humanoid_arm.urdf', 'urdf')
    assert missing == Path('my_arm/humanoid_arm.urdf') and not missing.exists()
    own = tmp_path / 'my_arm' / 'humanoid_arm.urdf'
    own.parent.mkdir()
    own.write_text('<robot name="mine"/>')
    assert resolve_data_file('my_arm/humanoid_arm.urdf', 'urdf') == own.resolve()


def test_inverse_dynamics_of_many_states_is_each_state_s():
    """RobotModel.inverse_dynamics on (N, n) arrays (the gate's nominal torques, the angle
    conventions): the per-sample values, continuous joints included."""
    from arm_bags import example_robot
    from arm_dyn_id.model.robot import RobotModel
    urdf = example_robot('kinova_description/robots/kinova.urdf')
    if urdf is None:
        pytest.skip('example-robot-data is not installed')
    robot = RobotModel.from_urdf(str(urdf))
    rng = np.random.default_rng(3)
    q, dq, ddq = (rng.uniform(-3, 3, (40, robot.n_joints)) for _ in range(3))
    many = robot.inverse_dynamics(q, dq, ddq)
    each = np.array([robot.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    assert many.shape == (40, robot.n_joints)
    np.testing.assert_array_equal(many, each)
    assert robot.inverse_dynamics(q[:0], dq[:0], ddq[:0]).shape == (0, robot.n_joints)
