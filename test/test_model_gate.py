"""THE model gate (arm_dyn_id.model.gate): every command that loads a model refuses a bad
one in one line, and ``validate`` gives a verdict.

One gravity fit (reciprocating sweeps) and one full-dynamics fit (a Fourier recording)
of the humanoid arm are made once by ``arm-dyn-id fit``; every bad model file is one of
them edited as a user, a crash or another robot would: binary garbage, a truncated file,
``version: two``, a future version, the ``rejected`` mark, other joints, another URDF's
hash, values of -1e6, a NaN, a negative inertia, a floating-base model. Each is given to
``validate``, ``payload`` and ``report`` (in-process, ``cli.main``), and the row checks
the exit code, exactly one error line naming the file, no traceback, nothing written.
"""

import contextlib
import io
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from arm_dyn_id import cli
from arm_dyn_id.model.dynamics import DynamicsModel
from arm_dyn_id.model.gate import (KINDS, SCALE_LIMIT, ModelRefused, admit_doc, admit_model,
                                   admit_urdf)
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.cli.validate import PUSHED, STILL, judge
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.model.robot import RobotModel
from test_cli_fit import (JOINTS, K_E, NOISE, URDF, reciprocating_data, write_config,
                          write_synthetic_bag)
from test_cli_full import Q0, fourier_data, one_error_line, run, write_plain_bag


def _fit(bag, config, out):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(['fit', str(bag), '--config', str(config), '--out', str(out),
                         '--methods', 'wls', '--no-report', '--quiet'])
    assert code == 0, err.getvalue()
    return out


@pytest.fixture(scope='module')
def fits(tmp_path_factory):
    """A gravity and a full fit of the humanoid arm, their bags and config."""
    root = tmp_path_factory.mktemp('gate')
    config = write_config(root / 'arm.yaml')
    gravity_bag = write_synthetic_bag(root / 'sweeps', reciprocating_data(seed=1, rate=100.0,
                                                                          poses=1))
    full_bag = write_plain_bag(root / 'fourier', fourier_data(seed=0, periods=1))
    return {'root': root, 'config': config, 'gravity_bag': gravity_bag, 'full_bag': full_bag,
            'gravity': _fit(gravity_bag, config, root / 'gravity_fit'),
            'full': _fit(full_bag, config, root / 'full_fit')}


def _doc(fits, kind):
    return yaml.safe_load((fits[kind] / 'model.yaml').read_text())


def _with(doc, **changes):
    doc = yaml.safe_load(yaml.safe_dump(doc))
    doc.update(changes)
    return doc


def _base(doc, values):
    return dict(doc['base'], values=values)


def _floating_doc():
    params = dict.fromkeys(('m', 'mx', 'my', 'mz', 'Ixx', 'Ixy', 'Iyy', 'Ixz', 'Iyz', 'Izz'), 0.0)
    params.update(m=1.0, Ixx=0.1, Iyy=0.1, Izz=0.1)
    return {'schema': 'arm_dyn_id/floating_model', 'version': 1, 'robot_name': 'biped',
            'method': 'zmp', 'estimator': 'linear', 'urdf': {'file': 'biped.urdf'},
            'total_mass': 1.0, 'bodies': ['base'], 'parameters': {'base': params}}


#: name -> (which fit it edits, how, the gate's reason)
BAD = {
    'binary': ('gravity', lambda d: bytes(range(256)) * 8, 'unreadable'),
    'truncated': ('gravity', lambda d: yaml.safe_dump(d, sort_keys=False)[:3000] + '\n  - [1,',
                  'unreadable'),
    'truncated_mapping': ('gravity', lambda d: yaml.safe_dump(d, sort_keys=False)[:3000],
                          'schema'),
    'version_two': ('gravity', lambda d: _with(d, version='two'), 'version'),
    'future_version': ('full', lambda d: _with(d, version=99), 'version'),
    'rejected': ('gravity', lambda d: _with(d, rejected='the identified gravity torques are '
                                                        '1000x those of the URDF'), 'rejected'),
    'other_joints': ('gravity', lambda d: _with(d, joints=[f'shoulder_{i}' for i in range(6)]),
                     'other_robot'),
    'other_joints_full': ('full', lambda d: _with(d, joints=[f'shoulder_{i}' for i in range(6)]),
                          'other_robot'),
    'other_urdf': ('gravity', lambda d: _with(d, urdf=dict(d['urdf'], sha256='f' * 64)),
                   'other_robot'),
    'huge_values': ('gravity', lambda d: _with(d, base=_base(
        d, [-1e6] * len(d['base']['values']))), 'implausible'),
    'nan_value': ('full', lambda d: _with(d, base=_base(
        d, [float('nan')] + d['base']['values'][1:])), 'non_finite'),
    'negative_inertia': ('full', lambda d: _with(d, base=_base(
        d, [-1.0 if n == 'Izz1' else v
            for n, v in zip(d['base']['names'], d['base']['values'])])), 'implausible'),
    'floating': ('gravity', lambda d: _floating_doc(), 'kind'),
}


@pytest.fixture(scope='module')
def bad_files(fits):
    """name -> a bad model file, each in its own fit folder (with validation.json)."""
    out = {}
    for name, (kind, make, _) in BAD.items():
        folder = fits['root'] / 'bad' / name
        folder.mkdir(parents=True)
        shutil.copy(fits[kind] / 'validation.json', folder / 'validation.json')
        content = make(_doc(fits, kind))
        path = folder / 'model.yaml'
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else
                            yaml.safe_dump(content, sort_keys=False))
        out[name] = path
    return out


# -- the gate itself --------------------------------------------------------------------

@pytest.mark.parametrize('name', list(BAD))
def test_admit_model_refuses_each_bad_file_with_its_reason(bad_files, name):
    with pytest.raises(ModelRefused) as info:
        admit_model(bad_files[name])
    assert info.value.reason == BAD[name][2], str(info.value)
    text = str(info.value)
    assert str(bad_files[name]) in text and '\n' not in text


def test_good_models_are_admitted_with_what_was_checked(fits):
    gravity = admit_model(fits['gravity'] / 'model.yaml', urdf=URDF,
                          joints=[f'joint_{i}' for i in range(1, 7)])
    full = admit_model(fits['full'] / 'model.yaml')
    assert isinstance(gravity, GravityModel) and isinstance(full, DynamicsModel)
    for model in (gravity, full):
        gate = model.metadata['gate']
        assert gate is model.gate and not gate['warnings']
        assert 'physically plausible' in gate['checks'] and 'not rejected' in gate['checks']
        assert any('sha256' in c for c in gate['checks'])
    # a least-squares full fit is admitted, saying it is not physically consistent
    assert any('consistent: false' in n for n in full.gate['notes'])


def test_kinds_the_caller_needs(fits, bad_files):
    with pytest.raises(ModelRefused) as info:
        admit_model(fits['gravity'] / 'model.yaml', kinds=('full',))
    assert info.value.reason == 'kind' and 'full-dynamics' in str(info.value)
    with pytest.raises(ModelRefused) as info:
        admit_model(fits['full'] / 'model.yaml', kinds=('floating',))
    assert info.value.reason == 'kind' and 'floating' in str(info.value)
    with pytest.raises(ModelRefused) as info:
        admit_model(bad_files['floating'])
    assert 'floating-base model' in str(info.value)


def test_opt_ins_admit_with_a_warning_and_name_the_flag(fits, bad_files):
    with pytest.raises(ModelRefused) as info:
        admit_model(bad_files['rejected'])
    assert 'accept_rejected:=true' in str(info.value) and '--force' in str(info.value)
    model = admit_model(bad_files['rejected'], allow_rejected=True)
    assert any('rejected' in w for w in model.metadata['warnings'])
    model = admit_model(bad_files['other_urdf'], allow_other_urdf=True)
    assert any('another URDF' in w for w in model.metadata['warnings'])


def test_the_fit_s_own_warnings_are_said_again_by_whoever_admits_the_model(fits):
    """A model the fit wrote with a warning (a joint's effort reading high against the
    others', a load the URDF lacks) carries it in its fit section; admitting it repeats
    it, so a node or command serving the model says it too. A right model says nothing."""
    doc = _doc(fits, 'full')
    model = admit_doc(doc, source='model.yaml')
    assert not any('fitted with a warning' in w for w in model.metadata['warnings'])
    said = {'effort_scale_warning': "a joint's effort reads high ...: wrist_2_joint's reads x2",
            'missing_load': 'the recording carries a load the URDF lacks: 2.1 kg'}
    model = admit_doc(_with(doc, fit={**doc['fit'], **said}), source='model.yaml')
    for text in said.values():
        assert f'fitted with a warning: {text}' in model.metadata['warnings']
        assert f'fitted with a warning: {text}' in model.gate['warnings']
    # something else under those keys (not text) is not repeated
    model = admit_doc(_with(doc, fit={**doc['fit'], 'missing_load': {'mass': 2.1}}),
                      source='model.yaml')
    assert not any('fitted with a warning' in w for w in model.metadata['warnings'])


def test_the_robot_is_checked_by_joints_and_urdf(fits, tmp_path):
    path = fits['gravity'] / 'model.yaml'
    with pytest.raises(ModelRefused) as info:
        admit_model(path, joints=[f'joint_{i}' for i in range(6, 0, -1)])
    assert info.value.reason == 'other_robot' and 'another order' in str(info.value)
    # the same URDF reformatted (a comment, other whitespace): same content, admitted
    same = tmp_path / 'same.urdf'
    same.write_text(URDF.read_text().replace('\n  <', '\n\n    <') + '\n<!-- copied -->\n')
    model = admit_model(path, urdf=same)
    assert any('bytes differ' in c for c in model.gate['checks'])
    # one mass changed: another robot, both files named
    other = tmp_path / 'other.urdf'
    other.write_text(URDF.read_text().replace('<mass value="0.8"/>', '<mass value="1.6"/>', 1))
    with pytest.raises(ModelRefused) as info:
        admit_model(path, urdf=other)
    assert info.value.reason == 'other_robot'
    assert str(other) in str(info.value) and URDF.name in str(info.value)


def test_admit_doc_of_a_parsed_document(fits):
    doc = _doc(fits, 'full')
    model = admit_doc(doc, source='/model_yaml topic', kinds=KINDS)
    assert isinstance(model, DynamicsModel)
    for bad, reason in ((['not', 'a', 'mapping'], 'unreadable'),
                        (_with(doc, schema='arm_dyn_id/something'), 'schema'),
                        (_with(doc, version=True), 'version')):
        with pytest.raises(ModelRefused) as info:
            admit_doc(bad, source='/model_yaml topic')
        assert info.value.reason == reason and '/model_yaml topic' in str(info.value)


def test_scale_limit_is_the_gate_s(fits):
    """A model SCALE_LIMIT times the URDF's gravity is at the edge; twice that is refused."""
    doc = _doc(fits, 'gravity')
    values = np.array(doc['base']['values'])
    admit_doc(_with(doc, base=_base(doc, (values * SCALE_LIMIT * 0.9).tolist())), source='x')
    with pytest.raises(ModelRefused) as info:
        admit_doc(_with(doc, base=_base(doc, (values * SCALE_LIMIT * 2).tolist())), source='x')
    assert info.value.reason == 'implausible' and f'limit {SCALE_LIMIT:g}x' in str(info.value)


def test_a_consistent_mark_is_checked(fits):
    """A least-squares model is admitted as not consistent; marked consistent, refused."""
    doc = _doc(fits, 'full')
    assert doc['consistent'] is False
    admit_doc(doc, source='x')
    standard = {'names': doc['base']['parameter_names'],
                'values': [0.0] * len(doc['base']['parameter_names'])}
    with pytest.raises(ModelRefused) as info:
        admit_doc(_with(doc, consistent=True, standard=standard), source='x')
    assert info.value.reason == 'implausible' and 'marked consistent' in str(info.value)


def test_a_floating_model_is_admitted_where_floating_models_are_served():
    from floating_bags import BIPED_URDF
    from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel
    nominal = FloatingModel(BIPED_URDF)
    phi = nominal.parameters()
    doc = FloatingIdentification('biped', str(BIPED_URDF), None, 'zmp', 'linear',
                                 nominal.body_names, phi, phi[::10].sum()).to_dict()
    model = admit_doc(doc, source='biped.yaml', kinds=('floating',))
    assert isinstance(model, FloatingIdentification) and 'physically plausible' in \
        model.gate['checks']
    # a floating fit written with --force carries its rejection in its metrics
    marked = dict(doc, metrics=dict(doc.get('metrics') or {}, rejected='3.0 x worse'))
    with pytest.raises(ModelRefused) as info:
        admit_doc(marked, source='biped.yaml', kinds=('floating',))
    assert info.value.reason == 'rejected' and '3.0 x worse' in str(info.value)
    assert admit_doc(marked, source='biped.yaml', kinds=('floating',), allow_rejected=True)
    body = doc['bodies'][0]
    doc['parameters'][body]['m'] *= 3      # no longer the weighed total mass
    with pytest.raises(ModelRefused) as info:
        admit_doc(doc, source='biped.yaml', kinds=('floating',))
    assert info.value.reason == 'implausible' and 'total_mass' in str(info.value)
    with pytest.raises(ModelRefused) as info:
        admit_doc(doc, source='biped.yaml')
    assert info.value.reason == 'kind'


def test_the_gate_and_the_fit_judge_scale_alike():
    from arm_dyn_id.validation import plausibility
    assert plausibility.SCALE_LIMIT is SCALE_LIMIT


def test_admit_urdf_refuses_negative_masses_and_bad_inertias(tmp_path):
    assert admit_urdf(URDF) == URDF
    text = URDF.read_text()
    negative = tmp_path / 'negative.urdf'
    negative.write_text(text.replace('<mass value="0.8"/>', '<mass value="-0.8"/>', 1))
    with pytest.raises(ModelRefused) as info:
        admit_urdf(negative)
    assert info.value.reason == 'implausible' and 'negative mass' in str(info.value)
    with pytest.raises(ModelRefused) as info:
        admit_urdf(tmp_path / 'missing.urdf')
    assert info.value.reason == 'unreadable'


# -- every command ------------------------------------------------------------------------

#: report renders these (exit 0) with the reason in a banner: a fit folder is shown as it is
REPORT_BANNER = {'rejected': 'REJECTED', 'other_joints': 'not checked against its URDF',
                 'other_joints_full': 'not checked against its URDF',
                 'other_urdf': 'another URDF', 'huge_values': 'implausible',
                 'negative_inertia': 'negative inertia', 'floating': 'not checked'}


@pytest.mark.parametrize('name', list(BAD))
@pytest.mark.parametrize('command', ['validate', 'payload', 'report'])
def test_every_command_refuses_a_bad_model_in_one_line(fits, bad_files, capsys, command, name):
    path = bad_files[name]
    folder = path.parent
    before = sorted(p.name for p in folder.iterdir())
    json_out = fits['root'] / f'{command}_{name}.json'
    if command == 'report':
        code, out, err = run(capsys, 'report', folder)
    else:
        bag = fits['full_bag' if BAD[name][0] == 'full' else 'gravity_bag']
        code, out, err = run(capsys, command, path, bag, '--config', fits['config'],
                             '--json', json_out)
    if command == 'report' and name in REPORT_BANNER:
        assert code == 0, err
        page = (folder / 'report.html').read_text()
        assert '<div class="banner">' in page and REPORT_BANNER[name] in page
        return
    assert code == 2, (out, err)
    line = one_error_line(err)
    assert str(path) in line, line
    assert not json_out.exists()
    assert sorted(p.name for p in folder.iterdir()) == before


def test_validate_refuses_another_robot_given_by_config(fits, tmp_path, capsys):
    """The config's URDF is the one compared (it scored another robot at 136 % with exit 0)."""
    other = tmp_path / 'other_arm.urdf'
    other.write_text(URDF.read_text().replace('<mass value="0.8"/>', '<mass value="2.4"/>', 1))
    config = write_config(tmp_path / 'other_arm.yaml', urdf=other)
    code, out, err = run(capsys, 'validate', fits['gravity'] / 'model.yaml',
                         fits['gravity_bag'], '--config', config)
    assert code == 2, out
    line = one_error_line(err)
    assert 'another URDF' in line and str(other) in line and '--force' in line


def test_the_real_command_prints_exactly_one_line():
    """The installed entry point, not the in-process call: one stderr line, exit 2."""
    res = subprocess.run([sys.executable, '-m', 'arm_dyn_id', 'validate', sys.executable,
                          'no_bag'], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and 'not a text file' in lines[0] and 'Traceback' not in res.stderr


# -- validate's verdict ---------------------------------------------------------------------

def test_validate_verdict_passes_a_good_model(fits, capsys, tmp_path):
    code, out, err = run(capsys, 'validate', fits['full'] / 'model.yaml', fits['full_bag'],
                         '--config', fits['config'], '--json', tmp_path / 'v.json', '--quiet')
    assert code == 0, err
    assert out.strip().splitlines()[-1].startswith('verdict: PASS')
    summary = yaml.safe_load((tmp_path / 'v.json').read_text())['fit_summary']
    assert summary['verdict']['passed'] and summary['verdict']['max_rmse_percent'] == 25
    assert summary['gate']['kind'] == 'full'


def test_validate_verdict_fails_with_exit_3_naming_the_joint(fits, capsys):
    code, out, err = run(capsys, 'validate', fits['full'] / 'model.yaml', fits['full_bag'],
                         '--config', fits['config'], '--max-rmse-percent', '0.01', '--quiet')
    assert code == cli.EXIT_REFUSED == 3
    line = one_error_line(err)
    assert 'verdict: FAIL' in line and 'joint_' in line and 'by ' in line
    assert 'verdict: FAIL' in out
    code, out, err = run(capsys, 'validate', fits['full'] / 'model.yaml', fits['full_bag'],
                         '--config', fits['config'], '--min-rho', '1', '--quiet')
    assert code == 3 and 'ρ' in one_error_line(err)
    code, out, err = run(capsys, 'validate', fits['full'] / 'model.yaml', fits['full_bag'],
                         '--config', fits['config'], '--max-rmse-percent', '-1')
    assert code == 2 and '--max-rmse-percent' in one_error_line(err)


def test_a_still_arm_is_judged_on_its_error_not_on_the_noise_correlation(
        fits, capsys, tmp_path):
    """The arm at rest in one pose (gravity + noise): the torque does not vary, so ρ is the
    noise's (about 0) and judging it failed a good model; the RMSE is judged, ρ is not, and
    the verdict says why."""
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    rng = np.random.default_rng(3)
    t = 1000.0 + np.arange(3000) / 100.0
    q = Q0 + rng.normal(0, 1e-5, (len(t), len(Q0)))
    tau = robot.gravity_torques(Q0) + rng.standard_normal(q.shape) * NOISE
    bag = write_bag(tmp_path / 'still', t, JOINTS, q, tau / K_E)
    code, out, err = run(capsys, 'validate', fits['full'] / 'model.yaml', bag,
                         '--config', fits['config'], '--json', tmp_path / 'v.json', '--quiet')
    assert code == 0, err
    line = out.strip().splitlines()[-1]
    assert line.startswith('verdict: PASS') and 'ρ not judged on' in line, line
    verdict = yaml.safe_load((tmp_path / 'v.json').read_text())['fit_summary']['verdict']
    assert verdict['rho_not_judged'] and set(verdict['rho_not_judged']) <= \
        set(verdict['judged'])


def test_the_verdict_names_a_joint_held_still():
    """A joint that fails while held still is said to be held still, and why that fails."""
    metrics = {
        'moving': dict(max_torque=40.0, rmse=1.0, rmse_percent=2.5, rho=0.99, noise_std=0.1,
                       torque_std=10.0, motion_range=1.5),
        'still': dict(max_torque=15.0, rmse=4.6, rmse_percent=30.9, rho=0.77, noise_std=0.1,
                      torque_std=2.0, motion_range=0.0004),
        'flat': dict(max_torque=30.0, rmse=0.6, rmse_percent=2.0, rho=0.02, noise_std=0.1,
                     torque_std=0.1, motion_range=0.0003)}
    verdict = judge(metrics, max_rmse_percent=25.0, min_rho=0.5)
    assert not verdict['passed'] and list(verdict['failures']) == ['still']
    assert 'held still (its position spans 0.0004 rad)' in verdict['failures']['still']
    assert STILL in verdict['line'] and list(verdict['rho_not_judged']) == ['flat']
    # moving, it is not called still; with a varying torque its ρ is judged
    metrics['still'].update(motion_range=0.5)
    metrics['flat'].update(torque_std=5.0, motion_range=0.5)
    verdict = judge(metrics, max_rmse_percent=25.0, min_rho=0.5)
    assert 'held still' not in verdict['line'] and STILL not in verdict['line']
    assert set(verdict['failures']) == {'still', 'flat'} and 'ρ 0.02' in verdict['line']
    # held still with an error beyond the friction it may hold: a force, not stiction
    metrics['still'].update(motion_range=0.0004, holding_friction=2.0)
    verdict = judge(metrics, max_rmse_percent=25.0, min_rho=0.5)
    assert 'beyond the 2 N·m its friction may hold' in verdict['failures']['still']
    assert PUSHED in verdict['line'] and STILL not in verdict['line']
    metrics['still'].update(holding_friction=4.0)             # 4.6 N·m: within 1.5 x 4
    verdict = judge(metrics, max_rmse_percent=25.0, min_rho=0.5)
    assert STILL in verdict['line'] and PUSHED not in verdict['line']
