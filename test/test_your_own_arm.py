"""Bring your own arm: real URDFs, bags as ``ros2 bag record /joint_states`` writes them.

For each arm (UR5, Panda and Kinova from example-robot-data, and our humanoid arm and
Stäubli TX-60) a recording is synthesised by test/arm_bags.py (low-speed motion,
gravity + friction + current noise + a few gross errors) and written with nothing but
``/joint_states``; ``arm-dyn-id fit`` runs on it with ``--urdf`` and
``--torque-constants`` alone (no config file). The oracle: the identified URDF
(DIR/identified.urdf, read by pinocchio) reproduces the true gravity
(``computeGeneralizedGravity`` of the original URDF) on 200 held-out random poses
within 1 % of each joint's largest gravity torque.

The realistic conditions are spread over the matrix, one arm each, to keep the time
down:

=========  ==================================================================
arm        conditions
=========  ==================================================================
UR5        names prefixed ``ur_``, 100 Hz with uneven steps (8-16 ms), MCAP v9
Panda      ``--effort torque``, URDF finger joints as extra joints, shuffled
           order, 1 kHz
Kinova     continuous joints, sqlite3 + metadata v8, all-zero header stamps,
           two gripper finger joints not in the URDF
humanoid   no reciprocating sweeps (static holds and slow moves only),
           shuffled order, extra gripper joint
TX-60      joint names the driver chose (``--joint-map``), a second arm in the
           same message, 200 Hz, sqlite3 v9
=========  ==================================================================

Plus several bags in one ``fit`` (each sweeps half of the joints), and ``arm-dyn-id
check`` on the TX-60: a clean bag passes, a flipped sign, a k_e off by 2x and two
swapped joints are found.
"""

import json

import numpy as np
import pytest

import arm_bags
from arm_bags import Arm, example_robot, write_arm_bag
from arm_dyn_id.cli import main

REPO = arm_bags.Path(__file__).resolve().parent.parent
UR5 = 'ur_description/urdf/ur5_robot.urdf'
PANDA = 'panda_description/urdf/panda.urdf'
KINOVA = 'kinova_description/robots/kinova.urdf'
HUMANOID = REPO / 'urdf' / 'humanoid_arm.urdf'
TX60 = REPO / 'urdf' / 'staubli_tx60.urdf'
TX60_NAMES = {f'joint_{i}': f'tx60_axis_{i}' for i in range(1, 7)}

#: held-out gravity error allowed, fraction of each joint's largest gravity torque
TOLERANCE = 0.01

#: arm -> (URDF, options of write_arm_bag, extra fit arguments)
MATRIX = {
    'ur5': (UR5, dict(prefix='ur_', rate=100.0, uneven=True, storage='mcap', version=9), []),
    'panda': (PANDA, dict(effort='torque', shuffle=True, rate=1000.0, poses_per_joint=1),
              ['--effort', 'torque']),
    'kinova': (KINOVA, dict(storage='sqlite3', version=8, zero_stamps=True,
                            gripper=('j2s6s200_joint_finger_1', 'j2s6s200_joint_finger_2')),
               []),
    'humanoid': (HUMANOID, dict(sweeps=False, holds=30, slow_moves=True, shuffle=True,
                                gripper=('gripper_joint',)), []),
    'tx60': (TX60, dict(rename=TX60_NAMES, second_arm='left_', rate=200.0, storage='sqlite3',
                        version=9),
             ['--joint-map', ','.join(f'{b}:{u}' for u, b in TX60_NAMES.items())]),
}


def urdf_path(urdf):
    """The URDF of a matrix entry; skips when example-robot-data is not installed."""
    if not isinstance(urdf, str):
        return urdf
    path = example_robot(urdf)
    if path is None:
        pytest.skip(f'example-robot-data is not installed ({arm_bags.ROBOTS / urdf} is '
                    'absent): pip install example-robot-data==6.0.0')
    return path


def run(capsys, *argv):
    """``arm-dyn-id *argv`` in this process; returns (exit code, stdout + stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:       # argparse refused the command line
        code = exc.code
    out = capsys.readouterr()
    return code, out.out + out.err


def fit(capsys, bags, urdf, out, k_text=None, extra=()):
    """``arm-dyn-id fit`` from ``--urdf`` (+ ``--torque-constants``) alone; asserts exit 0."""
    argv = ['fit', *bags, '--urdf', urdf, '--out', out, '--no-report', *extra]
    if k_text is not None:
        argv += ['--torque-constants', k_text]
    code, text = run(capsys, *argv)
    assert code == 0, f'arm-dyn-id fit exited {code}:\n{text[-3000:]}'
    return text


def held_out_errors(arm, identified, extra_positions, seed=1234, count=200):
    """Worst gravity error of the identified URDF on held-out poses, per joint.

    Returns
    -------
    ndarray, (n,)
        max |G_identified - G_true| over ``count`` random poses within 60 % of the
        ranges, divided by max |G_true| of that joint (at least 1 % of the arm's
        largest, so a joint gravity never loads is not judged on rounding).
    """
    ident = Arm(identified, joints=arm.joints)
    Q = arm.random_poses(np.random.default_rng(seed), count)
    G = arm.gravity(Q, extra_positions)
    Gi = ident.gravity(Q, extra_positions)
    scale = np.maximum(np.abs(G).max(axis=0), 0.01 * np.abs(G).max())
    return np.abs(Gi - G).max(axis=0) / scale


def assert_reproduces_gravity(arm, out, extra_positions):
    identified = out / 'identified.urdf'
    assert identified.exists(), f'fit wrote no {identified}'
    err = held_out_errors(arm, identified, extra_positions)
    worst = int(np.argmax(err))
    assert err.max() < TOLERANCE, (
        f'{arm.urdf.name}: held-out gravity error {100 * err[worst]:.2f} % of max torque at '
        f'{arm.joints[worst]} (all: {np.round(100 * err, 3).tolist()} %)')


# ---------------------------------------------------------------------------
# the bags themselves

def test_bag_holds_only_what_ros2_bag_record_writes(tmp_path):
    """One topic, JointState, the names/order/stamps/effort asked for (read by rosbags)."""
    arm = Arm(HUMANOID)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=3, prefix='ur_', shuffle=True,
                        gripper=('finger',), zero_stamps=True, sweeps=False, holds=3,
                        storage='sqlite3', version=8)
    topics, messages = arm_bags.read_back(bag.path)
    assert topics == {'/joint_states': ('sensor_msgs/msg/JointState', len(bag.t))}
    assert sorted(bag.names) == sorted(['ur_' + j for j in arm.joints] + ['ur_finger'])
    assert list(bag.names) != ['ur_' + j for j in arm.joints] + ['ur_finger']
    log = np.array([ts for ts, _ in messages])
    assert np.all(np.diff(log) > 0)
    steps = np.diff(log) / 1e6
    assert 8 < steps.min() and steps.max() < 12        # 100 Hz, 0.2-2 ms receipt jitter
    col = [bag.names.index('ur_' + j) for j in arm.joints]
    for i in (0, len(messages) // 2, len(messages) - 1):
        msg = messages[i][1]
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 0)
        assert list(msg.name) == list(bag.names)
        np.testing.assert_allclose(msg.position[col], bag.q[i])
        np.testing.assert_allclose(msg.effort[col] * bag.torque_constants, bag.tau[i])
        assert msg.effort[bag.names.index('ur_finger')] == 0.0
    assert (tmp_path / 'bag' / 'metadata.yaml').read_text().count('version: 8') == 1


def test_uneven_stamps_are_8_to_16_ms(tmp_path):
    arm = Arm(HUMANOID)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=4, uneven=True, sweeps=False, holds=2)
    _, messages = arm_bags.read_back(bag.path)
    stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
                       for _, m in messages])
    steps = np.diff(stamps)
    assert 0.0079 < steps.min() < 0.0085 and 0.0155 < steps.max() < 0.0161


# ---------------------------------------------------------------------------
# the matrix

@pytest.mark.parametrize('name', list(MATRIX))
def test_fit_from_urdf_alone_reproduces_gravity(name, tmp_path, capsys):
    urdf, options, extra = MATRIX[name]
    urdf = urdf_path(urdf)
    arm = Arm(urdf)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=11, **options)
    k_text = None if options.get('effort') == 'torque' else bag.k_text
    fit(capsys, [bag.path], urdf, tmp_path / 'out', k_text, extra)
    assert_reproduces_gravity(arm, tmp_path / 'out', bag.extra_positions)


def test_fit_several_bags_in_one_call(tmp_path, capsys):
    """Two recordings (MCAP v9 and sqlite3 v8) that each sweep half of the joints."""
    urdf = urdf_path(UR5)
    arm = Arm(urdf)
    k_e = None
    bags = []
    for i, (joints, storage, version) in enumerate(
            [(arm.joints[:3], 'mcap', 9), (arm.joints[3:], 'sqlite3', 8)]):
        bag = write_arm_bag(tmp_path / f'bag{i}', arm, seed=20 + i, k_e=k_e, sweep_joints=joints,
                            storage=storage, version=version, t_offset=600.0 * i, prefix='ur_')
        k_e = bag.torque_constants
        bags.append(bag)
    fit(capsys, [b.path for b in bags], urdf, tmp_path / 'out', bags[0].k_text)
    assert_reproduces_gravity(arm, tmp_path / 'out', bags[0].extra_positions)
    summary = json.loads((tmp_path / 'out' / 'validation.json').read_text())['fit_summary']
    assert summary['n_samples'] == sum(len(b.t) for b in bags)


# ---------------------------------------------------------------------------
# the pre-flight check

#: (arm, fault) -> (URDF, options of write_arm_bag (k_factor: the user's k_e is off),
#: the faulty joint, the joint it looks swapped with)
CHECK_CASES = {
    'tx60-clean': (TX60, {}, None, None),
    'tx60-flipped_sign': (TX60, dict(flip=('joint_2',)), 'joint_2', None),
    'tx60-swapped': (TX60, dict(swap=('joint_2', 'joint_3')), 'joint_2', 'joint_3'),
    'humanoid-clean': (HUMANOID, dict(shuffle=True), None, None),
    'humanoid-k_e_off_2x': (HUMANOID, dict(k_factor={'joint_4': 2.0}), 'joint_4', None),
    'humanoid-flipped_sign': (HUMANOID, dict(flip=('joint_3',), prefix='left_'), 'joint_3',
                              None),
    'humanoid-swapped': (HUMANOID, dict(swap=('joint_3', 'joint_4')), 'joint_3', 'joint_4'),
}

#: the joints that gravity never loads on a clean bag's slow sweeps
UNTESTABLE_WHEN_CLEAN = {'tx60-clean': {'joint_1', 'joint_6'}}


@pytest.mark.parametrize('case', list(CHECK_CASES))
def test_check_finds_the_fault(case, tmp_path, capsys):
    urdf, options, joint, other = CHECK_CASES[case]
    options = dict(options)
    k_factor = options.pop('k_factor', {})
    arm = Arm(urdf)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=30, rate=100.0, uneven=True, **options)
    # the torque constants the user passes (a wrong one for k_e_off_2x)
    k_e = [float(k) * k_factor.get(j, 1.0) for j, k in zip(arm.joints, bag.torque_constants)]
    code, text = run(capsys, 'check', bag.path, '--urdf', urdf, '--torque-constants',
                     ','.join(map(repr, k_e)), '--json', tmp_path / 'check.json')
    if joint is None:
        # a clean bag: no joint fails; a joint that gravity never loads on these slow
        # sweeps (the TX60's vertical joint_1, its flange joint_6) is untestable, which is
        # not OK (exit 3), and named
        verdicts = json.loads((tmp_path / 'check.json').read_text())['joints']
        untestable = {j for j, v in verdicts.items() if v['status'] == 'untestable'}
        assert untestable == UNTESTABLE_WHEN_CLEAN.get(case, set()), (untestable, text[-3000:])
        assert code == (3 if untestable else 0), f'clean bag, exit {code}:\n{text[-3000:]}'
        assert all(v['status'] in ('ok', 'warn', 'untestable') for v in verdicts.values())
        for j in untestable:
            assert f'{j}: UNTESTABLE' in text
        return
    assert code not in (0, 2), f'check missed {case} (exit {code}):\n{text[-3000:]}'
    assert joint in text
    verdicts = json.loads((tmp_path / 'check.json').read_text())['joints']
    assert verdicts[joint]['status'] not in ('ok', 'untestable'), verdicts[joint]
    if other is not None:
        assert verdicts[joint]['swapped_with'] == other, verdicts[joint]
