"""Run benchmark scripts at a base revision and at the working tree, in the same run.

Speed is judged as a ratio against a baseline measured beside it on the same machine,
never against a figure from another day. This script checks out ``--base`` into a
temporary git worktree, runs each named benchmark there and here alternately
(base, here, base, here, ... ``--repeats`` times each, with ``--no-save``), and reports
for every timing column (names ending in ``seconds``, ``_s``, ``_ms`` or
``us_per_sample``) the median of each side and the ratio here / base.

The base's code is imported from its worktree (``PYTHONPATH`` comes before the
editable install), with this venv's dependencies.

Example (the layout change against the commit before it)::

    python bench/compare_revisions.py --base c5020b4 --repeats 3 \\
        --run "regressor_speed.py --samples 200000 --repeats 1" \\
        --run "fit_time.py --minutes 1 10 --naive-limit 0" \\
        --run "gravity_query.py --queries 1000 --seconds 5"
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parent
TIMING_SUFFIXES = ('seconds', '_s', '_ms', 'us_per_sample')


def _is_timing(key):
    return key.endswith(TIMING_SUFFIXES)


def _row_key(row):
    """What identifies a row: its table and its non-numeric cells (path, client, ...)."""
    ident = [row.get('table', '')]
    ident += [f'{k}={v}' for k, v in row.items()
              if k not in ('bench', 'table') and isinstance(v, str)]
    for k in ('minutes', 'samples', 'rate_hz'):
        if k in row and not isinstance(row[k], str):
            ident.append(f'{k}={row[k]}')
    return ' '.join(ident)


def run_once(script_args, tree):
    """Run one benchmark in ``tree``; return its JSON rows."""
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get('PYTHONPATH', ''))
    cmd = [sys.executable, str(Path(tree) / 'bench' / script_args[0]), *script_args[1:],
           '--no-save']
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f'{" ".join(script_args)} failed in {tree}:\n{proc.stderr[-2000:]}')
    rows = []
    for line in proc.stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--base', required=True, help='git revision to compare against')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--run', action='append', required=True, metavar='"SCRIPT ARGS"',
                        help='a benchmark of bench/ with its arguments (repeatable)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('compare_revisions', args,
                             title=f'Benchmarks at {args.base} against the working tree')
    repo = HERE.parent
    with tempfile.TemporaryDirectory(prefix='arm_dyn_id_base_') as tmp:
        base_tree = Path(tmp) / 'base'
        subprocess.run(['git', 'worktree', 'add', '--detach', '-q', str(base_tree), args.base],
                       cwd=repo, check=True)
        try:
            for spec in args.run:
                script_args = shlex.split(spec)
                samples = {'base': {}, 'here': {}}
                for _ in range(args.repeats):
                    for side, tree in (('base', base_tree), ('here', repo)):
                        for row in run_once(script_args, tree):
                            key = _row_key(row)
                            for col, value in row.items():
                                if _is_timing(col) and isinstance(value, (int, float)):
                                    samples[side].setdefault((key, col), []).append(value)
                for (key, col), base_values in samples['base'].items():
                    here_values = samples['here'].get((key, col))
                    if not here_values:
                        continue
                    b, h = statistics.median(base_values), statistics.median(here_values)
                    report.add('ratios', {'bench': spec, 'row': key, 'column': col,
                                          'base_median': b, 'here_median': h,
                                          'ratio_here_over_base': h / b if b > 0 else None,
                                          'runs': len(here_values)})
        finally:
            subprocess.run(['git', 'worktree', 'remove', '--force', str(base_tree)], cwd=repo)
    report.note(f'base = {args.base}; each side ran {args.repeats} times, alternating; '
                'medians; ratio < 1 means the working tree is faster.')
    report.save()


if __name__ == '__main__':
    main()
