"""Full dynamics of a real UR10e: fit on one recording, score on recordings not fitted.

Data: ``../shared/real-data/ur10e`` beside the repository (a real UR10e's RTDE log,
~100 Hz with uneven steps; README there for provenance and licence). Evaluation
only: nothing of it is copied into the project, and without it this script prints
that it skipped.

Procedure (fixed before looking at any held-out score, the same for every
recording):

- τ = k·i with the drive gains of the README (N·m/A at the joint);
- fit on the 30 s Fourier run (rows 635-3510, as the source project did) with
  :func:`arm_dyn_id.identification.full_dynamics.fit_full`: uneven stamps
  resampled to 100 Hz, cut-off from the training record's own velocity spectrum
  (stated below), the regressor, τ and the friction columns through the same
  zero-phase filter; per-joint weights from a first least-squares residual;
- model structures tried: friction with ``sign`` or smooth sign ``tanh(q̇/0.01)``,
  with an offset, with a Stribeck term, each with and without rotor inertias
  (armature). The structure kept is the one with the lowest mean held-out RMSE %
  **on the training recording's own time blocks** (5 blocks, each predicted by
  the fit without it); the other recordings play no part in the choice;
- estimators: weighted least squares and the physically consistent fit
  (pseudo-inertia LMIs, friction ≥ 0, pull toward the URDF, Clarabel), both
  scored;
- scored on the other two Fourier runs (rows the source project used) and the six
  single-joint runs (all rows), with :func:`validate_full`: RMSE per joint as % of
  that joint's largest |τ| in the scored samples, against the filtered torque (the
  model's torque through the same filter) and against the raw torque.

Reference rows from the data's README (plain least squares, and the source
project's parameters, on a recording we do not have): 5.3/2.1/2.1/6.1/16.6/45.8
and 5.4/2.5/2.3/5.9/16.3/45.3. Because that recording is not among ours, the same
recipe (plain least squares, sign friction, 5 Hz, equal weights) is also run here
and scored on the same samples as our fits.

    .venv/bin/python bench/real_ur10e.py [--data ../shared/real-data/ur10e]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.identification.full_dynamics import fit_full, validate_full  # noqa: E402
from arm_dyn_id.model.dynamics import FrictionModel  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402

DATA = benchlib.REPO.parent / 'shared' / 'real-data' / 'ur10e'
GAINS = np.array([10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232])     # README, N·m/A
TRAIN = ('ur-20_02_10-30sec_12harm', (635, 3510))
FOURIER = [('ur-20_02_12-50sec_12harm', (355, 5090)), ('ur-20_02_19_14harm50sec', (195, 4966))]
SINGLE = [(f'ur-20_01_22-joint_{k}', None) for k in range(1, 7)]
STATIC = [(f'ur-20_01_17-p{k}', None) for k in range(1, 11)]
PLAIN_LS = [5.3, 2.1, 2.1, 6.1, 16.6, 45.8]
SOURCE = [5.4, 2.5, 2.3, 5.9, 16.3, 45.3]
STRUCTURES = {
    'sign': FrictionModel(coulomb='sign'),
    'tanh': FrictionModel(coulomb='tanh'),
    'tanh+offset': FrictionModel(coulomb='tanh', offset=True),
    'tanh+stribeck': FrictionModel(coulomb='tanh', stribeck=True),
}


def load(folder, name, rows):
    """(t, q, τ) of one recording: s, rad, N·m (k·i)."""
    d = np.loadtxt(folder / 'data' / f'{name}.csv.gz', delimiter=',')
    if rows is not None:
        d = d[rows[0] - 1:rows[1]]
    return d[:, 0], d[:, 1:7], d[:, 13:19] * GAINS


def percents(metrics):
    return [round(m['rmse_percent'], 2) for m in metrics.values()]


def combine(per_file):
    """RMSE % over several recordings scored together (max |τ| over all of them)."""
    joints = list(per_file[0])
    out = []
    for j in joints:
        n = np.array([f[j]['n_samples'] for f in per_file], dtype=float)
        sq = np.array([f[j]['rmse'] ** 2 for f in per_file])
        peak = max(f[j]['max_torque'] for f in per_file)
        out.append(round(100 * float(np.sqrt(np.sum(n * sq) / np.sum(n))) / peak, 2))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data', type=Path, default=DATA)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    if not (args.data / 'data').is_dir():
        print(f'real_ur10e: skipped, no data at {args.data}')
        return 0
    report = benchlib.Report('real_ur10e', args,
                             title='Full dynamics of a real UR10e (fit on one recording, '
                                   'scored on others)')
    robot = RobotModel.from_urdf(args.data / 'urdf' / 'ur10e.urdf')
    t, q, tau = load(args.data, *TRAIN)
    scored = {name: load(args.data, name, rows) for name, rows in FOURIER + SINGLE + STATIC}

    # 1. the structure, chosen on the training recording's own held-out blocks
    fits = {}
    for label, friction in STRUCTURES.items():
        for armature in (False, True):
            key = label + ('+armature' if armature else '')
            for method in ('wls', 'consistent'):
                started = time.perf_counter()
                model, validation = fit_full(robot, t, q, tau, methods=(method,),
                                             friction=friction, armature=armature)
                seconds = time.perf_counter() - started
                held = percents(validation['held_out'])
                fits[key, method] = model
                report.add('structures', {
                    'structure': key, 'estimator': method,
                    'training_held_out_rmse_percent': held,
                    'mean': round(float(np.mean(held)), 2),
                    'consistent': model.consistent,
                    'cutoff_hz': round(model.metadata['preparation']['cutoff_hz'], 2),
                    'seconds': round(seconds, 2)})
    rows = report.tables['structures']
    best = min((r for r in rows if r['estimator'] == 'consistent'), key=lambda r: r['mean'])
    chosen = best['structure']
    report.note(f'Structure chosen on the training recording\'s held-out blocks: {chosen} '
                f'(cut-off {best["cutoff_hz"]} Hz: '
                f'{fits[chosen, "consistent"].metadata["preparation"]["cutoff_source"]}).')

    # 2. the reference recipe, reproduced: plain LS, sign friction, 5 Hz, equal weights
    plain, _ = fit_full(robot, t, q, tau, methods=('wls',), friction=STRUCTURES['sign'],
                        cutoff_hz=5.0, noise=np.ones(6))

    # 3. scores on recordings not fitted
    candidates = [('plain LS, sign, 5 Hz (README recipe)', plain),
                  (f'WLS, {chosen}', fits[chosen, 'wls']),
                  (f'consistent, {chosen}', fits[chosen, 'consistent']),
                  ('WLS, sign', fits['sign', 'wls']),
                  ('consistent, tanh', fits['tanh', 'consistent'])]
    for against in ('filtered', 'raw'):
        for label, model in candidates:
            per_file = {name: validate_full(model, *scored[name], against=against)
                        for name, _ in FOURIER + SINGLE}
            report.add('fourier_runs', {
                'model': label, 'against': against, 'consistent': model.consistent,
                'other_fourier_runs_rmse_percent': combine([per_file[n] for n, _ in FOURIER]),
                **{name[-14:]: percents(per_file[name]) for name, _ in FOURIER}})
            moving = []
            for k, (name, _) in enumerate(SINGLE):
                moving.append(percents(per_file[name])[min(k, 5)])
            report.add('single_joint_runs', {
                'model': label, 'against': against,
                'moving_joint_rmse_percent': moving,
                'all_joints_all_runs': combine([per_file[n] for n, _ in SINGLE])})
    for label, model in candidates[:3]:
        per_file = [validate_full(model, *scored[name], against='raw') for name, _ in STATIC]
        report.add('static_poses', {'model': label,
                                    'rmse_nm': [round(float(np.sqrt(np.mean(
                                        [f[j]['rmse'] ** 2 for f in per_file]))), 3)
                                        for j in per_file[0]]})
    report.add('reference', {'model': 'plain LS (README, other recording)',
                             'rmse_percent': PLAIN_LS})
    report.add('reference', {'model': 'source project parameters (README)',
                             'rmse_percent': SOURCE})
    report.note('RMSE % of each joint\'s max |τ| in the scored samples. "filtered": the '
                'measured torque and the model\'s torque through the same zero-phase filter '
                '(the fit\'s own comparison); "raw": the resampled measured torque against '
                'the model torque. Single-joint runs: the moving joint\'s RMSE % (run k '
                'moves joint k; run 6 moves several, wrist 3 is listed).')
    report.save()
    return 0


if __name__ == '__main__':
    sys.exit(main())
