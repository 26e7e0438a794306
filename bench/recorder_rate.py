"""Recorder throughput: 6-joint JointState at 1 kHz (and more) across processes.

Starts ``recorder_node`` (recording on) in its own process, publishes
``joint_states`` from this process at ``--rate`` Hz for ``--seconds`` and counts
the ``joint_torques`` that come back converted, the samples in the bag, and the
recorder's CPU share (from ``/proc/<pid>/stat``, % of one core). Prints one JSON
line per rate::

    python bench/recorder_rate.py --seconds 60 --rate 1000 --rate 2000
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'test'))

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
    from arm_dyn_id.recording import load_recording
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
        rec = load_recording(bag)
    return {'rate_hz': rate, 'seconds': seconds, 'published': n,
            'publish_wall_s': round(wall, 3),
            'delivered_fraction': round(received[0] / n, 5),
            'recorded_fraction': round(rec.n_samples / n, 5),
            'cpu_percent': round(100 * cpu / elapsed, 1),
            'drops_counted': rec.quality['recorded']['quality']['drops'],
            'exit_code': code}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=60.0)
    parser.add_argument('--rate', type=float, action='append',
                        help='publish rate (Hz); repeat for several runs (default 1000, 2000)')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='recorder_bench_') as tmp:
        for rate in args.rate or [1000.0, 2000.0]:
            print(json.dumps(run(rate, args.seconds, Path(tmp))), flush=True)


if __name__ == '__main__':
    main()
