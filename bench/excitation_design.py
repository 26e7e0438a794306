"""Excitation design benchmark: GA+PSO hybrid vs differential evolution on the static
poses of the humanoid arm (same evaluation budget), then optimised vs unoptimised poses
on identification accuracy.

The accuracy comparison uses a plain least-squares estimator written here (not the
project's estimator): torques τ = Y_b(q) β + noise at the plan's constant-speed sweep
samples (10 Hz), β fitted by least squares, judged by the RMSE of predicted gravity
torques on a held-out validation plan (different poses, seed 1), per joint and as
% of the joint's largest validation torque (seed 000 eq. 18).

``--budgets B1 B2 ...`` runs both optimisers for every seed at each budget (the
optimiser table then covers each budget, a by_budget table sums it up) and plots
design time and objective reached against the budget to
docs/design_time_vs_budget.png (with two budgets or more); the accuracy comparison
then uses the largest budget.

Seeded: optimiser seeds 0 .. ``--seeds`` - 1 (``np.random.default_rng(seed)``, the
same seeds at every budget), the condition-criterion design seed 0, the random
poses seed 5, the validation plan seed 1 and the noise draws of the accuracy
comparison seed 0.

One JSON line per result; the tables go to docs/results/excitation_design.md /
.json (not with ``--no-save``).

    .venv/bin/python bench/excitation_design.py [--budgets 250 500 1000 1500] [--seeds 3]
    .venv/bin/python bench/excitation_design.py --budget 1500      # one budget, no plot
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.model.base_parameters import gravity_base_parameters  # noqa: E402
from arm_dyn_id.excitation.collision import ClearanceChecker, CollisionError  # noqa: E402
from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.excitation.plans import (  # noqa: E402
    random_feasible_poses, reciprocating_plan, validation_plan)
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.excitation.design import design_poses  # noqa: E402

OPTIMISERS = {'hybrid': 'GA+PSO hybrid', 'de': 'differential evolution'}


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


def checked_plan(robot, config, poses, checker):
    """(plan, None), or (None, the reason) when the plan breaks the clearance (small
    budgets can end on an infeasible design)."""
    try:
        return reciprocating_plan(robot, config, poses=poses, checker=checker), None
    except CollisionError as exc:
        return None, str(exc)


def plot_budgets(summary, path):
    """Design time and objective reached against the budget, one line per optimiser."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax_t, ax_w) = plt.subplots(1, 2, figsize=(10, 4))
    for optimiser, label in OPTIMISERS.items():
        rows = sorted((r for r in summary if r['optimiser'] == optimiser),
                      key=lambda r: r['budget'])
        budgets = [r['budget'] for r in rows]
        for ax, key in ((ax_t, 'design_s'), (ax_w, 'objective_W')):
            median = np.array([r[f'{key}_median'] for r in rows])
            err = np.array([[m - r[f'{key}_min'], r[f'{key}_max'] - m]
                            for m, r in zip(median, rows)]).T
            ax.errorbar(budgets, median, yerr=err, marker='o', capsize=3, label=label)
    seeds = summary[0]['seeds']
    ax_t.set_ylabel('design wall time (s)')
    ax_w.set_ylabel('objective reached, W = 1/(1+Q)\n(lower is better; above 1: infeasible)')
    ax_w.set_yscale('log')          # infeasible designs carry a penalty of 10 and more
    for ax in (ax_t, ax_w):
        ax.set_xlabel('optimiser budget (objective evaluations)')
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f'Excitation pose design against budget (humanoid arm; median and range of '
                 f'{seeds} seeds; {os.cpu_count()} cores)')
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config', default='humanoid_arm.yaml')
    parser.add_argument('--budget', type=int,
                        help='one budget only (objective evaluations; no budget plot)')
    parser.add_argument('--budgets', type=int, nargs='+', default=[250, 500, 1000, 1500],
                        help='run both optimisers at each of these budgets and plot design '
                             'time and objective against the budget (the accuracy '
                             'comparison uses the largest; default %(default)s)')
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--sigma', type=float, default=0.1, help='torque noise (N·m)')
    parser.add_argument('--trials', type=int, default=20)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('excitation_design', args,
                             title='Excitation design: GA+PSO hybrid against differential '
                                   'evolution (humanoid arm)')
    config = load_arm_config(args.config, node_name='excitation_node')
    robot = RobotModel.from_config(config)
    checker = ClearanceChecker.from_config(config)
    base = gravity_base_parameters(robot)
    budgets = [args.budget] if args.budget else sorted(set(args.budgets))
    accuracy_budget = max(budgets)

    report.columns('optimiser', ['optimiser', 'seed', 'budget', 'evaluations', 'design_s',
                                 'seconds', 'objective_W', 'range_objective', 'condition_number',
                                 'min_clearance_m', 'feasible', 'plan_minutes', 'plan_error'])
    best = {}
    summary = []
    for budget in budgets:
        for optimiser in OPTIMISERS:
            rows = []
            for seed in range(args.seeds):
                t = time.perf_counter()
                poses, rep = design_poses(robot, config, optimiser, budget,
                                          np.random.default_rng(seed), checker=checker)
                plan, error = checked_plan(robot, config, poses, checker)
                row = {'optimiser': optimiser, 'seed': seed, 'budget': budget,
                       'evaluations': rep['evaluations'], 'design_s': rep['seconds'],
                       'seconds': round(time.perf_counter() - t, 2),
                       'objective_W': round(rep['objective'], 6)}
                if plan is not None:
                    row.update({
                        'range_objective': round(plan.info['range_objective'], 3),
                        'condition_number': round(plan.info['condition_number'], 3),
                        'min_clearance_m': round(plan.info['min_clearance'], 4)})
                row['feasible'] = rep['feasible']
                if plan is not None:
                    row['plan_minutes'] = round(plan.duration / 60, 2)
                else:
                    row['plan_error'] = error
                rows.append(report.add('optimiser', row))
                if (optimiser == 'hybrid' and seed == 0 and budget == accuracy_budget
                        and plan is not None):
                    best['optimised (hybrid, range)'] = plan
            if rows:
                times = [r['design_s'] for r in rows]
                objectives = [r['objective_W'] for r in rows]
                summary.append(report.add('by_budget', {
                    'optimiser': optimiser, 'budget': budget, 'seeds': len(rows),
                    'design_s_mean': round(float(np.mean(times)), 3),
                    'design_s_median': round(float(np.median(times)), 3),
                    'design_s_min': min(times), 'design_s_max': max(times),
                    'objective_W_mean': round(float(np.mean(objectives)), 6),
                    'objective_W_median': round(float(np.median(objectives)), 6),
                    'objective_W_min': min(objectives), 'objective_W_max': max(objectives),
                    'feasible': sum(r['feasible'] for r in rows)}))
    poses, _ = design_poses(robot, config, 'hybrid', accuracy_budget, np.random.default_rng(0),
                            criterion='condition', checker=checker)
    plan, error = checked_plan(robot, config, poses, checker)
    if plan is not None:
        best['optimised (hybrid, condition)'] = plan
    for name in ('optimised (hybrid, range)', 'optimised (hybrid, condition)'):
        if name not in best:
            report.note(f'accuracy: no {name} plan: its design (seed 0, budget '
                        f'{accuracy_budget}) is refused by the clearance check of the plan.')
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
        designed = {'budget': accuracy_budget} if name.startswith('optimised') else {}
        report.add('accuracy', {'plan': name, **designed, 'sigma_Nm': args.sigma,
                                'range_objective': round(plan.info['range_objective'], 3),
                                'condition_number': round(plan.info['condition_number'], 3),
                                'rmse_Nm': [round(x, 4) for x in rmse],
                                'rmse_pct_of_max': [round(x, 2) for x in pct],
                                'mean_rmse_pct': round(float(np.mean(pct)), 2)})
    report.note('optimiser: design_s is the optimiser\'s own time (design_poses), seconds '
                'that plus building and checking the plan; objective_W = 1/(1+Q) (seed 000 '
                'eq. 13, lower is better), range_objective Q (eq. 12).')
    report.note(f'accuracy: plain least squares written for this benchmark (not the project\'s '
                f'estimator), τ = Y_b β + N(0, {args.sigma:g} N·m) at the sweep samples (10 Hz), '
                f'{args.trials} noise draws, gravity torque RMSE on the held-out validation plan '
                '(seed 1) per joint 1-6, and as % of each joint\'s largest validation torque.')
    plot = report.plot_path('design_time_vs_budget.png') if len(budgets) > 1 else None
    if plot is not None:
        plot_budgets(summary, plot)
        print(f'plot written to {plot}', file=sys.stderr)
    report.save()


if __name__ == '__main__':
    main()
