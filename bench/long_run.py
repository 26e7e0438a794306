"""Long run at 1 kHz through the recorder and the gravity stream (issue 9).

Starts recorder_node (recording on) and identifier_node (serving a model fitted on
synthetic humanoid-arm data, gravity stream on ``joint_states``) in their own
processes. This process publishes 6-joint ``joint_states`` with currents at
``--rate`` Hz for ``--minutes`` and counts what comes back on ``joint_torques``
(recorder) and ``gravity_torques`` (identifier). Every ``--window`` seconds it
records, per node, resident memory (VmRSS), CPU share (% of one core, from
/proc/<pid>/stat) and the delivered fraction of the window; at the end it closes
the bag and reads it back (recorded fraction, drops and gaps counted by the
recorder). The 1 s send pattern is deterministic (seeded poses).

Reported: delivered and recorded fractions, memory growth (MiB per hour, a linear
fit after the first two windows, and first -> last), CPU per node, and a plot
docs/long_run.png.

    .venv/bin/python bench/long_run.py [--minutes 30] [--rate 1000]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / 'test'))

import benchlib  # noqa: E402
from gravity_query import JOINTS, synthetic_model  # noqa: E402
from recorder_rate import cpu_seconds, write_config  # noqa: E402
from ros_utils import node_output, ros_environment, start_node, stop  # noqa: E402


def rss_mib(pid):
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024.0
    return float('nan')


def slope_per_hour(t, y):
    """Least-squares slope of y against t (s), per hour."""
    if len(t) < 2:
        return float('nan')
    return float(np.polyfit(np.asarray(t), np.asarray(y), 1)[0] * 3600.0)


def plot(windows, summary, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    t = np.array([w['t_min'] for w in windows])
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True)
    for node, style in (('recorder', '-'), ('identifier', '--')):
        ax1.plot(t, [w[f'{node}_rss_mib'] for w in windows], style, label=f'{node}_node')
    ax1.set_ylabel('resident memory (MiB)')
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    for key, label in (('torques_delivered', 'joint_torques (recorder)'),
                       ('gravity_delivered', 'gravity_torques (identifier)')):
        ax2.plot(t, [100 * w[key] for w in windows], label=label)
    ax2.set_ylabel('delivered in window (%)')
    ax2.set_xlabel('time (min)')
    ax2.legend(fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(f'{summary["minutes"]:.0f} min at {summary["rate_hz"]:.0f} Hz, '
                 f'{os.cpu_count()} cores: recorder {summary["recorder_cpu_percent"]} % CPU, '
                 f'identifier {summary["identifier_cpu_percent"]} %', fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, default=30.0)
    parser.add_argument('--rate', type=float, default=1000.0)
    parser.add_argument('--window', type=float, default=60.0, help='sampling window (s)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('long_run', args, title=f'Long run: {args.minutes:g} min at '
                                                     f'{args.rate:g} Hz (issue 9)')

    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from arm_dyn_id.data.bag_reader import read_bag

    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    with tempfile.TemporaryDirectory(prefix='long_run_') as tmp, \
            ros_environment(Path(tmp) / 'ros') as env:
        tmp = Path(tmp)
        model_file = tmp / 'model.yaml'
        synthetic_model(model_file)
        out = tmp / 'bags'
        procs = {
            'recorder': start_node('arm_dyn_id.nodes.recorder_node',
                                   {'config_file': str(write_config(tmp)),
                                    'output_dir': str(out), 'record_on_start': True,
                                    'expected_rate': float(args.rate)}, env, name='recorder'),
            'identifier': start_node('arm_dyn_id.nodes.identifier_node',
                                     {'model_file': str(model_file), 'serve_only': True},
                                     env, name='identifier')}
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=env.domain_id)
        node = rclpy.create_node('long_run_bench', context=context)
        counts = {'torques': 0, 'gravity': 0}

        def counter(key):
            def on_msg(_msg):
                counts[key] += 1
            return on_msg
        node.create_subscription(JointState, 'joint_torques', counter('torques'), qos)
        node.create_subscription(JointState, 'gravity_torques', counter('gravity'), qos)
        pub = node.create_publisher(JointState, 'joint_states', qos)
        executor = EventsExecutor(context=context)
        executor.add_node(node)
        spinner = benchlib.Spinner(executor, context)
        windows = []
        try:
            deadline = time.monotonic() + 60.0
            while (pub.get_subscription_count() < 2
                   or node.count_publishers('joint_torques') == 0
                   or node.count_publishers('gravity_torques') == 0
                   or not list(out.glob('*/*.mcap'))):
                if time.monotonic() > deadline:
                    raise SystemExit('nodes did not come up:\n' + '\n'.join(
                        node_output(p) for p in procs.values()))
                time.sleep(0.1)
            # the identifier answers the stream only once its model is loaded
            time.sleep(3.0)
            rng = np.random.default_rng(0)
            poses = rng.uniform(-1.5, 1.5, size=(int(args.rate), 6))
            currents = rng.uniform(-2.0, 2.0, size=(int(args.rate), 6))
            msg = JointState()
            msg.name = JOINTS
            msg.velocity = [0.0] * 6
            n = int(round(args.minutes * 60.0 * args.rate))
            per_window = int(round(args.window * args.rate))
            cpu0 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
            rss0 = {k: rss_mib(p.pid) for k, p in procs.items()}
            start = time.monotonic()
            wall0 = time.time()
            mark = {'k': 0, 't': start, 'cpu': dict(cpu0), **{k: 0 for k in counts}}
            late = 0
            print(f'publishing {n} samples at {args.rate:g} Hz for {args.minutes:g} min ...',
                  file=sys.stderr, flush=True)
            for k in range(n):
                due = start + k / args.rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -0.005:
                    late += 1
                stamp = wall0 + k / args.rate
                msg.header.stamp.sec = int(stamp)
                msg.header.stamp.nanosec = int((stamp - int(stamp)) * 1e9)
                msg.position = poses[k % len(poses)].tolist()
                msg.effort = currents[k % len(currents)].tolist()
                pub.publish(msg)
                if (k + 1) % per_window == 0:
                    now = time.monotonic()
                    sent = k + 1 - mark['k']
                    row = {'t_min': round((now - start) / 60.0, 2)}
                    for key, p in procs.items():
                        cpu = cpu_seconds(p.pid)
                        row[f'{key}_rss_mib'] = round(rss_mib(p.pid), 1)
                        row[f'{key}_cpu_percent'] = round(
                            100 * (cpu - mark['cpu'][key]) / (now - mark['t']), 1)
                        mark['cpu'][key] = cpu
                    # counts lag the sends by the pipeline's latency (ms): fine per minute
                    row['torques_delivered'] = round((counts['torques'] - mark['torques'])
                                                     / sent, 5)
                    row['gravity_delivered'] = round((counts['gravity'] - mark['gravity'])
                                                     / sent, 5)
                    row['sent_late_over_5ms'] = late
                    row['bag_mib'] = round(sum(f.stat().st_size for f in out.rglob('*.mcap'))
                                           / 2 ** 20, 1)
                    windows.append(report.add('windows', row))
                    mark.update(k=k + 1, t=now, torques=counts['torques'],
                                gravity=counts['gravity'])
            send_s = time.monotonic() - start
            wait_until = time.monotonic() + 10.0
            while min(counts.values()) < n and time.monotonic() < wait_until:
                time.sleep(0.05)
            elapsed = time.monotonic() - start
            cpu = {k: cpu_seconds(p.pid) - cpu0[k] for k, p in procs.items()}
            rss_end = {k: rss_mib(p.pid) for k, p in procs.items()}
            received = dict(counts)
        finally:
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
            codes = {k: stop(p, timeout=120) for k, p in procs.items()}
        t0 = time.monotonic()
        rec = read_bag(sorted(p for p in out.iterdir() if p.is_dir())[0])
        load_s = time.monotonic() - t0
        quality = rec.quality['recorded']['quality']
        later = [w for w in windows[2:]] or windows
        t_s = [w['t_min'] * 60.0 for w in later]
        summary = {
            'minutes': args.minutes, 'rate_hz': args.rate, 'published': n,
            'send_seconds': round(send_s, 1), 'sent_late_over_5ms': late,
            'torques_delivered': round(received['torques'] / n, 6),
            'gravity_delivered': round(received['gravity'] / n, 6),
            'recorded_fraction': round(rec.n_samples / n, 6),
            'recorder_drops': quality['drops'], 'recorder_gaps': quality['gaps'],
            'bag_mib': round(sum(f.stat().st_size for f in out.rglob('*.mcap')) / 2 ** 20, 1),
            'bag_load_s': round(load_s, 1),
            'exit_codes': codes,
        }
        for key in procs:
            summary[f'{key}_cpu_percent'] = round(100 * cpu[key] / elapsed, 1)
            summary[f'{key}_rss_start_mib'] = round(rss0[key], 1)
            summary[f'{key}_rss_end_mib'] = round(rss_end[key], 1)
            summary[f'{key}_rss_growth_mib_per_hour'] = round(
                slope_per_hour(t_s, [w[f'{key}_rss_mib'] for w in later]), 1)
        report.add('summary', summary)
    report.note('Memory growth per hour is the slope of a straight line through the '
                'per-window VmRSS readings after the first two windows.')
    report.note('Every process (publisher, recorder, identifier) shares the same 2 cores; '
                'the publisher is this benchmark, in Python, paced by sleep().')
    path = report.plot_path('long_run.png')
    if path is not None and windows:
        plot(windows, summary, path)
    report.save()


if __name__ == '__main__':
    main()
