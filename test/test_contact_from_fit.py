"""Contact thresholds from a full fit's own held-out residuals (issue 24 item 2):
``arm-dyn-id fit --dynamics full`` writes ``contact_thresholds.yaml`` beside the model,
calibrated on the last block of the recording predicted by a fit without it. Another
no-contact run of the arm raises no flag with them; a 5 N·m push of half a second does.
"""

import contextlib
import io

import numpy as np
import pytest
import yaml

from arm_dyn_id import cli
from arm_dyn_id.model import load_model
from arm_dyn_id.service import contact
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics, run_stream
from test_cli_fit import COULOMB, NOISE, write_config
from test_cli_full import VISCOUS, fourier_data, write_plain_bag

pytestmark = pytest.mark.slow
PUSH_NM = 5.0


def _fit(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope='module')
def fitted(tmp_path_factory):
    root = tmp_path_factory.mktemp('contact_from_fit')
    data = fourier_data(seed=0, periods=3)          # 30 s: the last 7.5 s are held out
    bag = write_plain_bag(root / 'fourier', data)
    config = write_config(root / 'arm.yaml')
    code, out, err = _fit('fit', bag, '--config', config, '--dynamics', 'full', '--methods',
                          'wls', '--out', root / 'fit', '--no-report')
    assert code == 0, err
    return {'root': root, 'data': data, 'bag': bag, 'config': config, 'out': out, 'err': err,
            'dir': root / 'fit'}


def _another_run(data, seed):
    """The same motion again with fresh sensor noise (no contact)."""
    rng = np.random.default_rng(seed)
    tau = data['rigid'] + COULOMB * np.tanh(data['dq'] / 1e-3) + VISCOUS * data['dq'] + \
        rng.standard_normal(data['q'].shape) * NOISE
    q = data['q_true'] + rng.normal(0, 1e-5, data['q'].shape)
    return data['t'] + 100.0, q, tau


def test_fit_writes_thresholds_of_its_model_from_its_held_out_block(fitted):
    path = fitted['dir'] / contact.FILE_NAME
    assert path.is_file(), fitted['err']
    assert 'contact thresholds' in fitted['err'] and str(path) in fitted['err']
    doc = yaml.safe_load(path.read_text())
    assert 'held-out' in doc['calibration']['from']
    model = load_model(fitted['dir'] / 'model.yaml')
    th = contact.ContactThresholds.load(path, joints=model.joint_names)
    # the node takes them by default: same model, its default observer gain
    chosen, why = contact.calibrated_thresholds(fitted['dir'] / 'model.yaml',
                                                model.joint_names, [25.0], model)
    assert chosen is not None, why
    np.testing.assert_allclose(chosen.standstill, th.standstill)
    assert np.all(np.isfinite(th.base)) and np.all(th.base > 0)
    # a Fourier block never holds still: the thresholds say what they did not see, and
    # fit prints it
    note = th.calibration['note']
    assert 's of standstill (less than 1 s)' in note, note
    assert 'residual MODEL BAG... --calibrate' in note, note
    assert f'contact thresholds: {note}' in fitted['err']


def test_no_false_alarm_on_another_run_and_a_5_nm_push_is_flagged(fitted):
    model = load_model(fitted['dir'] / 'model.yaml')
    th = contact.ContactThresholds.load(fitted['dir'] / contact.FILE_NAME,
                                        joints=model.joint_names)
    served = ServedDynamics(model)
    t, q, tau = _another_run(fitted['data'], seed=11)
    free = run_stream(ResidualStream(served, [25.0], th), t, q, None, tau)
    assert not np.any(free['contact']), \
        f'{int(np.sum(free["contact"]))} flagged samples on a run without contact'
    pushed = tau.copy()
    start = len(t) // 2
    push = slice(start, start + int(0.5 / (t[1] - t[0])))
    pushed[push, 1] += PUSH_NM
    out = run_stream(ResidualStream(served, [25.0], th), t, q, None, pushed)
    flags = np.flatnonzero(out['contact'])
    assert flags.size, 'a 5 N·m push on joint 2 was not flagged'
    assert t[flags[0]] - t[start] <= 0.3
    assert t[flags[0]] >= t[start] and np.all(t[flags] <= t[push.stop] + 0.5)


def test_no_thresholds_when_asked_or_when_the_recording_is_short(fitted):
    out = fitted['root'] / 'fit_none'
    code, _, err = _fit('fit', fitted['bag'], '--config', fitted['config'], '--dynamics', 'full',
                        '--methods', 'wls', '--out', out, '--no-report', '--no-thresholds')
    assert code == 0, err
    assert not (out / contact.FILE_NAME).exists()
    short = write_plain_bag(fitted['root'] / 'short', fourier_data(seed=0, periods=1))
    out = fitted['root'] / 'fit_short'
    code, _, err = _fit('fit', short, '--config', fitted['config'], '--dynamics', 'full',
                        '--methods', 'wls', '--out', out, '--no-report')
    assert code == 0, err
    assert not (out / contact.FILE_NAME).exists()
    assert 'no contact thresholds written' in err and 'to hold out' in err
