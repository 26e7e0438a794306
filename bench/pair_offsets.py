"""Gravity from sweeps when friction is stronger one way: what the forward/backward
averages keep, what the gate says, and what ``--pair-offsets yes`` writes.

Each record is ``test/arm_bags.realistic_sweeps`` of a true arm (the humanoid arm,
example-robot-data's UR5 and Panda; masses 10 % and centres of mass 1.5 cm off the URDF,
friction held at rest that changes from hold to hold, friction growing with the load,
100 Hz), with Coulomb friction the same both ways or 20 % stronger one way, or the same
both ways with an offset in the effort (3-6 % of each joint's peak torque), swept at 1, 2
or 3 poses a joint; fitted by the gravity pipeline (``fit_gravity``, what ``arm-dyn-id
fit`` calls) with ``pair_offsets`` auto (the default: the seed-000 model, and the gate's
warning when freeing each swept joint's constant moves it by 5 %) and yes, judged by
``judge_gravity_fit``. Gravity error: RMS % of each loaded joint's peak over 200 random
poses against the true arm, worst joint.

    .venv/bin/python bench/pair_offsets.py [--seeds 4]

About 3 minutes on 2 cores.
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
sys.path.insert(0, str(ROOT / 'bench'))

from arm_bags import Arm, realistic_sweeps  # noqa: E402
from tilt_sweeps import ARMS, gravity_error, urdf_of  # noqa: E402

from arm_dyn_id.identification.gravity import PAIR_OFFSET_SHIFT  # noqa: E402
from arm_dyn_id.identification.pipeline import fit_gravity, judge_gravity_fit  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

KINDS = ('same both ways', '20 % stronger one way', 'same, effort offset')


def record(key, seed, kind, poses):
    urdf = urdf_of(key)
    arm = Arm(urdf).perturb(np.random.default_rng(seed), mass=0.1, com=0.015)
    robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
    t, q, tau = realistic_sweeps(arm, holding_friction(robot), np.random.default_rng(seed),
                                 poses_per_joint=poses,
                                 asymmetry=0.2 if kind == KINDS[1] else 0.0)
    if kind == KINDS[2]:
        rng = np.random.default_rng(seed + 7)
        tau = tau + np.abs(tau).max(axis=0) * rng.uniform(0.03, 0.06, arm.n) * \
            rng.choice([-1.0, 1.0], arm.n)
    return arm, robot, t, q, tau


def one(key, seed, kind, poses):
    arm, robot, t, q, tau = record(key, seed, kind, poses)
    out = {}
    for mode in ('auto', 'yes'):
        fitted = fit_gravity(robot, t, q, tau, pair_offsets=mode)
        verdict = judge_gravity_fit(fitted, robot, tau, effort='torque')
        shift = (verdict.checks.get('pair_offsets') or {}).get('shift') or {}
        out[mode] = (gravity_error(arm, fitted.model), verdict.ok,
                     bool(verdict.checks.get('pair_offset_warning')),
                     100 * max(shift.values(), default=0.0))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=4)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f'# pair offsets on gravity fits from sweeps, {platform.node()}, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}; said from a shift of '
          f'{PAIR_OFFSET_SHIFT:.0%}; seeds 1-{args.seeds}\n')
    print('| arm | friction | poses a joint | auto: gravity error % (median, worst) | '
          'said (of the written) | shift % (worst) | yes: gravity error % (median, worst) |')
    print('|---|---|---|---|---|---|---|')
    for key in ARMS:
        for kind in KINDS:
            for poses in (1, 2, 3):
                rows = [one(key, seed, kind, poses) for seed in range(1, args.seeds + 1)]
                auto = [r['auto'] for r in rows]
                yes = [r['yes'] for r in rows]
                written = [a for a in auto if a[1]]
                print(f'| {key} | {kind} | {poses} | '
                      f'{np.median([a[0] for a in auto]):.2f}, {max(a[0] for a in auto):.2f} | '
                      f'{sum(a[2] for a in written)} of {len(written)} | '
                      f'{max(a[3] for a in auto):.1f} | '
                      f'{np.median([y[0] for y in yes]):.2f}, {max(y[0] for y in yes):.2f} |',
                      flush=True)
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
