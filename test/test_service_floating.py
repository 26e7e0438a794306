"""service/floating.py: CoM and momentum queries of an identified floating-base model,
against pinocchio on the identified URDF; request validation one rejection at a time;
the stream helpers (odometry, pairing, stance foot)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.data.joint_states import (
    DUPLICATE_JOINTS, EMPTY_ARRAY, LENGTH_MISMATCH, MISSING_JOINTS, NON_FINITE, UNKNOWN_JOINTS,
    Rejection)
from arm_dyn_id.errors import DataError
from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel
from arm_dyn_id.service.floating import (
    BASE_NAMES, NO_BASE, NO_VELOCITY, NON_UNIT_QUATERNION, STALE_BASE, WRONG_FRAME, BasePairing,
    BaseState, ServedFloating, base_from_odometry)

URDF_DIR = Path(__file__).resolve().parent.parent / 'urdf'


def identification(model, phi, method='momentum'):
    """An in-memory identification with anything as phi (FloatingIdentification refuses
    non-positive masses and wrong lengths itself)."""
    return SimpleNamespace(phi=phi, bodies=list(model.body_names), model=lambda: model,
                           method=method, estimator='linear', robot_name='test',
                           urdf=model.source)


@pytest.fixture(scope='module', params=['space_manipulator', 'biped'])
def robot(request):
    return FloatingModel(URDF_DIR / f'{request.param}.urdf')


@pytest.fixture(scope='module')
def identified(robot, tmp_path_factory):
    """Parameters off the URDF's by up to ±20 % (a fit), their URDF loaded by pinocchio."""
    rng = np.random.default_rng(3)
    nominal = robot.parameters()
    phi = nominal.copy()
    for b in range(len(robot.body_names)):       # physical: scale mass, move the CoM
        inertia = pin.Inertia.FromDynamicParameters(nominal[10 * b:10 * b + 10])
        moved = pin.Inertia(inertia.mass * rng.uniform(0.8, 1.2),
                            inertia.lever + rng.uniform(-0.02, 0.02, 3),
                            inertia.inertia * rng.uniform(0.8, 1.2))
        phi[10 * b:10 * b + 10] = moved.toDynamicParameters()
    folder = tmp_path_factory.mktemp('fit')
    path = folder / 'identified.urdf'
    path.write_text(robot.identified_urdf(phi))
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    # the model file F2's fit writes, read back as the node reads it
    ident = FloatingIdentification(Path(robot.source).stem, robot.source, None, 'momentum',
                                   'linear', robot.body_names, phi, float(phi[::10].sum()))
    loaded = FloatingIdentification.load(ident.save(folder / 'model.yaml'))
    return ServedFloating(loaded), pm, phi


def states(robot, rng, count):
    quat = rng.normal(size=(count, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    pos = rng.uniform(-2.0, 2.0, (count, 3))
    q = rng.uniform(-1.0, 1.0, (count, robot.n))
    lin, ang, dq = (rng.uniform(-1.0, 1.0, (count, k)) for k in (3, 3, robot.n))
    return pos, quat, q, lin, ang, dq


def query_arrays(robot, pos, quat, q, lin=None, ang=None, dq=None, perm=None):
    names = list(BASE_NAMES) + list(robot.joint_names)
    position = np.r_[pos, quat, q]
    velocity = None if lin is None else np.r_[lin, ang, 0.0, dq]
    perm = np.arange(len(names)) if perm is None else perm
    return ([names[i] for i in perm], position[perm],
            None if velocity is None else velocity[perm])


def test_com_matches_pinocchio_on_the_identified_urdf(robot, identified):
    served, pm, phi = identified
    assert served.exact and served.max_error < 1e-9
    pd = pm.createData()
    rng = np.random.default_rng(4)
    perm = rng.permutation(7 + robot.n)          # base and joints in any order
    for pos, quat, q, *_ in zip(*states(robot, rng, 10)):
        names, position, _ = query_arrays(robot, pos, quat, q, perm=perm)
        answer = served.query_com(names, position)
        assert not isinstance(answer, Rejection), answer
        config, com = answer
        expected = pin.centerOfMass(pm, pd, np.r_[pos, quat, q])
        np.testing.assert_allclose(com, expected, atol=1e-8)    # URDF: 9 digits
        np.testing.assert_allclose(config, np.r_[pos, quat, q])   # model order back
        # identified, not nominal: the URDF's own CoM is elsewhere
        assert np.linalg.norm(com - robot.com(config[None])[0]) > 1e-4
    assert served.total_mass == pytest.approx(sum(i.mass for i in pm.inertias[1:]))


def test_momentum_matches_floating_model_and_pinocchio_ccrba(robot, identified):
    served, pm, phi = identified
    pd = pm.createData()
    rng = np.random.default_rng(5)
    perm = rng.permutation(7 + robot.n)
    for pos, quat, q, lin, ang, dq in zip(*states(robot, rng, 10)):
        names, position, velocity = query_arrays(robot, pos, quat, q, lin, ang, dq, perm)
        answer = served.query_momentum(names, position, velocity)
        assert not isinstance(answer, Rejection), answer
        config, vel, h = answer
        Q = robot.configuration(pos, quat, q)
        V = robot.velocity(Q, lin, ang, dq)           # linear world -> base axes
        np.testing.assert_allclose(h, robot.momentum(Q, V, phi)[0], rtol=1e-10, atol=1e-10)
        # pinocchio's centroidal momentum of the identified URDF, moved to the origin
        hg = pin.ccrba(pm, pd, Q[0], V[0]) @ V[0]
        c = pd.com[0]
        expected = np.r_[hg[:3], hg[3:] + np.cross(c, hg[:3])]
        # the URDF holds 9 significant digits
        np.testing.assert_allclose(h, expected, rtol=0, atol=1e-7 * np.max(np.abs(h)))
        np.testing.assert_allclose(vel, np.r_[lin, ang, 0.0, dq])


def test_linear_momentum_is_mass_times_com_velocity(robot, identified):
    """A check independent of pinocchio's momentum: p = M ċ (finite difference)."""
    served, _, _ = identified
    rng = np.random.default_rng(6)
    pos, quat, q, lin, ang, dq = (x[0] for x in states(robot, rng, 1))
    Q = robot.configuration(pos, quat, q)[0]
    V = robot.velocity(Q[None], lin, ang, dq)[0]
    dt = 1e-6
    c0 = served.com(pin.integrate(robot.model, Q, -V * dt))
    c1 = served.com(pin.integrate(robot.model, Q, V * dt))
    p = served.momentum(Q, V)[:3]
    np.testing.assert_allclose(p, served.total_mass * (c1 - c0) / (2 * dt), rtol=1e-5,
                               atol=1e-6)


def test_query_errors_one_by_one(robot, identified):
    served, _, _ = identified
    rng = np.random.default_rng(7)
    pos, quat, q, lin, ang, dq = (x[0] for x in states(robot, rng, 1))
    names, position, velocity = query_arrays(robot, pos, quat, q, lin, ang, dq)

    def reason(answer):
        assert isinstance(answer, Rejection), answer
        assert '\n' not in answer.detail
        return answer.reason, answer.detail

    r, text = reason(served.query_com(names, position[:-1]))
    assert r == LENGTH_MISMATCH and f'{len(names)} names but {len(names) - 1}' in text
    assert reason(served.query_com(names, []))[0] == EMPTY_ARRAY
    bad = position.copy()
    bad[8] = np.nan
    r, text = reason(served.query_com(names, bad))
    assert r == NON_FINITE and robot.joint_names[1] in text
    bad = position.copy()
    bad[3:7] = [0.0, 0.0, 0.0, 2.0]
    r, text = reason(served.query_com(names, bad))
    assert r == NON_UNIT_QUATERNION and 'norm 2' in text
    bad[3:7] = [0.0, 0.0, 0.0, 0.0]
    assert reason(served.query_com(names, bad))[0] == NON_UNIT_QUATERNION
    bad[3:7] = [0.0, 0.0, 0.0, 1.0005]       # within tolerance: normalised, served
    config, _ = served.query_com(names, bad)
    assert np.linalg.norm(config[3:7]) == pytest.approx(1.0)
    r, text = reason(served.query_com(names + ['gripper'], np.r_[position, 0.0]))
    assert r == UNKNOWN_JOINTS and 'gripper' in text
    r, text = reason(served.query_com(names[:-1], position[:-1]))
    assert r == MISSING_JOINTS and robot.joint_names[-1] in text
    r, text = reason(served.query_com(names[1:], position[1:]))
    assert r == MISSING_JOINTS and 'base_x' in text
    assert reason(served.query_com(names + [names[8]], np.r_[position, 0.0]))[0] == \
        DUPLICATE_JOINTS
    # momentum: velocities checked too
    assert reason(served.query_momentum(names, position, []))[0] == EMPTY_ARRAY
    assert reason(served.query_momentum(names, position, velocity[:-2]))[0] == LENGTH_MISMATCH
    bad = velocity.copy()
    bad[0] = np.inf
    r, text = reason(served.query_momentum(names, position, bad))
    assert r == NON_FINITE and 'velocity of base_x' in text
    bad = position.copy()
    bad[3:7] = [0.5, 0.5, 0.5, 0.0]
    assert reason(served.query_momentum(names, bad, velocity))[0] == NON_UNIT_QUATERNION
    # base_qw's velocity is ignored
    v2 = velocity.copy()
    v2[6] = 123.0
    np.testing.assert_allclose(served.query_momentum(names, position, v2)[2],
                               served.query_momentum(names, position, velocity)[2])


def test_odometry_twist_in_the_base_frame_is_turned_to_world_axes(robot, identified):
    served, _, phi = identified
    rng = np.random.default_rng(8)
    pos, quat, q, lin, ang, dq = (x[0] for x in states(robot, rng, 1))
    R = pin.Quaternion(quat).toRotationMatrix()
    base = base_from_odometry(12.5, pos, quat, R.T @ lin, ang, 'base_link', 'base_link')
    assert isinstance(base, BaseState)
    np.testing.assert_allclose(base.linear, lin, atol=1e-12)
    np.testing.assert_allclose(base.angular, ang)
    Q = robot.configuration(pos, quat, q)
    V = robot.velocity(Q, lin, ang, dq)
    np.testing.assert_allclose(served.stream_momentum(base, q, dq),
                               robot.momentum(Q, V, phi)[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(served.stream_com(base, q), robot.com(Q, phi)[0], atol=1e-12)
    # malformed odometry: one named reason each
    assert base_from_odometry(0, pos, quat, lin, ang, 'odom_child', 'base_link').reason == \
        WRONG_FRAME
    assert base_from_odometry(0, [np.nan, 0, 0], quat, lin, ang).reason == NON_FINITE
    assert base_from_odometry(0, pos, quat, lin, [0, np.inf, 0]).reason == NON_FINITE
    assert base_from_odometry(0, pos, [0, 0, 0, 0], lin, ang).reason == NON_UNIT_QUATERNION
    assert base_from_odometry(0, pos, [0, 0, np.nan, 1], lin, ang).reason == NON_FINITE
    # no twist (a pose from the stance foot): no momentum
    assert served.stream_momentum(BaseState(0.0, pos, quat), q, dq).reason == NO_VELOCITY


def test_stream_joints_ignore_extra_joints_and_need_velocity_for_momentum(robot, identified):
    served, _, _ = identified
    names = ['gripper'] + list(reversed(robot.joint_names))
    q = np.arange(robot.n) * 0.1
    sample = served.stream_joints(names, np.r_[9.0, q[::-1]])
    np.testing.assert_allclose(sample.position, q)
    assert served.stream_joints(names, np.r_[9.0, q[::-1]], need_velocity=True).reason == \
        NO_VELOCITY
    assert served.stream_joints(names, q[::-1]).reason == LENGTH_MISMATCH
    assert served.stream_joints(names[:-1], np.r_[9.0, q[::-1]][:-1]).reason == MISSING_JOINTS


def test_pairing_refuses_no_base_and_stale_base():
    pairing = BasePairing(max_age=0.2)
    assert pairing.pair(10.0).reason == NO_BASE
    state = BaseState(10.0, np.zeros(3), np.array([0, 0, 0, 1.0]))
    pairing.update(state)
    assert pairing.pair(10.15) is state
    assert pairing.pair(9.9) is state
    rejected = pairing.pair(10.5)
    assert rejected.reason == STALE_BASE and '0.5 s' in rejected.detail


def test_stance_foot_places_the_base_and_gives_its_twist():
    robot = FloatingModel(URDF_DIR / 'biped.urdf')
    served = ServedFloating.nominal(robot)
    rng = np.random.default_rng(9)
    q = rng.uniform(-0.4, 0.4, robot.n)
    dq = rng.uniform(-0.5, 0.5, robot.n)
    foot = np.array([0.1, -0.05, 0.0, 0.0, 0.0, np.sin(0.15), np.cos(0.15)])
    base = served.base_from_stance_foot(3.0, q, 'foot_r', foot)
    config = np.r_[base.position, base.quaternion, q]
    placed = robot.frame_pose(config, 'foot_r')
    np.testing.assert_allclose(placed.translation, foot[:3], atol=1e-12)
    np.testing.assert_allclose(placed.rotation, pin.XYZQUATToSE3(foot).rotation, atol=1e-12)
    assert base.linear is None
    # the twist: finite differences of the base pose along the joint motion
    moving = served.base_from_stance_foot(3.0, q, 'foot_r', foot, dq)
    dt = 1e-6
    before, after = (served.base_from_stance_foot(0, q + s * dq * dt, 'foot_r', foot)
                     for s in (-1, 1))
    np.testing.assert_allclose(moving.linear, (after.position - before.position) / (2 * dt),
                               atol=1e-6)
    q0, q1 = (np.r_[b.position, b.quaternion, q] for b in (before, after))
    local = pin.difference(robot.model, q0, q1)[:6] / (2 * dt)     # base twist, base axes
    np.testing.assert_allclose(moving.angular, local[3:], atol=1e-6)
    # the foot does not move: its velocity with that base twist is zero
    v = np.r_[pin.Quaternion(moving.quaternion).toRotationMatrix().T @ moving.linear,
              moving.angular, dq]
    pin.forwardKinematics(robot.model, robot.data, config, v)
    pin.updateFramePlacements(robot.model, robot.data)
    foot_v = pin.getFrameVelocity(robot.model, robot.data, robot.frame_id('foot_r'))
    np.testing.assert_allclose(foot_v.vector, 0.0, atol=1e-12)
    assert not isinstance(served.stream_momentum(moving, q, dq), Rejection)


def test_non_positive_mass_is_served_by_the_regressor_path(robot):
    phi = robot.parameters()
    phi[10] = -0.5 * phi[10]      # a linear fit can return a negative mass
    served = ServedFloating(identification(robot, phi))
    assert not served.exact
    rng = np.random.default_rng(10)
    pos, quat, q, lin, ang, dq = (x[0] for x in states(robot, rng, 1))
    names, position, velocity = query_arrays(robot, pos, quat, q, lin, ang, dq)
    Q = robot.configuration(pos, quat, q)
    np.testing.assert_allclose(served.query_com(names, position)[1], robot.com(Q, phi)[0])
    V = robot.velocity(Q, lin, ang, dq)
    np.testing.assert_allclose(served.query_momentum(names, position, velocity)[2],
                               robot.momentum(Q, V, phi)[0])


def test_bad_models_are_refused_with_one_line(robot):
    phi = robot.parameters()
    with pytest.raises(DataError, match='needs'):
        ServedFloating(identification(robot, phi[:-1]))
    bad = phi.copy()
    bad[3] = np.nan
    with pytest.raises(DataError, match='NaN'):
        ServedFloating(identification(robot, bad))
    other = identification(robot, phi)
    other.bodies = list(reversed(robot.body_names))
    with pytest.raises(DataError, match='bodies'):
        ServedFloating(other)


def test_momentum_stream_of_a_simulated_space_robot_is_conserved():
    """MuJoCo's free-floating space robot released at rest (sim/floating.py): its base
    pose and twist as odometry gives (twist in the base's axes) and its joints, streamed
    through the served URDF model, give zero momentum all along; a model with wrong
    link masses does not."""
    from arm_dyn_id.sim.floating import Noise, multi_joint_plan, space_robot
    sim = space_robot(URDF_DIR / 'space_manipulator.urdf')
    t, q = multi_joint_plan(duration=4.0, amplitude=1.0, rng=np.random.default_rng(11))
    rec = sim.run(t, q, 0.05, noise=Noise.none())
    model = sim.model_pin
    right = ServedFloating.nominal(model)
    phi = model.parameters()
    phi[10 * 2] *= 1.3                       # one link 30 % heavier
    wrong = ServedFloating(identification(model, phi))
    got = {'right': [], 'wrong': []}
    for k in range(len(rec.t)):
        quat = rec.base_quaternion[k]
        R = pin.Quaternion(quat).toRotationMatrix()
        base = base_from_odometry(rec.t[k], rec.base_position[k], quat,
                                  R.T @ rec.base_linear[k], rec.base_angular[k],
                                  'satellite', 'satellite')
        assert isinstance(base, BaseState), base
        for name, served in (('right', right), ('wrong', wrong)):
            got[name].append(served.stream_momentum(base, rec.q[k], rec.dq[k]))
    right, wrong = np.abs(got['right']), np.abs(got['wrong'])
    assert np.ptp(rec.q, axis=0).min() > 0.1          # the arm moved
    # conserved up to MuJoCo's integration (~1e-5 N·s); the wrong mass shows 1000x more
    assert right.max() < 1e-4
    assert wrong.max() > 1e3 * right.max(), (wrong.max(), right.max())
