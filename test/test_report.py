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
