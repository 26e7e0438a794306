"""Free-floating robots from a URDF: momentum and contact-wrench regressors, CoM, ZMP.

The URDF's root link is carried by pinocchio's free-flyer joint (``root_joint``). A
configuration is ``[p (3), quaternion x y z w (4), q (n)]`` and a velocity
``[v (3), ω (3), q̇ (n)]`` with the base twist in the base's own frame (pinocchio's
convention). Link parameters per body are pinocchio's ten,
``m, m·cx, m·cy, m·cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz`` (first moment and inertia about the
body frame origin, in the body frame), body 0 being the root link.

Everything a floating-base identification needs is linear in those parameters φ:

- the system's spatial momentum about the world origin, in world axes,
  ``h = A(q, v) φ`` (seed 002 eqs. 3-4: linear momentum ``M ṙ_g`` and angular
  momentum ``L``): the base rows of ``M(q) v`` are the momentum in the base frame, and
  pinocchio's joint-torque regressor at zero velocity, zero gravity and ``q̈ = v`` gives
  exactly those rows;
- the total external wrench (contact forces) about the world origin,
  ``w = ḣ - w_gravity = W(q, v, v̇) φ`` (Ayusawa's base-link equation, seed 003 eq. 2):
  the base rows of the joint-torque regressor with gravity;
- the zero-moment point on flat ground, ``x = -n_y / f_z``, ``y = n_x / f_z`` of that
  wrench (seed 003 eqs. 5-8): a ratio of two linear forms in φ;
- the centre of mass, ``c = Σ (m_i p_i + R_i (m c)_i) / Σ m_i``.
"""

import numpy as np
import pinocchio as pin

from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.model.robot import INERTIAL_PARAMS, load_urdf_model

ROOT_JOINT = 'root_joint'


def _skew(v):
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def dynamic_parameters(mass, com, inertia_at_com):
    """pinocchio's ten parameters of one body from mass (kg), CoM (3, m, body frame)
    and inertia about the CoM (3x3, kg·m², body axes)."""
    return pin.Inertia(float(mass), np.asarray(com, float),
                       np.asarray(inertia_at_com, float)).toDynamicParameters()


def zmp_from_sensors(forces, positions, min_force=1.0):
    """Centre of pressure of normal-force sensors on flat ground (seed 003 §3: four
    pressure sensors in each sole); on flat ground it is the ZMP.

    Parameters
    ----------
    forces : ndarray, (N, k)
        Normal force of each sensor (N); negative readings are noise and count as 0.
    positions : ndarray, (k, 3) or (N, k, 3)
        Sensor positions in the world (m).
    min_force : float
        Below this total (N) the robot is not standing on the sensors.

    Returns
    -------
    ndarray, (N, 2)

    Raises
    ------
    DataError
        On wrong shapes, non-finite values, or a sample whose total force is below
        ``min_force`` (the robot was lifted or the sensors are disconnected).
    """
    f = np.asarray(forces, dtype=float)
    p = np.asarray(positions, dtype=float)
    if f.ndim != 2:
        raise DataError(f'foot sensor forces must be (samples, sensors), got shape {f.shape}')
    if p.shape not in ((f.shape[1], 3), (f.shape[0], f.shape[1], 3)):
        raise DataError(f'foot sensor positions must be ({f.shape[1]}, 3) or '
                        f'({f.shape[0]}, {f.shape[1]}, 3) for {f.shape[1]} sensors, '
                        f'got shape {p.shape}')
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(p))):
        bad = int(np.flatnonzero(~np.all(np.isfinite(f), axis=1))[0]) \
            if not np.all(np.isfinite(f)) else 0
        raise DataError(f'foot sensor data is not finite (first bad sample {bad})')
    f = np.maximum(f, 0.0)
    total = f.sum(axis=1)
    low = np.flatnonzero(total < min_force)
    if low.size:
        raise DataError(f'foot sensors carry {total[low[0]]:.3g} N at sample {low[0]} '
                        f'(less than {min_force:g} N): the robot is not standing on them')
    if p.ndim == 2:
        return (f @ p[:, :2]) / total[:, None]
    return np.einsum('nk,nkj->nj', f, p[:, :, :2]) / total[:, None]


class FloatingModel:
    """A robot whose root link floats (free-flyer joint), from a URDF.

    Parameters
    ----------
    urdf : str or Path

    Attributes
    ----------
    joint_names : tuple of str
        Actuated joints (URDF order), n.
    body_names : tuple of str
        The root link, then the link each joint moves (pinocchio merges fixed links
        into their parent), nb = n + 1.
    parameter_names : tuple of str
        ``'<body>.<param>'``, (10·nb,).
    """

    def __init__(self, urdf):
        self.source = str(urdf)
        load_urdf_model(urdf)              # raises URDFError naming the file
        self.model = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
        self.data = self.model.createData()
        self._zero_g = self.model.copy()
        self._zero_g.gravity.linear[:] = 0.0
        self._zero_g_data = self._zero_g.createData()
        names = list(self.model.names)
        self.joint_names = tuple(names[2:])
        self.n = len(self.joint_names)
        self.nq, self.nv = self.model.nq, self.model.nv
        frames = {}
        for f in self.model.frames:
            if f.type == pin.FrameType.BODY and f.parentJoint not in frames:
                frames[f.parentJoint] = f.name
        self.body_names = tuple(frames[j] for j in range(1, self.model.njoints))
        self.parameter_names = tuple(f'{b}.{p}' for b in self.body_names
                                     for p in INERTIAL_PARAMS)
        self.total_mass = float(sum(i.mass for i in self.model.inertias[1:]))

    # ----------------------------------------------------------------- parameters
    def parameters(self):
        """The URDF's link parameters φ, (10·nb,)."""
        return np.concatenate([i.toDynamicParameters() for i in self.model.inertias[1:]])

    def index(self, body, param):
        """Position of ``param`` (e.g. ``'m'``, ``'Izz'``) of ``body`` in φ."""
        try:
            return self.body_names.index(body) * 10 + INERTIAL_PARAMS.index(param)
        except ValueError:
            raise JointNameError(f'{body}.{param} is not a parameter of {self.source} '
                                 f'(bodies {list(self.body_names)}, parameters '
                                 f'{list(INERTIAL_PARAMS)})') from None

    def mass_vector(self):
        """c with ``c·φ`` = total mass, (10·nb,)."""
        c = np.zeros(10 * len(self.body_names))
        c[::10] = 1.0
        return c

    def joint_index(self, name):
        if name not in self.joint_names:
            raise JointNameError(f'joint {name!r} is not in {self.source} '
                                 f'(its joints: {list(self.joint_names)})')
        return self.joint_names.index(name)

    # -------------------------------------------------------------- state helpers
    def configuration(self, base_position, base_quaternion_xyzw, q):
        """Stack base pose and joint angles into pinocchio configurations, (N, nq)."""
        p = np.atleast_2d(np.asarray(base_position, float))
        quat = np.atleast_2d(np.asarray(base_quaternion_xyzw, float))
        q = np.atleast_2d(np.asarray(q, float))
        if p.shape[1] != 3 or quat.shape[1] != 4 or q.shape[1] != self.n or \
                not len(p) == len(quat) == len(q):
            raise DataError(f'base positions (N, 3), quaternions (N, 4) and joint angles '
                            f'(N, {self.n}) expected, got {p.shape}, {quat.shape}, {q.shape}')
        norm = np.linalg.norm(quat, axis=1)
        if not np.all(np.isfinite(norm)) or np.any(np.abs(norm - 1.0) > 1e-3):
            bad = int(np.flatnonzero(~(np.abs(norm - 1.0) <= 1e-3))[0])
            raise DataError(f'base orientation at sample {bad} is not a unit quaternion '
                            f'(norm {norm[bad]:.4g})')
        return np.hstack([p, quat / norm[:, None], q])

    def velocity(self, Q, base_linear_world, base_angular_local, dq):
        """Stack base twist and joint rates into pinocchio velocities, (N, nv).

        The base's linear velocity is given in world axes (odometry's usual
        ``twist`` after rotation, MuJoCo's free joint), its angular velocity in the base
        frame (a gyro); pinocchio wants both in the base frame.
        """
        Q = np.atleast_2d(Q)
        vw = np.atleast_2d(np.asarray(base_linear_world, float))
        w = np.atleast_2d(np.asarray(base_angular_local, float))
        dq = np.atleast_2d(np.asarray(dq, float))
        if vw.shape != (len(Q), 3) or w.shape != (len(Q), 3) or dq.shape != (len(Q), self.n):
            raise DataError(f'base velocities (N, 3) x 2 and joint rates (N, {self.n}) '
                            f'expected for N={len(Q)}, got {vw.shape}, {w.shape}, {dq.shape}')
        v_local = np.empty_like(vw)
        for k in range(len(Q)):
            R = pin.Quaternion(Q[k, 3:7]).toRotationMatrix()
            v_local[k] = R.T @ vw[k]
        return np.hstack([v_local, w, dq])

    def _check(self, Q, V=None, A=None):
        Q = np.atleast_2d(np.asarray(Q, float))
        if Q.shape[1] != self.nq:
            raise DataError(f'configurations must have {self.nq} columns, got {Q.shape}')
        out = [Q]
        for X in (V, A):
            if X is not None:
                X = np.atleast_2d(np.asarray(X, float))
                if X.shape != (len(Q), self.nv):
                    raise DataError(f'velocities / accelerations must be ({len(Q)}, '
                                    f'{self.nv}), got {X.shape}')
                out.append(X)
        for X in out:
            if not np.all(np.isfinite(X)):
                raise DataError('configurations / velocities / accelerations are not finite')
        return out

    @staticmethod
    def _to_world(Q, local):
        """Base-frame wrench-like rows [f; n about the base origin] (N, 6, p) -> world
        axes about the world origin."""
        out = np.empty_like(local)
        for k in range(len(Q)):
            R = pin.Quaternion(Q[k, 3:7]).toRotationMatrix()
            f = R @ local[k, :3]
            out[k, :3] = f
            out[k, 3:] = R @ local[k, 3:] + _skew(Q[k, :3]) @ f
        return out

    # ----------------------------------------------------------------- regressors
    def momentum_regressor(self, Q, V):
        """A with ``h = A φ``: linear and angular momentum about the world origin in
        world axes (seed 002 eqs. 3-4), (N, 6, 10·nb)."""
        Q, V = self._check(Q, V)
        zero = np.zeros(self.nv)
        local = np.stack([pin.computeJointTorqueRegressor(self._zero_g, self._zero_g_data,
                                                          q, zero, v)[:6]
                          for q, v in zip(Q, V)])
        return self._to_world(Q, local)

    def wrench_regressor(self, Q, V, A):
        """W with ``w = W φ``: the total external wrench on the robot (force; moment
        about the world origin), world axes, gravity included, (N, 6, 10·nb)."""
        Q, V, A = self._check(Q, V, A)
        local = np.stack([pin.computeJointTorqueRegressor(self.model, self.data, q, v, a)[:6]
                          for q, v, a in zip(Q, V, A)])
        return self._to_world(Q, local)

    def joint_torque_regressor(self, Q, V, A):
        """Rows of the actuated joints, (N, n, 10·nb): ``τ = Y φ`` when no external
        force acts on the bodies past the joint (a swing leg, an arm in free space)."""
        Q, V, A = self._check(Q, V, A)
        return np.stack([pin.computeJointTorqueRegressor(self.model, self.data, q, v, a)[6:]
                         for q, v, a in zip(Q, V, A)])

    def momentum(self, Q, V, phi=None):
        """System momentum [linear; angular about the world origin], (N, 6)."""
        phi = self.parameters() if phi is None else np.asarray(phi, float)
        return self.momentum_regressor(Q, V) @ phi

    def com(self, Q, phi=None):
        """Whole-body centre of mass from masses and first moments, (N, 3) (m)."""
        phi = self.parameters() if phi is None else np.asarray(phi, float)
        Q = self._check(Q)[0]
        m = phi[::10]
        first = phi.reshape(-1, 10)[:, 1:4]
        out = np.empty((len(Q), 3))
        for k, q in enumerate(Q):
            pin.forwardKinematics(self.model, self.data, q)
            acc = np.zeros(3)
            for b in range(len(m)):
                M = self.data.oMi[b + 1]
                acc += m[b] * M.translation + M.rotation @ first[b]
            out[k] = acc / m.sum()
        return out

    def frame_id(self, frame):
        """pinocchio id of a link (body) frame."""
        if not self.model.existFrame(frame, pin.FrameType.BODY):
            raise JointNameError(f'link {frame!r} is not in {self.source}')
        return self.model.getFrameId(frame, pin.FrameType.BODY)

    def frame_pose(self, q, frame):
        """World pose (pin.SE3) of a frame at one configuration."""
        fid = self.frame_id(frame)
        pin.framesForwardKinematics(self.model, self.data, q)
        return pin.SE3(self.data.oMf[fid])       # a copy: data is overwritten next call

    def identified_urdf(self, phi):
        """The URDF's text with every body's ``<inertial>`` replaced by ``phi``'s mass,
        CoM and inertia about the CoM (what a served floating model loads).

        Raises
        ------
        DataError
            If ``phi`` has the wrong length or a body's mass is not positive.
        """
        import xml.etree.ElementTree as ET
        phi = np.asarray(phi, float)
        if phi.shape != (10 * len(self.body_names),):
            raise DataError(f'phi must have {10 * len(self.body_names)} entries, '
                            f'got {phi.shape}')
        root = ET.parse(self.source).getroot()
        links = {link.get('name'): link for link in root.iter('link')}
        for b, body in enumerate(self.body_names):
            p = phi[10 * b:10 * b + 10]
            if not p[0] > 0:
                raise DataError(f'{body}: mass {p[0]:.6g} kg is not positive')
            inertia = pin.Inertia.FromDynamicParameters(p)
            link = links[body]
            old = link.find('inertial')
            if old is not None:
                link.remove(old)
            el = ET.Element('inertial')
            c = inertia.lever
            ET.SubElement(el, 'origin', xyz=' '.join(f'{x:.9g}' for x in c), rpy='0 0 0')
            ET.SubElement(el, 'mass', value=f'{inertia.mass:.9g}')
            ic = inertia.inertia
            ET.SubElement(el, 'inertia', **{k: f'{ic[a, b]:.9g}' for k, (a, b) in (
                ('ixx', (0, 0)), ('ixy', (0, 1)), ('ixz', (0, 2)), ('iyy', (1, 1)),
                ('iyz', (1, 2)), ('izz', (2, 2)))})
            link.insert(0, el)
        return ET.tostring(root, encoding='unicode')

    def base_from_foot(self, q_joints, foot_frame, foot_pose):
        """Base poses from joint angles when a foot stands still at a known pose (no
        motion capture: seed 003 §3). Returns configurations (N, nq)."""
        q_joints = np.atleast_2d(np.asarray(q_joints, float))
        if q_joints.shape[1] != self.n:
            raise DataError(f'joint angles must have {self.n} columns, got {q_joints.shape}')
        out = np.empty((len(q_joints), self.nq))
        foot_pose = pin.SE3(foot_pose)
        for k, qj in enumerate(q_joints):
            q = np.concatenate([[0, 0, 0, 0, 0, 0, 1.0], qj])
            base = foot_pose * self.frame_pose(q, foot_frame).inverse()
            out[k] = np.concatenate([base.translation,
                                     pin.Quaternion(base.rotation).coeffs(), qj])
        return out


def zmp_rows(W):
    """Split a wrench regressor (N, 6, p) into the ZMP's numerator and denominator:
    ``x = X φ / F φ``, ``y = Y φ / F φ`` with ``F`` the vertical force row
    (seed 003 eqs. 5-8 on flat ground at height 0). Returns X, Y, F, each (N, p)."""
    return -W[:, 4], W[:, 3], W[:, 2]


def zmp(W, phi):
    """ZMP (N, 2) of a wrench regressor and parameters."""
    X, Y, F = zmp_rows(W)
    fz = F @ phi
    return np.stack([X @ phi / fz, Y @ phi / fz], axis=1)
