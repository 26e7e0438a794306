"""What a fresh ``arm-dyn-id fit`` imports: the lazy imports stay lazy.

A fresh fit command spends about half of its time importing (docs/benchmarks.md,
"Reading a recorder bag"); what only some paths need is imported on those paths.
These tests run the command in a fresh interpreter and read its ``sys.modules``
(no timing: what is imported, not how long it takes).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_cli_fit import reciprocating_data, write_config, write_synthetic_bag

#: runs ``arm-dyn-id fit`` (argv after the script) in this interpreter, then prints the
#: loaded modules of the packages the fit path must not import, and whether SciPy's
#: optimisers were, as one JSON line
PROBE = '''
import json, sys
from arm_dyn_id import cli
code = cli.main(sys.argv[1:])
heavy = ('matplotlib', 'cvxpy', 'mujoco', 'hypothesis', 'rclpy')
print(json.dumps({'code': code, 'modules': sorted(
    m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('scipy.signal')),
    'scipy.optimize': 'scipy.optimize' in sys.modules}))
'''


def _fit_modules(*args):
    proc = subprocess.run([sys.executable, '-c', PROBE, 'fit', *map(str, args), '--quiet'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def recorder_bag(tmp_path_factory):
    root = tmp_path_factory.mktemp('cold')
    bag = write_synthetic_bag(root / 'bag', reciprocating_data(seed=3, rate=100.0, poses=1),
                              recorder=True)
    return bag, write_config(root / 'arm.yaml')


def test_fit_without_report_imports_no_plotting_or_solver(recorder_bag, tmp_path):
    """Up to the model and its files, no matplotlib (the report's), no cvxpy, no
    scipy.signal (0.3-0.5 s of import: the filters are arm_dyn_id.data.filters), no
    simulator, no ROS."""
    bag, cfg = recorder_bag
    out = _fit_modules(bag, '--config', cfg, '--out', tmp_path / 'fit', '--no-report')
    # scipy.optimize: the identified URDF's linear programme
    assert {k: out[k] for k in ('code', 'modules')} == {'code': 0, 'modules': []}
    assert (tmp_path / 'fit' / 'model.yaml').is_file()


def test_full_fit_imports_neither_cvxpy_nor_scipy_signal(tmp_path):
    """The full-dynamics fit of a Fourier recording (the default dynamics choice, rotor
    inertia auto, the consistent fit among the candidates) solves its semidefinite
    programme with Clarabel directly and filters with arm_dyn_id.data.filters: cvxpy and
    scipy.signal (about 0.9 s of imports together) stay out of the command. So does
    scipy.optimize (0.1 s): the friction bounds, the effort scales' search and the contact
    thresholds' plane are solved in NumPy."""
    from arm_bags import Arm, realistic_fourier
    from arm_dyn_id.data.bag_writer import write_bag
    urdf = Path(__file__).resolve().parent.parent / 'urdf' / 'humanoid_arm.urdf'
    arm = Arm(urdf).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    t, q, tau = realistic_fourier(arm, np.full(arm.n, 0.05), np.random.default_rng(0),
                                  seconds=20.0)
    write_bag(tmp_path / 'bag', 1.7e9 + t, list(arm.joints), q, tau)
    out = _fit_modules(tmp_path / 'bag', '--urdf', urdf, '--effort', 'torque', '--out',
                       tmp_path / 'fit', '--no-report')
    assert out == {'code': 0, 'modules': [], 'scipy.optimize': False}
    model = (tmp_path / 'fit' / 'model.yaml').read_text()
    assert 'dynamics: full' in model and 'consistent' in model


#: runs ``arm-dyn-id`` (argv after the script) as its console script does (``cli.run``);
#: once the command returned: its threads, its OPENBLAS_THREAD_TIMEOUT, and the CPU time
#: the process spent in a 0.3 s sleep right after a product of two 400 x 400 matrices
THREADS_PROBE = '''
import json, os, time
from arm_dyn_id import cli
command = cli.main


def main(argv=None):
    import numpy as np
    code = command(argv)
    a = np.ones((400, 400))
    a @ a
    cpu = time.process_time()
    time.sleep(0.3)
    print(json.dumps({'code': code, 'threads': len(os.listdir('/proc/self/task')),
                      'setting': os.environ.get('OPENBLAS_THREAD_TIMEOUT'),
                      'idle_cpu_s': time.process_time() - cpu}), flush=True)
    return code


cli.main = main
cli.run()
'''


def _without_blas_settings(**extra):
    """This environment without OpenBLAS settings (the test process may hold the one
    arm_dyn_id.nodes set), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ('OPENBLAS_THREAD_TIMEOUT', 'OPENBLAS_NUM_THREADS')}
    env.update(extra)
    return env


@pytest.mark.skipif(not Path('/proc/self/task').is_dir(), reason='threads read from /proc')
def test_fit_command_lets_blas_threads_sleep_unless_the_user_set_the_spin(recorder_bag,
                                                                          tmp_path):
    """OpenBLAS's idle threads spin ~0.1 s after every product by default and take the
    core the report's painter draws on (docs/benchmarks.md): the command sets the
    shortest spin before NumPy loads, keeps OpenBLAS's threads, and a user's setting."""
    bag, cfg = recorder_bag
    runs = {}
    for name, env in (('default', _without_blas_settings()),
                      ('user', _without_blas_settings(OPENBLAS_THREAD_TIMEOUT='28'))):
        proc = subprocess.run(
            [sys.executable, '-c', THREADS_PROBE, 'fit', str(bag), '--config', str(cfg),
             '--out', str(tmp_path / name), '--no-report', '--quiet'],
            capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs['default']['code'] == 0 and runs['default']['setting'] == '4'
    assert runs['user']['setting'] == '28'
    if len(os.sched_getaffinity(0)) > 1:
        assert runs['default']['threads'] > 1          # the products still shared
        # asleep at once: no CPU while the process sleeps (with the default spin, up to
        # ~0.1 s of it on a quiet machine; a busy one may not run the spinning thread)
        assert runs['default']['idle_cpu_s'] < 0.05, runs


#: imports the nodes' package, then a node's module (which loads NumPy); prints the setting
#: and whether NumPy was loaded before the node's module, then the CPU time spent in a
#: 0.3 s sleep right after a product
NODE_PROBE = '''
import json, os, sys, time
import arm_dyn_id.nodes
before = 'numpy' in sys.modules
import arm_dyn_id.nodes.identifier_node
import numpy as np
a = np.ones((400, 400))
a @ a
cpu = time.process_time()
time.sleep(0.3)
print(json.dumps({'setting': os.environ.get('OPENBLAS_THREAD_TIMEOUT'),
                  'numpy_before': before, 'idle_cpu_s': time.process_time() - cpu}))
'''


def test_nodes_set_the_short_blas_spin_before_numpy_loads():
    """A node's module imports NumPy at its top: the nodes' package, imported first,
    sets the spin before NumPy (and OpenBLAS) load, unless the user set it; the node's
    process then spends no CPU asleep after a product."""
    outs = []
    for env in (_without_blas_settings(), _without_blas_settings(OPENBLAS_THREAD_TIMEOUT='9')):
        proc = subprocess.run([sys.executable, '-c', NODE_PROBE], capture_output=True,
                              text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert [(o['setting'], o['numpy_before']) for o in outs] == [('4', False), ('9', False)]
    if len(os.sched_getaffinity(0)) > 1:
        assert outs[0]['idle_cpu_s'] < 0.05, outs


def test_short_blas_spin_keeps_a_users_setting():
    from arm_dyn_id.blas_threads import short_blas_spin
    env = {}
    assert short_blas_spin(env) and env == {'OPENBLAS_THREAD_TIMEOUT': '4'}
    env = {'OPENBLAS_THREAD_TIMEOUT': '20'}
    assert not short_blas_spin(env) and env == {'OPENBLAS_THREAD_TIMEOUT': '20'}
    env = {'OPENBLAS_THREAD_TIMEOUT': ''}        # set but empty: OpenBLAS reads nothing
    assert short_blas_spin(env) and env['OPENBLAS_THREAD_TIMEOUT'] == '4'


def test_report_draws_without_pyplot(recorder_bag, tmp_path):
    """The report draws on Agg figures of its own (in the painter's children where fork is
    available, else here): pyplot (its import and figure manager, for interactive use) is
    not loaded, and the four plots are written."""
    bag, cfg = recorder_bag
    out = _fit_modules(bag, '--config', cfg, '--out', tmp_path / 'fit')
    assert out['code'] == 0
    assert 'matplotlib.pyplot' not in out['modules']
    assert not {'cvxpy', 'mujoco', 'hypothesis', 'rclpy'} & {m.split('.')[0]
                                                             for m in out['modules']}
    for name in ('torque_time', 'residuals', 'pairs', 'trajectory'):
        assert (tmp_path / 'fit' / f'{name}.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.fixture(scope='module')
def fitted(recorder_bag, tmp_path_factory):
    """A fit with its report, in this process."""
    from arm_dyn_id import cli
    bag, cfg = recorder_bag
    folder = tmp_path_factory.mktemp('cold_fit') / 'fit'
    assert cli.main(['fit', str(bag), '--config', str(cfg), '--out', str(folder),
                     '--quiet']) == 0
    return folder


def test_report_plots_are_the_ones_drawn_one_by_one(fitted, tmp_path):
    """write_report may draw half of the plots in a forked child: the files are the ones
    the plot functions write when called one after the other here."""
    from arm_dyn_id.validation import report
    with np.load(fitted / 'fit_data.npz') as npz:
        data = dict(npz)
    for name, fn in (('torque_time', report.plot_torque_time),
                     ('residuals', report.plot_residuals), ('pairs', report.plot_pairs),
                     ('trajectory', report.plot_trajectory)):
        fn(data, tmp_path / f'{name}.png')
        assert (tmp_path / f'{name}.png').read_bytes() == \
            (fitted / f'{name}.png').read_bytes(), name


def test_report_error_is_raised_here(fitted, tmp_path):
    """A plot that cannot be drawn raises in the caller (not lost in a child)."""
    from arm_dyn_id.validation import report
    folder = tmp_path / 'fit'
    folder.mkdir()
    for name in ('model.yaml', 'validation.json'):
        (folder / name).write_bytes((fitted / name).read_bytes())
    with np.load(fitted / 'fit_data.npz') as npz:
        data = {k: v for k, v in npz.items() if k != 'training_tau'}
    np.savez_compressed(folder / 'fit_data.npz', **data)
    with pytest.raises(KeyError, match='training_tau'):
        report.write_report(folder)


def test_painter_draws_the_folder_or_just_exits(fitted, tmp_path):
    """The painter draws a folder's plots when asked (the files of the plot functions),
    and its child exits when it is closed without being asked."""
    from arm_dyn_id.validation.report import Painter
    with Painter() as painter:
        pass
    assert painter.close() is None              # waited for once, on leaving
    folder = tmp_path / 'fit'
    folder.mkdir()
    (folder / 'fit_data.npz').write_bytes((fitted / 'fit_data.npz').read_bytes())
    with Painter() as painter:
        drawn = painter.draw(folder)
    for name in ('torque_time', 'residuals', 'pairs', 'trajectory'):
        if drawn:
            assert (folder / f'{name}.png').read_bytes() == \
                (fitted / f'{name}.png').read_bytes(), name
        else:                                   # no fork here: nothing drawn by a child
            assert not (folder / f'{name}.png').exists()


def test_fit_has_the_plots_drawn_while_it_writes_the_model(recorder_bag, tmp_path):
    """The painter is told to draw once fit_data.npz is written, before the model, the
    URDF and validation.json (the report's drawing overlaps them); a refused fit tells it
    nothing. The painter here is a real Painter whose start is observed."""
    from arm_dyn_id.cli import build_parser
    from arm_dyn_id.cli.fit import Progress, fit_bag
    from arm_dyn_id.validation.report import Painter
    bag, cfg = recorder_bag
    out = tmp_path / 'fit'
    seen = []

    class Observed(Painter):
        def start(self, folder):
            seen.append(sorted(p.name for p in Path(folder).iterdir()))
            super().start(folder)

    argv = ['fit', str(bag), '--config', str(cfg), '--out', str(out), '--quiet']
    args = build_parser(argv).parse_args(argv)
    with Observed() as painter:
        paths, _ = fit_bag(args, Progress(quiet=True), painter=painter)
        drawn = painter.draw(out)
    assert seen[0] == ['fit_data.npz']           # nothing else written yet
    assert paths['data'] == out / 'fit_data.npz' and paths['model'].is_file()
    if drawn:       # fork available: the child drew the plots of this folder
        for name in ('torque_time', 'residuals', 'pairs', 'trajectory'):
            assert (out / f'{name}.png').stat().st_size > 1000, name
    # another folder than the one it started on: not drawn by it
    with Observed() as painter:
        painter.start(out)
        assert painter.draw(tmp_path) is False
