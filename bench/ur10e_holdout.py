"""Real UR10e: fit with the defaults on one Fourier run, score on every other recording.

Reads ``../shared/real-data/ur10e`` (relative to the repository root; see its README)
when it exists and prints a skip message otherwise (exit 0). The CSVs are turned into
bags with the data's own ``to_bag.py`` in a temporary folder OUTSIDE the repository,
fitted with ``arm-dyn-id fit`` (defaults, the source project's drive gains as
``--torque-constants``) on the 30 s Fourier run (rows 635:3510), once with
``--friction auto`` (the default) and once with ``--friction coulomb,viscous``, then
scored with ``arm-dyn-id validate`` on the two other Fourier runs (whole, and on the
rows the source project used: the motion without the rests before and after it), the
single-joint oscillations joint_1..joint_6 and the static poses p1..p10. The README's recipe (plain
least squares with equal weights, sharp-sign Coulomb + viscous friction, 5 Hz) is fitted
on the same run and scored the same way: the README's rows are on a recording the suite
does not have, this row is on the same samples as ours. The loaded/unloaded pair
and the push recording are not free motion of the unloaded arm and are left out.
Nothing derived from the data is written into the repository: only numbers are printed.

Usage::

    .venv/bin/python bench/ur10e_holdout.py
"""

import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import benchlib

from arm_dyn_id.identification.full_dynamics import fit_full
from arm_dyn_id.model.dynamics import FrictionModel
from arm_dyn_id.model.robot import RobotModel

REPO = Path(__file__).resolve().parents[1]
DATA = benchlib.UR10E
GAINS = '10.0,10.6956,8.4566,9.0029,9.48,10.1232'
FIT = ('ur-20_02_10-30sec_12harm', '635:3510')
SCORED = (['ur-20_02_12-50sec_12harm', 'ur-20_02_19_14harm50sec'] +
          [f'ur-20_01_22-joint_{i}' for i in range(1, 7)] +
          [f'ur-20_01_17-p{i}' for i in range(1, 11)])
#: the two other Fourier runs again on the rows the source project used (the README's
#: table): their motion, without the rests before and after it, where a still joint holds
#: whatever friction it was left with
SOURCE_ROWS = {'ur-20_02_12-50sec_12harm': '355:5090', 'ur-20_02_19_14harm50sec': '195:4966'}
#: README reference rows, on a point-to-point recording the suite does not have
REFERENCES = {'OLS (README)': [5.3, 2.1, 2.1, 6.1, 16.6, 45.8],
              'published (README)': [5.4, 2.5, 2.3, 5.9, 16.3, 45.3]}
FRICTIONS = ('auto', 'coulomb,viscous')
RECIPE = 'README recipe'


def run(*argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=REPO)


def to_bag(name, out, rows=None):
    return benchlib.ur10e_bag(name, out, rows)


def rows_label(name, rows):
    """The table's name of ``name`` scored on ``rows`` only (1-based, inclusive)."""
    return f'{name} rows {rows.replace(":", "-")}'


def percents(doc):
    case = next(k for k in doc if k != 'fit_summary')
    return [m['rmse_percent'] for m in doc[case].values()]


def recipe_model(urdf, out):
    """The README's recipe fitted on the training rows: model.yaml at ``out``."""
    run_ = benchlib.ur10e_csv(FIT[0])
    lo, hi = (int(x) for x in FIT[1].split(':'))
    gains = np.array([float(k) for k in GAINS.split(',')])
    model, _ = fit_full(RobotModel.from_urdf(urdf), run_['t'][lo:hi], run_['q'][lo:hi],
                        run_['i'][lo:hi] * gains, methods=('wls',),
                        friction=FrictionModel(coulomb='sign'), cutoff_hz=5.0,
                        noise=np.ones(6))
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / 'model.yaml')
    return out / 'model.yaml'


def main():
    if not DATA.is_dir():
        print(f'skipped: {DATA} does not exist (real UR10e data not present)')
        return 0
    cli = REPO / '.venv' / 'bin' / 'arm-dyn-id'
    urdf = DATA / 'urdf' / 'ur10e.urdf'
    with tempfile.TemporaryDirectory(prefix='ur10e_holdout_') as tmp:
        tmp = Path(tmp)
        fit_bag = to_bag(FIT[0], tmp / 'fit_bag', FIT[1])
        bags = {name: to_bag(name, tmp / name) for name in SCORED}
        for name, rows in SOURCE_ROWS.items():
            bags[rows_label(name, rows)] = to_bag(name, tmp / f'{name}_rows', rows)
        table = {}
        for friction in FRICTIONS + (RECIPE,):
            if friction == RECIPE:
                model = recipe_model(urdf, tmp / 'fit_recipe')
            else:
                out = tmp / f'fit_{friction.replace(",", "_")}'
                started = time.perf_counter()
                done = run(cli, 'fit', fit_bag, '--urdf', urdf, '--torque-constants', GAINS,
                           '--out', out, '--no-report', '--friction', friction)
                seconds = time.perf_counter() - started
                if done.returncode:
                    print(f'fit --friction {friction} failed: {done.stderr.strip()[-400:]}')
                    continue
                model = out / 'model.yaml'
                chosen = [line for line in done.stderr.splitlines() if 'friction:' in line]
                print(f'--friction {friction}: fit in {seconds:.1f} s; '
                      f'{chosen[0].split("] ", 1)[-1] if chosen else ""}')
            for name, bag in bags.items():
                js = tmp / f'{name}_{friction}.json'
                done = run(cli, 'validate', model, bag, '--urdf', urdf, '--torque-constants',
                           GAINS, '--json', js, '--quiet')
                if not js.is_file():
                    table[(name, friction)] = done.stderr.strip().splitlines()[-1:]
                    continue
                table[(name, friction)] = percents(json.loads(js.read_text()))
    print(f'\nmachine: {platform.platform()}, {platform.processor() or platform.machine()}')
    print('RMSE % of each joint\'s max |τ| (filtered, as validate scores by default)\n')
    print('| recording | friction | ' + ' | '.join(f'j{i}' for i in range(1, 7)) + ' |')
    print('|---|---|' + '---|' * 6)
    for label, row in REFERENCES.items():
        print(f'| point-to-point (kept back) | {label} | ' +
              ' | '.join(f'{v:.1f}' for v in row) + ' |')
    below = {}
    for name in list(SCORED) + [rows_label(n, r) for n, r in SOURCE_ROWS.items()]:
        for friction in FRICTIONS + (RECIPE,):
            row = table.get((name, friction))
            if row is None:
                continue
            cells = (' | '.join(f'{v:.1f}' for v in row) if row and
                     isinstance(row[0], float) else f'not scored: {row}')
            print(f'| {name.replace("ur-", "")} | {friction} | {cells} |')
        ours, theirs = table.get((name, 'auto')), table.get((name, RECIPE))
        if ours and theirs and isinstance(ours[0], float) and isinstance(theirs[0], float):
            below[name] = [a <= b for a, b in zip(ours, theirs)]
    cells = [c for row in below.values() for c in row]
    print(f'\nthe default (auto) at or below the README recipe on the same samples: '
          f'{sum(cells)} of {len(cells)} cells')
    for name, row in below.items():
        worse = [f'j{i + 1}' for i, ok in enumerate(row) if not ok]
        if worse:
            print(f'  {name.replace("ur-", "")}: above it on {", ".join(worse)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
