"""A light joint's flipped torque sign in a gravity fit: caught, and never a right arm refused?

The gravity path's data gate tests each joint's sign and scale against the URDF only where
the URDF's gravity torque varies by more than 5 % of the most loaded joint's
(``plausibility.LOADED_SHARE``): below that, a few millimetres of a wrist's centre of mass
can turn the URDF's torque around. So a wrist joint wired with its sign reversed was fitted
with exit 0 (its gravity model reversed, the joints before it off by a few percent). The
test added (``plausibility.judge_sweep_signs``) looks at such a joint only where it sweeps
itself (forward and backward passes averaged: its friction cancels) and only where the
URDF's torque there is larger than what the URDF can get wrong: the links beyond the joint
with their centres of mass ``COM_ERROR`` off, plus the part of the joint's friction a pair
does not cancel.

Simulated sweep recordings (``test/arm_bags.py``'s plan: each joint swept 40 deg at five
random poses of the others, last joint first, 100 Hz) of the humanoid arm of ``urdf/``,
example-robot-data's UR5 and Panda, and the UR10e of ``../shared/real-data/ur10e/urdf``
(its URDF only, when that folder is there; skipped with a message otherwise). The true
arm is the URDF with each link's mass N(1, 10 %) and its centre of mass moved ``--com`` cm
in a random direction. Its torque:
gravity, Coulomb friction of the URDF's holding friction (``check.holding_friction``) with
±20 % direction asymmetry and 5 % of the gravity torque more (load-dependent), viscous
friction, a still joint's held friction (a random value within ± its holding friction,
new at every hold), white noise 1 % of each joint's largest torque. Each record is fitted
(``fit_gravity``, sweeps detected in the angles) and judged (``judge_gravity_fit``) right,
and with each joint's sign reversed in turn, and each loaded joint's torque doubled (a
torque constant 2x). The table counts, per arm: right records refused (a false refusal,
the cause named), flipped joints refused with cause ``sign``, split into joints the
URDF's 5 % rule tests and the light ones, and doubled joints refused (with cause
``torque_constant``).

    .venv/bin/python bench/light_joint_sign.py [--seeds 6] [--com 1 2]
                                 [--arms humanoid,ur5,panda,ur10e] [--tree /tmp/old]

``--tree PATH`` fits with another checkout's ``arm_dyn_id`` (``git archive REV | tar -x -C
PATH``), the records being the same (this tree's ``test/arm_bags.py``): the before.
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))
sys.path.insert(0, str(Path(__file__).resolve().parent))
if '--tree' in sys.argv:        # before arm_dyn_id is imported: another checkout's code
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index('--tree') + 1]).resolve()))

import benchlib  # noqa: E402
from arm_bags import Arm, realistic_sweeps  # noqa: E402
from arm_dyn_id.errors import DataError, RankDeficientError  # noqa: E402
from arm_dyn_id.identification.pipeline import fit_gravity, judge_gravity_fit  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402
from arm_dyn_id.validation.plausibility import LOADED_SHARE  # noqa: E402
from test_preparation_matrix import ARMS  # noqa: E402

RATE = 100.0
#: Poses of the other joints per swept joint (with held friction, 2 leave the fit
#: determined only near them: refused, cause excitation).
POSES = 5


def true_arm(urdf, rng, com_cm):
    """The URDF's arm with each link's mass N(1, 10 %) and centre of mass moved."""
    return Arm(urdf).perturb(rng, mass=0.1, com=com_cm / 100.0)


def record(arm, robot, rng):
    """t, q, τ of a sweep recording of the true ``arm`` (see the module docstring)."""
    return realistic_sweeps(arm, holding_friction(robot), rng, poses_per_joint=POSES,
                            rate=RATE)


def judged(robot, t, q, tau):
    """(ok, cause) of the gravity fit and its gate."""
    try:
        fitted = fit_gravity(robot, t, q, tau, None, segments='detect')
    except (DataError, RankDeficientError) as exc:
        return False, type(exc).__name__
    verdict = judge_gravity_fit(fitted, robot, tau, effort='torque')
    return verdict.ok, verdict.cause


def light_joints(robot, q):
    """Joints the 5 % rule leaves untested (the URDF's gravity varies little there, but
    does: a vertical first axis carries none and no gravity test can see its sign)."""
    amp = robot.gravity_torques(q).std(axis=0)
    return (amp <= LOADED_SHARE * amp.max()) & (amp > 1e-6 * amp.max())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seeds', type=int, default=6)
    parser.add_argument('--com', type=float, nargs='+', default=[1.0, 2.0],
                        help='centre-of-mass error of every link (cm)')
    parser.add_argument('--arms', default='humanoid,ur5,panda,ur10e')
    parser.add_argument('--tree', type=Path, help='fit with this checkout\'s arm_dyn_id')
    args = parser.parse_args(argv)
    import arm_dyn_id
    print(f'# {platform.node()} {platform.processor() or platform.machine()}, '
          f'{os.cpu_count()} cores; seeds {args.seeds}; arm_dyn_id from '
          f'{Path(arm_dyn_id.__file__).parent}', flush=True)
    rows = []
    arms = dict(ARMS)
    ur10e = benchlib.UR10E / 'urdf' / 'ur10e.urdf'
    arms['ur10e'] = ur10e if ur10e.is_file() else None
    for name in args.arms.split(','):
        urdf = arms.get(name)
        if urdf is None:
            print(f'{name}: URDF not found (example-robot-data, or {ur10e}), skipped')
            continue
        robot = RobotModel.from_urdf(str(urdf), joints=Arm(urdf).joints)
        for com in args.com:
            stats = {'right': 0, 'refused': [], 'loaded': [0, 0], 'light': [0, 0],
                     'light_missed': {}, 'doubled': [0, 0, 0]}
            start = time.perf_counter()
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                arm = true_arm(urdf, rng, com)
                t, q, tau = record(arm, robot, rng)
                light = light_joints(robot, q)
                loaded = robot.gravity_torques(q).std(axis=0) > LOADED_SHARE * \
                    robot.gravity_torques(q).std(axis=0).max()
                ok, cause = judged(robot, t, q, tau)
                stats['right'] += 1
                if not ok:
                    stats['refused'].append(cause)
                for j in range(robot.n_joints):
                    if not (light[j] or loaded[j]):
                        continue
                    flipped = tau.copy()
                    flipped[:, j] *= -1
                    ok, cause = judged(robot, t, q, flipped)
                    key = 'light' if light[j] else 'loaded'
                    stats[key][1] += 1
                    if not ok and cause == 'sign':
                        stats[key][0] += 1
                    elif light[j]:
                        missed = stats['light_missed']
                        missed[robot.joint_names[j]] = missed.get(robot.joint_names[j], 0) + 1
                    if loaded[j]:
                        # a torque constant 2x on a joint the URDF tests
                        doubled = tau.copy()
                        doubled[:, j] *= 2
                        ok, cause = judged(robot, t, q, doubled)
                        stats['doubled'][2] += 1
                        stats['doubled'][0] += not ok
                        stats['doubled'][1] += (not ok) and cause == 'torque_constant'
            row = (f'| {name} | {com:g} cm | {len(stats["refused"])} of {stats["right"]} '
                   f'{sorted(set(stats["refused"])) or ""} | '
                   f'{stats["loaded"][0]} of {stats["loaded"][1]} | '
                   f'{stats["light"][0]} of {stats["light"][1]} | '
                   f'{stats["light_missed"] or ""} | {stats["doubled"][0]} '
                   f'({stats["doubled"][1]}) of {stats["doubled"][2]} | '
                   f'{time.perf_counter() - start:.0f} s |')
            print(row, flush=True)
            rows.append(row)
    print('\n| arm | CoM error | right records refused | flipped loaded joints named '
          '`sign` | flipped light joints named `sign` | light joints missed | constant 2x on '
          'a loaded joint refused (named torque_constant) | time |')
    print('|---|---|---|---|---|---|---|---|')
    print('\n'.join(rows))


if __name__ == '__main__':
    main()
