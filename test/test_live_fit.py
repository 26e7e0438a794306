"""What identifier_node does with the samples it holds, without ROS (service.live_fit,
service.live_model.build_served, service.model_dir.render_report): the node is the wiring
(test_identifier_node.py, test_identifier_full.py run it across processes); the fit, the
gate, the folder, the thresholds, the check, the payload and the residual's settings are
tested here on their own.
"""

import threading

import numpy as np
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.errors import DataError
from arm_dyn_id.model import load_model
from arm_dyn_id.model.robot import Payload, RobotModel
from arm_dyn_id.service import contact
from arm_dyn_id.service.live_fit import (
    FitSettings, check_held_samples, fit_samples, fit_thresholds, moving_forward,
    payload_from_samples, without_warnings, write_live_fit)
from arm_dyn_id.service.live_model import ResidualSettings, build_served
from arm_dyn_id.service.model_dir import LATEST, render_report
from test_cli_fit import reciprocating_data, write_config
from test_cli_full import fourier_data

pytestmark = pytest.mark.slow
FULL = FitSettings(dynamics='full', full_methods=('wls',))
GRAVITY = FitSettings(dynamics='gravity', methods=('wls',))
LOAD = Payload(mass=1.0, com=(0.0, 0.0, 0.05), frame='flange')


@pytest.fixture(scope='module')
def arm(tmp_path_factory):
    root = tmp_path_factory.mktemp('live_fit')
    config = load_arm_config(write_config(root / 'arm.yaml'))
    return {'root': root, 'config': config, 'robot': RobotModel.from_config(config)}


@pytest.fixture(scope='module')
def full(arm):
    """A full fit of 30 s of Fourier motion followed by a replay of its first 5 s with
    torques three times too large (stamps going back: a restarted bag, half a sample off
    the originals). The node's mask leaves them out (``used``); the preparation would
    also drop stamps that go back, so the model's accuracy below is the result, not the
    mask's only evidence."""
    data = fourier_data(seed=0, periods=3)
    replay = data['t'] < data['t'][0] + 5.0
    t = np.concatenate([data['t'], data['t'][replay] + 0.0025])
    q = np.vstack([data['q'], data['q'][replay]])
    tau = np.vstack([data['tau'], 3.0 * data['tau'][replay]])
    fit = fit_samples(arm['robot'], arm['config'], t, q, tau, [], FULL)
    return {'data': data, 't': t, 'q': q, 'tau': tau, 'fit': fit}


def test_moving_forward_leaves_out_stamps_that_go_back():
    t = np.array([0.0, 1.0, 2.0, 1.5, 2.0, 2.5, 3.0])
    assert moving_forward(t).tolist() == [True, True, True, False, False, True, True]
    assert moving_forward(np.array([])).tolist() == []


def test_full_fit_leaves_out_a_replay_and_is_written_with_its_thresholds(arm, full):
    fit, data = full['fit'], full['data']
    assert fit.choice.kind == 'full'
    assert fit.used.sum() == len(data['t']) and fit.samples == len(full['t'])
    assert fit.model.metadata['dynamics_choice']['kind'] == 'full'
    assert 'measurement' in fit.model.metadata
    # the replayed torques (x3) left out: the model predicts the recording's rigid body
    predicted = fit.model.rigid_body_torques(data['q_true'], data['dq'], data['ddq'])
    error = np.sqrt(np.mean((predicted - data['rigid']) ** 2, axis=0))
    assert np.all(error < 0.05 * np.max(np.abs(data['rigid']), axis=0)), error
    paths = write_live_fit(arm['root'] / 'models', fit, None)
    folder = paths['folder']
    assert (arm['root'] / 'models' / LATEST).resolve() == folder.resolve()
    assert load_model(folder / 'model.yaml').base.count == fit.model.base.count
    said = fit_thresholds(arm['robot'], fit, full['t'], full['q'], full['tau'],
                          str(folder / 'model.yaml'), [25.0])
    assert 'held out' in said and (folder / contact.FILE_NAME).is_file()
    assert fit.message(said).startswith('full dynamics')
    # the node's log line says what friction and rotor inertia the fit chose
    chosen = fit.model.metadata['selection']
    assert f"friction {chosen['friction']['chosen']}" in fit.summary, fit.summary
    assert ('rotor inertia kept' if chosen['armature']['chosen'] else
            'rotor inertia left out') in fit.summary, fit.summary


def test_a_fit_written_with_a_warning_says_it_in_its_reply_and_its_model(tmp_path):
    """The node's fit of a humanoid with 0.1 kg·m² of rotor inertia the URDF lacks, on a
    0.1 Hz motion, from a config without torque_noise (weights from the data): joint_5's
    effort reads high against the others' (the fit leaves the rotor inertia out), so the
    model is served with the gate's warning, in its fit section (the model gate repeats
    it to whoever admits the file) and in the reply the node logs."""
    import yaml
    from arm_bags import Arm, realistic_fourier
    from arm_dyn_id.validation.check import holding_friction
    from test_cli_fit import URDF, config_doc
    true_arm = Arm(URDF).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    doc = config_doc()
    del doc['/**']['ros__parameters']['torque_noise']
    (tmp_path / 'arm.yaml').write_text(yaml.safe_dump(doc))
    config = load_arm_config(tmp_path / 'arm.yaml')
    robot = RobotModel.from_config(config)
    t, q, tau = realistic_fourier(true_arm, holding_friction(robot),
                                  np.random.default_rng(0), 200.0, base_hz=0.1, armature=0.1)
    n = robot.n_joints
    fit = fit_samples(robot, config, t, q[:, :n], tau[:, :n], [], FULL)
    assert len(fit.warnings) == 1 and "joint_5's reads x1.7" in fit.warnings[0], fit.warnings
    assert fit.model.metadata['fit']['effort_scale_warning'] == fit.warnings[0]
    assert fit.message('written').endswith(f'written; warning: {fit.warnings[0]}')
    # a fit the node made on its own logs its warnings one by one, then the reply once
    # without them (they were in the log twice)
    logged = without_warnings(fit.message('written'))
    assert fit.warnings[0] not in logged
    assert logged == fit.message('written').split('; warning: ')[0] + \
        ' (1 warning logged above)'
    assert without_warnings('fitted; written') == 'fitted; written'


def test_a_fit_the_gate_refuses_is_an_error_naming_it(arm):
    data = reciprocating_data(seed=1)
    robot, config = arm['robot'], arm['config']
    fit = fit_samples(robot, config, data['t'], data['q'], data['tau'], data['markers'],
                      GRAVITY)
    assert fit.choice.kind == 'gravity' and fit.model.base.count > 0
    with pytest.raises(DataError, match='no segment markers'):
        fit_samples(robot, config, data['t'], data['q'], data['tau'], [], GRAVITY)
    flipped = data['tau'].copy()
    flipped[:, 1] *= -1                          # the shoulder's sign reversed
    with pytest.raises(DataError, match='refused by the data gate.*joint_2'):
        fit_samples(robot, config, data['t'], data['q'], flipped, data['markers'], GRAVITY)


def test_a_live_fit_of_sweeps_at_one_pose_says_what_it_cannot_check(arm):
    """Sweeps at one pose of the other joints: the node's fit names the loaded joints its
    sweeps cannot check, in the model's fit section and in its reply (which it logs), as
    ``arm-dyn-id fit`` does; at three poses a joint it names none."""
    robot, config = arm['robot'], arm['config']
    for poses in (1, 3):
        data = reciprocating_data(seed=1, poses=poses)
        fit = fit_samples(robot, config, data['t'], data['q'], data['tau'], data['markers'],
                          GRAVITY)
        few = fit.model.metadata['fit']['unchecked_sweeps']
        if poses == 1:
            assert few and all(v < 2 for v in few.values()), few
            assert fit.unchecked.startswith('not checked by these sweeps: '), fit.unchecked
            assert all(joint in fit.unchecked for joint in few)
            assert f'written; {fit.unchecked}' in without_warnings(fit.message('written'))
        else:
            assert few == {} and fit.unchecked == '', (few, fit.unchecked)
            assert 'not checked' not in fit.message('written')


def test_check_of_the_samples_held_fails_a_reversed_joint(arm):
    data = reciprocating_data(seed=2)
    robot, config = arm['robot'], arm['config']
    ok, text = check_held_samples(robot, config, np.zeros(0), np.zeros((0, 6)),
                                  np.zeros((0, 6)))
    assert not ok and text.startswith('no data')
    ok, text = check_held_samples(robot, config, data['t'], data['q'], data['tau'])
    assert ok, text
    flipped = data['tau'].copy()
    flipped[:, 1] *= -1
    ok, text = check_held_samples(robot, config, data['t'], data['q'], flipped)
    assert not ok and 'FAIL' in text and 'joint_2' in text, text


def test_payload_from_the_last_window_of_samples(arm, full):
    model = full['fit'].model
    loaded = fourier_data(seed=3, periods=3, payload=LOAD)
    free = full['data']
    shift = free['t'][-1] - loaded['t'][0] + 0.005       # one sample on, no gap
    t = np.concatenate([free['t'], loaded['t'] + shift])
    q = np.vstack([free['q'], loaded['q']])
    tau = np.vstack([free['tau'], loaded['tau']])
    span = loaded['t'][-1] - loaded['t'][0]
    fit, doc = payload_from_samples(model, t, q, tau, [], span, 'flange',
                                    arm['config'].torque_noise)
    assert abs(fit.payload.mass - LOAD.mass) < 0.05, doc
    assert '"frame": "flange"' in doc and '"mass_std"' in doc
    # a window over both halves sees about half the load
    mixed, _ = payload_from_samples(model, t, q, tau, [], 1e6, 'flange',
                                    arm['config'].torque_noise)
    assert mixed.payload.mass < 0.8 * LOAD.mass
    with pytest.raises(DataError, match='no data'):
        payload_from_samples(model, np.zeros(0), np.zeros((0, 6)), np.zeros((0, 6)), [],
                             10.0, 'flange')


def test_build_served_follows_the_residual_settings(arm, full):
    model = full['fit'].model
    folder = arm['root'] / 'served'
    paths = write_live_fit(folder, full['fit'], None)
    model_file = str(paths['folder'] / 'model.yaml')
    built = build_served(model, 0.0, None, ResidualSettings(on=False), model_file)
    assert built['residual'] is None and built['residual_status'].startswith('off')
    built = build_served(model, 0.0, None, ResidualSettings(contact_thresholds=(2.0,)),
                         model_file)
    assert np.all(built['residual'].observer.thresholds == 2.0)
    assert 'contact above' in built['residual_status']
    built = build_served(model, 0.0, None, ResidualSettings(), model_file)
    assert 'no contact flag' in built['residual_status']
    fit_thresholds(arm['robot'], full['fit'], full['t'], full['q'], full['tau'], model_file,
                   [25.0])
    built = build_served(model, 0.0, None, ResidualSettings(), model_file)
    assert 'calibrated' in built['residual_status'], built['residual_status']
    data = reciprocating_data(seed=1)
    gravity = fit_samples(arm['robot'], arm['config'], data['t'], data['q'], data['tau'],
                          data['markers'], GRAVITY).model
    built = build_served(gravity, 0.0, None, ResidualSettings(), '')
    assert built['dynamics'] is None and built['residual'] is None
    assert 'gravity model' in built['residual_status']


def test_a_report_that_cannot_be_rendered_is_reported(tmp_path):
    failed, done = [], threading.Event()

    def record(folder, why):
        failed.append((folder, why))
        done.set()
    child = render_report(tmp_path / 'no_fit_here', record)
    assert child is not None
    assert done.wait(120.0), 'the report child never ended'
    assert failed[0][0] == tmp_path / 'no_fit_here' and failed[0][1]
