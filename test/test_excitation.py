"""Excitation plans: analytic trajectories, limits, smooth reversals, round trips."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from arm_dyn_id.config import ArmConfig
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import (Plan, PlanLimitError, check_limits, fourier_plan,
                                         fourier_series, reciprocating_plan,
                                         rest_fourier_coefficients)
from arm_dyn_id.paths import share_dir

JOINTS = [f'joint_{i}' for i in range(1, 7)]
LOWER = [-1.0, -0.5, -1.6, -0.1, -1.6, -1.2]
UPPER = [3.0, 2.8, 1.6, 2.6, 1.6, 1.2]


def make_config(lower=LOWER, upper=UPPER, vel=2.0, acc=5.0, **extra):
    params = dict(robot_name='humanoid_arm', urdf=str(share_dir() / 'urdf' / 'humanoid_arm.urdf'),
                  joints=JOINTS, torque_constants=[1.0] * 6, position_limits_lower=list(lower),
                  position_limits_upper=list(upper),
                  # per-joint lists: a config scalar is refused, not spread over the joints
                  velocity_limits=np.broadcast_to(vel, (6,)).tolist(),
                  acceleration_limits=np.broadcast_to(acc, (6,)).tolist(), **extra)
    return ArmConfig.from_params(params)


@pytest.fixture(scope='module')
def config():
    return make_config()


@pytest.fixture(scope='module')
def robot(config):
    from arm_dyn_id.model.robot import RobotModel
    return RobotModel.from_config(config)


def test_reciprocating_structure_and_constant_speed(config, robot):
    plan = reciprocating_plan(robot, config, quick=True)
    assert plan.duration < 200.0                      # quick: about 3 min
    sweeps = [s for s in plan.segments if s.phase == 'sweep']
    # last joint first, one forward and one backward per pose
    assert [s.joint_index for s in sweeps[::2]] == [5, 4, 3, 2, 1, 0]
    assert [s.direction for s in sweeps] == [1, -1] * 6
    for s in sweeps:
        t = np.linspace(s.t_start, s.t_end, 50)
        q, dq, ddq = plan.sample(t)
        assert np.allclose(dq[:, s.joint_index], s.direction * np.deg2rad(3.0))
        others = np.delete(np.arange(6), s.joint_index)
        assert np.allclose(dq[:, others], 0.0) and np.allclose(ddq, 0.0)
    # forward and backward constant-speed spans cover the same angles
    for fwd, bwd in zip(sweeps[::2], sweeps[1::2]):
        a = plan.sample(np.array([fwd.t_start, fwd.t_end]))[0][:, fwd.joint_index]
        b = plan.sample(np.array([bwd.t_end, bwd.t_start]))[0][:, bwd.joint_index]
        assert np.allclose(a, b)
    assert {'range_objective', 'condition_number'} <= set(plan.info)
    ids = [s.segment_id for s in plan.segments]
    assert ids == list(range(len(ids)))
    assert all(a.t_end == pytest.approx(b.t_start)
               for a, b in zip(plan.segments, plan.segments[1:]))


def test_default_plan_length(config):
    plan = reciprocating_plan(None, config)
    assert 8 * 60 < plan.duration < 15 * 60


def test_plan_is_continuous_with_bounded_jerk(config):
    plan = reciprocating_plan(None, config, quick=True)
    t = plan.times(0.002)
    q, dq, ddq = plan.sample(t)
    dt = np.diff(t)[:, None]
    # finite differences agree with the analytic derivatives (no jumps anywhere)
    assert np.max(np.abs(np.diff(q, axis=0) - dq[:-1] * dt)) < 1e-3
    assert np.max(np.abs(np.diff(dq, axis=0) - ddq[:-1] * dt)) < 1e-3
    assert np.max(np.abs(np.diff(ddq, axis=0))) < 0.01       # continuous acceleration


def test_yaml_round_trip(tmp_path, config):
    plan = reciprocating_plan(None, config, quick=True)
    path = tmp_path / 'plan.yaml'
    plan.to_yaml(path)
    again = Plan.from_yaml(path)
    t = np.linspace(-1, plan.duration + 1, 777)
    for x, y in zip(plan.sample(t), again.sample(t)):
        assert np.allclose(x, y)
    assert again.segments == plan.segments


def test_check_limits_names_joint_time_value(config):
    plan = reciprocating_plan(None, config, quick=True)
    tight = make_config(upper=[3.0, 2.8, 1.6, 2.6, 1.6, 0.2])
    with pytest.raises(PlanLimitError, match=r'position of joint_6 at t = [\d.]+ s'):
        check_limits(plan, tight)
    slow = make_config(vel=0.01)
    with pytest.raises(PlanLimitError, match='velocity of joint_6'):
        check_limits(plan, slow)
    with pytest.raises(ConfigError, match='exceeds the velocity limit'):
        reciprocating_plan(None, slow)


def test_fourier_matches_derivatives_and_starts_at_rest(config):
    rng = np.random.default_rng(3)
    a, b = rest_fourier_coefficients(rng.normal(0, 0.1, (6, 4)), rng.normal(0, 0.1, (6, 4)))
    omega = 2 * np.pi * 0.2
    t = np.linspace(0, 10, 20001)
    q, dq, ddq = fourier_series(t, omega, a, b, np.zeros(6))
    assert np.allclose(np.gradient(q, t, axis=0)[5:-5], dq[5:-5], atol=1e-5)
    assert np.allclose(np.gradient(dq, t, axis=0)[5:-5], ddq[5:-5], atol=1e-4)
    plan = fourier_plan(config, a, b, np.full(6, 0.5), omega, periods=2)
    assert np.allclose(plan.sample(0.0)[1], 0) and np.allclose(plan.sample(0.0)[2], 0)
    assert np.allclose(plan.sample(plan.duration)[0], plan.sample(0.0)[0])
    with pytest.raises(ConfigError, match='rest'):
        fourier_plan(config, a + 0.1, b, np.zeros(6), omega)


limits = st.tuples(st.floats(-2.0, 0.0), st.floats(0.8, 2.5))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lims=st.lists(limits, min_size=6, max_size=6),
       vel=st.floats(0.06, 3.0), acc=st.floats(0.2, 20.0),
       speed=st.floats(0.01, 0.06), sweep=st.floats(0.3, 1.5),
       ramp=st.floats(0.05, 2.0), seed=st.integers(0, 10 ** 6))
def test_random_reciprocating_plans_respect_limits(lims, vel, acc, speed, sweep, ramp, seed):
    lower, upper = np.array(lims).T
    cfg = make_config(lower, upper, vel, acc)
    rng = np.random.default_rng(seed)
    poses = [(j, rng.uniform(lower - 1, upper + 1)) for j in rng.permutation(6)[:3]]
    try:
        plan = reciprocating_plan(None, cfg, poses=poses, speed=speed, sweep_range=sweep,
                                  settle_time=0.2, ramp_acceleration=ramp,
                                  transfer_speed=rng.uniform(0.1, 5), transfer_acceleration=5.0)
    except ConfigError:
        return      # refused (sweep too short for its ramps): never an unsafe plan
    peaks = check_limits(plan, cfg)
    assert peaks['velocity_ratio'] <= 1 + 1e-9 and peaks['acceleration_ratio'] <= 1 + 1e-9
    # reversals are smooth: acceleration bounded by the ramp setting
    t = plan.times(0.01)
    ddq = plan.sample(t)[2]
    assert np.abs(ddq).max() <= max(ramp, 5.0) + 1e-9


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10 ** 6), scale=st.floats(0.01, 3.0), lsz=st.integers(1, 6))
def test_random_fourier_plans_are_refused_or_safe(seed, scale, lsz):
    cfg = make_config(vel=1.0, acc=3.0)
    rng = np.random.default_rng(seed)
    a, b = rest_fourier_coefficients(rng.normal(0, scale, (6, lsz)),
                                     rng.normal(0, scale, (6, lsz)))
    plan = fourier_plan(cfg, a, b, rng.uniform(-0.5, 0.5, 6), 2 * np.pi * 0.1)
    try:
        check_limits(plan, cfg)
    except PlanLimitError:
        return
    q, dq, ddq = plan.sample(plan.times(0.005))
    assert np.all(q >= cfg.position_limits_lower - 1e-9)
    assert np.all(q <= cfg.position_limits_upper + 1e-9)
    assert np.all(np.abs(dq) <= cfg.velocity_limits + 1e-9)
    assert np.all(np.abs(ddq) <= cfg.acceleration_limits + 1e-9)


def test_with_approach_is_slow_and_refuses_outside_limits(config):
    plan = reciprocating_plan(None, config, quick=True)
    q_from = plan.start_position + 0.5
    run = plan.with_approach(q_from, config, speed=0.2, acceleration=0.5)
    assert run.segments[0].phase == 'approach'
    t = np.linspace(0, run.segments[0].t_end, 500)
    _, dq, ddq = run.sample(t)
    assert np.abs(dq).max() <= 0.2 + 1e-9 and np.abs(ddq).max() <= 0.5 + 1e-9
    assert np.allclose(run.sample(0.0)[0], q_from)
    with pytest.raises(PlanLimitError, match='joint_1'):
        plan.with_approach(np.array([5.0, 0, 0, 0, 0, 0]), config)


def test_narrow_joint_is_held_at_the_middle_of_its_limits():
    """A joint narrower than twice the position margin holds the middle of its limits
    in static poses (no bare numpy error, no pose outside the limits)."""
    from arm_dyn_id.excitation.plans import make_sweeps, pose_bounds, random_feasible_poses
    cfg = make_config(lower=[0.2] + LOWER[1:], upper=[0.26] + UPPER[1:])
    lo, hi = pose_bounds(cfg)
    assert lo[0] == hi[0] == pytest.approx(0.23)
    assert np.all(lo[1:] == cfg.position_limits_lower[1:] + 0.05)
    pose = random_feasible_poses(cfg, [5], 1, np.random.default_rng(0))[0][1]
    assert pose[0] == pytest.approx(0.23)
    sweep = make_sweeps(cfg, [(5, np.full(6, 5.0))], 0.5)[0]
    assert sweep.pose[0] == pytest.approx(0.23)
    with pytest.raises(ConfigError, match='joint_1 has no room to sweep'):
        reciprocating_plan(None, cfg, quick=True)


def test_a_sweep_too_short_for_its_ramps_names_what_can_widen_it():
    """A joint whose limits hold its sweep narrower than sweep_range: raising
    sweep_range cannot help, so the message says so (it advised it before); a sweep held
    by a small sweep_range still names sweep_range."""
    narrow = make_config(lower=[0.2] + LOWER[1:], upper=[0.32] + UPPER[1:], acc=0.05)
    with pytest.raises(ConfigError) as caught:
        reciprocating_plan(None, narrow, quick=True, speed=0.05, ramp_acceleration=0.05)
    text = str(caught.value)
    assert 'joint_1' in text and 'not sweep_range' in text and '[0.2, 0.32]' in text, text
    assert 'raise sweep_range' not in text
    wide = make_config(acc=0.05)
    with pytest.raises(ConfigError, match=r'raise sweep_range \(now 0\.02 rad\)'):
        reciprocating_plan(None, wide, quick=True, speed=0.05, ramp_acceleration=0.05,
                           sweep_range=0.02)
