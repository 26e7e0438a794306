"""Gravity service benchmark (issue 6): query latency and stream delivery across processes.

Fits a model on synthetic reciprocating data of the humanoid arm, saves it to a
temporary file, starts identifier_node (serve_only) in its own process, then from
this process:

1. 1000 sequential blocking queries through GravityClient -> one JSON line
   ``{"queries", "p50_ms", "p99_ms", ...}``;
2. joint_states published at 1 kHz for 10 s, gravity_torques counted -> one JSON
   line ``{"stream_rate_hz", "seconds", "delivered_fraction", ...}``.

    .venv/bin/python bench/gravity_query.py [--queries 1000] [--seconds 10]
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'test'))

from ros_utils import node_output, ros_environment, start_node, stop  # noqa: E402

from arm_dyn_id.identification import identify_gravity  # noqa: E402
from arm_dyn_id.model import RobotModel  # noqa: E402

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--queries', type=int, default=1000)
    parser.add_argument('--rate', type=float, default=1000.0)
    parser.add_argument('--seconds', type=float, default=10.0)
    args = parser.parse_args(argv)

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
        spinning = True

        def spin():
            while spinning and context.ok():
                executor.spin_once(timeout_sec=0.1)
        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
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
            latencies = []
            for pose in poses:
                t0 = time.perf_counter()
                client.call(JOINTS, pose, timeout=2.0)
                latencies.append(time.perf_counter() - t0)
            ms = np.array(latencies) * 1e3
            print(json.dumps({'queries': args.queries,
                              'p50_ms': round(float(np.percentile(ms, 50)), 3),
                              'p99_ms': round(float(np.percentile(ms, 99)), 3),
                              'max_ms': round(float(ms.max()), 3)}), flush=True)

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
            print(json.dumps({'stream_rate_hz': args.rate, 'seconds': args.seconds,
                              'sent': n, 'send_seconds': round(sent_seconds, 3),
                              'sent_late_over_5ms': late, 'received': len(received),
                              'delivered_fraction': round(len(received) / n, 5)}), flush=True)
        finally:
            spinning = False
            thread.join(2.0)
            node.destroy_node()
            rclpy.try_shutdown(context=context)
            stop(proc)


if __name__ == '__main__':
    main()
