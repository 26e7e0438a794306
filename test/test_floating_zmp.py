"""Seed 003: masses and CoMs of the biped from its ZMP. Known truth from the model
(the plan's kinematics, the model's ZMP plus noise), the MuJoCo biped on its sole
sensors (slow), unexcited unknowns, bad input."""

from pathlib import Path

import numpy as np
import pytest

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.identification import zmp as zmpid
from arm_dyn_id.model.floating import FloatingModel, zmp, zmp_from_sensors
from arm_dyn_id.sim.floating import Noise, biped, biped_plan

URDF = Path(__file__).resolve().parent.parent / 'urdf' / 'biped.urdf'
NOISE = 2e-4          # m, on the measured ZMP
START = np.array([1.05, 0.95, 1.05, 1.05, 0.97, 1.04, 0.96, 1.05])


@pytest.fixture(scope='module')
def model():
    return FloatingModel(URDF)


def _synthetic(model, single_support, seed=0):
    t, q, info = biped_plan(model, duration=14.0, rate=10.0, single_support=single_support,
                            rng=np.random.default_rng(seed))
    keep = t > (4.5 if single_support else 0.5)
    foot = model.frame_pose(info['configurations'][0], 'foot_r')
    Q, V, A = zmpid.stance_motion(model, t[keep], q[keep], 'foot_r', foot)
    W = model.wrench_regressor(Q, V, A)
    z = zmp(W, model.parameters())
    z = z + NOISE * np.random.default_rng(seed + 1).standard_normal(z.shape)
    types = zmpid.LinkTypes(model)
    return zmpid.ZmpProblem(model, Q, V, A, z, types), types


@pytest.fixture(scope='module')
def single(model):
    return _synthetic(model, True)


def test_newton_fit_keeps_the_mass_and_recovers_what_is_excited(model, single):
    prob, types = single
    truth = types.nominal
    start = truth * START
    fit = zmpid.fit_newton(prob, model.total_mass, start, 0.5 * truth, 1.5 * truth)
    assert fit.total_mass == pytest.approx(model.total_mass, abs=1e-9)   # eq. 10, exactly
    assert fit.newton_steps > 0
    assert fit.zmp_rms < 1.6 * NOISE                # down to the noise (√2 σ for 2 axes)
    assert prob.error(fit.Phi) < prob.error(start)
    err = np.abs(fit.Phi - truth) / truth
    assert np.all(err[fit.identified] < 0.10)       # stated tolerance: 10 %
    held = ~fit.identified
    # held at the start, which is first put on the mass constraint (eq. 10)
    c = types.mass_row
    on_plane = start + c * (model.total_mass - types.fixed_mass - c @ start) / (c @ c)
    np.testing.assert_allclose(fit.Phi[held], on_plane[held], rtol=1e-12)
    assert set(fit.unexcited) == {n for n, h in zip(fit.names, held) if h}
    assert np.all(fit.Phi >= 0.5 * truth) and np.all(fit.Phi <= 1.5 * truth)


def test_linear_reformulation_keeps_the_mass(model, single):
    prob, types = single
    truth = types.nominal
    fit = zmpid.fit_linear(prob, model.total_mass, truth * START, 0.5 * truth, 1.5 * truth)
    assert fit.total_mass == pytest.approx(model.total_mass, abs=1e-9)
    assert np.all(fit.Phi >= 0.5 * truth - 1e-6) and np.all(fit.Phi <= 1.5 * truth + 1e-6)
    # exact data, the m·lc² term at the truth: the linear equations give the truth
    T, t0 = types.linear_map(truth)
    k = len(truth) // 2
    u = np.concatenate([truth[:k] * truth[k:], truth[k:]])
    x, y = prob.zmp[:, :1], prob.zmp[:, 1:]
    rows = np.vstack([prob.X - x * prob.F, prob.Y - y * prob.F])
    resid = rows @ (T @ u + t0) / (model.total_mass * 9.81)
    assert np.sqrt(np.mean(resid ** 2)) < 1.6 * NOISE


def test_feet_that_never_move_are_named_not_fitted(model):
    prob, types = _synthetic(model, False)
    truth = types.nominal
    start = truth * START
    fit = zmpid.fit_newton(prob, model.total_mass, start, 0.5 * truth, 1.5 * truth,
                           max_iterations=50)
    assert 'lc_foot' in fit.unexcited
    i = fit.names.index('lc_foot')
    assert fit.Phi[i] == pytest.approx(start[i], rel=1e-12) and not fit.identified[i]
    assert fit.total_mass == pytest.approx(model.total_mass, abs=1e-9)


def test_bad_input_is_one_clear_error(model, single):
    prob, types = single
    Q = np.zeros((3, model.nq))
    with pytest.raises(DataError, match=r'measured ZMP must be \(3, 2\)'):
        zmpid.ZmpProblem(model, Q, np.zeros((3, model.nv)), np.zeros((3, model.nv)),
                         np.zeros((4, 2)), types)
    with pytest.raises(ConfigError, match='must exceed'):
        zmpid.fit_newton(prob, 1.0)
    with pytest.raises(ConfigError, match='lower < upper'):
        zmpid.fit_newton(prob, model.total_mass, lower=types.nominal, upper=types.nominal)
    foot = model.frame_pose(np.r_[0, 0, 0, 0, 0, 0, 1.0, np.zeros(12)], 'foot_r')
    with pytest.raises(DataError, match='uniform'):
        zmpid.stance_motion(model, np.array([0, 0.1, 0.15, 0.3]), np.zeros((4, 12)),
                            'foot_r', foot)


@pytest.mark.slow
def test_mujoco_biped_on_its_sole_sensors(model):
    """Weight shift, single support, the ZMP stays over the stance sole; the ZMP fit
    from the four sensors per foot keeps the mass and predicts the ZMP better than the
    CAD values."""
    sim = biped(URDF, frictionloss=0.5, damping=0.5)
    t, q, info = biped_plan(model, duration=14.0, rate=25.0)
    cfg = info['configurations'][0]
    rec = sim.run(t, q, 0.02, noise=Noise(joint_angle=1e-4, force=0.5),
                  base_position=cfg[:3], base_quaternion_xyzw=cfg[3:7])
    keep = rec.t > 4.5
    z = zmp_from_sensors(rec.forces[keep], rec.sensor_positions[keep])
    stance = rec.sensor_positions[keep][:, 4:, :2]
    assert np.all(z >= stance.min(axis=1)) and np.all(z <= stance.max(axis=1))
    assert np.all(rec.forces[keep][:, :4].sum(axis=1) < 5.0)      # left foot in the air
    tr = rec.truth
    Qt = model.configuration(tr['base_position'], tr['base_quaternion'], tr['q'])
    foot = model.frame_pose(Qt[np.flatnonzero(keep)[0]], 'foot_r')
    Q, V, A = zmpid.stance_motion(model, rec.t[keep], rec.q[keep], 'foot_r', foot)
    types = zmpid.LinkTypes(model)
    prob = zmpid.ZmpProblem(model, Q, V, A, z, types)
    truth = types.nominal
    start = truth * START
    fit = zmpid.fit_newton(prob, model.total_mass, start, 0.5 * truth, 1.5 * truth)
    assert fit.total_mass == pytest.approx(model.total_mass, abs=1e-9)
    assert fit.zmp_rms < 2e-3 and prob.error(fit.Phi) < prob.error(start)
