"""The quick demo on a loaded machine (issue 16 item 8): `arm-dyn-id demo --quick` run as
a user would, with busy processes beside it (``while True: pass``, two by default: on a
2-core machine the demo's four nodes then share the cores with two spinning processes).

It must neither fail nor lose samples silently: per run, the exit code, the wall time,
the recording's delivered fraction, drops and gaps (the demo's validation.json) and the
held-out RMSE % of max torque at lunar gravity. ``make test`` runs the same demo without
the busy processes (test/test_demo.py), beside its other pytest worker.

    .venv/bin/python bench/loaded_demo.py [--runs 3] [--busy 2]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

BUSY = 'while True: pass'


def run_once(out, busy):
    spinners = [subprocess.Popen([sys.executable, '-c', BUSY]) for _ in range(busy)]
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, '-m', 'arm_dyn_id', 'demo', '--quick', '--out',
                               str(out)], capture_output=True, text=True, timeout=3600)
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    wall = time.monotonic() - start
    row = {'exit': proc.returncode, 'wall_s': round(wall, 1)}
    report_file = out / 'validation.json'
    if proc.returncode != 0 or not report_file.is_file():
        row['error'] = proc.stderr.strip().splitlines()[-1:] or ['(no output)']
        return row
    report = json.loads(report_file.read_text())
    quality = report['recording']['quality'] or {}
    row.update({
        'delivered_percent': round(100 * quality.get('delivered_fraction', float('nan')), 2),
        'drops': quality.get('drops'), 'gaps': quality.get('gaps'),
    })
    for case, joints in report['cases'].items():
        row[f'{case} RMSE %'] = [round(m['rmse_percent'], 2) for m in joints.values()]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--runs', type=int, default=3, help='demos in a row (default 3)')
    parser.add_argument('--busy', type=int, default=2,
                        help='busy processes beside each demo (default 2)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('loaded_demo', args,
                             title=f'The quick demo with {args.busy} busy processes')
    failed = 0
    with tempfile.TemporaryDirectory(prefix='loaded_demo_') as tmp:
        for k in range(args.runs):
            print(f'run {k + 1}/{args.runs}: arm-dyn-id demo --quick with {args.busy} busy '
                  'processes', file=sys.stderr, flush=True)
            row = {'run': k + 1, 'busy': args.busy, **run_once(Path(tmp) / f'run{k}', args.busy)}
            failed += row['exit'] != 0 or row.get('delivered_percent', 0) < 99
            print(json.dumps(row), flush=True)
            report.add('runs', row)
    if not args.no_save:
        report.save()
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
