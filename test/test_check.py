"""The pre-flight check: ``arm-dyn-id check`` and :mod:`arm_dyn_id.validation.check`.

Synthetic recordings of real URDFs (our humanoid arm and example-robot-data's UR5):
static holds at random poses, fast moves between them and slow moves in both
directions, torque = pinocchio's inverse dynamics + Coulomb and viscous friction +
current noise, stored as motor current I = τ / k_e in a plain ``ros2 bag record`` bag
(only /joint_states). Faults a new driver makes are put in the effort: one joint's sign
reversed, one k_e off by 2x or 1000x, two joints' efforts swapped, torque published
where current was expected. Rich motion: the humanoid arm simulated in MuJoCo
(arm_dyn_id.sim: PID drive, friction, current noise and quantisation, gross errors)
running a Fourier excitation, with the torque constants of its config right, or one of
them doubled. A URDF with a negative mass is named as such.
"""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from arm_dyn_id.cli import main
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.errors import DataError, URDFError
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.validation.check import (FAIL, OK, UNTESTABLE, WARN, check_gravity,
                                         check_samples, holding_friction, nominal_gravity)

REPO = Path(__file__).resolve().parent.parent
HUMANOID = REPO / 'urdf' / 'humanoid_arm.urdf'
ERD = Path(sys.prefix) / 'lib' / f'python{sys.version_info.major}.{sys.version_info.minor}' / \
    'site-packages' / 'cmeel.prefix' / 'share' / 'example-robot-data' / 'robots'
UR5 = ERD / 'ur_description' / 'urdf' / 'ur5_robot.urdf'
UR5_K_E = np.array([13.0, 13.0, 10.0, 4.0, 4.0, 4.0])
HUMANOID_K_E = np.array([0.5, 0.5, 0.3, 0.2, 0.1, 0.05])


def ur5():
    if not UR5.is_file():
        pytest.skip(f'example-robot-data is not installed ({UR5} is absent)')
    return UR5


def recording(urdf, k_e, seed=0, rate=100.0, poses=10, current_noise=0.02, frozen=(),
              move_s=1.0, stiction=0.0, load=None):
    """Holds, fast moves and slow moves of an arm; (robot, t, q, current, tau).

    The joints at the indices ``frozen`` stay at 0 throughout; a move between two
    poses takes ``move_s`` seconds. With ``stiction`` a joint holds at each rest a
    friction torque drawn within ± that many times its Coulomb level (0: none at rest).
    ``load`` (a Payload) is carried by the arm but not in the returned robot.

    Returns
    -------
    robot : RobotModel
    t : ndarray, (N,)
        s.
    q : ndarray, (N, n)
        rad (encoder noise 1e-5 rad).
    current : ndarray, (N, n)
        A: (G(q) + friction) / k_e + noise.
    tau : ndarray, (N, n)
        The true joint torque (N·m): pinocchio's inverse dynamics (gravity where the
        arm holds, inertia too where it moves) plus friction.
    """
    rng = np.random.default_rng(seed)
    robot = RobotModel.from_urdf(urdf)
    n = robot.n_joints
    dt = 1.0 / rate
    pieces = []
    q_now = np.zeros(n)

    def cycloid(delta, seconds):
        s = np.arange(1, int(seconds * rate) + 1) / (seconds * rate)
        return q_now + np.outer(s - np.sin(2 * np.pi * s) / (2 * np.pi), delta)

    still = np.isin(np.arange(n), frozen)
    for _ in range(poses):
        target = np.where(still, 0.0, rng.uniform(-1.3, 1.3, n))
        pieces.append(cycloid(target - q_now, move_s))        # fast
        q_now = target
        pieces.append(np.tile(q_now, (int(1.0 * rate), 1)))   # hold
        # slow move, peak 0.03 rad/s, forth then back
        delta = np.where(still, 0.0, rng.choice([-1.0, 1.0], n) * 0.045)
        pieces.append(cycloid(delta, 3.0))
        q_now = pieces[-1][-1]
        pieces.append(np.tile(q_now, (int(0.5 * rate), 1)))
        pieces.append(cycloid(-delta, 3.0))
        q_now = pieces[-1][-1]
        pieces.append(np.tile(q_now, (int(0.5 * rate), 1)))
    q_true = np.vstack(pieces)
    t = 1000.0 + dt * np.arange(q_true.shape[0])
    dq = np.gradient(q_true, dt, axis=0)
    ddq = np.gradient(dq, dt, axis=0)
    coulomb = 0.01 * np.abs(nominal_gravity(robot, q_true)).max(axis=0) + 0.02
    arm = robot if load is None else robot.with_payload(load)
    rigid = np.array([arm.inverse_dynamics(*s) for s in zip(q_true, dq, ddq)])
    tau = rigid + coulomb * np.tanh(dq / 0.002) + 0.5 * dq
    for j in range(n):          # one friction draw per rest of each joint
        rest = dq[:, j] == 0
        starts = np.cumsum(rest & ~np.r_[False, rest[:-1]])
        draws = stiction * coulomb[j] * rng.uniform(-1, 1, starts[-1] + 1)
        tau[rest, j] += draws[starts[rest]]
    current = tau / k_e + current_noise * rng.standard_normal(tau.shape)
    q = q_true + 1e-5 * rng.standard_normal(q_true.shape)
    return robot, t, q, current, tau


def slow(t, q):
    """The quasi-static mask and filtered velocities, as the command uses them."""
    from arm_dyn_id.data.segmentation import filtered_derivatives, quasi_static_mask
    return quasi_static_mask(t, q), filtered_derivatives(t, q)[1]


def bag(tmp_path, urdf, k_e, effort_fault=None, name='bag', storage='mcap', jitter=0.0,
        **kw):
    robot, t, q, current, tau = recording(urdf, k_e, **kw)
    effort = current if effort_fault is None else effort_fault(current.copy(), tau)
    # uneven stamps (RTDE-like logs): each shifted by up to jitter x the step
    t = t + jitter * np.diff(t[:2]) * np.random.default_rng(7).uniform(0, 1, t.shape)
    return write_bag(tmp_path / name, t, robot.joint_names, q, effort, storage=storage,
                     version=8), robot


def run_check(capsys, path, urdf, k_e, *extra):
    code = main(['check', str(path), '--urdf', str(urdf), '--quiet', '--torque-constants',
                 ','.join(f'{k:g}' for k in k_e), *extra])
    out = capsys.readouterr().out
    return code, out


def row(out, joint):
    return next(line for line in out.splitlines() if line.startswith(joint + ' '))


# -- the core on arrays ---------------------------------------------------------

def test_core_finds_sign_scale_offset_and_leaves_unloaded_joints_alone():
    robot, t, q, current, tau = recording(HUMANOID, HUMANOID_K_E, poses=8)
    measured = current * HUMANOID_K_E
    measured[:, 1] *= -1                       # sign
    measured[:, 2] *= 2.0                      # k_e off 2x
    measured[:, 3] += 0.3                      # offset (N·m)
    mask, velocity = slow(t, q)
    result = check_samples(robot, q, measured, mask=mask, velocity=velocity,
                           torque_constants=HUMANOID_K_E)
    by = {c.joint: c for c in result.joints}
    assert by['joint_1'].status == OK and abs(by['joint_1'].scale - 1) < 0.05
    assert by['joint_2'].status == FAIL and 'sign flipped' in by['joint_2'].verdict
    assert abs(by['joint_2'].scale + 1) < 0.05
    assert by['joint_3'].status == FAIL and 'scale off x2.0' in by['joint_3'].verdict
    assert 'offset +0.' in by['joint_4'].verdict and by['joint_4'].status != FAIL
    assert abs(by['joint_4'].offset - 0.3) < 0.03
    assert by['joint_1'].friction > 0     # the Coulomb friction of the slow moves
    assert abs(by['joint_4'].offset_current - 0.3 / HUMANOID_K_E[3]) < 0.2
    assert result.failed and 'joint_2' in result.verdict and 'joint_3' in result.verdict


def test_core_gravity_path_says_a_vertical_axis_is_untestable_and_not_ok():
    robot, t, q, current, tau = recording(ur5(), UR5_K_E, poses=6)
    mask, velocity = slow(t, q)
    result = check_samples(robot, q, current * UR5_K_E, mask=mask, velocity=velocity,
                           torque_constants=UR5_K_E)
    by = {c.joint: c for c in result.joints}
    # the base joint turns about the vertical: gravity never loads it, so the
    # still samples cannot test it, and an untested joint is not OK
    assert result.status == UNTESTABLE, result.table()
    assert by['shoulder_pan_joint'].status == UNTESTABLE
    assert 'gravity never loads it' in by['shoulder_pan_joint'].verdict
    assert 'untestable: shoulder_pan_joint' in result.verdict
    for j in ('shoulder_lift_joint', 'elbow_joint'):
        assert by[j].status == OK and abs(by[j].scale - 1) < 0.05


def test_core_names_a_swapped_pair():
    robot, t, q, current, tau = recording(HUMANOID, HUMANOID_K_E, poses=8, seed=3)
    measured = tau + 0.01 * np.random.default_rng(1).standard_normal(tau.shape)
    measured[:, [0, 2]] = measured[:, [2, 0]]
    result = check_gravity(robot.joint_names, nominal_gravity(robot, q), measured)
    by = {c.joint: c for c in result.joints}
    assert by['joint_1'].swapped_with == 'joint_3', result.table()
    assert by['joint_3'].swapped_with == 'joint_1'
    assert by['joint_2'].status == OK and by['joint_2'].swapped_with is None


def test_core_names_swapped_currents_of_two_joints_whose_torques_are_alike():
    """The real UR10e with shoulder_lift's and elbow's currents swapped: their gravity
    torques are alike over the motion, so each slot's own fit absorbs most of the swap
    with a wrong scale (x0.38 and x2.36 there) and the residual ratio stays above
    swap_ratio: the check said 'scale off, fix torque_constants 10.7 -> 27.81'. Each slot
    read at the other's torque with the scale swapped currents give (k_i / k_k, each read
    with the other's constant) and better than by its own is named a swap."""
    rng = np.random.default_rng(0)
    x, y = np.sin(np.linspace(0, 6, 400)), np.cos(np.linspace(0, 9, 400))
    G = np.column_stack([40 * x, 20 * x + 1.0 * y, 2.0 * np.sin(np.linspace(0, 5, 400))])
    k = np.array([10.6956, 8.4566, 9.0])
    T = G.copy()
    T[:, 0], T[:, 1] = G[:, 1] * k[0] / k[1], G[:, 0] * k[1] / k[0]
    T += rng.standard_normal(T.shape)
    result = check_gravity(('shoulder', 'elbow', 'wrist'), G, T, torque_constants=k)
    by = {c.joint: c for c in result.joints}
    assert by['shoulder'].swapped_with == 'elbow', result.table()
    assert by['elbow'].swapped_with == 'shoulder' and by['wrist'].swapped_with is None
    # the same data read with the right wiring is no swap
    clean = G + rng.standard_normal(G.shape)
    result = check_gravity(('shoulder', 'elbow', 'wrist'), G, clean, torque_constants=k)
    assert all(c.swapped_with is None for c in result.joints), result.table()


def test_core_refuses_data_it_cannot_use():
    G = np.ones((50, 2))
    with pytest.raises(DataError, match='must both be'):
        check_gravity(('a', 'b'), G, np.ones((50, 3)))
    with pytest.raises(DataError, match='only 3 usable samples'):
        check_gravity(('a', 'b'), G[:3], G[:3])
    with pytest.raises(DataError, match='NaN'):
        check_gravity(('a', 'b'), G, np.full((50, 2), np.nan))
    with pytest.raises(DataError, match='zero at every sample'):
        check_gravity(('a', 'b'), 0 * G, G)
    robot = RobotModel.from_urdf(HUMANOID)
    with pytest.raises(DataError, match='none of the 4 samples'):
        check_samples(robot, np.zeros((4, 6)), np.zeros((4, 6)), mask=np.zeros(4, bool))


def held_poses(robot, seed, poses=10, fraction=0.03, rate=100.0, noise=0.002):
    """Static holds at random poses, each joint holding at every hold a friction torque
    drawn within ± ``fraction`` of its effort limit (stiction: which one depends on how
    the joint came to rest, not on the pose); (t, q, G, tau), 1 s per hold."""
    rng = np.random.default_rng(seed)
    n, per = robot.n_joints, int(rate)
    q = np.repeat(rng.uniform(-1.3, 1.3, (poses, n)), per, axis=0)
    G = nominal_gravity(robot, q)
    held = np.repeat(holding_friction(robot, fraction) * rng.uniform(-1, 1, (poses, n)),
                     per, axis=0)
    tau = G + held + noise * rng.standard_normal(G.shape)
    return 1000.0 + np.arange(len(q)) / rate, q, G, tau


def test_core_friction_held_at_rest_is_not_blamed_on_the_wiring():
    """A still joint whose gravity torque is small against the friction it holds reads as
    a flipped sign or a wrong constant; it is untestable, and a real flip still fails."""
    robot = RobotModel.from_urdf(HUMANOID)
    holding = holding_friction(robot)
    blamed = 0
    for seed in range(12):
        _, q, G, tau = held_poses(robot, seed)
        tau[:, 1] *= -1                         # joint_2's sign really is reversed
        result = check_gravity(robot.joint_names, G, tau, holding=holding)
        by = {c.joint: c for c in result.joints}
        assert by['joint_2'].status == FAIL and 'sign flipped' in by['joint_2'].verdict
        wrong = [c.line() for c in result.joints if c.status == FAIL and c.joint != 'joint_2']
        assert not wrong, (seed, result.table())
        for c in result.joints:
            if c.status == UNTESTABLE and c.friction_reach > 0.1 * max(1, abs(c.scale)):
                assert c.verdict.startswith('held still against its friction') or \
                    'gravity barely loads it' in c.verdict, c.line()
        # taken as frictionless (as before), the same holds blame the wiring
        blind = check_gravity(robot.joint_names, G, tau)
        blamed += sum(c.status == FAIL and c.joint != 'joint_2' for c in blind.joints)
    assert blamed >= 2


def test_core_a_joint_the_urdf_barely_loads_is_untestable_not_failed():
    # joint_6's nominal torque is a fraction of a percent of joint_2's: a few mm of its
    # centre of mass off in the URDF make its measured torque read 4x the nominal
    robot = RobotModel.from_urdf(HUMANOID)
    _, q, G, _ = held_poses(robot, 1, fraction=0.0)
    rms = np.sqrt(np.mean(G ** 2, axis=0))
    assert rms[5] < 0.01 * rms.max()
    measured = G.copy()
    measured[:, 5] *= 4.0
    by = {c.joint: c for c in check_gravity(robot.joint_names, G, measured).joints}
    assert by['joint_6'].status == UNTESTABLE, by['joint_6'].line()
    assert by['joint_6'].verdict.startswith('the URDF barely loads it')
    assert 'scale off x4.00' in by['joint_6'].verdict
    assert all(by[f'joint_{k}'].status == OK for k in range(1, 6))
    measured[:, 5] = 1000 * G[:, 5]             # a unit error is no URDF error: it fails
    by = {c.joint: c for c in check_gravity(robot.joint_names, G, measured).joints}
    assert by['joint_6'].status == FAIL and 'mA read as A' in by['joint_6'].verdict
    measured[:, 5] = -G[:, 5]                   # nor is its torque exactly reversed
    by = {c.joint: c for c in check_gravity(robot.joint_names, G, measured).joints}
    assert by['joint_6'].status == FAIL and 'sign flipped' in by['joint_6'].verdict


def test_core_stiction_that_follows_another_joint_is_not_a_swap():
    # the UR5's base joint carries no gravity; still, it holds a friction torque that
    # here happens to follow shoulder_lift's gravity, within what it may hold at rest
    robot = RobotModel.from_urdf(ur5())
    _, q, G, tau = held_poses(robot, 2, fraction=0.0)
    holding = holding_friction(robot)
    tau[:, 0] = 0.15 * G[:, 1]
    assert 0.15 * np.ptp(G[:, 1]) / 2 < holding[0]
    blind = {c.joint: c for c in check_gravity(robot.joint_names, G, tau).joints}
    assert blind['shoulder_pan_joint'].swapped_with == 'shoulder_lift_joint'   # as before
    by = {c.joint: c for c in check_gravity(robot.joint_names, G, tau,
                                            holding=holding).joints}
    assert by['shoulder_pan_joint'].swapped_with is None
    assert by['shoulder_pan_joint'].status == UNTESTABLE
    assert by['shoulder_lift_joint'].status == OK


GRIPPER = Payload(0.6, (0.01, -0.02, 0.06), frame='flange')


def test_core_a_load_the_urdf_lacks_is_named_not_blamed_on_the_constants():
    """A gripper missing from the URDF reads as constants off on the distal joints; the
    check finds the load that explains them, and a real wrong constant still fails."""
    robot = RobotModel.from_urdf(HUMANOID)
    _, q, G, _ = held_poses(robot, 3, fraction=0.0)
    loaded = nominal_gravity(robot.with_payload(GRIPPER), q)
    measured = loaded + 0.002 * np.random.default_rng(0).standard_normal(G.shape)
    blind = check_samples(robot, q, measured, load_frame=None)
    assert any(c.status == FAIL and 'scale off' in c.verdict for c in blind.joints)
    result = check_samples(robot, q, measured)
    assert result.status != FAIL, result.table()
    assert abs(result.load['mass'] - GRIPPER.mass) < 0.05 * GRIPPER.mass, result.load
    np.testing.assert_allclose(result.load['com'], GRIPPER.com, atol=0.01)
    named = [c for c in result.joints if 'explained by a load at flange' in c.verdict]
    assert named and all(c.status == WARN for c in named), result.table()
    assert result.to_dict()['load']['frame'] == 'flange'
    # no load, the elbow's constant doubled: no load explains that
    doubled = G + 0.002 * np.random.default_rng(1).standard_normal(G.shape)
    doubled[:, 2] *= 2.0
    result = check_samples(robot, q, doubled)
    by = {c.joint: c for c in result.joints}
    assert result.load is None and by['joint_3'].status == FAIL, result.table()
    assert 'scale off x2.0' in by['joint_3'].verdict
    # the gripper and a wrong constant, or a reversed sign: the load is found on the
    # other joints, and the faulty joint alone fails
    for joint, factor, verdict in ((2, 2.0, 'scale off'), (3, -1.0, 'sign flipped')):
        faulty = measured.copy()
        faulty[:, joint] *= factor
        result = check_samples(robot, q, faulty)
        by = {c.joint: c for c in result.joints}
        name = robot.joint_names[joint]
        assert by[name].status == FAIL and verdict in by[name].verdict, result.table()
        assert [c.joint for c in result.joints if c.status == FAIL] == [name], result.table()
        assert abs(result.load['mass'] - GRIPPER.mass) < 0.1 * GRIPPER.mass, result.load
    # no load, one constant off: no load absorbs it (a joint that agrees with the URDF is
    # never the one left out; these cases were 'explained' by a load before)
    for urdf, seed, joint, factor in ((HUMANOID, 0, 0, 1.4), (HUMANOID, 4, 1, 1.4),
                                      (HUMANOID, 2, 3, 2.0), (ur5(), 1, 1, 1.7),
                                      (ur5(), 2, 1, 1.4)):
        arm = RobotModel.from_urdf(urdf)
        _, q_off, G_off, _ = held_poses(arm, seed, fraction=0.0)
        off = G_off + 0.002 * np.random.default_rng(seed).standard_normal(G_off.shape)
        off[:, joint] *= factor
        result = check_samples(arm, q_off, off)
        assert result.load is None, result.table()
        assert result.joints[joint].status == FAIL, result.table()
    # nor at a single pose, where a load's four parameters could absorb one joint's error
    # (the UR5 here, its shoulder held still against friction, so not a witness), even
    # with encoder noise making every sample's q differ
    for seed in (11, 12):
        robot = RobotModel.from_urdf(ur5())
        _, q, _, tau = held_poses(robot, seed, poses=1)
        q = q + 1e-5 * np.random.default_rng(seed).standard_normal(q.shape)
        tau[:, 2] *= 2.0
        result = check_samples(robot, q, tau)
        by = {c.joint: c for c in result.joints}
        assert result.load is None and by['elbow_joint'].status == FAIL, result.table()


def test_a_gripper_missing_from_the_urdf_is_named_on_a_bag(tmp_path, capsys):
    robot, t, q, current, _ = recording(HUMANOID, HUMANOID_K_E, poses=8, load=GRIPPER)
    path = write_bag(tmp_path / 'bag', t, robot.joint_names, q, current)
    for extra in ((), ('--dynamics', 'full')):
        code, out = run_check(capsys, path, HUMANOID, HUMANOID_K_E, '--json',
                              str(tmp_path / 'c.json'), *extra)
        assert code in (0, 3) and 'FAIL' not in out, out
        assert 'explained by a load at flange the URDF lacks?' in out, out
        load = json.loads((tmp_path / 'c.json').read_text())['load']
        assert abs(load['mass'] - GRIPPER.mass) < 0.1 * GRIPPER.mass, (extra, load)


def test_core_a_flipped_sign_with_a_scale_near_one_fails_not_warns():
    robot = RobotModel.from_urdf(HUMANOID)
    _, q, G, _ = held_poses(robot, 0)
    measured = G.copy()
    measured[:, 1] *= -0.85                     # reversed, and its constant 15 % low
    by = {c.joint: c for c in check_gravity(robot.joint_names, G, measured).joints}
    assert by['joint_2'].status == FAIL and by['joint_2'].verdict.startswith('sign flipped')


def test_holding_friction_is_the_urdfs_else_a_fraction_of_the_effort_limit(tmp_path):
    text = HUMANOID.read_text()
    at = text.index('<joint name="joint_3"')
    end = text.index('</joint>', at)
    urdf = tmp_path / 'arm.urdf'
    urdf.write_text(text[:end] + '<dynamics damping="0.1" friction="0.7"/>' + text[end:])
    robot = RobotModel.from_urdf(urdf)
    effort = np.asarray(robot.model.effortLimit)[robot._idx_v]
    got = holding_friction(robot, 0.05)
    np.testing.assert_allclose(got[2], 0.7)
    np.testing.assert_allclose(np.delete(got, 2), 0.05 * np.delete(effort, 2))
    np.testing.assert_allclose(holding_friction(robot, 0.0), [0, 0, 0.7, 0, 0, 0])


def test_core_a_joint_that_also_moves_is_judged_on_its_motion():
    """Stiction at the holds of a recording that also moves: the friction measured on the
    motion bounds it, and a joint whose holds could mislead is judged on its motion."""
    robot, t, q, current, tau = recording(HUMANOID, HUMANOID_K_E, poses=8, stiction=1.0)
    mask, velocity = slow(t, q)
    result = check_samples(robot, q, current * HUMANOID_K_E, mask=mask, velocity=velocity,
                           torque_constants=HUMANOID_K_E)
    for c in result.joints:
        assert c.status in (OK, WARN) and abs(c.scale - 1) < 0.1, result.table()


def test_table_stays_aligned_with_long_joint_names():
    joints = ('j', 'a_very_long_prefixed_shoulder_lift_joint')
    rng = np.random.default_rng(0)
    G = np.column_stack([rng.uniform(-5, 5, 100), rng.uniform(-20, 20, 100)])
    text = check_gravity(joints, G, G + 0.01 * rng.standard_normal(G.shape)).table()
    lines = text.splitlines()[:4]
    assert len({line.index('scale') if 'scale' in line else None for line in lines[:1]}) == 1
    ends = {len(line) for line in lines[2:4]}
    assert len(ends) == 1 or all(line.rstrip().endswith('ok') for line in lines[2:4])
    starts = {line.index('+') for line in lines[2:4]}
    assert len(starts) == 1


# -- arm-dyn-id check on bags -------------------------------------------------

@pytest.mark.parametrize('urdf_of, k_e', [(lambda: HUMANOID, HUMANOID_K_E),
                                          (ur5, UR5_K_E)], ids=['humanoid', 'ur5'])
def test_clean_bag_passes(tmp_path, capsys, urdf_of, k_e):
    urdf = urdf_of()
    path, robot = bag(tmp_path, urdf, k_e)
    code, out = run_check(capsys, path, urdf, k_e, '--dynamics', 'full', '--json',
                          str(tmp_path / 'c.json'))
    assert code == 0, out
    assert 'OK:' in out
    doc = json.loads((tmp_path / 'c.json').read_text())
    assert doc['status'] == 'ok' and set(doc['joints']) == set(robot.joint_names)
    # holds and fast moves alike, through the full model: every joint is tested, the
    # base joint of the UR5 too (by the inertial torque of the moves)
    assert doc['model'] == 'full' and doc['n_samples'] > 0
    assert all(j['status'] == 'ok' and abs(j['scale'] - 1) < 0.05
               for j in doc['joints'].values()), out


def test_static_holds_compare_gravity_and_name_what_gravity_cannot_test(tmp_path, capsys):
    urdf = ur5()
    path, robot = bag(tmp_path, urdf, UR5_K_E, poses=6)
    code, out = run_check(capsys, path, urdf, UR5_K_E, '--json', str(tmp_path / 'c.json'))
    doc = json.loads((tmp_path / 'c.json').read_text())
    # not rich motion: gravity on the still or slow samples, as fit would choose
    assert doc['model'] == 'gravity' and doc['dynamics']['kind'] == 'gravity'
    assert 0 < doc['n_quasi_static'] < doc['n_read']
    assert code == 3, out
    assert out.startswith('pre-flight check') and 'shoulder_lift_joint: OK' in out
    assert 'shoulder_pan_joint: UNTESTABLE: gravity never loads it here' in out
    assert 'UNTESTABLE: 3 of 3 tested joints agree with the nominal gravity' in out


def test_flipped_sign_is_found_and_named(tmp_path, capsys):
    path, _ = bag(tmp_path, HUMANOID, HUMANOID_K_E,
                  effort_fault=lambda cur, tau: cur * [1, -1, 1, 1, 1, 1])
    code, out = run_check(capsys, path, HUMANOID, HUMANOID_K_E)
    assert code == 4, out
    assert 'sign flipped' in row(out, 'joint_2')
    assert 'sign' not in row(out, 'joint_1') and 'FAIL' in out
    assert 'torque constants of' not in out           # its constant is right: x-1, not x2


def test_torque_constant_off_by_two_is_found_and_named(tmp_path, capsys):
    urdf = ur5()
    path, _ = bag(tmp_path, urdf, UR5_K_E)
    wrong = UR5_K_E * [1, 1, 2, 1, 1, 1]          # the user's k_e of the elbow is 2x
    code, out = run_check(capsys, path, urdf, wrong, '--json', str(tmp_path / 'c.json'))
    assert code == 4, out
    assert 'scale off x2.0' in row(out, 'elbow_joint')
    assert 'ok' in row(out, 'shoulder_lift_joint')
    elbow = json.loads((tmp_path / 'c.json').read_text())['joints']['elbow_joint']
    assert abs(elbow['scale'] - 2) < 0.1
    # measured = 2 x nominal with τ = k·I: the constant must be halved, back to the true one
    assert abs(elbow['corrected_constant'] - UR5_K_E[2]) < 0.03 * UR5_K_E[2]
    assert 'elbow_joint: FAIL: scale off x2.0' in out and 'fix torque_constants: 20 -> 10' in out


def test_swapped_joints_are_found_and_named(tmp_path, capsys):
    urdf = ur5()

    def swap(cur, tau):
        cur[:, [1, 2]] = cur[:, [2, 1]]
        return cur
    path, _ = bag(tmp_path, urdf, UR5_K_E, effort_fault=swap)
    code, out = run_check(capsys, path, urdf, UR5_K_E)
    assert code == 4, out
    assert 'swapped with elbow_joint' in row(out, 'shoulder_lift_joint')
    assert 'swapped with shoulder_lift_joint' in row(out, 'elbow_joint')


def test_torque_in_effort_read_as_current_is_recognised(tmp_path, capsys):
    urdf = ur5()
    path, _ = bag(tmp_path, urdf, UR5_K_E, effort_fault=lambda cur, tau: tau)
    code, out = run_check(capsys, path, urdf, UR5_K_E)
    assert code == 4, out
    assert 'looks like torque, not current' in row(out, 'shoulder_lift_joint')
    assert '--effort torque' in out


def test_currents_read_as_torque_without_constants_are_recognised(tmp_path, capsys):
    """Currents read with --effort torque (no k_e to compare with): the effort follows the
    torque closely at 1/k_e of it. It said 'no torque ... is the effort recorded at all?'
    (real UR10e, k_e about 10)."""
    urdf = ur5()
    path, _ = bag(tmp_path, urdf, UR5_K_E)
    code = main(['check', str(path), '--urdf', str(urdf), '--quiet', '--effort', 'torque'])
    out = capsys.readouterr().out
    assert code == 4, out
    assert 'looks like current, not torque' in row(out, 'shoulder_lift_joint'), out
    assert 'k_e about 13' in row(out, 'shoulder_lift_joint'), out
    assert '--effort current' in out and 'recorded at all' not in out


def test_effort_that_is_torque_passes_with_effort_torque(tmp_path, capsys):
    urdf = ur5()
    path, _ = bag(tmp_path, urdf, UR5_K_E, effort_fault=lambda cur, tau: tau, rate=100.0,
                  storage='sqlite3', jitter=0.4)
    code = main(['check', str(path), '--urdf', str(urdf), '--quiet', '--effort', 'torque',
                 '--dynamics', 'full'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert 'ok' in row(out, 'shoulder_lift_joint') and 'ok' in row(out, 'elbow_joint')


def test_without_torque_constants_one_clear_line(tmp_path, capsys):
    path, _ = bag(tmp_path, HUMANOID, HUMANOID_K_E, poses=2)
    code = main(['check', str(path), '--urdf', str(HUMANOID), '--quiet'])
    err = capsys.readouterr().err
    assert code != 0 and '--torque-constants' in err and 'Traceback' not in err
    assert len(err.strip().splitlines()) == 1


def test_a_joint_1000x_off_where_gravity_barely_tests_it_fails(tmp_path, capsys):
    # joint_4's gravity is small and its scale's standard error in N·m is large, but
    # relative to a scale of 1000 it is tiny: the scale is known, and wrong
    path, _ = bag(tmp_path, HUMANOID, HUMANOID_K_E, poses=6)
    wrong = HUMANOID_K_E * [1, 1, 1, 1000, 1, 1]
    for extra in ((), ('--dynamics', 'full')):
        code, out = run_check(capsys, path, HUMANOID, wrong, *extra)
        assert code == 4, out
        assert 'scale off x1e+03 (currents in mA read as A?)' in row(out, 'joint_4'), out
        assert 'fix torque_constants: 200 -> 0.2 N·m/A' in out
        assert 'joint_1: OK' in out


@pytest.mark.parametrize('seed', [4, 10])
def test_still_joints_holding_friction_are_untestable_not_failed(tmp_path, capsys, seed):
    # the humanoid held at 10 poses with every joint's friction at rest up to 3 % of its
    # effort limit, constants and signs right: taken as frictionless, a joint whose
    # gravity is small against that friction reads as a wrong constant
    robot = RobotModel.from_urdf(HUMANOID)
    t, q, _, tau = held_poses(robot, seed)
    path = write_bag(tmp_path / 'bag', t, robot.joint_names, q, tau / HUMANOID_K_E)
    code, out = run_check(capsys, path, HUMANOID, HUMANOID_K_E)
    assert code == 3 and 'FAIL' not in out, out
    assert 'UNTESTABLE: held still against its friction' in out, out
    assert 'hold poses where gravity loads it well above' in out
    code, out = run_check(capsys, path, HUMANOID, HUMANOID_K_E, '--holding-friction', '0')
    assert code == 4 and 'scale off' in out, out
    code = main(['check', str(path), '--urdf', str(HUMANOID), '--quiet', '--holding-friction',
                 '3', '--torque-constants', ','.join(f'{k:g}' for k in HUMANOID_K_E)])
    err = capsys.readouterr().err
    assert code == 2 and '--holding-friction 3: give a fraction' in err, err


def test_untestable_joint_is_named_with_its_reason_and_its_own_exit_code(tmp_path, capsys):
    urdf = ur5()
    # the base joint never moves and its axis is vertical, the others move slowly:
    # nothing can test its scale (fast moves of the others would, by their reaction)
    path, _ = bag(tmp_path, urdf, UR5_K_E, poses=5, frozen=(0,), move_s=8.0)
    code, out = run_check(capsys, path, urdf, UR5_K_E, '--dynamics', 'full')
    assert code == 3, out
    assert ('shoulder_pan_joint: UNTESTABLE: its axis is vertical, gravity never loads it, '
            'and it does not move') in out
    assert 'shoulder_lift_joint: OK' in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith('UNTESTABLE: ') and 'untestable: shoulder_pan_joint' in last, out


def _negative_mass_urdf(path):
    text = HUMANOID.read_text()
    link = text.index('<link name="link_3"')
    at = text.index('<mass value="0.5"/>', link)
    path.write_text(text[:at] + '<mass value="-0.5"/>' + text[at + len('<mass value="0.5"/>'):])
    return path


def test_negative_mass_urdf_is_named_as_such_not_as_a_flipped_sign(tmp_path, capsys):
    path, _ = bag(tmp_path, HUMANOID, HUMANOID_K_E, poses=4)
    bad = _negative_mass_urdf(tmp_path / 'negative.urdf')
    code = main(['check', str(path), '--urdf', str(bad), '--quiet', '--torque-constants',
                 ','.join(f'{k:g}' for k in HUMANOID_K_E)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert 'sign' not in out + err and 'Traceback' not in err
    assert len(err.strip().splitlines()) == 1, err
    assert "implausible: link 'link_3' has a negative mass (-0.5 kg)" in err
    robot = RobotModel.from_urdf(bad)
    robot_t, t, q, current, tau = recording(HUMANOID, HUMANOID_K_E, poses=2)
    # a URDFError, and a DataError for the callers of a check (the identifier node's ~/check)
    with pytest.raises(URDFError, match='negative mass'):
        check_samples(robot, q, tau)
    with pytest.raises(DataError, match="link 'link_3' has a negative mass"):
        check_samples(robot, q, tau)


# -- rich motion: a Fourier excitation of the MuJoCo arm --------------------------------

@pytest.fixture(scope='module')
def fourier_sim(tmp_path_factory):
    """A MuJoCo Fourier recording of the humanoid arm (10 s, 200 Hz) and its config."""
    from test_cli_payload import sim_fourier_bag
    root = tmp_path_factory.mktemp('check_fourier')
    config = sim_fourier_bag(root / 'bag', seed=1, periods=1)
    return root, root / 'bag', Path(config.source)


def _config_with(root, source, joint, factor):
    """The arm config with one torque constant multiplied by ``factor``."""
    import yaml
    doc = yaml.safe_load(source.read_text())
    params = doc['/**']['ros__parameters']
    params['torque_constants'][joint] *= factor
    params['urdf'] = str(REPO / 'urdf' / params['urdf'])
    path = root / f'k{joint}x{factor:g}.yaml'
    path.write_text(yaml.safe_dump(doc))
    return path


def test_correct_fourier_recording_passes_every_joint(fourier_sim, capsys):
    root, path, config = fourier_sim
    code = main(['check', str(path), '--config', str(config), '--quiet', '--json',
                 str(root / 'ok.json')])
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads((root / 'ok.json').read_text())
    assert doc['model'] == 'full' and doc['status'] == 'ok', out
    assert all(j['status'] == 'ok' and abs(j['scale'] - 1) < 0.05
               for j in doc['joints'].values()), out


def test_doubled_constant_on_fourier_names_the_joint_and_the_true_one(fourier_sim, capsys):
    root, path, config = fourier_sim
    doubled = _config_with(root, config, 3, 2.0)       # joint_4, the elbow: 0.8 -> 1.6
    code = main(['check', str(path), '--config', str(doubled), '--quiet', '--json',
                 str(root / 'doubled.json')])
    out = capsys.readouterr().out
    assert code == 4, out
    joints = json.loads((root / 'doubled.json').read_text())['joints']
    assert [j for j, c in joints.items() if c['status'] != 'ok'] == ['joint_4'], out
    assert abs(joints['joint_4']['scale'] - 2) < 0.06
    # divided back to the true 0.8 N·m/A, not multiplied to 3.2
    assert abs(joints['joint_4']['corrected_constant'] - 0.8) < 0.03 * 0.8
    line = next(x for x in out.splitlines() if x.startswith('joint_4: FAIL: scale off x2.0'))
    assert re.search(r'fix torque_constants: 1.6 -> 0.(79|80)\d* N·m/A', line), out
    # and where to measure uncertain constants
    assert 'torque constants of joint_4 off' in out and 'arm-dyn-id calibrate' in out


def ur5_fourier(rate=500.0, seconds=10.0, seed=0, encoder_noise=2e-5):
    """A Fourier excitation of the UR5 (all joints): (robot, t, q measured, torque N·m)."""
    from arm_dyn_id.excitation.plans import fourier_series, rest_fourier_coefficients
    robot = RobotModel.from_urdf(ur5())
    rng = np.random.default_rng(seed)
    n, harmonics = robot.n_joints, 4
    ell = np.arange(1, harmonics + 1)
    a, b = rest_fourier_coefficients(rng.standard_normal((n, harmonics)) / ell,
                                     rng.standard_normal((n, harmonics)) / ell)
    omega = 2 * np.pi / seconds
    t = np.arange(int(seconds * rate)) / rate
    q, _, _ = fourier_series(t, omega, a, b, np.zeros(n))
    s = 1.0 / np.max(np.abs(q), axis=0)
    q, dq, ddq = fourier_series(t, omega, a * s[:, None], b * s[:, None], np.zeros(n))
    rigid = np.array([robot.inverse_dynamics(*x) for x in zip(q, dq, ddq)])
    tau = rigid + 0.5 * np.tanh(dq / 1e-3) + 0.3 * dq + 0.05 * rng.standard_normal(q.shape)
    return robot, 1000.0 + t, q + rng.normal(0.0, encoder_noise, q.shape), tau


def test_derivatives_that_are_noise_are_not_read_as_wrong_constants(tmp_path, capsys):
    # at a 100 Hz cut-off of 500 Hz data, q̈ is mostly encoder noise: the URDF's torque
    # turns it into noise the measured torque does not have, and every scale would
    # shrink (x0.04-0.4 measured): the check halves the cut-off until it is not so
    robot, t, q, tau = ur5_fourier()
    path = write_bag(tmp_path / 'bag', t, robot.joint_names, q, tau / UR5_K_E)
    code = main(['check', str(path), '--urdf', str(ur5()), '--quiet', '--cutoff', '100',
                 '--torque-constants', ','.join(f'{k:g}' for k in UR5_K_E)])
    out, err = capsys.readouterr()
    assert code in (0, 3) and 'FAIL' not in out, out
    assert 'warning: cut-off 100 Hz: derivatives are noise' in err, err
    assert 'trying 50 Hz' in err
    assert 'shoulder_lift_joint: OK' in out and 'elbow_joint: OK' in out


def test_a_fourier_recording_with_gaps_is_checked_piece_by_piece(fourier_sim, capsys):
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.data.bag_reader import read_bag
    root, path, config = fourier_sim
    rec = read_bag(path, config=load_arm_config(config))
    keep = (np.arange(len(rec.t)) % 500) >= 60         # 0.3 s lost every 2.5 s
    gappy = write_bag(root / 'gappy', rec.t[keep], list(rec.joints), rec.q[keep],
                      rec.current[keep])
    code = main(['check', str(gappy), '--config', str(config), '--quiet', '--json',
                 str(root / 'gappy.json')])
    out = capsys.readouterr().out
    doc = json.loads((root / 'gappy.json').read_text())
    # the gaps cannot be filtered across: each piece is filtered on its own, and the
    # whole motion is still compared with the full model (not only the few slow
    # samples at its turning points with gravity)
    assert code == 0, out
    assert doc['model'] == 'full' and doc['preparation']['pieces'] >= 3, doc['preparation']


def test_the_summary_does_not_count_a_warned_joint_as_agreeing():
    """With a joint untestable, the last line said every tested joint agreed, warnings
    dropped (a load the URDF lacks at x1.15-1.99 on a real UR10e): they are kept."""
    from arm_dyn_id.validation.check import OK, UNTESTABLE, WARN, JointCheck, _overall
    checks = [JointCheck('a', OK, 'ok'), JointCheck('b', WARN, 'scale x1.39'),
              JointCheck('c', UNTESTABLE, 'the URDF barely loads it')]
    status, line = _overall(checks, 'current', 'dynamics')
    assert status == UNTESTABLE
    assert '1 of 2 tested joints agree' in line and 'b: scale x1.39' in line, line


def test_core_a_pose_pushed_by_hand_is_a_force_not_a_torque_constant():
    """A UR5 holding one pose while a person pushes it (its joints move a tenth of a
    degree): the torque of the pushed joints departs from their gravity torque far
    beyond the friction they may hold. Before, the check read a scale there and advised
    new torque constants (a real UR10e push recording: elbow x1.21, 'fix torque_constants:
    8.457 -> 6.996'). Now those joints are untestable, naming the force; the same pose
    without the pushes, with the friction it holds, is judged as before."""
    robot = RobotModel.from_urdf(ur5())
    rng = np.random.default_rng(0)
    n, N = robot.n_joints, 1800
    pose = np.array([0.3, -1.2, 1.4, -0.8, 1.2, 0.2])
    q = pose + rng.normal(0, 2e-4, (N, n))            # the controller's give, a push's
    G = nominal_gravity(robot, q)
    holding = holding_friction(robot)
    still = G + rng.uniform(-1, 1, n) * holding + rng.normal(0, 0.05, (N, n))
    pushed = still.copy()
    t = np.arange(N) / 100.0
    for start in (2.0, 7.0, 12.0):                     # three pushes of ~2 s
        bump = np.exp(-0.5 * ((t - start - 1.0) / 0.6) ** 2)
        pushed[:, 1] += 6.0 * holding[1] * bump      # peaks of 6x and 5x its friction
        pushed[:, 2] -= 5.0 * holding[2] * bump
    k = UR5_K_E
    result = check_gravity(robot.joint_names, G, pushed, torque_constants=k,
                           holding=holding, spans=np.ptp(q, axis=0))
    by = {c.joint: c for c in result.joints}
    for joint in ('shoulder_lift_joint', 'elbow_joint'):
        assert by[joint].status == UNTESTABLE, by[joint].line()
        assert 'carries a force from outside the model' in by[joint].verdict
        assert 'torque_constants' not in (by[joint].fix or '')
    calm = check_gravity(robot.joint_names, G, still, torque_constants=k, holding=holding,
                         spans=np.ptp(q, axis=0))
    assert not any('force from outside' in c.verdict for c in calm.joints), calm.table()
    # the recording's path (arm-dyn-id check, the identifier's pre-flight) knows the spans
    via = {c.joint: c for c in check_samples(robot, q, pushed, torque_constants=k).joints}
    assert via['elbow_joint'].status == UNTESTABLE and \
        'force from outside' in via['elbow_joint'].verdict, via['elbow_joint'].line()
    # without the spans (a caller that does not know the motion) nothing is said of it
    blind = check_gravity(robot.joint_names, G, pushed, torque_constants=k, holding=holding)
    assert not any('force from outside' in c.verdict for c in blind.joints)


@pytest.mark.parametrize('arm_name, joint, degrees', [('ur5', 1, 90), ('panda', 1, 180),
                                                      ('ur5', None, None)])
def test_a_joint_zero_off_the_urdf_or_degrees_are_said_before_any_joint(
        tmp_path, capsys, arm_name, joint, degrees):
    """A Fourier record with one joint's zero a quarter or half turn off the URDF's: check
    blamed the joints it moves ("sign flipped", "scale off") and a user following it would
    flip a sign. It now says the offset first (exit 4); in degrees it says so before
    comparing anything; the same record with the URDF's angles says neither."""
    from arm_bags import Arm, example_robot, realistic_fourier
    urdf = str(example_robot({'ur5': 'ur_description/urdf/ur5_robot.urdf',
                              'panda': 'panda_description/urdf/panda.urdf'}[arm_name]))
    arm = Arm(urdf).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
    t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(0))
    names = list(arm.joints) + list(arm.extra)
    pad = np.full((len(t), len(arm.extra)), 0.01)
    cases = {'right': q, 'degrees': np.degrees(q)}
    if joint is not None:
        moved = q.copy()
        moved[:, joint] += np.radians(degrees)
        cases = {'offset': moved}
    for name, angles in cases.items():
        write_bag(tmp_path / name, 1.7e9 + t, names, np.hstack([angles, pad]),
                  np.hstack([tau, 0 * pad]))
        code = main(['check', str(tmp_path / name), '--urdf', urdf, '--effort', 'torque'])
        out = capsys.readouterr().out
        if name == 'right':
            assert code != 4 and 'the angles' not in out, out
        elif name == 'degrees':
            assert code == 4 and 'FAIL: the angles look like degrees' in out, out
        else:
            assert code == 4, out
            assert (f"FAIL: the angles, before any joint: {robot.joint_names[joint]}'s angle "
                    f"reads {degrees:+d}° off the URDF's zero") in out, out
