"""Gravity regressor for many configurations of the humanoid arm (issue 2).

Three ways to build Y_g for the same N configurations, in the same run:

  a) per-sample loop through RobotModel.gravity_regressor_pin(q) (public path);
  b) tight per-sample loop: raw pinocchio.computeJointTorqueRegressor + column
     selection into a preallocated (N, n, 4·nb) array;
  c) RobotModel.gravity_regressor(Q), vectorised (median of 3 runs).

Seeded: the N configurations are uniform within the joint limits from
``np.random.default_rng(0)``.

Prints one JSON line per measurement and a summary line with a/c and b/c; the tables
go to docs/results/regressor_speed.md / .json (not with ``--no-save``).

    .venv/bin/python bench/regressor_speed.py [--samples 1000000]
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.model.robot import RobotModel  # noqa: E402

URDF = Path(__file__).resolve().parent.parent / 'urdf' / 'humanoid_arm.urdf'


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--samples', type=int, default=1_000_000)
    parser.add_argument('--repeats', type=int, default=3)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('regressor_speed', args,
                             title='Gravity regressor: per-sample loops against the batch path '
                                   '(humanoid arm)')
    robot = RobotModel.from_urdf(URDF)
    rng = np.random.default_rng(0)
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    Q = rng.uniform(lo, hi, size=(args.samples, robot.n_joints))
    report.add('setup', dict(samples=args.samples, joints=robot.n_joints,
                             bodies=robot.n_bodies, cpus=os.cpu_count(),
                             python=platform.python_version(), pinocchio=pin.__version__,
                             numpy=np.__version__, loadavg=os.getloadavg()[0]))

    # a) public per-sample path
    c0 = time.process_time()
    t0 = time.perf_counter()
    Ya = np.empty((args.samples, robot.n_joints, 4 * robot.n_bodies))
    for k in range(args.samples):
        Ya[k] = robot.gravity_regressor_pin(Q[k])
    ta = time.perf_counter() - t0
    report.add('paths', dict(path='a_per_sample_gravity_regressor_pin', seconds=ta,
                             cpu_s=time.process_time() - c0,
                             us_per_sample=1e6 * ta / args.samples))

    # b) tight loop on raw pinocchio (the joints here are plain revolute: q maps 1:1)
    model, data = robot.model, robot.model.createData()
    cols = np.concatenate([np.arange(10 * b, 10 * b + 4) for b in range(robot.n_bodies)])
    rows = robot._idx_v
    v0 = np.zeros(model.nv)
    q_pin = pin.neutral(model)
    idx_q = robot._idx_q
    Yb = np.empty_like(Ya)
    c0 = time.process_time()
    t0 = time.perf_counter()
    for k in range(args.samples):
        q_pin[idx_q] = Q[k]
        full = pin.computeJointTorqueRegressor(model, data, q_pin, v0, v0)
        Yb[k] = full[rows][:, cols]
    tb = time.perf_counter() - t0
    report.add('paths', dict(path='b_tight_loop_raw_pinocchio', seconds=tb,
                             cpu_s=time.process_time() - c0,
                             us_per_sample=1e6 * tb / args.samples))

    # c) vectorised
    times, cpu = [], []
    for _ in range(args.repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        Yc = robot.gravity_regressor(Q)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    tc = statistics.median(times)
    report.add('paths', dict(path='c_batch_gravity_regressor', seconds=tc, runs=times,
                             cpu_s=statistics.median(cpu),
                             us_per_sample=1e6 * tc / args.samples))

    report.add('summary', dict(samples=args.samples, a_seconds=ta, b_seconds=tb, c_seconds=tc,
                               ratio_a_over_c=ta / tc, ratio_b_over_c=tb / tc,
                               max_abs_diff_a_c=float(np.max(np.abs(Ya - Yc))),
                               max_abs_diff_b_c=float(np.max(np.abs(Yb - Yc))),
                               loadavg=os.getloadavg()[0]))
    report.note(f'c) is the median of {args.repeats} runs (runs: every run\'s wall time); '
                'a) and b) run once. All three build the same (N, 6, 24) array.')
    report.save()


if __name__ == '__main__':
    main()
