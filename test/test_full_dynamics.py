"""Full dynamics with Coulomb + viscous friction from Fourier data (seed 001)."""

from pathlib import Path

import numpy as np
import pytest

from arm_dyn_id.model.base_parameters import inertial_base_parameters
from arm_dyn_id.errors import DataError
from arm_dyn_id.excitation.plans import fourier_series, rest_fourier_coefficients
from arm_dyn_id.identification.full_dynamics import (filter_and_differentiate, identify_full,
                                                     predict_full)
from arm_dyn_id.model.robot import RobotModel

URDF = Path(__file__).resolve().parent.parent / 'urdf' / 'staubli_tx60.urdf'
OMEGA = 2 * np.pi * 0.1            # seed 001 §4.1: ω_f = 0.1 Hz, L = 6
HARMONICS = 6
ACCEL_LIMIT = 69.8                 # rad/s², seed 001 Table 2
# seed 001 Table 3, taken as the "true" friction (f_c2 < 0 as published)
COULOMB = np.array([8.787878, -0.628912, 6.496318, 2.763219, 3.852696, 0.169843])
VISCOUS = np.array([0.269583, 0.300543, 0.141414, 0.029742, 0.050831, 0.027561])
NOISE = 0.5                        # N·m


@pytest.fixture(scope='module')
def robot():
    return RobotModel.from_urdf(URDF)


@pytest.fixture(scope='module')
def base(robot):
    return inertial_base_parameters(robot, friction=True)


def fourier_coefficients(robot, rng, fill=0.6):
    """Random seed 001 eq. 7 coefficients, at rest at t = 0, scaled into the limits."""
    n = robot.n_joints
    a = rng.standard_normal((n, HARMONICS)) / np.arange(1, HARMONICS + 1)
    b = rng.standard_normal((n, HARMONICS)) / np.arange(1, HARMONICS + 1)
    a, b = rest_fourier_coefficients(a, b)
    t = np.linspace(0, 2 * np.pi / OMEGA, 2001)
    q, dq, ddq = fourier_series(t, OMEGA, a, b, np.zeros(n))
    lim = robot.model.upperPositionLimit
    scale = np.min(np.column_stack([
        fill * lim / np.max(np.abs(q), axis=0),
        fill * robot.model.velocityLimit / np.max(np.abs(dq), axis=0),
        fill * ACCEL_LIMIT / np.max(np.abs(ddq), axis=0)]), axis=1)
    return a * scale[:, None], b * scale[:, None]


def torques(robot, q, dq, ddq):
    rigid = np.array([robot.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    return rigid + COULOMB * np.sign(dq) + VISCOUS * dq


def record(robot, rng, rate=500.0, periods=2, noise=NOISE):
    a, b = fourier_coefficients(robot, rng)
    t = np.arange(int(periods * 2 * np.pi / OMEGA * rate)) / rate
    q, dq, ddq = fourier_series(t, OMEGA, a, b, np.zeros(robot.n_joints))
    clean = torques(robot, q, dq, ddq)
    return t, q, dq, ddq, clean, clean + noise * rng.standard_normal(clean.shape)


def test_base_count_is_48(base):
    assert base.count == 48


def test_filtered_derivatives_match_analytic(robot):
    rng = np.random.default_rng(0)
    t, q, dq, ddq, _, _ = record(robot, rng, periods=1)
    data = filter_and_differentiate(t, q, cutoff_hz=5.0)
    sel = np.isin(t, data.t)
    assert np.max(np.abs(data.dq - dq[sel])) < 1e-3 * np.max(np.abs(dq))
    assert np.max(np.abs(data.ddq - ddq[sel])) < 1e-2 * np.max(np.abs(ddq))


@pytest.mark.parametrize('rate', [250.0, 1000.0])
def test_prediction_on_held_out_fourier_trajectory_within_noise(robot, base, rate):
    rng = np.random.default_rng(1)
    t, q, _, _, _, tau = record(robot, rng, rate=rate)
    decimate = int(rate // 125)          # 5 Hz cut-off: 125 Hz is still 25x oversampled
    fit = identify_full(robot, t, q, tau, cutoff_hz=5.0, decimate=decimate, base=base)
    assert fit.result.rank == 48
    _, qv, dqv, ddqv, clean, noisy = record(robot, np.random.default_rng(2), rate=50.0,
                                            periods=1)
    pred = predict_full(fit, qv, dqv, ddqv)
    rmse_clean = np.sqrt(np.mean((pred - clean) ** 2, axis=0))
    rmse_noisy = np.sqrt(np.mean((pred - noisy) ** 2, axis=0))
    # the model error is well below the measurement noise; against the noisy
    # torque the residual is the noise itself
    assert np.all(rmse_clean < 0.5 * NOISE), rmse_clean
    assert np.all(rmse_noisy < 1.2 * NOISE), rmse_noisy
    coulomb, viscous = fit.friction()
    np.testing.assert_allclose(coulomb, COULOMB, atol=0.3)
    np.testing.assert_allclose(viscous, VISCOUS, atol=0.1)


def test_robust_methods_selectable(robot, base):
    rng = np.random.default_rng(3)
    t, q, dq, ddq, clean, tau = record(robot, rng, rate=250.0, periods=1)
    hit = rng.random(tau.shape) < 0.1
    tau[hit] += 5.0 * rng.choice([-1, 1], size=hit.sum())
    _, qv, dqv, ddqv, cv, _ = record(robot, np.random.default_rng(4), rate=50.0, periods=1)
    fits = {m: identify_full(robot, t, q, tau, cutoff_hz=5.0, decimate=2, base=base,
                             methods=(m,), filter_torque=False) for m in ('wls', 'irls')}
    assert fits['irls'].info['n_fit_samples'] < len(t) // 2
    err = {m: np.sqrt(np.mean((predict_full(f, qv, dqv, ddqv) - cv) ** 2))
           for m, f in fits.items()}
    assert err['irls'] < 0.5 * err['wls'], err


def test_bad_records_are_refused(robot):
    t = np.linspace(0, 1, 100)
    q = np.zeros((100, robot.n_joints))
    with pytest.raises(DataError, match='Nyquist'):
        filter_and_differentiate(t, q, cutoff_hz=80.0)
    t_bad = t.copy()
    t_bad[50:] += 0.05
    with pytest.raises(DataError, match='uniformly'):
        filter_and_differentiate(t_bad, q, cutoff_hz=5.0)


def test_method_choice_is_scored_on_held_out_blocks(robot, base):
    rng = np.random.default_rng(5)
    t, q, dq, ddq, clean, tau = record(robot, rng, rate=250.0, periods=1)
    fit = identify_full(robot, t, q, tau, cutoff_hz=5.0, decimate=2, base=base,
                        methods=('wls', 'irls'))
    sel = fit.selection
    assert sel.by == 'held_out' and sel.folds == 5, sel
    assert set(sel.scores) == {'wls', 'irls'}
    assert fit.result.method == sel.method
    assert fit.info['selection']['by'] == 'held_out'
    single = identify_full(robot, t, q, tau, cutoff_hz=5.0, decimate=2, base=base)
    assert single.selection.by == 'single_candidate'
    np.testing.assert_allclose(single.beta, fit.candidates['wls'].beta)
