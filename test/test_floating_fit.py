"""Floating-base fits (seeds 002, 003) from bags: the identified model file
(FloatingIdentification, schema arm_dyn_id/floating_model) and fit_floating on
simulated recordings with known truth."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from arm_dyn_id.config import file_sha256
from arm_dyn_id.errors import ConfigError, DataError, URDFError
from arm_dyn_id.model import load_model
from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel

REPO = Path(__file__).resolve().parent.parent
SPACE = REPO / 'urdf' / 'space_manipulator.urdf'
BIPED = REPO / 'urdf' / 'biped.urdf'


def _identification(urdf=BIPED, scale=1.1):
    m = FloatingModel(urdf)
    phi = m.parameters() * scale
    return FloatingIdentification(
        'biped', str(urdf), file_sha256(urdf), 'zmp', 'newton', m.body_names, phi,
        float(phi[::10].sum()), unexcited=['lc_foot'],
        metrics={'zmp_rms_mm': np.float64(3.5), 'per_axis': np.array([1.0, 2.0])},
        provenance={'bag': 'b'})


def test_model_file_round_trip_and_load_model(tmp_path):
    ident = _identification()
    path = ident.save(tmp_path / 'model.yaml')
    assert not (tmp_path / 'model.yaml.tmp').exists()          # written by rename
    doc = yaml.safe_load(path.read_text())
    assert doc['schema'] == 'arm_dyn_id/floating_model' and doc['version'] == 1
    assert list(doc['parameters']['torso']) == ['m', 'mx', 'my', 'mz', 'Ixx', 'Ixy', 'Iyy',
                                                'Ixz', 'Iyz', 'Izz']
    assert doc['provenance']['software'].startswith('arm_dyn_id')
    for back in (FloatingIdentification.load(path), load_model(path)):
        assert isinstance(back, FloatingIdentification)
        np.testing.assert_allclose(back.phi, ident.phi, rtol=1e-12)
        assert back.bodies == list(FloatingModel(BIPED).body_names)
        assert (back.method, back.estimator, back.unexcited) == ('zmp', 'newton',
                                                                 ['lc_foot'])
        assert back.metrics == {'zmp_rms_mm': 3.5, 'per_axis': [1.0, 2.0]}
        assert back.total_mass == pytest.approx(ident.total_mass)
        m = back.model()
        assert isinstance(m, FloatingModel) and back.warnings == []
        # the nominal URDF; the identified parameters go with the queries
        assert m.total_mass == pytest.approx(ident.total_mass / 1.1)
        assert back.masses()['torso'] == pytest.approx(1.1 * m.parameters()[0])


def test_model_finds_a_moved_urdf_and_warns_on_a_changed_one(tmp_path):
    folder = tmp_path / 'moved'
    folder.mkdir()
    shutil.copy(BIPED, folder / 'biped.urdf')
    ident = _identification()
    ident.urdf = str(tmp_path / 'gone' / 'biped.urdf')
    path = ident.save(folder / 'model.yaml')
    back = FloatingIdentification.load(path)
    assert back.model().source == str(folder / 'biped.urdf')      # beside the file
    assert back.warnings == []
    edited = tmp_path / 'edited'
    edited.mkdir()
    (edited / 'biped.urdf').write_text(BIPED.read_text() + '\n<!-- edited -->\n')
    back = load_model(path, urdf=edited)
    assert back.model().source == str(edited / 'biped.urdf')
    assert len(back.warnings) == 1 and 'sha256 mismatch' in back.warnings[0]
    (folder / 'biped.urdf').unlink()
    with pytest.raises(URDFError, match='does not exist'):
        FloatingIdentification.load(path).model()


def test_model_refuses_a_urdf_with_other_bodies(tmp_path):
    path = _identification().save(tmp_path / 'model.yaml')
    with pytest.raises(DataError, match='was fitted on'):
        FloatingIdentification.load(path, urdf_dir=SPACE).model()


@pytest.mark.parametrize('edit, message', [
    (lambda d: d.update(schema='arm_dyn_id/gravity_model'), 'not an arm_dyn_id floating'),
    (lambda d: d.update(version=9), 'reads up to version 1'),
    (lambda d: d.pop('bodies'), "no 'bodies'"),
    (lambda d: d['parameters']['torso'].pop('Izz'), 'parameters of torso must be'),
    (lambda d: d['parameters']['torso'].update(m=-1.0), 'torso has mass -1 kg'),
    (lambda d: d['parameters']['torso'].update(mx='x'), 'not a number'),
    (lambda d: d['parameters']['torso'].update(mx=None), 'not finite'),
    (lambda d: d.update(method='magic'), "method 'magic'"),
    (lambda d: d.update(total_mass=0), 'total_mass 0.0 must be positive'),
    (lambda d: d.update(unexcited='lc_foot'), 'unexcited must be a list'),
    (lambda d: d['parameters'].update(ghost=d['parameters']['torso']), 'no such bodies'),
])
def test_bad_model_files_are_one_line_data_errors(tmp_path, edit, message):
    path = _identification().save(tmp_path / 'model.yaml')
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(DataError, match=message) as info:
        FloatingIdentification.load(path)
    assert '\n' not in str(info.value) and str(path) in str(info.value)


def test_missing_or_broken_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match='does not exist'):
        FloatingIdentification.load(tmp_path / 'none.yaml')
    (tmp_path / 'bad.yaml').write_text('schema: [unclosed\n')
    with pytest.raises(DataError, match='not valid YAML'):
        FloatingIdentification.load(tmp_path / 'bad.yaml')


# ------------------------------------------------------------ fit_floating -----
@pytest.fixture(scope='module')
def space(tmp_path_factory):
    from floating_bags import space_bag
    from arm_dyn_id.data.floating import read_floating_bag
    _, config, bag = space_bag(tmp_path_factory.mktemp('space'))
    return config, read_floating_bag(bag, config)


@pytest.fixture(scope='module')
def biped(tmp_path_factory):
    from floating_bags import biped_bag
    from arm_dyn_id.data.floating import read_floating_bag
    _, config, bag = biped_bag(tmp_path_factory.mktemp('biped'))
    return config, read_floating_bag(bag, config)


def test_momentum_fit_of_a_bag_recovers_the_excited_combinations(space):
    from floating_bags import SPACE_THETA_NOMINAL, SPACE_THETA_TRUE
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = space
    lines = []
    res = fit_floating(config, data, progress=lines.append)
    fit, ident = res.fit, res.identification
    assert lines and 'momentum fit (linear)' in lines[0]
    assert (ident.method, ident.estimator) == ('momentum', 'linear')
    assert ident.phi[::10].sum() == pytest.approx(config.floating_base.total_mass, abs=1e-9)
    assert ident.urdf == str(config.urdf) and ident.urdf_sha256 == file_sha256(config.urdf)
    # the combinations the motion determines, within the noise (4 standard errors)
    scales = np.abs(SPACE_THETA_NOMINAL)
    base = res.problem.excitation(scales)
    err = base.beta(fit.theta / scales) - base.beta(SPACE_THETA_TRUE / scales)
    sigma = fit.std[base.independent] / scales[base.independent]
    assert np.all(np.abs(err) <= 4 * sigma + 1e-9)
    # unexcited unknowns: named, flagged, kept at the configured URDF's value
    held = ~fit.identified
    assert held.any() and list(res.unexcited) == [n for n, h in zip(fit.names, held) if h]
    np.testing.assert_allclose(fit.theta[held], SPACE_THETA_NOMINAL[held], rtol=1e-9)
    assert ident.unexcited == list(res.unexcited)
    # held-out (last 25 %): far better than the nominal model, on every axis
    m = res.metrics
    assert m['held_out'] == 'last 25% of the recording'
    assert m['linear_vs_nominal'] < 0.05 and m['angular_vs_nominal'] < 0.05
    assert all(m['momentum_rms'][a] < 0.1 * m['nominal_momentum_rms'][a]
               for a in m['momentum_rms'])
    assert res.held_out['identified'].shape == (m['samples'], 6)
    assert res.held_out['t'][0] >= 0.74 * (data.t[-1] - data.t[0])


def test_momentum_ga_and_a_second_recording(space, tmp_path):
    from floating_bags import space_run
    from arm_dyn_id.data.floating import FloatingData
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = space
    other = space_run(seed=7, duration=8.0)
    other = FloatingData(**{k: getattr(other, k) for k in (
        't', 'base_position', 'base_quaternion', 'base_linear', 'base_angular', 'q', 'dq')})
    res = fit_floating(config, data, method='ga-plain', validate=other,
                       rng=np.random.default_rng(1))
    assert res.identification.estimator == 'ga-plain' and res.fit.nfev > 1000
    assert res.identification.phi[::10].sum() == pytest.approx(
        config.floating_base.total_mass, abs=1e-9)
    assert res.metrics['held_out'] == 'validation recording'
    assert res.metrics['samples'] == len(other.t)
    assert res.metrics['angular_vs_nominal'] < 0.5


@pytest.mark.slow
def test_zmp_fit_of_a_bag_recovers_masses_and_coms(biped):
    from floating_bags import BIPED_CAD, biped_truth
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = biped
    truth = biped_truth()
    res = fit_floating(config, data)
    fit = res.fit
    assert res.identification.method == 'zmp' and res.identification.estimator == 'newton'
    # eq. 10: the masses sum to the weighed total, exactly
    assert fit.phi[::10].sum() == pytest.approx(config.floating_base.total_mass, abs=1e-9)
    err = np.abs(fit.Phi - truth) / truth
    # stated tolerances (docs/floating_base.md): identified CoM offsets and masses 10 %
    assert np.all(err[fit.identified] < 0.10), dict(zip(fit.names, err))
    # the stance foot never moves: its CoM height is not excited
    assert 'lc_foot' in res.unexcited
    assert set(res.unexcited) == {n for n, i in zip(fit.names, fit.identified) if not i}
    cad = truth * BIPED_CAD
    # an unexcited unknown is not returned as garbage: it stays near its CAD value
    for j in np.flatnonzero(~fit.identified):
        assert abs(fit.Phi[j] - cad[j]) <= 0.1 * abs(cad[j])
    m = res.metrics
    assert m['zmp_rms_mm'] < 0.8 * m['nominal_zmp_rms_mm']
    assert m['zmp_rms_mm'] < 2.0                     # 0.5 N per sensor: ~0.5 mm per axis


@pytest.mark.slow
def test_zmp_linear_estimator_and_bad_requests(biped):
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = biped
    res = fit_floating(config, data, method='linear')
    assert res.identification.estimator == 'linear'
    assert res.fit.phi[::10].sum() == pytest.approx(config.floating_base.total_mass,
                                                    abs=1e-9)
    with pytest.raises(ConfigError, match="'ga' does not apply to the zmp method"):
        fit_floating(config, data, method='ga')
    import dataclasses
    no_forces = dataclasses.replace(data, forces=None)
    with pytest.raises(DataError, match='no forces: the zmp method needs '
                       'floating_base.sole_sensors'):
        fit_floating(config, no_forces)


def test_momentum_without_odometry_is_one_line(space):
    import dataclasses
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = space
    with pytest.raises(DataError, match='no base position: the momentum method needs '
                       'floating_base.odometry_topic'):
        fit_floating(config, dataclasses.replace(data, base_position=None))
    with pytest.raises(ConfigError, match='no floating_base'):
        fit_floating(dataclasses.replace(config, floating_base=None), data)


def test_zmp_input_is_put_on_even_steps_of_at_most_200_hz():
    """A real driver's stamps are uneven and may come at 1 kHz: stance_motion needs even
    steps, the fit needs no more than 200 Hz."""
    from arm_dyn_id.data.floating import FloatingData
    from arm_dyn_id.identification.floating_fit import _uniform
    rng = np.random.default_rng(0)
    n = 1000
    t = 1.7e9 + np.arange(n) * 1e-3 + rng.uniform(-2e-4, 2e-4, n)     # absolute, jittered
    q = np.stack([np.sin(t - t[0])] * 12, 1)
    f = np.ones((n, 8))
    local = np.zeros((8, 3))
    data = FloatingData(t=t, base_position=None, base_quaternion=None, base_linear=None,
                        base_angular=None, q=q, dq=q, forces=f, sensor_positions=local,
                        sensor_frames=('foot_r',) * 8)
    tu, qu, fu, pu = _uniform(data)
    dt = np.diff(tu)
    assert tu[0] == pytest.approx(0.0025, abs=1e-3) and np.ptp(dt) < 1e-9
    assert dt[0] == pytest.approx(0.005, rel=1e-3)                   # 5 x 1 ms averaged
    np.testing.assert_allclose(qu[:, 0], np.sin(tu), atol=1e-5)
    assert fu.shape == (len(tu), 8) and pu is local


@pytest.mark.slow
def test_zmp_fit_of_jittered_stamps_matches(biped):
    import dataclasses
    from arm_dyn_id.identification.floating_fit import fit_floating
    config, data = biped
    rng = np.random.default_rng(5)
    jitter = data.t + rng.uniform(-2e-3, 2e-3, len(data.t))           # 10 % of a step
    res = fit_floating(config, dataclasses.replace(data, t=jitter))
    ref = fit_floating(config, data)
    np.testing.assert_allclose(res.fit.Phi, ref.fit.Phi, rtol=0.02)
    assert res.unexcited == ref.unexcited
