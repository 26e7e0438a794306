"""Seed-000 sweeps when the joints held still hold friction: the gravity fit's error.

A real geared joint at rest holds any torque up to its breakaway friction F. In a
forward/backward pair of seed-000 sweeps only the swept joint's friction cancels; every
other joint is still and holds some torque within ±F, which may differ from one segment
to the next. The simulated arms of the suite hold none. This bench puts it in: the
humanoid arm's reciprocating sweeps (``test/test_estimation.sweep_data``: every joint in
turn, the last first, 2 or 3 random poses each, Coulomb 0.05 N·m on the swept joint,
the configured noise), then each still joint holds a torque drawn uniformly in ±F per
segment, F = 3 % of its effort limit (``validation.check.holding_friction``, what
``check`` assumes). ``fit_gravity`` with its defaults; the error of G(q) at 200 poses
over the joints' range (``pipeline.workspace_poses``), RMS per joint as % of the URDF's
RMS there, and what the data gate (``judge_gravity_fit``) says of the fit. Seeds 0-2.

Then the payload from the same kind of sweeps: 0.5 kg at (10, -20, 50) mm in the flange,
the arm model exact (URDF), 1 or 2 poses per joint, seeds 0-5; ``identify_payload`` with
and without the free offsets per pair (``free_offsets``): mass ± standard error and the
centre of mass's distance from the truth, with the held torques and without.

    .venv/bin/python bench/held_friction.py
"""

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'test'))

from test_cli_fit import JOINTS, URDF  # noqa: E402
from test_estimation import NOISE, held_at_rest, sweep_data  # noqa: E402

from arm_dyn_id.identification.payload import identify_payload  # noqa: E402
from arm_dyn_id.identification.pipeline import (  # noqa: E402
    fit_gravity, judge_gravity_fit, workspace_poses)
from arm_dyn_id.model.base_parameters import gravity_base_parameters  # noqa: E402
from arm_dyn_id.model.gravity import GravityModel  # noqa: E402
from arm_dyn_id.model.robot import Payload, RobotModel  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402


def main():
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    friction = holding_friction(robot)
    poses = workspace_poses(robot)
    truth = robot.gravity_torques(poses)
    scale = np.sqrt(np.mean(truth ** 2, axis=0))
    started = time.perf_counter()
    print(f'# seed-000 sweeps of the humanoid arm, still joints holding up to F = '
          f'{np.round(friction, 2).tolist()} N·m\n')
    print('| poses per joint | seed | held friction | ' +
          ' | '.join(JOINTS) + ' | data gate |')
    print('|---|---|---|' + '---|' * (len(JOINTS) + 1))
    worst = {False: [], True: []}
    for per_joint, seed, t, q, tau, markers, extra in held_sweeps(robot, (2, 3), 3):
        for with_held in (False, True):
            measured = tau + extra * with_held
            fitted = fit_gravity(robot, t, q, measured, markers)
            gate = judge_gravity_fit(fitted, robot, measured, effort='torque')
            error = np.sqrt(np.mean((fitted.model.gravity_torques(poses) - truth) ** 2,
                                    axis=0)) / scale
            worst[with_held].append(error)
            print(f'| {per_joint} | {seed} | {"±F" if with_held else "none"} | ' +
                  ' | '.join(f'{100 * e:.2f}' for e in error) +
                  f' | {"passed" if gate.ok else "refused: " + gate.cause} |')
    for with_held in (False, True):
        w = np.max(worst[with_held], axis=0)
        print(f'\nworst over the runs, {"±F held" if with_held else "none held"}: ' +
              ', '.join(f'{j} {100 * e:.2f} %' for j, e in zip(JOINTS, w)))
    payload_part(robot)
    print(f'\n{time.perf_counter() - started:.0f} s')


def payload_part(robot):
    base = gravity_base_parameters(robot)
    arm = GravityModel(robot.copy(), base, base.beta(robot.parameters()))
    payload = Payload(mass=0.5, com=(0.01, -0.02, 0.05), frame='flange')
    loaded = robot.with_payload(payload)
    print(f'\n# payload {payload.mass} kg at {np.multiply(payload.com, 1e3).tolist()} mm in '
          'the flange from the sweeps, the arm model exact: mass (kg) ± standard error, '
          'centre of mass off (mm)\n')
    print('| poses per joint | seed | free offsets | none held | ±F held |')
    print('|---|---|---|---|---|')
    for per_joint, seed, t, q, tau, markers, extra in held_sweeps(robot, (1, 2), 6, loaded):
        for free in (False, True):
            cells = []
            for measured in (tau, tau + extra):
                fit = identify_payload(arm, t, q, measured, markers, noise=NOISE,
                                       free_offsets=free)
                off = 1e3 * np.linalg.norm(np.subtract(fit.payload.com, payload.com))
                cells.append(f'{fit.payload.mass:.4f} ± {fit.std_errors[0]:.4f}, '
                             f'{off:.1f} mm')
            print(f'| {per_joint} | {seed} | {"yes" if free else "no"} | '
                  + ' | '.join(cells) + ' |')


def held_sweeps(robot, poses_per_joint, seeds, measured=None):
    """Per number of poses per joint and seed (0 .. seeds - 1): the sweeps of ``measured``
    (the arm the torques are of; default ``robot``) and the friction ``robot``'s still
    joints hold per segment: (per_joint, seed, t, q, τ, markers, held τ)."""
    for per_joint in poses_per_joint:
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            t, q, tau, markers = sweep_data(measured or robot, rng, poses_per_joint=per_joint,
                                            noise=NOISE, coulomb=0.05)
            yield per_joint, seed, t, q, tau, markers, held_at_rest(robot, t, markers, rng)[1]


if __name__ == '__main__':
    main()
