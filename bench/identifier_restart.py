"""Identifier restart: time from starting identifier_node on a saved model until its
first correct gravity reply (issue 9: "reloads the last saved model and serves
again within 2 s").

A model is fitted once on synthetic humanoid-arm data (seeded) and saved. Then,
``--restarts`` times, a client in this process (already running, as a real user
of the gravity service would be) starts ``identifier_node`` with
``model_file:=<that file> serve_only:=true`` as a new process and polls
GravityClient every 10 ms until a reply equals the model's own prediction; the
node is stopped (SIGINT) before the next round. Process start includes the
Python interpreter, rclpy, pinocchio and the URDF.

    .venv/bin/python bench/identifier_restart.py [--restarts 10]
"""

import argparse
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
from ros_utils import node_output, ros_environment, start_node, stop  # noqa: E402


def node_ready(proc, wall_start):
    """Seconds from ``wall_start`` to the node's log line that it serves (or None)."""
    for line in node_output(proc).splitlines():
        # [INFO] [1732261234.123456789] [identifier_node]: serving ...
        parts = line.split('] [')
        if len(parts) >= 3 and 'serving' in line:
            try:
                return round(float(parts[1]) - wall_start, 3)
            except ValueError:
                continue
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--restarts', type=int, default=10)
    parser.add_argument('--timeout', type=float, default=30.0, help='give up a round (s)')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('identifier_restart', args,
                             title='Identifier restart until the first gravity reply')

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from arm_dyn_id.nodes.gravity_client import GravityClient, GravityQueryError

    with tempfile.TemporaryDirectory(prefix='restart_bench_') as tmp, \
            ros_environment(Path(tmp) / 'ros') as env:
        model_file = Path(tmp) / 'model.yaml'
        model = synthetic_model(model_file)
        pose = np.array([0.3, 0.8, -0.4, 1.0, 0.2, -0.5])
        expected = model.gravity_torques(pose)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=env.domain_id)
        node = rclpy.create_node('restart_bench', context=context)
        client = GravityClient(node)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spinner = benchlib.Spinner(executor, context, period=0.05)
        times = []
        try:
            for k in range(args.restarts):
                started, wall = time.monotonic(), time.time()
                proc = start_node('arm_dyn_id.nodes.identifier_node',
                                  {'model_file': str(model_file), 'serve_only': True}, env,
                                  name=f'identifier_{k}')
                got, ready_at = None, None
                while got is None:
                    if time.monotonic() - started > args.timeout:
                        raise SystemExit(f'no reply within {args.timeout} s:\n'
                                         + node_output(proc))
                    if not client.server_ready():
                        time.sleep(0.01)
                        continue
                    ready_at = ready_at or time.monotonic()
                    try:
                        got = client.call(JOINTS, pose, timeout=0.2)
                    except GravityQueryError:
                        time.sleep(0.01)
                elapsed = time.monotonic() - started
                if not np.allclose(got, expected, rtol=1e-9, atol=1e-12):
                    raise SystemExit(f'wrong reply {got}, expected {expected}')
                times.append(elapsed)
                code = stop(proc, timeout=20)
                report.add('restarts', {'round': k, 'first_reply_s': round(elapsed, 3),
                                        'discovered_s': round(ready_at - started, 3),
                                        'node_ready_s': node_ready(proc, wall)})
                if code != 0:
                    raise SystemExit(f'exit code {code}:\n' + node_output(proc))
        finally:
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
    t = np.array(times)
    report.add('summary', {'restarts': len(t), 'median_s': round(float(np.median(t)), 3),
                           'p90_s': round(float(np.percentile(t, 90)), 3),
                           'max_s': round(float(t.max()), 3),
                           'within_2_s': int(np.sum(t <= 2.0))})
    report.note('first_reply_s counts from Popen of the new identifier process to the first '
                'reply equal to the saved model\'s prediction; discovered_s is when the '
                'client first saw the service topics; node_ready_s is the time stamp of the '
                'node\'s own log line that it serves the model.')
    report.save()


if __name__ == '__main__':
    main()
