"""Gravity service benchmark (issue 6): query latency and stream delivery across processes.

Fits a model on synthetic reciprocating data of the humanoid arm, saves it to a
temporary file, starts identifier_node (serve_only) in its own process, then from
this process:

1. 1000 sequential blocking queries through GravityClient, once with the client's
   resend switched off and once with its default (a query unanswered after 50 ms is
   sent again) -> a JSON line each ``{"client", "p50_ms", "p99_ms", "resends", ...}``
   and the latency percentiles; the default client's latencies make the plot
   docs/gravity_query_latency.png (histogram and cumulative distribution, p50 and
   p99 marked);
2. joint_states published at 1 kHz for 10 s, gravity_torques counted -> one JSON
   line ``{"stream_rate_hz", "seconds", "delivered_fraction", ...}``.

Seeded: the model is fitted on synthetic data from seed 0, the query poses (also
sent on the stream) come from ``np.random.default_rng(1)``.

The tables go to docs/results/gravity_query.md / .json; ``--no-save`` writes
neither them nor the plot.

    .venv/bin/python bench/gravity_query.py [--queries 1000] [--seconds 10]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / 'test'))

import benchlib  # noqa: E402
from ros_utils import node_output, ros_environment, start_node, stop  # noqa: E402

from arm_dyn_id.identification.gravity import identify_gravity  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402

JOINTS = ['joint_1', 'joint_2', 'joint_3', 'joint_4', 'joint_5', 'joint_6']
SPEED = np.deg2rad(3.0)


def synthetic_model(path, seed=0, rate=50.0):
    robot = RobotModel.from_urdf(REPO / 'urdf' / 'humanoid_arm.urdf', joints=JOINTS)
    rng = np.random.default_rng(seed)
    noise = np.array([0.02, 0.02, 0.005, 0.005, 0.0005, 0.0002])
    t_all, q_all, dq_all, markers, t0 = [], [], [], [], 0.0
    for j in reversed(range(6)):
        for _ in range(3):
            pose = rng.uniform(-1.2, 1.2, 6)
            steps = int(round(0.6 / SPEED * rate))
            for direction in (1, -1):
                markers.append({'t': t0 - 1e-4, 'phase': 'sweep', 'segment_id': len(markers),
                                'joint_index': j, 'direction': direction})
                s = np.arange(steps) / rate
                q = np.tile(pose, (steps, 1))
                q[:, j] = pose[j] - 0.3 + (SPEED * s if direction > 0 else 0.6 - SPEED * s)
                dq = np.zeros_like(q)
                dq[:, j] = direction * SPEED
                t_all.append(t0 + s)
                q_all.append(q)
                dq_all.append(dq)
                t0 += steps / rate
            markers.append({'t': t0 - 1e-4, 'phase': 'settle', 'segment_id': len(markers),
                            'joint_index': j, 'direction': 0})
            t0 += 1.0
    q, dq = np.vstack(q_all), np.vstack(dq_all)
    tau = robot.gravity_torques(q) + 0.05 * np.sign(dq) + rng.normal(size=q.shape) * noise
    fit = identify_gravity(robot, np.concatenate(t_all), q, tau, markers, noise=noise)
    fit.model.save(path)
    return fit.model


PERCENTILES = (0, 10, 25, 50, 75, 90, 95, 99, 99.9, 100)


def plot_latencies(ms, path):
    """Histogram and cumulative distribution of the query latencies, p50 and p99 marked."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    p50, p99 = np.percentile(ms, [50, 99])
    fig, (ax_h, ax_c) = plt.subplots(1, 2, figsize=(10, 4))
    bins = np.logspace(np.log10(ms.min()), np.log10(ms.max()), 60) if ms.max() > ms.min() \
        else 10
    ax_h.hist(ms, bins=bins, color='tab:blue', alpha=0.8)
    ax_h.set_xscale('log')
    ax_h.set_yscale('log')
    ax_h.set_ylabel('queries')
    xs = np.sort(ms)
    ax_c.plot(xs, np.arange(1, len(xs) + 1) / len(xs), color='tab:blue')
    ax_c.set_xscale('log')
    ax_c.set_ylabel('fraction of queries answered within')
    for ax in (ax_h, ax_c):
        for value, name, style in ((p50, 'p50', '--'), (p99, 'p99', ':')):
            ax.axvline(value, color='k', linestyle=style, label=f'{name} {value:.3f} ms')
        ax.set_xlabel('blocking query latency (ms)')
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f'Gravity service: {len(ms)} sequential blocking queries across processes '
                 f'(GravityClient with 50 ms resend -> identifier_node, {os.cpu_count()} '
                 'cores)')
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--queries', type=int, default=1000)
    parser.add_argument('--rate', type=float, default=1000.0)
    parser.add_argument('--seconds', type=float, default=10.0)
    benchlib.add_arguments(parser)
    args = parser.parse_args(argv)
    report = benchlib.Report('gravity_query', args,
                             title='Gravity service: query latency and stream delivery across '
                                   'processes')
    ms = None

    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from arm_dyn_id.nodes.gravity_client import GravityClient

    with tempfile.TemporaryDirectory(prefix='gravity_bench_') as tmp, \
            ros_environment(Path(tmp) / 'ros') as env:
        model_file = Path(tmp) / 'model.yaml'
        synthetic_model(model_file)
        proc = start_node('arm_dyn_id.nodes.identifier_node',
                          {'model_file': str(model_file), 'serve_only': True}, env,
                          name='identifier')
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=env.domain_id)
        node = rclpy.create_node('gravity_bench', context=context)
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        received = []
        node.create_subscription(JointState, 'gravity_torques',
                                 lambda m: received.append(m.header.stamp.nanosec), qos)
        states = node.create_publisher(JointState, 'joint_states', qos)
        client = GravityClient(node)
        executor = EventsExecutor(context=context)
        executor.add_node(node)
        spinner = benchlib.Spinner(executor, context)
        try:
            if not client.wait_for_server(30.0):
                raise SystemExit('identifier_node did not come up:\n' + node_output(proc))
            rng = np.random.default_rng(1)
            poses = rng.uniform(-1.5, 1.5, size=(args.queries, 6))
            deadline = time.monotonic() + 30.0
            while True:         # the model loads after the node is discovered
                try:
                    client.call(JOINTS, poses[0], timeout=0.5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
            # the same queries without and with the client's resend (same run, same poses)
            for label, resend in (('no resend', None), ('resend after 50 ms', 0.05)):
                latencies = []
                client.resends = 0
                for pose in poses:
                    t0 = time.perf_counter()
                    client.call(JOINTS, pose, timeout=5.0, resend_period=resend)
                    latencies.append(time.perf_counter() - t0)
                ms = np.array(latencies) * 1e3
                slowest = np.argsort(ms)[::-1][:3]
                report.add('queries', {'client': label, 'queries': args.queries,
                                       'p50_ms': round(float(np.percentile(ms, 50)), 3),
                                       'p99_ms': round(float(np.percentile(ms, 99)), 3),
                                       'p99.9_ms': round(float(np.percentile(ms, 99.9)), 3),
                                       'max_ms': round(float(ms.max()), 3),
                                       'mean_ms': round(float(ms.mean()), 3),
                                       'resends': client.resends,
                                       'slowest_query_indices': slowest.tolist()})
                for pct in PERCENTILES:
                    report.add('latency_percentiles', {
                        'client': label, 'percentile': pct,
                        'ms': round(float(np.percentile(ms, pct)), 4)})

            while states.get_subscription_count() == 0:
                time.sleep(0.01)
            received.clear()
            n = int(args.rate * args.seconds)
            msg = JointState()
            msg.name = JOINTS
            start = time.perf_counter()
            late = 0
            for k in range(n):
                due = start + k / args.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.005:
                    late += 1
                msg.header.stamp.sec = k
                msg.header.stamp.nanosec = k
                msg.position = poses[k % len(poses)].tolist()
                states.publish(msg)
            sent_seconds = time.perf_counter() - start
            deadline = time.monotonic() + 5.0
            while len(received) < n and time.monotonic() < deadline:
                time.sleep(0.05)
            report.add('stream', {'stream_rate_hz': args.rate, 'seconds': args.seconds,
                                  'sent': n, 'send_seconds': round(sent_seconds, 3),
                                  'sent_late_over_5ms': late, 'received': len(received),
                                  'delivered_fraction': round(len(received) / n, 5)})
        finally:
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
            stop(proc)
    report.note('identifier_node runs serve_only in its own process on a model fitted to '
                'synthetic humanoid-arm data; this process calls GravityClient (sequential '
                'blocking calls, EventsExecutor) and then publishes joint_states at '
                'stream_rate_hz, counting the gravity_torques that come back (reliable, depth '
                '1000).')
    plot = report.plot_path('gravity_query_latency.png')
    if plot is not None and ms is not None:
        plot_latencies(ms, plot)
        print(f'plot written to {plot}', file=sys.stderr)
    report.save()


if __name__ == '__main__':
    main()
