"""A torque-controlled simulated arm and a PD joint controller around it (no ROS).

:class:`EffortArm` is what ros2_control's ``JointGroupEffortController`` commands on a
real arm: one motor per joint taking a torque (clamped at the URDF effort limit),
MuJoCo rigid-body physics, joint friction (Coulomb as MuJoCo ``frictionloss``, so
the arm sticks when the net torque is below it; viscous as joint damping), any
gravity vector and a point-mass payload on the flange. Unlike
:class:`arm_dyn_id.sim.arm.SimArm` it has no drive of its own: whatever holds the
arm up comes from the controller, which is the point of
:func:`run_pd`::

    tau = kp (q_ref - q) + kd (dq_ref - dq) + tau_comp(q, dq)

with ``tau_comp`` a gravity compensation (or nothing). With ``kp = kd = 0`` this is
hand-guiding: the arm should float where it is left.
"""

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from arm_dyn_id.errors import ConfigError, URDFError
from arm_dyn_id.sim.arm import strip_urdf, urdf_effort_limits


class EffortArm:
    """A MuJoCo arm whose joints take torques.

    Parameters
    ----------
    urdf : path-like
    joints : sequence of str, (n,)
        Every revolute joint of the URDF, in the order of all per-joint arrays.
    gravity_vector : array_like, (3,)
        m/s² in the URDF root frame.
    coulomb, viscous : array_like (n,), optional
        Joint friction (N·m, N·m·s/rad); default 0.
    payload : (mass kg, com (3,) m in the flange frame), optional
    timestep : float
        s.

    Raises
    ------
    URDFError, ConfigError
    """

    def __init__(self, urdf, joints, gravity_vector=(0.0, 0.0, -9.81), coulomb=None,
                 viscous=None, payload=None, timestep=1e-3):
        path = Path(urdf)
        self.joint_names = tuple(joints)
        n = self.n = len(self.joint_names)
        try:
            text = strip_urdf(path.read_text(), str(path))
            spec = mujoco.MjSpec.from_string(text)
        except (OSError, ValueError) as exc:
            raise URDFError(f'URDF file {path} could not be loaded into MuJoCo: {exc}') from exc
        spec.option.timestep = float(timestep)
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        spec.compiler.fusestatic = False
        hinges = {j.name: j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE}
        missing = [j for j in self.joint_names if j not in hinges]
        if missing or len(hinges) != n:
            raise ConfigError(f'joints {list(self.joint_names)} must be exactly the revolute '
                              f'joints of {path} ({sorted(hinges)})')
        coulomb = np.zeros(n) if coulomb is None else np.asarray(coulomb, dtype=float)
        viscous = np.zeros(n) if viscous is None else np.asarray(viscous, dtype=float)
        efforts = urdf_effort_limits(text)
        self.effort_limits = np.array([efforts.get(j, np.inf) or np.inf
                                       for j in self.joint_names])
        for k, name in enumerate(self.joint_names):
            act = spec.add_actuator(name=f'{name}_motor', target=name,
                                    trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
            act.gainprm[0] = 1.0
            act.biastype = mujoco.mjtBias.mjBIAS_NONE
            if np.isfinite(self.effort_limits[k]):
                act.forcelimited = 1
                act.forcerange = [-self.effort_limits[k], self.effort_limits[k]]
        if payload is not None:
            mass, com = float(payload[0]), [float(c) for c in payload[1]]
            names = [b.name for b in spec.bodies]
            flange = next((c for c in ('flange', 'tool0', 'ee_link') if c in names), None)
            if flange is None:
                raise ConfigError(f'{path} has no flange frame for the payload')
            body = spec.body(flange).add_body(name='payload')
            body.ipos = com
            body.mass = mass
            body.inertia = [1e-12] * 3
            body.explicitinertial = True
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        g = np.asarray(gravity_vector, dtype=float)
        self.model.opt.gravity[:] = g
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joint_names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._vadr = np.array([m.jnt_dofadr[j] for j in jids])
        m.dof_frictionloss[self._vadr] = coulomb
        m.dof_damping[self._vadr] = viscous

    def reset(self, q, dq=None):
        """Put the arm at q (n,) rad with velocity dq (default at rest)."""
        d = self.data
        mujoco.mj_resetData(self.model, d)
        d.qpos[self._qadr] = q
        d.qvel[self._vadr] = 0.0 if dq is None else dq
        mujoco.mj_forward(self.model, d)

    @property
    def time(self):
        return float(self.data.time)

    @property
    def positions(self):
        return self.data.qpos[self._qadr].copy()

    @property
    def velocities(self):
        return self.data.qvel[self._vadr].copy()

    def gravity_torques(self):
        """The simulated arm's true gravity torque at its current pose (N·m), (n,)."""
        d = self.data
        saved = d.qvel.copy()
        d.qvel[:] = 0.0
        mujoco.mj_forward(self.model, d)
        g = d.qfrc_bias[self._vadr].copy()
        d.qvel[:] = saved
        mujoco.mj_forward(self.model, d)
        return g

    def joint_inertia(self):
        """Diagonal of the joint-space inertia at the current pose (kg·m²), (n,)."""
        full = np.zeros((self.model.nv, self.model.nv))
        mujoco.mj_fullM(self.model, self.data, full)
        return np.diag(full)[self._vadr].copy()

    def step(self, tau):
        """Apply joint torques tau (n,) N·m (clamped at the effort limits) for one step."""
        self.data.ctrl[:] = tau
        mujoco.mj_step(self.model, self.data)


@dataclass(frozen=True)
class PDRun:
    """Samples of one :func:`run_pd` run, every ``decimate`` steps.

    Attributes
    ----------
    t : ndarray, (N,)
    q, q_ref, tau : ndarray, (N, n)
        Positions and references (rad), commanded torques before the motor clamp (N·m).
    """

    t: np.ndarray
    q: np.ndarray
    q_ref: np.ndarray
    tau: np.ndarray

    @property
    def error(self):
        """q_ref - q (rad), (N, n)."""
        return self.q_ref - self.q


def run_pd(arm, reference, duration, kp, kd, compensation=None, decimate=1):
    """Run a PD joint controller with an optional compensation torque on ``arm``.

    Parameters
    ----------
    arm : EffortArm
        Already reset to its start state.
    reference : callable(t) -> (q_ref (n,), dq_ref (n,))
        Time t in s from the start of the run.
    duration : float
        s.
    kp, kd : array_like, (n,)
        N·m/rad and N·m·s/rad; zeros for hand-guiding.
    compensation : callable(q, dq) -> tau (n,), optional
        e.g. ``lambda q, dq: compensator.command_for(q, dq).torques``.
    decimate : int
        Keep every k-th step.

    Returns
    -------
    PDRun
    """
    kp, kd = np.asarray(kp, dtype=float), np.asarray(kd, dtype=float)
    dt = arm.model.opt.timestep
    steps = int(round(duration / dt))
    t0 = arm.time
    rows = steps // decimate + 1
    n = arm.n
    out_t, out_q = np.empty(rows), np.empty((rows, n))
    out_ref, out_tau = np.empty((rows, n)), np.empty((rows, n))
    k = 0
    for step in range(steps + 1):
        t = arm.time - t0
        q, dq = arm.positions, arm.velocities
        q_ref, dq_ref = reference(t)
        tau = kp * (q_ref - q) + kd * (dq_ref - dq)
        if compensation is not None:
            tau = tau + compensation(q, dq)
        if step % decimate == 0 and k < rows:
            out_t[k], out_q[k], out_ref[k], out_tau[k] = t, q, q_ref, tau
            k += 1
        if step < steps:
            arm.step(tau)
    return PDRun(out_t[:k], out_q[:k], out_ref[:k], out_tau[:k])
