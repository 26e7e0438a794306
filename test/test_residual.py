"""Contact detection that holds on a real arm (service.contact, service.dynamics' stream and
``arm-dyn-id residual``), on a simulated humanoid arm: pinocchio inverse dynamics plus
Coulomb and viscous friction in motion, a stiction-like holding torque at rest (any value
up to the Coulomb level, drawn at every stop), noise, and a push at the flange mapped to
the joints by the Jacobian transpose. The model is fitted by ``arm-dyn-id fit`` from a
Fourier bag (as test_cli_full does)."""

import json

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id import cli
from arm_dyn_id.data.bag_reader import read_bag
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import fourier_series, rest_fourier_coefficients
from arm_dyn_id.model import load_model
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.service import contact
from arm_dyn_id.data.velocity import VelocityCheck
from arm_dyn_id.service.dynamics import (ResidualStream, ServedDynamics, calibration_run,
                                         run_stream)
from test_cli_fit import COULOMB, JOINTS, K_E, NOISE, URDF, write_config
from test_cli_full import VISCOUS, fourier_data, write_plain_bag
from test_cli_full import run as run_cli

RATE = 200.0
GAINS = 25.0
Q0 = np.array([0.8, 1.0, 0.0, 1.2, 0.0, 0.0])
PUSH_N = 5.0


def _min_jerk(p0, p1, duration, rate):
    tau = np.arange(int(duration * rate)) / rate / duration
    s = 10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5
    ds = (30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4) / duration
    dds = (60 * tau - 180 * tau ** 2 + 120 * tau ** 3) / duration ** 2
    d = p1 - p0
    return p0 + s[:, None] * d, ds[:, None] * d, dds[:, None] * d


def _burst(p0, rng, duration, rate, amplitude=0.3, harmonics=4):
    n = len(p0)
    ell = np.arange(1, harmonics + 1)
    a, b = rest_fourier_coefficients(rng.standard_normal((n, harmonics)) / ell,
                                     rng.standard_normal((n, harmonics)) / ell)
    t = np.arange(int(duration * rate)) / rate
    omega = 2 * np.pi / duration
    q, _, _ = fourier_series(t, omega, a, b, np.zeros(n))
    s = amplitude / np.max(np.abs(q), axis=0)
    q, dq, ddq = fourier_series(t, omega, a * s[:, None], b * s[:, None], np.zeros(n))
    return p0 + q - q[0], dq, ddq


def free_run(seed, pushes=(), segments=6, rate=RATE, t0=2000.0, gravity=None):
    """Holds at several poses between point-to-point moves and Fourier bursts.

    Parameters
    ----------
    pushes : sequence of (start s, duration s, force (3,) N)
        Pushes at the flange (a smooth rise and fall of 0.1 s each), during holds.

    Returns
    -------
    dict
        ``t``, ``q``, ``dq``, ``tau`` (N·m), ``current`` (A), ``ext`` (N, 6) the
        external joint torque Jᵀ F, ``still`` (N,) bool: the hold samples.
    """
    rng = np.random.default_rng(seed)
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    if gravity is not None:
        robot.set_gravity(gravity)                      # recorded on the Moon, say
    n = robot.n_joints
    qs, dqs, ddqs, holds = [], [], [], []
    pose = Q0 + rng.uniform(-0.3, 0.3, n)

    def hold(seconds):
        k = int(seconds * rate)
        qs.append(np.tile(pose, (k, 1)))
        dqs.append(np.zeros((k, n)))
        ddqs.append(np.zeros((k, n)))
        # the stiction torque the joints hold, set when they stopped
        holds.append(np.tile(rng.uniform(-1, 1, n) * COULOMB, (k, 1)))

    hold(2.0)
    for k in range(segments):
        if k % 2:
            q, dq, ddq = _burst(pose, rng, 3.0, rate)
        else:
            target = Q0 + rng.uniform(-0.4, 0.4, n)
            q, dq, ddq = _min_jerk(pose, target, 1.5, rate)
            pose = target
        qs.append(q)
        dqs.append(dq)
        ddqs.append(ddq)
        holds.append(np.zeros_like(q))
        hold(rng.uniform(1.5, 3.0))
    q, dq, ddq, held = (np.vstack(x) for x in (qs, dqs, ddqs, holds))
    t = np.arange(len(q)) / rate
    rigid = np.array([robot.inverse_dynamics(*s) for s in zip(q, dq, ddq)])
    tau = rigid + COULOMB * np.tanh(dq / 1e-3) + VISCOUS * dq + held + \
        rng.standard_normal(q.shape) * NOISE
    ext = np.zeros_like(q)
    pm = robot.model
    pd = pm.createData()
    frame = pm.getFrameId('flange')
    for start, duration, force in pushes:
        rise = np.clip((t - start) / 0.1, 0, 1) * np.clip((start + duration - t) / 0.1, 0, 1)
        for k in np.flatnonzero(rise > 0):
            J = pin.computeFrameJacobian(pm, pd, robot._pin_q(q[k]), frame,
                                         pin.LOCAL_WORLD_ALIGNED)[:3][:, robot._idx_v]
            ext[k] = J.T @ (rise[k] * np.asarray(force, dtype=float))
    # the motor holds the arm against the push: τ_m = ID + friction − Jᵀ F
    tau = tau - ext
    return {'t': t0 + t, 'q': q + rng.normal(0, 1e-5, q.shape),
            'dq': dq + rng.normal(0, 1e-4, q.shape), 'tau': tau, 'current': tau / K_E,
            'ext': ext, 'still': np.all(dq == 0, axis=1)}


def write_run(path, data):
    return write_bag(path, data['t'], JOINTS, data['q'], data['current'],
                     velocity=data['dq'])


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return tmp_path_factory.mktemp('residual')


@pytest.fixture(scope='module')
def fitted(root):
    """``arm-dyn-id fit`` of a Fourier bag (least squares only): (model.yaml, arm config)."""
    import contextlib
    import io
    config = write_config(root / 'arm.yaml')
    bag = write_plain_bag(root / 'fourier', fourier_data(seed=0))
    out = root / 'fit'
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(['fit', str(bag), '--config', str(config), '--out', str(out),
                         '--methods', 'wls', '--dynamics', 'full', '--no-report', '--quiet'])
    assert code == 0, err.getvalue()
    return out / 'model.yaml', config


@pytest.fixture(scope='module')
def served(fitted):
    return ServedDynamics(load_model(fitted[0]))


@pytest.fixture(scope='module')
def thresholds(served, fitted):
    """Calibrated on one no-contact run (seed 11)."""
    model = load_model(fitted[0])
    data = free_run(11, segments=8)
    run = calibration_run(served, GAINS, data['t'], data['q'], data['dq'], data['tau'],
                          contact.ContactThresholds(
                              tuple(JOINTS), np.inf, np.inf, 0.0, 0.0,
                              holding_bounds=contact.holding_bounds(model)),
                          source='seed 11')
    return contact.calibrate([run], JOINTS, holding_bounds=contact.holding_bounds(model),
                             calibration={'observer_gains': [GAINS] * 6})


def _stream(served, th, data):
    out = run_stream(ResidualStream(served, GAINS, th), data['t'], data['q'], data['dq'],
                     data['tau'])
    return out, contact.episodes(data['t'], out['contact'], out['residual'], out['flagged'],
                                 JOINTS)


def test_thresholds_from_one_no_contact_run_hold_on_another_and_flag_a_5_N_push(
        served, thresholds):
    other = free_run(12, segments=8)
    out, eps = _stream(served, thresholds, other)
    assert eps == [], eps
    # the same arm, a 5 N push at the flange while it holds a pose (never in a settle)
    push_at = 2000.0 + 1.0
    pushed = free_run(12, segments=2, pushes=[(1.0, 0.6, (PUSH_N, 0.0, 0.0))])
    out, eps = _stream(served, thresholds, pushed)
    assert len(eps) == 1, eps
    e = eps[0]
    assert push_at < e['start'] < push_at + 0.3 and e['end'] < push_at + 0.6 + 0.3, e
    # flagged on the joints the push loads most
    strongest = JOINTS[int(np.argmax(np.abs(pushed['ext']).max(axis=0)))]
    assert strongest in e['joints'], (e, np.abs(pushed['ext']).max(axis=0))
    # the holding tracker keeps the estimate of the push: within 25 % at its flag
    k = np.searchsorted(pushed['t'], e['start'] + 0.25)
    i = JOINTS.index(strongest)
    assert abs(out['residual'][k, i] - pushed['ext'][k, i]) < 0.25 * abs(pushed['ext'][k, i])
    # without the holding tracker the same bands flag the stiction at rest
    raw = thresholds.with_settings(holding_bounds=np.zeros(6))
    assert _stream(served, raw, other)[1], 'stiction at rest should cross the bands untracked'


def test_persistence_rejects_a_single_sample_spike(served, thresholds):
    data = free_run(13, segments=2)
    k = int(np.flatnonzero(data['still'])[150])         # a hold, past any settling
    # one sample of torque reaches the residual as K·Δt of itself, decaying with 1/K: it
    # stays over the band for ln(peak / band) / K s, here less than the persistence
    spike = np.zeros(6)
    kdt = GAINS / RATE
    spike[1] = 2.5 * thresholds.standstill[1] * (1 + kdt) / kdt
    data['tau'][k] += spike
    out, eps = _stream(served, thresholds, data)
    assert eps == [], eps
    at_once = thresholds.with_settings(persistence=0.0)
    out0, eps0 = _stream(served, at_once, data)
    assert data['t'][k] in [e['start'] for e in eps0], eps0
    # the spike set |r| over the band for less than the persistence
    over = np.abs(out['residual'][:, 1]) > out['band'][:, 1]
    assert 0 < over.sum() < thresholds.persistence * RATE


def test_a_contact_is_flagged_the_persistence_after_its_crossing(served, thresholds):
    data = free_run(14, segments=2, pushes=[(0.8, 0.8, (0.0, 0.0, -3 * PUSH_N))])
    out, eps = _stream(served, thresholds, data)
    assert len(eps) == 1
    over = np.any(np.abs(out['residual']) > out['band'], axis=1)
    first = data['t'][np.flatnonzero(over & (data['t'] > 2000.7))[0]]
    assert eps[0]['start'] - first == pytest.approx(thresholds.persistence, abs=1.5 / RATE)


def test_the_stream_says_it_flags_contact_and_names_a_joint_over_its_band(
        served, thresholds):
    """What the node reads to publish `contact` and name the joint in its warning: a
    stream with calibrated bands flags contact (before, only constant thresholds made
    the node publish it), and the joint named is one held over its band."""
    assert not ResidualStream(served, GAINS).flags_contact
    assert ResidualStream(served, GAINS, np.ones(6)).flags_contact
    stream = ResidualStream(served, GAINS, thresholds)
    assert stream.flags_contact and stream.observer.thresholds is None
    data = free_run(14, segments=2, pushes=[(0.8, 0.8, (0.0, 0.0, -3 * PUSH_N))])
    named = None
    for k in range(len(data['t'])):
        _, _, _, r, c = stream.step(data['t'][k], data['q'][k], data['dq'][k],
                                    data['tau'][k])
        if c:
            named = stream.contact_joint(r)
            assert stream.detector.joints_flagged[list(JOINTS).index(named)]
            break
    assert named is not None


def test_holding_tracker_absorbs_stiction_and_a_slow_push_in_part(served, thresholds):
    """What the tracker costs: a push ramping at ρ N·m/s keeps ρ·holding_time of itself
    in the residual until the offset reaches its bound; a quick one keeps nearly all."""
    th = thresholds.with_settings(standstill=np.full(6, np.inf), base=np.full(6, np.inf))
    data = free_run(15, segments=0)                     # 2 s held at one pose
    out, _ = _stream(served, th, data)
    k = slice(int(1.0 * RATE), None)
    raw, _ = _stream(served, th.with_settings(holding_bounds=np.zeros(6)), data)
    # untracked, the residual is the stiction torque; tracked, the noise
    held = np.abs(raw['residual'][k]).mean(axis=0)
    assert np.sum(held > 0.01) >= 3, held
    assert np.all(np.abs(out['residual'][k]).mean(axis=0) < 0.2 * held + 0.005)
    # a slow ramp on a still arm: the residual keeps ρ·T of it (the tracker lags by T)
    n = len(data['t'])
    rho = 0.5 * COULOMB[1] / th.holding_time               # reaches the bound slowly
    ramp = np.zeros((n, 6))
    ramp[:, 1] = rho * np.clip(data['t'] - data['t'][0] - 0.5, 0, None)
    ramped = dict(data, tau=data['tau'] - ramp)
    tracked, _ = _stream(served, th, ramped)
    late = data['t'] - data['t'][0] > 1.9
    kept = (tracked['residual'][late, 1] - out['residual'][late, 1]).mean()
    assert kept == pytest.approx(rho * th.holding_time, rel=0.35)


def test_thresholds_file_round_trip_and_refusals(tmp_path, thresholds):
    path = thresholds.save(tmp_path / contact.FILE_NAME)
    back = contact.ContactThresholds.load(path, joints=JOINTS)
    for name in ('standstill', 'base', 'per_velocity', 'per_acceleration', 'holding_bounds'):
        np.testing.assert_allclose(getattr(back, name), getattr(thresholds, name))
    assert back.persistence == thresholds.persistence
    with pytest.raises(ValueError, match='joints'):
        contact.ContactThresholds.load(path, joints=JOINTS[::-1])
    path.write_text(path.read_text().replace('version: 1', 'version: 7'))
    with pytest.raises(ValueError, match='version'):
        contact.ContactThresholds.load(path)


def test_residual_command_calibrates_and_gives_the_node_streams_episodes(
        root, fitted, capsys):
    model_file, config = fitted
    free = [write_run(root / f'free_{s}', free_run(s, segments=3)) for s in (21, 22)]
    code, out, err = run_cli(capsys, 'residual', model_file, *free, '--config', config,
                             '--calibrate', '--quiet')
    assert code == 0, err
    path = model_file.parent / contact.FILE_NAME
    assert path.is_file() and f'thresholds: {path}' in out
    data = free_run(23, segments=2, pushes=[(1.0, 0.6, (PUSH_N, 0.0, 0.0))])
    bag = write_run(root / 'push', data)
    code, out, err = run_cli(capsys, 'residual', model_file, bag, '--config', config,
                             '--json', root / 'push.json', '--plot', root / 'push.png',
                             '--quiet')
    assert code == 0, err
    assert (root / 'push.png').stat().st_size > 0
    doc = json.loads((root / 'push.json').read_text())
    episodes = doc['bags'][0]['episodes']
    assert len(episodes) == 1 and 'contact episodes: 1' in out, out
    # the node's way: every JointState message (currents) through a ResidualStream
    served = ServedDynamics(load_model(model_file))
    stream = ResidualStream(served, GAINS, contact.ContactThresholds.load(path), 0.05, 20.0,
                            torque_gains=K_E)
    rec = read_bag(bag, config={'joints': JOINTS, 'torque_constants': list(K_E)})
    flags, rs, flagged = [], [], []
    for k in range(rec.n_samples):
        _, _, _, r, c = stream.update(JOINTS, rec.t[k], rec.q[k], rec.dq[k], rec.current[k])
        flags.append(c)
        rs.append(r)
        flagged.append(stream.detector.joints_flagged.copy())
    mine = contact.episodes(rec.t, np.array(flags), np.array(rs), np.array(flagged), JOINTS)
    assert [(e['start'], e['end'], e['joints']) for e in mine] == \
        [(e['start'], e['end'], e['joints']) for e in episodes]
    for a, b in zip(mine, episodes):
        assert a['peak'] == pytest.approx(b['peak'], rel=1e-9)
    # what the node uses by default: the folder's file, for the gains it was calibrated with
    th, why = contact.calibrated_thresholds(model_file, JOINTS, [GAINS])
    assert th is not None and str(path) in why
    th, why = contact.calibrated_thresholds(model_file, JOINTS, [10.0])
    assert th is None and 'observer_gains' in why
    model = load_model(model_file)
    assert contact.calibrated_thresholds(model_file, JOINTS, [GAINS], model)[0] is not None
    model.phi = model.phi * 1.1                          # another fit of the arm
    th, why = contact.calibrated_thresholds(model_file, JOINTS, [GAINS], model)
    assert th is None and 'another model' in why


def test_residual_refuses_effort_not_of_the_models_arm_and_calibration_on_contacts(
        root, fitted, capsys):
    """A bag whose torque is not the model's arm's in N·m (currents in mA, a sign flipped)
    is refused with its cause, not analysed into one contact as long as the recording;
    calibration recordings that hold contacts by the thresholds in use are refused, not
    turned into bands wide enough to pass them."""
    model_file, config = fitted
    data = free_run(31, segments=2)
    ma = write_bag(root / 'milliamps', data['t'], JOINTS, data['q'], data['current'] * 1000,
                   velocity=data['dq'])
    code, _, err = run_cli(capsys, 'residual', model_file, ma, '--config', config, '--quiet')
    assert code == 2 and 'mA read as A' in err, err
    code, _, err = run_cli(capsys, 'validate', model_file, ma, '--config', config, '--quiet')
    assert code == 2 and 'mA read as A' in err, err          # not a FAIL blamed on the fit
    flipped = data['current'].copy()
    flipped[:, 0] *= -1
    bag = write_bag(root / 'flipped', data['t'], JOINTS, data['q'], flipped,
                    velocity=data['dq'])
    code, _, err = run_cli(capsys, 'residual', model_file, bag, '--config', config, '--quiet')
    assert code == 2 and 'joint_1' in err and 'opposite sign' in err, err
    code, _, err = run_cli(capsys, 'residual', model_file, bag, '--config', config, '--quiet',
                           '--force')
    assert code == 0, err
    right = write_run(root / 'right_31', data)
    code, _, err = run_cli(capsys, 'residual', model_file, right, '--config', config, '--quiet')
    assert code == 0, err
    # recorded at the Moon's gravity: said, and served at it with --gravity
    moon = write_run(root / 'moon', free_run(35, segments=2, gravity=1.62))
    code, _, err = run_cli(capsys, 'residual', model_file, moon, '--config', config, '--quiet')
    assert code == 2 and '--gravity' in err and '9.81' in err, err
    code, _, err = run_cli(capsys, 'residual', model_file, moon, '--config', config, '--quiet',
                           '--gravity', '1.62')
    assert code == 0, err
    # thresholds in use: calibrated on no-contact runs, in a folder of its own
    (root / 'own').mkdir()
    model_file = root / 'own' / 'model.yaml'
    model_file.write_text(fitted[0].read_text())
    free = [write_run(root / f'own_free_{s}', free_run(s, segments=3)) for s in (33, 34)]
    code, _, err = run_cli(capsys, 'residual', model_file, *free, '--config', config,
                           '--calibrate', '--quiet')
    assert code == 0 and (model_file.parent / contact.FILE_NAME).is_file(), err
    # a "no-contact" set that holds a push
    pushed = write_run(root / 'pushed', free_run(32, segments=2,
                                                 pushes=[(1.0, 0.6, (3 * PUSH_N, 0, 0))]))
    out_file = root / 'contaminated.yaml'
    code, _, err = run_cli(capsys, 'residual', model_file, right, pushed, '--config', config,
                           '--calibrate', '--out', out_file, '--quiet')
    assert code == 2 and 'contact episode' in err and 'pushed' in err, err
    assert not out_file.exists()
    code, _, err = run_cli(capsys, 'residual', model_file, right, '--config', config,
                           '--calibrate', '--out', out_file, '--quiet')
    assert code == 0 and out_file.is_file(), err
    code, _, err = run_cli(capsys, 'residual', model_file, right, pushed, '--config', config,
                           '--calibrate', '--out', root / 'forced.yaml', '--quiet',
                           '--allow-contacts')
    assert code == 0, err
    # thresholds in use too tight for the arm (false alarms on free motion): the episodes
    # lie within the recording's own residual, so the set calibrates (why one calibrates)
    path = model_file.parent / contact.FILE_NAME
    th = contact.ContactThresholds.load(path)
    th.with_settings(standstill=th.standstill / 2, base=th.base / 2).save(path)
    code, out, err = run_cli(capsys, 'residual', model_file, right, '--config', config)
    assert code == 0 and 'contact episodes: 0' not in out, out
    code, _, err = run_cli(capsys, 'residual', model_file, right, '--config', config,
                           '--calibrate', '--out', root / 'tight.yaml')
    assert code == 0 and 'within the recording\'s own residual' in err, err


def test_constant_thresholds_as_contact_thresholds_flag_as_the_observer_did(served):
    """ContactThresholds.constant (persistence 0, no tracker) is the node's old
    contact_thresholds parameter: the same residual and the same flag on every sample."""
    data = free_run(16, segments=1, pushes=[(1.0, 0.5, (PUSH_N, 0.0, 0.0))])
    values = np.array([0.05, 0.05, 0.05, 0.05, 0.02, np.inf])
    old = run_stream(ResidualStream(served, GAINS, values), data['t'], data['q'], data['dq'],
                     data['tau'])
    new = run_stream(ResidualStream(served, GAINS, contact.ContactThresholds.constant(
        JOINTS, values)), data['t'], data['q'], data['dq'], data['tau'])
    assert old['contact'].any() and not old['contact'].all()
    np.testing.assert_array_equal(new['contact'], old['contact'])
    np.testing.assert_array_equal(new['residual'], old['residual'])


def test_a_single_sample_spike_does_not_set_the_thresholds():
    """The issue's case: one 34 N·m sample at a hard stop set the shoulder threshold. The
    calibration judges the residual that persists, so the spike leaves the bands as they
    were without it."""
    rng = np.random.default_rng(3)
    n_samples = 4000
    t = np.arange(n_samples) / 100.0
    r = rng.normal(0, 0.5, (n_samples, 6))
    still = np.arange(n_samples) < n_samples // 2
    speed = np.where(still, 0.0, rng.uniform(0.1, 1.0, n_samples))
    run = contact.CalibrationRun(t, r, np.where(still[:, None], 0.0, 0.5), speed,
                                 rng.uniform(0, 3, n_samples), still,
                                 np.zeros(n_samples, dtype=bool))
    clean = contact.calibrate([run], JOINTS)
    spiked = r.copy()
    spiked[[500, 3000], 1] = 34.0                         # one at rest, one in motion
    dirty = contact.calibrate([contact.CalibrationRun(
        t, spiked, run.velocity, speed, run.acceleration, still, run.settling)], JOINTS)
    np.testing.assert_allclose(dirty.standstill, clean.standstill, rtol=0.02)
    np.testing.assert_allclose(dirty.base, clean.base, rtol=0.02, atol=1e-6)
    assert dirty.standstill[1] == clean.standstill[1]     # the window removes it entirely


def test_calibration_on_an_arm_that_holds_still_gives_the_standstill_band():
    """A no-contact recording of an arm at rest but for brief jerks: motion samples, but no
    speed/acceleration bin with enough of them. It crashed (IndexError); now the standstill
    band serves in motion too and the calibration says so. With too few samples at rest
    as well, one line says what is missing."""
    rng = np.random.default_rng(4)
    n_samples = 3000
    t = np.arange(n_samples) / 100.0
    r = rng.normal(0, 0.5, (n_samples, 6))
    still = np.ones(n_samples, dtype=bool)
    jerks = rng.choice(n_samples, 60, replace=False)          # scattered single samples
    still[jerks] = False
    speed = np.where(still, 0.0, rng.uniform(0.05, 2.0, n_samples))
    acceleration = np.where(still, 0.0, rng.uniform(0.0, 30.0, n_samples))
    run = contact.CalibrationRun(t, r, np.where(still[:, None], 0.0, 0.5), speed,
                                 acceleration, still, np.zeros(n_samples, dtype=bool))
    th = contact.calibrate([run], JOINTS, bins=8, min_bin=20)
    np.testing.assert_allclose(th.base, th.standstill)
    assert np.all(th.per_velocity == 0) and np.all(th.per_acceleration == 0)
    assert 'standstill band is used in motion' in th.calibration['note']
    assert 'of standstill' not in th.calibration['note']     # it had plenty
    few = contact.CalibrationRun(t[:40], r[:40], run.velocity[:40], speed[:40] + 0.1,
                                 acceleration[:40] + rng.uniform(0, 30, 40),
                                 np.zeros(40, dtype=bool), np.zeros(40, dtype=bool))
    with pytest.raises(ConfigError, match='too few calibration samples'):
        contact.calibrate([few], JOINTS, bins=8, min_bin=20)


def test_calibration_plane_grows_only_with_what_its_bins_show():
    """The band's plane over the speed/acceleration bins' needs: from one bin (a short
    calibration) the need sits on the intercept, its slopes 0; bins whose need falls with
    speed, at one acceleration, keep the intercept alone too (the acceleration's column
    is the intercept's there); rising needs give a slope; a NaN need is an error."""
    one = contact._envelope(np.array([0.5]), np.array([2.0]), np.array([0.3]),
                            np.array([1.0]), np.array([1.0]))
    np.testing.assert_allclose(one, [1.0, 0.0, 0.0], atol=1e-12)
    falling = contact._envelope(np.array([0.1, 0.5, 0.9]), np.ones(3),
                                np.array([0.0, 0.3, 0.7]), np.full(3, 0.5),
                                np.array([2.0, 1.5, 1.0]))
    np.testing.assert_allclose(falling, [2.0, 0.0, 0.0], atol=1e-12)
    rising = contact._envelope(np.array([0.1, 0.5, 0.9]), np.array([1.0, 3.0, 2.0]),
                               np.array([0.0, 0.3, 0.7]), np.array([0.5, 2.0, 1.5]),
                               np.array([1.0, 1.4, 1.8]))
    np.testing.assert_allclose(rising[1:], [1.0, 0.0], atol=1e-9)
    assert rising[0] >= 0.9 - 1e-9
    with pytest.raises(ValueError, match='NaN'):
        contact._envelope(np.array([0.5]), np.array([2.0]), np.array([0.3]),
                          np.array([1.0]), np.array([np.nan]))


def test_a_start_from_rest_allows_the_friction_passing_from_held_to_sliding():
    """On the real UR10e the fit's own thresholds flagged a wrist for 94 ms as the arm
    started from rest: for a moment after a start the joints' friction is neither what
    they held nor the model's sliding friction. For ``settle_time`` after a standstill
    every joint's band holds its holding bound; the same residual later in the motion is
    a contact. The calibration takes out what the detector allows, so a start's residual
    does not widen the motion band."""
    n, rate, h = len(JOINTS), 100.0, 2.0
    th = contact.ContactThresholds(JOINTS, 1.0, 1.0, 0.0, 0.0, holding_bounds=h)
    t = np.arange(int(3.0 * rate)) / rate
    moving = t >= 1.0
    dq = np.where(moving[:, None], 0.2, 0.0) * np.ones(n)     # past the breakaway speed

    def flags(after_start):
        det = contact.ContactDetector(th)
        r = np.zeros((len(t), n))
        r[~moving] = 0.5                                       # held at rest: tracked
        late = (t >= 1.0 + after_start) & (t < 1.25 + after_start)
        r[late, 0] = -1.8
        out = [det.update(float(tk), dq[k], r[k])[1] for k, tk in enumerate(t)]
        return np.asarray(out), det

    at_start, det = flags(0.0)
    assert not at_start.any(), t[at_start][:3]
    later, _ = flags(0.5)
    assert later.any() and t[later][0] >= 1.5 + th.persistence - 1e-9
    assert not det.starting and det.allowance.sum() == 0     # past the window, all moving
    # calibration: what a start shows is what the detector allows there
    rng = np.random.default_rng(5)
    m = 8000
    tc = np.arange(m) / rate
    starting = (np.arange(m) % 4000) < 30                     # two starts of 0.3 s
    r = rng.normal(0, 0.1, (m, n)) + np.where(starting, h, 0.0)[:, None]
    vel = np.full((m, n), 0.3)
    speed, acc = np.full(m, 0.3 * np.sqrt(n)), rng.uniform(0, 2, m)
    still, settling = np.zeros(m, dtype=bool), np.zeros(m, dtype=bool)
    seen = contact.calibrate([contact.CalibrationRun(tc, r, vel, speed, acc, still, settling,
                                                     starting=starting)], JOINTS,
                             holding_bounds=h)
    blind = contact.calibrate([contact.CalibrationRun(tc, r, vel, speed, acc, still,
                                                      settling)], JOINTS, holding_bounds=h)
    assert np.all(seen.base < 0.5 * blind.base), (seen.base, blind.base)


def _one_by_one(stream, t, q, dq, tau):
    """The node's path: every sample through ResidualStream.step, the detector's
    attributes read after each (what run_stream computes at once)."""
    rows = []
    det = stream.detector
    for k in range(len(t)):
        v = None if dq is None or not np.all(np.isfinite(dq[k])) else dq[k]
        _, vel, _, r, c = stream.step(float(t[k]), q[k], v, tau[k])
        row = {'residual': r, 'contact': c, 'velocity': vel}
        if det is not None:
            row.update({key: np.copy(getattr(det, 'joints_flagged' if key == 'flagged' else key))
                        for key in contact.ContactDetector.RUN_FIELDS
                        if key not in ('residual', 'contact')})
        rows.append(row)
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}


def _replay_case(seed):
    """A run with holds, starts and a push, a gap and a stamp that goes back (observer
    restarts), and messages without velocity (q̇ estimated)."""
    data = free_run(seed, segments=2, pushes=[(1.0, 0.5, (PUSH_N, 0.0, 0.0))])
    t, dq = data['t'].copy(), data['dq'].copy()
    n = len(t)
    t[n // 3:] += 0.3                                   # a gap: restart
    t[n // 2] = t[n // 2 - 1] - 0.001                   # back in time: restart
    t[n // 2 + 1:] += 0.001
    dq[n // 4:n // 4 + 200] = np.nan                    # estimated from q
    dq[2 * n // 3:] = np.nan
    return t, data['q'], dq, data['tau']


@pytest.mark.parametrize('bands', ['probe', 'calibrated', 'constant', 'none'])
def test_a_recording_replayed_at_once_is_what_the_node_computes_sample_by_sample(
        served, thresholds, bands):
    """run_stream computes the observer over all samples at once, and the detector too
    when it cannot flag (a calibration's probe): the same residual, velocity, band,
    holding offset, states and flags as the node's step by step, and the same state
    after (the next message gives the same answer)."""
    t, q, dq, tau = _replay_case(31)
    th = {'probe': thresholds.with_settings(standstill=np.full(6, np.inf),
                                            base=np.full(6, np.inf)),
          'calibrated': thresholds, 'constant': np.full(6, 0.05), 'none': None}[bands]
    fast, slow = ResidualStream(served, GAINS, th), ResidualStream(served, GAINS, th)
    if fast.detector is not None:       # the probe takes the detector's quiet path
        assert fast.detector.never_flags() == (bands == 'probe')
    at_once = run_stream(fast, t[:-1], q[:-1], dq[:-1], tau[:-1])
    by_step = _one_by_one(slow, t[:-1], q[:-1], dq[:-1], tau[:-1])
    assert fast.observer.restarts == slow.observer.restarts == 2
    assert set(at_once) == set(by_step)
    if fast.detector is not None:
        for name in ('_t0', '_t', '_still_since', '_moving_since', 'standstill', 'starting'):
            assert getattr(fast.detector, name) == getattr(slow.detector, name), name
        for name in ('_ddq', '_dq', 'offset', 'band', 'allowance'):
            np.testing.assert_allclose(getattr(fast.detector, name),
                                       getattr(slow.detector, name), rtol=1e-12, atol=1e-12)
        # what it keeps is its own, not a view of what it returned
        assert not np.shares_memory(fast.detector._dq, at_once['velocity'])
    for key, expected in by_step.items():
        if expected.dtype == bool:
            np.testing.assert_array_equal(at_once[key], expected, err_msg=key)
        else:
            np.testing.assert_allclose(at_once[key], expected, rtol=1e-12, atol=1e-12,
                                       err_msg=key)
    if bands in ('calibrated', 'constant'):
        assert at_once['contact'].any() and not at_once['contact'].all()
    if bands in ('probe', 'calibrated'):
        assert at_once['standstill'].any() and at_once['starting'].any()
        assert np.abs(at_once['offset']).max() > 0          # the holding tracker moved
    v = None
    last = [s.step(float(t[-1]), q[-1], v, tau[-1]) for s in (fast, slow)]
    for a, b in zip(*last):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    empty = run_stream(ResidualStream(served, GAINS, th), t[:0], q[:0], dq[:0], tau[:0])
    assert set(empty) == set(by_step) and all(len(v) == 0 for v in empty.values())


def test_observer_run_continues_from_and_leaves_the_state_update_does(served):
    """MomentumObserver.run on a stream already started by update, and update after it:
    the residuals of update alone, and the restarts counted the same (the first sample
    run takes is the one after the gap)."""
    t, q, dq, tau = _replay_case(32)
    for split in (len(t) // 3, len(t) // 5):        # at the gap, and within a stretch
        a, b = served.observer(GAINS), served.observer(GAINS)
        for k in range(split):
            a.update(float(t[k]), q[k], dq[k], tau[k])
        residual, velocity, contact_flags, restarts = a.run(t[split:-1], q[split:-1], None,
                                                            tau[split:-1])
        expected = [b.update(float(t[k]), q[k], dq[k] if k < split else None, tau[k])[1]
                    for k in range(len(t) - 1)]
        np.testing.assert_allclose(residual, expected[split:], rtol=1e-12, atol=1e-12)
        assert not contact_flags.any() and restarts[-1] == a.restarts == b.restarts == 2
        np.testing.assert_allclose(a.update(float(t[-1]), q[-1], None, tau[-1])[1],
                                   b.update(float(t[-1]), q[-1], None, tau[-1])[1],
                                   rtol=1e-12, atol=1e-12)
    empty = a.run(t[:0], q[:0], None, tau[:0])
    assert [x.shape for x in empty] == [(0, 6), (0, 6), (0,), (0,)]


def test_a_joint_angle_wrapped_into_one_turn_is_no_motion_for_the_velocity_estimate(served):
    """A driver that reports a continuous joint within one turn makes its angle jump by
    2π between two samples. The dynamics repeat every turn, but the velocity estimated
    from q (messages without velocity) read the jump as a motion of 2π / dt (1257 rad/s
    at 200 Hz): the momentum jumped and the residual flagged contact. The same run with
    its first and fourth joints wrapped, by update and by run, gives the residual of the
    continuous angles."""
    data = free_run(5, segments=2)
    t, q, tau = data['t'], data['q'], data['tau']
    wrapped = q.copy()
    n = len(t)
    wrapped[n // 3:, 0] -= 2 * np.pi                    # one turn down, then up again
    wrapped[2 * n // 3:, 0] += 2 * np.pi
    wrapped[n // 2:, 3] += 2 * np.pi                    # a 0-2π driver's wrap, upward
    plain, again = served.observer(GAINS), served.observer(GAINS)
    expected = np.array([plain.update(float(t[k]), q[k], None, tau[k])[1] for k in range(n)])
    got = np.array([again.update(float(t[k]), wrapped[k], None, tau[k])[1]
                    for k in range(n)])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert np.abs(expected).max() < 1.0            # nothing to flag on this run
    residual, velocity, _, _ = served.observer(GAINS).run(t, wrapped, None, tau)
    np.testing.assert_allclose(residual, expected, rtol=1e-9, atol=1e-9)
    assert np.abs(velocity).max() < 10.0


@pytest.mark.parametrize('fault, says', [
    (lambda v: v * 0.0, 'zero while the angle moves'),
    (np.degrees, 'degrees per second?'),
    (lambda v: v * [1, -1, 1, 1, 1, 1], 'joint_2: of the opposite sign'),
])
def test_a_published_velocity_that_is_not_the_rate_of_the_angles_is_not_used(
        served, thresholds, fitted, root, capsys, fault, says):
    """A driver whose JointState.velocity is all zeros, in degrees per second, or of the
    opposite sign on one joint: the residual took it as q̇ and flagged 2-4 contact
    episodes on a run without contact, with no word. The command judges the whole
    recording as it reads it and never uses it; the node's stream finds within a few
    0.5 s windows of motion that it is not the rate of the angles, says so, and
    estimates q̇ from q from then on; sample by sample as at once."""
    data = free_run(24, segments=3)
    t, q, tau = data['t'], data['q'], data['tau']
    right = run_stream(ResidualStream(served, GAINS, thresholds), t, q, data['dq'], tau)
    assert not right['contact'].any()
    wrong = fault(data['dq'])
    stream = ResidualStream(served, GAINS, thresholds)
    out = run_stream(stream, t, q, wrong, tau)
    assert says in stream.velocity_check.note and 'estimated from the angles' in \
        stream.velocity_check.note
    stop = VelocityCheck(JOINTS).run(t, q, wrong)        # the first sample estimated
    moving = np.flatnonzero(np.abs(data['dq']).max(axis=1) > 0.05)[0]
    assert t[stop] - t[moving] < 3.0
    assert not out['contact'][t > t[stop] + 0.5].any()   # the observer settled
    live = ResidualStream(served, GAINS, thresholds)
    steps = np.array([live.step(float(t[k]), q[k], wrong[k], tau[k])[3]
                      for k in range(len(t))])
    np.testing.assert_allclose(steps, out['residual'], rtol=1e-9, atol=1e-9)
    model_file, config = fitted
    bag = write_run(root / f'velocity_{says[:6].replace(" ", "_")}',
                    dict(data, dq=wrong))
    th_file = root / f'velocity_{says[:6].replace(" ", "_")}.yaml'
    thresholds.save(th_file)
    code, text, err = run_cli(capsys, 'residual', model_file, bag, '--config', config,
                              '--thresholds', th_file)
    assert code == 0, err
    assert 'contact episodes: 0' in text and says in err, (text, err)
