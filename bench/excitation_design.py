"""Excitation design benchmark: GA+PSO hybrid vs differential evolution on the static
poses of the humanoid arm (same evaluation budget), then optimised vs unoptimised poses
on identification accuracy.

The accuracy comparison uses a plain least-squares estimator written here (not the
project's estimator): torques τ = Y_b(q) β + noise at the plan's constant-speed sweep
samples (10 Hz), β fitted by least squares, judged by the RMSE of predicted gravity
torques on a held-out validation plan (different poses, seed 1), per joint and as
% of the joint's largest validation torque (seed 000 eq. 18). Prints JSON lines.

    .venv/bin/python bench/excitation_design.py [--budget 1500] [--seeds 3]
"""

import argparse
import json
import time

import numpy as np

from arm_dyn_id.base_parameters import gravity_base_parameters
from arm_dyn_id.collision import ClearanceChecker
from arm_dyn_id.config import load_arm_config
from arm_dyn_id.excitation import reciprocating_plan, validation_plan, random_feasible_poses
from arm_dyn_id.model import RobotModel
from arm_dyn_id.optimisation import design_poses


def sweep_samples(plan, rate=10.0):
    ts = [np.arange(s.t_start, s.t_end, 1.0 / rate) for s in plan.segments
          if s.phase == 'sweep']
    return plan.sample(np.concatenate(ts))[0]


def accuracy(robot, base, plan, q_val, sigma, trials, rng):
    beta = base.beta(robot.parameters('gravity'))
    Y = base.reduce(robot.gravity_regressor(sweep_samples(plan)))
    Yv = base.reduce(robot.gravity_regressor(q_val))
    tau_v = Yv @ beta
    A = Y.reshape(-1, Y.shape[-1])
    rmse = []
    for _ in range(trials):
        tau = (Y @ beta) + rng.normal(0.0, sigma, size=Y.shape[:2])
        est = np.linalg.lstsq(A, tau.ravel(), rcond=None)[0]
        rmse.append(np.sqrt(np.mean((Yv @ est - tau_v) ** 2, axis=0)))
    rmse = np.mean(rmse, axis=0)
    pct = 100 * rmse / np.abs(tau_v).max(axis=0)
    return rmse, pct


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--config', default='humanoid_arm.yaml')
    parser.add_argument('--budget', type=int, default=1500)
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--sigma', type=float, default=0.1, help='torque noise (N·m)')
    parser.add_argument('--trials', type=int, default=20)
    args = parser.parse_args()
    config = load_arm_config(args.config, node_name='excitation_node')
    robot = RobotModel.from_config(config)
    checker = ClearanceChecker.from_config(config)
    base = gravity_base_parameters(robot)

    best = {}
    for optimiser in ('hybrid', 'de'):
        for seed in range(args.seeds):
            t = time.perf_counter()
            poses, rep = design_poses(robot, config, optimiser, args.budget,
                                      np.random.default_rng(seed), checker=checker)
            plan = reciprocating_plan(robot, config, poses=poses, checker=checker)
            row = {'bench': 'optimiser', 'optimiser': optimiser, 'seed': seed,
                   'budget': args.budget, 'evaluations': rep['evaluations'],
                   'seconds': round(time.perf_counter() - t, 2),
                   'objective_W': round(rep['objective'], 6),
                   'range_objective': round(plan.info['range_objective'], 3),
                   'condition_number': round(plan.info['condition_number'], 3),
                   'min_clearance_m': round(plan.info['min_clearance'], 4),
                   'feasible': rep['feasible'], 'plan_minutes': round(plan.duration / 60, 2)}
            print(json.dumps(row), flush=True)
            if optimiser == 'hybrid' and seed == 0:
                best['optimised (hybrid, range)'] = plan
    poses, _ = design_poses(robot, config, 'hybrid', args.budget, np.random.default_rng(0),
                            criterion='condition', checker=checker)
    best['optimised (hybrid, condition)'] = reciprocating_plan(robot, config, poses=poses,
                                                               checker=checker)
    best['unoptimised (default poses)'] = reciprocating_plan(robot, config, checker=checker)
    order = list(range(config.n_joints - 1, -1, -1))
    rnd = random_feasible_poses(config, order, 2, np.random.default_rng(5), checker)
    best['unoptimised (random poses)'] = reciprocating_plan(robot, config, poses=rnd,
                                                            checker=checker)
    val = validation_plan(robot, config, seed=1, checker=checker)
    q_val = sweep_samples(val)
    for name, plan in best.items():
        rmse, pct = accuracy(robot, base, plan, q_val, args.sigma, args.trials,
                             np.random.default_rng(0))
        print(json.dumps({'bench': 'accuracy', 'plan': name, 'sigma_Nm': args.sigma,
                          'range_objective': round(plan.info['range_objective'], 3),
                          'condition_number': round(plan.info['condition_number'], 3),
                          'rmse_Nm': [round(x, 4) for x in rmse],
                          'rmse_pct_of_max': [round(x, 2) for x in pct],
                          'mean_rmse_pct': round(float(np.mean(pct)), 2)}), flush=True)


if __name__ == '__main__':
    main()
