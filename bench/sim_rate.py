"""Real-time factor of the simulated arm, and what a recorder receives from it.

Three measurements, each on the shipped humanoid arm (6 joints, 1 ms steps):

1. ``core``: the stepping loop of ``sim_arm_node`` without ROS (follower sample, MuJoCo
   step, measurement into preallocated arrays) in a child process pinned to one core:
   steps per second, i.e. the real-time factor the physics alone allows.
2. ``wall``: ``sim_arm_node`` at its defaults (wall time, 1 kHz joint_states) pinned to
   one core for ``--seconds``: the achieved real-time factor from its diagnostics,
   schedule restarts (a gap in the stamps each), late steps, the joint_states
   received here, and the CPU time the node spent per simulated second (from
   /proc), whose inverse is the real-time factor a core of its own would allow (less
   sensitive to the other jobs than the achieved factor).
3. ``recorder``: sim time as fast as possible (``real_time_factor 0``) feeding
   ``recorder_node`` for ``--seconds`` of wall time, without and with
   ``lockstep_topic: joint_torques``: the achieved real-time factor and the fraction of
   the simulated samples that reached the bag (what was lost silently before lockstep).

Nothing is random (no noise draws depend on timing). Timing numbers depend on the
load: the load average is recorded beside every row. Prints JSON lines; tables go to
docs/results/sim_rate.md / .json::

    python bench/sim_rate.py [--seconds 20] [--core-steps 20000]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / 'test'))

import benchlib  # noqa: E402
from ros_utils import RosHarness, node_output, ros_environment, start_node, stop  # noqa: E402

CORE = '''
import json, os, sys, time
import numpy as np
os.sched_setaffinity(0, {0})
from arm_dyn_id.config import load_arm_config
from arm_dyn_id.excitation.follow import JointTrajectoryFollower
from arm_dyn_id.sim.arm import SimArm, SimParams
config = load_arm_config('humanoid_arm.yaml')
arm = SimArm(config, SimParams.from_config(config))
follower = JointTrajectoryFollower(arm.initial_positions)
n = config.n_joints
pos, vel, cur = np.zeros(n), np.zeros(n), np.zeros(n)
steps = int(sys.argv[1])
start = time.perf_counter()
for _ in range(steps):
    q, dq, ddq = follower.sample(arm.time)
    arm.step(q, dq, ddq)
    arm.measure_into(pos, vel, cur)
wall = time.perf_counter() - start
print(json.dumps({'steps': steps, 'wall_s': wall, 'steps_per_s': steps / wall,
                  'real_time_factor': steps * arm.params.timestep / wall}))
'''


def load():
    return round(os.getloadavg()[0], 2)


def cpu_seconds(pid):
    """utime + stime of a process (s), from /proc/<pid>/stat."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def one_core():
    os.sched_setaffinity(0, {0})


def core(steps):
    out = subprocess.run([sys.executable, '-c', CORE, str(steps)], capture_output=True,
                         text=True, cwd=REPO, check=True)
    import json
    return json.loads(out.stdout.strip().splitlines()[-1])


def _diagnostics_values(diags):
    for msg in reversed(diags):
        for status in msg.status:
            if status.name.startswith('sim_arm_node'):
                return {kv.key: kv.value for kv in status.values}
    return {}


def wall_mode(seconds):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    with ros_environment() as env:
        proc = start_node('arm_dyn_id.nodes.sim_arm_node', {'config_file': 'humanoid_arm.yaml'},
                          env, name='sim_arm')
        # pin the node to one core (its loop thread and its executor share it)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.sched_setaffinity(proc.pid, {0})
                break
            except OSError:
                time.sleep(0.1)
        states, diags = [], []
        with RosHarness(env.domain_id) as ros:
            ros.node.create_subscription(JointState, 'joint_states',
                                         lambda m: states.append(m.header.stamp.sec
                                                                 + m.header.stamp.nanosec * 1e-9),
                                         QoSProfile(depth=1000))
            ros.node.create_subscription(DiagnosticArray, 'diagnostics', diags.append, 10)
            ros.wait_for(lambda: len(states) > 100, 60, what='joint_states')
            first = len(states)
            t0, v0 = time.monotonic(), _diagnostics_values(diags)
            cpu0 = cpu_seconds(proc.pid)
            ros.wait_for(lambda: time.monotonic() - t0 >= seconds, seconds + 5)
            received = len(states) - first
            cpu1 = cpu_seconds(proc.pid)
            v1 = _diagnostics_values(diags)
        stop(proc)
        output = node_output(proc)
    # CPU the node spent per simulated second: what a core of its own would allow (one
    # joint_states per 1 ms step; any missed here only makes the figure conservative)
    cpu_per_sim_s = (cpu1 - cpu0) / max(received * 1e-3, 1e-9)
    return {'seconds': seconds, 'joint_states_received_per_s': received / seconds,
            'cpu_s_per_simulated_s': round(cpu_per_sim_s, 3),
            'real_time_factor_on_an_own_core': round(1.0 / cpu_per_sim_s, 2),
            'real_time_factor_achieved': float(v1.get('real_time_factor_achieved', 'nan')),
            'schedule_resyncs': int(v1.get('schedule_resyncs', 0))
            - int(v0.get('schedule_resyncs', 0)),
            'late_steps': int(v1.get('late_steps', 0)) - int(v0.get('late_steps', 0)),
            'summary': [line for line in output.splitlines() if 'simulated ' in line][-1:]}


def with_recorder(seconds, lockstep):
    import tempfile
    from arm_dyn_id.data.bag_reader import read_bag
    with tempfile.TemporaryDirectory(prefix='sim_rate_') as tmp, ros_environment() as env:
        bags = Path(tmp) / 'bags'
        rec = start_node('arm_dyn_id.nodes.recorder_node',
                         {'config_file': 'humanoid_arm.yaml', 'use_sim_time': True,
                          'record_on_start': True, 'output_dir': str(bags)}, env,
                         name='recorder')
        with RosHarness(env.domain_id) as ros:
            ros.wait_for(lambda: ros.node.count_publishers('/joint_torques') > 0, 60,
                         what='recorder up')
            sim = start_node('arm_dyn_id.nodes.sim_arm_node',
                             {'config_file': 'humanoid_arm.yaml', 'use_sim_time': True,
                              'real_time_factor': 0.0,
                              'lockstep_topic': 'joint_torques' if lockstep else ''},
                             env, name='sim_arm')
            ros.wait_for(lambda: ros.node.count_publishers('/joint_states') > 0, 60,
                         what='sim up')
            t0 = time.monotonic()
            ros.wait_for(lambda: time.monotonic() - t0 >= seconds, seconds + 5)
        stop(sim)
        stop(rec)
        sim_out = node_output(sim)
        bag = sorted(p.parent for p in bags.glob('*/metadata.yaml'))[-1]
        recording = read_bag(bag)
        quality = recording.quality['recorded']['quality']
    summary = [line for line in sim_out.splitlines() if 'simulated ' in line][-1:]
    return {'lockstep': lockstep, 'seconds': seconds,
            'samples_recorded': quality['accepted'],
            'recorded_sim_seconds': round(quality['duration_s'], 2),
            'delivered_fraction': round(quality['delivered_fraction'], 4),
            'drops': quality['drops'], 'gaps': quality['gaps'],
            'max_gap_s': round(quality['max_gap_s'], 4),
            'real_time_factor_achieved': round(quality['duration_s'] / seconds, 2),
            'sim_summary': summary}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0)
    parser.add_argument('--core-steps', type=int, default=20000)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('sim_rate', args, title='Simulated arm: real-time factor')
    row = dict(core(args.core_steps), load_average=load())
    report.add('core', row)
    row = dict(wall_mode(args.seconds), load_average=load())
    report.add('wall', row)
    for lockstep in (False, True):
        row = dict(with_recorder(args.seconds, lockstep), load_average=load())
        report.add('recorder', row)
    report.note('core: one process pinned to one core, no ROS; wall: sim_arm_node at its '
                'defaults pinned to one core; recorder: sim time at real_time_factor 0 into '
                'recorder_node, without and with lockstep_topic joint_torques. load_average: '
                '1-minute load average when the row was measured (2 cores, shared).')
    report.save()


if __name__ == '__main__':
    main()
