"""One torque constant off on a gravity fit from sweeps: said, refused or written silently?

The gravity path reads each joint's effort scale against the other joints' on the fit's
own averaged pairs (``identification.gravity.pair_effort_scales``, judged by
``validation.plausibility.pair_scales``). Each record is ``test/arm_bags.realistic_sweeps``
of a true arm (the humanoid arm, example-robot-data's UR5 and Panda; masses 10 % and
centres of mass 1.5 cm off the URDF, held friction that changes from hold to hold,
friction growing with the load, 1 % torque noise, 100 Hz), swept at 1, 2 or 3 poses a
joint, fitted by the gravity pipeline (``fit_gravity``, what ``arm-dyn-id fit`` calls) and
judged by ``judge_gravity_fit`` with ``effort='torque'``.

Right records: friction the same both ways, 20 % stronger one way, with an offset in the
effort (3-6 % of each joint's peak), with white encoder noise of 1e-3 rad on q, or
stronger one way with a load of 1.5 kg the URDF lacks on the last body. Wrong
ones: one loaded joint's effort 0.8x, 1.2x or 2x (its torque constant; the joint taken in
turn over the seeds), friction 20 % stronger one way (``realistic_sweeps``' default).
Gravity error: RMS % of each loaded joint's peak over 200 random poses against the true
arm, worst joint.

    .venv/bin/python bench/sweep_scales.py [--seeds 4] [--arms humanoid,ur5,panda]

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
sys.path.insert(0, str(ROOT / 'bench'))

from arm_bags import Arm, realistic_sweeps  # noqa: E402
from tilt_sweeps import ARMS, gravity_error, urdf_of  # noqa: E402

from arm_dyn_id.identification.pipeline import fit_gravity, judge_gravity_fit  # noqa: E402
from arm_dyn_id.model.robot import RobotModel, carries_gravity  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

RIGHT = ('same both ways', '20 % stronger one way', 'same, effort offset',
         'same, encoder noise 1e-3 rad', 'one way, 1.5 kg the URDF lacks')
#: the load of the last kind: kg on the last joint's body, at this offset (m)
LOAD, LOAD_AT = 1.5, (0.03, 0.02, 0.08)
WRONG = (0.8, 1.2, 2.0)


def record(key, seed, poses, kind=None, factor=None):
    """The true arm, the URDF's model and a sweep record of ``kind`` (a right one) or with
    one loaded joint's effort ``factor`` x (friction stronger one way); the joint scaled."""
    urdf = urdf_of(key)
    arm = Arm(urdf).perturb(np.random.default_rng(seed), mass=0.1, com=0.015)
    robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
    if kind == RIGHT[4]:
        import pinocchio as pin
        last = arm.model.getJointId(arm.joints[-1])
        arm.model.inertias[last] = arm.model.inertias[last] + pin.Inertia(
            LOAD, np.array(LOAD_AT), np.eye(3) * 2e-4)
        arm.data = arm.model.createData()
    one_way = factor is not None or kind in (RIGHT[1], RIGHT[4])
    t, q, tau = realistic_sweeps(arm, holding_friction(robot), np.random.default_rng(seed),
                                 poses_per_joint=poses, asymmetry=0.2 if one_way else 0.0)
    rng = np.random.default_rng(seed + 7)
    joint = None
    if kind == RIGHT[2]:
        tau = tau + np.abs(tau).max(axis=0) * rng.uniform(0.03, 0.06, arm.n) * \
            rng.choice([-1.0, 1.0], arm.n)
    elif kind == RIGHT[3]:
        q = q + rng.standard_normal(q.shape) * 1e-3
    elif factor is not None:
        loaded = np.flatnonzero(carries_gravity(np.sqrt(np.mean(
            robot.gravity_torques(arm.random_poses(np.random.default_rng(5), 50)) ** 2,
            axis=0))))
        joint = int(loaded[seed % len(loaded)])
        tau = tau.copy()
        tau[:, joint] *= factor
    return arm, robot, t, q, tau, joint


def one(key, seed, poses, kind=None, factor=None):
    """(said: 'refused' | 'warned' | '—', the cause named or None, gravity error %)."""
    arm, robot, t, q, tau, joint = record(key, seed, poses, kind, factor)
    fitted = fit_gravity(robot, t, q, tau)
    verdict = judge_gravity_fit(fitted, robot, tau, effort='torque')
    said = 'refused' if not verdict.ok else \
        ('warned' if verdict.checks.get('pair_scale_warning') else '—')
    named = None
    if joint is not None and (said != '—'):
        text = verdict.reason or verdict.checks.get('pair_scale_warning') or ''
        named = robot.joint_names[joint] in text
    return said, verdict.cause, named, gravity_error(arm, fitted.model)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=4)
    parser.add_argument('--arms', default=','.join(ARMS))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    seeds = range(1, args.seeds + 1)
    print(f'# one torque constant off on gravity fits from sweeps, {platform.node()}, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}; seeds 1-{args.seeds}\n')
    print('| arm | record | poses a joint | refused (cause) | warned | silent: gravity error % '
          '(median, worst) | the scaled joint named |')
    print('|---|---|---|---|---|---|---|')
    for key in args.arms.split(','):
        cases = [(kind, None) for kind in RIGHT] + [(None, f) for f in WRONG]
        for kind, factor in cases:
            for poses in (1, 2, 3):
                rows = [one(key, seed, poses, kind, factor) for seed in seeds]
                refused = [r for r in rows if r[0] == 'refused']
                causes = sorted({r[1] for r in refused})
                silent = [r[3] for r in rows if r[0] == '—']
                named = [r[2] for r in rows if r[2] is not None]
                what = kind or f'one constant {factor:g}x, one way'
                print(f'| {key} | {what} | {poses} | {len(refused)} of {len(rows)}'
                      f'{" (" + ", ".join(map(str, causes)) + ")" if causes else ""} | '
                      f'{sum(r[0] == "warned" for r in rows)} | '
                      + (f'{np.median(silent):.2f}, {max(silent):.2f} ({len(silent)})'
                         if silent else '—') + ' | '
                      + (f'{sum(named)} of {len(named)}' if named else '—') + ' |',
                      flush=True)
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
