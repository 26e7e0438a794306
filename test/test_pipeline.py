"""identification.pipeline: arrays in, validated gravity model out (CLI and nodes)."""

import numpy as np
import pytest

from arm_dyn_id.errors import DataError
from arm_dyn_id.identification.gravity import identify_gravity
from arm_dyn_id.identification.pipeline import clean_markers, fit_gravity, split_pairs
from arm_dyn_id.model.robot import RobotModel
from test_estimation import NOISE, URDF, sweep_data


@pytest.fixture(scope='module')
def robot():
    return RobotModel.from_urdf(URDF)


@pytest.fixture(scope='module')
def data(robot):
    return sweep_data(robot, np.random.default_rng(30), noise=NOISE, coulomb=0.05)


def test_fit_holds_out_pairs_and_validates_on_them(robot, data):
    t, q, tau, markers = data
    said = []
    fit = fit_gravity(robot, t, q, tau, markers, noise=NOISE, holdout=0.25, seed=2,
                      phase=said.append)
    assert len(fit.held_out) == 4 and len(fit.training) == 14
    assert set(fit.validation) == {'held_out', 'training'}
    assert fit.model.metadata['validation'] == fit.validation
    assert fit.selection.by == 'held_out'
    for joint, m in fit.validation['held_out'].items():
        assert m['rmse'] < 3 * max(m['noise_std'], 1e-4), (joint, m)
    summary = fit.summary()
    assert summary['holdout']['held_out_pairs'] == 4
    assert summary['selection']['by'] == 'held_out'
    assert any('4 held out' in text for text in said)
    # the held-out pairs were not fitted
    assert fit.result.n_samples < len(identify_gravity(robot, t, q, tau, markers).paired.q)


def test_holdout_zero_is_what_the_identifier_node_fits(robot, data):
    t, q, tau, markers = data
    fit = fit_gravity(robot, t, q, tau, markers, noise=NOISE, holdout=0.0,
                      segments='markers', robot_name='arm')
    direct = identify_gravity(robot, t, q, tau, markers, noise=NOISE)
    np.testing.assert_allclose(fit.model.beta, direct.model.beta, rtol=1e-12)
    assert 'held_out' not in fit.validation and fit.model.metadata['robot_name'] == 'arm'
    # samples out of order (two buffers merged) are sorted first
    order = np.random.default_rng(0).permutation(len(t))
    shuffled = fit_gravity(robot, t[order], q[order], tau[order], markers, noise=NOISE,
                           holdout=0.0)
    np.testing.assert_allclose(shuffled.model.beta, fit.model.beta, rtol=1e-12)


def test_refusals_name_the_problem(robot, data):
    t, q, tau, markers = data
    with pytest.raises(DataError, match='no sweep pairs in .*no sweep among them'):
        fit_gravity(robot, t, q, tau, [], segments='markers', where='live data')
    with pytest.raises(ValueError, match='holdout'):
        fit_gravity(robot, t, q, tau, markers, holdout=1.0)
    with pytest.raises(DataError, match='no forward/backward sweep pair'):
        split_pairs(t, [m for m in markers if m.get('direction') != -1], 0.2, 0)
    assert clean_markers([{'t': 0.0, 'phase': 'sweep'}, {'error': 'x'}, 'x',
                          {'t': 1.0, 'phase': 'settle'}]) == [{'t': 1.0, 'phase': 'settle'}]


def test_auto_falls_back_to_quasi_static_only_without_markers_and_sweeps():
    from test_quasi_static import recording
    robot = RobotModel.from_urdf(URDF)
    t, q, tau, _ = recording(robot, np.random.default_rng(4), n_poses=20)
    fit = fit_gravity(robot, t, q, tau, None, segments='auto')
    assert fit.marker_source == 'quasi_static' and fit.held_out == [] == fit.markers
    assert fit.summary()['segments']['holds'] >= 15
    # an explicit sweep mode still refuses data without sweeps
    with pytest.raises(DataError, match='no constant-speed sweep'):
        fit_gravity(robot, t, q, tau, None, segments='detect')


def test_gross_errors_are_replaced_counted_and_saved(robot, data, tmp_path):
    """One-sample current spikes would each shift an averaged pair: the pipeline
    replaces them before the fit and says how many, per joint, in the model file."""
    from arm_dyn_id.model.gravity import GravityModel
    rng = np.random.default_rng(5)
    t, q, tau, markers = data
    clean = fit_gravity(robot, t, q, tau, markers, noise=NOISE, holdout=0.0)
    hit = tau.copy()
    rows = rng.choice(np.arange(1, len(t) - 1), 12, replace=False)
    hit[rows, 1] += 50 * np.abs(tau).max()
    fit = fit_gravity(robot, t, q, hit, markers, noise=NOISE, holdout=0.0)
    assert fit.info['gross_errors'] == {robot.joint_names[1]: 12}
    assert fit.summary()['gross_errors']['replaced'] == {robot.joint_names[1]: 12}
    # the same model as without the spikes, to within what one replaced sample moves it
    np.testing.assert_allclose(fit.model.beta, clean.model.beta, rtol=0.01, atol=1e-5)
    fit.model.save(tmp_path / 'model.yaml')
    assert GravityModel.load(tmp_path / 'model.yaml').metadata['gross_errors'] == \
        {robot.joint_names[1]: 12}
