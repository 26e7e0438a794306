"""Time of a fresh ``arm-dyn-id fit`` of a 1-minute 1 kHz Fourier recording (issue 23).

A rich recording makes the default fit (``--dynamics auto``) a full-dynamics fit: the
cut-off chosen from the spectrum, the friction model and the Coulomb term's width
chosen on time blocks, rotor inertia ``auto`` (a fit without it and one with it), the
consistent fit among the estimators, the plausibility gate, then the model, its URDF,
validation.json, fit_data.npz and the contact thresholds. This generates such a record
(``test/arm_bags.realistic_fourier``: the humanoid arm with masses 10 % and centres of
mass 1.5 cm off its URDF, 4 harmonics of 0.1 Hz, 2e-5 rad encoder noise, Coulomb +
viscous friction, torque in ``effort``; seed 0), writes it as a ``ros2 bag record``
bag and times

    python -m arm_dyn_id fit BAG --urdf urdf/humanoid_arm.urdf --effort torque --seed 0
        --quiet [--no-report]

as a fresh process, ``--repeat`` times with and without the report, alternated with the
same command from ``--baseline-tree DIR`` (a ``git archive`` of another commit) when
given. Per run (table ``runs``): ``wall_s`` (with the report: to the report),
``model_s`` (model.yaml's modification time after the start), ``outputs_s`` (the last
of model.yaml, identified.urdf, validation.json, fit_data.npz), ``cpu_s`` (the process
and its reaped children), the held-out RMSE % mean and the method chosen, so that a
faster tree is seen to write the same model. Table ``summary``: median and worst.

    .venv/bin/python bench/full_fit_time.py [--repeat 5] [--baseline-tree DIR] [--keep DIR]

``--seconds S`` times a record of S seconds instead (its tables named
``full_fit_time_<S>s``); ``--blas`` times this checkout's command under OpenBLAS's
settings instead of two trees (``arm_dyn_id/blas_threads.py``: the short spin it sets,
OpenBLAS's default spin, one thread; tables ``full_fit_time_blas...``);
``--no-report-only`` leaves out the runs with the report.
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / 'test'))

import benchlib  # noqa: E402
from bag_read import alternated_fits  # noqa: E402

URDF = benchlib.REPO / 'urdf' / 'humanoid_arm.urdf'
SECONDS, RATE, ENCODER = 60.0, 1000.0, 2e-5


#: ``--blas``: OpenBLAS settings timed against each other on this checkout (the command
#: sets the short spin itself unless the environment holds a setting)
BLAS_VARIANTS = [('short_spin', None, {}),
                 ('default_spin', None, {'OPENBLAS_THREAD_TIMEOUT': '28'}),
                 ('one_thread', None, {'OPENBLAS_NUM_THREADS': '1'})]


def write_record(bag, seconds=SECONDS):
    """The 1 kHz Fourier recording of the perturbed humanoid arm (1 minute)."""
    from arm_bags import Arm, realistic_fourier, torque_scale
    from arm_dyn_id.data.bag_writer import write_bag
    arm = Arm(URDF).perturb(np.random.default_rng(100), mass=0.1, com=0.015)
    t, q, tau = realistic_fourier(arm, 0.03 * torque_scale(arm), np.random.default_rng(0),
                                  RATE, encoder=ENCODER, seconds=seconds)
    write_bag(bag, 1.7e9 + t, list(arm.joints), q, tau)


def argv(bag, _cfg, out, report=False):
    """The timed command (the user's options only)."""
    return [sys.executable, '-m', 'arm_dyn_id', 'fit', str(bag), '--urdf', str(URDF),
            '--effort', 'torque', '--out', str(out), '--seed', '0', '--quiet'] + \
        ([] if report else ['--no-report'])


def outcome(out):
    """Held-out RMSE % (mean over the joints) and the method the fit chose."""
    doc = json.loads((Path(out) / 'validation.json').read_text())
    held = [m['rmse_percent'] for m in (doc.get('held_out') or {}).values()
            if isinstance(m, dict) and 'rmse_percent' in m]
    import yaml
    model = yaml.safe_load((Path(out) / 'model.yaml').read_text())
    return {'held_out_mean_pct': float(np.mean(held)) if held else None,
            'method': (model.get('fit') or {}).get('method'),
            'dynamics': model.get('dynamics')}


def main(argv_=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeat', type=int, default=5, help='runs of each variant')
    parser.add_argument('--baseline-tree', type=Path,
                        help='also time the command from this source tree, alternated')
    parser.add_argument('--keep', type=Path, help='keep the bag here (reused if present)')
    parser.add_argument('--seconds', type=float, default=SECONDS,
                        help='record length (s; default the issue\'s minute)')
    parser.add_argument('--blas', action='store_true',
                        help='time OpenBLAS settings against each other on this checkout '
                        '(the short spin the command sets, the default spin, one thread) '
                        'instead of two trees')
    parser.add_argument('--no-report-only', action='store_true',
                        help='time the commands without the report only')
    benchlib.add_arguments(parser)
    args = parser.parse_args(argv_)
    if args.blas and args.baseline_tree is not None:
        parser.error('--blas compares settings on this checkout: no --baseline-tree')
    name = 'full_fit_time' + ('_blas' if args.blas else '') + \
        ('' if args.seconds == SECONDS else f'_{args.seconds:g}s')
    report = benchlib.Report(name, args, title=f'Fit of a {args.seconds:g} s 1 kHz Fourier '
                             'recording' + (': OpenBLAS settings' if args.blas else ''))
    root = Path(tempfile.mkdtemp(prefix='full_fit_')) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    bag = root / ('bag' if args.seconds == SECONDS else f'bag_{args.seconds:g}s')
    try:
        if not bag.exists():
            write_record(bag, args.seconds)
        alternated_fits(report, bag, None, root, args.baseline_tree, args.repeat, argv=argv,
                        extra=outcome, tables=('runs', 'summary'),
                        variants=BLAS_VARIANTS if args.blas else None,
                        reports=(False,) if args.no_report_only else (False, True))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report.note('`python -m arm_dyn_id fit BAG --urdf urdf/humanoid_arm.urdf --effort torque '
                '--seed 0 --quiet` (with --no-report: report False) as a fresh process on the '
                f'{args.seconds:g} s 1 kHz Fourier record of the perturbed humanoid arm'
                + ('; tree: the OpenBLAS setting added to the environment (short_spin: none, '
                   'the command sets OPENBLAS_THREAD_TIMEOUT=4; default_spin: '
                   'OPENBLAS_THREAD_TIMEOUT=28; one_thread: OPENBLAS_NUM_THREADS=1)'
                   if args.blas else '') + '; the default '
                'dynamics choice makes it a full fit (rotor inertia auto: two fits). wall_s: '
                'start to exit; model_s: model.yaml written after the start; outputs_s: the '
                'last of model.yaml, identified.urdf, validation.json, fit_data.npz; cpu_s: '
                'the process and its reaped children. summary: median and worst.')
    report.save()
    return 0


if __name__ == '__main__':
    sys.exit(main())
