"""What a user's own arm records, written the way ``ros2 bag record /joint_states`` stores it.

Test support for test_your_own_arm.py (and anyone who needs a realistic plain bag of
any URDF): no markers, no ``/arm_dyn_id/config`` topic, nothing but
``sensor_msgs/msg/JointState`` on ``/joint_states``, MCAP or sqlite3, rosbag2
metadata version 8 (Jazzy) or 9 (Kilted).

The true arm is the URDF as pinocchio reads it (:class:`Arm`); its joints are the
revolute (and continuous) joints, every other movable joint (a Panda's prismatic
fingers) is an *extra* joint the driver also publishes, at a fixed position with
zero effort. The motion (:func:`excitation`) is what a cautious user would do by hand
or with a teach pendant: each joint in turn (the last first) swept forward and back
at low speed while the others hold a random pose within 60 % of their range, with
smooth moves between poses; optionally static holds and slow moves only. The
measured torque (:func:`joint_torques`) is pinocchio's gravity plus Coulomb and
viscous friction (tanh-smoothed), current noise of a stated fraction of each joint's
largest gravity torque and a few gross errors (spikes); ``effort`` holds the motor
current ``torque / k_e`` or the torque itself. Everything is seeded.
"""

from dataclasses import dataclass, field
from pathlib import Path
import sysconfig

import numpy as np
import pinocchio as pin

from arm_dyn_id.data.bag_format import JOINT_STATE, typestore
from arm_dyn_id.data.bag_writer import encode_joint_states

#: pinocchio joint models with one rotational degree of freedom (RUB*: continuous)
REVOLUTE = ('JointModelRX', 'JointModelRY', 'JointModelRZ', 'JointModelRevoluteUnaligned',
            'JointModelRUBX', 'JointModelRUBY', 'JointModelRUBZ',
            'JointModelRevoluteUnboundedUnaligned')

#: where the example-robot-data wheel (PyPI, a cmeel package) puts its robots
ROBOTS = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix' / 'share' / \
    'example-robot-data' / 'robots'

#: the log time of the first message (ns): 2023-11-14, like a real recording
T0_NS = 1_700_000_000 * 10**9


def example_robot(relative):
    """Path of a URDF shipped by example-robot-data, or None when it is not installed.

    Parameters
    ----------
    relative : str
        Path under ``robots/``, e.g. ``'ur_description/urdf/ur5_robot.urdf'``.
    """
    path = ROBOTS / relative
    return path if path.exists() else None


class Arm:
    """The true arm: a URDF read by pinocchio, its joints and their ranges.

    Parameters
    ----------
    urdf : path-like
    joints : sequence of str, optional
        The arm's joints, default every revolute or continuous joint in tree order.
    """

    def __init__(self, urdf, joints=None):
        self.urdf = Path(urdf)
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        names = list(self.model.names)[1:]
        jmodels = {n: self.model.joints[self.model.getJointId(n)] for n in names}
        if joints is None:
            joints = [n for n in names if jmodels[n].shortname() in REVOLUTE]
        self.joints = tuple(joints)
        #: other movable joints (fingers): published at a fixed position, zero effort
        self.extra = tuple(n for n in names if n not in self.joints and jmodels[n].nv == 1)
        self._idx_q = np.array([jmodels[n].idx_q for n in self.joints])
        self._nq = np.array([jmodels[n].nq for n in self.joints])
        lo, hi = np.full(self.n, -np.pi), np.full(self.n, np.pi)
        for k, n in enumerate(self.joints):
            if self._nq[k] == 1:      # limited joint; a huge or missing limit counts as ±pi
                q = self._idx_q[k]
                lo[k] = max(self.model.lowerPositionLimit[q], -np.pi)
                hi[k] = min(self.model.upperPositionLimit[q], np.pi)
                if not lo[k] < hi[k]:
                    lo[k], hi[k] = -np.pi, np.pi
        #: (n,) rad: the joint range (continuous joints and wide limits: ±pi)
        self.lower, self.upper = lo, hi

    @property
    def n(self):
        """Number of arm joints."""
        return len(self.joints)

    def box(self, fraction=0.6):
        """(lower, upper), (n,) rad each: ``fraction`` of each range about its middle."""
        mid, half = (self.lower + self.upper) / 2, (self.upper - self.lower) / 2
        return mid - fraction * half, mid + fraction * half

    def random_poses(self, rng, count, fraction=0.6):
        """(count, n) rad: uniform within ``fraction`` of each joint's range."""
        lo, hi = self.box(fraction)
        return rng.uniform(lo, hi, size=(count, self.n))

    def configuration(self, angles, extra=None):
        """pinocchio configuration (model.nq,) of joint angles (n,) rad.

        Continuous joints become (cos, sin); joints not named stay at neutral, extra
        joints at ``extra`` ({name: position}).
        """
        q = pin.neutral(self.model)
        for k in range(self.n):
            i = self._idx_q[k]
            if self._nq[k] == 1:
                q[i] = angles[k]
            else:
                q[i:i + 2] = np.cos(angles[k]), np.sin(angles[k])
        for name, value in (extra or {}).items():
            q[self.model.joints[self.model.getJointId(name)].idx_q] = value
        return q

    def perturb(self, rng, mass=0.1, com=0.01):
        """This arm made another: each link's mass times N(1, ``mass``) (at least 0.5) and
        its centre of mass moved ``com`` m in a random direction (a URDF's errors seen
        from the true arm). Returns self."""
        for i in range(1, self.model.njoints):
            inertia = self.model.inertias[i]
            if inertia.mass <= 0:
                continue
            direction = rng.standard_normal(3)
            direction /= np.linalg.norm(direction)
            self.model.inertias[i] = pin.Inertia(
                inertia.mass * max(0.5, 1 + mass * rng.standard_normal()),
                inertia.lever + direction * com, inertia.inertia)
        self.data = self.model.createData()
        return self

    def gravity(self, Q, extra=None):
        """Gravity torque (N, n) N·m of the arm joints at angles Q (N, n) rad."""
        Q = np.atleast_2d(Q)
        idx_v = [self.model.joints[self.model.getJointId(n)].idx_v for n in self.joints]
        return np.array([pin.computeGeneralizedGravity(
            self.model, self.data, self.configuration(q, extra))[idx_v] for q in Q])


# ---------------------------------------------------------------------------
# motion

def _smooth(t, Q, window):
    """Moving average of samples Q (N, n) at uniform steps over ``window`` seconds."""
    w = max(1, int(round(window / (t[1] - t[0]))))
    if w < 2:
        return Q
    pad = np.concatenate([np.repeat(Q[:1], w, 0), Q, np.repeat(Q[-1:], w, 0)])
    c = np.cumsum(pad, axis=0)
    out = (c[w:] - c[:-w]) / w
    return out[w // 2:w // 2 + Q.shape[0]]


def excitation(arm, rng, sweeps=True, sweep_joints=None, poses_per_joint=2, sweep_deg=40.0,
               speed_deg=15.0, holds=0, hold_s=1.5, slow_moves=False, move_speed_deg=45.0,
               slow_speed_deg=10.0):
    """A low-speed recording plan as waypoints of a piecewise-linear path.

    Parameters
    ----------
    arm : Arm
    rng : numpy.random.Generator
    sweeps : bool
        Reciprocating sweeps: each joint in turn, the last first, at
        ``poses_per_joint`` random poses of the others (within 60 % of their range):
        hold, ``sweep_deg`` forward at ``speed_deg`` (deg/s), hold, back, hold.
    sweep_joints : sequence of str, optional
        Sweep only these joints (default all).
    holds : int
        Then (or only) this many static holds of ``hold_s`` s at random poses.
    slow_moves : bool
        Move between holds at ``slow_speed_deg`` (deg/s) instead of ``move_speed_deg``.

    Returns
    -------
    times : ndarray, (W,)
        s from the start.
    waypoints : ndarray, (W, n)
        rad.
    """
    lo, hi = arm.box(0.6)
    times, points = [0.0], [arm.random_poses(rng, 1)[0]]

    def go(q, speed_deg):
        dist = np.max(np.abs(q - points[-1]))
        times.append(times[-1] + max(0.5, dist / np.deg2rad(speed_deg)))
        points.append(np.array(q, dtype=float))

    def hold(seconds):
        times.append(times[-1] + seconds)
        points.append(points[-1].copy())

    hold(0.5)
    if sweeps:
        swept = [j for j, name in enumerate(arm.joints)
                 if sweep_joints is None or name in sweep_joints]
        for j in reversed(swept):
            for _ in range(poses_per_joint):
                pose = arm.random_poses(rng, 1)[0]
                span = min(np.deg2rad(sweep_deg), hi[j] - lo[j])
                pose[j] = rng.uniform(lo[j], hi[j] - span)
                go(pose, move_speed_deg)
                hold(1.0)
                end = pose.copy()
                end[j] += span
                go(end, speed_deg)
                hold(0.5)
                go(pose, speed_deg)
                hold(0.5)
    for _ in range(holds):
        go(arm.random_poses(rng, 1)[0], slow_speed_deg if slow_moves else move_speed_deg)
        hold(hold_s)
    return np.array(times), np.array(points)


def sample_path(times, waypoints, stamps, ramp_s=0.25, fine_rate=1000.0):
    """Angles and velocities of the smoothed path at ``stamps``.

    The piecewise-linear path is sampled at ``fine_rate``, smoothed by a moving
    average of ``ramp_s`` (trapezoidal velocity), then interpolated at ``stamps``.

    Returns
    -------
    Q, V : ndarray, (N, n)
        rad, rad/s.
    """
    tf = np.arange(0.0, times[-1] + 1e-9, 1.0 / fine_rate)
    Qf = np.column_stack([np.interp(tf, times, waypoints[:, k])
                          for k in range(waypoints.shape[1])])
    Qf = _smooth(tf, Qf, ramp_s)
    Vf = np.gradient(Qf, tf, axis=0)
    Q = np.column_stack([np.interp(stamps, tf, Qf[:, k]) for k in range(Qf.shape[1])])
    V = np.column_stack([np.interp(stamps, tf, Vf[:, k]) for k in range(Vf.shape[1])])
    return Q, V


def sample_times(duration, rng, rate=100.0, uneven=False):
    """Message times (s from the start) over ``duration`` s.

    ``uneven``: steps drawn uniformly in [0.8, 1.6] / ``rate`` (at 100 Hz: 8-16 ms,
    as UR RTDE logs come); otherwise exactly ``1 / rate`` (jitter-free driver clock).
    """
    if not uneven:
        return np.arange(0.0, duration, 1.0 / rate)
    steps = rng.uniform(0.8, 1.6, size=int(duration * rate / 0.8) + 2) / rate
    t = np.concatenate([[0.0], np.cumsum(steps)])
    return t[t < duration]


# ---------------------------------------------------------------------------
# torque

@dataclass
class TorqueModel:
    """What is added to gravity, in fractions of each joint's torque scale.

    The scale of joint j is max(max |G_j| over the recording, 1 % of the arm's
    largest), so a joint whose gravity torque is near zero (a vertical first axis)
    still sees friction and noise.

    Attributes
    ----------
    coulomb, viscous : float
        Coulomb friction (fraction of the scale) and viscous friction (fraction of the
        scale per rad/s); Coulomb is smoothed as tanh(v / ``v_eps``).
    noise : float
        Standard deviation of the measurement noise (fraction of the scale).
    gross : int
        Number of gross errors: single samples of one joint off by 3-10 scales.
    v_eps : float
        rad/s.
    """

    coulomb: float = 0.03
    viscous: float = 0.05
    noise: float = 0.005
    gross: int = 5
    v_eps: float = 2e-3


def joint_torques(arm, Q, V, rng, torque=None, extra=None):
    """Measured joint torque of the true arm.

    Returns
    -------
    tau : ndarray, (N, n)
        N·m.
    gravity : ndarray, (N, n)
        The noise-free gravity part, N·m.
    scale : ndarray, (n,)
        N·m, see :class:`TorqueModel`.
    """
    torque = torque or TorqueModel()
    G = arm.gravity(Q, extra)
    gmax = np.abs(G).max(axis=0)
    scale = np.maximum(gmax, 0.01 * gmax.max())
    tau = G + scale * (torque.coulomb * np.tanh(V / torque.v_eps) + torque.viscous * V)
    tau += rng.normal(0.0, 1.0, tau.shape) * torque.noise * scale
    rows = rng.choice(tau.shape[0], size=torque.gross, replace=False)
    cols = rng.integers(0, arm.n, size=torque.gross)
    tau[rows, cols] += rng.choice([-1.0, 1.0], torque.gross) * rng.uniform(3, 10, torque.gross) \
        * scale[cols]
    return tau, G, scale


def realistic_sweeps(arm, holding, rng, poses_per_joint=5, rate=100.0, asymmetry=0.2,
                     load_friction=0.05, viscous=0.02, noise=0.01, speed_deg=15.0):
    """t, q, τ (N,), (N, n), (N, n) of a sweep recording (:func:`excitation`, 40° sweeps)
    with the friction of a geared arm: Coulomb friction ``holding`` (n,) N·m, ``asymmetry``
    stronger one way, plus ``load_friction`` of |gravity| (grows with the load), viscous
    ``viscous`` × holding per rad/s; a still joint holds a random torque within ± its
    ``holding``, new at every hold (pairs do not cancel it); white noise ``noise`` of
    each joint's largest gravity torque; sweeps at ``speed_deg`` °/s."""
    times, points = excitation(arm, rng, sweeps=True, poses_per_joint=poses_per_joint,
                               sweep_deg=40.0, speed_deg=speed_deg)
    t = sample_times(times[-1], rng, rate)
    q, v = sample_path(times, points, t)
    g = arm.gravity(q)
    holding = np.asarray(holding, dtype=float)
    moving = np.abs(v) > 1e-3
    direction = np.sign(v)
    coulomb = holding * (1 + asymmetry * direction) + load_friction * np.abs(g)
    tau = g + np.where(moving, coulomb * direction + viscous * holding * v, 0.0)
    for j in range(arm.n):
        still = (~moving[:, j]).astype(int)
        for start in np.flatnonzero(np.diff(np.concatenate([[0], still])) == 1):
            rest = moving[start:, j]
            end = start + int(np.argmax(rest)) if rest.any() else len(t)
            tau[start:end, j] += rng.uniform(-1, 1) * holding[j]
    tau += rng.standard_normal(tau.shape) * noise * np.abs(g).max(axis=0)
    return t, q, tau


def torque_scale(arm, floor=2.0):
    """(n,) N·m: each joint's largest gravity torque of the ``arm`` over 50 random poses
    (seeded), at least ``floor``: the scale ``soft_friction`` sizes its terms by."""
    poses = arm.random_poses(np.random.default_rng(5), 50)
    return np.maximum(np.abs(arm.gravity(poses)).max(axis=0), floor)


def soft_friction(scale, rng):
    """A friction unlike the fit's own law, as torque-sensed arms show it (a Panda's): per
    joint ``f1·(tanh((q̇ + f3) / ε) − tanh(f3 / ε)) + fv·q̇ + fo``, a Coulomb level rising
    over ε = 0.1-0.4 rad/s, its centre shifted by f3 (±0.04 rad/s: stronger one way,
    zero at rest), viscous and a sensor's constant offset. ``scale`` (n,) N·m: each
    joint's torque scale (``torque_scale``); f1 is 4-10 % of it, fv 10-40 % of f1 per
    rad/s, fo ±2 % of it.
    Returns a function of q̇ (N, n) -> friction torque (N, n) N·m."""
    scale = np.asarray(scale, dtype=float)
    n = len(scale)
    f1 = scale * rng.uniform(0.04, 0.10, n)
    eps = 2.0 / rng.uniform(5.0, 20.0, n)
    f3 = rng.uniform(-0.04, 0.04, n)
    fv = f1 * rng.uniform(0.1, 0.4, n)
    fo = scale * rng.uniform(-0.02, 0.02, n)

    def friction(dq):
        return f1 * (np.tanh((dq + f3) / eps) - np.tanh(f3 / eps)) + fv * dq + fo
    return friction


def _rests(t, holds, ramp=0.5):
    """The speed ``s`` (N,) along the motion and its rate: 1, down to 0 over ``ramp`` s
    before each hold ``(start, seconds)`` of ``holds`` (recording time), 0 through it,
    back up over ``ramp`` s."""
    s = np.ones_like(t)
    for start, seconds in holds:
        x = np.clip(np.maximum(start - t, t - start - seconds) / ramp, 0.0, 1.0)
        s = np.minimum(s, 0.5 * (1.0 - np.cos(np.pi * x)))
    return s, np.gradient(s, t)


def realistic_fourier(arm, holding, rng, rate=200.0, encoder=0.0, seconds=30.0,
                      base_hz=0.1, armature=0.0, friction=None, amplitude=None, holds=()):
    """t, q measured, τ (N,), (N, n), (N, n) of a rich recording of the true ``arm``: 4
    harmonics of ``base_hz`` about the middle of each joint's range, amplitude min(0.8
    rad, a quarter of the range); τ is pinocchio's RNEA plus Coulomb friction
    ``holding`` (n,) N·m (``tanh(q̇ / 1e-3)``), viscous friction 0.3 × that per rad/s,
    a rotor inertia ``armature`` (kg·m², each joint; URDFs have none) and white noise
    of 0.5 % of each joint's largest rigid-body torque; q carries white encoder noise
    ``encoder`` (rad). ``friction``: a function of q̇ (N, n) giving the friction torque
    (N, n) N·m instead (``holding`` then unused). ``amplitude`` (n,): a factor on each
    joint's amplitude (a joint that barely moves). ``holds``: ``(start, seconds)`` in the
    recording's time where the arm slows to rest over 0.5 s, holds still (each joint then
    holds a friction drawn within ± its ``holding``, stiction) and goes on: the recording
    is longer by the holds."""
    from arm_dyn_id.excitation.plans import fourier_series, rest_fourier_coefficients
    n = arm.n
    ell = np.arange(1, 5)
    a, b = rest_fourier_coefficients(rng.standard_normal((n, 4)) / ell,
                                     rng.standard_normal((n, 4)) / ell)
    omega = 2 * np.pi * base_hz
    t = np.arange(int(seconds * rate)) / rate
    q, _, _ = fourier_series(t, omega, a, b, np.zeros(n))
    s = np.minimum(0.8, (arm.upper - arm.lower) / 4) / np.abs(q).max(axis=0)
    if amplitude is not None:
        s = s * np.asarray(amplitude, dtype=float)
    if holds:
        # the same motion along a phase that stops at the holds: q(φ(t)), φ' = speed
        t = np.arange(int((seconds + sum(h for _, h in holds) + len(holds)) * rate)) / rate
        speed, accel = _rests(t, holds)
        phase = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) / rate)])
        t, speed, accel, phase = (x[phase <= seconds] for x in (t, speed, accel, phase))
        q, dq, ddq = fourier_series(phase, omega, a * s[:, None], b * s[:, None],
                                    (arm.lower + arm.upper) / 2)
        dq, ddq = dq * speed[:, None], ddq * speed[:, None] ** 2 + dq * accel[:, None]
    else:
        q, dq, ddq = fourier_series(t, omega, a * s[:, None], b * s[:, None],
                                    (arm.lower + arm.upper) / 2)
    idx_v = [arm.model.joints[arm.model.getJointId(j)].idx_v for j in arm.joints]
    extra = {e: 0.01 for e in arm.extra}
    v, acc = np.zeros(arm.model.nv), np.zeros(arm.model.nv)
    rigid = np.empty_like(q)
    for i in range(len(t)):
        v[idx_v], acc[idx_v] = dq[i], ddq[i]
        rigid[i] = pin.rnea(arm.model, arm.data, arm.configuration(q[i], extra), v,
                            acc)[idx_v]
    if friction is None:
        holding = np.asarray(holding, dtype=float)

        def friction(v):
            return holding * np.tanh(v / 1e-3) + 0.3 * holding * v
    tau = rigid + friction(dq) + armature * ddq + \
        rng.standard_normal(q.shape) * 0.005 * np.abs(rigid).max(axis=0)
    for start, seconds in holds:
        still = (t >= start) & (t <= start + seconds)
        tau[still] += rng.uniform(-1.0, 1.0, arm.n) * np.asarray(holding, dtype=float)
    return t, (q + rng.normal(0.0, encoder, q.shape) if encoder > 0 else q), tau


def torque_constants(scale, rng):
    """Plausible motor torque constants k_e (n,) N·m/A (joint side, gear included).

    Chosen so that each joint's largest current is 2-8 A; three significant digits.

    Parameters
    ----------
    scale : ndarray, (n,)
        N·m, each joint's torque scale.
    """
    k = scale / rng.uniform(2.0, 8.0, scale.shape)
    digits = 2 - np.floor(np.log10(k)).astype(int)
    return np.array([round(float(x), int(d)) for x, d in zip(k, digits)])


# ---------------------------------------------------------------------------
# the bag

@dataclass
class ArmBag:
    """A written bag and the truth behind it.

    Attributes
    ----------
    path : Path
    joints : tuple of str
        The arm's joints as the URDF names them.
    names : tuple of str
        ``JointState.name`` as written (prefixed, shuffled, with extras).
    torque_constants : ndarray, (n,)
        k_e (N·m/A) the currents were made with (URDF joint order).
    scale : ndarray, (n,)
        N·m: each joint's torque scale (see :class:`TorqueModel`).
    t : ndarray, (N,)
        Log times (s since the epoch).
    q, tau : ndarray, (N, n)
        Angles (rad) and the measured torque before any fault (N·m), URDF order.
    extra_positions : dict
        {URDF name: position} of the extra joints that are in the URDF.
    """

    path: Path
    joints: tuple
    names: tuple
    torque_constants: np.ndarray
    scale: np.ndarray
    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    extra_positions: dict = field(default_factory=dict)

    @property
    def k_text(self):
        """The ``--torque-constants`` value: k_e in URDF joint order."""
        return ','.join(repr(float(k)) for k in self.torque_constants)


def write_arm_bag(path, arm, seed=0, rate=100.0, uneven=False, effort='current', k_e=None,
                  prefix='', rename=None, gripper=(), second_arm=None, shuffle=False,
                  zero_stamps=False, storage='mcap', version=9, torque=None, flip=(), swap=None,
                  effort_scale=None, t_offset=0.0, **motion):
    """Synthesise a recording of ``arm``; write it as ``ros2 bag record /joint_states`` would.

    Parameters
    ----------
    path : path-like
        New bag folder.
    arm : Arm
    seed : int
    rate : float
        Hz (100 to 1000).
    uneven : bool
        Steps of 0.8-1.6 / rate (see :func:`sample_times`).
    effort : {'current', 'torque'}
        Motor current torque / k_e (A), or the joint torque (N·m).
    k_e : array_like, (n,), optional
        Torque constants, default :func:`torque_constants`.
    prefix : str
        Prepended to every joint name (``ur_`` gives ``ur_shoulder_pan_joint``).
    rename : dict, optional
        {URDF name: name in the message} for joints the driver names differently
        (``--joint-map``); the prefix is not added to these.
    gripper : sequence of str
        Extra joints not in the URDF (gripper fingers): position 0.01 m, zero effort.
        The URDF's own non-arm joints (:attr:`Arm.extra`) are always written likewise.
    second_arm : str, optional
        Also publish a second arm of the same kind: its joints named with this prefix,
        moving (the recording played backwards) and loaded (non-zero effort).
    shuffle : bool
        Joint order of the message drawn at random (one order for the whole bag).
    zero_stamps : bool
        Header stamps all zero (only the log time carries time).
    storage : {'mcap', 'sqlite3'}
    version : {8, 9}
        rosbag2 metadata version.
    torque : TorqueModel, optional
    flip : sequence of str
        Faults: joints whose effort sign is reversed.
    swap : (str, str), optional
        Fault: the effort of these two joints exchanged.
    effort_scale : dict, optional
        Fault: {joint: factor} multiplying the effort (a wrong k_e seen from the bag).
    t_offset : float
        Seconds added to the log time (for a second bag recorded later).
    **motion
        Passed to :func:`excitation`.

    Returns
    -------
    ArmBag
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    rng = np.random.default_rng(seed)
    times, points = excitation(arm, rng, **motion)
    t = sample_times(times[-1], rng, rate, uneven)
    Q, V = sample_path(times, points, t)
    extra_pos = {n: 0.01 for n in arm.extra}
    tau, _, scale = joint_torques(arm, Q, V, rng, torque, extra_pos)
    k_e = torque_constants(scale, rng) if k_e is None else np.asarray(k_e, dtype=float)
    data = tau / k_e if effort == 'current' else tau.copy()
    index = {n: k for k, n in enumerate(arm.joints)}
    for name in flip:
        data[:, index[name]] *= -1.0
    for name, factor in (effort_scale or {}).items():
        data[:, index[name]] *= factor
    if swap is not None:
        a, b = index[swap[0]], index[swap[1]]
        data[:, [a, b]] = data[:, [b, a]]
    # the message: arm joints, then extras (URDF fingers, other grippers)
    extras = list(arm.extra) + list(gripper)
    rename = rename or {}
    names = [rename.get(n, prefix + n) for n in list(arm.joints) + extras]
    pos = np.hstack([Q, np.full((len(t), len(extras)), 0.01)])
    vel = np.hstack([V, np.zeros((len(t), len(extras)))])
    eff = np.hstack([data, np.zeros((len(t), len(extras)))])
    if second_arm is not None:
        names += [second_arm + n for n in arm.joints]
        pos = np.hstack([pos, Q[::-1]])
        vel = np.hstack([vel, -V[::-1]])
        eff = np.hstack([eff, data[::-1]])
    order = rng.permutation(len(names)) if shuffle else np.arange(len(names))
    names = [names[i] for i in order]
    pos, vel, eff = pos[:, order], vel[:, order], eff[:, order]
    # log time: receipt, 0.2-2 ms after the driver's stamp, never going backwards
    stamps = T0_NS / 1e9 + t_offset + t
    log = np.round((stamps + rng.uniform(2e-4, 2e-3, len(t))) * 1e9).astype(np.int64)
    log[1:] = np.maximum(log[1:], log[:-1] + 1)
    raw = encode_joint_states(np.zeros_like(stamps) if zero_stamps else stamps, names,
                              pos, vel, eff)
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Writer(Path(path), version=version, storage_plugin=plugin) as writer:
        conn = writer.add_connection('/joint_states', JOINT_STATE, typestore=typestore())
        for i in range(len(t)):
            writer.write(conn, int(log[i]), raw[i].tobytes())
    return ArmBag(path=Path(path), joints=arm.joints, names=tuple(names), torque_constants=k_e,
                  scale=scale, t=log / 1e9, q=Q, tau=tau,
                  extra_positions=extra_pos)


def read_back(path):
    """Topics and decoded messages of a bag, read with rosbags alone (the oracle).

    Returns
    -------
    topics : dict
        {topic: (msgtype, message count)}.
    messages : list of (int, object)
        (log time ns, deserialised JointState) of every message.
    """
    from rosbags.rosbag2 import Reader
    store = typestore()
    with Reader(Path(path)) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        messages = [(ts, store.deserialize_cdr(raw, c.msgtype))
                    for c, ts, raw in reader.messages()]
    return topics, messages
