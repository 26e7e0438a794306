"""Gravity from the quasi-static parts of a recording: holds and slow moves, no sweeps."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from arm_dyn_id.data.segmentation import quasi_static_mask, static_holds
from arm_dyn_id.errors import DataError, RankDeficientError
from arm_dyn_id.identification.pipeline import fit_gravity, fit_gravity_recording
from arm_dyn_id.model.robot import RobotModel

ROOT = Path(__file__).resolve().parents[1]
HUMANOID = ROOT / 'urdf' / 'humanoid_arm.urdf'
ROBOTS = Path(sys.prefix) / 'lib' / f'python{sys.version_info.major}.{sys.version_info.minor}' \
    / 'site-packages' / 'cmeel.prefix' / 'share' / 'example-robot-data' / 'robots'
UR5 = ROBOTS / 'ur_description' / 'urdf' / 'ur5_robot.urdf'


def _robot(urdf):
    if not urdf.exists():
        pytest.skip(f'{urdf} is absent (example-robot-data not installed)')
    return RobotModel.from_urdf(urdf)


def _move(q_a, q_b, peak_speed, dt):
    """Cosine-profile move whose fastest joint peaks at ``peak_speed`` (rad/s)."""
    dist = float(np.max(np.abs(q_b - q_a)))
    duration = max(np.pi * dist / (2.0 * peak_speed), 0.3)
    s = np.arange(0.0, duration, dt) / duration
    return q_a + (0.5 * (1.0 - np.cos(np.pi * s)))[:, None] * (q_b - q_a)


def recording(robot, rng, n_poses=30, frozen=(), fourier=False, span=1.2):
    """Holds and moves at 100 Hz with uneven stamps, friction and current noise.

    Returns t (N,), q (N, n), tau (N, n), and per joint the largest |G| (N·m).
    """
    n, dt = robot.n_joints, 0.01
    centre = np.zeros(n)
    if fourier:
        t = np.arange(0.0, 60.0, dt)
        w = 2 * np.pi * 0.1
        q = np.zeros((len(t), n))
        for k in range(1, 4):
            a = rng.uniform(-0.3, 0.3, size=n) / k
            b = rng.uniform(-0.3, 0.3, size=n) / k
            q += np.sin(k * w * t)[:, None] * a + np.cos(k * w * t)[:, None] * b
        parts = [q]
        rest = [np.zeros(n)] * len(t)
        hold_id = np.zeros(len(t), dtype=int)
    else:
        poses = centre + rng.uniform(-span, span, size=(n_poses, n))
        poses[:, list(frozen)] = 0.3
        parts, ids = [], []
        for k, pose in enumerate(poses):
            parts.append(np.repeat(pose[None], int(rng.uniform(1.5, 2.5) / dt), axis=0))
            ids.append(np.full(len(parts[-1]), k))
            if k + 1 < n_poses:
                # every third move slow enough to be used; the others too fast
                slow = k % 3 == 0
                target = pose + rng.uniform(-0.15, 0.15, size=n) if slow else poses[k + 1]
                target[list(frozen)] = 0.3
                parts.append(_move(pose, target, 0.03 if slow else 0.6, dt))
                ids.append(np.full(len(parts[-1]), -1))
                if slow:
                    parts.append(_move(target, poses[k + 1], 0.6, dt))
                    ids.append(np.full(len(parts[-1]), -1))
        q = np.vstack(parts)
        hold_id = np.concatenate(ids)
        t = np.arange(len(q)) * dt
    # samples taken at uneven times (RTDE-like jitter), stamped exactly
    dq = np.gradient(q, t, axis=0)
    ddq = np.gradient(dq, t, axis=0)
    t_even = t
    t = np.sort(t + rng.uniform(-0.003, 0.003, size=len(t)))
    t = np.clip(t, t_even[0], t_even[-1])

    def at(x):
        return np.column_stack([np.interp(t, t_even, x[:, j]) for j in range(n)])

    q, dq, ddq = at(q), at(dq), at(ddq)
    hold_id = np.round(np.interp(t, t_even, hold_id)).astype(int)
    G = robot.gravity_torques(q)
    g_max = np.max(np.abs(G), axis=0)
    tau = np.array([robot.inverse_dynamics(a, b, c) for a, b, c in zip(q, dq, ddq)])
    coulomb, viscous = 0.01 * g_max, 0.01 * g_max
    moving = np.tanh(dq / 2e-3)
    # friction at rest: anywhere in ±coulomb, a new value at each hold
    rest = rng.uniform(-1, 1, size=(max(hold_id.max(), 0) + 1, n)) * coulomb
    at_rest = np.where(hold_id[:, None] >= 0, rest[np.maximum(hold_id, 0)], 0.0)
    tau = tau + coulomb * moving + viscous * dq + (1 - np.abs(moving)) * at_rest
    tau = tau + rng.normal(size=tau.shape) * 0.003 * g_max
    q_meas = q + rng.normal(scale=1e-5, size=q.shape)
    return t, q_meas, tau, g_max


def held_out_error(robot, model, rng, span=1.2, poses=200):
    """Largest |G_model - G_true| per joint over fresh poses, relative to max |G_true|.

    A joint gravity never loads (a vertical axis) is judged against 1 % of the
    largest joint torque instead of its own zero.
    """
    q = rng.uniform(-span, span, size=(poses, robot.n_joints))
    true = robot.gravity_torques(q)
    err = np.abs(model.gravity_torques(q) - true).max(axis=0)
    scale = np.abs(true).max(axis=0)
    return err / np.maximum(scale, 0.01 * scale.max())


def test_quasi_static_mask_and_holds_on_uneven_stamps():
    rng = np.random.default_rng(1)
    t = np.cumsum(0.01 + rng.uniform(-0.003, 0.003, 1200))
    q = np.zeros((1200, 2))
    move = _move(np.zeros(2), np.array([1.0, 0.0]), 0.8, 0.01)[:, 0]
    q[400:400 + len(move), 0] = move
    q[400 + len(move):, 0] = 1.0
    q += rng.normal(scale=1e-5, size=q.shape)
    mask = quasi_static_mask(t, q)
    assert mask[:380].all() and not mask[420:580].any() and mask[650:].all()
    holds = static_holds(t, q, mask)
    assert len(holds) == 2 and holds[0][1] <= 400 and holds[1][0] >= 597
    # measured velocity is used when given
    assert not quasi_static_mask(t, q, dq=np.full_like(q, 0.1)).any()


@pytest.mark.parametrize('urdf', [HUMANOID, UR5], ids=['humanoid_arm', 'ur5'])
def test_fit_without_markers_reproduces_gravity(urdf):
    robot = _robot(urdf)
    rng = np.random.default_rng(7)
    t, q, tau, _ = recording(robot, rng)
    said = []
    fit = fit_gravity(robot, t, q, tau, None, phase=said.append)
    assert fit.marker_source == 'quasi_static'
    assert any('quasi-static' in text for text in said)
    err = held_out_error(robot, fit.model, rng)
    assert np.all(err < 0.01), dict(zip(robot.joint_names, err))
    summary = fit.summary()
    qs = summary['quasi_static']
    assert qs['samples']['holds'] >= 25 and qs['samples']['slow_bins'] > 0
    assert summary['holdout']['held_out_samples'] > 0
    assert set(qs['joint_range_rad']) == set(robot.joint_names)
    assert set(qs['excitation']) == set(fit.model.base.names)
    assert 'not cancelled' in qs['friction_at_rest']['note']
    assert len(qs['friction_at_rest']['rest_friction_bound']) == robot.n_joints
    assert summary['full_dynamics'].startswith('not indicated')
    for case in ('held_out', 'training'):
        largest = max(m['max_torque'] for m in fit.validation[case].values())
        for joint, m in fit.validation[case].items():
            assert {'rmse', 'rmse_percent', 'mae', 'rho', 'max_torque'} <= set(m)
            # measured torques hold friction at rest: within 2 % of the largest torque
            assert m['rmse'] < 0.02 * largest, (case, joint, m)


def test_fit_gravity_recording_from_a_plain_recording():
    robot = _robot(UR5)
    rng = np.random.default_rng(8)
    t, q, tau, _ = recording(robot, rng)
    n = robot.n_joints
    # the attributes of data.bag_reader.Recording the pipeline reads
    rec = SimpleNamespace(t=t, q=q, dq=np.full_like(q, np.nan), tau=tau,
                          joints=tuple(robot.joint_names), markers=[],
                          source=Path('plain.mcap'), states_topic='/joint_states')
    fit = fit_gravity_recording(rec, robot, holdout=0.2, seed=3)
    assert fit.marker_source == 'quasi_static'
    assert np.all(held_out_error(robot, fit.model, rng) < 0.01)
    assert fit.model.metadata['provenance']['data'] == 'plain.mcap'
    assert len(fit.model.friction['coulomb']) == n


def test_a_joint_that_never_moves_is_named_with_the_motion_that_would_identify_it():
    robot = _robot(UR5)
    frozen = robot.joint_names.index('wrist_2_joint')
    t, q, tau, _ = recording(robot, np.random.default_rng(9), frozen=(frozen,))
    with pytest.raises(RankDeficientError) as info:
        fit_gravity(robot, t, q, tau, segments='quasi_static', where='bag frozen.mcap')
    err = info.value
    text = str(err)
    assert '\n' not in text and 'bag frozen.mcap' in text
    assert err.parameters and all(p in text for p in err.parameters)
    assert all(p in robot.parameter_names('gravity') or p in fit_names(robot)
               for p in err.parameters)
    assert 'move wrist_2_joint through ±60°' in text, text


def fit_names(robot):
    from arm_dyn_id.model.base_parameters import gravity_base_parameters
    return gravity_base_parameters(robot).names


def test_fourier_like_recording_says_full_dynamics_applies():
    robot = _robot(HUMANOID)
    t, q, tau, _ = recording(robot, np.random.default_rng(10), fourier=True)
    with pytest.raises(DataError, match='rich motion.*full dynamics'):
        fit_gravity(robot, t, q, tau, segments='quasi_static')
    # with some holds added, the fit runs and its summary points to the full fit
    t2, q2, tau2, _ = recording(robot, np.random.default_rng(11), n_poses=12)
    t_all = np.concatenate([t, t2 + t[-1] + 0.01])
    fit = fit_gravity(robot, t_all, np.vstack([q, q2]), np.vstack([tau, tau2]),
                      segments='quasi_static', quasi_static={'min_samples': 10})
    assert 'full-dynamics fit applies' in fit.summary()['full_dynamics']
    assert 'identify_full' in fit.summary()['full_dynamics']


def test_all_the_joints_of_a_two_joint_arm_moving_is_rich_motion():
    """A double pendulum's Fourier motion moved 1.8 joints at once on average: below the
    two of a six-joint arm's rule, so it was fitted (and refused) as gravity. An arm of
    fewer than three joints needs 0.75 of its joints at once; a six-joint arm still two."""
    from arm_dyn_id.identification.quasi_static import motion_profile
    t = np.linspace(0.0, 30.0, 3000)[:, None]
    both = 0.5 * np.cos(2 * np.pi * np.array([0.1, 0.13]) * t)      # 2 joints, fast
    profile = motion_profile(both)
    assert 1.5 <= profile['joints_moving'] < 2.0 and profile['rich'], profile
    # the same two joints moving on a six-joint arm whose other joints hold still
    six = np.hstack([both, np.zeros((len(t), 4))])
    assert not motion_profile(six)['rich']
    assert not motion_profile(both[:, :1].repeat(2, axis=1) * [1.0, 0.0])['rich']
