"""Run an excitation plan on the simulated arm without ROS.

Used for validation runs (seed 000 §3: identify on Earth, validate on the Moon),
for the benchmarks and for tests. The ROS path (sim_arm_node + excitation_node +
recorder_node + identifier_node) produces the same data through topics.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.sim.arm import SimArm


@dataclass(frozen=True)
class SimRun:
    """Samples of one plan run at the simulator's rate.

    Attributes
    ----------
    t : ndarray, (N,)
        Sample times (s) from the plan start.
    q : ndarray, (N, n)
        Measured positions (encoder noise included), rad.
    dq : ndarray, (N, n)
        Velocities, rad/s.
    current : ndarray, (N, n)
        Measured motor currents (A), with the simulator's noise model.
    tau_measured : ndarray, (N, n)
        ``gain·(I - offset)`` as the recorder converts it (N·m).
    tau_drive : ndarray, (N, n)
        Noise-free torque the drive applied (N·m).
    tau_friction : ndarray, (N, n)
        Friction torque the drive had to overcome (N·m).
    markers : list of dict
        Segment markers (docs/interfaces.md), ``t`` on the same clock as ``t``.
    gravity : float
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    current: np.ndarray
    tau_measured: np.ndarray
    tau_drive: np.ndarray
    tau_friction: np.ndarray
    markers: list
    gravity: float

    @property
    def tau_rigid_body(self):
        """Drive torque minus friction: gravity and dynamics of the rigid bodies (N·m),
        the "simulated joint torque" seed 000 validates against."""
        return self.tau_drive - self.tau_friction


def run_plan(sim: SimArm, plan, decimate=1, progress=None, settle=0.5, approach=True):
    """Track ``plan`` with the simulated arm and sample every step.

    Parameters
    ----------
    sim : SimArm
        Already configured (gravity, payload); first moved to the plan start.
    plan : arm_dyn_id.excitation.plans.Plan
    decimate : int
        Keep every k-th step's sample (the physics always steps at its timestep).
    progress : callable(fraction), optional
        Called about a hundred times.
    settle : float
        Seconds held at the plan's start before it begins (not sampled).
    approach : bool
        Prepend a slow approach (phase ``approach``) from where the arm is to the
        plan's start, as the excitation node does.

    Returns
    -------
    SimRun
    """
    dt = sim.model.opt.timestep
    if approach:
        plan = plan.with_approach(sim.positions, sim.config)
    q0 = plan.start_position
    for _ in range(int(round(settle / dt))):
        sim.step(q0)
    steps = int(np.ceil(plan.duration / dt)) + 1
    t_ref = np.arange(steps) * dt
    # references for the whole plan at once: the plan's analytic pieces are vectorised
    q_ref, dq_ref, ddq_ref = plan.sample(t_ref)
    n = sim.n
    keep = np.arange(0, steps, decimate)
    out = {k: np.empty((len(keep), n)) for k in ('q', 'dq', 'i', 'drive', 'fric')}
    qm, dqm, im = np.empty(n), np.empty(n), np.empty(n)
    row = 0
    report_every = max(steps // 100, 1)
    for k in range(steps):
        sim.step(q_ref[k], dq_ref[k], ddq_ref[k])
        if k % decimate == 0:
            sim.measure_into(qm, dqm, im)
            out['q'][row], out['dq'][row], out['i'][row] = qm, dqm, im
            out['drive'][row] = sim.drive_torque()
            out['fric'][row] = sim.friction_torque()
            row += 1
        if progress is not None and k % report_every == 0:
            progress(k / steps)
    config = sim.config
    tau_measured = (out['i'] - config.current_offsets) * config.joint_torque_gains
    markers = [seg.marker(seg.t_start) for seg in plan.segments]
    markers.append({'segment_id': len(plan.segments), 'joint': None, 'joint_index': -1,
                    'direction': 0, 'phase': 'done', 't': float(plan.duration)})
    return SimRun(t=t_ref[keep], q=out['q'], dq=out['dq'], current=out['i'],
                  tau_measured=tau_measured, tau_drive=out['drive'], tau_friction=out['fric'],
                  markers=markers, gravity=sim.gravity)
