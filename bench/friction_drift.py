#!/usr/bin/env python3
"""Friction drift while serving: the residual of a frozen model against a tracked one.

Issue 24 item 6. A simulated warm-up of the humanoid arm (``arm_dyn_id.sim.warmup``):
Coulomb and viscous friction of every joint fall linearly by 30 % over 20 minutes, after
2 cold minutes. The arm: the URDF's link parameters (its rigid body), the simulator's tanh
friction (config/humanoid_arm.yaml sim_arm_node), torque noise of the config's
``torque_noise`` (Gaussian, per joint), a three-harmonic Fourier motion of every joint;
torques from the model's own inverse dynamics (offline, faster than real time). The served
model: the fitted one a good fit gives, i.e. the same friction (cold) and link parameters
off by 1 % (seeded), so its cold residual is not pure noise.

Both runs go through the node's code, sample by sample
(``arm_dyn_id.service.friction_drift.track_recording``): ``ResidualStream`` (momentum
observer, K = 25 /s) and, tracked, ``FrictionTracker.update`` with every accepted version
swapped in by ``ServedDynamics.with_friction`` / ``ResidualStream.serve`` (what
identifier_node does with friction_tracking on; its defaults: forgetting time 30 s,
RLS at 100 Hz, a version every 5 s, bounds [0.5, 1.5] x fitted + 0.01).

Reported per minute and joint: the residual RMS divided by the cold value (the frozen
model's RMS over the 2 cold minutes); the goal is tracked / cold <= 1.2 in every minute
(the frozen one grows). Also whether the served friction ever left its bounds, the
versions, refusals, and the served friction at the end against the truth.

    .venv/bin/python bench/friction_drift.py [--rate 200] [--minutes 20] [--no-save]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.model.dynamics import DynamicsModel, nominal_standard_parameters  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.service.friction_drift import (  # noqa: E402
    FrictionTracker, TrackerSettings, track_recording)
from arm_dyn_id.sim.arm import SimParams, true_model  # noqa: E402
from arm_dyn_id.sim.warmup import warm_up  # noqa: E402

GAINS = 25.0
COLD_MIN = 2.0
FALL = 0.3


def models(seed=0):
    """(truth, served): the URDF's rigid body with the sim's friction, and the fit."""
    config = load_arm_config('humanoid_arm.yaml')
    sim = SimParams.from_config(load_arm_config('humanoid_arm.yaml', node_name='sim_arm_node'))
    robot = RobotModel.from_config(config)
    truth = true_model(robot, sim)
    theta = nominal_standard_parameters(robot)
    rng = np.random.default_rng(seed)
    fitted = theta * (1 + 0.01 * rng.standard_normal(theta.shape))
    served = DynamicsModel(robot, truth.base, truth.base.beta(fitted), truth.friction_model,
                           truth.phi)
    return config, truth, served


def run(served_model, data, tracker=None):
    """The node's residual path; residual (N, n), updates, wall seconds."""
    started = time.perf_counter()
    residual, updates = track_recording(served_model, data.t, data.q, data.dq, data.tau,
                                        GAINS, tracker)
    return residual, updates, time.perf_counter() - started


def per_minute(t, residual, cold):
    """RMS / cold per whole minute, (minutes, n)."""
    minute = (t // 60.0).astype(int)
    return np.array([np.sqrt(np.mean(residual[minute == m] ** 2, axis=0)) / cold
                     for m in range(minute.max() + 1)])


def plot(t, frozen, tracked, joints, path, goal=1.2):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    minutes = np.arange(len(frozen)) + 0.5
    fig, axes = plt.subplots(2, 3, figsize=(11, 6), sharex=True)
    for j, ax in enumerate(axes.ravel()):
        ax.plot(minutes, frozen[:, j], 'o-', ms=3, label='frozen model')
        ax.plot(minutes, tracked[:, j], 's-', ms=3, label='friction tracked')
        ax.axhline(goal, color='k', ls='--', lw=0.8, label=f'goal {goal}x cold')
        ax.axvline(COLD_MIN, color='0.6', lw=0.8)
        ax.set_title(joints[j], fontsize=9)
        ax.grid(True, alpha=0.3)
        if j % 3 == 0:
            ax.set_ylabel('residual RMS / cold')
        if j >= 3:
            ax.set_xlabel('time (min)')
    axes[0, 0].legend(fontsize=7)
    fig.suptitle('Warm-up: Coulomb and viscous friction fall 30 % over 20 min '
                 '(after 2 cold min)', fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rate', type=float, default=200.0,
                        help='joint_states rate of the simulated stream (Hz)')
    parser.add_argument('--minutes', type=float, default=20.0,
                        help='length of the 30 %% fall (min), after 2 cold minutes')
    parser.add_argument('--seed', type=int, default=0)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('friction_drift', args, title='Friction drift while serving')
    config, truth, served = models(args.seed)
    data = warm_up(truth, seconds=(COLD_MIN + args.minutes) * 60.0, rate=args.rate, fall=FALL,
                   ramp=args.minutes * 60.0, cold=COLD_MIN * 60.0, noise=config.torque_noise,
                   seed=args.seed)
    t = data.t
    frozen, _, frozen_s = run(served, data)
    tracker = FrictionTracker(served, GAINS, TrackerSettings())
    tracked, updates, tracked_s = run(served, data, tracker)
    cold = np.sqrt(np.mean(frozen[t < COLD_MIN * 60.0] ** 2, axis=0))
    f, k = per_minute(t, frozen, cold), per_minute(t, tracked, cold)
    joints = list(served.joint_names)
    for m in range(len(f)):
        report.add('per_minute', {'minute': m, 'frozen_ratio': np.round(f[m], 3).tolist(),
                                  'tracked_ratio': np.round(k[m], 3).tolist(),
                                  'frozen_max': round(float(f[m].max()), 3),
                                  'tracked_max': round(float(k[m].max()), 3)})
    left = [u.version for u in updates if np.any(
        (u.phi.reshape(-1, 2) < tracker.lower) | (u.phi.reshape(-1, 2) > tracker.upper))]
    truth_end = data.scale[-1] * truth.phi.reshape(-1, 2)
    got = tracker.phi.reshape(-1, 2)
    summary = report.add('summary', {
        'samples': len(t), 'rate_hz': args.rate, 'joints': joints,
        'cold_rms_nm': np.round(cold, 5).tolist(),
        'tracked_over_cold_max': round(float(k.max()), 3),
        'tracked_over_cold_max_per_joint': np.round(k.max(axis=0), 3).tolist(),
        'frozen_over_cold_last_minute': np.round(f[-1], 3).tolist(),
        'goal_met': bool(k.max() <= 1.2), 'bounds_ever_left': bool(left),
        'versions': tracker.version, 'refusals': tracker.refusals,
        'status_at_end': tracker.status,
        'coulomb_served_over_true_end': np.round(got[:, 0] / truth_end[:, 0], 3).tolist(),
        'viscous_served_over_true_end': np.round(got[:, 1] / truth_end[:, 1], 3).tolist(),
        'frozen_run_s': round(frozen_s, 1), 'tracked_run_s': round(tracked_s, 1),
        'tracker_us_per_sample': round((tracked_s - frozen_s) / len(t) * 1e6, 1),
        'loadavg': round(os.getloadavg()[0], 2)})
    report.note('tracked / cold: residual RMS in each minute over the frozen model\'s RMS in '
                'the 2 cold minutes, per joint; the goal is <= 1.2 in every minute.')
    report.note('tracker_us_per_sample: (tracked run - frozen run) wall time per sample on a '
                'shared machine; it includes the version swaps.')
    path = report.plot_path('friction_drift.png')
    if path is not None:
        plot(t, f, k, joints, path)
    report.save()
    return 0 if summary['goal_met'] and not summary['bounds_ever_left'] else 1


if __name__ == '__main__':
    raise SystemExit(main())
