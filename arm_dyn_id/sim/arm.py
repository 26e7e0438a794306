"""A simulated arm: MuJoCo rigid-body physics, a joint drive, friction and sensor noise.

ROS-free core of ``sim_arm_node``. The URDF is loaded into MuJoCo (visuals and mesh
geometry stripped, fixed links merged by MuJoCo); one actuator per joint is added
through ``MjSpec`` (a URDF cannot declare actuators). Fixed links are kept as
bodies (``fusestatic`` off) so that a payload body can be added to the ``flange``
frame and the spec recompiled while running. Contacts are disabled: the simulated
torque is the rigid-body model's plus friction (avoiding collisions is the
excitation planner's job). Integrator: implicitfast at
``timestep`` (1 ms).

**The drive** is a joint-level PID position controller with velocity reference::

    tau_drive = kp (q_ref - q) + kd (dq_ref - dq) + ki ∫(q_ref - q) dt + J_ff ddq_ref

saturated at the URDF effort limit. It knows nothing of the model: the integral
term, not a gravity feed-forward, carries the static load, as in a real drive. The
PD part is a MuJoCo actuator (``kp``, ``kd`` in its gain/bias), so implicitfast
treats its damping implicitly and stiff gains stay stable. Gains left empty are
set from ``control_bandwidth`` and the largest joint-space inertia over the joint
range (critically damped there, ``ki = kp·ω/4``).

**Friction** (seed 001 eq. 2, plus an optional Stribeck term) acts against the
joint velocity, so the drive has to supply it::

    tau_f(v) = (f_c + f_s exp(-(v / v_s)^2)) tanh(v / v_eps) + f_v v

with ``v_eps = friction_smoothing_velocity``. It is integrated semi-implicitly
(its local slope goes into MuJoCo's implicit joint damping each step), so a sharp
Coulomb edge is stable at 1 ms. At rest ``tau_f = 0``, hence the drive torque at
rest equals the gravity torque G(q) exactly.

**Measurement** (what the arm's joint_states carry), per joint, at the start of a step::

    I = tau_drive / gain + offset + N(0, current_noise²)        (gain = k_e·sign·...)
      (+ a gross error ±gross_error_amplitude/gain with probability gross_error_rate)
    I <- round(I / current_quantisation) · current_quantisation
    q_meas = q + N(0, encoder_noise²),   dq_meas = dq

``gain`` is :attr:`ArmConfig.joint_torque_gains`, so the recorder's
``tau = gain·(I - offset)`` recovers ``tau_drive`` up to the noise.
"""

import xml.etree.ElementTree as ET
from dataclasses import dataclass, fields

import mujoco
import numpy as np

from arm_dyn_id.errors import ConfigError, URDFError

#: Random draws made at once (rows of per-joint noise): keeps the 1 kHz loop free of
#: per-step generator calls.
_NOISE_BLOCK = 4096


def _vec(params, key, n, default, minimum=0.0):
    value = params.get(key, default)
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise ConfigError(f'parameter {key} = {value!r} must be a number or a list of numbers')
    if arr.size == 1 and n > 1:
        arr = np.full(n, float(arr[0]))
    if arr.shape != (n,):
        raise ConfigError(f'parameter {key} = {list(arr)} has {arr.size} values, expected 1 or '
                          f'one per joint ({n})')
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f'parameter {key} = {arr.tolist()} contains NaN or inf')
    if minimum is not None and np.any(arr < minimum):
        i = int(np.argmax(arr < minimum))
        raise ConfigError(f'parameter {key}[{i}] = {arr[i]} must be >= {minimum}')
    arr.setflags(write=False)
    return arr


def _scalar(params, key, default, low=None, high=None, low_open=False):
    value = params.get(key, default)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f'parameter {key} = {value!r} must be a number')
    if not np.isfinite(x) or (low is not None and (x <= low if low_open else x < low)) or \
            (high is not None and x > high):
        rng = f'{"(" if low_open else "["}{low}, {high if high is not None else "inf"}]'
        raise ConfigError(f'parameter {key} = {value!r} must be in {rng}')
    return x


@dataclass(frozen=True)
class SimParams:
    """Everything configurable about the simulated arm (SI units, per joint (n,)).

    Attributes
    ----------
    friction_coulomb : ndarray, (n,)
        Coulomb friction f_c (N·m). Default 0.
    friction_viscous : ndarray, (n,)
        Viscous friction f_v (N·m·s/rad). Default 0.
    stribeck_torque : ndarray, (n,)
        Extra static friction f_s at zero speed above Coulomb (N·m). Default 0 (off).
    stribeck_velocity : float
        Stribeck velocity v_s (rad/s). Default 0.01.
    friction_smoothing_velocity : float
        v_eps of the tanh that replaces sign(v) (rad/s). Default 2e-3 (tanh = 1 - 1e-22
        at 3 °/s); smaller values make the drive creep longer before it holds at rest.
    current_noise : ndarray, (n,)
        Standard deviation of white current noise (A). Default 0.
    current_quantisation : ndarray, (n,)
        Current resolution (A); 0 = none. Default 0.
    gross_error_rate : float
        Probability per sample and joint of a gross error (seed 001 §4.2). Default 0.
    gross_error_amplitude : ndarray, (n,)
        Size of a gross error in joint torque (N·m), random sign; converted to
        current by the joint's gain. Default 0.
    encoder_noise : ndarray, (n,)
        Standard deviation of position noise (rad). Default 0.
    gravity : float or None
        Gravity magnitude (m/s²); None = the arm config's. Earth 9.81, Moon 1.63.
    payload_mass : float
        Payload at the flange (kg), applied when ``payload_attached``. Default 0.
    payload_com : ndarray, (3,)
        Its centre of mass in the flange frame (m). Default 0.
    payload_attached : bool
        Start with the payload attached. Default False.
    position_gains, velocity_gains, integral_gains : ndarray (n,) or None
        kp (N·m/rad), kd (N·m·s/rad), ki (N·m/(rad·s)); None = from ``control_bandwidth``.
    acceleration_feedforward : ndarray, (n,)
        J_ff (kg·m²) multiplying the reference acceleration. Default 0.
    control_bandwidth : float
        Closed-loop bandwidth (Hz) used for gains left empty. Default 20.
    initial_positions : ndarray (n,) or None
        Start pose (rad); None = zero clipped into the limits.
    timestep : float
        Physics step (s). Default 0.001.
    seed : int
        Seed of the noise generator. Default 0.
    """

    friction_coulomb: np.ndarray
    friction_viscous: np.ndarray
    stribeck_torque: np.ndarray
    stribeck_velocity: float
    friction_smoothing_velocity: float
    current_noise: np.ndarray
    current_quantisation: np.ndarray
    gross_error_rate: float
    gross_error_amplitude: np.ndarray
    encoder_noise: np.ndarray
    gravity: float
    payload_mass: float
    payload_com: np.ndarray
    payload_attached: bool
    position_gains: np.ndarray
    velocity_gains: np.ndarray
    integral_gains: np.ndarray
    acceleration_feedforward: np.ndarray
    control_bandwidth: float
    initial_positions: np.ndarray
    timestep: float
    seed: int

    @classmethod
    def keys(cls):
        """Names of every parameter (the node declares one ROS parameter per key)."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, config, node_name='sim_arm_node'):
        """The simulated arm's parameters from the ``node_name`` section (with ``/**``)
        of the file an :class:`~arm_dyn_id.config.ArmConfig` was loaded from."""
        from arm_dyn_id.config import read_parameter_file
        return cls.from_params(read_parameter_file(config.source, node_name), config.n_joints)

    @classmethod
    def from_params(cls, params, n):
        """Validate a parameter dict (e.g. ``ArmConfig.extra``) for an n-joint arm.

        Scalars given for a per-joint key apply to every joint; empty lists mean the
        default. Unknown keys are ignored (other nodes' keys share the dict).

        Raises
        ------
        ConfigError
            Naming the parameter and the offending value.
        """
        p = {k: v for k, v in dict(params or {}).items() if v is not None}

        def optional_vec(key, minimum=0.0):
            value = p.get(key)
            if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
                return None
            return _vec(p, key, n, None, minimum)

        gravity = p.get('gravity')
        if gravity is not None:
            gravity = _scalar(p, 'gravity', None, low=0.0)
        com = np.asarray(p.get('payload_com', (0.0, 0.0, 0.0)) or (0.0, 0.0, 0.0), dtype=float)
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise ConfigError(f'parameter payload_com = {com.tolist()} must be 3 finite '
                              'numbers (m, flange frame)')
        com.setflags(write=False)
        attached = p.get('payload_attached', False)
        if not isinstance(attached, (bool, np.bool_)):
            raise ConfigError(f'parameter payload_attached = {attached!r} must be true or false')
        seed = p.get('seed', 0)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError(f'parameter seed = {seed!r} must be a non-negative integer')
        return cls(
            friction_coulomb=_vec(p, 'friction_coulomb', n, 0.0),
            friction_viscous=_vec(p, 'friction_viscous', n, 0.0),
            stribeck_torque=_vec(p, 'stribeck_torque', n, 0.0),
            stribeck_velocity=_scalar(p, 'stribeck_velocity', 0.01, low=0.0, low_open=True),
            friction_smoothing_velocity=_scalar(p, 'friction_smoothing_velocity', 2e-3,
                                                low=0.0, low_open=True),
            current_noise=_vec(p, 'current_noise', n, 0.0),
            current_quantisation=_vec(p, 'current_quantisation', n, 0.0),
            gross_error_rate=_scalar(p, 'gross_error_rate', 0.0, low=0.0, high=1.0),
            gross_error_amplitude=_vec(p, 'gross_error_amplitude', n, 0.0),
            encoder_noise=_vec(p, 'encoder_noise', n, 0.0),
            gravity=gravity,
            payload_mass=_scalar(p, 'payload_mass', 0.0, low=0.0),
            payload_com=com,
            payload_attached=bool(attached),
            position_gains=optional_vec('position_gains'),
            velocity_gains=optional_vec('velocity_gains'),
            integral_gains=optional_vec('integral_gains'),
            acceleration_feedforward=_vec(p, 'acceleration_feedforward', n, 0.0),
            control_bandwidth=_scalar(p, 'control_bandwidth', 20.0, low=0.0, high=200.0,
                                      low_open=True),
            initial_positions=optional_vec('initial_positions', minimum=None),
            timestep=_scalar(p, 'timestep', 0.001, low=0.0, high=0.01, low_open=True),
            seed=int(seed),
        )


def true_model(robot, params):
    """The simulated arm's own dynamics as a DynamicsModel: the URDF's inertias (``robot``)
    and the simulator's friction (tanh Coulomb at ``friction_smoothing_velocity``, viscous);
    what a perfect identification would give (no payload, no sensor model)."""
    from arm_dyn_id.model.dynamics import (DynamicsModel, FrictionModel,
                                           nominal_standard_parameters, rigid_base_parameters)
    base = rigid_base_parameters(robot)
    return DynamicsModel(robot, base, base.beta(nominal_standard_parameters(robot)),
                         FrictionModel(coulomb='tanh',
                                       smooth_velocity=params.friction_smoothing_velocity),
                         np.column_stack([params.friction_coulomb,
                                          params.friction_viscous]).ravel())


def strip_urdf(text, source='URDF'):
    """URDF text without ``<visual>`` elements and mesh collision geometry.

    MuJoCo cannot resolve ``package://`` meshes and the simulation needs no visuals.

    Raises
    ------
    URDFError
        If the text is not XML.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise URDFError(f'{source} is not valid XML: {exc}') from exc
    for link in root.iter('link'):
        for child in list(link):
            if child.tag == 'visual' or (child.tag == 'collision' and
                                         child.find('geometry/mesh') is not None):
                link.remove(child)
    return ET.tostring(root, encoding='unicode')


def urdf_effort_limits(text):
    """Joint name -> ``<limit effort>`` (N·m) of a URDF's joints that declare one."""
    out = {}
    for joint in ET.fromstring(text).iter('joint'):
        limit = joint.find('limit')
        if limit is not None and limit.get('effort') is not None:
            out[joint.get('name')] = float(limit.get('effort'))
    return out


class SimArm:
    """A MuJoCo arm with a PID drive, friction and noisy current/position sensors.

    Parameters
    ----------
    config : ArmConfig
        Joints (order of every array), URDF, gains (current <-> torque), limits.
    params : SimParams
        Friction, noise, gravity, payload, gains, seed.

    Raises
    ------
    URDFError
        If MuJoCo cannot load the URDF.
    ConfigError
        If a configured joint is not a hinge of the URDF, or the URDF has movable
        joints that are not configured (the simulated drive drives all of them).
    """

    def __init__(self, config, params):
        self.config = config
        self.params = params
        self.joint_names = tuple(config.joints)
        n = self.n = len(self.joint_names)
        path = config.urdf
        try:
            text = strip_urdf(path.read_text(), str(path))
            self._spec = mujoco.MjSpec.from_string(text)
        except (OSError, ValueError) as exc:
            raise URDFError(f'URDF file {path} could not be loaded into MuJoCo: {exc}') from exc
        spec = self._spec
        hinges = [j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_HINGE]
        others = [j.name for j in spec.joints if j.type != mujoco.mjtJoint.mjJNT_HINGE]
        missing = [j for j in self.joint_names if j not in hinges]
        if missing or others:
            raise ConfigError(f'joint {(missing or others)[0]!r}: the simulator drives the '
                              f'revolute joints of {path} ({hinges}) and needs joints to '
                              'list exactly those')
        extra = [j for j in hinges if j not in self.joint_names]
        if extra:
            raise ConfigError(f'joint {extra[0]!r} of {path} is not in joints '
                              f'{list(self.joint_names)}; the simulator drives every joint')
        spec.option.timestep = params.timestep
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        # contacts off: the simulated torque is the rigid-body model's plus friction;
        # keeping clear of collisions is the excitation planner's job
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        # keep fixed links (flange) as bodies so a payload can hang on the flange
        spec.compiler.fusestatic = False
        self._flange = self._find_flange(spec)
        efforts = urdf_effort_limits(text)
        # one affine actuator per joint, in configured order: force = kp·ctrl - kp·q - kd·dq
        for name in self.joint_names:
            act = spec.add_actuator(name=f'{name}_drive', target=name,
                                    trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
            act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        self._payload_body = None
        self._payload = None
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joint_names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._identity = bool(np.array_equal(self._qadr, np.arange(n)) and
                              np.array_equal(self._vadr, np.arange(n)) and m.nv == n)
        lower, upper = config.position_limits_lower, config.position_limits_upper
        self.effort_limits = np.array([efforts.get(j, 0.0) if efforts.get(j, 0.0) > 0 else np.inf
                                       for j in self.joint_names])
        q0 = params.initial_positions
        q0 = np.clip(np.zeros(n), lower, upper) if q0 is None else np.asarray(q0, dtype=float)
        self.initial_positions = q0.copy()
        self.data.qpos[self._qadr] = q0
        mujoco.mj_forward(m, self.data)
        self._set_gains(params)
        self._gravity_direction = np.array([0.0, 0.0, -1.0])
        self.set_gravity(config.gravity if params.gravity is None else params.gravity)
        if params.payload_attached and params.payload_mass > 0:
            self.attach_payload(params.payload_mass, params.payload_com)
        # measurement model
        gains = np.asarray(config.joint_torque_gains, dtype=float)
        self._inv_gain = 1.0 / gains
        self._offset = np.asarray(config.current_offsets, dtype=float).copy()
        self._rng = np.random.default_rng(params.seed)
        self._noise_block = None
        self._block_row = _NOISE_BLOCK
        self._quant = np.asarray(params.current_quantisation, dtype=float)
        self._quantise = bool(np.any(self._quant > 0))
        self._quant_safe = np.where(self._quant > 0, self._quant, 1.0)
        self._gross_current = np.asarray(params.gross_error_amplitude) * np.abs(self._inv_gain)
        # friction
        self._fc = np.asarray(params.friction_coulomb, dtype=float)
        self._fv = np.asarray(params.friction_viscous, dtype=float)
        self._fs = np.asarray(params.stribeck_torque, dtype=float)
        self._stribeck = bool(np.any(self._fs > 0))
        self._inv_veps = 1.0 / params.friction_smoothing_velocity
        self._inv_vs = 1.0 / params.stribeck_velocity
        self._friction = bool(np.any(self._fc > 0) or np.any(self._fv > 0) or self._stribeck)
        # controller state and the last sample (start of the last step)
        self._integral = np.zeros(n)
        self._i_limit = np.where(np.isfinite(self.effort_limits), self.effort_limits, 1e9)
        self._ff = np.asarray(params.acceleration_feedforward, dtype=float)
        self._zero = np.zeros(n)
        self._t = 0.0
        self._q = q0.copy()
        self._dq = np.zeros(n)
        self._tau = np.zeros(n)
        self._tau_f = np.zeros(n)
        self._steps = 0
        self._settle_integral()

    # construction helpers ----------------------------------------------------
    @staticmethod
    def _find_flange(spec):
        names = [b.name for b in spec.bodies]
        for candidate in ('flange', 'tool0', 'ee_link'):
            if candidate in names:
                return candidate
        return None

    def _joint_inertia(self, samples=64):
        """Largest diagonal joint-space inertia (kg·m²) over poses within the limits, (n,).

        The largest, so that the gains derived from it keep every pose at least as
        damped as designed; the smallest inertia only raises the bandwidth, which
        stays far below the step rate for the seed arms.
        """
        m = self.model
        d = mujoco.MjData(m)
        lower = np.maximum(self.config.position_limits_lower, -np.pi)
        upper = np.minimum(self.config.position_limits_upper, np.pi)
        poses = np.random.default_rng(12345).uniform(lower, upper, size=(samples, self.n))
        full = np.zeros((m.nv, m.nv))
        best = np.zeros(self.n)
        for q in np.vstack([self.data.qpos[self._qadr], poses]):
            d.qpos[self._qadr] = q
            mujoco.mj_forward(m, d)
            mujoco.mj_fullM(m, d, full)
            best = np.maximum(best, np.diag(full)[self._vadr])
        return best

    def _set_gains(self, params):
        omega = 2 * np.pi * params.control_bandwidth
        inertia = self._joint_inertia()
        self.position_gains = np.array(params.position_gains if params.position_gains is not None
                                       else inertia * omega ** 2, dtype=float)
        self.velocity_gains = np.array(params.velocity_gains if params.velocity_gains is not None
                                       else 2.0 * inertia * omega, dtype=float)
        self.integral_gains = np.array(params.integral_gains if params.integral_gains is not None
                                       else self.position_gains * omega / 4.0, dtype=float)
        if np.any(self.position_gains <= 0):
            i = int(np.argmax(self.position_gains <= 0))
            raise ConfigError(f'parameter position_gains[{i}] = {self.position_gains[i]} '
                              'must be > 0')
        self._apply_actuator_gains()

    def _apply_actuator_gains(self):
        m = self.model
        for k in range(self.n):
            m.actuator_gainprm[k, 0] = self.position_gains[k]
            m.actuator_biasprm[k, :3] = (0.0, -self.position_gains[k], -self.velocity_gains[k])
            limit = self.effort_limits[k]
            if np.isfinite(limit):
                m.actuator_forcelimited[k] = 1
                m.actuator_forcerange[k] = (-limit, limit)
        self._inv_kp = 1.0 / self.position_gains

    def _settle_integral(self):
        """Start with the integrator holding the static load (a drive that was on)."""
        d = self.data
        mujoco.mj_forward(self.model, d)
        self._integral[:] = np.clip(d.qfrc_bias[self._vadr], -self._i_limit, self._i_limit)

    # state ----------------------------------------------------------------
    @property
    def time(self):
        """Simulation time (s) of the current state."""
        return self.data.time

    @property
    def steps(self):
        return self._steps

    @property
    def positions(self):
        """True joint positions (rad) of the current state, (n,) (a copy)."""
        return self.data.qpos[self._qadr].copy()

    @property
    def velocities(self):
        return self.data.qvel[self._vadr].copy()

    @property
    def gravity(self):
        return float(np.linalg.norm(self.model.opt.gravity))

    @property
    def payload(self):
        """(mass kg, com (3,) m) of the attached payload, or None."""
        return self._payload

    # stepping -------------------------------------------------------------
    def step(self, q_ref, dq_ref=None, ddq_ref=None):
        """Advance one timestep tracking a reference.

        Parameters
        ----------
        q_ref : ndarray, (n,)
            Reference positions (rad), clipped into the position limits.
        dq_ref, ddq_ref : ndarray, (n,), optional
            Reference velocity (rad/s) and acceleration (rad/s²); default 0.
        """
        m, d = self.model, self.data
        if self._identity:
            q, dq = d.qpos, d.qvel
        else:
            q, dq = d.qpos[self._qadr], d.qvel[self._vadr]
        # sample at the start of the step (what measure() reports)
        self._t = d.time
        self._q[:] = q
        self._dq[:] = dq
        lo, hi = self.config.position_limits_lower, self.config.position_limits_upper
        q_ref = np.minimum(np.maximum(q_ref, lo), hi)
        error = q_ref - q
        integral = self._integral
        integral += self.integral_gains * error * m.opt.timestep
        np.clip(integral, -self._i_limit, self._i_limit, out=integral)
        offset = integral.copy()
        if dq_ref is not None:
            offset += self.velocity_gains * dq_ref
        if ddq_ref is not None:
            offset += self._ff * ddq_ref
        ctrl = q_ref + offset * self._inv_kp
        d.ctrl[:] = ctrl
        if self._friction:
            self._apply_friction(dq)
        mujoco.mj_step(m, d)
        self._tau[:] = d.actuator_force
        self._steps += 1

    def _apply_friction(self, v):
        """Friction at v, linearised: its slope is MuJoCo's implicit damping this step."""
        x = v * self._inv_veps
        th = np.tanh(x)
        level = self._fc
        slope_level = 0.0
        if self._stribeck:
            e = np.exp(-(v * self._inv_vs) ** 2)
            level = self._fc + self._fs * e
            slope_level = self._fs * e * (-2.0 * v * self._inv_vs ** 2)
        tau_f = level * th + self._fv * v
        slope = level * self._inv_veps * (1.0 - th * th) + slope_level * th + self._fv
        slope = np.maximum(slope, 0.0)       # implicit damping must not be negative
        self._tau_f[:] = tau_f
        m, d = self.model, self.data
        if self._identity:
            m.dof_damping[:] = slope
            d.qfrc_applied[:] = slope * v - tau_f
        else:
            m.dof_damping[self._vadr] = slope
            d.qfrc_applied[self._vadr] = slope * v - tau_f

    # measurement ------------------------------------------------------------
    def drive_torque(self):
        """Noise-free joint torque (N·m) the drive applied during the last step, (n,)."""
        return self._tau.copy()

    def friction_torque(self):
        """Friction torque (N·m, opposing motion, positive with v) at the last sample."""
        return self._tau_f.copy()

    def _noise_rows(self):
        if self._block_row >= _NOISE_BLOCK:
            p, rng, n = self.params, self._rng, self.n
            current = rng.standard_normal((_NOISE_BLOCK, n)) * p.current_noise
            encoder = rng.standard_normal((_NOISE_BLOCK, n)) * p.encoder_noise
            if p.gross_error_rate > 0:
                hit = rng.random((_NOISE_BLOCK, n)) < p.gross_error_rate
                sign = np.where(rng.random((_NOISE_BLOCK, n)) < 0.5, -1.0, 1.0)
                current += hit * sign * self._gross_current
            self._noise_block = (current, encoder)
            self._block_row = 0
        k = self._block_row
        self._block_row += 1
        return self._noise_block[0][k], self._noise_block[1][k]

    def measure_into(self, q_out, dq_out, current_out):
        """Fill preallocated (n,) arrays with the last sample; returns its time (s).

        The sample is the state at the start of the last :meth:`step` and the
        current of the torque applied from then on; see the module docstring for the
        noise model.
        """
        noise_i, noise_q = self._noise_rows()
        np.add(self._q, noise_q, out=q_out)
        dq_out[:] = self._dq
        np.multiply(self._tau, self._inv_gain, out=current_out)
        current_out += self._offset
        current_out += noise_i
        if self._quantise:
            rounded = np.round(current_out / self._quant_safe) * self._quant_safe
            np.copyto(current_out, rounded, where=self._quant > 0)
        return self._t

    def measure(self):
        """The last sample: (t s, q_meas (n,) rad, dq_meas (n,) rad/s, current (n,) A)."""
        q, dq, i = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        t = self.measure_into(q, dq, i)
        return t, q, dq, i

    # changes while running ------------------------------------------------
    def set_gravity(self, magnitude):
        """Gravity magnitude (m/s²) along the URDF root's -z (Earth 9.81, Moon 1.63)."""
        g = float(magnitude)
        if not np.isfinite(g) or g < 0:
            raise ConfigError(f'parameter gravity = {magnitude!r} must be >= 0 (m/s²)')
        self.model.opt.gravity[:] = g * self._gravity_direction

    def attach_payload(self, mass, com=(0.0, 0.0, 0.0)):
        """Attach a point mass (kg) at ``com`` (m, flange frame); replaces any payload.

        Raises
        ------
        ConfigError
            If the URDF has no flange frame or the values are invalid.
        """
        mass = float(mass)
        com = np.asarray(com, dtype=float)
        if not np.isfinite(mass) or mass <= 0:
            raise ConfigError(f'parameter payload_mass = {mass} must be > 0 (kg)')
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise ConfigError(f'parameter payload_com = {com.tolist()} must be 3 numbers (m)')
        if self._flange is None:
            raise ConfigError(f'{self.config.urdf} has no flange frame (link flange, tool0 '
                              'or ee_link) to attach a payload to')
        self._remove_payload_body()
        body = self._spec.body(self._flange).add_body(name='sim_payload')
        body.pos = [0.0, 0.0, 0.0]
        body.ipos = com.tolist()
        body.mass = mass
        body.inertia = [1e-12] * 3            # a point mass (pinocchio Payload inertia None)
        body.explicitinertial = True
        self._payload_body = body
        self._recompile()
        self._payload = (mass, com.copy())

    def detach_payload(self):
        """Remove the payload (no effect without one)."""
        if self._payload_body is None:
            return
        self._remove_payload_body()
        self._recompile()
        self._payload = None

    def _remove_payload_body(self):
        if self._payload_body is not None:
            self._spec.delete(self._payload_body)
            self._payload_body = None

    def _recompile(self):
        """Recompile the edited spec keeping state, gains and gravity."""
        gravity = self.model.opt.gravity.copy()
        damping = self.model.dof_damping.copy()
        model, data = self._spec.recompile(self.model, self.data)
        self.model, self.data = model, data
        self.model.opt.gravity[:] = gravity
        self.model.dof_damping[:] = damping
        self._apply_actuator_gains()
        mujoco.mj_forward(self.model, self.data)
