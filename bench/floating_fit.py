#!/usr/bin/env python3
"""`arm-dyn-id fit` of the two floating-base robots from bags (issue 17 item 4).

Bags as a user's robot records them (joint_states, odometry or imu, one WrenchStamped
per sole sensor; arm_dyn_id.data.floating.write_floating_bag) from the MuJoCo runs of the
TRUE robots, fitted against configurations naming a NOMINAL URDF (the papers' priors:
seed 002 Table 1; the biped's CAD values 5-15 % off), the way test/floating_bags.py
builds them. For each estimator: held-out error against the nominal URDF's (last 25 %
of the bag), parameter errors against the truth, the unexcited unknowns, and the wall
time of the whole command (`python -m arm_dyn_id fit ... --no-report`, a fresh process:
imports, reading, fit, writing) beside the fit alone.

    python bench/floating_fit.py [--quick] [--no-save]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import benchlib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'test'))

from floating_bags import (SPACE_THETA_TRUE, biped_bag, biped_truth,  # noqa: E402
                           space_bag)

from arm_dyn_id.model.floating import FloatingIdentification  # noqa: E402


def _fit(bag, config_path, out, method):
    start = time.perf_counter()
    res = subprocess.run([sys.executable, '-m', 'arm_dyn_id', 'fit', str(bag), '--config',
                          str(config_path), '--method', method, '--out', str(out), '--no-report',
                          '--quiet'], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f'fit failed ({res.returncode}): {res.stderr.strip()}')
    summary = json.loads((out / 'validation.json').read_text())
    return FloatingIdentification.load(out / 'model.yaml'), summary, wall


def space(report, folder, durations):
    for duration in durations:
        config_path, _, bag = space_bag(folder / f'space_{duration:g}', duration=duration)
        for method in ('linear', 'ga', 'ga-plain'):
            out = folder / f'space_{duration:g}_{method}'
            ident, v, wall = _fit(bag, config_path, out, method)
            s, m = v['fit_summary'], v['floating']
            theta = np.array(s['values'])
            err = 100 * np.abs(theta - SPACE_THETA_TRUE) / SPACE_THETA_TRUE
            report.add('space', {
                'recording_s': duration, 'samples_fitted': s['samples_fitted'],
                'estimator': method,
                'held_out_linear_vs_nominal': round(m['linear_vs_nominal'], 4),
                'held_out_angular_vs_nominal': round(m['angular_vs_nominal'], 4),
                'mass_max_err_%': round(float(err[::4].max()), 2),
                'unexcited': len(ident.unexcited),
                'total_mass_kg': round(float(ident.phi[::10].sum()), 6),
                'fit_s': round(s['timings_s']['fit'], 2), 'command_s': round(wall, 2)})


def biped(report, folder, durations):
    truth = biped_truth()
    for duration in durations:
        config_path, _, bag = biped_bag(folder / f'biped_{duration:g}', duration=duration)
        for method in ('newton', 'linear'):
            out = folder / f'biped_{duration:g}_{method}'
            ident, v, wall = _fit(bag, config_path, out, method)
            s, m = v['fit_summary'], v['floating']
            Phi = np.array(s['values'])
            err = 100 * np.abs(Phi - truth) / truth
            fitted = np.array(s['identified'], bool)
            report.add('biped', {
                'recording_s': duration, 'samples_fitted': s['samples_fitted'],
                'estimator': method, 'held_out_zmp_mm': round(m['zmp_rms_mm'], 3),
                'nominal_zmp_mm': round(m['nominal_zmp_rms_mm'], 3),
                'excited_max_err_%': round(float(err[fitted].max()), 1),
                'unexcited': ', '.join(ident.unexcited),
                'total_mass_kg': round(float(ident.phi[::10].sum()), 9),
                'fit_s': round(s['timings_s']['fit'], 2), 'command_s': round(wall, 2)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='the short recordings only')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('floating_fit', args,
                             title='arm-dyn-id fit of floating-base robots from bags')
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        space(report, folder, (16.0,) if args.quick else (16.0, 40.0))
        biped(report, folder, (20.0,) if args.quick else (20.0, 40.0))
    report.note('space: MuJoCo space robot, Noise() defaults, sampled at 20 Hz; biped: '
                'weight shift onto the right foot, 50 Hz, 1e-4 rad on joint angles, 0.5 N '
                'per sole sensor. held-out = the last 25 % of the bag; *_vs_nominal = '
                'RMS of the identified model / RMS of the nominal URDF; errors against the '
                'truth in %; command_s = a fresh `python -m arm_dyn_id fit` process.')
    report.save()


if __name__ == '__main__':
    main()
