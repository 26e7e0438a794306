"""Design an excitation plan for an arm and write it as YAML, with a plot beside it.

Examples::

    arm-dyn-id design --config humanoid_arm.yaml --out plan.yaml
    arm-dyn-id design --config humanoid_arm.yaml --out plan.yaml --optimise --budget 2000
    arm-dyn-id design --config staubli_tx60.yaml --kind fourier --quick --out fourier.yaml
    arm-dyn-id design --config humanoid_arm.yaml --validation --seed 7 --out validation.yaml

Progress (percent and best objective) goes to stderr while the optimiser runs.
"""

from pathlib import Path

import numpy as np

HELP = 'design excitation trajectories (reciprocating or Fourier) for an arm'


def add_arguments(parser):
    parser.add_argument('--config', required=True, help='arm config YAML (path or shipped name)')
    parser.add_argument('--out', required=True, help='plan YAML to write (a PNG goes beside it)')
    parser.add_argument('--kind', choices=('reciprocating', 'fourier'), default='reciprocating')
    parser.add_argument('--quick', action='store_true', help='short plan (about 3 min)')
    parser.add_argument('--optimise', action='store_true',
                        help='optimise poses / coefficients (always on for --kind fourier)')
    parser.add_argument('--optimiser', choices=('hybrid', 'de'), default='hybrid')
    parser.add_argument('--criterion', choices=('range', 'condition'), default='range',
                        help='pose criterion: regressor range (seed 000 eq. 12) or condition')
    parser.add_argument('--budget', type=int, default=2000, help='objective evaluations')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--speed', type=float, default=float(np.deg2rad(3.0)),
                        help='sweep speed (rad/s)')
    parser.add_argument('--sweep-range', type=float, default=None, help='rad per pose')
    parser.add_argument('--poses-per-joint', type=int, default=None)
    parser.add_argument('--validation', action='store_true',
                        help='a held-out validation plan (random poses from --seed)')
    parser.add_argument('--no-plot', action='store_true')


def _progress_bar():
    """``progress(percent, best)`` for the optimisers: a bar on a terminal, lines when piped."""
    from arm_dyn_id.cli.progress import Progress
    bar = Progress().bar('design')

    def report(percent, best):
        bar(percent, 100, note=f'best objective {best:.6g}')
    report.finish = bar.finish      # an optimiser that converged before its budget
    return report


def plot_plan(plan, path):
    """Joint angles over time with the sweep segments shaded; PNG at ``path``."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    t = plan.times(max(plan.duration / 4000, 0.01))
    q = plan.sample(t)[0]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for i, name in enumerate(plan.joints):
        ax.plot(t / 60, q[:, i], label=name, lw=1)
    for seg in plan.segments:
        if seg.phase == 'sweep' and seg.direction != 0:
            ax.axvspan(seg.t_start / 60, seg.t_end / 60,
                       color='tab:green' if seg.direction > 0 else 'tab:orange', alpha=0.08)
    info = plan.info
    crit = []
    if 'range_objective' in info:
        crit.append(f'Q = {info["range_objective"]:.3g}')
    if 'condition_number' in info:
        crit.append(f'cond = {info["condition_number"]:.3g}')
    if 'min_clearance' in info:
        crit.append(f'clearance {1000 * info["min_clearance"]:.0f} mm')
    ax.set_title(f'{plan.name} ({plan.kind}), {plan.duration / 60:.1f} min; ' + ', '.join(crit))
    ax.set_xlabel('time (min)')
    ax.set_ylabel('joint angle (rad)')
    ax.legend(ncol=6, fontsize=8, loc='upper right')
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args):
    from arm_dyn_id.excitation.collision import ClearanceChecker
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.excitation.plans import (check_limits, plan_clearance, reciprocating_plan,
                                             validation_plan)
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.excitation.design import design_fourier, design_poses

    config = load_arm_config(args.config, node_name='excitation_node')
    robot = RobotModel.from_config(config)
    checker = ClearanceChecker.from_config(config)
    rng = np.random.default_rng(args.seed)
    progress = _progress_bar()
    if args.kind == 'fourier':
        plan = design_fourier(robot, config, args.optimiser, args.budget, rng, quick=args.quick,
                              checker=checker, progress=progress)
        plan.info['min_clearance'] = plan_clearance(plan, checker)
    elif args.validation:
        plan = validation_plan(robot, config, seed=args.seed, speed=args.speed,
                               sweep_range=args.sweep_range, quick=args.quick, checker=checker)
    else:
        poses, report = None, None
        if args.optimise:
            poses, report = design_poses(
                robot, config, args.optimiser, args.budget, rng, args.criterion,
                args.poses_per_joint, args.sweep_range, args.quick, checker, progress)
        plan = reciprocating_plan(robot, config, poses=poses, speed=args.speed,
                                  sweep_range=args.sweep_range,
                                  poses_per_joint=args.poses_per_joint, quick=args.quick,
                                  checker=checker)
        if report:
            plan.info['optimiser'] = report
    progress.finish()
    check_limits(plan, config)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plan.to_yaml(out)
    if not args.no_plot:
        plot_plan(plan, out.with_suffix('.png'))
    info = plan.info
    parts = [f'{plan.kind} plan {plan.name!r}: {plan.duration:.1f} s '
             f'({plan.duration / 60:.1f} min), {len(plan.segments)} segments']
    for key in ('range_objective', 'condition_number', 'min_clearance'):
        if key in info:
            parts.append(f'{key} {info[key]:.4g}')
    print('; '.join(parts))
    print(f'wrote {out}' + ('' if args.no_plot else f' and {out.with_suffix(".png")}'))
    return 0
