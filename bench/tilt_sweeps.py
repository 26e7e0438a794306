"""A base that is not level, on a gravity fit from slow sweeps: what the tilt reading
(``identification.tilt.sweep_tilt``) reads on level and tilted records, and whether the
gate says it.

Each record is ``test/arm_bags.realistic_sweeps`` of a true arm (the humanoid arm,
example-robot-data's UR5 and Panda; masses 10 % and centres of mass 1.5 cm off the URDF,
friction held at rest that changes from hold to hold, 100 Hz), its gravity tilted by 0, 2
or 4° towards an azimuth of 37° x seed (or level, with a cable's once-per-turn pull of
2 N·m on the first joint), swept at 1, 2 or 5 poses a joint, fitted with the
URDF upright by the gravity pipeline (``fit_gravity``, what ``arm-dyn-id fit`` calls) and
judged by ``judge_gravity_fit``. Per record: the tilt read and the share of the weighted
residual it removes, its jackknife standard errors from level over the pairs and their
chance under a level base (computed here for every record; the gate computes them only
past the first two thresholds), whether the
gate said it, and the fitted gravity's error against the true arm's (RMS % of each
loaded joint's peak over 200 random poses, worst joint: a UR5's shoulder_pan is loaded
when tilted, and a model served upright misses its gravity whole).

    .venv/bin/python bench/tilt_sweeps.py [--seeds 6] [--noise N·m] [--arms ur5,panda]
                                          [--poses 2,5]

About 1.5 minutes on 2 cores.
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'test'))

from arm_bags import Arm, example_robot, realistic_sweeps  # noqa: E402

from arm_dyn_id.identification.pipeline import fit_gravity, judge_gravity_fit  # noqa: E402
from arm_dyn_id.identification.tilt import (SWEEP_TILT_P, SWEEP_TILT_SHARE,  # noqa: E402
                                            TILT_DEGREES, sweep_tilt)
from arm_dyn_id.model.robot import RobotModel, carries_gravity  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

ARMS = {'humanoid': str(ROOT / 'urdf' / 'humanoid_arm.urdf'),
        'ur5': 'ur_description/urdf/ur5_robot.urdf',
        'panda': 'panda_description/urdf/panda.urdf'}
TILTS = (0.0, 2.0, 4.0)
#: and a level arm whose first joint carries a torque following its own angle (N·m)
PULL = 2.0
#: poses a joint: one, the excitation's default, and realistic_sweeps'
POSES = (1, 2, 5)


def urdf_of(key):
    path = ARMS[key]
    return path if path.startswith('/') else str(example_robot(path))


def jackknife_z(fitted, robot):
    """The jackknife standard errors of the tilt read and their chance under a level base
    (every record, for the table; the gate computes them only past its first two
    thresholds)."""
    read = sweep_tilt(fitted, robot, jackknife=True)
    return read['z'], read['p']


def one(key, seed, degrees, poses, pull=0.0, noise=0.0):
    urdf = urdf_of(key)
    arm = Arm(urdf).perturb(np.random.default_rng(seed + 100), mass=0.1, com=0.015)
    a, azimuth = np.radians(degrees), np.radians(37.0 * seed)
    arm.model.gravity.linear = 9.81 * np.array([np.cos(azimuth) * np.sin(a),
                                                np.sin(azimuth) * np.sin(a), -np.cos(a)])
    arm.data = arm.model.createData()
    robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
    t, q, tau = realistic_sweeps(arm, holding_friction(robot), np.random.default_rng(seed),
                                 poses_per_joint=poses)
    if noise:
        # white noise on every joint's torque: realistic_sweeps scales its noise by each
        # joint's gravity, none on a level first joint about a vertical axis
        tau = tau + np.random.default_rng(seed + 11).standard_normal(tau.shape) * noise
    if pull:
        # a cable's once-per-turn pull on the first joint, following its own angle
        tau[:, 0] += pull * np.sin(q[:, 0] + np.random.default_rng(seed + 7).uniform(0, 6.28))
    fitted = fit_gravity(robot, t, q, tau)
    read = sweep_tilt(fitted, robot)
    verdict = judge_gravity_fit(fitted, robot, tau, effort='torque')
    said = 'warned' if verdict.checks.get('gravity_tilt_warning') else \
        ('refused, tilt first' if 'gravity tilted' in (verdict.reason or '') else
         ('refused' if not verdict.ok else '—'))
    return read, jackknife_z(fitted, robot), said, gravity_error(arm, fitted.model)


def gravity_error(arm, model):
    """RMS % of each loaded joint's peak gravity over 200 random poses, ``model`` against
    the true ``arm`` (its own gravity), worst joint."""
    Q = np.random.default_rng(999).uniform(arm.lower, arm.upper, size=(200, arm.n))
    true = arm.gravity(Q)
    loaded = carries_gravity(np.sqrt((true ** 2).mean(axis=0)))
    err = 100 * np.sqrt(((model.gravity_torques(Q) - true) ** 2).mean(axis=0)) / \
        np.abs(true).max(axis=0)
    return float(err[loaded].max())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=6)
    parser.add_argument('--noise', type=float, default=0.0,
                        help='N·m of white noise added to every joint\'s torque')
    parser.add_argument('--arms', default=','.join(ARMS))
    parser.add_argument('--poses', default=','.join(map(str, POSES)))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f'# tilt on gravity fits from sweeps, {platform.node()}, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{args.noise:g} N·m of noise added to every joint; said from '
          f'{TILT_DEGREES:g}° removing {SWEEP_TILT_SHARE:.0%} at p <= {SWEEP_TILT_P:g}\n')
    print('| arm | poses a joint | tilt ° | read ° (min-max) | removed % (max) | '
          's.e. from level (min-max) | p (min) | said | gravity error % (worst loaded '
          'joint, median) |')
    print('|---|---|---|---|---|---|---|---|---|')
    for key in args.arms.split(','):
        for poses in [int(p) for p in args.poses.split(',')]:
            for degrees, pull in [(d, 0.0) for d in TILTS] + [(0.0, PULL)]:
                rows = [one(key, seed, degrees, poses, pull, args.noise)
                        for seed in range(1, args.seeds + 1)]
                reads = [r[0]['degrees'] for r in rows]
                removed = [r[0]['removed'] for r in rows]
                zs = [r[1][0] for r in rows if r[1][0] is not None]
                ps = [r[1][1] for r in rows if r[1][1] is not None]
                said = {}
                for r in rows:
                    said[r[2]] = said.get(r[2], 0) + 1
                what = f'{degrees:g}' + (f', first joint pulled {pull:g} N·m' if pull else '')
                print(f'| {key} | {poses} | {what} | {min(reads):.2f}-{max(reads):.2f} | '
                      f'{100 * max(removed):.1f} | {min(zs):.1f}-{max(zs):.1f} | '
                      f'{min(ps):.2g} | '
                      f'{", ".join(f"{k} {v}/{len(rows)}" for k, v in sorted(said.items()))} | '
                      f'{np.median([r[3] for r in rows]):.2f} |', flush=True)
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
