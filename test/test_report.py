"""``arm-dyn-id report``: one self-contained HTML page and its PNG plots."""

import re

import pytest

from arm_dyn_id import cli
from test_cli_fit import JOINTS, reciprocating_data, write_config, write_synthetic_bag


@pytest.fixture(scope='module')
def fitted(tmp_path_factory):
    root = tmp_path_factory.mktemp('report')
    data = reciprocating_data(seed=5, rate=100.0, poses=2)
    bag = write_synthetic_bag(root / 'bag', data)
    cfg = write_config(root / 'arm.yaml')
    out = root / 'fit'
    assert cli.main(['fit', str(bag), '--config', str(cfg), '--out', str(out), '--quiet']) == 0
    return out


def test_fit_writes_report(fitted):
    page = (fitted / 'report.html').read_text()
    for name in ('torque_time', 'residuals', 'pairs', 'trajectory'):
        png = fitted / f'{name}.png'
        assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    # self-contained: every image is embedded, nothing is fetched
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == 4 and all(s.startswith('data:image/png;base64,') for s in sources)
    assert '<link' not in page and '<script' not in page
    for text in ('Held-out pairs', 'Base parameters', 'condition number', 'Data quality',
                 'rate (Hz)', 'std. error', 'RMSE %') + tuple(JOINTS):
        assert text in page, text
    # the base parameter expressions are shown
    assert re.search(r'<code>m[xyz]?\d[^<]*</code>', page)


def test_report_command_rewrites(fitted, capsys):
    (fitted / 'report.html').unlink()
    assert cli.main(['report', str(fitted), '--title', 'Day 2']) == 0
    assert '<h1>Day 2</h1>' in (fitted / 'report.html').read_text()


def test_report_without_fit(tmp_path, capsys):
    assert cli.main(['report', str(tmp_path)]) == 2      # a user error: exit 2, one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'model.yaml' in err[0] and 'arm-dyn-id fit' in err[0]


def _demo_folder(root, fitted):
    """A folder laid out as `arm-dyn-id demo --out` writes it: a model, validation.json with
    the cases under ``cases`` beside facts of the run, validation_<case>.png, no fit_data."""
    import json
    import shutil
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    root.mkdir()
    shutil.copy(fitted / 'model.yaml', root / 'model.yaml')
    metrics = {'max_torque': 0.65, 'rmse': 0.0026, 'rmse_percent': 0.40, 'mae': 0.0016,
               'rho': 0.99997}
    doc = {'robot': 'humanoid_arm', 'identification_gravity': 9.81, 'validation_gravity': 1.63,
           'quick': True, 'validated_on': 'quasi-static phases of the held-out plan',
           'noise_model': {'current_noise': [0.02] * 6},
           'cases': {'moon': {j: metrics for j in JOINTS},
                     'moon_payload_0.3kg': {j: metrics for j in JOINTS}},
           'identified_urdf': 'identified.urdf', 'wall_seconds': 120.0}
    (root / 'validation.json').write_text(json.dumps(doc))
    for case in doc['cases']:
        fig = plt.figure()
        plt.plot([0, 1], [0, 1])
        fig.savefig(root / f'validation_{case}.png')
        plt.close(fig)
    return root


def test_report_on_the_demo_folder(fitted, tmp_path, capsys):
    """The demo's validation.json keeps its cases under ``cases`` beside plain facts; the
    report once read every top-level key as a case and crashed on the strings."""
    demo = _demo_folder(tmp_path / 'demo', fitted)
    assert cli.main(['report', str(demo)]) == 0, capsys.readouterr().err
    page = (demo / 'report.html').read_text()
    for text in ('moon_payload_0.3kg', 'validation gravity', 'RMSE %', 'Base parameters'):
        assert text in page, text
    # both cases' tables and the demo's own plots are in the page
    assert page.count('<td class="l">joint_6</td>') >= 2
    assert len(re.findall(r'src="data:image/png;base64,', page)) == 2


def test_report_on_a_quasi_static_fit(tmp_path, capsys):
    """Quasi-static fits hold out samples, not pairs: the report names them."""
    from arm_bags import Arm, write_arm_bag
    from test_cli_fit import URDF
    arm = Arm(URDF)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=3, sweeps=False, holds=40,
                        slow_moves=True, effort='torque').path
    out = tmp_path / 'fit'
    code = cli.main(['fit', str(bag), '--urdf', str(URDF), '--effort', 'torque', '--out',
                     str(out), '--quiet'])
    assert code == 0, capsys.readouterr().err
    page = (out / 'report.html').read_text()
    assert 'samples held out' in page and 'static holds' in page


def test_report_on_an_identifier_node_folder(fitted, tmp_path):
    """The identifier node writes <model_dir>/<stamp>/ with the model's validation section,
    which also holds plain entries beside the cases (the full fit's 'against', 'blocks')."""
    import json
    from arm_dyn_id.model import load_model
    from arm_dyn_id.service.model_dir import write_fit
    model = load_model(fitted / 'model.yaml')
    validation = json.loads((fitted / 'validation.json').read_text())
    validation = {'held_out': validation['held_out'], 'against': 'filtered',
                  'held_out_blocks': 5}
    paths = write_fit(tmp_path / 'models', model, validation=validation)
    assert 'report_error' not in paths, paths.get('report_error')
    page = paths['report'].read_text()
    assert 'Held-out pairs' in page and page.count('<td class="l">joint_6</td>') >= 1
    assert 'changed after this fit' not in page
    # its model.yaml is fingerprinted as fit's is
    from arm_dyn_id.config import file_sha256
    kept = json.loads(paths['validation'].read_text())['fit_summary']['model_sha256']
    assert kept == file_sha256(paths['model'])


def test_a_model_edited_after_its_fit_is_reported_with_a_banner(fitted, tmp_path, capsys):
    """The tables and plots come from the fit; a model.yaml changed afterwards (a
    parameter edited by hand, another fit's file copied in) is not what they score. The
    fit keeps the file's SHA-256 in validation.json; the report says so when it differs,
    on the page and on stderr, and says nothing for the file the fit wrote."""
    import json
    import shutil
    import yaml
    folder = tmp_path / 'fit'
    shutil.copytree(fitted, folder)
    summary = json.loads((folder / 'validation.json').read_text())['fit_summary']
    assert len(summary['model_sha256']) == 64
    assert cli.main(['report', str(folder)]) == 0
    assert 'changed after this fit' not in (folder / 'report.html').read_text()
    assert 'changed after this fit' not in capsys.readouterr().err
    doc = yaml.safe_load((folder / 'model.yaml').read_text())
    beta = doc['base']['values']
    beta[0] = 2 * beta[0] + 0.1
    (folder / 'model.yaml').write_text(yaml.safe_dump(doc, sort_keys=False))
    assert cli.main(['report', str(folder)]) == 0
    page = (folder / 'report.html').read_text()
    assert 'class="banner"' in page and 'model.yaml was changed after this fit' in page
    err = capsys.readouterr().err
    assert 'warning: model.yaml was changed after this fit' in err and 'validate' in err
