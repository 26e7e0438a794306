"""Recorder throughput: 6-joint JointState at 1 kHz (and more) across processes.

Starts ``recorder_node`` (recording on) in its own process, publishes
``joint_states`` from this process at ``--rate`` Hz for ``--seconds`` and counts
the ``joint_torques`` that come back converted, the samples in the bag, and the
recorder's CPU share (from ``/proc/<pid>/stat``, % of one core). Default rates
250, 500, 1000, 2000 and 3000 Hz.

Seeded, trivially: nothing is random; every run publishes the same deterministic
messages (positions and efforts ramping with the sample index, stamps on the
nominal grid).

Prints one JSON line per rate; the table goes to docs/results/recorder_rate.md /
.json and the plot of delivered and recorded fraction and recorder CPU against the
publish rate to docs/recorder_throughput.png (``--no-save`` writes neither)::

    python bench/recorder_rate.py [--seconds 60] [--rate 1000 --rate 2000]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'test'))

import benchlib  # noqa: E402
from ros_utils import RosHarness, node_output, ros_environment, start_node, stop  # noqa: E402

JOINTS = [f'joint_{i}' for i in range(1, 7)]


def cpu_seconds(pid):
    """utime + stime of a process (s)."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def write_config(folder):
    urdf = REPO / 'urdf' / 'humanoid_arm.urdf'
    if not urdf.is_file():
        urdf = folder / 'arm.urdf'
        urdf.write_text('<robot name="arm"/>\n')
    path = folder / 'arm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'robot_name': 'bench_arm', 'urdf': str(urdf), 'joints': JOINTS,
        'torque_constants': [0.5, 0.5, 0.3, 0.2, 0.1, 0.05],
        'position_limits_lower': [-3.0] * 6, 'position_limits_upper': [3.0] * 6,
        'velocity_limits': [1.0] * 6, 'acceleration_limits': [1.0] * 6}}}))
    return path


def run(rate, seconds, folder):
    from arm_dyn_id.data.bag_reader import read_bag
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    out = folder / f'bags_{int(rate)}'
    with ros_environment(folder / f'ros_{int(rate)}') as env:
        proc = start_node('arm_dyn_id.nodes.recorder_node',
                          {'config_file': str(write_config(folder)), 'output_dir': str(out),
                           'record_on_start': True, 'expected_rate': float(rate)},
                          env, name='recorder')
        received = [0]

        def on_torque(msg):
            received[0] += 1

        with RosHarness(env.domain_id, name='bench') as ros:
            pub = ros.node.create_publisher(JointState, 'joint_states', qos)
            ros.node.create_subscription(JointState, 'joint_torques', on_torque, qos)
            ros.wait_for_subscribers(pub, timeout=60)
            ros.wait_for(lambda: ros.node.count_publishers('joint_torques') > 0, 60)
            ros.wait_for(lambda: list(out.glob('*/*.mcap')), 60)
            time.sleep(1.0)
            msg = JointState()
            msg.name = JOINTS
            msg.velocity = [0.0] * 6
            n = int(rate * seconds)
            cpu0, t0 = cpu_seconds(proc.pid), time.time()
            for k in range(n):
                due = t0 + k / rate
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                # stamps on the nominal grid, as a driver's clock would give them
                msg.header.stamp.sec = int(due)
                msg.header.stamp.nanosec = int((due - int(due)) * 1e9)
                msg.position = [0.001 * k] * 6
                msg.effort = [1.0 + 1e-4 * k] * 6
                pub.publish(msg)
            wall = time.time() - t0
            try:
                ros.wait_for(lambda: received[0] >= n, 10)
            except TimeoutError:
                pass
            cpu = cpu_seconds(proc.pid) - cpu0
            elapsed = time.time() - t0
        code = stop(proc, timeout=60)
        if code != 0:
            print(node_output(proc), file=sys.stderr)
        bag = sorted(out.iterdir())[0]
        rec = read_bag(bag)
    return {'rate_hz': rate, 'seconds': seconds, 'published': n,
            'publish_wall_s': round(wall, 3),
            'delivered_fraction': round(received[0] / n, 5),
            'recorded_fraction': round(rec.n_samples / n, 5),
            'cpu_percent': round(100 * cpu / elapsed, 1),
            'drops_counted': rec.quality['recorded']['quality']['drops'],
            'exit_code': code}


def plot_throughput(rows, seconds, path):
    """Delivered / recorded fraction and recorder CPU against the publish rate."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    rows = sorted(rows, key=lambda r: r['rate_hz'])
    rates = [r['rate_hz'] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(rates, [100 * r['delivered_fraction'] for r in rows], 'o-',
            label='delivered (joint_torques received back)')
    ax.plot(rates, [100 * r['recorded_fraction'] for r in rows], 's--',
            label='recorded (samples in the bag)')
    ax.set_xlabel('joint_states publish rate (Hz)')
    ax.set_ylabel('messages delivered / recorded (% of published)')
    low = min([100 * r[k] for r in rows for k in ('delivered_fraction', 'recorded_fraction')])
    ax.set_ylim(min(90.0, low - 2.0), 101.0)
    cpu = ax.twinx()
    cpu.plot(rates, [r['cpu_percent'] for r in rows], '^:', color='tab:red',
             label='recorder CPU')
    cpu.set_ylabel('recorder CPU (% of one core)', color='tab:red')
    cpu.set_ylim(0, max(100.0, 1.1 * max(r['cpu_percent'] for r in rows)))
    ax.set_xticks(rates)
    ax.grid(True, alpha=0.3)
    lines = ax.get_legend_handles_labels()
    more = cpu.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc='lower left')
    ax.set_title(f'Recorder throughput, 6-joint JointState for {seconds:g} s per rate '
                 f'({os.cpu_count()} cores)')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=60.0)
    parser.add_argument('--rate', type=float, action='append',
                        help='publish rate (Hz); repeat for several runs (default 250, 500, 1000, '
                             '2000, 3000)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('recorder_rate', args,
                             title='Recorder throughput: 6-joint JointState across processes')
    rows = []
    with tempfile.TemporaryDirectory(prefix='recorder_bench_') as tmp:
        for rate in args.rate or [250.0, 500.0, 1000.0, 2000.0, 3000.0]:
            rows.append(report.add('throughput', run(rate, args.seconds, Path(tmp))))
    report.note('delivered_fraction: joint_torques received back by the publishing process / '
                'published; recorded_fraction: samples in the bag (read_bag) / published; '
                'cpu_percent: the recorder\'s utime + stime over the run, % of one core; '
                'drops_counted: the recorder\'s own stamp-inferred drop count. Reliable QoS, '
                'depth 1000.')
    plot = report.plot_path('recorder_throughput.png')
    if plot is not None:
        plot_throughput(rows, args.seconds, plot)
        print(f'plot written to {plot}', file=sys.stderr)
    report.save()


if __name__ == '__main__':
    main()
