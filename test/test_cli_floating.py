"""``arm-dyn-id fit`` of floating-base robots (issue 17 item 4): a --config with
``floating_base`` fits the space manipulator by its momentum and the biped by its ZMP
from bags written the way a user's robot records them (test/floating_bags.py), writes
model.yaml, identified.urdf, validation.json and a report, and says every user error in
one line with exit code 2."""

import json
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.cli import main
from arm_dyn_id.model import load_model
from arm_dyn_id.model.floating import FloatingIdentification


def _cli(*args):
    return subprocess.run([sys.executable, '-m', 'arm_dyn_id', *map(str, args)],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope='module')
def space(tmp_path_factory):
    from floating_bags import space_bag
    folder = tmp_path_factory.mktemp('space')
    config_path, config, bag = space_bag(folder)
    return folder, config_path, config, bag


@pytest.mark.slow
def test_space_robot_fit_writes_the_model_its_urdf_and_a_report(space):
    folder, config_path, config, bag = space
    out = folder / 'fit'
    res = _cli('fit', bag, '--config', config_path, '--out', out)
    assert res.returncode == 0, res.stderr
    # one screen: what was fitted, what was not excited, the held-out score
    assert 'momentum method, linear estimator' in res.stdout
    assert 'not excited by this motion' in res.stdout
    assert 'held-out momentum RMS' in res.stdout
    assert len(res.stdout.splitlines()) <= 25
    assert 'momentum fit (linear)' in res.stderr            # progress, like the arm path
    ident = load_model(out / 'model.yaml')
    assert isinstance(ident, FloatingIdentification) and ident.method == 'momentum'
    assert ident.phi[::10].sum() == pytest.approx(config.floating_base.total_mass, abs=1e-6)
    assert ident.unexcited and all(n in res.stdout for n in ident.unexcited)
    assert ident.provenance['bag'] == str(bag)
    # the identified URDF is what pinocchio loads, with the identified masses
    robot = pin.buildModelFromUrdf(str(out / 'identified.urdf'), pin.JointModelFreeFlyer())
    masses = [i.mass for i in robot.inertias[1:]]
    np.testing.assert_allclose(masses, ident.phi[::10], rtol=1e-8)
    nominal = pin.buildModelFromUrdf(str(config.urdf), pin.JointModelFreeFlyer())
    assert not np.allclose(masses, [i.mass for i in nominal.inertias[1:]], rtol=1e-3)
    validation = json.loads((out / 'validation.json').read_text())
    m = validation['floating']
    assert m['linear_momentum_rms'] < 0.05 * m['nominal_linear_momentum_rms']
    assert validation['fit_summary']['unexcited'] == ident.unexcited
    # the report of the folder: the held-out momentum plot, measured vs model
    assert (out / 'report.html').is_file() and (out / 'held_out.png').is_file()
    (out / 'held_out.png').unlink()
    res = _cli('report', out)
    assert res.returncode == 0, res.stderr
    assert (out / 'held_out.png').stat().st_size > 10000
    page = (out / 'report.html').read_text()
    assert 'Floating-base model of space_manipulator' in page and 'not excited' in page


@pytest.mark.slow
def test_biped_fit_with_a_validation_bag(tmp_path):
    from floating_bags import biped_bag
    config_path, config, bag = biped_bag(tmp_path, seed=1)
    _, _, second = biped_bag(tmp_path, name='second_bag', seed=2, duration=14.0)
    out = tmp_path / 'fit'
    res = _cli('fit', bag, '--config', config_path, '--validate', second, '--method', 'linear',
               '--out', out, '--no-report')
    assert res.returncode == 0, res.stderr
    assert 'zmp method, linear estimator' in res.stdout and 'lc_foot' in res.stdout
    ident = FloatingIdentification.load(out / 'model.yaml')
    assert ident.phi[::10].sum() == pytest.approx(20.4, abs=1e-9)
    assert 'lc_foot' in ident.unexcited
    m = json.loads((out / 'validation.json').read_text())['floating']
    assert m['held_out'] == 'validation recording'
    assert m['zmp_rms_mm'] < 0.8 * m['nominal_zmp_rms_mm']
    robot = pin.buildModelFromUrdf(str(out / 'identified.urdf'), pin.JointModelFreeFlyer())
    np.testing.assert_allclose([i.mass for i in robot.inertias[1:]], ident.phi[::10],
                               rtol=1e-8)
    assert not (out / 'report.html').exists()


def test_zmp_config_on_a_bag_without_sole_sensors_is_one_line(tmp_path):
    """A biped bag recorded without the sole sensor topics: exit 2, one line naming the
    missing topic (and listing the bag's)."""
    from floating_bags import biped_nominal_urdf, nominal_config
    from arm_dyn_id.data.floating import write_floating_bag
    from arm_dyn_id.sim.floating import FloatingData
    config_path, config = nominal_config(tmp_path, 'biped', biped_nominal_urdf())
    n, rng = 400, np.random.default_rng(0)
    t = np.arange(n) * 0.02
    q = 0.01 * rng.standard_normal((n, 12))
    quat = np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
    data = FloatingData(t=t, base_position=None, base_quaternion=quat, base_linear=None,
                        base_angular=np.zeros((n, 3)), q=q, dq=np.zeros_like(q))
    import dataclasses
    bare = dataclasses.replace(config, floating_base=dataclasses.replace(
        config.floating_base, sole_sensors=()))
    bag = write_floating_bag(tmp_path / 'bag', bare, data)
    res = _cli('fit', bag, '--config', config_path, '--out', tmp_path / 'fit')
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines[-1]) and lines[-1].startswith('arm-dyn-id fit: error: ')
    assert 'sole_0' in lines[-1] and 'Traceback' not in res.stderr
    assert not (tmp_path / 'fit').exists()


@pytest.mark.parametrize('extra, message', [
    (['--method', 'newton'], "--method 'newton' does not apply to the momentum method"),
    (['--methods', 'wls'], '--methods does not apply to a floating-base robot'),
    (['--torque-constants', '1,1,1,1,1,1'], '--torque-constants does not apply'),
])
def test_floating_option_errors_are_one_line(space, capsys, extra, message):
    folder, config_path, _, bag = space
    code = main(['fit', str(bag), '--config', str(config_path), '--out',
                 str(folder / 'bad'), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and err[-1].startswith('arm-dyn-id fit: error:')
    assert not (folder / 'bad').exists()


def test_floating_options_on_an_arm_and_missing_bags(space, tmp_path, capsys):
    folder, config_path, _, bag = space
    code = main(['fit', str(bag), '--urdf', 'humanoid_arm.urdf', '--effort', 'torque',
                 '--validate', str(bag), '--out', str(tmp_path / 'o')])
    assert code == 2 and '--validate applies to floating-base robots' in \
        capsys.readouterr().err
    code = main(['fit', str(tmp_path / 'nope'), '--config', str(config_path), '--out',
                 str(tmp_path / 'o')])
    assert code == 2 and 'does not exist' in capsys.readouterr().err
    code = main(['fit', str(bag), '--config', str(config_path), '--validate',
                 str(tmp_path / 'nope'), '--out', str(tmp_path / 'o')])
    assert code == 2 and f'validation bag {tmp_path / "nope"} does not exist' in \
        capsys.readouterr().err


def test_refusal_when_the_fit_predicts_worse_than_the_urdf():
    from arm_dyn_id.cli.fit_floating import REFUSE_RATIO, _verdict
    assert _verdict({'zmp_vs_nominal': 0.5}) is None
    assert 'ZMP 2.00 x worse' in _verdict({'zmp_vs_nominal': 2.0})
    assert _verdict({'linear_vs_nominal': REFUSE_RATIO * 0.99,
                     'angular_vs_nominal': None}) is None
    assert 'angular momentum' in _verdict({'angular_vs_nominal': 3.0})


def test_a_refused_fit_exits_3_and_force_writes_it_marked(space, monkeypatch, capsys):
    """The refusal path end to end, its threshold lowered so that any fit is refused."""
    from arm_dyn_id.cli import fit_floating
    folder, config_path, _, bag = space
    monkeypatch.setattr(fit_floating, 'REFUSE_RATIO', 0.0)
    out = folder / 'refused'
    args = ['fit', str(bag), '--config', str(config_path), '--out', str(out), '--no-report']
    assert main(args) == 3
    err = capsys.readouterr().err
    assert 'fit refused, on held-out data the identified model predicts the linear ' \
        'momentum' in err and not out.exists()
    assert main(args + ['--force']) == 0
    assert 'marked rejected' in capsys.readouterr().err
    ident = FloatingIdentification.load(out / 'model.yaml')
    assert 'worse than the nominal URDF' in ident.metrics['rejected']
    validation = json.loads((out / 'validation.json').read_text())
    assert validation['floating']['rejected'] == ident.metrics['rejected']


def test_a_recorder_bag_of_a_floating_robot_needs_no_config(space, tmp_path, capsys):
    """A bag with the recorder's stored configuration of a floating-base robot is fitted as
    one (here: it has no odometry, so the floating reader names that topic); when the
    configuration file it names is gone, one line asks for --config."""
    import yaml
    from arm_dyn_id.data.bag_writer import config_document, write_bag
    _, config_path, config, _ = space
    n = 50
    stamps = 1.7e9 + 0.05 * np.arange(n)
    q = np.zeros((n, 6))

    def bag(name, **extra):
        doc = config_document(config, floating_base=config.floating_base.to_dict(), **extra)
        return write_bag(tmp_path / name, stamps, list(config.joints), q, None, velocity=q,
                         config_text=yaml.safe_dump(doc))

    code = main(['fit', str(bag('recorded')), '--out', str(tmp_path / 'o')])
    err = capsys.readouterr().err
    assert code == 2 and 'base_odometry' in err and 'Odometry' in err
    gone = bag('moved', config_file=str(tmp_path / 'gone.yaml'))
    code = main(['fit', str(gone), '--out', str(tmp_path / 'o')])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and 'recorded from a floating-base robot' in err[-1] and \
        '--config' in err[-1]
