"""Serving an identified floating-base model: whole-body CoM and system momentum.

A floating robot's configuration is the base pose plus the joint angles, so its
queries carry the base in the same ``sensor_msgs/JointState`` as the joints, under
seven fixed names (:data:`BASE_NAMES`), in any order among the joints:

================ ================================ ====================================
name             ``position``                     ``velocity`` (momentum query)
================ ================================ ====================================
``base_x/y/z``   base origin in the world (m)     base linear velocity, world axes (m/s)
``base_qx/qy/qz`` base orientation quaternion      base angular velocity, base axes
                 (x, y, z part)                   (rad/s)
``base_qw``      quaternion w (unit norm needed)  ignored (give 0)
joint names      joint angle (rad)                joint rate (rad/s)
================ ================================ ====================================

That is the velocity convention of :meth:`FloatingModel.velocity` (odometry's twist
turned to world axes for the linear part, a gyro's rate for the angular part).

- **CoM query** -> the whole-body centre of mass in the world, (3,) m;
- **momentum query** -> ``[p_x, p_y, p_z, L_x, L_y, L_z]``: linear momentum (kg·m/s) and
  angular momentum about the world origin (kg·m²/s), world axes (seed 002 eqs. 3-4).

Both are served through a pinocchio model whose link inertias carry the identified
parameters φ (``pinocchio.centerOfMass``, ``pinocchio.computeCentroidalMomentum``, a
few µs), checked at start against :class:`FloatingModel`'s regressor path
(``com(Q, φ)``, ``momentum(Q, V, φ)``) on random states. When φ has a body of
non-positive mass (a linear fit can return one) pinocchio cannot carry it and the
regressor path serves instead (``exact`` False, slower, same numbers).

Every refused request is a :class:`~arm_dyn_id.data.joint_states.Rejection` with a
named reason: those of :mod:`arm_dyn_id.data.joint_states` (``unknown_joints``,
``missing_joints``, ``length_mismatch``, ``empty_array``, ``duplicate_joints``,
``non_finite``) plus :data:`NON_UNIT_QUATERNION`, and for the streams
:data:`NO_BASE`, :data:`STALE_BASE`, :data:`WRONG_FRAME`, :data:`NO_VELOCITY`.

Streams pair every ``joint_states`` message with the latest base state
(:class:`BasePairing`): from ``nav_msgs/Odometry`` (:func:`base_from_odometry`: the pose
of the base in the world and its twist in the base's axes, REP 105), or, for a
robot standing on a known foot (seed 003: no motion capture), from the joint angles
alone, its twist from the joint rates (:meth:`ServedFloating.base_from_stance_foot`).
"""

from typing import NamedTuple

import numpy as np
import pinocchio as pin

from arm_dyn_id.data.joint_states import (
    LENGTH_MISMATCH, NON_FINITE, JointStateCheck, Rejection)
from arm_dyn_id.errors import DataError

BASE_NAMES = ('base_x', 'base_y', 'base_z', 'base_qx', 'base_qy', 'base_qz', 'base_qw')
MOMENTUM_NAMES = ('p_x', 'p_y', 'p_z', 'L_x', 'L_y', 'L_z')
COM_NAMES = ('com_x', 'com_y', 'com_z')
NON_UNIT_QUATERNION = 'non_unit_quaternion'
NO_BASE = 'no_base'             # no base state heard yet
STALE_BASE = 'stale_base'       # the latest base state is too far from the joint stamp
WRONG_FRAME = 'wrong_frame'     # odometry of another frame than the configured base
NO_VELOCITY = 'no_velocity'     # momentum needs joint rates and the base twist
NO_MODEL = 'no_model'
QUATERNION_TOLERANCE = 1e-3     # |‖q‖ - 1| accepted (then normalised), as FloatingModel
_MIN_MASS = 1e-9                # kg


class BaseState(NamedTuple):
    """One base state: stamp (s), position (3, world, m), quaternion (4, x y z w, unit),
    linear velocity (3, world axes, m/s) and angular velocity (3, base axes, rad/s);
    the velocities are None when the source gives none."""

    stamp: float
    position: np.ndarray
    quaternion: np.ndarray
    linear: np.ndarray = None
    angular: np.ndarray = None


def check_quaternion(quaternion, what='base orientation'):
    """A unit quaternion (4,) x y z w, normalised, or a Rejection."""
    quat = np.asarray(quaternion, dtype=float)
    if quat.shape != (4,):
        return Rejection(LENGTH_MISMATCH, f'{what}: 4 quaternion values expected, got '
                         f'{quat.size}')
    if not np.all(np.isfinite(quat)):
        return Rejection(NON_FINITE, f'{what}: quaternion {quat.tolist()} is NaN or inf')
    norm = float(np.linalg.norm(quat))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        return Rejection(NON_UNIT_QUATERNION, f'{what}: quaternion (x y z w) '
                         f'{np.round(quat, 6).tolist()} has norm {norm:.6g}, not 1 '
                         f'(within {QUATERNION_TOLERANCE:g})')
    return quat / norm


def base_from_odometry(stamp, position, orientation, linear, angular, child_frame_id='',
                       base_frame=''):
    """A :class:`BaseState` from the fields of a ``nav_msgs/Odometry``, or a Rejection.

    Parameters
    ----------
    stamp : float
        ``header.stamp`` (s).
    position : (3,)
        ``pose.pose.position``: the base origin in the odometry's world frame (m).
    orientation : (4,)
        ``pose.pose.orientation`` x y z w: the base's attitude (unit).
    linear, angular : (3,)
        ``twist.twist``: in ``child_frame_id`` axes (REP 105), which must be the base
        frame; the linear part is turned into world axes here.
    child_frame_id, base_frame : str
        An odometry whose ``child_frame_id`` is set and is not ``base_frame`` is
        refused (``wrong_frame``): its twist would be in other axes.
    """
    if child_frame_id and base_frame and child_frame_id != base_frame:
        return Rejection(WRONG_FRAME, f'odometry child_frame_id {child_frame_id!r} is not '
                         f'the configured base frame {base_frame!r}')
    values = np.concatenate([np.asarray(v, dtype=float).ravel()
                             for v in (position, linear, angular)])
    if values.size != 9:
        return Rejection(LENGTH_MISMATCH, f'odometry: 3 position, 3 linear and 3 angular '
                         f'values expected, got {values.size}')
    if not np.all(np.isfinite(values)):
        return Rejection(NON_FINITE, f'odometry: position or twist is NaN or inf '
                         f'({np.round(values, 6).tolist()})')
    quat = check_quaternion(orientation, 'odometry orientation')
    if isinstance(quat, Rejection):
        return quat
    R = pin.Quaternion(quat).toRotationMatrix()
    return BaseState(float(stamp), values[:3].copy(), quat, R @ values[3:6],
                     values[6:9].copy())


class BasePairing:
    """The latest base state, paired with each joint_states stamp.

    Parameters
    ----------
    max_age : float
        Largest ``|t_joint - t_base|`` (s) accepted; beyond it the pair is refused
        (``stale_base``): a base state that old describes another configuration.
    """

    def __init__(self, max_age=0.5):
        self.max_age = float(max_age)
        self.latest = None

    def update(self, state):
        """Hold ``state`` (a :class:`BaseState`) as the latest."""
        self.latest = state

    def pair(self, stamp):
        """The base state for a joint sample at ``stamp`` (s), or a Rejection."""
        state = self.latest
        if state is None:
            return Rejection(NO_BASE, 'no base state received yet (odometry)')
        age = abs(float(stamp) - state.stamp)
        if age > self.max_age:
            return Rejection(STALE_BASE, f'the latest base state is {age:.3g} s away from '
                             f'the joint sample (max_base_age {self.max_age:g} s)')
        return state


class _Nominal:
    """The URDF's own parameters, shaped like a FloatingIdentification."""

    def __init__(self, model):
        self._model = model
        self.robot_name = ''
        self.urdf = model.source
        self.method = 'nominal'
        self.estimator = 'none'
        self.bodies = list(model.body_names)
        self.phi = model.parameters()
        self.total_mass = model.total_mass
        self.unexcited = []
        self.metrics = {}

    def model(self):
        return self._model


class ServedFloating:
    """An identified floating-base model as served: CoM and momentum plus request checks.

    Swapped as one reference by the node, never mutated.

    Parameters
    ----------
    identification : FloatingIdentification
        ``phi`` (10 per body, pinocchio order) and ``model()`` (the nominal
        :class:`~arm_dyn_id.model.floating.FloatingModel`), ``bodies``.
    model : FloatingModel, optional
        Already loaded (skips ``identification.model()``).
    check_samples : int
        Random states on which the pinocchio path is checked against the regressors.

    Attributes
    ----------
    joints : tuple of str
        The model's joints (URDF order).
    names : tuple of str
        :data:`BASE_NAMES` then ``joints``: the order of every reply's ``position``.
    exact : bool
        True when pinocchio carries φ (fast path); False: the regressor path serves.
    max_error : float
        Largest difference between the two paths on the check states (m, kg·m/s).
    total_mass : float
        Σ of the identified masses (kg).
    """

    def __init__(self, identification, model=None, check_samples=10, seed=0):
        self.identification = identification
        self.floating = model if model is not None else identification.model()
        fm = self.floating
        phi = np.asarray(identification.phi, dtype=float)
        if phi.shape != (10 * len(fm.body_names),):
            raise DataError(f'the model has {phi.size} parameters; {fm.source} needs '
                            f'{10 * len(fm.body_names)} (10 per body)')
        if not np.all(np.isfinite(phi)):
            raise DataError('the model has NaN parameters; it cannot be served')
        bodies = list(getattr(identification, 'bodies', None) or fm.body_names)
        if bodies != list(fm.body_names):
            raise DataError(f'the model\'s bodies {bodies} are not those of {fm.source} '
                            f'{list(fm.body_names)}')
        self.phi = phi
        self.total_mass = float(phi[::10].sum())
        if not self.total_mass > _MIN_MASS:
            raise DataError(f'the model\'s total mass {self.total_mass:.6g} kg is not positive')
        self.joints = tuple(fm.joint_names)
        self.names = BASE_NAMES + self.joints
        self.n = len(self.joints)
        self._query = JointStateCheck(self.names, strict=True)
        self._stream = JointStateCheck(self.joints)
        self._pm = self._carry(fm, phi)
        self._pd = self._pm.createData() if self._pm is not None else None
        self.exact = self._pm is not None
        self.max_error = 0.0
        if self.exact:
            self._check_fast(check_samples, seed)

    @classmethod
    def nominal(cls, model):
        """The nominal URDF's parameters served (no identified model)."""
        return cls(_Nominal(model), model=model)

    @staticmethod
    def _carry(fm, phi):
        """A copy of the pinocchio model with φ in its inertias, or None."""
        if np.any(phi[::10] <= _MIN_MASS):
            return None
        pm = fm.model.copy()
        for b in range(len(fm.body_names)):
            pm.inertias[b + 1] = pin.Inertia.FromDynamicParameters(phi[10 * b:10 * b + 10])
        return pm

    def _check_fast(self, count, seed):
        rng = np.random.default_rng(seed)
        fm = self.floating
        quat = rng.normal(size=(count, 4))
        quat /= np.linalg.norm(quat, axis=1, keepdims=True)
        Q = np.hstack([rng.uniform(-2, 2, (count, 3)), quat,
                       rng.uniform(-np.pi, np.pi, (count, self.n))])
        V = rng.uniform(-1, 1, (count, fm.nv))
        fast = np.array([np.r_[self._com_fast(q), self._momentum_fast(q, v)]
                         for q, v in zip(Q, V)])
        slow = np.hstack([fm.com(Q, self.phi), fm.momentum(Q, V, self.phi)])
        self.max_error = float(np.max(np.abs(fast - slow)))
        if self.max_error > 1e-9 * max(1.0, float(np.max(np.abs(slow)))):
            self.exact = False

    # ------------------------------------------------------------- the answers
    def _com_fast(self, q):
        return np.array(pin.centerOfMass(self._pm, self._pd, q, False))

    def _momentum_fast(self, q, v):
        h = pin.computeCentroidalMomentum(self._pm, self._pd, q, v).vector   # about the CoM
        (px, py, pz), (cx, cy, cz) = h[:3], self._pd.com[0]
        h[3] += cy * pz - cz * py        # moved to the world origin: L += c × p
        h[4] += cz * px - cx * pz
        h[5] += cx * py - cy * px
        return h

    def com(self, q):
        """Whole-body CoM (3,) in the world (m) at a pinocchio configuration (nq,)."""
        if self.exact:
            return self._com_fast(q)
        return self.floating.com(q[None], self.phi)[0]

    def momentum(self, q, v):
        """[linear; angular about the world origin] (6,), world axes, at a pinocchio
        configuration (nq,) and velocity (nv,) (base twist in base axes)."""
        if self.exact:
            return self._momentum_fast(q, v)
        return self.floating.momentum(q[None], v[None], self.phi)[0]

    def pin_velocity(self, q, linear_world, angular_base, dq):
        """pinocchio velocity (nv,) from the served convention (linear in world axes)."""
        R = pin.Quaternion(q[3:7]).toRotationMatrix()
        return np.concatenate([R.T @ linear_world, angular_base, dq])

    # ---------------------------------------------------------------- queries
    def _configuration(self, names, positions, velocities=None):
        """(pinocchio q (nq,), the sample) of a query, or a Rejection."""
        require = ('position',) if velocities is None else ('position', 'velocity')
        sample = self._query.check(names, position=positions,
                                   velocity=() if velocities is None else velocities,
                                   require=require, finite=require)
        if isinstance(sample, Rejection):
            return sample
        quat = check_quaternion(sample.position[3:7])
        if isinstance(quat, Rejection):
            return quat
        q = np.concatenate([sample.position[:3], quat, sample.position[7:]])
        return q, sample

    def query_com(self, names, positions):
        """Answer a CoM query: (position in :attr:`names` order (7 + n,), CoM (3,)) or a
        Rejection. ``names`` are :data:`BASE_NAMES` and the model's joints, each once,
        any order; ``positions`` one value per name."""
        found = self._configuration(names, positions)
        if isinstance(found, Rejection):
            return found
        q, _ = found
        return q, self.com(q)

    def query_momentum(self, names, positions, velocities):
        """Answer a momentum query: (position (7 + n,), velocity (7 + n,) in
        :attr:`names` order with 0 at ``base_qw``, momentum (6,)) or a Rejection."""
        found = self._configuration(names, positions, velocities)
        if isinstance(found, Rejection):
            return found
        q, sample = found
        vel = sample.velocity.copy()
        vel[6] = 0.0        # base_qw's velocity is ignored
        v = self.pin_velocity(q, vel[:3], vel[3:6], vel[7:])
        return q, vel, self.momentum(q, v)

    # ---------------------------------------------------------------- streams
    def stream_joints(self, names, positions, velocities=(), need_velocity=False):
        """The model's joints of a joint_states message (extra joints ignored):
        JointSample or Rejection (``no_velocity`` when ``need_velocity`` and the message
        has no velocity for every name)."""
        finite = ('position', 'velocity') if need_velocity else ('position',)
        sample = self._stream.check(names, position=positions, velocity=velocities,
                                    finite=finite)
        if isinstance(sample, Rejection):
            return sample
        if need_velocity and sample.velocity is None:
            return Rejection(NO_VELOCITY, f'joint_states has {len(velocities)} velocities '
                             f'for {len(names)} names: the momentum needs the joint rates')
        return sample

    def stream_com(self, base, q_joints):
        """CoM (3,) at a base state and the joints' angles (n,)."""
        return self.com(np.concatenate([base.position, base.quaternion, q_joints]))

    def stream_momentum(self, base, q_joints, dq_joints):
        """Momentum (6,) at a base state with velocities and the joints' angles, rates;
        a Rejection (``no_velocity``) when the base state has no twist."""
        if base.linear is None or base.angular is None:
            return Rejection(NO_VELOCITY, 'the base state has no twist (the momentum needs '
                             'the base velocity: odometry)')
        q = np.concatenate([base.position, base.quaternion, q_joints])
        return self.momentum(q, self.pin_velocity(q, base.linear, base.angular, dq_joints))

    def base_from_stance_foot(self, stamp, q_joints, foot_frame, foot_pose, dq_joints=None):
        """The base state when ``foot_frame`` stands still at ``foot_pose`` (x y z, qx qy
        qz qw, world), from the joints alone (seed 003 §3: no motion capture).

        With the joint rates ``dq_joints`` the base twist follows from the foot's
        standing still: ``J_b v_b + J_j q̇ = 0`` for the foot's (local) Jacobian, so
        ``v_b = -J_b⁻¹ J_j q̇``; without them the state has no velocity.
        """
        pose = np.asarray(foot_pose, dtype=float)
        q = self.floating.base_from_foot(np.asarray(q_joints, float)[None], foot_frame,
                                         pin.XYZQUATToSE3(pose))[0]
        if dq_joints is None:
            return BaseState(float(stamp), q[:3], q[3:7])
        pm, pd = self.floating.model, self.floating.data
        fid = self.floating.frame_id(foot_frame)
        J = pin.computeFrameJacobian(pm, pd, q, fid, pin.ReferenceFrame.LOCAL)
        v_base = -np.linalg.solve(J[:, :6], J[:, 6:] @ np.asarray(dq_joints, float))
        R = pin.Quaternion(q[3:7]).toRotationMatrix()
        return BaseState(float(stamp), q[:3], q[3:7], R @ v_base[:3], v_base[3:])

    def describe(self):
        """One line: what is served."""
        ident = self.identification
        return (f'{ident.method} model ({ident.estimator}) of {len(self.floating.body_names)} '
                f'bodies, total mass {self.total_mass:.6g} kg, '
                f'{"pinocchio" if self.exact else "regressor"} path')


def no_model(what='floating-base'):
    """The Rejection of a query while nothing is served."""
    return Rejection(NO_MODEL, f'no {what} model loaded yet: give model_file or run '
                     '`arm-dyn-id fit` into the model directory')


__all__ = ['BASE_NAMES', 'MOMENTUM_NAMES', 'COM_NAMES', 'BaseState', 'BasePairing',
           'ServedFloating', 'base_from_odometry', 'check_quaternion', 'no_model',
           'NON_UNIT_QUATERNION', 'NO_BASE', 'STALE_BASE', 'WRONG_FRAME', 'NO_VELOCITY',
           'NO_MODEL']
