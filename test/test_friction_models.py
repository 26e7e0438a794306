"""Friction models a user can ask for, and the held-out choice between them (issue 23).

Simulated recordings of the humanoid arm (pinocchio RNEA of a Fourier trajectory,
test_cli_full.fourier_data) carry one friction kind each, with the model's own smooth
sign (ε = 0.01 rad/s): ``friction='auto'`` picks a model whose held-out error is that
of the true kind (the true kind itself where its signature is strong) and recovers its
coefficients; a model given explicitly (``fit_full``, ``--friction``, the config key)
is the one fitted; negative friction coefficients are never written.
"""

import numpy as np
import pytest
import yaml

from arm_dyn_id.config import ArmConfig
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.identification.full_dynamics import AUTO_FRICTION, fit_full
from arm_dyn_id.identification.pipeline import fit_full_samples
from arm_dyn_id.model.dynamics import DynamicsModel, FrictionModel, parse_friction
from arm_dyn_id.model.robot import RobotModel
from test_cli_fit import JOINTS, K_E, NOISE, URDF, config_doc
from test_cli_full import fourier_data, run, write_plain_bag

FC = np.array([0.3, 0.3, 0.2, 0.1, 0.05, 0.03])
FV = np.array([0.06, 0.05, 0.03, 0.02, 0.01, 0.01])
FO = np.array([0.3, -0.2, 0.1, 0.05, -0.05, 0.02])
FL = 0.05


@pytest.fixture(scope='module')
def robot():
    return RobotModel.from_urdf(URDF, joints=JOINTS)


@pytest.fixture(scope='module')
def motion(robot):
    """Rigid-body torques of a 20 s Fourier trajectory at 200 Hz, and noise."""
    d = fourier_data(seed=3, rate=200.0, periods=2, robot=robot)
    rng = np.random.default_rng(11)
    d['noise'] = rng.standard_normal(d['q'].shape) * NOISE
    return d


def true_friction(kind, dq, rigid):
    """(friction torques (N, n), true coefficients {term: (n,)}) of one kind."""
    s = np.tanh(dq / 0.01)
    if kind == 'coulomb,viscous':
        return FC * s + FV * dq, {'coulomb': FC, 'viscous': FV}
    if kind == 'coulomb,viscous,offset':
        return FC * s + FV * dq + FO, {'coulomb': FC, 'viscous': FV, 'offset': FO}
    if kind == 'coulomb,viscous,stribeck':
        fs = 2 * FC
        return (FC * s + FV * dq + fs * s * np.exp(-(dq / 0.05) ** 2),
                {'coulomb': FC, 'viscous': FV, 'stribeck': fs})
    if kind == 'coulomb_directional,viscous':
        return (1.6 * FC * np.maximum(s, 0) + 0.4 * FC * np.minimum(s, 0) + FV * dq,
                {'coulomb_positive': 1.6 * FC, 'coulomb_negative': 0.4 * FC, 'viscous': FV})
    assert kind == 'coulomb,viscous,load_coulomb'
    return (FC * s + FV * dq + FL * np.abs(rigid) * s,
            {'coulomb': FC, 'viscous': FV, 'coulomb_load': np.full(6, FL)})


def recording(motion, kind):
    friction, truth = true_friction(kind, motion['dq'], motion['rigid'])
    return motion['rigid'] + friction + motion['noise'], truth


@pytest.mark.parametrize('kind', AUTO_FRICTION)
def test_auto_explains_each_kind_and_recovers_it(robot, motion, kind):
    tau, truth = recording(motion, kind)
    model, validation = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                                 friction='auto')
    chosen = model.metadata['selection']['friction']
    scores = chosen['scores']
    assert set(scores) == set(AUTO_FRICTION)
    # the chosen model explains the data as well as the true kind does
    assert scores[chosen['chosen']] <= 1.02 * scores[kind], chosen
    # with the smooth sign's own width: the narrowest tried
    assert chosen['smooth_velocity']['chosen'] == 0.01, chosen['smooth_velocity']
    if kind != 'coulomb,viscous':
        # a strong signature (0.3 N·m offsets, 1.6x / 0.4x directions, 2x Stribeck,
        # 5 % of the load) is found, and a coulomb+viscous model leaves it unexplained
        assert chosen['chosen'] == kind, chosen
        assert scores['coulomb,viscous'] > 1.2 * scores[kind], chosen
    if chosen['chosen'] == kind:
        table = model.friction_table()
        for term, value in truth.items():
            # joints 1-5 (joint 6's torques are tiny beside its noise)
            tol = 0.3 * np.abs(value[:5]) + (0.03 if term == 'viscous' else 0.02)
            assert np.all(np.abs(table[term][:5] - value[:5]) <= tol), (term, table[term])
    # the choice is stored in the model file
    doc = yaml.safe_load(model.to_yaml())
    assert doc['selection']['friction']['chosen'] == chosen['chosen']
    assert doc['friction']['model'] == parse_friction(chosen['chosen']).to_dict()


def test_auto_widens_the_coulomb_term_for_a_friction_that_rises_slowly(robot, motion,
                                                                       tmp_path):
    """A Coulomb level rising over 0.2 rad/s (a Panda's joints rise over 0.1-0.4): a sharp
    sign leaves most of it unexplained; ``auto`` tries the smooth sign's width before the
    terms, keeps a wide one, explains the record far better than the sharp sign and near
    the true width, and the model file serves it."""
    tau = motion['rigid'] + 3 * FC * np.tanh(motion['dq'] / 0.2) + FV * motion['dq'] + \
        motion['noise']
    model, validation = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                                 friction='auto')
    width = model.metadata['selection']['friction']['smooth_velocity']
    assert width['chosen'] in (0.16, 0.32), width
    assert width['scores']['0.01'] > 1.5 * width['scores'][f'{width["chosen"]:g}'], width
    assert model.friction_model.smooth_velocity == width['chosen']
    # a Stribeck hump inside a Coulomb term this wide is not tried
    assert model.metadata['selection']['friction']['not_tried'] == \
        ['coulomb,viscous,stribeck']
    _, true_width = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                             friction=FrictionModel(coulomb='tanh', smooth_velocity=0.2))
    sharp = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                     friction='coulomb,viscous')[1]

    def held(v):
        return np.mean([m['rmse_percent'] for m in v['held_out'].values()])
    # the widths tried are 2x apart: 0.16 against the true 0.2 leaves a little
    assert held(validation) <= min(2.5 * held(true_width), 0.25 * held(sharp)), \
        (held(validation), held(true_width), held(sharp))
    model.save(tmp_path / 'model.yaml')
    again = DynamicsModel.load(tmp_path / 'model.yaml', urdf=URDF)
    assert again.friction_model.smooth_velocity == width['chosen']
    assert 'eps ' + f'{width["chosen"]:g}' in again.friction_model.describe()


def test_a_wider_coulomb_term_must_earn_its_width():
    """The width kept: the narrowest within 1.01x of the best score, and wider than 0.01
    rad/s only at 0.95x the narrowest's score or less (the real UR10e's 30 s run: 3.56 at
    0.02 against 3.60 at 0.01 keeps 0.01)."""
    from arm_dyn_id.identification.full_dynamics import SMOOTH_VELOCITIES, _chosen_width

    def scores(*values):
        return dict(zip(SMOOTH_VELOCITIES, values))
    assert _chosen_width(scores(3.60, 3.556, 3.79, 4.79, 6.61, 8.74)) == 0.01
    assert _chosen_width(scores(3.93, 3.73, 3.32, 2.66, 2.21, 3.03)) == 0.16
    # within 1.01x of the best: the narrower
    assert _chosen_width(scores(4.0, 3.0, 2.5, 2.0, 1.99, 2.2)) == 0.08
    # the best by less than 5 %: the narrowest
    assert _chosen_width(scores(2.0, 1.95, 1.92, 1.91, 1.93, 2.0)) == 0.01
    assert _chosen_width(scores(2.0, 1.89, 1.92, 1.95, 1.98, 2.0)) == 0.02


def test_auto_never_keeps_a_term_that_moves_gravity_more_than_the_urdf_could_be_off():
    """A right Kinova (masses 10 % and centres of mass 1.5 cm off its URDF) whose friction
    rises over 0.1-0.4 rad/s, shifted with direction, with a sensor's offset
    (``arm_bags.soft_friction``): an offset term scores 0.4x the simplest candidate's
    held-out error by moving the fitted gravity 2.5x the URDF's own (offsets of -3 and
    +1.7 N·m; gravity 17 % off the truth). Such a term is set aside whatever it scores
    (GRAVITY_SHIFT_CAP); the direction-dependent term, which keeps gravity, is chosen."""
    from arm_bags import Arm, example_robot, realistic_fourier, soft_friction, torque_scale
    from arm_dyn_id.identification.full_dynamics import GRAVITY_SHIFT_CAP
    from arm_dyn_id.model.robot import carries_gravity
    urdf = example_robot('kinova_description/robots/kinova.urdf')
    if urdf is None:
        pytest.skip('example-robot-data is not installed')
    arm = Arm(urdf).perturb(np.random.default_rng(101), mass=0.1, com=0.015)
    kinova = RobotModel.from_urdf(str(urdf), joints=list(arm.joints))
    t, q, tau = realistic_fourier(arm, None, np.random.default_rng(1), 200.0,
                                  friction=soft_friction(torque_scale(arm),
                                                         np.random.default_rng(8)))
    model, _ = fit_full(kinova, t, q, tau, methods=('wls',), friction='auto')
    chosen = model.metadata['selection']['friction']
    offset = 'coulomb,viscous,offset'
    assert chosen['gravity_shift'][offset] > GRAVITY_SHIFT_CAP, chosen
    assert chosen['scores'][offset] < 0.5 * chosen['scores']['coulomb,viscous'], chosen
    assert chosen['chosen'] != offset and offset in chosen['set_aside'], chosen
    poses = np.random.default_rng(999).uniform(*arm.box(0.5), size=(200, arm.n))
    truth = arm.gravity(poses, {e: 0.01 for e in arm.extra})
    error = np.sqrt(np.mean((np.asarray(model.gravity_torques(poses)) - truth) ** 2, axis=0))
    loaded = carries_gravity(np.sqrt(np.mean(truth ** 2, axis=0)))
    assert np.all(error[loaded] < 0.04 * np.abs(truth).max(axis=0)[loaded]), error


def test_auto_keeps_gravity_when_a_constant_term_would_trade_for_it(robot):
    """A geared arm's rotor inertia (0.2 kg·m², which the model lacks) and no offset: an
    offset term explains the mismatch a little (held-out 0.84x) by moving the gravity
    torque (joint 3's fitted gravity 78 % off). Auto sets it aside and says so; the
    model's gravity stays near the truth. A true offset (the test above) is still
    chosen: it halves the error."""
    from arm_dyn_id.identification.full_dynamics import DECISIVE, GRAVITY_SHIFT
    d = fourier_data(seed=4, rate=200.0, periods=2, robot=robot)
    tau = d['tau'] + 0.2 * d['ddq']
    model, _ = fit_full(robot, d['t'], d['q'], tau, methods=('wls',), friction='auto')
    chosen = model.metadata['selection']['friction']
    scores, shifts = chosen['scores'], chosen['gravity_shift']
    simplest = scores['coulomb,viscous']
    # the offset explains the recording better than the simplest, not decisively
    assert DECISIVE * simplest < scores['coulomb,viscous,offset'] < simplest, chosen
    assert shifts['coulomb,viscous,offset'] > 2 * GRAVITY_SHIFT, chosen
    assert 'coulomb,viscous,offset' in chosen['set_aside']
    assert chosen['chosen'] not in chosen['set_aside']
    assert shifts[chosen['chosen']] <= GRAVITY_SHIFT
    poses = d['q_true'][::20]
    truth = robot.gravity_torques(poses)
    error = np.sqrt(np.mean((np.asarray(model.gravity_torques(poses)) - truth) ** 2, axis=0))
    # joints 1-4 carry the arm's gravity (joints 5-6 a few percent of it); the rotor
    # inertia left out (armature=False) costs joint 3 15.5 % (10.6 % with the slow
    # samples kept; 0.3 % and 1.7 % with it fitted, armature='auto')
    assert np.all(error[:4] < 0.2 * np.sqrt(np.mean(truth ** 2, axis=0))[:4]), error
    doc = yaml.safe_load(model.to_yaml())
    assert doc['selection']['friction']['set_aside'] == chosen['set_aside']
    # the fit says what it set aside and by how much
    lines = []
    fit_full_samples(robot, d['t'], d['q'], tau, methods=('wls',), phase=lines.append,
                     armature=False)
    aside = [line for line in lines if 'set aside' in line]
    shown = f'coulomb,viscous,offset {100 * shifts["coulomb,viscous,offset"]:.0f} %'
    assert aside and shown in aside[0] and 'gravity' in aside[0], lines


def test_given_friction_is_fitted(robot, motion):
    tau, _ = recording(motion, 'coulomb,viscous,offset')
    model, _ = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                        friction='coulomb_directional,viscous,stribeck')
    assert model.friction_model == FrictionModel(coulomb='tanh', smooth_velocity=0.01,
                                                 directional=True, stribeck=True)
    assert model.metadata['selection']['friction']['chosen'] == 'given'
    assert model.friction_names[:4] == ('fcp1', 'fcn1', 'fv1', 'fs1')
    with pytest.raises(ConfigError, match='coulomb_directionl'):
        fit_full(robot, motion['t'], motion['q'], tau, friction='coulomb_directionl')


def test_load_and_directional_models_serve_what_they_fitted(robot, motion):
    """The file round trip keeps the new terms, and torques() includes the load term."""
    tau, _ = recording(motion, 'coulomb,viscous,load_coulomb')
    model, _ = fit_full(robot, motion['t'], motion['q'], tau, methods=('wls',),
                        friction='coulomb_directional,viscous,load_coulomb')
    again = DynamicsModel.from_dict(yaml.safe_load(model.to_yaml()), urdf=URDF)
    assert again.friction_model == model.friction_model
    rows = slice(1000, 1400)
    q, dq, ddq = motion['q_true'][rows], motion['dq'][rows], motion['ddq'][rows]
    np.testing.assert_allclose(again.torques(q, dq, ddq), model.torques(q, dq, ddq))
    load = model.nominal_load(q, dq, ddq)
    np.testing.assert_allclose(load, motion['rigid'][rows], atol=1e-8)
    fl = model.friction_table()['coulomb_load']
    np.testing.assert_allclose(model.friction_torques(dq, q, ddq) - model.friction_torques(dq),
                               fl * np.abs(load) * np.tanh(dq / 0.01), atol=1e-9)
    # prediction on the true states is near the truth (load term included)
    err = model.torques(q, dq, ddq) - (tau[rows] - motion['noise'][rows])
    assert np.all(np.sqrt(np.mean(err ** 2, axis=0))[:5] < 0.1)


@pytest.mark.parametrize('friction', ['auto', 'coulomb,viscous,stribeck,load_coulomb',
                                      'coulomb_directional,viscous,offset'])
def test_negative_friction_never_written(robot, motion, friction):
    """Data whose best unbounded fit has negative viscous and Coulomb friction."""
    s = np.tanh(motion['dq'] / 0.01)
    tau = motion['rigid'] - 0.05 * motion['dq'] - 0.05 * s + motion['noise']
    # the consistent fit (SDP) bounds every signed term, as the bounded refit of WLS does
    for methods in (('wls',),) + ((('consistent',),) if 'directional' in friction else ()):
        model, _ = fit_full(robot, motion['t'], motion['q'], tau, methods=methods,
                            friction=friction)
        doc = yaml.safe_load(model.to_yaml())
        signed = [v for name, v in zip(doc['friction']['names'], doc['friction']['values'])
                  if name.rstrip('0123456789') in FrictionModel.POSITIVE]
        assert min(signed) >= 0.0, (methods, doc['friction'])


def test_config_key_and_its_errors(robot, motion, tmp_path):
    params = config_doc()['/**']['ros__parameters']
    assert ArmConfig.from_params(params).friction == 'auto'
    config = ArmConfig.from_params(dict(params, friction='Coulomb, viscous, offset',
                                        armature=False))
    assert config.friction == 'coulomb,viscous,offset'
    with pytest.raises(ConfigError, match="parameter friction.*'dry'"):
        ArmConfig.from_params(dict(params, friction='coulomb,dry'))
    with pytest.raises(ConfigError, match='parameter armature'):
        ArmConfig.from_params(dict(params, armature='maybe'))
    tau, _ = recording(motion, 'coulomb,viscous')
    fitted = fit_full_samples(robot, motion['t'], motion['q'], tau, config=config,
                              methods=('wls',))
    assert fitted.model.friction_model.offset
    assert fitted.model.metadata['selection']['friction']['chosen'] == 'given'


def test_cli_friction_option(motion, tmp_path, capsys):
    tau, _ = recording(motion, 'coulomb_directional,viscous')
    data = dict(motion, tau=tau, current=tau / K_E)
    bag = write_plain_bag(tmp_path / 'directional', data)
    params = config_doc()['/**']['ros__parameters']
    cfg = tmp_path / 'arm.yaml'
    cfg.write_text(yaml.safe_dump({'/**': {'ros__parameters': dict(
        params, friction='coulomb,viscous,offset')}}))
    # the option wins over the config's key
    code, out, err = run(capsys, 'fit', bag, '--config', cfg, '--out', tmp_path / 'given',
                         '--methods', 'wls', '--dynamics', 'full', '--no-report',
                         '--friction', 'coulomb_directional,viscous')
    assert code == 0, err
    doc = yaml.safe_load((tmp_path / 'given' / 'model.yaml').read_text())
    assert doc['friction']['model']['directional'] and not doc['friction']['model']['offset']
    # auto from the command line: the choice and its scores are printed and stored
    code, out, err = run(capsys, 'fit', bag, '--config', cfg, '--out', tmp_path / 'auto',
                         '--methods', 'wls', '--dynamics', 'full', '--no-report',
                         '--friction', 'auto')
    assert code == 0, err
    assert 'friction: coulomb_directional,viscous' in out + err, [
        line for line in err.splitlines() if 'friction:' in line]
    assert 'held-out' in out + err
    doc = yaml.safe_load((tmp_path / 'auto' / 'model.yaml').read_text())
    assert doc['selection']['friction']['chosen'] == 'coulomb_directional,viscous'
    code, out, err = run(capsys, 'fit', bag, '--config', cfg, '--out', tmp_path / 'bad',
                         '--friction', 'colomb')
    assert code != 0 and "'colomb'" in err and '--friction' in err


def test_auto_armature_is_kept_for_a_clear_gain_only():
    """A right recording of an arm without rotor inertia (the humanoid, its masses and
    centres of mass off the URDF, sharp friction): the rotor inertias lower the held-out
    score a little (0.96x) and cost the gravity (5.6 -> 8.4 % off), so ``auto`` leaves
    them out; with 0.3 kg·m² per joint they are kept."""
    from arm_bags import Arm, realistic_fourier
    from arm_dyn_id.identification.full_dynamics import ARMATURE_GAIN
    from arm_dyn_id.validation.check import holding_friction
    arm = Arm(URDF).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    robot = RobotModel.from_urdf(URDF, joints=list(arm.joints))
    for armature, kept in ((0.0, False), (0.3, True)):
        t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(0),
                                      200.0, armature=armature)
        model, _ = fit_full(robot, t, q, tau, methods=('wls',), armature='auto')
        chosen = model.metadata['selection']['armature']
        scores = chosen['scores']
        assert chosen['chosen'] is kept and bool(model.armature) is kept, chosen
        if not kept:
            # lower with the rotor inertias, but not by enough
            assert ARMATURE_GAIN * scores['false'] < scores['true'] < scores['false'], chosen


def test_auto_armature_keeps_the_fit_that_succeeded_and_says_its_choice(robot, request):
    """``armature='auto'`` fits twice: when one fit has no solution, the other is kept and
    the error recorded (before, the whole fit aborted); the pipeline prints the choice and
    both scores (before, it was only in model.yaml)."""
    from arm_dyn_id.errors import RankDeficientError
    d = fourier_data(seed=4, rate=200.0, periods=2, robot=robot)
    lines = []
    fitted = fit_full_samples(robot, d['t'], d['q'], d['tau'], methods=('wls',),
                              phase=lines.append, armature='auto')
    said = [line for line in lines if line.startswith('rotor inertia: ')]
    scores = fitted.model.metadata['selection']['armature']['scores']
    assert said and 'left out' in said[0] and f'without {scores["false"]:.3g}' in said[0] and \
        f'with {scores["true"]:.3g}' in said[0], lines
    every_fit_fails = request.getfixturevalue('rotor_fit_fails')
    lines = []
    fitted = fit_full_samples(robot, d['t'], d['q'], d['tau'], methods=('wls',),
                              phase=lines.append, armature='auto')
    chosen = fitted.model.metadata['selection']['armature']
    assert not chosen['chosen'] and not fitted.model.armature
    assert chosen['errors'] == {'true': 'no solution (injected)'}, chosen
    said = [line for line in lines if line.startswith('rotor inertia: ')]
    assert said and 'the fit with them failed: no solution (injected)' in said[0], lines
    every_fit_fails()
    with pytest.raises(RankDeficientError, match='neither fit'):
        fit_full(robot, d['t'], d['q'], d['tau'], methods=('wls',), armature='auto')


def test_only_candidates_that_scored_better_are_said_set_aside(robot):
    """A short noisy record: the offset and directional candidates move the gravity
    torque by more than the tolerance but score worse on held-out blocks than the
    simplest; they would not have been chosen anyway, so they are not listed (or
    printed) as set aside. Before, every candidate past the gravity tolerance was."""
    from arm_dyn_id.identification.full_dynamics import DECISIVE, GRAVITY_SHIFT
    d = fourier_data(seed=2, rate=100.0, periods=1, robot=robot)
    tau = d['tau'] + 0.1 * d['ddq'] + np.random.default_rng(2).normal(0, 0.3, d['tau'].shape)
    lines = []
    fitted = fit_full_samples(robot, d['t'], d['q'], tau, methods=('wls',), armature=False,
                              phase=lines.append)
    chosen = fitted.model.metadata['selection']['friction']
    scores, shifts = chosen['scores'], chosen['gravity_shift']
    simplest = scores['coulomb,viscous']
    past = [k for k in scores if shifts[k] > GRAVITY_SHIFT and scores[k] > DECISIVE * simplest]
    assert 'coulomb,viscous,offset' in past, chosen      # beyond the gravity tolerance ...
    assert all(scores[k] >= simplest for k in past), chosen   # ... and worse anyway
    assert chosen['set_aside'] == [], chosen
    assert not [line for line in lines if 'set aside' in line], lines


def test_each_joint_s_slow_samples_are_left_out_of_its_own_equations():
    """Friction at a rest or a reversal is neither Coulomb's sign nor zero (presliding,
    stiction): a simulated humanoid whose Coulomb step is sharper than the model's
    (``tanh(q̇ / 1e-3)``) had its gravity 2-12 % off on the joints that carry it through
    the few samples slower than the model's smooth sign (4.5, 2.0, 11.6, 9.9 % on joints
    1-4). Left out of each joint's own equations below SLOW_SPEED (and a quarter of a
    cut-off period either side), they cost it nothing: 0.02-0.07 %. The model file says
    how much each joint left out."""
    from arm_bags import Arm, realistic_fourier
    from arm_dyn_id.identification.full_dynamics import moving_rows
    from arm_dyn_id.validation.check import holding_friction
    arm = Arm(URDF).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    robot = RobotModel.from_urdf(URDF, joints=list(arm.joints))
    t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(0))
    poses = np.random.default_rng(1).uniform(arm.lower, arm.upper, size=(200, arm.n))
    truth = arm.gravity(poses)
    # the estimators that work sample by sample (IRLS) see the same equations
    for methods in (('irls',), ('wls',)):
        model, _ = fit_full(robot, t, q, tau, methods=methods, friction='coulomb,viscous')
        error = np.sqrt(np.mean((np.asarray(model.gravity_torques(poses)) - truth) ** 2,
                                axis=0))
        assert np.all(error[:4] < 0.01 * np.sqrt(np.mean(truth ** 2, axis=0))[:4]), \
            (methods, error)
    slow = model.metadata['fit']['slow_samples']
    assert all(0.03 < share < 0.3 for share in slow['left_out'].values()), slow
    assert yaml.safe_load(model.to_yaml())['fit']['slow_samples'] == slow

    # which samples: a joint still throughout keeps them all (its torque is all it
    # has); one that stops for a while loses the stop and the filter's spread about it
    from arm_dyn_id.data.preparation import Prepared
    m = 1000
    times = np.arange(m) / 100.0
    dq = np.column_stack([np.where((times > 4.0) & (times < 5.0), 0.0, 0.5),
                          np.zeros(m)])
    prepared = Prepared(t=times, q=np.zeros((m, 2)), dq=dq, ddq=np.zeros((m, 2)),
                        tau=np.zeros((m, 2)), info={'cutoff_hz': 2.5})
    keep = moving_rows(prepared)
    assert keep.shape == (m, 2) and np.all(keep[:, 1] == 1.0)
    left = np.flatnonzero(keep[:, 0] == 0.0)
    # 0.25 / 2.5 Hz = 0.1 s either side of the stop
    assert times[left[0]] == pytest.approx(3.91) and times[left[-1]] == pytest.approx(5.09)
