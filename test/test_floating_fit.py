"""Floating-base fits (seeds 002, 003) from bags: the identified model file
(FloatingIdentification, schema arm_dyn_id/floating_model) and fit_floating on
simulated recordings with known truth."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from arm_dyn_id.config import file_sha256
from arm_dyn_id.errors import DataError, URDFError
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
