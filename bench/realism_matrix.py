"""The automatic cut-off across arms, rates, encoder noise and effort kinds: the realism
matrix of issue 23, and the cost of the choice.

1. **Matrix** (``matrix`` table). Arms: the humanoid arm of ``urdf/``,
   example-robot-data's UR5 and Panda. Rates 100, 250, 500, 1000, 2000 Hz. Encoder
   noise 0, 2e-5, 1e-4, 5e-4 rad (white) and a 17-bit single-turn encoder (quantised
   q, no other noise). Every record: a Fourier plan of 5 harmonics of 0.1 Hz
   (0.1-0.5 Hz, 70 % of the position and velocity limits), ``--seconds`` long,
   stamps moved by up to ±25 % of a step, 2 % of the samples dropped; τ by
   pinocchio's RNEA + Coulomb (``tanh(q̇/0.01)``) + viscous friction. Effort
   ``torque``: + white noise of 2 % of each joint's RMS torque. Effort ``current``
   (at 1000 Hz, every arm and noise): the motor current τ / k (k = 10 N·m/A) with
   white noise of 5 % of its RMS, quantised to 1 mA, converted back by
   ``data.motor.CurrentToTorque`` (the cut-off is chosen from q alone, so the
   effort kind changes only the torque noise the fit sees). Each record is fitted
   (``fit_full``, weighted least squares) with the default cut-off, with the rule
   of 39f87b8 (the velocity spectrum's power, kept here as ``old_choose_cutoff``)
   and with every cut-off of a sweep (1-40 Hz, below 0.4 x the rate), and scored
   on a second Fourier trajectory (exact states) against the true torques: mean
   over the joints of the RMS error, % of each joint's RMS torque. Each cell is
   ``--seeds`` records (noise, stamps, drops); their errors are averaged. ``ratio``:
   the default's mean error over the mean error of the sweep's best cut-off (the
   oracle, the best fixed cut-off); the goal is at most 1.25 in every cell.
   ``worst_seed_ratio``: the same on single records, against each record's own best
   (near the optimum the error curve of one record has bumps of 10-20 %, so a sweep
   of 9 cut-offs finds a lucky one).
2. **Speed** (``docs/results/realism_matrix_speed.md``, run first). A 1-minute
   1 kHz recording of the UR5 (clean, 17-bit, 2e-5 rad noise): the time of the old
   and the new cut-off choice on the same resampled q, and of the whole
   ``fit_full`` with the default estimators (wls, irls, consistent) at the cut-off
   each rule chose; after a warm-up fit, the two alternate, best of 3.

One BLAS thread (``OPENBLAS_NUM_THREADS=1``, set before NumPy is imported): on the
shared 2-core machine OpenBLAS's own threads spin against the other processes, and
one fit took 6 s instead of 0.2 s.

Seeded: the records come from ``default_rng(seed)`` (``--seeds``), the plans from
fixed seeds (1 for the records, 2 for the held-out trajectory).

    .venv/bin/python bench/realism_matrix.py [--quick] [--seconds 20] [--seeds 0 1 2]
                                             [--no-speed | --speed-only | --command]

3. **Through the command line** (``--command``, ``docs/results/realism_matrix_command.md``):
   a subset of cells (:data:`COMMAND_CELLS`, ``--seeds`` records each) fitted by ``arm-dyn-id fit
   --dynamics full --effort torque`` with every default (friction and rotor inertia
   chosen, weighted and consistent fits, the data gate), against the same command with
   each ``--cutoff`` of the sweep; a refusal is reported, and the model ``--force``
   writes is scored.
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.signal  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

import benchlib  # noqa: E402
# the matrix's arms, records and score are the test's (test/test_preparation_matrix.py)
from test_preparation_matrix import (ARMS, RATIO, held_out, held_out_error,  # noqa: E402
                                     simulate)

from arm_dyn_id.data.motor import CurrentToTorque  # noqa: E402
from arm_dyn_id.data.preparation import choose_band, choose_cutoff, resample  # noqa: E402
from arm_dyn_id.identification.full_dynamics import FULL_METHODS, fit_full  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402

RATES = (100.0, 250.0, 500.0, 1000.0, 2000.0)
#: (label, white noise rad, encoder bits)
NOISES = (('0', 0.0, None), ('2e-5', 2e-5, None), ('1e-4', 1e-4, None),
          ('5e-4', 5e-4, None), ('17-bit', 0.0, 17))
SWEEP = (1.0, 1.6, 2.5, 4.0, 6.3, 10.0, 16.0, 25.0, 40.0)
CURRENT_RATE = 1000.0
TORQUE_CONSTANT = 10.0          # N·m/A
CURRENT_NOISE = 0.05            # of each joint's RMS current
CURRENT_STEP = 1e-3             # A
QUICK = {'rates': (100.0, 1000.0), 'noises': ('0', '5e-4', '17-bit'), 'current': False}


def old_choose_cutoff(q, rate):
    """The rule of 39f87b8 (before issue 23): 5 x the frequency below which the velocity
    spectrum (central differences, Welch) holds all but 1e-4 of its power."""
    dq = np.gradient(np.asarray(q, dtype=float), 1.0 / rate, axis=0)
    nper = int(min(len(q), max(256, 2 ** int(np.ceil(np.log2(20 * rate))))))
    f, p = scipy.signal.welch(dq, fs=rate, nperseg=nper, axis=0, detrend='linear')
    total = np.sum(p, axis=1)
    if not np.any(total > 0):
        return float(np.clip(rate / 20, 0.5, 0.4 * rate))
    cumulative = np.cumsum(total) / np.sum(total)
    highest = float(f[int(np.argmax(cumulative >= 1.0 - 1e-4))])
    return float(np.clip(5.0 * highest, 0.5, 0.4 * rate))


def current_record(robot, rate, noise, bits, seconds, seed):
    """A record whose effort is the motor current, converted back to torque."""
    t, q, tau = simulate(robot, rate, noise, seconds=seconds, seed=seed, bits=bits,
                         torque_noise=0.0)
    rng = np.random.default_rng(seed + 1000)
    current = tau / TORQUE_CONSTANT
    current = current + CURRENT_NOISE * np.sqrt(np.mean(current ** 2, axis=0)) * \
        rng.standard_normal(current.shape)
    current = np.round(current / CURRENT_STEP) * CURRENT_STEP
    motor = CurrentToTorque(robot.joint_names, [TORQUE_CONSTANT] * robot.n_joints)
    return t, q, motor.convert_many(current)


def score(robot, record, held, cutoff_hz=None):
    """Held-out error (%) of a WLS fit at ``cutoff_hz`` (None: the default) and the
    preparation's record."""
    model, _ = fit_full(robot, *record, methods=('wls',), cutoff_hz=cutoff_hz)
    return held_out_error(model, held), model.metadata['preparation']


def cell(report, arm, robot, held, rate, label, noise, bits, effort, seconds, seeds):
    """One cell: every seed's record fitted at the default, the old rule's and every
    sweep cut-off; errors averaged over the seeds."""
    started = time.perf_counter()
    sweep_hz = [c for c in SWEEP if c < 0.4 * rate]
    default, old, sweep, chosen, old_hz, worst, warnings = [], [], [], [], [], 0.0, set()
    for seed in seeds:
        if effort == 'current':
            record = current_record(robot, rate, noise, bits, seconds, seed)
        else:
            record = simulate(robot, rate, noise, seconds=seconds, seed=seed, bits=bits)
        error, prep = score(robot, record, held)
        tu, qu, _, info = resample(record[0], record[1])
        band = choose_band(qu, info['rate_hz'])
        old_hz.append(old_choose_cutoff(qu, info['rate_hz']))
        default.append(error)
        chosen.append(prep['cutoff_hz'])
        warnings.add(prep.get('cutoff_warning') or '')
        old.append(score(robot, record, held, old_hz[-1])[0])
        sweep.append([score(robot, record, held, c)[0] for c in sweep_hz])
        worst = max(worst, error / min(sweep[-1]))
    mean = np.mean(sweep, axis=0)
    best = int(np.argmin(mean))
    ratio = float(np.mean(default) / mean[best])
    return report.add('matrix', {
        'arm': arm, 'effort': effort, 'rate_hz': rate, 'encoder': label,
        'band_hz': round(band.band_hz, 3) if band.band_hz else None,
        'q_noise_rad': float(f'{np.median(band.q_noise_rad):.2g}'),
        'default_hz': round(float(np.mean(chosen)), 2),
        'default_error_percent': round(float(np.mean(default)), 4),
        'oracle_hz': sweep_hz[best], 'oracle_error_percent': round(float(mean[best]), 4),
        'ratio': round(ratio, 3), 'within': bool(ratio <= RATIO),
        'worst_seed_ratio': round(worst, 3),
        'old_hz': round(float(np.mean(old_hz)), 2),
        'old_error_percent': round(float(np.mean(old)), 4),
        'old_ratio': round(float(np.mean(old) / mean[best]), 3),
        'warning': ' / '.join(sorted(w for w in warnings if w)),
        'sweep': {f'{c:g}': round(float(v), 4) for c, v in zip(sweep_hz, mean)},
        'seeds': list(seeds), 'seconds': round(time.perf_counter() - started, 1)})


def speed_rows(report, seed, repeats=3):
    """The old and new choice, and the fit at each one's cut-off, on 1-minute 1 kHz
    records; a warm-up fit first, then the two alternate and the best of
    ``repeats`` counts (the first fit of a process pays for imports and caches)."""
    robot = RobotModel.from_urdf(ARMS['ur5'])
    warm = simulate(robot, 1000.0, 0.0, seconds=10.0, seed=seed)
    fit_full(robot, *warm, methods=FULL_METHODS)
    rules = {'old': old_choose_cutoff, 'new': lambda q, r: choose_cutoff(q, r)[0]}
    for label, noise, bits in (('0', 0.0, None), ('17-bit', 0.0, 17), ('2e-5', 2e-5, None)):
        record = simulate(robot, 1000.0, noise, seconds=60.0, seed=seed, bits=bits)
        tu, qu, _, info = resample(record[0], record[1])
        cut = {name: rule(qu, info['rate_hz']) for name, rule in rules.items()}
        choice = {name: [] for name in rules}
        fit = {name: [] for name in rules}
        rows = {}
        for _ in range(repeats):
            for name, rule in rules.items():
                started = time.perf_counter()
                rule(qu, info['rate_hz'])
                choice[name].append(time.perf_counter() - started)
                started = time.perf_counter()
                model, _ = fit_full(robot, *record, methods=FULL_METHODS, cutoff_hz=cut[name])
                fit[name].append(time.perf_counter() - started)
                rows[name] = model.metadata['preparation']['n_kept']
        row = {'arm': 'ur5', 'rate_hz': 1000.0, 'seconds': 60.0, 'encoder': label}
        for name in rules:
            row.update({f'{name}_cutoff_hz': round(cut[name], 2),
                        f'{name}_choice_ms': round(1000 * min(choice[name]), 1),
                        f'{name}_fit_s': round(min(fit[name]), 2),
                        f'{name}_rows': rows[name]})
        report.add('speed', row)


#: ``--command``: cells fitted by the command line with every default (friction and
#: rotor inertia chosen on held-out blocks, weighted and consistent fits, the data gate):
#: the test's fast subset and each arm at 1 kHz with 1e-4 rad encoder noise (the issue's
#: case: the old rule took 400 Hz there).
COMMAND_CELLS = [(arm, rate, label) for arm, rate, label in (
    ('humanoid', 100.0, '5e-4'), ('ur5', 500.0, '2e-5'), ('panda', 500.0, '0'),
    ('panda', 2000.0, '17-bit'), ('humanoid', 2000.0, '5e-4'), ('humanoid', 1000.0, '1e-4'),
    ('ur5', 1000.0, '1e-4'), ('panda', 1000.0, '1e-4'))]


def command_fit(tmp, robot, urdf, record, held, cutoff_hz=None):
    """``arm-dyn-id fit --dynamics full --effort torque`` of ``record`` with its
    defaults (``cutoff_hz``: ``--cutoff``): (exit code, the refusal or '', held-out
    error %, the cut-off used). A refused fit is scored from ``--force``'s model."""
    import contextlib
    import io

    from arm_dyn_id import cli
    from arm_dyn_id.data.bag_writer import write_bag
    from arm_dyn_id.model import load_model
    t, q, tau = record
    bag = tmp / 'bag'
    if not bag.exists():
        write_bag(bag, 1.7e9 + t, list(robot.joint_names), q, tau)
    tag = 'default' if cutoff_hz is None else f'{cutoff_hz:g}'
    argv = ['fit', str(bag), '--urdf', str(urdf), '--effort', 'torque', '--dynamics', 'full',
            '--no-report', '--quiet'] + ([] if cutoff_hz is None else
                                         ['--cutoff', f'{cutoff_hz:g}'])
    refusal, code = '', None
    for force in ([], ['--force']):
        out = tmp / f'fit_{tag}{"_forced" if force else ""}'
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = cli.main(argv + ['--out', str(out)] + force)
        if code is None:
            code = status
            lines = [x for x in err.getvalue().splitlines() if 'refused' in x]
            refusal = lines[-1] if lines else ''
        if (out / 'model.yaml').is_file():
            model = load_model(out / 'model.yaml', urdf=urdf)
            return code, refusal, held_out_error(model, held), \
                model.metadata['preparation']['cutoff_hz']
    return code, refusal, None, None


def command_rows(report, seeds, seconds):
    """:data:`COMMAND_CELLS` through the command line: the default cut-off against a
    sweep of ``--cutoff``; errors averaged over the ``seeds``' records, as in the matrix."""
    import tempfile
    noises = {label: (noise, bits) for label, noise, bits in NOISES}
    for arm, rate, label in COMMAND_CELLS:
        urdf = ARMS[arm]
        if urdf is None:
            report.note(f'{arm}: skipped (example-robot-data is not installed)')
            continue
        started = time.perf_counter()
        robot = RobotModel.from_urdf(urdf)
        held = held_out(robot)
        noise, bits = noises[label]
        sweep_hz = [c for c in SWEEP if c < 0.4 * rate]
        default, chosen, sweep, codes, refusals, refused = [], [], [], [], set(), set()
        for seed in seeds:
            record = simulate(robot, rate, noise, seconds=seconds, seed=seed, bits=bits)
            with tempfile.TemporaryDirectory(prefix='realism_command_') as tmp:
                code, refusal, error, hz = command_fit(Path(tmp), robot, urdf, record, held)
                runs = [command_fit(Path(tmp), robot, urdf, record, held, c)
                        for c in sweep_hz]
            codes.append(code)
            if refusal:
                refusals.add(refusal[:160])
            default.append(error)
            chosen.append(hz)
            sweep.append([r[2] if r[2] is not None else np.inf for r in runs])
            refused.update(f'{c:g}' for c, r in zip(sweep_hz, runs) if r[0] != 0)
        mean = np.mean(sweep, axis=0)
        best = int(np.argmin(mean))
        ratio = float(np.mean(default) / mean[best])
        report.add('command', {
            'arm': arm, 'rate_hz': rate, 'encoder': label,
            'default_hz': round(float(np.mean(chosen)), 2),
            'refused_with_defaults': sum(c != 0 for c in codes),
            'refusal': ' / '.join(sorted(refusals)),
            'default_error_percent': round(float(np.mean(default)), 4),
            'oracle_hz': sweep_hz[best], 'oracle_error_percent': round(float(mean[best]), 4),
            'ratio': round(ratio, 3), 'within': bool(ratio <= RATIO),
            'worst_seed_ratio': round(max(d / min(s) for d, s in zip(default, sweep)), 3),
            'sweep_refused': sorted(refused, key=float), 'seeds': list(seeds),
            'seconds': round(time.perf_counter() - started, 1)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='rates 100 and 1000 Hz, noise 0, 5e-4 and 17-bit, torque only')
    parser.add_argument('--seconds', type=float, default=20.0, help='record length (s)')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='records per cell (their errors are averaged)')
    parser.add_argument('--no-speed', action='store_true', help='skip the speed table')
    parser.add_argument('--speed-only', action='store_true', help='only the speed table')
    parser.add_argument('--command', action='store_true',
                        help='only COMMAND_CELLS, fitted by `arm-dyn-id fit` with every '
                        'default against a sweep of --cutoff (--seeds records each)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    if args.command:
        report = benchlib.Report('realism_matrix_command', args,
                                 title='Realism matrix through the command line\'s defaults')
        command_rows(report, args.seeds, args.seconds)
        rows = report.tables.get('command', [])
        report.note(f'{sum(r["within"] for r in rows)} of {len(rows)} cells within '
                    f'{RATIO:g}x of the sweep\'s best; records refused with the defaults: '
                    f'{sum(r["refused_with_defaults"] for r in rows)}. `arm-dyn-id fit '
                    '--dynamics full '
                    '--effort torque --no-report` with its defaults and with each --cutoff '
                    '(a refused fit scored from --force\'s model), held-out error on another '
                    'Fourier trajectory against the true torques.')
        report.save()
        return
    if not args.no_speed:
        # its own tables (docs/results/realism_matrix_speed.md), so that either part can
        # be run again alone
        speed = benchlib.Report('realism_matrix_speed', args,
                                title='Realism matrix: the cost of the cut-off choice')
        speed_rows(speed, args.seeds[0])
        speed.note('UR5, 1-minute records at 1 kHz (uneven stamps, 2 % drops); fit_full with '
                   'its default estimators at the cut-off each rule chose; best of 3 '
                   'alternating runs after a warm-up fit; one BLAS thread.')
        speed.save()
    if args.speed_only:
        return
    report = benchlib.Report('realism_matrix', args,
                             title='Realism matrix: the automatic cut-off (issue 23)')
    report.columns('matrix', ['arm', 'effort', 'rate_hz', 'encoder', 'band_hz', 'q_noise_rad',
                              'default_hz', 'default_error_percent', 'oracle_hz',
                              'oracle_error_percent', 'ratio', 'within',
                              'worst_seed_ratio', 'old_hz',
                              'old_error_percent', 'old_ratio', 'warning'])
    rates = QUICK['rates'] if args.quick else RATES
    noises = [n for n in NOISES if not args.quick or n[0] in QUICK['noises']]
    for arm, urdf in ARMS.items():
        if urdf is None:
            report.note(f'{arm}: skipped (example-robot-data is not installed)')
            continue
        robot = RobotModel.from_urdf(urdf)
        held = held_out(robot)
        cells = [(rate, 'torque') for rate in rates]
        if not args.quick:
            cells.append((CURRENT_RATE, 'current'))
        for rate, effort in cells:
            for label, noise, bits in noises:
                cell(report, arm, robot, held, rate, label, noise, bits, effort,
                     args.seconds, args.seeds)
    rows = report.tables.get('matrix', [])
    report.note(f'{sum(r["within"] for r in rows)} of {len(rows)} cells within '
                f'{RATIO:g}x of the sweep\'s best; worst ratio '
                f'{max((r["ratio"] for r in rows), default=float("nan")):.3g} (single records '
                f'against their own best: worst '
                f'{max((r["worst_seed_ratio"] for r in rows), default=float("nan")):.3g}); '
                f'the old rule '
                f'within {RATIO:g}x in {sum(r["old_ratio"] <= RATIO for r in rows)}, worst '
                f'{max((r["old_ratio"] for r in rows), default=float("nan")):.3g}.')
    report.save()


if __name__ == '__main__':
    main()
