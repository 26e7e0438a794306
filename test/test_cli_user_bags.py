"""A user's own bags through ``arm-dyn-id fit`` / ``validate``: plain, odd, or wrong.

Bags are real rosbag2 bags written with rosbags the way ``ros2 bag record
/joint_states`` writes them (one topic, no markers, no stored config) from the
seed-000 style excitation of the humanoid arm (test_cli_fit.reciprocating_data).
Every bad input must end in one error line with exit code 2 and no traceback
(a traceback only with --debug); a fit the data cannot support exits 3 unless
--force, which writes the model marked rejected.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from arm_dyn_id.data.bag_format import typestore
from arm_dyn_id.data.bag_writer import encode_joint_states, write_bag
from test_cli_fit import JOINTS, K_E, URDF, reciprocating_data

KE = ','.join(map(str, K_E))


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'arm_dyn_id', *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def one_error_line(res, code=2):
    """Exit ``code``, exactly one non-progress line on stderr, no traceback."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert 'Traceback' not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith('[')]
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.fixture(scope='module')
def data():
    return reciprocating_data(seed=3, rate=100.0, poses=2)


def plain_bag(path, data, names=None, q=None, effort=None, storage='mcap', version=8,
              stamps=None, log_times=None, topics=('/joint_states',)):
    """A bag as ``ros2 bag record`` writes it; header stamps and log times may differ."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    names = list(names or JOINTS)
    q = data['q'] if q is None else q
    effort = data['current'] if effort is None else effort
    stamps = data['t'] if stamps is None else stamps
    log_times = stamps if log_times is None else log_times
    rows = encode_joint_states(stamps, names, q, None, effort)
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Writer(Path(path), version=version, storage_plugin=plugin) as w:
        conns = [w.add_connection(t, 'sensor_msgs/msg/JointState', typestore=typestore())
                 for t in topics]
        for i in range(len(stamps)):
            for c in conns:
                w.write(c, int(round(log_times[i] * 1e9)), rows[i].tobytes())
    return Path(path)


def fit(bag, out, *extra):
    return run_cli('fit', *([bag] if isinstance(bag, (str, Path)) else bag), '--urdf', URDF,
                   '--out', out, '--no-report', *extra)


def held_out_gravity_ok(out, data, atol=0.05):
    from arm_dyn_id.model.gravity import GravityModel
    from arm_dyn_id.model.robot import RobotModel
    model = GravityModel.load(out / 'model.yaml')
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    q = data['q_true'][::37]
    np.testing.assert_allclose(model.gravity_torques(q), robot.gravity_torques(q), atol=atol)


# -- plain bags that must just work --------------------------------------------------------

@pytest.mark.slow   # two CLI runs
@pytest.mark.parametrize('storage,version', [('mcap', 8), ('sqlite3', 9)])
def test_plain_bag_urdf_and_torque_constants_only(tmp_path, data, storage, version):
    bag = plain_bag(tmp_path / 'bag', data, storage=storage, version=version)
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    held_out_gravity_ok(tmp_path / 'fit', data)
    assert 'nothing dropped' in res.stderr
    res = run_cli('validate', tmp_path / 'fit' / 'model.yaml', bag, '--torque-constants', KE)
    assert res.returncode == 0, res.stderr


def test_prefixed_names_extra_joints_shuffled(tmp_path, data):
    order = [3, 0, 5, 1, 4, 2]
    names = [f'ur_{JOINTS[i]}' for i in order] + ['gripper_left', 'gripper_right']
    pad = np.zeros((len(data['t']), 2))
    bag = plain_bag(tmp_path / 'bag', data, names=names,
                    q=np.hstack([data['q'][:, order], pad]),
                    effort=np.hstack([data['current'][:, order], pad + 0.3]))
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    assert 'joint names matched: ' in res.stderr and 'ur_joint_4 -> joint_4' in res.stderr
    held_out_gravity_ok(tmp_path / 'fit', data)


@pytest.mark.slow   # two CLI runs
def test_joint_map_and_missing_joint(tmp_path, data):
    names = [f'a{i}' for i in range(6)]
    bag = plain_bag(tmp_path / 'bag', data, names=names)
    mapping = ','.join(f'a{i}:{j}' for i, j in enumerate(JOINTS))
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE, '--joint-map', mapping)
    assert res.returncode == 0, res.stderr
    line = one_error_line(fit(bag, tmp_path / 'fit2', '--torque-constants', KE,
                              '--joint-map', mapping.rsplit(',', 1)[0]))
    assert "'joint_6'" in line and '--joint-map' in line
    # a map of the arm's own name to one it does not have is named (was: 'two publishers?')
    same = plain_bag(tmp_path / 'same', data, names=list(JOINTS))
    line = one_error_line(fit(same, tmp_path / 'fit3', '--torque-constants', KE,
                              '--joint-map', 'joint_1:joint_7'))
    assert '--joint-map joint_1:joint_7' in line and 'which is not' in line, line


@pytest.mark.slow   # two CLI runs
def test_effort_is_torque(tmp_path, data):
    bag = plain_bag(tmp_path / 'bag', data, effort=data['tau'])
    res = fit(bag, tmp_path / 'fit', '--effort', 'torque')
    assert res.returncode == 0, res.stderr
    held_out_gravity_ok(tmp_path / 'fit', data)
    line = one_error_line(fit(bag, tmp_path / 'f2'))
    assert '--torque-constants' in line and '--effort torque' in line


def test_angles_a_driver_reports_within_one_turn_are_unwrapped(tmp_path, data):
    """A driver that reports each angle in [0, 2π) (or (-π, π] for continuous joints):
    every joint of these sweeps passes 0, so its angle jumps by 2π there. The jumps
    were read as motion (thousands of rad/s) and the fit warned of friction stronger
    one way (joint_1's gravity "moves 12 %"); the reader now takes them out, says so,
    and the gravity fit is the continuous record's, without a warning."""
    wrapped = np.mod(data['q'], 2 * np.pi)
    bag = plain_bag(tmp_path / 'bag', data, q=wrapped, effort=data['tau'])
    res = fit(bag, tmp_path / 'fit', '--effort', 'torque')
    assert res.returncode == 0, res.stderr
    assert 'angles jump by a whole turn' in res.stderr and 'unwrapped' in res.stderr
    assert 'warning' not in res.stderr, res.stderr
    held_out_gravity_ok(tmp_path / 'fit', data)


def test_angles_in_degrees_are_named(tmp_path, data):
    """A driver that publishes its angles in degrees: every joint leaves its URDF limits,
    and within them once divided by 57.3. Refused naming degrees (before: a gravity model
    of the sweeps written, or "does not follow the URDF's")."""
    res = fit(plain_bag(tmp_path / 'bag', data, q=np.degrees(data['q']), effort=data['tau']),
              tmp_path / 'fit', '--effort', 'torque')
    line = one_error_line(res, code=3)
    assert 'the angles look like degrees' in line and 'radians' in line, line


def test_degrees_are_not_read_into_a_continuous_joint_that_turns():
    """A continuous joint (no URDF limits) may turn many times once unwrapped: only
    bounded joints are judged, and every one must fit its limits in radians."""
    from arm_bags import example_robot
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.validation.angle_convention import degrees_message
    robot = RobotModel.from_urdf(str(example_robot('kinova_description/robots/kinova.urdf')))
    assert robot.bounded.tolist() == [False, True, True, False, True, False]
    lo, hi = robot.position_limits
    q = np.tile((lo + hi) / 2, (50, 1))
    q[:, 0] = np.linspace(0, 20.0, 50)                  # three turns and more
    assert degrees_message(robot, q) is None
    assert 'j2s6s200_joint_2' in degrees_message(robot, np.degrees(q))
    q[:, 1] = hi[1] + 1.0                                # out of limits, not degrees
    assert degrees_message(robot, q) is None


@pytest.mark.parametrize('joint, degrees', [(1, 90), (3, -90)])
def test_sweeps_of_a_joint_whose_zero_is_a_quarter_turn_off_the_urdf_are_refused(
        tmp_path, data, joint, degrees):
    """Sweeps recorded with one joint's zero a quarter turn off the URDF's (a driver's
    calibration): the gravity fit was written with exit 0 and a warning blaming friction
    stronger one way. It is refused naming the joint and the offset; the same sweeps
    with the angles as the URDF has them are written without a word."""
    q = data['q'].copy()
    q[:, joint] += np.radians(degrees)
    res = fit(plain_bag(tmp_path / 'bag', data, q=q, effort=data['tau']), tmp_path / 'fit',
              '--effort', 'torque')
    line = one_error_line(res, code=3)
    assert f"{JOINTS[joint]}'s angle reads {degrees:+d}° off the URDF's zero" in line, line
    right = fit(plain_bag(tmp_path / 'right', data, effort=data['tau']), tmp_path / 'f2',
                '--effort', 'torque')
    assert right.returncode == 0 and 'warning' not in right.stderr, right.stderr


@pytest.mark.slow   # a full-dynamics fit of 30 s at 200 Hz
def test_a_kinova_whose_continuous_joints_are_reported_within_one_turn_fits(tmp_path):
    """A Kinova's continuous joints (1, 4 and 6) reported in [0, 2π) by its driver jump
    by 2π each time they pass 0. The full fit was refused: "joint_1's torque does not
    follow the URDF's ... is its column another joint's, or its sign flipped?". The
    angles are unwrapped and the model is the URDF's arm."""
    from arm_bags import Arm, example_robot, realistic_fourier
    from arm_dyn_id.model import load_model
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.validation.check import holding_friction
    urdf = example_robot('kinova_description/robots/kinova.urdf')
    if urdf is None:
        pytest.skip('example-robot-data is not installed')
    arm = Arm(urdf)
    robot = RobotModel.from_urdf(str(urdf), joints=list(arm.joints))
    t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(0))
    wrapped = np.mod(q, 2 * np.pi)
    assert all((np.abs(np.diff(wrapped[:, j])) > np.pi).any() for j in (0, 3, 5))
    write_bag(tmp_path / 'bag', 1.7e9 + t, list(arm.joints), wrapped, tau)
    res = run_cli('fit', tmp_path / 'bag', '--urdf', urdf, '--effort', 'torque', '--out',
                  tmp_path / 'fit', '--no-report')
    assert res.returncode == 0, res.stderr
    assert 'j2s6s200_joint_1 (' in res.stderr and 'unwrapped' in res.stderr
    model = load_model(tmp_path / 'fit' / 'model.yaml', urdf=str(urdf))
    poses = q[::97]
    truth = robot.gravity_torques(poses)
    err = np.abs(model.gravity_torques(poses) - truth).max(axis=0)
    assert (err <= 0.02 * np.abs(truth).max(axis=0) + 0.05).all(), err


@pytest.mark.slow   # two CLI runs
def test_zero_stamps_use_log_time_and_bad_stamps_are_counted(tmp_path, data):
    bag = plain_bag(tmp_path / 'zero', data, stamps=np.zeros_like(data['t']),
                    log_times=data['t'])
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    assert 'stamps of /joint_states are zero: using the bag\'s log times' in res.stderr
    held_out_gravity_ok(tmp_path / 'fit', data)
    # a few repeated and backward stamps: dropped and said
    t = data['t'].copy()
    t[100] = t[99]
    t[200] = t[198]
    bag = plain_bag(tmp_path / 'dup', data, stamps=t, log_times=data['t'])
    res = fit(bag, tmp_path / 'fit2', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    assert f'dropped 2 of {len(t)} messages (1 repeated stamps, 1 backward stamps)' \
        in res.stderr


def test_two_joint_state_topics_and_two_bags(tmp_path, data):
    half = len(data['t']) // 2
    cut = next(m['t'] for m in data['markers'] if m['t'] > data['t'][half]
               and m['phase'] == 'approach')
    a = data['t'] < cut
    first = {k: data[k][a] for k in ('t', 'q', 'current')}
    second = {k: data[k][~a] for k in ('t', 'q', 'current')}
    second['t'] = second['t'] - second['t'][0] + 10.0   # recorded "earlier": no interleaving
    b1 = plain_bag(tmp_path / 'b1', first, topics=('/joint_states', '/robot/joint_states'))
    b2 = plain_bag(tmp_path / 'b2', second)
    res = fit([b1, b2], tmp_path / 'fit', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    assert 'reading /joint_states' in res.stderr and '2 bags read' in res.stderr
    val = json.loads((tmp_path / 'fit' / 'validation.json').read_text())
    assert val['fit_summary']['n_samples'] == len(data['t'])
    assert len(val['fit_summary']['quality_per_bag']) == 2
    held_out_gravity_ok(tmp_path / 'fit', data)


def test_gravity_vector_for_a_wall_mounted_arm(tmp_path):
    from arm_dyn_id.model.gravity import GravityModel
    from arm_dyn_id.model.robot import RobotModel
    g = np.array([-9.81 * np.sin(0.6), 0.0, -9.81 * np.cos(0.6)])
    robot = RobotModel.from_urdf(URDF, joints=JOINTS, gravity=9.81, gravity_direction=g)
    tilted = reciprocating_data(seed=4, rate=100.0, poses=2, robot=robot)
    bag = plain_bag(tmp_path / 'bag', tilted)
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE,
              '--gravity-vector=' + ','.join(map(str, g)))
    assert res.returncode == 0, res.stderr
    model = GravityModel.load(tmp_path / 'fit' / 'model.yaml')
    np.testing.assert_allclose(model.robot.gravity_vector, g, atol=1e-9)
    q = tilted['q_true'][::37]
    np.testing.assert_allclose(model.gravity_torques(q), robot.gravity_torques(q), atol=0.05)


def test_table_aligned_for_long_joint_names():
    from arm_dyn_id.validation.metrics import joint_metrics, metrics_table
    names = ['shoulder_pan_joint', 'shoulder_lift_joint', 'j3']
    y = np.random.default_rng(0).normal(size=(50, 3))
    header, *rows, mean = metrics_table(joint_metrics(y, y + 0.01, names)).splitlines()
    # right-aligned fixed-width columns: every row as long as the header
    assert {len(line) for line in rows} == {len(header)}, (header, rows)
    assert all(line.startswith(name + ' ') for line, name in zip(rows, names))


# -- a fit the data cannot support -----------------------------------------------------------

@pytest.mark.slow   # two CLI runs
def test_milliamps_read_as_amps_refused_unless_forced(tmp_path, data):
    bag = plain_bag(tmp_path / 'bag', data, effort=data['current'] * 1000.0)
    line = one_error_line(fit(bag, tmp_path / 'fit', '--torque-constants', KE), code=3)
    assert 'refused' in line and 'mA' in line and 'URDF' in line
    assert not (tmp_path / 'fit' / 'model.yaml').exists()
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE, '--force')
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load((tmp_path / 'fit' / 'model.yaml').read_text())
    assert 'URDF' in doc['rejected']


def test_random_effort_refused(tmp_path, data):
    noise = np.random.default_rng(5).normal(0, 1.0, data['current'].shape)
    bag = plain_bag(tmp_path / 'bag', data, effort=noise)
    line = one_error_line(fit(bag, tmp_path / 'fit', '--torque-constants', KE), code=3)
    assert 'refused' in line


# -- bad input: one line, exit 2, no traceback -------------------------------------------------

def _empty_bag(tmp_path, data):
    from rosbags.rosbag2 import StoragePlugin, Writer
    with Writer(tmp_path / 'bag', version=8, storage_plugin=StoragePlugin.MCAP) as w:
        w.add_connection('/joint_states', 'sensor_msgs/msg/JointState', typestore=typestore())
    return tmp_path / 'bag', ['holds no messages']


def _no_joint_state(tmp_path, data):
    t = data['t'][:50]
    bag = write_bag(tmp_path / 'bag', t, JOINTS, data['q'][:50], data['current'][:50],
                    topic='/other', strings={'/chatter': [(t[1], 'hi')]})
    from rosbags.rosbag2 import StoragePlugin, Writer
    with Writer(tmp_path / 'strings', version=8, storage_plugin=StoragePlugin.MCAP) as w:
        c = w.add_connection('/chatter', 'std_msgs/msg/String', typestore=typestore())
        from arm_dyn_id.data.bag_format import serialize_string
        w.write(c, 1, serialize_string('hello'))
    del bag
    return tmp_path / 'strings', ['no sensor_msgs/JointState topic', '/chatter']


def _wrong_names(tmp_path, data):
    return plain_bag(tmp_path / 'bag', data, names=[f'x{i}' for i in range(6)]), \
        ["'joint_1'", 'x0', '--joint-map']


def _nan_effort(tmp_path, data):
    return plain_bag(tmp_path / 'bag', data, effort=np.full_like(data['current'], np.nan)), \
        ['NaN', 'joint_1']


BAGS = {'empty_bag': _empty_bag, 'no_joint_state': _no_joint_state,
        'wrong_joint_names': _wrong_names, 'all_nan_effort': _nan_effort}


@pytest.mark.parametrize('case', list(BAGS))
def test_bad_bags(tmp_path, data, case):
    bag, needles = BAGS[case](tmp_path, data)
    res = fit(bag, tmp_path / 'fit', '--torque-constants', KE)
    line = one_error_line(res)
    assert line.startswith('arm-dyn-id fit: error: ')
    for needle in needles:
        assert needle in line, line
    res = run_cli('--debug', 'fit', bag, '--urdf', URDF, '--torque-constants', KE,
                  '--out', tmp_path / 'fit')
    assert res.returncode == 2 and 'Traceback' in res.stderr


@pytest.fixture(scope='module')
def good(tmp_path_factory, data):
    """A plain bag and a model fitted on it."""
    tmp = tmp_path_factory.mktemp('good')
    bag = plain_bag(tmp / 'bag', data)
    res = fit(bag, tmp / 'fit', '--torque-constants', KE)
    assert res.returncode == 0, res.stderr
    return bag, tmp / 'fit' / 'model.yaml'


OPTIONS = {
    'gravity_zero': (['--gravity', '0'], ['--gravity 0', '> 0'.replace('> 0', 'positive')]),
    'gravity_negative': (['--gravity', '-9.81'], ['--gravity -9.81']),
    'methods_unknown': (['--methods', 'wls,magic'], ["'magic'", 'wls']),
    'methods_empty': (['--methods', ''], ['--methods', 'empty']),
    'gravity_vector_short': (['--gravity-vector', '0,-9.81'], ['--gravity-vector']),
    'constants_count': (['--torque-constants', '1,2'], ['--torque-constants', '2 values']),
}


@pytest.mark.parametrize('case', list(OPTIONS))
def test_bad_options(tmp_path, good, case):
    bag, _ = good
    extra, needles = OPTIONS[case]
    args = extra if case == 'constants_count' else ['--torque-constants', KE, *extra]
    line = one_error_line(fit(bag, tmp_path / 'fit', *args))
    for needle in needles:
        assert needle in line, line
    assert not (tmp_path / 'fit').exists()


@pytest.mark.parametrize('value', ['0', '-1'])
def test_validate_refuses_bad_gravity(good, value):
    bag, model = good
    line = one_error_line(run_cli('validate', model, bag, '--torque-constants', KE,
                                  '--gravity', value))
    assert f'--gravity {value}' in line


def test_out_inside_the_bag_refused_before_reading(tmp_path, good):
    bag, _ = good
    before = sorted(p.name for p in bag.iterdir())
    line = one_error_line(fit(bag, bag / 'fit', '--torque-constants', KE))
    assert 'inside the input bag' in line
    assert sorted(p.name for p in bag.iterdir()) == before
    (tmp_path / 'file').write_text('x')
    assert 'is a file' in one_error_line(fit(bag, tmp_path / 'file', '--torque-constants', KE))


def _config(tmp_path, **edit):
    doc = {'/**': {'ros__parameters': {'urdf': str(URDF), 'joints': JOINTS,
                                       'torque_constants': K_E.tolist()}}}
    doc['/**']['ros__parameters'].update(edit)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump(doc))
    return path


CONFIGS = {
    'string_for_number': (dict(gravity='nine'), ['parameter gravity', "'nine'"]),
    'string_in_list': (dict(torque_constants=['a'] * 6), ['torque_constants[0]', "'a'"]),
    'scalar_for_list': (dict(torque_constants=0.5), ['torque_constants', 'list']),
    'unknown_key': (dict(torque_constant=[1.0] * 6), ['torque_constant', 'torque_constants']),
    'no_wrapper': (None, ['/**: ros__parameters:', 'at the top level']),
}


@pytest.mark.parametrize('case', list(CONFIGS))
def test_bad_config_values(tmp_path, good, case):
    bag, _ = good
    edit, needles = CONFIGS[case]
    if edit is None:
        path = tmp_path / 'arm.yaml'
        path.write_text(yaml.safe_dump({'urdf': str(URDF), 'joints': JOINTS}))
    else:
        path = _config(tmp_path, **edit)
    line = one_error_line(run_cli('fit', bag, '--config', path, '--out', tmp_path / 'o',
                                  '--no-report'))
    for needle in needles:
        assert needle in line, line


def test_config_without_limits_fits(tmp_path, good, data):
    bag, _ = good
    res = run_cli('fit', bag, '--config', _config(tmp_path), '--out', tmp_path / 'o',
                  '--no-report')
    assert res.returncode == 0, res.stderr


def test_recorder_bag_of_another_urdf_refused(tmp_path, data):
    text = yaml.safe_dump({'robot_name': 'other_arm', 'joints': JOINTS,
                           'torque_constants': K_E.tolist(), 'urdf': 'other.urdf',
                           'urdf_sha256': '0' * 64})
    bag = write_bag(tmp_path / 'bag', data['t'], JOINTS, data['q'], data['current'],
                    config_text=text)
    line = one_error_line(fit(bag, tmp_path / 'fit'))
    assert 'another URDF' in line and 'other_arm' in line and '--force' in line
    assert not (tmp_path / 'fit').exists()


def test_validate_refuses_a_model_of_another_robot(tmp_path, good):
    bag, model = good
    doc = yaml.safe_load(model.read_text())
    doc['joints'] = ['a', 'b', 'c', 'd', 'e', 'f']
    other = tmp_path / 'other.yaml'
    other.write_text(yaml.safe_dump(doc))
    line = one_error_line(run_cli('validate', other, bag, '--torque-constants', KE))
    assert "'a'" in line
    # same joints, another URDF (its sha256 and its content differ: a comment alone would
    # be admitted by the model gate, test_model_gate.py)
    urdf = tmp_path / 'arm.urdf'
    urdf.write_text(URDF.read_text().replace('<mass value="0.8"/>', '<mass value="0.9"/>', 1))
    line = one_error_line(run_cli('validate', model, bag, '--torque-constants', KE,
                                  '--urdf', urdf))
    assert 'another robot' in line


LIVE_WRITER = textwrap.dedent('''
    import sys
    import numpy as np
    from arm_dyn_id.data.bag_writer import BagRecorder, encode_joint_states
    rec = BagRecorder(sys.argv[1], prefix='live', flush_period=0.1)
    h = rec.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    path = rec.open()
    t = 100.0 + np.arange(50) * 1e-3
    rows = encode_joint_states(t, ['joint_1'], np.zeros((50, 1)), None, np.zeros((50, 1)))
    for i in range(50):
        rec.write(h, int(t[i] * 1e9), rows[i].tobytes())
    print(path, flush=True)
    sys.stdin.readline()
    rec.close()
''')


def test_recover_never_touches_a_bag_being_written(tmp_path):
    proc = subprocess.Popen([sys.executable, '-c', LIVE_WRITER, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        bag = Path(proc.stdout.readline().strip())
        assert bag.is_dir()
        before = {p.name: p.stat().st_ino for p in bag.iterdir()}
        line = one_error_line(fit(bag, tmp_path / 'fit', '--torque-constants', KE,
                                  '--recover'))
        assert 'still being written' in line and str(proc.pid) in line
        # same files (the writer keeps appending to its own): nothing renamed or rebuilt
        assert {p.name: p.stat().st_ino for p in bag.iterdir()} == before
        assert not (bag / 'metadata.yaml').exists()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert (bag / 'metadata.yaml').exists()      # the writer finished its bag itself
