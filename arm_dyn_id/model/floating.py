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


# ------------------------------------------------------- the identified model file -----
FLOATING_SCHEMA = 'arm_dyn_id/floating_model'
FLOATING_VERSION = 1
FLOATING_METHODS = ('momentum', 'zmp')


class FloatingIdentification:
    """An identified floating-base robot: the link parameters a momentum (seed 002) or
    ZMP (seed 003) fit found, with what it was fitted on and how well it predicts.

    Saved as YAML, schema ``arm_dyn_id/floating_model`` version 1 (atomic write)::

        schema, version, robot_name, method, estimator,
        urdf: {file, sha256}, total_mass, bodies,
        parameters: {<body>: {m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz}, ...},
        unexcited, metrics, provenance

    Parameters
    ----------
    robot_name : str
    urdf : str
        Path of the nominal URDF (as in the configuration).
    urdf_sha256 : str or None
        Hash of that URDF when fitted.
    method : str
        ``'momentum'`` or ``'zmp'``.
    estimator : str
        ``'linear'``, ``'ga'``, ``'ga-plain'``, ``'newton'``, ...
    bodies : sequence of str
        Body names, pinocchio order (:attr:`FloatingModel.body_names`).
    phi : ndarray, (10·len(bodies),)
        pinocchio's ten dynamic parameters per body.
    total_mass : float
        Weighed total mass (kg).
    unexcited : sequence of str
        Unknowns the motion did not excite (kept at their nominal value).
    metrics : dict
        Held-out metrics.
    provenance : dict
        Bag, date, command, package version.
    source : str, optional
        The file it was read from.
    urdf_dir : path-like, optional
        Folder to find the URDF in (by its file name), or the URDF file itself, instead
        of the path the file names; see :meth:`model`.
    """

    def __init__(self, robot_name, urdf, urdf_sha256, method, estimator, bodies, phi,
                 total_mass, unexcited=(), metrics=None, provenance=None, *, source=None,
                 urdf_dir=None):
        self.robot_name = str(robot_name)
        self.urdf = str(urdf)
        self.urdf_sha256 = urdf_sha256
        self.method = str(method)
        self.estimator = str(estimator)
        self.bodies = [str(b) for b in bodies]
        self.phi = np.asarray(phi, dtype=float)
        self.total_mass = float(total_mass)
        self.unexcited = [str(u) for u in unexcited]
        self.metrics = dict(metrics or {})
        self.provenance = dict(provenance or {})
        #: the file it was read from (None when built in memory)
        self.source = None if source is None else str(source)
        #: a warning when the URDF's hash differs from the one fitted with (after model())
        self.warnings = []
        self._urdf_dir = urdf_dir
        self._model = None
        self._validate(self.source or '<floating model>')

    def _validate(self, where):
        if self.method not in FLOATING_METHODS:
            raise DataError(f'{where}: method {self.method!r} is not one of '
                            f'{list(FLOATING_METHODS)}')
        if not self.bodies:
            raise DataError(f'{where}: no bodies')
        if self.phi.shape != (10 * len(self.bodies),):
            raise DataError(f'{where}: {len(self.bodies)} bodies need '
                            f'{10 * len(self.bodies)} parameters, got {self.phi.size}')
        if not np.all(np.isfinite(self.phi)):
            raise DataError(f'{where}: parameters are not finite')
        bad = np.flatnonzero(~(self.phi[::10] > 0))
        if bad.size:
            raise DataError(f'{where}: {self.bodies[bad[0]]} has mass '
                            f'{self.phi[10 * bad[0]]:.6g} kg (must be positive)')
        if not (np.isfinite(self.total_mass) and self.total_mass > 0):
            raise DataError(f'{where}: total_mass {self.total_mass} must be positive (kg)')

    # ------------------------------------------------------------------- queries
    def masses(self):
        """Body name -> identified mass (kg)."""
        return {b: float(m) for b, m in zip(self.bodies, self.phi[::10])}

    def model(self):
        """The nominal URDF as a :class:`FloatingModel` (loaded once): pass :attr:`phi` to
        its queries (``model().com(Q, phi)``, ``model().momentum(Q, V, phi)``).

        The URDF is the file named, else one of that name beside the model file (or in
        ``urdf_dir`` given to :meth:`load`), found as for arm models
        (:func:`arm_dyn_id.model.files.urdf_path`); a hash that differs from the one
        fitted with is reported in :attr:`warnings`, as there.

        Raises
        ------
        URDFError
            The URDF cannot be found or loaded.
        DataError
            Its bodies are not the ones fitted.
        """
        if self._model is not None:
            return self._model
        from pathlib import Path

        from arm_dyn_id.model import files
        given = None if self._urdf_dir is None else Path(self._urdf_dir)
        if given is not None and given.is_dir():
            given = given / Path(self.urdf).name
        doc = {'urdf': {'file': self.urdf, 'sha256': self.urdf_sha256}}
        path = files.urdf_path(doc, given, self.source or '<floating model>')
        self.warnings = files.read_metadata(doc, path, ())['warnings']
        model = FloatingModel(path)
        if list(model.body_names) != self.bodies:
            raise DataError(f'URDF {path} has bodies {list(model.body_names)}; the model '
                            f'{self.source or ""} was fitted on {self.bodies}')
        self._model = model
        return model

    # ---------------------------------------------------------------------- file
    def to_dict(self):
        import datetime

        from arm_dyn_id import __version__
        from arm_dyn_id.model import files
        provenance = dict(self.provenance)
        provenance.setdefault('created', datetime.datetime.now(
            datetime.timezone.utc).isoformat(timespec='seconds'))
        provenance.setdefault('software', f'arm_dyn_id {__version__}')
        return {
            'schema': FLOATING_SCHEMA, 'version': FLOATING_VERSION,
            'robot_name': self.robot_name, 'method': self.method,
            'estimator': self.estimator,
            'urdf': {'file': self.urdf, 'sha256': self.urdf_sha256},
            'total_mass': float(self.total_mass), 'bodies': list(self.bodies),
            'parameters': {b: dict(zip(INERTIAL_PARAMS,
                                       files.floats(self.phi[10 * k:10 * k + 10])))
                           for k, b in enumerate(self.bodies)},
            'unexcited': list(self.unexcited),
            'metrics': files.plain(self.metrics), 'provenance': files.plain(provenance),
        }

    def save(self, path):
        """Write the YAML file (atomic: temp file + rename). Returns the path."""
        from arm_dyn_id.model import files
        return files.save(self.to_dict(), path)

    @classmethod
    def from_dict(cls, doc, source='<floating model>', urdf_dir=None):
        """The identification of a parsed file; DataError one-liners naming ``source``."""
        if not isinstance(doc, dict) or doc.get('schema') != FLOATING_SCHEMA:
            raise DataError(f'{source} is not an arm_dyn_id floating model file (schema '
                            f'{doc.get("schema") if isinstance(doc, dict) else None!r})')
        try:
            version = int(doc.get('version', 0))
        except (TypeError, ValueError):
            raise DataError(f'{source}: version {doc.get("version")!r} is not a number') \
                from None
        if version > FLOATING_VERSION:
            raise DataError(f'{source} has floating model file version {version}; this '
                            f'arm_dyn_id reads up to version {FLOATING_VERSION}: upgrade '
                            'arm_dyn_id')
        for key in ('method', 'urdf', 'bodies', 'parameters', 'total_mass'):
            if key not in doc:
                raise DataError(f'{source} has no {key!r}')
        urdf = doc['urdf']
        if not isinstance(urdf, dict) or not isinstance(urdf.get('file'), str):
            raise DataError(f'{source}: urdf must be a mapping with a file name')
        bodies, params = doc['bodies'], doc['parameters']
        if not isinstance(bodies, list) or not isinstance(params, dict):
            raise DataError(f'{source}: bodies must be a list and parameters a mapping')
        phi = []
        for body in bodies:
            p = params.get(body)
            if not isinstance(p, dict) or set(p) != set(INERTIAL_PARAMS):
                raise DataError(f'{source}: parameters of {body} must be '
                                f'{list(INERTIAL_PARAMS)}')
            try:
                phi += [float('nan') if p[k] is None else float(p[k])
                        for k in INERTIAL_PARAMS]
            except (TypeError, ValueError):
                raise DataError(f'{source}: a parameter of {body} is not a number') from None
        extra = sorted(set(params) - set(bodies))
        if extra:
            raise DataError(f'{source}: parameters of {extra} but no such bodies')
        try:
            total = float(doc['total_mass'])
        except (TypeError, ValueError):
            raise DataError(f'{source}: total_mass {doc["total_mass"]!r} is not a number') \
                from None
        for key in ('metrics', 'provenance'):
            if not isinstance(doc.get(key) or {}, dict):
                raise DataError(f'{source}: {key} must be a mapping')
        if not isinstance(doc.get('unexcited') or [], list):
            raise DataError(f'{source}: unexcited must be a list of names')
        return cls(doc.get('robot_name') or '', urdf['file'], urdf.get('sha256'),
                   doc['method'], doc.get('estimator') or '', bodies, phi, total,
                   doc.get('unexcited') or (), doc.get('metrics'), doc.get('provenance'),
                   source=source, urdf_dir=urdf_dir)

    @classmethod
    def load(cls, path, urdf_dir=None):
        """Read a file written by :meth:`save`.

        Parameters
        ----------
        path : path-like
        urdf_dir : path-like, optional
            Folder holding the URDF (by its file name), or the URDF file, instead of the
            path the file names.

        Raises
        ------
        DataError
            Missing file, not YAML, not a floating model file, bad contents (one line
            naming the file and the key).
        """
        from arm_dyn_id.errors import ConfigError
        from arm_dyn_id.model import files
        try:
            doc = files.read_model_file(path)
        except ConfigError as exc:
            raise DataError(str(exc)) from None
        return cls.from_dict(doc, source=str(path), urdf_dir=urdf_dir)
