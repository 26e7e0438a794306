"""Gravity fit time for long 1 kHz records of the humanoid arm (issue 6).

Synthetic reciprocating data (seed 000 eq. 11: one joint sweeps forward and back
at 3 °/s in random static poses, joints visited last to first, 1 s settle
between pairs) sampled at 1 kHz, torque = G(q) + Coulomb + viscous friction +
Gaussian noise. For each duration (default 10 min and 60 min) it measures, in
the same run:

- fast path: forward/backward averaging (pairing.average_pairs), then
  chunked normal equations from the vectorised regressor
  (estimators.gravity_normal_equations) and the WLS solve; stages timed on one
  thread (regressor building / accumulation / solve), and end to end with
  ``--workers`` threads; wall time and process CPU time;
- naive baseline on the same averaged samples: a per-sample Python loop calling
  pinocchio.computeJointTorqueRegressor, taking the gravity columns into a
  stacked array, then np.linalg.lstsq. When its projected time exceeds
  ``--naive-limit`` seconds it runs on a subset and is extrapolated linearly
  (the JSON line says so).

Both fits use equal joint weights so that their predictions can be compared.

Seeded: the records come from ``np.random.default_rng(0)`` (poses, noise and the
held-out check poses, drawn in that order for each duration in turn), so a run with
the same ``--minutes`` sees the same data.

One JSON line per result; the tables go to docs/results/fit_time.md / .json and the
plot of fit time against record length to docs/fit_time_scaling.png (``--plot PNG``
writes it elsewhere, ``--no-save`` writes neither).

    .venv/bin/python bench/fit_time.py [--minutes 1 5 10 30 60] [--workers 2] [--plot PNG]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.model.base_parameters import gravity_base_parameters  # noqa: E402
from arm_dyn_id.identification.estimators import NormalEquations, \
    fit_gravity_chunked, fit_normal_equations  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.identification.pairing import average_pairs, sweeps_from_markers  # noqa: E402

URDF = Path(__file__).resolve().parent.parent / 'urdf' / 'humanoid_arm.urdf'
RATE = 1000.0
SPEED = np.deg2rad(3.0)
SWEEP = 0.6                    # rad per pass
SETTLE = 1.0                   # s between pairs
NOISE = np.array([0.02, 0.02, 0.005, 0.005, 0.0005, 0.0002])      # N·m
COULOMB = np.array([0.3, 0.3, 0.1, 0.05, 0.005, 0.002])           # N·m
VISCOUS = np.array([0.5, 0.5, 0.2, 0.1, 0.01, 0.005])             # N·m·s/rad


def reciprocating_record(robot, minutes, rng):
    """t (N,), q (N, n), tau (N, n), markers: ``minutes`` of 1 kHz sweeps."""
    n = robot.n_joints
    lo = robot.model.lowerPositionLimit + 0.05
    hi = robot.model.upperPositionLimit - 0.05
    steps = int(round(SWEEP / SPEED * RATE))
    settle = int(SETTLE * RATE)
    per_pair = 2 * steps + settle
    pairs = int(np.ceil(minutes * 60 * RATE / per_pair))
    total = pairs * per_pair
    q = np.empty((total, n))
    dq = np.zeros((total, n))
    markers = []
    s = np.arange(steps) / RATE
    for p in range(pairs):
        j = n - 1 - p % n
        pose = rng.uniform(lo, hi)
        start = rng.uniform(lo[j], hi[j] - SWEEP)
        k0 = p * per_pair
        for d, direction in enumerate((1, -1)):
            a = k0 + d * steps
            markers.append({'t': a / RATE, 'phase': 'sweep', 'segment_id': 3 * p + d,
                            'joint_index': j, 'direction': direction})
            q[a:a + steps] = pose
            q[a:a + steps, j] = start + SPEED * s if direction > 0 else start + SWEEP - SPEED * s
            dq[a:a + steps, j] = direction * SPEED
        a = k0 + 2 * steps
        markers.append({'t': a / RATE, 'phase': 'settle', 'segment_id': 3 * p + 2,
                        'joint_index': j, 'direction': 0})
        q[a:a + settle] = q[a - 1]
    theta = robot.parameters('gravity')
    tau = np.empty_like(q)
    for a in range(0, total, 200_000):
        b = min(a + 200_000, total)
        tau[a:b] = robot.gravity_regressor(q[a:b]) @ theta
    tau += COULOMB * np.sign(dq) + VISCOUS * dq + rng.standard_normal(q.shape) * NOISE
    return np.arange(total) / RATE, q, tau, markers


def staged_fit(robot, base, q, tau, chunk):
    """One-thread pass with the regressor and the accumulation timed apart
    (the same steps as estimators.gravity_normal_equations)."""
    t_reg = t_acc = 0.0
    total = None
    weights = np.ones(robot.n_joints)
    for a in range(0, len(q), chunk):
        t0 = time.perf_counter()
        Yn = robot.gravity_regressor_joint_major(q[a:a + chunk])[:, base.independent, :]
        t1 = time.perf_counter()
        tc = tau[a:a + chunk]
        A_joint = Yn @ Yn.transpose(0, 2, 1)
        b_joint = (Yn @ np.ascontiguousarray(tc.T)[:, :, None])[..., 0]
        part = NormalEquations(A_joint.sum(axis=0), b_joint.sum(axis=0), A_joint, b_joint,
                               np.sum(tc ** 2, axis=0), len(tc), weights)
        total = part if total is None else total + part
        t_reg += t1 - t0
        t_acc += time.perf_counter() - t1
    t0 = time.perf_counter()
    result = fit_normal_equations(total, base.names)
    return result, t_reg, t_acc, time.perf_counter() - t0


def naive_fit(robot, q, tau):
    """Per-sample pinocchio regressor, gravity columns stacked, np.linalg.lstsq."""
    model, data = robot.model, robot.model.createData()
    cols = np.concatenate([np.arange(10 * b, 10 * b + 4) for b in range(robot.n_bodies)])
    v0 = np.zeros(model.nv)
    t0 = time.perf_counter()
    stacked = np.empty((len(q), robot.n_joints, len(cols)))
    for k in range(len(q)):
        full = pin.computeJointTorqueRegressor(model, data, robot._pin_q(q[k]), v0, v0)
        stacked[k] = full[robot._idx_v][:, cols]
    t1 = time.perf_counter()
    theta = np.linalg.lstsq(stacked.reshape(-1, len(cols)), tau.reshape(-1), rcond=None)[0]
    t2 = time.perf_counter()
    return theta, t1 - t0, t2 - t1


def run(robot, base, minutes, args, rng, report):
    emit = report.add
    t, q, tau, markers = reciprocating_record(robot, minutes, rng)
    emit('records', dict(
        minutes=minutes, raw_samples=len(t), joints=robot.n_joints, raw_MB=q.nbytes / 1e6 * 2,
        base_regressor_GB_if_materialised=len(t) * robot.n_joints * base.count * 8 / 1e9))
    # averaging (shared by both paths)
    t0 = time.perf_counter()
    paired = average_pairs(t, q, tau, sweeps_from_markers(t, markers))
    t_avg = time.perf_counter() - t0
    qa, ta = paired.q, paired.tau
    # fast path, stages on one thread
    result, t_reg, t_acc, t_solve = staged_fit(robot, base, qa, ta, args.chunk)
    emit('fast_stages_1_thread', dict(
        minutes=minutes, path='fast_stages_1_thread', averaged_samples=len(qa),
        averaging_s=t_avg, regressor_s=t_reg, accumulate_s=t_acc, solve_s=t_solve,
        total_s=t_avg + t_reg + t_acc + t_solve))
    # fast path end to end with threads
    c0 = time.process_time()
    t0 = time.perf_counter()
    paired2 = average_pairs(t, q, tau, sweeps_from_markers(t, markers))
    t1 = time.perf_counter()
    fast = fit_gravity_chunked(robot, base, paired2.q, paired2.tau, chunk=args.chunk,
                               workers=args.workers)
    t2 = time.perf_counter()
    emit('fast_end_to_end', dict(
        minutes=minutes, path=f'fast_end_to_end_{args.workers}_threads',
        averaging_s=t1 - t0, fit_s=t2 - t1, total_s=t2 - t0,
        cpu_s=time.process_time() - c0,
        residual_rms=fast.noise_std.tolist(), condition_number=fast.condition_number))
    # naive baseline: measure a subset, run fully unless projected above the limit
    probe = min(len(qa), args.probe)
    _, loop_s, lstsq_s = naive_fit(robot, qa[:probe], ta[:probe])
    projected = (loop_s + lstsq_s) * len(qa) / probe
    if projected > args.naive_limit:
        emit('naive', dict(
            minutes=minutes, path='naive_per_sample_lstsq', extrapolated=True,
            measured_samples=probe, measured_loop_s=loop_s, measured_lstsq_s=lstsq_s,
            regressor_s=loop_s * len(qa) / probe, solve_s=lstsq_s * len(qa) / probe,
            averaging_s=t_avg, total_s=t_avg + projected))
        naive_total = t_avg + projected
    else:
        c0 = time.process_time()
        theta, loop_s, lstsq_s = naive_fit(robot, qa, ta)
        naive_cpu = time.process_time() - c0
        qv = rng.uniform(robot.model.lowerPositionLimit, robot.model.upperPositionLimit,
                         size=(1000, robot.n_joints))
        Yv = robot.gravity_regressor(qv)
        diff = np.max(np.abs(Yv @ theta - base.reduce(Yv) @ fast.beta))
        emit('naive', dict(
            minutes=minutes, path='naive_per_sample_lstsq', extrapolated=False,
            regressor_s=loop_s, solve_s=lstsq_s, averaging_s=t_avg,
            total_s=t_avg + loop_s + lstsq_s, cpu_s_without_averaging=naive_cpu,
            max_prediction_diff_vs_fast_Nm=float(diff)))
        naive_total = t_avg + loop_s + lstsq_s
    return emit('summary', dict(minutes=minutes, fast_total_s=t2 - t0,
                                naive_total_s=naive_total, speedup=naive_total / (t2 - t0),
                                loadavg=os.getloadavg()[0]))


def plot_scaling(summaries, path):
    """Fit time against record length, fast and naive, log-log (issue 8)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    minutes = [s['minutes'] for s in summaries]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(minutes, [s['naive_total_s'] for s in summaries], 'o-',
              label='naive: per-sample pinocchio loop + lstsq')
    ax.loglog(minutes, [s['fast_total_s'] for s in summaries], 's-',
              label='arm_dyn_id: vectorised regressor, chunked moments')
    for s in summaries:
        ax.annotate(f'{s["speedup"]:.0f}x', (s['minutes'], s['fast_total_s']),
                    textcoords='offset points', xytext=(4, -12), fontsize=8)
    ax.set_xlabel('record length at 1 kHz (minutes)')
    ax.set_ylabel('gravity fit wall time (s)')
    ax.set_title(f'Fit time against data length (humanoid arm, {os.cpu_count()} cores)')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, nargs='+', default=[1.0, 5.0, 10.0, 30.0, 60.0])
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--chunk', type=int, default=16384)
    parser.add_argument('--probe', type=int, default=50_000,
                        help='samples on which the naive baseline is timed first')
    parser.add_argument('--naive-limit', type=float, default=180.0,
                        help='run the naive baseline fully only if projected below this (s)')
    parser.add_argument('--plot', help='write the PNG of fit time against record length '
                        'here (default docs/fit_time_scaling.png)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('fit_time', args,
                             title='Gravity fit time against record length (humanoid arm, 1 kHz)')
    robot = RobotModel.from_urdf(URDF)
    base = gravity_base_parameters(robot)
    report.add('setup', dict(cpus=os.cpu_count(), pinocchio=pin.__version__,
                             numpy=np.__version__, base_parameters=base.count,
                             workers=args.workers, chunk=args.chunk,
                             loadavg=os.getloadavg()[0]))
    rng = np.random.default_rng(0)
    summaries = [run(robot, base, minutes, args, rng, report) for minutes in args.minutes]
    report.note('fast: pairing.average_pairs, then estimators.fit_gravity_chunked (normal '
                f'equations from {args.chunk}-sample chunks of the vectorised regressor, '
                f'{args.workers} threads); stages timed apart on one thread. naive: per-sample '
                'pinocchio.computeJointTorqueRegressor loop, stacked gravity columns, '
                'np.linalg.lstsq, on the same averaged samples (extrapolated from '
                f'{args.probe} samples when projected above {args.naive_limit:g} s).')
    plot = Path(args.plot) if args.plot else report.plot_path('fit_time_scaling.png')
    if plot is not None:
        plot_scaling(summaries, plot)
        print(f'plot written to {plot}', file=sys.stderr)
    report.save()


if __name__ == '__main__':
    main()
