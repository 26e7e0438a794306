"""Full-dynamics service benchmark: gravity and inverse-dynamics query latency across
processes, alone and beside the 1 kHz joint_states stream, and the stream's delivery.

identifier_node serves (``serve_only``) a full-dynamics model of the humanoid arm (the
URDF's link parameters, Coulomb + viscous friction) in its own process, with the
residual stream on and contact thresholds set: for every joint_states message it
publishes gravity_torques, model_torques, external_torques and contact. Then:

1. **alone**: this process makes ``--queries`` sequential blocking calls of each kind
   (GravityClient, DynamicsClient; EventsExecutor) -> p50 / p99 / p99.9 / max;
2. **with the stream**: a second process publishes joint_states at ``--rate`` Hz for
   ``--seconds`` s (currents of the model's torque on a slow sinusoid) and counts the
   gravity_torques, model_torques, external_torques and contact messages that come back
   (a reader on each: every stream the node writes is matched), while this process keeps
   making the same queries in turn -> the same latency table, and the stream's delivered
   fraction; the node's own diagnostics say how many inputs it served and skipped.

Seeded (poses from ``np.random.default_rng(1)``). Tables in
docs/results/dynamics_query.md / .json (``--no-save``: neither).

    .venv/bin/python bench/dynamics_query.py [--queries 1000] [--seconds 10] [--live]

``--live``: the node also tracks the friction and watches the payload on every input
(``friction_tracking``, ``payload_watch``), as a live model serves.
"""

import argparse
import json
import os
import subprocess
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

from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.model.dynamics import (  # noqa: E402
    DynamicsModel, FrictionModel, nominal_standard_parameters, rigid_base_parameters)
from arm_dyn_id.model.robot import RobotModel  # noqa: E402

PERCENTILES = (50, 90, 99, 99.9, 100)


def full_model(path):
    config = load_arm_config('humanoid_arm.yaml', node_name='sim_arm_node')
    robot = RobotModel.from_config(config)
    base = rigid_base_parameters(robot)
    extra = config.extra
    phi = np.column_stack([extra['friction_coulomb'], extra['friction_viscous']]).ravel()
    model = DynamicsModel(robot, base, base.beta(nominal_standard_parameters(robot)),
                          FrictionModel(coulomb='tanh', smooth_velocity=0.002), phi)
    model.save(path)
    return config, model


def stream_child(domain_id, rate, seconds, model_file, config_file):
    """The 1 kHz publisher (own process): prints one JSON line of counts."""
    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from arm_dyn_id.model import load_model
    model = load_model(model_file)
    config = load_arm_config(config_file)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(domain_id))
    node = rclpy.create_node('stream_bench', context=context)
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    from std_msgs.msg import Bool
    # every stream of the node, each with a reader (each costs the node's writes)
    topics = {'gravity_torques': JointState, 'model_torques': JointState,
              'external_torques': JointState, 'contact': Bool}
    counts = dict.fromkeys(topics, 0)

    def counter(topic):
        def on(_msg):
            counts[topic] += 1
        return on
    for topic, kind in topics.items():  # raw: counted without deserialising (harness CPU)
        node.create_subscription(kind, topic, counter(topic), qos, raw=True)
    states = node.create_publisher(JointState, 'joint_states', qos)
    executor = EventsExecutor(context=context)
    executor.add_node(node)
    spinner = benchlib.Spinner(executor, context)
    deadline = time.monotonic() + 30.0
    while states.get_subscription_count() == 0 or node.count_publishers('external_torques') \
            == 0:
        if time.monotonic() > deadline:
            raise SystemExit('no identifier_node subscribed to joint_states')
        time.sleep(0.01)
    n = int(rate * seconds)
    t = np.arange(n) / rate
    q = 0.5 + 0.3 * np.sin(2 * np.pi * 0.25 * t)[:, None] * np.ones(6)
    dq = 0.3 * 2 * np.pi * 0.25 * np.cos(2 * np.pi * 0.25 * t)[:, None] * np.ones(6)
    ddq = -0.3 * (2 * np.pi * 0.25) ** 2 * np.sin(2 * np.pi * 0.25 * t)[:, None] * np.ones(6)
    current = model.torques(q, dq, ddq) / config.joint_torque_gains
    msg = JointState()
    msg.name = list(config.joints)
    print('publishing', flush=True)
    start = time.perf_counter()
    late = 0
    for k in range(n):
        due = start + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        elif delay < -0.005:
            late += 1
        ns = 10 ** 9 + int(round(t[k] * 1e9))
        msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10 ** 9, ns % 10 ** 9
        msg.position = q[k].tolist()
        msg.velocity = dq[k].tolist()
        msg.effort = current[k].tolist()
        states.publish(msg)
    sent_seconds = time.perf_counter() - start
    deadline = time.monotonic() + 10.0
    while min(counts.values()) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    spinner.stop()
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    print(json.dumps({'sent': n, 'send_seconds': round(sent_seconds, 3),
                      'sent_late_over_5ms': late, **counts}), flush=True)


def cpu_seconds(pid):
    """User + system CPU time (s) of a process so far, from /proc (None elsewhere)."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def in_process(report, config, model, calls=5000):
    """What one answer costs inside the node (no DDS): µs per call, median of 5 rounds."""
    from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics
    from arm_dyn_id.service.gravity import ServedModel
    names = list(config.joints)
    served = ServedDynamics(model)
    gravity = ServedModel(model, fast=served.fast)
    stream = ResidualStream(served, 25.0, [1.0] * 6, torque_gains=config.joint_torque_gains)
    rng = np.random.default_rng(2)
    q, dq, ddq, cur = (rng.uniform(-1, 1, (calls, 6)).tolist() for _ in range(4))
    jobs = {
        'gravity query (ServedModel.query)': lambda k: gravity.query(names, q[k]),
        'inverse-dynamics query (ServedDynamics.query)':
            lambda k: served.query(names, q[k], dq[k], ddq[k]),
        'residual of one joint_states (ResidualStream.update)':
            lambda k: stream.update(names, k * 1e-3, q[k], dq[k], cur[k]),
    }
    for what, job in jobs.items():
        rounds = []
        for _ in range(5):
            t0 = time.perf_counter()
            for k in range(calls):
                job(k)
            rounds.append((time.perf_counter() - t0) / calls * 1e6)
        median = round(float(np.median(rounds)), 2)
        report.add('in_process', {'call': what, 'us_per_call': median})


def latency_rows(report, label, samples):
    for kind, values in samples.items():
        ms = np.array(values) * 1e3
        if not len(ms):
            continue
        row = {'condition': label, 'query': kind, 'queries': len(ms)}
        row.update({f'p{p:g}_ms': round(float(np.percentile(ms, p)), 3) for p in PERCENTILES})
        row['mean_ms'] = round(float(ms.mean()), 3)
        report.add('queries', row)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--queries', type=int, default=1000,
                        help='sequential queries of each kind, alone')
    parser.add_argument('--rate', type=float, default=1000.0)
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--live', action='store_true',
                        help='serve with friction_tracking and payload_watch on (the live '
                        'model: every input also updates the friction and the load watch)')
    parser.add_argument('--stream-child', nargs=5, metavar=('DOMAIN', 'RATE', 'SECONDS',
                                                            'MODEL', 'CONFIG'),
                        help=argparse.SUPPRESS)
    benchlib.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.stream_child:
        domain, rate, seconds, model_file, config_file = args.stream_child
        stream_child(domain, float(rate), float(seconds), model_file, config_file)
        return
    report = benchlib.Report('dynamics_query', args, title='Full-dynamics service: gravity '
                             'and inverse-dynamics query latency, alone and beside the 1 kHz '
                             'stream')

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.experimental import EventsExecutor

    from arm_dyn_id.nodes.gravity_client import DynamicsClient, GravityClient

    with tempfile.TemporaryDirectory(prefix='dynamics_bench_') as tmp, \
            ros_environment(Path(tmp) / 'ros') as env:
        model_file = Path(tmp) / 'model.yaml'
        config, model = full_model(model_file)
        in_process(report, config, model)
        proc = start_node('arm_dyn_id.nodes.identifier_node',
                          {'model_file': str(model_file), 'serve_only': True,
                           'config_file': str(config.source),
                           'contact_thresholds': [1.0, 1.0, 0.3, 0.3, 0.05, 0.05],
                           'friction_tracking': args.live, 'payload_watch': args.live},
                          env, name='identifier')
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=env.domain_id)
        node = rclpy.create_node('dynamics_bench', context=context)
        gravity, ids = GravityClient(node), DynamicsClient(node)
        diags = []
        node.create_subscription(DiagnosticArray, 'diagnostics', lambda m: diags.extend(
            {kv.key: kv.value for kv in s.values} for s in m.status
            if s.name.startswith('identifier_node')), 10)
        executor = EventsExecutor(context=context)
        executor.add_node(node)
        spinner = benchlib.Spinner(executor, context)
        child = None
        try:
            if not (gravity.wait_for_server(30.0) and ids.wait_for_server(30.0)):
                raise SystemExit('identifier_node did not come up:\n' + node_output(proc))
            rng = np.random.default_rng(1)
            poses = rng.uniform(-1.5, 1.5, size=(max(args.queries, 1), 3, 6))
            names = list(config.joints)
            deadline = time.monotonic() + 30.0
            while True:         # the model loads after the node is discovered
                try:
                    ids.call(names, *poses[0], timeout=0.5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise

            def one(kind, k):
                q, dq, ddq = poses[k % len(poses)]
                t0 = time.perf_counter()
                if kind == 'gravity':
                    gravity.call(names, q, timeout=5.0)
                else:
                    ids.call(names, q, dq, ddq, timeout=5.0)
                return time.perf_counter() - t0

            alone = {'gravity': [], 'inverse_dynamics': []}
            for kind in alone:
                alone[kind] = [one(kind, k) for k in range(args.queries)]
            latency_rows(report, 'alone', alone)

            served_before = int(diags[-1]['residual_served']) if diags else 0
            cpu_before, wall_before = cpu_seconds(proc.pid), time.monotonic()
            child = subprocess.Popen(
                [sys.executable, __file__, '--stream-child', str(env.domain_id),
                 str(args.rate), str(args.seconds), str(model_file), str(config.source)],
                env=env, stdout=subprocess.PIPE, text=True)
            ready = child.stdout.readline()
            if 'publishing' not in ready:
                raise SystemExit(f'stream process failed: {ready}')
            beside = {'gravity': [], 'inverse_dynamics': []}
            k = 0
            while child.poll() is None and k < 100 * args.queries:
                kind = 'gravity' if k % 2 == 0 else 'inverse_dynamics'
                beside[kind].append(one(kind, k))
                k += 1
            out = child.stdout.read().strip().splitlines()
            child.wait(30)
            cpu_after, wall_after = cpu_seconds(proc.pid), time.monotonic()
            latency_rows(report, f'beside the {args.rate:g} Hz stream', beside)
            counts = json.loads(out[-1])
            seen = len(diags)   # the node's counters: a diagnostics message from after the end
            deadline = time.monotonic() + 10.0
            while len(diags) < seen + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            served = int(diags[-1]['residual_served']) - served_before if diags else None
            n = counts['sent']
            report.add('stream', {
                'stream_rate_hz': args.rate, 'seconds': args.seconds, 'sent': n,
                'send_seconds': counts['send_seconds'],
                'sent_late_over_5ms': counts['sent_late_over_5ms'],
                'node_residuals_computed': served,
                'node_stream_skipped': diags[-1]['stream_skipped'] if diags else None,
                'friction_tracking': diags[-1].get('friction_tracking') if diags else None,
                'friction_version': diags[-1].get('friction_version') if diags else None,
                'payload_watch': diags[-1].get('payload_watch') if diags else None,
                'gravity_torques_received': counts['gravity_torques'],
                'model_torques_received': counts['model_torques'],
                'external_torques_received': counts['external_torques'],
                'contact_received': counts['contact'],
                'delivered_fraction': round(min(counts['gravity_torques'],
                                                counts['model_torques'],
                                                counts['external_torques'],
                                                counts['contact']) / n, 5),
                'node_cpu_cores': None if cpu_before is None else
                round((cpu_after - cpu_before) / (wall_after - wall_before), 3),
                'load_average_1min': round(os.getloadavg()[0], 2)})
        finally:
            if child is not None and child.poll() is None:
                child.kill()
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
            stop(proc)
    report.note('identifier_node serves a full-dynamics humanoid-arm model (serve_only) in '
                'its own process with the residual on and contact thresholds set, so every '
                'joint_states message costs it four publishes (gravity_torques, model_torques, '
                'external_torques, contact); this process calls GravityClient and '
                'DynamicsClient (sequential blocking calls, EventsExecutor, 50 ms resend); the '
                'stream comes from a third process that also counts the four streams '
                '(reliable, depth 1000; since 2026-11-29, before: gravity_torques and '
                'external_torques only).')
    report.save()


if __name__ == '__main__':
    main()
