"""Excitation stop latency on the simulated arm: from the ``~/stop`` call to the first
braking command, and to standstill.

``sim_arm_node`` (MuJoCo, wall time, real time) and ``excitation_node`` run as separate
processes with the humanoid arm config; the plan sweeps joint 6 back and forth at
``--speed`` rad/s. Each round: ``~/start``, wait for a sweep marker and a seeded random
delay inside the sweep, call ``~/stop`` from this process and watch:

- ``decided_ms``: when the node handled the call (the ``t`` of its ``stopped`` marker);
- ``braking_from_ms``: when the commanded reference starts braking (the ``braking_from``
  time of the node's ``stopped`` marker; trajectory output: the stamp of the braking
  window) after the call was made;
- ``first_braking_msg_ms``: when the first braking message reached this process after
  the call (trajectory: the window stamped ``braking_from``; commands: the first
  command received after the node decided);
- ``commanded_rest_ms``: when the commanded reference is at rest (``rest_time``);
- ``standstill_ms``: when the simulated arm's measured joint velocities (joint_states)
  first stay below ``--still`` rad/s on every joint for 50 ms;
- watchdog rounds: this process plays the arm and stops publishing ``joint_states``;
  ``decided_after_timeout_ms`` / ``braking_from_after_timeout_ms`` count from the last
  message plus ``joint_state_timeout`` (0.2 s) to the node's decision / the start of
  braking (the steady-clock watchdog runs every 20 ms);
- ``service_rtt_ms``: the round trip of the ``~/stop`` call itself (the baseline of the
  same run: a loaded machine slows everything, look at the ratios).

All times are on the system clock shared by the processes (no sim time).

    .venv/bin/python bench/excitation_stop.py [--rounds 5] [--speed 0.5]
"""

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / 'test'))

import benchlib  # noqa: E402
from ros_utils import node_output, ros_environment, start_node, stop  # noqa: E402


def make_plan(folder, speed):
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.excitation.plans import reciprocating_plan
    from arm_dyn_id.paths import resolve_data_file
    cfg = load_arm_config(resolve_data_file('humanoid_arm.yaml', 'config'))
    pose = np.array([0.3, 0.3, 0.0, 0.5, 0.0, 0.0])
    plan = reciprocating_plan(None, cfg, poses=[(5, pose)], speed=speed, sweep_range=1.6,
                              settle_time=0.3, ramp_acceleration=2.0, cycles=3, name='stop')
    path = Path(folder) / 'plan.yaml'
    plan.to_yaml(path)
    return path, plan, cfg


def watchdog_rows(args, rng, report, node, plan, plan_path, env, seen, lock, call, wait):
    """The watchdog: this process plays the arm (joint_states at 200 Hz, standing at the
    plan start; the tracking check is off) and falls silent mid-run. Latency counted from
    the instant the last joint_states was sent plus ``joint_state_timeout``."""
    from sensor_msgs.msg import JointState
    timeout = 0.2
    pub = node.create_publisher(JointState, 'joint_states', 10)
    q = plan.start_position.tolist()
    state = {'on': True, 'last': None, 'quit': False}

    def publish():
        while not state['quit']:
            if state['on']:
                pub.publish(JointState(name=list(plan.joints), position=q))
                state['last'] = time.time()
            time.sleep(0.005)   # paces joint_states at 200 Hz
    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    exc = start_node('arm_dyn_id.nodes.excitation_node',
                     {'config_file': 'humanoid_arm.yaml', 'plan_file': str(plan_path),
                      'output': 'trajectory', 'joint_state_timeout': timeout,
                      'tracking_error_threshold': 10.0}, env, name='excitation_watchdog')
    rows = []
    try:
        for k in range(args.rounds):
            with lock:
                n_markers = len(seen['markers'])
            state['on'] = True
            deadline = time.monotonic() + 60.0
            while not call('/excitation_node/start').success:
                if time.monotonic() > deadline or exc.poll() is not None:
                    raise SystemExit('watchdog: ~/start refused\n' + node_output(exc))
                time.sleep(0.1)     # retry while the node has not heard the arm
            time.sleep(float(rng.uniform(0.5, 1.5)))     # inside the approach
            state['on'] = False
            time.sleep(0.01)        # a publish under way lands before 'last' is read
            t_cut = state['last'] + timeout
            wait(lambda: any(m['phase'] == 'stopped' for m in seen['markers'][n_markers:]),
                 10, 'the watchdog')
            stopped = [m for m in seen['markers'][n_markers:] if m['phase'] == 'stopped'][0]
            row = {'round': k, 'decided_after_timeout_ms': round(1e3 * (stopped['t'] - t_cut), 1),
                   'braking_from_after_timeout_ms':
                       round(1e3 * (stopped.get('braking_from', stopped['t']) - t_cut), 1),
                   'reason': stopped['reason'][:40]}
            rows.append(row)
            report.add('watchdog', row)
            wait(lambda: time.time() > stopped.get('rest_time', 0) + 0.3, 30, 'rest')
    finally:
        state['quit'] = True
        thread.join(2.0)
        code = stop(exc, timeout=20)
    if code != 0:
        raise SystemExit(f'excitation_node exit code {code}\n' + node_output(exc))
    for key in ('decided_after_timeout_ms', 'braking_from_after_timeout_ms'):
        values = np.array([r[key] for r in rows], float)
        report.add('summary', {'output': 'trajectory (watchdog)', 'quantity': key,
                               'median_ms': round(float(np.median(values)), 1),
                               'max_ms': round(float(values.max()), 1)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=5, help='stops per output')
    parser.add_argument('--speed', type=float, default=0.5, help='sweep speed (rad/s)')
    parser.add_argument('--still', type=float, default=0.01,
                        help='standstill: every measured |velocity| below this (rad/s)')
    parser.add_argument('--seed', type=int, default=0)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('excitation_stop', args,
                             title='Excitation stop latency on the simulated arm')

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, String
    from std_srvs.srv import Trigger
    from trajectory_msgs.msg import JointTrajectory

    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix='stop_bench_') as tmp, \
            ros_environment(Path(tmp) / 'ros') as env:
        plan_path, plan, cfg = make_plan(tmp, args.speed)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=env.domain_id)
        node = rclpy.create_node('stop_bench', context=context)
        lock = threading.Lock()
        seen = {'markers': [], 'msgs': [], 'states': []}

        def on_marker(msg):
            with lock:
                seen['markers'].append(json.loads(msg.data))

        def on_msg(msg):
            with lock:
                seen['msgs'].append((time.time(), msg))

        def on_state(msg):
            with lock:
                seen['states'].append((time.time(), np.array(msg.velocity)))

        marker_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(String, 'excitation_segments', on_marker, marker_qos)
        node.create_subscription(JointTrajectory, 'arm_controller/joint_trajectory', on_msg,
                                 100)
        node.create_subscription(Float64MultiArray, 'arm_controller/commands', on_msg, 100)
        node.create_subscription(JointState, 'joint_states', on_state, 100)
        clients = {}
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        spinner = benchlib.Spinner(executor, context, period=0.02)

        def call(service, timeout=20.0):
            client = clients.setdefault(service, node.create_client(Trigger, service))
            if not client.wait_for_service(timeout_sec=timeout):
                raise SystemExit(f'{service} not available')
            future = client.call_async(Trigger.Request())
            deadline = time.monotonic() + timeout
            while not future.done():
                if time.monotonic() > deadline:
                    raise SystemExit(f'{service} did not answer')
                time.sleep(0.001)
            return future.result()

        def wait(predicate, timeout, what):
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    raise SystemExit(f'timed out waiting for {what}')
                time.sleep(0.002)

        summary = []
        try:
            sim = start_node('arm_dyn_id.nodes.sim_arm_node',
                             {'config_file': 'humanoid_arm.yaml', 'publish_rate': 500.0},
                             env, name='sim')
            for output in ('trajectory', 'commands'):
                exc = start_node('arm_dyn_id.nodes.excitation_node',
                                 {'config_file': 'humanoid_arm.yaml', 'plan_file': str(plan_path),
                                  'output': output, 'approach_speed': 1.0,
                                  'approach_acceleration': 2.0, 'tracking_error_threshold': 0.3,
                                  'joint_state_timeout': 1.0}, env, name=f'excitation_{output}')
                rows = []
                k = -1
                while len(rows) < args.rounds:
                    k += 1
                    if k >= 3 * args.rounds:
                        raise SystemExit('too many interrupted rounds: '
                                         + json.dumps(report.tables.get('interrupted')))
                    with lock:
                        n_markers = len(seen['markers'])
                    deadline = time.monotonic() + 60.0
                    while True:
                        res = call('/excitation_node/start')
                        if res.success:
                            break
                        if time.monotonic() > deadline or exc.poll() is not None:
                            raise SystemExit(f'~/start refused: {res.message}\n'
                                             + node_output(exc))
                        time.sleep(0.1)     # retry while the node has not heard the arm
                    wait(lambda: any(m['phase'] in ('sweep', 'stopped')
                                     for m in seen['markers'][n_markers:]), 60, 'a sweep')
                    early = [m for m in seen['markers'][n_markers:] if m['phase'] == 'stopped']
                    if early:
                        # the node stopped by itself before the sweep (a loaded machine):
                        # said, and the round is run again
                        report.add('interrupted', {'output': output, 'round': k,
                                                   'reason': early[0]['reason']})
                        wait(lambda: time.time() > early[0].get('rest_time', 0) + 0.5, 30,
                             'rest')
                        continue
                    time.sleep(float(rng.uniform(0.2, 1.0)))   # somewhere inside the sweep
                    with lock:
                        n_msgs = len(seen['msgs'])
                    t_call = time.time()
                    res = call('/excitation_node/stop')
                    t_answer = time.time()
                    wait(lambda: any(m['phase'] == 'stopped'
                                     for m in seen['markers'][n_markers:]), 10, 'stopped')
                    stopped = [m for m in seen['markers'][n_markers:]
                               if m['phase'] == 'stopped'][0]
                    rest = stopped['rest_time']
                    wait(lambda: time.time() > rest + 0.5, 30, 'rest')

                    def still_since():
                        with lock:
                            states = [(t, v) for t, v in seen['states'] if t >= t_call]
                        run_start = None
                        for t, v in states:
                            if np.max(np.abs(v)) < args.still:
                                run_start = run_start or t
                                if t - run_start >= 0.05:
                                    return run_start
                            else:
                                run_start = None
                        return None
                    wait(lambda: still_since() is not None, 30, 'standstill')
                    with lock:
                        if output == 'trajectory':      # the window stamped braking_from
                            braking_msgs = [
                                t for t, m in seen['msgs'][n_msgs:]
                                if abs(m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
                                       - stopped['braking_from']) < 1e-6]
                        else:       # the first command sent after the node decided
                            braking_msgs = [t for t, _ in seen['msgs'][n_msgs:]
                                            if t >= stopped['t']]
                    row = {'output': output, 'round': k,
                           'decided_ms': round(1e3 * (stopped['t'] - t_call), 1),
                           'braking_from_ms': round(1e3 * (stopped['braking_from'] - t_call), 1),
                           'first_braking_msg_ms': round(1e3 * (braking_msgs[0] - t_call), 1)
                           if braking_msgs else None,
                           'commanded_rest_ms': round(1e3 * (rest - t_call), 1),
                           'standstill_ms': round(1e3 * (still_since() - t_call), 1),
                           'service_rtt_ms': round(1e3 * (t_answer - t_call), 1),
                           'stop_answer': res.message.split(';')[0]}
                    rows.append(row)
                    report.add('rounds', row)
                code = stop(exc, timeout=20)
                if code != 0:
                    raise SystemExit(f'excitation_node exit code {code}\n' + node_output(exc))
                for key in ('decided_ms', 'braking_from_ms', 'first_braking_msg_ms',
                            'commanded_rest_ms', 'standstill_ms', 'service_rtt_ms'):
                    values = np.array([r[key] for r in rows if r[key] is not None], float)
                    summary.append({'output': output, 'quantity': key,
                                    'median_ms': round(float(np.median(values)), 1),
                                    'max_ms': round(float(values.max()), 1)})
            stop(sim, timeout=20)
            watchdog_rows(args, rng, report, node, plan, plan_path, env, seen, lock, call,
                          wait)
        finally:
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown(context=context)
    for row in summary:
        report.add('summary', row)
    braking = float(args.speed / cfg.acceleration_limits[5])
    report.note(f'Joint 6 sweeps at {args.speed} rad/s; braking at its acceleration limit '
                f'({cfg.acceleration_limits[5]} rad/s²) takes {1e3 * braking:.0f} ms, so '
                'commanded_rest_ms - braking_from_ms is that long when the stop falls inside '
                'a constant-speed sweep (less inside a reversal).')
    report.note('Trajectory output: the braking window starts one tick (10 ms at '
                'command_rate 100 Hz) after the node handles the call (braking_from_ms = '
                'decided_ms + 10 ms), so that it reaches the controller before it begins. '
                'Commands output: braking starts when the node handles the call; the first '
                'braking command goes out at the next tick. decided_ms is the service '
                'delivery and executor delay of the machine, of the order of service_rtt_ms.')
    report.note(f'standstill: every measured joint speed of the simulated arm below '
                f'{args.still} rad/s for 50 ms (its drive lags the reference).')
    report.save()


if __name__ == '__main__':
    main()
