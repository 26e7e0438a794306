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
# seed 001 Table 3, taken as the "true" friction; f_c2 is published as -0.628912, but a
# Coulomb coefficient is never negative (the fits bound friction at >= 0): its magnitude
COULOMB = np.array([8.787878, 0.628912, 6.496318, 2.763219, 3.852696, 0.169843])
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


# ---------------------------------------------------------------------------
# fit_full / validate_full / data preparation
# ---------------------------------------------------------------------------
from arm_dyn_id.data.preparation import (  # noqa: E402
    choose_band, choose_cutoff, prepare, resample)
from arm_dyn_id.errors import ConfigError  # noqa: E402
from arm_dyn_id.identification.full_dynamics import fit_full, validate_full  # noqa: E402
from arm_dyn_id.model import load_model  # noqa: E402
from arm_dyn_id.model.dynamics import DynamicsModel, FrictionModel  # noqa: E402

SMOOTH = 0.01      # rad/s, the smooth sign of the simulated friction


def smooth_record(robot, rng, rate=200.0, periods=1, noise=NOISE, jitter=0.0):
    """Seed 001 motion with tanh Coulomb friction; stamps jittered by ±jitter/rate."""
    a, b = fourier_coefficients(robot, rng)
    t = np.arange(int(periods * 2 * np.pi / OMEGA * rate)) / rate
    if jitter:
        t = t + jitter / rate * rng.uniform(-1, 1, t.shape)
        t[0] = 0.0
    q, dq, ddq = fourier_series(t, OMEGA, a, b, np.zeros(robot.n_joints))
    rigid = np.array([robot.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    clean = rigid + COULOMB * np.tanh(dq / SMOOTH) + VISCOUS * dq
    return t, q, dq, ddq, clean, clean + noise * rng.standard_normal(clean.shape)


@pytest.fixture(scope='module')
def full_fit(robot):
    rng = np.random.default_rng(11)
    t, q, _, _, _, tau = smooth_record(robot, rng, jitter=0.4)
    return fit_full(robot, t, q, tau, methods=('wls', 'consistent'),
                    harmonic_hz=HARMONICS * OMEGA / (2 * np.pi))


def test_fit_full_recovers_the_model_from_uneven_stamps(robot, full_fit):
    model, validation = full_fit
    assert isinstance(model, DynamicsModel) and model.dynamics == 'full'
    prep = model.metadata['preparation']
    assert prep['resampled'] and prep['cutoff_hz'] == pytest.approx(5 * 0.6)
    assert 'highest harmonic' in prep['cutoff_source']
    # a new trajectory, exact states: the model error is well below the noise
    _, qv, dqv, ddqv, clean, _ = smooth_record(robot, np.random.default_rng(12), rate=50.0,
                                               noise=0.0)
    rmse = np.sqrt(np.mean((model.torques(qv, dqv, ddqv) - clean) ** 2, axis=0))
    assert np.all(rmse < 0.5 * NOISE), rmse
    np.testing.assert_allclose(model.friction['coulomb'], COULOMB, atol=0.3)
    np.testing.assert_allclose(model.friction['viscous'], VISCOUS, atol=0.1)
    # held-out keys as in the gravity path, the choice scored on held-out blocks
    assert set(validation) == {'held_out', 'training'}
    for joint, m in validation['held_out'].items():
        assert {'rmse', 'rmse_percent', 'mae', 'rho'} <= set(m)
        assert m['rmse'] < NOISE and m['rho'] > 0.9, (joint, m)
    assert model.metadata['selection']['by'] == 'held_out'
    assert set(model.metadata['selection']['scores']) == {'wls', 'consistent'}


def test_validate_full_scores_any_trajectory_and_survives_a_file(robot, full_fit, tmp_path):
    model, _ = full_fit
    t, q, _, _, _, tau = smooth_record(robot, np.random.default_rng(13), rate=100.0)
    scores = validate_full(model, t, q, tau)
    assert set(scores) == set(robot.joint_names)
    assert all(s['rmse'] < NOISE for s in scores.values()), scores
    raw = validate_full(model, t, q, tau, against='raw')
    # the raw torque carries the measurement noise, the filtered one much less
    assert all(raw[j]['rmse'] > scores[j]['rmse'] for j in scores)
    loaded = load_model(model.save(tmp_path / 'full.yaml'))
    again = validate_full(loaded, t, q, tau)
    assert again[robot.joint_names[0]]['rmse'] == pytest.approx(
        scores[robot.joint_names[0]]['rmse'])
    # a wrong model scores worse
    wrong = DynamicsModel(robot, model.base, model.beta * 0.5, model.friction_model, model.phi,
                          metadata=model.metadata)
    worse = validate_full(wrong, t, q, tau)
    assert sum(w['rmse'] for w in worse.values()) > 3 * sum(s['rmse'] for s in scores.values())


def test_fit_full_refuses_bad_inputs(robot):
    t = np.linspace(0, 10, 1000)
    q = np.zeros((1000, robot.n_joints))
    with pytest.raises(DataError, match='must be'):
        fit_full(robot, t, q[:, :3], q)
    with pytest.raises(DataError, match='must be'):
        fit_full(robot, t[:10], q, q)
    with pytest.raises(DataError, match='usable samples'):
        fit_full(robot, t, np.full_like(q, np.nan), q)
    with pytest.raises(ConfigError, match='unknown estimator'):
        fit_full(robot, t, q, q, methods=('magic',))
    with pytest.raises(ConfigError, match='holdout'):
        fit_full(robot, t, q, q, holdout=1)
    with pytest.raises(ConfigError, match='validate_against'):
        fit_full(robot, t, q, q, validate_against='both')


def test_preparation_resamples_chooses_cutoff_and_refuses_gaps():
    rng = np.random.default_rng(0)
    rate = 100.0
    t = np.arange(3000) / rate + rng.uniform(-0.004, 0.004, 3000)
    t[0] = 0.0
    t[100] = t[99]                              # a repeated stamp
    q = np.column_stack([np.sin(2 * np.pi * 0.5 * t), 0.3 * np.sin(2 * np.pi * 1.5 * t)])
    q[200] = np.nan                             # a garbage row
    tu, qu, _, info = resample(t, q)
    assert info['resampled'] and info['dropped'] == 2
    assert np.allclose(np.diff(tu), 1 / info['rate_hz'])
    np.testing.assert_allclose(qu[:, 0], np.sin(2 * np.pi * 0.5 * tu), atol=2e-3)
    # from the spectrum: 3-20 x the top of the motion's band (1.5 Hz), not the noise
    noisy = qu + 1e-5 * rng.standard_normal(qu.shape)
    cut, source = choose_cutoff(noisy, rate)
    band = choose_band(noisy, rate).band_hz
    assert 1.4 <= band <= 1.7 and 3 * band <= cut <= 20 * band, (cut, source)
    assert choose_cutoff(qu, rate, harmonic_hz=2.0)[0] == pytest.approx(10.0)
    prepared = prepare(t, q, q, features=FrictionModel().features)
    assert prepared.info['cutoff_hz'] == pytest.approx(cut, rel=0.1)
    assert prepared.features.shape == prepared.q.shape + (2,)
    assert prepared.info['edge_s'] == pytest.approx(3 / prepared.info['cutoff_hz'], abs=0.01)
    # 1 kHz data is decimated to >= 10 samples per cut-off period
    t1k = np.arange(20000) / 1000.0
    q1k = np.column_stack([np.sin(2 * np.pi * 0.5 * t1k)] * 2)
    fast = prepare(t1k, q1k, cutoff_hz=5.0)
    assert fast.info['decimate'] == 20
    gap = t.copy()
    gap[1500:] += 1.0
    with pytest.raises(DataError, match='gap of'):
        resample(gap, q)
    with pytest.raises(DataError, match='Nyquist'):
        prepare(t, q, cutoff_hz=60.0)


def test_prepare_filters_a_record_once_for_several_regressors(robot):
    """``armature='auto'`` prepares the record for two regressors: the second preparation
    takes the filtered signals of the first (``signals``, keyed by the options and what
    the features are), gives the arrays a fresh preparation gives, and its own copies
    (what one fit does to its arrays, the other does not see)."""
    rng = np.random.default_rng(11)
    t, q, _, _, _, tau = smooth_record(robot, rng, rate=1000.0)
    friction = FrictionModel(coulomb='tanh')
    options = dict(cutoff_hz=5.0, features=friction.features)
    plain = prepare(t, q, tau, **options)
    signals = {}
    first = prepare(t, q, tau, signals=signals, signals_key='coulomb', **options)
    assert len(signals) == 1
    second = prepare(t, q, tau, signals=signals, signals_key='coulomb', **options)
    assert len(signals) == 1                                    # taken, not made again
    for name in ('t', 'q', 'dq', 'ddq', 'tau', 'tau_raw', 'features'):
        np.testing.assert_array_equal(getattr(second, name), getattr(plain, name))
    assert second.info == plain.info
    first.tau[:] = 0.0
    first.features[:] = 0.0
    np.testing.assert_array_equal(
        prepare(t, q, tau, signals=signals, signals_key='coulomb', **options).tau, plain.tau)
    # other features or other options: prepared anew
    prepare(t, q, tau, signals=signals, signals_key='offset', cutoff_hz=5.0,
            features=FrictionModel(coulomb='tanh', offset=True).features)
    prepare(t, q, tau, signals=signals, signals_key='coulomb', cutoff_hz=4.0,
            features=friction.features)
    assert len(signals) == 3


def test_fit_full_of_1khz_data_goes_through_the_fir_stage(robot):
    rng = np.random.default_rng(21)
    t, q, _, _, _, tau = smooth_record(robot, rng, rate=1000.0)
    model, _ = fit_full(robot, t, q, tau, methods=('wls',),
                        harmonic_hz=HARMONICS * OMEGA / (2 * np.pi))
    prep = model.metadata['preparation']
    assert prep['pre_decimate'] > 1 and prep['decimate'] >= 4 * prep['pre_decimate'], prep
    _, qv, dqv, ddqv, clean, _ = smooth_record(robot, np.random.default_rng(22), rate=50.0,
                                               noise=0.0)
    rmse = np.sqrt(np.mean((model.torques(qv, dqv, ddqv) - clean) ** 2, axis=0))
    assert np.all(rmse < 0.5 * NOISE), rmse
    np.testing.assert_allclose(model.friction['coulomb'], COULOMB, atol=0.3)


def test_armature_auto_finds_rotor_inertia_the_arm_has(robot):
    rng = np.random.default_rng(31)
    rotor = np.array([0.5, 0.5, 0.3, 0.1, 0.1, 0.05])       # kg·m², large like a UR's
    a, b = fourier_coefficients(robot, rng)
    t = np.arange(int(2 * np.pi / OMEGA * 100.0)) / 100.0
    q, dq, ddq = fourier_series(t, OMEGA, a, b, np.zeros(robot.n_joints))
    rigid = np.array([robot.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    tau = rigid + rotor * ddq + COULOMB * np.tanh(dq / SMOOTH) + VISCOUS * dq
    tau += 0.1 * rng.standard_normal(tau.shape)
    model, _ = fit_full(robot, t, q, tau, methods=('wls',), armature='auto',
                        harmonic_hz=HARMONICS * OMEGA / (2 * np.pi))
    chosen = model.metadata['selection']['armature']
    assert model.armature and chosen['chosen'] is True
    assert chosen['scores']['true'] < chosen['scores']['false']
    with pytest.raises(ConfigError, match='armature'):
        fit_full(robot, t, q, tau, armature='sometimes')


def test_fit_full_raw_validation_sees_the_measurement_noise(robot):
    t, q, _, _, _, tau = smooth_record(robot, np.random.default_rng(41), rate=100.0)
    _, validation = fit_full(robot, t, q, tau, methods=('wls',), validate_against='raw',
                             harmonic_hz=HARMONICS * OMEGA / (2 * np.pi))
    rmse = np.array([m['rmse'] for m in validation['held_out'].values()])
    # the unfiltered model torque against the raw torque: the white noise itself
    assert np.all((rmse > 0.8 * NOISE) & (rmse < 1.3 * NOISE)), rmse
