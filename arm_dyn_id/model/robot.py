"""Rigid-body model of an arm from its URDF, and its linear regressors.

The dynamics are linear in the link parameters (pinocchio's ordering per body:
``m, m·cx, m·cy, m·cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz``, first moments and inertia
about the joint frame origin, in the joint frame):

- gravity: ``G(q) = Y_g(q) θ_g`` with θ_g the 4 mass parameters of every body
  (seed 000 eqs. 5-8, where the same product carries g inside φ_G);
- full dynamics with friction: ``τ = Y(q, q̇, q̈) θ + F_c sign(q̇) + F_v q̇``
  (seed 001 eqs. 2-6).

:meth:`RobotModel.gravity_regressor` evaluates Y_g for many configurations at
once with NumPy from the analytic form ``∂V/∂q_i`` instead of one pinocchio call
per sample: per body k and ancestor joint i,
``Y_g[i, m_k] = -(p_k - p_i)·(g × z_i)`` and ``Y_g[i, h_k] = -R_kᵀ (g × z_i)``.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from arm_dyn_id.errors import JointNameError, URDFError

GRAVITY_PARAMS = ('m', 'mx', 'my', 'mz')
INERTIAL_PARAMS = ('m', 'mx', 'my', 'mz', 'Ixx', 'Ixy', 'Iyy', 'Ixz', 'Iyz', 'Izz')
FRICTION_PARAMS = ('fc', 'fv')
#: A joint carries gravity when its gravity torque's RMS is above this share of the
#: most loaded joint's: the joints the gravity checks judge (the others' gravity is
#: within friction and noise).
CARRY_SHARE = 0.05


def carries_gravity(rms):
    """Which joints carry gravity (bool, per joint): a gravity RMS above
    :data:`CARRY_SHARE` of the largest; none when no joint has any."""
    rms = np.asarray(rms, dtype=float)
    top = float(np.max(rms)) if rms.size else 0.0
    return rms > CARRY_SHARE * top if top > 0 else np.zeros(rms.shape, dtype=bool)


_AXES = {'X': np.array([1.0, 0.0, 0.0]), 'Y': np.array([0.0, 1.0, 0.0]),
         'Z': np.array([0.0, 0.0, 1.0])}


def _joint_axis(jmodel):
    """Unit rotation axis of a revolute joint in its own frame, or None."""
    name = jmodel.shortname()
    if name in ('JointModelRX', 'JointModelRY', 'JointModelRZ',
                'JointModelRUBX', 'JointModelRUBY', 'JointModelRUBZ'):
        return _AXES[name[-1]]
    if name in ('JointModelRevoluteUnaligned', 'JointModelRevoluteUnboundedUnaligned'):
        axis = np.asarray(jmodel.axis, dtype=float)
        return axis / np.linalg.norm(axis)
    return None


def _rotations(axis, angles):
    """Rotation matrices about a fixed unit axis, (N,) -> (3, 3, N) (Rodrigues)."""
    c, s = np.cos(angles), np.sin(angles)
    x, y, z = axis
    t = 1.0 - c
    out = np.empty((3, 3) + angles.shape)
    out[0, 0] = c + x * x * t
    out[0, 1] = x * y * t - z * s
    out[0, 2] = x * z * t + y * s
    out[1, 0] = y * x * t + z * s
    out[1, 1] = c + y * y * t
    out[1, 2] = y * z * t - x * s
    out[2, 0] = z * x * t - y * s
    out[2, 1] = z * y * t + x * s
    out[2, 2] = c + z * z * t
    return out


# Lazy 3-vectors and 3x3 matrices for the batch kernel: each entry is either a
# Python float (the same for every sample) or an (N,) array. DH placements and
# joint axes are full of exact zeros and ones; folding them away symbolically
# skips most of the per-sample arithmetic.

def _clean(x):
    x = float(x)
    for c in (0.0, 1.0, -1.0):
        if abs(x - c) < 1e-12:
            return c
    return x


def _mul(a, b):
    a_const, b_const = isinstance(a, float), isinstance(b, float)
    if (a_const and a == 0.0) or (b_const and b == 0.0):
        return 0.0
    if a_const and b_const:
        return a * b
    if a_const:
        a, b = b, a
        a_const, b_const = b_const, a_const
    # a is an array here
    if b_const:
        return a if b == 1.0 else (-a if b == -1.0 else a * b)
    return a * b


def _add(a, b):
    if isinstance(a, float) and a == 0.0:
        return b
    if isinstance(b, float) and b == 0.0:
        return a
    return a + b


def _neg(a):
    return -a


def _dot(u, v):
    out = 0.0
    for x, y in zip(u, v):
        out = _add(out, _mul(x, y))
    return out


def _matmul(A, B):
    """Lazy (3x3) @ (3x3), matrices as tuples of rows."""
    cols = tuple(zip(*B))
    return tuple(tuple(_dot(row, col) for col in cols) for row in A)


def _matvec(A, v):
    return tuple(_dot(row, v) for row in A)


def _const_matrix(R):
    return tuple(tuple(_clean(x) for x in row) for row in np.asarray(R))


def _spin(axis, angle):
    """Lazy rotation about a constant unit axis by angles (N,)."""
    axis = tuple(_clean(a) for a in axis)
    c, s = np.cos(angle), np.sin(angle)
    for k, e in enumerate(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))):
        if axis == e:
            i, j = (k + 1) % 3, (k + 2) % 3
            R = [[0.0] * 3 for _ in range(3)]
            R[k][k] = 1.0
            R[i][i], R[j][j], R[i][j], R[j][i] = c, c, -s, s
            return tuple(tuple(row) for row in R)
    R = _rotations(np.asarray(axis), angle)
    return tuple(tuple(R[a, b] for b in range(3)) for a in range(3))


def load_urdf_model(path):
    """Parse a URDF into a pinocchio model, with errors that name the file.

    Raises
    ------
    URDFError
        If the file does not exist or pinocchio cannot parse it.
    """
    path = Path(path)
    if not path.is_file():
        raise URDFError(f'URDF file {path} does not exist')
    try:
        return pin.buildModelFromUrdf(str(path))
    except (RuntimeError, ValueError) as exc:
        raise URDFError(f'URDF file {path} could not be loaded: {exc}') from exc


@dataclass(frozen=True)
class Payload:
    """A rigid payload at a frame: mass (kg), centre of mass (m, in the frame),
    inertia about the centre of mass (kg·m², 3x3, zero for a point mass)."""

    mass: float
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = None
    frame: str = 'flange'


class RobotModel:
    """An arm's kinematic tree with the joints of interest in a chosen order.

    Joints of the URDF that are not in ``joints`` are locked at zero. All per-joint
    arrays (q, torques, limits) are in the order of :attr:`joint_names`.

    Parameters
    ----------
    pin_model : pinocchio.Model
    joints : sequence of str, optional
        Joint order; default: the model's revolute joints in tree order.
    source : str, optional
        Where the model came from (for messages).
    """

    def __init__(self, pin_model, joints=None, source=None):
        self.source = source or '<model>'
        all_names = list(pin_model.names)[1:]
        if joints is None:
            joints = [n for n in all_names
                      if _joint_axis(pin_model.joints[pin_model.getJointId(n)]) is not None]
        joints = tuple(joints)
        missing = [j for j in joints if j not in all_names]
        if missing:
            raise JointNameError(
                f'joint {missing[0]!r} is not in {self.source} (its joints: {all_names})')
        lock = [pin_model.getJointId(n) for n in all_names if n not in joints]
        if lock:
            pin_model = pin.buildReducedModel(pin_model, lock, pin.neutral(pin_model))
        for name in joints:
            jmodel = pin_model.joints[pin_model.getJointId(name)]
            if _joint_axis(jmodel) is None:
                raise JointNameError(
                    f'joint {name!r} in {self.source} is a {jmodel.shortname()}; '
                    'only revolute joints are supported')
        self.model = pin_model
        self.data = pin_model.createData()
        self.joint_names = joints
        # pinocchio joint index (1..n) of each configured joint, and idx_q/idx_v
        self._jid = np.array([int(pin_model.getJointId(n)) for n in joints], dtype=int)
        self._idx_q = np.array([pin_model.joints[int(j)].idx_q for j in self._jid])
        self._idx_v = np.array([pin_model.joints[int(j)].idx_v for j in self._jid])
        self._nq_joint = np.array([pin_model.joints[int(j)].nq for j in self._jid])
        self._order = np.argsort(self._idx_v)      # config order -> v order
        self._axes = [_joint_axis(pin_model.joints[j]) for j in range(1, pin_model.njoints)]
        # _moves_mask[r, b]: configured joint r moves body b (is b's ancestor or b itself)
        self._placements = [
            (_const_matrix(pin_model.jointPlacements[j].rotation),
             tuple(_clean(x) for x in pin_model.jointPlacements[j].translation))
            for j in range(1, pin_model.njoints)]
        ancestors = self._ancestors()
        self._moves_mask = np.array([[float(j - 1 in ancestors[b]) for b in range(self.n_bodies)]
                                     for j in self._jid])

    # construction -----------------------------------------------------
    @classmethod
    def from_urdf(cls, path, joints=None, gravity=9.81, gravity_direction=(0.0, 0.0, -1.0)):
        """Load a URDF; gravity magnitude (m/s²) and direction in the root frame."""
        robot = cls(load_urdf_model(path), joints=joints, source=str(path))
        robot.set_gravity(gravity, gravity_direction)
        return robot

    @classmethod
    def from_config(cls, config, gravity=None):
        """Build from an :class:`~arm_dyn_id.config.ArmConfig`.

        Raises
        ------
        JointNameError
            If a configured joint is not a revolute joint of the URDF; the message
            names the parameter ``joints``, its value and the joint.
        """
        try:
            return cls.from_urdf(config.urdf, joints=config.joints,
                                 gravity=config.gravity if gravity is None else gravity)
        except JointNameError as exc:
            raise JointNameError(f'parameter joints = {list(config.joints)}: {exc}') from exc

    def copy(self):
        other = RobotModel.__new__(RobotModel)
        other.__dict__.update(self.__dict__)
        other.model = pin.Model(self.model)
        other.data = other.model.createData()
        return other

    # properties -------------------------------------------------------
    @property
    def n_joints(self):
        return len(self.joint_names)

    @property
    def mass_beyond(self):
        """kg, (n,): the mass each joint carries, its own link and every link after it
        (pinocchio's subtree masses; a payload attached counts)."""
        import pinocchio as pin
        data = self.model.createData()
        pin.computeSubtreeMasses(self.model, data)
        return np.array([data.mass[int(j)] for j in self._jid])

    @property
    def beyond(self):
        """bool (n, n): ``beyond[k, i]``, configured joint i lies beyond joint k in the
        kinematic tree (k moves it), whatever order the joints were configured in; a joint
        on another branch is neither beyond nor before."""
        # joint k moves the body joint i moves first (_moves_mask), i itself aside
        beyond = self._moves_mask[:, self._jid - 1] > 0
        np.fill_diagonal(beyond, False)
        return beyond

    @property
    def bounded(self):
        """bool (n,): the joint has finite position limits in the URDF (not continuous)."""
        lo, hi = self.model.lowerPositionLimit, self.model.upperPositionLimit
        return np.array([nq == 1 and bool(np.isfinite(lo[i]) and np.isfinite(hi[i]) and
                                          hi[i] > lo[i])
                         for i, nq in zip(self._idx_q, self._nq_joint)])

    @property
    def position_limits(self):
        """(lower, upper) of each joint from the URDF (rad, (n,) each); a continuous joint,
        or one without finite limits, gets (-π, π)."""
        lower, upper = np.full(self.n_joints, -np.pi), np.full(self.n_joints, np.pi)
        for k, (i, nq) in enumerate(zip(self._idx_q, self._nq_joint)):
            lo, hi = self.model.lowerPositionLimit[i], self.model.upperPositionLimit[i]
            if nq == 1 and np.isfinite(lo) and np.isfinite(hi) and hi > lo:
                lower[k], upper[k] = lo, hi
        return lower, upper

    @property
    def n_bodies(self):
        """Bodies carrying parameters: one per joint of the (reduced) model."""
        return self.model.njoints - 1

    @property
    def body_names(self):
        return tuple(self.model.names)[1:]

    @property
    def gravity_vector(self):
        return np.array(self.model.gravity.linear)

    @property
    def gravity_magnitude(self):
        return float(np.linalg.norm(self.gravity_vector))

    def set_gravity(self, magnitude, direction=None):
        """Set gravity: magnitude (m/s²) along ``direction`` (root frame; default
        the current direction, or -z)."""
        if direction is None:
            g = self.gravity_vector
            direction = g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else (0, 0, -1)
        direction = np.asarray(direction, dtype=float)
        norm = np.linalg.norm(direction)
        if not np.isfinite(magnitude) or magnitude < 0 or norm == 0:
            raise ValueError(f'gravity {magnitude} m/s² along {direction.tolist()} is not valid')
        self.model.gravity.linear = float(magnitude) * direction / norm
        return self

    def with_gravity(self, magnitude, direction=None):
        """A copy of this model under another gravity."""
        return self.copy().set_gravity(magnitude, direction)

    def with_payload(self, payload):
        """A copy with a rigid payload added to the body that carries its frame.

        Raises
        ------
        JointNameError
            If the payload's frame is not in the model.
        """
        if not self.model.existFrame(payload.frame):
            frames = [f.name for f in self.model.frames]
            raise JointNameError(
                f'payload frame {payload.frame!r} is not in {self.source} (frames: {frames})')
        other = self.copy()
        frame = other.model.frames[other.model.getFrameId(payload.frame)]
        inertia = np.zeros((3, 3)) if payload.inertia is None else np.asarray(payload.inertia)
        body = pin.Inertia(float(payload.mass), np.asarray(payload.com, dtype=float), inertia)
        joint = frame.parentJoint if hasattr(frame, 'parentJoint') else frame.parent
        other.model.inertias[joint] = other.model.inertias[joint] + frame.placement.act(body)
        other.data = other.model.createData()
        return other

    # configuration mapping ---------------------------------------------
    def _pin_q(self, q):
        q = np.asarray(q, dtype=float)
        if q.shape != (self.n_joints,):
            raise ValueError(f'q has shape {q.shape}, expected ({self.n_joints},) '
                             f'for joints {list(self.joint_names)}')
        out = pin.neutral(self.model)
        for k in range(self.n_joints):
            if self._nq_joint[k] == 1:
                out[self._idx_q[k]] = q[k]
            else:   # continuous joint: (cos, sin)
                out[self._idx_q[k]:self._idx_q[k] + 2] = (np.cos(q[k]), np.sin(q[k]))
        return out

    def _pin_v(self, v):
        out = np.zeros(self.model.nv)
        out[self._idx_v] = v
        return out

    def check_names(self, names):
        """Index array that maps data given in ``names`` order onto the model's order.

        Raises
        ------
        JointNameError
            Naming a configured joint absent from ``names``.
        """
        lookup = {n: i for i, n in enumerate(names)}
        missing = [j for j in self.joint_names if j not in lookup]
        if missing:
            raise JointNameError(f'joint {missing[0]!r} is missing from the data '
                                 f'(it has {list(names)})')
        return np.array([lookup[j] for j in self.joint_names])

    # single-configuration dynamics -------------------------------------
    def gravity_torques(self, q):
        """G(q) (N·m), (n,) for q (n,), or (N, n) for q (N, n).

        One configuration goes through pinocchio; many go through the batch
        regressor (:meth:`gravity_torques_batch`), the same numbers to ~1e-14.
        """
        q = np.asarray(q, dtype=float)
        if q.ndim == 2:
            return self.gravity_torques_batch(q, self.parameters('gravity'))
        g = pin.computeGeneralizedGravity(self.model, self.data, self._pin_q(q))
        return g[self._idx_v]

    def gravity_torques_batch(self, q, theta, gravity=None):
        """``Y_g(q) @ θ`` for many configurations, without holding all of Y_g.

        Parameters
        ----------
        q : ndarray, (N, n)
            rad, in the order of :attr:`joint_names`.
        theta : ndarray, (4·nb,)
            Mass parameters per body (m, m·c); any values, consistent or not
            (an identified base vector padded with zeros works).
        gravity : array_like (3,), optional
            Gravity vector (default: the model's).

        Returns
        -------
        ndarray, (N, n)
            N·m.
        """
        q = np.atleast_2d(np.asarray(q, dtype=float))
        theta = np.asarray(theta, dtype=float)
        out = np.empty((q.shape[0], self.n_joints))
        step = 8 * self._CHUNK
        for lo in range(0, q.shape[0], step):
            hi = min(lo + step, q.shape[0])
            Y = self.gravity_regressor_joint_major(q[lo:hi], gravity)   # (n, p, M)
            out[lo:hi] = np.einsum('jpm,p->mj', Y, theta)   # (optimize=True is 40x slower)
        return out

    def inverse_dynamics(self, q, dq, ddq):
        """τ = M q̈ + C q̇ + G (N·m), no friction: (n,) for one state, (N, n) for N (their
        layout converted at once, pinocchio's RNEA per sample)."""
        q = np.asarray(q, dtype=float)
        if q.ndim == 2:
            Q, V, A = self.pin_arrays(q, np.asarray(dq, dtype=float),
                                      np.asarray(ddq, dtype=float))
            out = np.empty((len(q), self.n_joints))
            for i in range(len(q)):
                out[i] = pin.rnea(self.model, self.data, Q[i], V[i], A[i])[self._idx_v]
            return out
        tau = pin.rnea(self.model, self.data, self._pin_q(q), self._pin_v(dq), self._pin_v(ddq))
        return tau[self._idx_v]

    def pin_arrays(self, q, dq, ddq):
        """Configurations, velocities and accelerations (N, n) in pinocchio's layout: (N,
        nq), (N, nv), (N, nv) (a continuous joint's angle as cos, sin)."""
        N = q.shape[0]
        Q = np.tile(pin.neutral(self.model), (N, 1))
        V = np.zeros((N, self.model.nv))
        A = np.zeros((N, self.model.nv))
        for k in range(self.n_joints):
            iq, iv = self._idx_q[k], self._idx_v[k]
            if self._nq_joint[k] == 1:
                Q[:, iq] = q[:, k]
            else:   # continuous joint: (cos, sin)
                Q[:, iq], Q[:, iq + 1] = np.cos(q[:, k]), np.sin(q[:, k])
            V[:, iv], A[:, iv] = dq[:, k], ddq[:, k]
        return Q, V, A

    def parameters(self, kind='gravity'):
        """Nominal link parameters θ of the model, stacked per body.

        Parameters
        ----------
        kind : {'gravity', 'inertial'}
            4 (m, m·c) or 10 parameters per body.
        """
        width = 4 if kind == 'gravity' else 10
        return np.concatenate([self.model.inertias[j].toDynamicParameters()[:width]
                               for j in range(1, self.model.njoints)])

    def parameter_names(self, kind='gravity', friction=False):
        """Names like ``mx3`` (body of the 3rd model joint), in θ order."""
        labels = GRAVITY_PARAMS if kind == 'gravity' else INERTIAL_PARAMS
        names = [f'{p}{k + 1}' for k in range(self.n_bodies) for p in labels]
        if friction:
            names += [f'{p}{k + 1}' for k in range(self.n_joints) for p in FRICTION_PARAMS]
        return names

    # regressors ---------------------------------------------------------
    def gravity_regressor_pin(self, q):
        """Y_g(q) (n, 4·nb) from pinocchio's joint torque regressor (reference path)."""
        v0 = np.zeros(self.model.nv)
        full = pin.computeJointTorqueRegressor(self.model, self.data, self._pin_q(q), v0, v0)
        cols = np.concatenate([np.arange(10 * b, 10 * b + 4) for b in range(self.n_bodies)])
        return full[np.ix_(self._idx_v, cols)]

    def gravity_regressor(self, q, gravity=None):
        """Gravity regressor for many configurations at once (vectorised).

        Parameters
        ----------
        q : ndarray, (N, n) or (n,)
            Joint angles (rad) in the order of :attr:`joint_names`.
        gravity : array_like (3,), optional
            Gravity vector in the root frame (default: the model's).

        Returns
        -------
        ndarray, (N, n, 4·nb) or (n, 4·nb)
            ``Y_g`` such that ``G(q) = Y_g(q) @ θ_g`` (seed 000 eq. 5).
        """
        q = np.asarray(q, dtype=float)
        single = q.ndim == 1
        q = np.atleast_2d(q)
        if q.shape[1] != self.n_joints:
            raise ValueError(f'q has {q.shape[1]} columns, expected {self.n_joints} '
                             f'for joints {list(self.joint_names)}')
        Y = self.gravity_regressor_joint_major(q, gravity).transpose(2, 0, 1)
        return Y[0] if single else Y

    def gravity_regressor_joint_major(self, q, gravity=None):
        """The batch gravity regressor with samples last: (n, 4·nb, N), contiguous.

        The layout the vectorised kernel computes in; :meth:`gravity_regressor`
        returns a transposed view of it, so neither makes a copy. Accumulating
        normal equations from this layout is a plain matrix product per joint.
        """
        q = np.atleast_2d(np.asarray(q, dtype=float))
        if q.shape[1] != self.n_joints:
            raise ValueError(f'q has {q.shape[1]} columns, expected {self.n_joints} '
                             f'for joints {list(self.joint_names)}')
        g = self.gravity_vector if gravity is None else np.asarray(gravity, dtype=float)
        out = np.empty((self.n_joints, 4 * self.n_bodies, q.shape[0]))
        for lo in range(0, q.shape[0], self._CHUNK):
            hi = min(lo + self._CHUNK, q.shape[0])
            self._gravity_regressor_chunk(q[lo:hi], g, out[:, :, lo:hi])
        return out

    _CHUNK = 8192    # samples per block: keeps the block (n x 4nb x N) in cache

    def _gravity_regressor_chunk(self, q, g, out):
        # Structure of arrays with lazy constants: the sample axis is last, every
        # step is a few elementwise operations on length-N vectors, and products
        # with the exact zeros/ones of the joint placements are skipped.
        nb = self.n_bodies
        angles = [None] * nb
        for row, jid in enumerate(self._jid):
            angles[jid - 1] = np.ascontiguousarray(q[:, row])
        rot, pos = [None] * nb, [None] * nb
        for j in range(1, self.model.njoints):
            b, parent = j - 1, self.model.parents[j]
            placement = self._placements[b]
            local = _matmul(placement[0], _spin(self._axes[b], angles[b]))
            if parent == 0:
                rot[b], pos[b] = local, placement[1]
            else:
                rp = rot[parent - 1]
                rot[b] = _matmul(rp, local)
                pos[b] = tuple(_add(p, t) for p, t in zip(pos[parent - 1],
                                                          _matvec(rp, placement[1])))
        g = tuple(_clean(x) for x in g)
        out[...] = 0.0
        for row, jid in enumerate(self._jid):
            i = jid - 1
            z = _matvec(rot[i], tuple(_clean(a) for a in self._axes[i]))
            gxz = (_add(_mul(g[1], z[2]), _neg(_mul(g[2], z[1]))),
                   _add(_mul(g[2], z[0]), _neg(_mul(g[0], z[2]))),
                   _add(_mul(g[0], z[1]), _neg(_mul(g[1], z[0]))))
            for b in np.flatnonzero(self._moves_mask[row]):
                # Y[i, m_b] = -(p_b - p_i).(g x z_i);  Y[i, h_b] = -R_b^T (g x z_i)
                rel = tuple(_add(pb, _neg(pi)) for pb, pi in zip(pos[b], pos[i]))
                out[row, 4 * b] = _neg(_dot(rel, gxz))
                for c in range(3):
                    out[row, 4 * b + 1 + c] = _neg(_dot((rot[b][0][c], rot[b][1][c],
                                                         rot[b][2][c]), gxz))

    def _ancestors(self):
        """For each body k (0-based), the set of 0-based joints that move it."""
        result = []
        for j in range(1, self.model.njoints):
            chain, a = set(), j
            while a > 0:
                chain.add(a - 1)
                a = self.model.parents[a]
            result.append(chain)
        return result

    def full_regressor(self, q, dq, ddq, friction=True):
        """Full inverse-dynamics regressor, optionally with friction columns.

        Parameters
        ----------
        q, dq, ddq : ndarray, (n,) or (N, n)
            rad, rad/s, rad/s².
        friction : bool
            Append Coulomb ``sign(q̇_i)`` and viscous ``q̇_i`` columns per joint
            (seed 001 eq. 2), ordered ``fc1, fv1, fc2, fv2, ...``.

        Returns
        -------
        ndarray, (n, 10·nb [+ 2n]) or (N, n, 10·nb [+ 2n])
        """
        q, dq, ddq = (np.asarray(a, dtype=float) for a in (q, dq, ddq))
        if q.ndim == 2:
            return np.stack([self.full_regressor(a, b, c, friction)
                             for a, b, c in zip(q, dq, ddq)])
        full = pin.computeJointTorqueRegressor(
            self.model, self.data, self._pin_q(q), self._pin_v(dq), self._pin_v(ddq))
        y = full[self._idx_v]
        if not friction:
            return y
        fric = np.zeros((self.n_joints, 2 * self.n_joints))
        idx = np.arange(self.n_joints)
        fric[idx, 2 * idx] = np.sign(dq)
        fric[idx, 2 * idx + 1] = dq
        return np.hstack([y, fric])
