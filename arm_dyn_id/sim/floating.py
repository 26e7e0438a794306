"""MuJoCo stand-ins for the two floating-base robots, and their excitation plans.

- :func:`space_robot` (seed 002): the URDF's root on a free joint, zero gravity, no
  contacts, position servos on the joints (internal torques only, so the momentum stays
  at its initial value, zero when released at rest); RK4 keeps it to ~1e-9 N·m·s.
- :func:`biped` (seed 003): free joint on the torso, gravity, a flat floor, the four
  sole spheres of each foot as the only contact geometry, a MuJoCo touch sensor at each
  (normal force, seed 003 §3), position servos with optional joint friction (Coulomb
  ``frictionloss`` and viscous ``damping``: what spoils torque-based identification).

:meth:`FloatingSim.run` follows a joint plan and returns a :class:`FloatingRecording`
of what a real robot measures, with Gaussian noise at the levels of :class:`Noise`,
and the noise-free truth beside it. Plans: :func:`seed002_plan` (each joint alone out
and back, seed 002 §3.3), :func:`multi_joint_plan` (all joints together, out and back,
base drift bounded), :func:`biped_plan` (weight shift onto the right foot, then the
left foot and torso move at random while the planned ZMP stays over the right sole,
seed 003 §3; or double support only).
"""

from dataclasses import dataclass

import mujoco
import numpy as np
import pinocchio as pin

from arm_dyn_id.data.floating import FloatingData
from arm_dyn_id.errors import ConfigError, URDFError
from arm_dyn_id.model.floating import FloatingModel

# the measured signals of a run; one class with the bag reader's (data wing)
FloatingRecording = FloatingData


@dataclass(frozen=True)
class Noise:
    """Standard deviations of the measurement noise (SI units, radians)."""

    joint_angle: float = 1e-5        # rad (encoder)
    joint_rate: float = 1e-4         # rad/s
    base_position: float = 1e-5      # m
    base_attitude: float = 1e-5      # rad (small rotation)
    base_velocity: float = 1e-5      # m/s
    base_rate: float = 1e-5          # rad/s (gyro)
    force: float = 0.2               # N per foot sensor
    torque: float = 0.02             # N·m per joint

    @classmethod
    def none(cls):
        return cls(*([0.0] * 8))


class FloatingSim:
    """A floating-base robot in MuJoCo. Use :func:`space_robot` or :func:`biped`."""

    def __init__(self, urdf, gravity, floor, kp, kv, frictionloss=0.0, damping=0.0,
                 timestep=1e-3, sensor_bodies=()):
        self.model_pin = FloatingModel(urdf)        # raises URDFError naming the file
        try:
            spec = mujoco.MjSpec.from_file(str(urdf))
        except ValueError as exc:
            raise URDFError(f'URDF file {urdf} could not be loaded into MuJoCo: {exc}') from exc
        spec.compiler.fusestatic = False
        root = self.model_pin.body_names[0]
        spec.body(root).add_freejoint()
        spec.option.timestep = timestep
        spec.option.gravity = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
        if floor:
            spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1])
            for g in spec.geoms:
                # stiff soles: a sinking, tilting foot is an error of the foot-flat
                # kinematics the ZMP method relies on (seed 003 §3)
                g.solref = [2 * timestep, 1.0]
                g.friction = [1.2, 0.05, 0.001]
            spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        else:
            spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
            spec.option.integrator = mujoco.mjtIntegrator.mjINT_RK4
        names = self.model_pin.joint_names
        for name in names:
            j = spec.joint(name)
            j.frictionloss = float(frictionloss)
            j.damping = [float(damping), 0.0, 0.0]
            act = spec.add_actuator(name=f'{name}_servo', target=name,
                                    trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.set_to_position(kp=float(kp), kv=float(kv))
        self.sensor_sites = []
        for body in sensor_bodies:
            b = spec.body(body)
            for k, g in enumerate([g for g in b.geoms
                                   if g.type == mujoco.mjtGeom.mjGEOM_SPHERE]):
                site = b.add_site(name=f'{body}_sensor_{k}', pos=g.pos,
                                  size=[g.size[0] * 1.5, 0, 0])
                spec.add_sensor(name=site.name, type=mujoco.mjtSensor.mjSENS_TOUCH,
                                objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site.name)
                self.sensor_sites.append(site.name)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._site_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, s)
                          for s in self.sensor_sites]

    @property
    def n(self):
        return len(self._qadr)

    def reset(self, q, base_position=(0, 0, 0), base_quaternion_xyzw=(0, 0, 0, 1)):
        d = self.data
        mujoco.mj_resetData(self.model, d)
        x, y, z, w = base_quaternion_xyzw
        d.qpos[:7] = [*base_position, w, x, y, z]
        d.qpos[self._qadr] = q
        d.ctrl[:] = q
        mujoco.mj_forward(self.model, d)

    def _sample(self):
        d = self.data
        quat_wxyz = d.qpos[3:7]
        return dict(base_position=d.qpos[:3].copy(),
                    base_quaternion=np.array([*quat_wxyz[1:], quat_wxyz[0]]),
                    base_linear=d.qvel[:3].copy(), base_angular=d.qvel[3:6].copy(),
                    q=d.qpos[self._qadr].copy(), dq=d.qvel[self._vadr].copy(),
                    tau=d.actuator_force.copy(),
                    forces=d.sensordata[:len(self._site_ids)].copy(),
                    sensor_positions=d.site_xpos[self._site_ids].copy())

    def run(self, t_plan, q_plan, sample_period, noise=None, rng=None, base_position=None,
            base_quaternion_xyzw=(0, 0, 0, 1)):
        """Follow ``q_plan`` (linear interpolation between plan samples) from its first
        row, starting at rest, and record every ``sample_period`` seconds.

        Parameters
        ----------
        t_plan : ndarray, (K,)
        q_plan : ndarray, (K, n)
        sample_period : float
        noise : Noise, optional
            Default :class:`Noise` (); ``Noise.none()`` for exact data.
        rng : numpy.random.Generator, optional
        base_position, base_quaternion_xyzw : optional
            Initial base pose (default at the origin, level).

        Returns
        -------
        FloatingRecording
        """
        t_plan = np.asarray(t_plan, float)
        q_plan = np.asarray(q_plan, float)
        if q_plan.shape != (len(t_plan), self.n) or len(t_plan) < 2:
            raise ConfigError(f'q_plan must be ({len(t_plan)}, {self.n}), got {q_plan.shape}')
        noise = Noise() if noise is None else noise
        rng = np.random.default_rng(0) if rng is None else rng
        self.reset(q_plan[0], (0, 0, 0) if base_position is None else base_position,
                   base_quaternion_xyzw)
        dt = self.model.opt.timestep
        every = max(1, int(round(sample_period / dt)))
        steps = int(round((t_plan[-1] - t_plan[0]) / dt))
        rows = []
        times = t_plan[0] + dt * np.arange(steps + 1)
        ctrl = np.stack([np.interp(times, t_plan, q_plan[:, j]) for j in range(self.n)], 1)
        model, data = self.model, self.data
        for k in range(steps + 1):
            if k % every == 0:
                rows.append(self._sample())
            data.ctrl[:] = ctrl[k]
            mujoco.mj_step(model, data)
        times = times[::every]
        truth = {key: np.array([r[key] for r in rows]) for key in rows[0]}
        return _noisy(times, truth, noise, rng)


def _noisy(t, truth, noise, rng):
    out = {}
    N = len(t)

    def add(key, sigma):
        x = truth[key]
        out[key] = x + sigma * rng.standard_normal(x.shape) if sigma > 0 else x.copy()

    add('base_position', noise.base_position)
    add('base_linear', noise.base_velocity)
    add('base_angular', noise.base_rate)
    add('q', noise.joint_angle)
    add('dq', noise.joint_rate)
    add('tau', noise.torque)
    add('forces', noise.force)
    out['sensor_positions'] = truth['sensor_positions']
    quat = truth['base_quaternion'].copy()
    if noise.base_attitude > 0:
        for k in range(N):
            dR = pin.exp3(noise.base_attitude * rng.standard_normal(3))
            R = pin.Quaternion(quat[k]).toRotationMatrix() @ dR
            quat[k] = pin.Quaternion(R).coeffs()
    out['base_quaternion'] = quat
    return FloatingRecording(t=t, truth=truth, **out)


# ------------------------------------------------------------------ space robot -----
def space_robot(urdf, kp=100.0, kv=10.0, timestep=2e-3):
    """Seed 002's free-floating space manipulator: zero gravity, no contacts."""
    return FloatingSim(urdf, gravity=False, floor=False, kp=kp, kv=kv, timestep=timestep)


def _cubic(s):
    """Cubic polynomial 0 -> 1 with zero end rates (seed 002 §3.3), s in [0, 1]."""
    s = np.clip(s, 0.0, 1.0)
    return 3 * s ** 2 - 2 * s ** 3


def seed002_plan(n=6, angle=np.pi / 6, move_time=10.0, rate=100.0, out_and_back=True):
    """Each joint alone from 0 to ``angle`` by a cubic in ``move_time`` (seed 002
    §3.3: θ = π/6, 10 s), the others locked; back to 0 in the same time when
    ``out_and_back`` (the base attitude returns, so its drift stays bounded).

    Returns (t (K,), q (K, n))."""
    legs = 2 if out_and_back else 1
    T = n * legs * move_time
    t = np.arange(0.0, T + 1e-9, 1.0 / rate)
    q = np.zeros((len(t), n))
    for j in range(n):
        t0 = j * legs * move_time
        s = _cubic((t - t0) / move_time)
        if out_and_back:
            s = s - _cubic((t - t0 - move_time) / move_time)
        q[:, j] = angle * s
    return t, q


def multi_joint_plan(n=6, duration=40.0, amplitude=0.6, rate=100.0, rng=None, harmonics=3):
    """All joints together: a sum of ``harmonics`` sines per joint (random amplitudes
    and phases, base period ``duration / 2``), faded in and out by a cubic, back at
    zero at the end. Returns (t, q)."""
    rng = np.random.default_rng(0) if rng is None else rng
    t = np.arange(0.0, duration + 1e-9, 1.0 / rate)
    fade = _cubic(t / 4.0) * _cubic((duration - t) / 4.0)
    w0 = 2 * np.pi * 2 / duration
    q = np.zeros((len(t), n))
    for j in range(n):
        a = rng.uniform(-1, 1, harmonics)
        a *= amplitude / max(np.sum(np.abs(a)), 1e-9)
        ph = rng.uniform(0, 2 * np.pi, harmonics)
        q[:, j] = fade * sum(a[k] * np.sin((k + 1) * w0 * t + ph[k]) for k in range(harmonics))
    return t, q


# ------------------------------------------------------------------------ biped -----
def biped(urdf, kp=600.0, kv=20.0, frictionloss=0.0, damping=0.0, timestep=1e-3):
    """Seed 003's biped on a flat floor with four touch sensors per sole."""
    return FloatingSim(urdf, gravity=True, floor=True, kp=kp, kv=kv,
                       frictionloss=frictionloss, damping=damping, timestep=timestep,
                       sensor_bodies=('foot_l', 'foot_r'))


def sole_offset(model):
    """Height of the sole below the ankle roll axis (m), from the foot's contact
    spheres in the URDF (the lowest point of the spheres)."""
    import xml.etree.ElementTree as ET
    root = ET.parse(model.source).getroot()
    for link in root.iter('link'):
        if link.get('name') == 'foot_l':
            low = [float(c.find('origin').get('xyz').split()[2])
                   - float(c.find('geometry/sphere').get('radius'))
                   for c in link.iter('collision')]
            return -min(low)
    raise URDFError(f'{model.source} has no foot_l with sole spheres')


class LegIK:
    """Joint angles placing both feet at given world poses for a given torso pose
    (Newton on the two 6-D foot errors), and a whole-body CoM placed over a point by
    moving the torso horizontally (the quasi-static balance of seed 003's plans)."""

    def __init__(self, model):
        self.m = model
        self.feet = [model.frame_id(f) for f in ('foot_l', 'foot_r')]

    def solve(self, torso, feet, q0, iterations=30, tol=1e-10):
        m = self.m
        q = np.concatenate([torso.translation, pin.Quaternion(torso.rotation).coeffs(), q0])
        for _ in range(iterations):
            pin.forwardKinematics(m.model, m.data, q)
            pin.updateFramePlacements(m.model, m.data)
            errs, jacs = [], []
            for fid, target in zip(self.feet, feet):
                err = pin.log6(m.data.oMf[fid].actInv(target)).vector
                J = pin.computeFrameJacobian(m.model, m.data, q, fid, pin.LOCAL)[:, 6:]
                errs.append(err)
                jacs.append(J)
            e = np.concatenate(errs)
            if e @ e < tol:
                break
            q[7:] += np.linalg.lstsq(np.vstack(jacs), e, rcond=None)[0]
        return q

    def balanced(self, com_xy, height, rpy, feet, q0, phi=None):
        """Configuration whose CoM (of ``phi``, default the URDF's) is over ``com_xy``."""
        R = pin.rpy.rpyToMatrix(*rpy)
        xy = np.array(com_xy, float)
        q = None
        for _ in range(3):
            torso = pin.SE3(R, np.array([xy[0], xy[1], height]))
            q = self.solve(torso, feet, q0 if q is None else q[7:])
            c = self.m.com(q[None], phi)[0]
            xy = xy + (np.asarray(com_xy) - c[:2])
        return q


def _smooth_random(t, rng, amplitude, periods=(6.0, 9.0, 14.0)):
    out = np.zeros_like(t)
    for p in periods:
        out += rng.uniform(-1, 1) * np.sin(2 * np.pi * t / p + rng.uniform(0, 2 * np.pi))
    return amplitude * out / len(periods)


def biped_plan(model, duration=40.0, rng=None, rate=50.0, single_support=True,
               com_amplitude=(0.02, 0.015), swing_amplitude=(0.12, 0.06, 0.03),
               torso_amplitude=(0.15, 0.3), height_amplitude=0.04, stand_height=0.48):
    """Excitation of seed 003 §3: shift the weight onto the right foot, lift the left
    foot, then move it, the torso attitude and height at random while the CoM (planned
    ZMP) wanders within ``com_amplitude`` of the right sole's centre. With
    ``single_support=False`` both feet stay down and the CoM wanders between them.

    Returns
    -------
    t : ndarray (K,)
    q : ndarray (K, 12)
        Joint plan (URDF joint order).
    info : dict
        ``com_reference`` (K, 2), ``feet`` (initial foot poses), ``configurations``.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    ik = LegIK(model)
    sole = sole_offset(model)
    hip_y = abs(model.frame_pose(pin.neutral(model.model), 'hip_yaw_l').translation[1])
    feet0 = [pin.SE3(np.eye(3), np.array([0.0, s * hip_y, sole])) for s in (1, -1)]
    t = np.arange(0.0, duration + 1e-9, 1.0 / rate)
    shift = _cubic((t - 1.0) / 2.0)
    lift = _cubic((t - 3.0) / 1.0) if single_support else np.zeros_like(t)
    wander = _cubic((t - 4.0) / 2.0) * _cubic((duration - 1.0 - t) / 2.0)
    target_y = -hip_y if single_support else 0.0
    com_x = wander * _smooth_random(t, rng, com_amplitude[0])
    com_y = shift * target_y + wander * _smooth_random(
        t, rng, com_amplitude[1] if single_support else 0.7 * hip_y)
    swing = np.zeros((len(t), 3))
    if single_support:
        for k in range(3):
            swing[:, k] = wander * _smooth_random(t, rng, swing_amplitude[k])
        swing[:, 2] += 0.04 * lift + wander * swing_amplitude[2]
    roll = wander * _smooth_random(t, rng, torso_amplitude[0])
    pitch = wander * _smooth_random(t, rng, torso_amplitude[1])
    height = stand_height + wander * _smooth_random(t, rng, height_amplitude)
    # knees bent: the straight leg is a singular start for the Newton IK
    q0 = np.tile([0.0, 0.0, -0.3, 0.6, -0.3, 0.0], model.n // 6)
    qs = np.empty((len(t), model.nq))
    for k in range(len(t)):
        left = pin.SE3(np.eye(3), feet0[0].translation + swing[k])
        q = ik.balanced((com_x[k], com_y[k]), height[k], (roll[k], pitch[k], 0.0),
                        [left, feet0[1]], q0)
        qs[k] = q
        q0 = q[7:]
    return t, qs[:, 7:].copy(), {'com_reference': np.stack([com_x, com_y], axis=1),
                                 'feet': feet0, 'configurations': qs}
