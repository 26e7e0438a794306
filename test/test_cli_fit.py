"""Offline fits from rosbag2 bags: the bag reader, ``arm-dyn-id fit`` / ``validate``.

Bags are synthetic: the humanoid arm (urdf/humanoid_arm.urdf) driven through the
reciprocating excitation of seed 000 (one joint sweeps forward and back at
constant speed, the others hold a pose), torque = G(q) (pinocchio) + Coulomb and
viscous friction + noise, stored as motor current I = τ / k_e, encoder noise
1e-5 rad. :func:`reciprocating_data` and :func:`write_synthetic_bag` are also
used by test_report, test_replay and bench/bag_fit.py.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from arm_dyn_id.data.bag_reader import read_bag
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.model.robot import RobotModel

REPO = Path(__file__).resolve().parent.parent
URDF = REPO / 'urdf' / 'humanoid_arm.urdf'
JOINTS = [f'joint_{i}' for i in range(1, 7)]
K_E = np.array([0.5, 0.5, 0.3, 0.2, 0.1, 0.05])
COULOMB = np.array([0.08, 0.08, 0.04, 0.03, 0.02, 0.01])
VISCOUS = np.array([0.2, 0.2, 0.1, 0.05, 0.05, 0.02])
NOISE = np.array([0.02, 0.02, 0.01, 0.005, 0.005, 0.003])


def _cycloid_speed(v0, v1, n):
    tau = (np.arange(n) + 0.5) / n
    return v0 + (v1 - v0) * (tau - np.sin(2 * np.pi * tau) / (2 * np.pi))


def reciprocating_data(seed=0, rate=200.0, speed=0.1, sweep_range=0.6, poses=3, cycles=1,
                       ramp=0.3, settle=0.3, t0=1000.0, encoder_noise=1e-5, robot=None):
    """Synthetic seed-000 excitation of the humanoid arm.

    Returns
    -------
    dict
        ``t`` (N,), ``q`` (N, 6) measured angles, ``tau`` (N, 6) measured torque
        (N·m), ``current`` (A), ``markers`` (docs/interfaces.md), ``sweeps``
        [(joint, direction, t_start, t_stop)] of the constant-speed spans.
    """
    rng = np.random.default_rng(seed)
    robot = robot or RobotModel.from_urdf(URDF, joints=JOINTS)
    n = robot.n_joints
    dt = 1.0 / rate
    vel, markers, sweeps = [], [], []
    t_now = 0.0
    q_now = np.zeros(n)
    n_ramp, n_settle = int(round(ramp * rate)), int(round(settle * rate))
    n_sweep = int(round(sweep_range / speed * rate))
    seg = 0

    def add(piece_v, phase=None, joint=None, direction=0):
        nonlocal t_now
        if phase is not None:
            markers.append({'segment_id': seg, 'joint': JOINTS[joint] if joint is not None
                            else '', 'joint_index': -1 if joint is None else joint,
                            'direction': direction, 'phase': phase, 't': t0 + t_now})
        vel.append(piece_v)
        t_now += piece_v.shape[0] * dt

    for j in reversed(range(n)):
        for _ in range(poses):
            target = rng.uniform(-0.8, 0.8, n)
            target[j] = -0.5 * sweep_range
            # move to the pose (cycloid, 1 s), then settle
            steps = int(rate)
            prof = 1 - np.cos(2 * np.pi * (np.arange(steps) + 0.5) / steps)
            move = np.outer(prof / prof.sum(), target - q_now) * rate
            add(move, 'approach')
            q_now = target
            add(np.zeros((n_settle, n)), 'settle', j)
            for _ in range(cycles):
                for direction in (1, -1):
                    v = np.zeros((n_ramp, n))
                    v[:, j] = _cycloid_speed(0, direction * speed, n_ramp)
                    add(v, 'reversal', j, 0)
                    seg += 1
                    t_start = t0 + t_now
                    v = np.zeros((n_sweep, n))
                    v[:, j] = direction * speed
                    add(v, 'sweep', j, direction)
                    sweeps.append((j, direction, t_start, t0 + t_now))
                    v = np.zeros((n_ramp, n))
                    v[:, j] = _cycloid_speed(direction * speed, 0, n_ramp)
                    add(v, 'reversal', j, 0)
            add(np.zeros((n_settle, n)), 'settle', j)
    v = np.vstack(vel)
    q_true = np.cumsum(v, axis=0) * dt
    t = t0 + np.arange(v.shape[0]) * dt
    markers.append({'segment_id': seg, 'joint': '', 'joint_index': -1, 'direction': 0,
                    'phase': 'done', 't': t0 + t_now})
    theta = robot.parameters('gravity')
    gravity = np.vstack([robot.gravity_regressor(q_true[a:a + 100000]) @ theta
                         for a in range(0, q_true.shape[0], 100000)])
    friction = COULOMB * np.sign(np.round(v, 12)) + VISCOUS * v
    tau = gravity + friction + rng.normal(0, 1, v.shape) * NOISE
    q = q_true + rng.normal(0, encoder_noise, v.shape)
    return {'t': t, 'q': q, 'q_true': q_true, 'dq': v, 'tau': tau, 'gravity': gravity,
            'current': tau / K_E, 'markers': markers, 'sweeps': sweeps}


def config_doc(urdf=URDF, joints=JOINTS, torque_constants=K_E):
    n = len(joints)
    return {'/**': {'ros__parameters': {
        'robot_name': 'humanoid_arm', 'urdf': str(urdf), 'joints': list(joints),
        'gravity': 9.81, 'torque_constants': [float(k) for k in torque_constants],
        'position_limits_lower': [-2.5] * n, 'position_limits_upper': [2.5] * n,
        'velocity_limits': [1.0] * n, 'acceleration_limits': [2.0] * n,
        'torque_noise': [float(x) for x in NOISE[:n]],
    }}}


def write_config(path, **kw):
    path = Path(path)
    path.write_text(yaml.safe_dump(config_doc(**kw), sort_keys=False))
    return path


def stored_config_text():
    """The configuration a recorder stores on /arm_dyn_id/config."""
    return yaml.safe_dump({'robot_name': 'humanoid_arm', 'joints': JOINTS,
                           'torque_constants': K_E.tolist(), 'gravity': 9.81,
                           'urdf': URDF.name, 'topics': {'states': '/joint_states'}})


def write_synthetic_bag(path, data, recorder=False, markers=True, version=9, storage='mcap',
                        extra_joints=0, names=None, **kw):
    """Bag of ``data``: plain (joint_states only) or recorder-style (+ torques, config)."""
    q, cur = data['q'], data['current']
    names = list(names or JOINTS)
    if extra_joints:
        names = [f'gripper_{i}' for i in range(extra_joints)] + names
        pad = np.zeros((q.shape[0], extra_joints))
        q, cur = np.hstack([pad, q]), np.hstack([pad, cur])
    return write_bag(path, data['t'], names, q, cur, velocity=None,
                     torques=data['tau'] if recorder else None, torque_names=JOINTS,
                     markers=data['markers'] if markers else None,
                     config_text=stored_config_text() if recorder else None,
                     version=version, storage=storage, **kw)


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'arm_dyn_id', *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope='module')
def data():
    return reciprocating_data(seed=1)


@pytest.fixture(scope='module')
def small():
    return reciprocating_data(seed=1, rate=100.0, poses=1)


# -- reader ----------------------------------------------------------------------

@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
@pytest.mark.parametrize('version', [8, 9])
def test_numpy_decoding_matches_rosbags_deserialiser(tmp_path, small, storage, version):
    data = small
    bag = write_synthetic_bag(tmp_path / 'bag', data, recorder=True, storage=storage,
                              version=version, extra_joints=2,
                              strings={'/chatter': [(data['t'][5], 'hello')]})
    fast = read_bag(bag)
    slow = read_bag(bag, fast=False)
    assert fast.joints == tuple(JOINTS)
    np.testing.assert_array_equal(fast.t, slow.t)
    np.testing.assert_array_equal(fast.q, slow.q)
    np.testing.assert_array_equal(fast.dq, slow.dq)
    np.testing.assert_array_equal(fast.tau, slow.tau)
    assert fast.markers == slow.markers and fast.quality == slow.quality
    np.testing.assert_allclose(fast.tau, data['tau'], rtol=1e-12, atol=1e-12)
    assert len(fast.markers) == len(data['markers'])
    assert fast.quality['loaded']['drops'] == 0
    assert abs(fast.quality['loaded']['rate_hz'] - 100.0) < 1e-6


def test_reader_mixed_layouts_and_bad_stamps(tmp_path, data):
    """Messages with other joint orders fall back to the slow path; order is kept."""
    from arm_dyn_id.data.bag_writer import encode_joint_states
    from arm_dyn_id.data.motor import CurrentToTorque
    from rosbags.rosbag2 import StoragePlugin, Writer
    from arm_dyn_id.data.bag_format import typestore
    n = 50
    t = 10.0 + np.arange(n) * 1e-3
    t[20] = t[19]                    # duplicate stamp: dropped
    # distinct values in every cell; steps of 0.06 rad (steps of 6 would be read as a
    # driver's wrap of one turn and unwrapped: data.angles)
    q = 0.01 * np.arange(n * 6, dtype=float).reshape(n, 6)
    a = encode_joint_states(t, JOINTS, q, None, q * 2)
    b = encode_joint_states(t, JOINTS[::-1], q[:, ::-1], None, q[:, ::-1] * 2)
    with Writer(tmp_path / 'mixed', version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = w.add_connection('/joint_states', 'sensor_msgs/msg/JointState',
                             typestore=typestore())
        for i in range(n):
            w.write(c, int(t[i] * 1e9) + i, (a if i % 3 else b)[i].tobytes())
    rec = read_bag(tmp_path / 'mixed', CurrentToTorque(JOINTS, [1.0] * 6))
    assert rec.n_samples == n - 1
    keep = np.delete(np.arange(n), 20)
    np.testing.assert_array_equal(rec.q, q[keep])
    np.testing.assert_array_equal(rec.current, 2 * q[keep])
    assert rec.quality['loaded']['duplicates'] == 1


# -- fit ------------------------------------------------------------------------------

def test_fit_plain_bag_with_markers(tmp_path, data):
    bag = write_synthetic_bag(tmp_path / 'bag', data, storage='sqlite3', version=8,
                              extra_joints=1)
    cfg = write_config(tmp_path / 'arm.yaml')
    out = tmp_path / 'fit'
    res = run_cli('fit', bag, '--config', cfg, '--out', out, '--no-report')
    assert res.returncode == 0, res.stderr
    assert (out / 'model.yaml').is_file()
    val = json.loads((out / 'validation.json').read_text())
    held = val['held_out']
    assert set(held) == set(JOINTS)
    for j, noise in zip(JOINTS, NOISE):
        assert set(held[j]) >= {'max_torque', 'rmse', 'rmse_percent', 'mae', 'rho',
                                'noise_std'}
        # averaging two passes leaves noise/sqrt(2); the model adds little to it
        assert held[j]['rmse'] < noise, (j, held[j])
        assert held[j]['noise_std'] == pytest.approx(noise, rel=0.1)
    summary = val['fit_summary']
    assert summary['segments']['source'] == 'markers'
    assert summary['holdout']['held_out_pairs'] >= 1
    assert 'rate_hz' in summary['quality']
    # the held-out torques are predicted like the true gravity model
    from arm_dyn_id.model.gravity import GravityModel
    model = GravityModel.load(out / 'model.yaml')
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    q = data['q_true'][::50]
    np.testing.assert_allclose(model.gravity_torques(q), robot.gravity_torques(q), atol=0.02)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_fit_and_validate_a_bag_with_only_joint_states(tmp_path, data, storage):
    """What `ros2 bag record /joint_states` writes: one topic, no markers, no stored
    config. The stored-config lookup once asked rosbags for the messages of no
    connection, which yields every message, and decoded a JointState as a String."""
    bag = write_synthetic_bag(tmp_path / 'bag', data, markers=False, storage=storage)
    from rosbags.rosbag2 import Reader
    with Reader(bag) as reader:
        assert [c.topic for c in reader.connections] == ['/joint_states']
    cfg = write_config(tmp_path / 'arm.yaml')
    out = tmp_path / 'fit'
    res = run_cli('fit', bag, '--config', cfg, '--out', out, '--no-report')
    assert res.returncode == 0, res.stderr
    assert 'Traceback' not in res.stderr
    val = json.loads((out / 'validation.json').read_text())
    assert val['fit_summary']['segments']['source'] == 'detected'
    res = run_cli('validate', out / 'model.yaml', bag, '--config', cfg)
    assert res.returncode == 0, res.stderr
    assert 'Traceback' not in res.stderr


def test_fit_recorder_bag_auto_segments(tmp_path, data):
    """A recorder bag needs no --config when its URDF is given; no markers -> detected."""
    bag = write_synthetic_bag(tmp_path / 'bag', data, recorder=True, markers=False)
    out = tmp_path / 'fit'
    res = run_cli('fit', bag, '--urdf', URDF, '--out', out, '--no-report', '--holdout', '0.25')
    assert res.returncode == 0, res.stderr
    val = json.loads((out / 'validation.json').read_text())
    assert val['fit_summary']['segments']['source'] == 'detected'
    assert val['fit_summary']['segments']['sweeps'] == len(data['sweeps'])
    for j, noise in zip(JOINTS, NOISE):
        assert val['held_out'][j]['rmse'] < noise


def test_fit_holdout_zero_and_torque_constants(tmp_path, data):
    scaled = dict(data, current=data['current'] / 2.0)   # as if k_e were twice as large
    bag = write_synthetic_bag(tmp_path / 'bag', scaled)
    cfg = write_config(tmp_path / 'arm.yaml')
    out = tmp_path / 'fit'
    k = ','.join(str(2 * x) for x in K_E)
    res = run_cli('fit', bag, '--config', cfg, '--out', out, '--no-report', '--holdout', '0',
                  '--torque-constants', k)
    assert res.returncode == 0, res.stderr
    val = json.loads((out / 'validation.json').read_text())
    assert 'held_out' not in val and 'training' in val
    for j, noise in zip(JOINTS, NOISE):
        assert val['training'][j]['rmse'] < noise


@pytest.mark.slow   # two CLI runs (fit, validate): about 5 s
def test_validate_other_gravity(tmp_path, data):
    """A model fitted at 9.81 m/s² predicts a bag recorded on the Moon (--gravity)."""
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    bag = write_synthetic_bag(tmp_path / 'earth', data)
    cfg = write_config(tmp_path / 'arm.yaml')
    out = tmp_path / 'fit'
    assert run_cli('fit', bag, '--config', cfg, '--out', out, '--no-report').returncode == 0
    moon_robot = robot.with_gravity(1.63)
    moon = reciprocating_data(seed=2, robot=moon_robot, poses=1)
    mbag = write_synthetic_bag(tmp_path / 'moon', moon)
    res = run_cli('validate', out / 'model.yaml', mbag, '--config', cfg, '--gravity', '1.63',
                  '--json', tmp_path / 'moon.json')
    assert res.returncode == 0, res.stderr
    assert 'RMSE' in res.stdout and 'joint_1' in res.stdout
    metrics = json.loads((tmp_path / 'moon.json').read_text())
    (case, joints), = [(k, v) for k, v in metrics.items() if k != 'fit_summary']
    for j, noise in zip(JOINTS, NOISE):
        assert joints[j]['mae'] < noise
    # without --gravity the model predicts Earth torques, 6x the Moon's on every joint: a
    # bag at another level is refused and --gravity named, not scored far off
    res = run_cli('validate', out / 'model.yaml', mbag, '--config', cfg,
                  '--json', tmp_path / 'wrong.json')
    assert res.returncode == 2 and '--gravity' in res.stderr and '9.81' in res.stderr, \
        res.stderr
    assert not (tmp_path / 'wrong.json').exists()
    # --force scores it anyway: far off
    res = run_cli('validate', out / 'model.yaml', mbag, '--config', cfg, '--force',
                  '--json', tmp_path / 'wrong.json')
    wrong = json.loads((tmp_path / 'wrong.json').read_text())
    (case, joints), = [(k, v) for k, v in wrong.items() if k != 'fit_summary']
    assert max(m['mae'] for m in joints.values()) > 0.1


# -- errors ---------------------------------------------------------------------------

def _one_error_line(res):
    """Exit code 2 and exactly one error line (progress phase lines may precede it)."""
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith('[')]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith('arm-dyn-id fit: error: ')
    assert 'Traceback' not in res.stderr
    return lines[0]


def test_error_no_joint_states_topic(tmp_path, data):
    bag = write_synthetic_bag(tmp_path / 'bag', data, topic='/robot/state_js')
    cfg = write_config(tmp_path / 'arm.yaml')
    line = _one_error_line(run_cli('fit', bag, '--config', cfg, '--out', tmp_path / 'o',
                                   '--states-topic', '/joint_states'))
    assert 'no topic /joint_states' in line and '/robot/state_js' in line
    assert '--states-topic' in line


def test_error_missing_joints(tmp_path, data):
    bag = write_synthetic_bag(tmp_path / 'bag', data, names=[f'j{i}' for i in range(6)])
    cfg = write_config(tmp_path / 'arm.yaml')
    line = _one_error_line(run_cli('fit', bag, '--config', cfg, '--out', tmp_path / 'o'))
    assert "'joint_1'" in line and 'j0' in line and '--config' in line


def test_error_no_current(tmp_path, data):
    bag = write_bag(tmp_path / 'bag', data['t'], JOINTS, data['q'], None,
                    markers=data['markers'])
    cfg = write_config(tmp_path / 'arm.yaml')
    line = _one_error_line(run_cli('fit', bag, '--config', cfg, '--out', tmp_path / 'o'))
    assert 'no effort' in line and 'current' in line


def test_error_no_config(tmp_path, data):
    bag = write_synthetic_bag(tmp_path / 'bag', data)
    line = _one_error_line(run_cli('fit', bag, '--urdf', URDF, '--out', tmp_path / 'o'))
    assert '--config' in line


def test_error_truncated_file(tmp_path, data):
    bag = write_synthetic_bag(tmp_path / 'bag', data)
    mcap = next(bag.glob('*.mcap'))
    raw = mcap.read_bytes()
    mcap.write_bytes(raw[:len(raw) // 2])
    cfg = write_config(tmp_path / 'arm.yaml')
    line = _one_error_line(run_cli('fit', bag, '--config', cfg, '--out', tmp_path / 'o'))
    assert 'truncated or damaged' in line and str(bag) in line


def test_error_missing_bag(tmp_path):
    line = _one_error_line(run_cli('fit', tmp_path / 'nope', '--config', tmp_path / 'x.yaml',
                                   '--out', tmp_path / 'o'))
    assert 'does not exist' in line


def test_error_missing_urdf_is_the_cause(tmp_path, data):
    """A --urdf that does not exist is named (it was reported as 'parameter joints = None',
    since the joints default to the URDF's); check and calibrate set the arm up the same way
    (cli.arm.arm_setup)."""
    bag = write_synthetic_bag(tmp_path / 'bag', data)
    line = _one_error_line(run_cli('fit', bag, '--urdf', tmp_path / 'arm.urdf',
                                   '--torque-constants', '1,1,1,1,1,1', '--out', tmp_path / 'o'))
    assert f'--urdf {tmp_path / "arm.urdf"} does not exist' in line, line
