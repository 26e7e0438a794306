"""The identified full-dynamics model: inverse dynamics with friction, save / load.

Model (seed 001 eqs. 2-6, with the friction options of the real-arm work)::

    τ = Y(q, q̇, q̈) θ + F(q̇) φ = Y_b(q, q̇, q̈) β + F(q̇) φ

- ``Y θ`` is the rigid-body inverse dynamics, linear in the 10 inertial
  parameters of every body (pinocchio's order ``m, mx, my, mz, Ixx, Ixy, Iyy,
  Ixz, Iyz, Izz``, first moments and inertia about the joint frame origin) and,
  when asked, in each joint's rotor inertia (armature ``Ia``, a ``q̈_i`` column).
  Only the base combinations ``β = θ_b + K θ_d`` (:mod:`.base_parameters`,
  pivoted QR of the regressor) are identifiable; ``Y θ = Y_b β`` for any θ.
- ``F φ`` is friction, joint by joint (:class:`FrictionModel`): Coulomb
  ``fc·s(q̇)`` with ``s`` the sign or a smooth sign ``tanh(q̇ / v_s)``, viscous
  ``fv·q̇``, optionally an offset ``fo`` (the drive's torque offset and the
  asymmetry of Coulomb friction) and a Stribeck term ``fs·s(q̇)·exp(-(q̇/v_st)²)``
  (the extra break-away torque near zero speed); direction-dependent Coulomb
  ``fcp·max(s, 0) + fcn·min(s, 0)`` instead of ``fc·s``; and load-dependent Coulomb
  ``fl·|τ_load|·s(q̇)``, τ_load the nominal URDF's rigid-body torque (see
  :class:`FrictionModel`). The smooth sign's ε is ``smooth_velocity`` = 0.01 rad/s
  by default, stored in the file (a full fit with ``friction='auto'`` chooses it from
  0.01-0.32 rad/s: a friction that rises slowly with speed gets a wide one).

  The smooth sign matters when the model serves an arm at rest: with ``sign``,
  velocity noise of a still joint flips the Coulomb torque between ±fc (on the
  real UR10e, a still shoulder's predicted torque jumped by ±14 N·m); with
  ``tanh`` and v_s = 0.01 rad/s (far below any commanded motion, far above the
  velocity noise of a still, filtered encoder) it stays near zero.

Gravity is the part of ``Y_b β`` at q̇ = q̈ = 0, so a :class:`DynamicsModel` serves
everything a :class:`~arm_dyn_id.model.gravity.GravityModel` serves
(:meth:`DynamicsModel.gravity_torques`, at any gravity magnitude).

Model file (YAML, ``schema: arm_dyn_id/dynamics_model``, ``version: 2``,
``dynamics: full``)::

    schema, version, dynamics, robot_name, joints, urdf: {file, sha256},
    gravity: {magnitude, direction},
    base: {names, expressions, values, std_errors, units, parameter_names,
           independent, dependent, K, kind, friction, armature},
    friction: {model: {coulomb, smooth_velocity, offset, stribeck, stribeck_velocity,
                       directional, load},
               names, values, std_errors, coulomb, viscous, offset, stribeck,
               coulomb_positive, coulomb_negative, coulomb_load},
    standard: {names, values}        # consistent link parameters θ (when fitted so)
    consistent: bool,                # every link's pseudo-inertia PSD, friction ≥ 0
    measurement: {effort, torque_constants, ...}   # as in the gravity model file
    fit, selection, validation, preparation, provenance

:func:`arm_dyn_id.model.load_model` reads either kind of model file.
"""

from dataclasses import asdict, dataclass

import numpy as np
import pinocchio as pin

from arm_dyn_id.config import FRICTION_WORDS, check_friction
from arm_dyn_id.errors import ConfigError, DataError, JointNameError
from arm_dyn_id.model import files
from arm_dyn_id.model.base_parameters import (BaseParameters, base_from_regressor,
                                              inertial_base_parameters, random_configurations)

SCHEMA = 'arm_dyn_id/dynamics_model'
VERSION = 2
#: Sections of the model file carried in :attr:`DynamicsModel.metadata`.
METADATA_SECTIONS = ('measurement', 'fit', 'selection', 'validation', 'preparation',
                     'provenance', 'warnings_at_fit')
COULOMB_KINDS = ('sign', 'tanh')
#: rad/s: a joint slower than this holds friction no model here knows (presliding,
#: stiction at a reversal or a start): 3x the smooth sign's narrowest 0.01 rad/s, where
#: ``tanh`` is within 0.5 % of saturated (with a wider one the samples above it are where
#: the fitted Coulomb term rises, which the model describes). The full fit leaves such
#: samples out of the joint's own equations (``identification.full_dynamics.moving_rows``).
SLOW_SPEED = 0.03


@dataclass(frozen=True)
class FrictionModel:
    """Which friction terms each joint carries.

    Per joint j, with ``s(q̇) = sign(q̇)`` or the smooth sign ``tanh(q̇ / v_s)``::

        τ_f = fc·s + fv·q̇ [+ fo] [+ fs·s·exp(-(q̇ / v_st)²)] [+ fl·|τ_load|·s]

    and, ``directional``, ``fc·s`` replaced by ``fcp·max(s, 0) + fcn·min(s, 0)``
    (F_c+ while q̇ > 0, F_c- while q̇ < 0; both ≥ 0). ``τ_load`` is the joint's
    rigid-body torque of the NOMINAL URDF at the same state (``Y(q, q̇, q̈) θ_URDF``):
    the load-dependent Coulomb friction of harmonic drives, linearised in the
    load with a load that does not depend on the fitted parameters (the fit stays
    linear; a second pass with the fitted rigid body changes it little when the
    URDF's masses are near). Physically signed: fc, fcp, fcn, fv, fs, fl ≥ 0.

    Attributes
    ----------
    coulomb : {'sign', 'tanh'}
        ``sign(q̇)`` or the smooth sign ``tanh(q̇ / smooth_velocity)``.
    smooth_velocity : float
        rad/s, the width v_s of the smooth sign (ε = 0.01 rad/s by default).
    offset : bool
        A constant torque per joint (``fo``).
    stribeck : bool
        A Stribeck term ``fs·s(q̇)·exp(-(q̇ / stribeck_velocity)²)`` per joint
        (``s`` the Coulomb term's sign or smooth sign).
    stribeck_velocity : float
        rad/s.
    directional : bool
        Direction-dependent Coulomb friction (``fcp``, ``fcn`` instead of ``fc``).
    load : bool
        Load-dependent Coulomb friction ``fl·|τ_load|·s(q̇)`` (``fl`` dimensionless).
    """

    coulomb: str = 'sign'
    smooth_velocity: float = 0.01
    offset: bool = False
    stribeck: bool = False
    stribeck_velocity: float = 0.05
    directional: bool = False
    load: bool = False

    def __post_init__(self):
        if self.coulomb not in COULOMB_KINDS:
            raise ConfigError(f'friction coulomb {self.coulomb!r} must be one of '
                              f'{list(COULOMB_KINDS)}')
        for key in ('smooth_velocity', 'stribeck_velocity'):
            v = getattr(self, key)
            if not (np.isfinite(v) and v > 0):
                raise ConfigError(f'friction {key} = {v} must be a positive speed (rad/s)')

    @property
    def terms(self):
        """Per-joint parameter prefixes, in column order (``fl`` always last)."""
        return ((('fcp', 'fcn') if self.directional else ('fc',)) + ('fv',) +
                (('fo',) if self.offset else ()) + (('fs',) if self.stribeck else ()) +
                (('fl',) if self.load else ()))

    @property
    def per_joint(self):
        return len(self.terms)

    #: Terms that must be non-negative in a physically consistent model.
    POSITIVE = ('fc', 'fcp', 'fcn', 'fv', 'fs', 'fl')

    def names(self, n_joints):
        """``fc1, fv1, [fo1, fs1,] fc2, ...`` (joint-major)."""
        return tuple(f'{p}{j + 1}' for j in range(n_joints) for p in self.terms)

    def sign(self, dq):
        """``s(q̇)``: the sign or the smooth sign ``tanh(q̇ / smooth_velocity)``."""
        dq = np.asarray(dq, dtype=float)
        return np.sign(dq) if self.coulomb == 'sign' else np.tanh(dq / self.smooth_velocity)

    def features(self, dq, load=None):
        """Per-joint friction features, (N, n) -> (N, n, k) (k = :attr:`per_joint`).

        ``load`` (N, n), N·m: the nominal rigid-body torque ``τ_load`` of the load
        term; without it the ``fl`` column is left out (k - 1 columns)."""
        dq = np.asarray(dq, dtype=float)
        sign = self.sign(dq)
        cols = []
        for term in self.terms:
            if term == 'fc':
                cols.append(sign)
            elif term == 'fcp':
                cols.append(np.maximum(sign, 0.0))
            elif term == 'fcn':
                cols.append(np.minimum(sign, 0.0))
            elif term == 'fv':
                cols.append(dq)
            elif term == 'fo':
                cols.append(np.ones_like(dq))
            elif term == 'fs':   # Stribeck: the same (smooth) sign, fading with speed
                cols.append(sign * np.exp(-(dq / self.stribeck_velocity) ** 2))
            elif load is not None:
                cols.append(np.abs(np.asarray(load, dtype=float)) * sign)
        return np.stack(cols, axis=-1)

    def regressor(self, dq, features=None):
        """Block-diagonal friction regressor, (N, n) -> (N, n, n·k).

        ``features`` (N, n, k) replaces :meth:`features` (e.g. filtered columns)."""
        dq = np.atleast_2d(np.asarray(dq, dtype=float))
        f = self.features(dq) if features is None else np.asarray(features, dtype=float)
        N, n, k = f.shape
        out = np.zeros((N, n, n * k))
        for j in range(n):
            out[:, j, j * k:(j + 1) * k] = f[:, j]
        return out

    def torques(self, dq, phi, load=None):
        """Friction torques (N, n) for parameters φ (n·k,); ``load`` as :meth:`features`
        (without it, a load-dependent model's ``fl`` term is left out)."""
        dq = np.asarray(dq, dtype=float)
        phi = np.asarray(phi, dtype=float).reshape(dq.shape[-1], self.per_joint)
        if self.load and load is None:
            phi = phi[:, :-1]
        return np.einsum('...jk,jk->...j', self.features(dq, load), phi)

    def describe(self):
        """Short text: ``coulomb(tanh 0.01 rad/s)+viscous+offset``."""
        kind = 'coulomb_directional' if self.directional else 'coulomb'
        smooth = (f'tanh, eps {self.smooth_velocity:g} rad/s' if self.coulomb == 'tanh'
                  else 'sign')
        return '+'.join([f'{kind}({smooth})', 'viscous'] + (['offset'] if self.offset else []) +
                        (['stribeck'] if self.stribeck else []) +
                        (['load_coulomb'] if self.load else []))

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, data):
        data = dict(data or {})
        known = {k: data[k] for k in ('coulomb', 'smooth_velocity', 'offset', 'stribeck',
                                      'stribeck_velocity', 'directional', 'load')
                 if k in data}
        return cls(**known)


def parse_friction(spec):
    """A friction specification -> FrictionModel, or ``'auto'``.

    ``spec`` is ``'auto'``, a FrictionModel, or comma-separated words of
    :data:`FRICTION_WORDS`: ``coulomb,viscous`` (the default model: smooth sign,
    ε = 0.01 rad/s), ``coulomb,viscous,offset``, ``stribeck`` (Coulomb + viscous +
    Stribeck), ``coulomb_directional``, ``load_coulomb``; ``sign`` uses the sharp
    sign instead of the smooth one. Coulomb and viscous are always part of a model.

    Raises
    ------
    ConfigError
        An unknown word.
    """
    if spec is None or isinstance(spec, FrictionModel):
        return spec
    spec = check_friction(spec, 'friction')
    if spec == 'auto':
        return 'auto'
    words = spec.split(',')
    return FrictionModel(coulomb='sign' if 'sign' in words else 'tanh',
                         smooth_velocity=0.01, offset='offset' in words,
                         stribeck='stribeck' in words,
                         directional='coulomb_directional' in words,
                         load='load_coulomb' in words)


# ---------------------------------------------------------------------------
# the rigid-body regressor
# ---------------------------------------------------------------------------
#: What each per-joint friction term (and the armature) is, for messages
PARAMETER_WORDS = {'fc': 'Coulomb', 'fcp': 'Coulomb in the positive direction',
                   'fcn': 'Coulomb in the negative direction', 'fv': 'viscous',
                   'fo': 'constant offset', 'fs': 'Stribeck', 'fl': 'load-dependent Coulomb',
                   'Ia': 'rotor inertia (armature)'}


def parameter_term(name):
    """``(term, joint)`` of a per-joint parameter name (``'fc6'`` -> ``('fc', 6)``, joints
    numbered from 1), or ``(name, None)`` for a name without a joint number."""
    name = str(name)
    term = name.rstrip('0123456789')
    return (term, int(name[len(term):])) if term != name else (name, None)


def parameter_legend(names):
    """What the friction and armature names among ``names`` are, for a message: e.g.
    ``' (fcN: the Coulomb friction of joint N; fvN: viscous)'``; '' when there are none
    (the rigid-body names, ``Izz1``, ``mx2``, are the inertial parameters of link 1, 2)."""
    seen = []
    for name in names:
        prefix, joint = parameter_term(name)
        if prefix in PARAMETER_WORDS and joint is not None and prefix not in seen:
            seen.append(prefix)
    if not seen:
        return ''
    first, rest = seen[0], seen[1:]
    what = 'of joint N' if first != 'Ia' else 'of joint N\'s drive'
    head = f'{first}N: the {PARAMETER_WORDS[first]}' + \
        (' friction ' if first != 'Ia' else ' ') + what
    return ' (' + '; '.join([head] + [f'{p}N: {PARAMETER_WORDS[p]}' for p in rest]) + ')'


def standard_parameter_names(robot, armature=False):
    """Names of θ: 10 per body (``m1, mx1, ..., Izz1, m2, ...``) and ``Ia1..Ian``."""
    names = list(robot.parameter_names('inertial'))
    if armature:
        names += [f'Ia{j + 1}' for j in range(robot.n_joints)]
    return tuple(names)


def nominal_standard_parameters(robot, armature=False):
    """θ of the URDF (armature 0: URDFs carry none)."""
    theta = robot.parameters('inertial')
    if armature:
        theta = np.concatenate([theta, np.zeros(robot.n_joints)])
    return theta


def _check_states(robot, q, dq, ddq):
    arrays = []
    for name, a in (('positions', q), ('velocities', dq), ('accelerations', ddq)):
        a = np.asarray(a, dtype=float)
        if a.ndim not in (1, 2) or a.shape[-1] != robot.n_joints:
            raise DataError(f'{name} have shape {a.shape}, expected (N, {robot.n_joints}) '
                            f'for joints {list(robot.joint_names)}')
        arrays.append(np.atleast_2d(a))
    if not (arrays[0].shape == arrays[1].shape == arrays[2].shape):
        raise DataError(f'positions {arrays[0].shape}, velocities {arrays[1].shape} and '
                        f'accelerations {arrays[2].shape} differ in shape')
    return arrays


def rigid_regressor(robot, q, dq, ddq, armature=False, out=None):
    """Rigid-body regressor Y(q, q̇, q̈) of θ, (N, n) x3 -> (N, n, p).

    One pinocchio ``computeJointTorqueRegressor`` per sample (about 15 µs for a
    6-joint arm), armature columns ``q̈_i`` appended when asked.
    """
    q, dq, ddq = _check_states(robot, q, dq, ddq)
    n, nb = robot.n_joints, robot.n_bodies
    p = 10 * nb + (n if armature else 0)
    N = q.shape[0]
    out = np.empty((N, n, p)) if out is None else out
    Q, V, A = robot.pin_arrays(q, dq, ddq)
    model, data, rows = robot.model, robot.data, robot._idx_v
    for i in range(N):
        out[i, :, :10 * nb] = pin.computeJointTorqueRegressor(model, data, Q[i], V[i],
                                                              A[i])[rows]
    if armature:
        out[:, :, 10 * nb:] = 0.0
        idx = np.arange(n)
        out[:, idx, 10 * nb + idx] = ddq
    return out


def rigid_base_parameters(robot, armature=False, n_samples=200, seed=0):
    """Base set of the rigid-body regressor (no friction: friction columns are
    independent joint by joint and kept apart), optionally with armature."""
    if not armature:
        return inertial_base_parameters(robot, friction=False, n_samples=n_samples, seed=seed)
    rng = np.random.default_rng(seed)
    q = random_configurations(robot, n_samples, rng)
    dq = rng.uniform(-2.0, 2.0, size=q.shape)
    ddq = rng.uniform(-5.0, 5.0, size=q.shape)
    Y = rigid_regressor(robot, q, dq, ddq, armature=True)
    return base_from_regressor(Y.reshape(-1, Y.shape[-1]),
                               standard_parameter_names(robot, True), 'inertial', False)


def gravity_base_regressor(robot, base, q):
    """The base regressor of the rigid body at rest at poses ``q`` (N, n) -> (N, n, r):
    ``Y_g β`` is the gravity torque of a full model with base set ``base``."""
    zero = np.zeros_like(np.asarray(q, dtype=float))
    return base.reduce(rigid_regressor(robot, q, zero, zero, armature=base.armature))


#: Samples on which :func:`rigid_torques`' RNEA is held to the regressor
RNEA_CHECKS = 16
#: Samples of regressor at a time (bounds the (N, n, p) array to ~20 MB on a 6-joint arm)
REGRESSOR_CHUNK = 4096


def rigid_torques(robot, q, dq, ddq, theta, armature=False, physical=None):
    """Rigid-body torques ``Y(q, q̇, q̈) θ`` (N, n) of N samples.

    With ``physical`` (a θ of the same base parameters whose every link has a positive
    mass), pinocchio's RNEA on a copy of the model that carries it: a third of the
    regressor's cost (60,000 samples of a 6-joint arm: ~0.15 s against ~0.45 s). It is
    held to the regressor with ``theta`` on :data:`RNEA_CHECKS` samples spread over the
    record; where they differ by more than 1e-8 of the torque (a link whose conversion to
    mass, centre and inertia lost digits), and without ``physical``, the regressor gives
    every sample, :data:`REGRESSOR_CHUNK` at a time.
    """
    q, dq, ddq = _check_states(robot, q, dq, ddq)
    N = len(q)
    if physical is not None and N > 4 * RNEA_CHECKS:
        fast = _rnea_torques(robot, q, dq, ddq, np.asarray(physical, dtype=float), armature)
        if fast is not None:
            pick = np.linspace(0, N - 1, RNEA_CHECKS).astype(int)
            ref = rigid_regressor(robot, q[pick], dq[pick], ddq[pick],
                                  armature=armature) @ theta
            if np.all(np.abs(fast[pick] - ref) <= 1e-8 * max(1.0, float(np.abs(ref).max()))):
                return fast
    out = np.empty((N, robot.n_joints))
    for start in range(0, N, REGRESSOR_CHUNK):
        rows = slice(start, start + REGRESSOR_CHUNK)
        out[rows] = rigid_regressor(robot, q[rows], dq[rows], ddq[rows],
                                    armature=armature) @ theta
    return out


def _rnea_torques(robot, q, dq, ddq, theta, armature):
    """RNEA with θ's links (rotor inertias ``θ[10 nb:]`` added as ``Ia q̈``); None when a
    link's mass is not positive (no rigid body has it)."""
    nb = robot.n_bodies
    links = theta[:10 * nb].reshape(nb, 10)
    if not np.all(np.isfinite(theta)) or np.any(links[:, 0] <= 0):
        return None
    model = pin.Model(robot.model)
    for k in range(nb):
        model.inertias[k + 1] = pin.Inertia.FromDynamicParameters(links[k])
    model.armature[:] = 0.0                  # the regressor has no rotor inertia of its own
    data = model.createData()
    Q, V, A = robot.pin_arrays(q, dq, ddq)
    rows = robot._idx_v
    out = np.empty((len(q), robot.n_joints))
    for i in range(len(q)):
        out[i] = pin.rnea(model, data, Q[i], V[i], A[i])[rows]
    if armature:
        out += theta[10 * nb:10 * nb + robot.n_joints] * ddq
    return out


def base_matrix(base):
    """B with ``β = B θ`` (r, p)."""
    B = np.zeros((base.count, len(base.parameter_names)))
    B[np.arange(base.count), base.independent] = 1.0
    B[:, base.dependent] += base.K
    return B


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
class DynamicsModel:
    """Identified full-dynamics model of one arm.

    Parameters
    ----------
    robot : RobotModel
        Kinematics (the URDF); its inertial values are not used for serving.
    base : BaseParameters
        Base set of the rigid-body regressor (``friction=False``; with armature
        columns when its parameter names include ``Ia1``...).
    beta : ndarray, (r,)
        Rigid-body base parameters.
    friction_model : FrictionModel
    phi : ndarray, (n·k,)
        Friction parameters, joint-major (:meth:`FrictionModel.names`).
    std_errors : ndarray, (r + n·k,), optional
        Standard errors of ``[β, φ]``.
    standard : ndarray, (p,), optional
        Physically consistent standard parameters θ with ``B θ = β`` (the
        consistent fit's); used by the URDF export.
    consistent : bool
        Whether ``standard`` is physically consistent (pseudo-inertias PSD,
        friction coefficients non-negative).
    metadata : dict, optional
    """

    dynamics = 'full'

    def __init__(self, robot, base, beta, friction_model=None, phi=None, std_errors=None,
                 standard=None, consistent=False, metadata=None, fit_gravity=None,
                 covariance=None):
        self.robot = robot
        self.base = base
        self.friction_model = friction_model or FrictionModel()
        beta = np.asarray(beta, dtype=float)
        if beta.shape != (base.count,):
            raise DataError(f'{beta.size} base parameter values for {base.count} parameters')
        nf = robot.n_joints * self.friction_model.per_joint
        phi = np.zeros(nf) if phi is None else np.asarray(phi, dtype=float)
        if phi.shape != (nf,):
            raise DataError(f'{phi.size} friction values for {nf} friction parameters')
        self.beta = beta
        self.phi = phi
        self.std_errors = (np.full(base.count + nf, np.nan) if std_errors is None
                           else np.asarray(std_errors, dtype=float))
        self.standard = None if standard is None else np.asarray(standard, dtype=float)
        # the fit's covariance of (β, φ) while the fit is at hand (not saved in the file)
        self.covariance = None if covariance is None else np.asarray(covariance, dtype=float)
        self.consistent = bool(consistent)
        self.metadata = dict(metadata or {})
        self.fit_gravity = robot.gravity_magnitude if fit_gravity is None else fit_gravity
        self._payload_beta = np.zeros(base.count)
        p = len(base.parameter_names)
        self._nb10 = 10 * robot.n_bodies
        if p not in (self._nb10, self._nb10 + robot.n_joints):
            raise DataError(f'base set over {p} parameters does not fit {robot.n_bodies} '
                            'bodies (10 each, + armature)')

    # properties -------------------------------------------------------------
    @property
    def joint_names(self):
        return self.robot.joint_names

    @property
    def armature(self):
        return self.base.armature

    @property
    def selection(self):
        return self.metadata.get('selection')

    @property
    def measurement(self):
        """What ``joint_states.effort`` carried in the fitted data and its conversion to
        torque (see :attr:`GravityModel.measurement`), or None."""
        return self.metadata.get('measurement')

    @property
    def friction_names(self):
        return self.friction_model.names(self.robot.n_joints)

    @property
    def parameter_names(self):
        """Names of ``[β, φ]``: base parameter names then friction names."""
        return tuple(self.base.names) + self.friction_names

    @property
    def parameter_values(self):
        return np.concatenate([self.beta, self.phi])

    def friction_table(self):
        """Friction values per term: ``{'coulomb': (n,), 'viscous': (n,), ...}``."""
        k = self.friction_model.per_joint
        phi = self.phi.reshape(-1, k)
        long = {'fc': 'coulomb', 'fv': 'viscous', 'fo': 'offset', 'fs': 'stribeck',
                'fcp': 'coulomb_positive', 'fcn': 'coulomb_negative', 'fl': 'coulomb_load'}
        return {long[t]: phi[:, i].copy() for i, t in enumerate(self.friction_model.terms)}

    @property
    def friction(self):
        """Coulomb and viscous friction per joint, as a GravityModel exposes them."""
        table = self.friction_table()
        coulomb = table.get('coulomb')
        if coulomb is None:     # directional: the mean of the two directions
            coulomb = 0.5 * (table['coulomb_positive'] + table['coulomb_negative'])
        return {'coulomb': coulomb, 'viscous': table['viscous']}

    # serving ----------------------------------------------------------------
    def _theta(self):
        """A full θ that gives the base values (zeros on the dependent columns)."""
        theta = np.zeros(len(self.base.parameter_names))
        theta[self.base.independent] = self.beta + self._payload_beta
        return theta

    def _single_regressor(self, q, dq, ddq):
        """Y (n, p) of one state: the query path (one pinocchio call, ~20 µs)."""
        robot = self.robot
        n = robot.n_joints
        for name, a in (('positions', q), ('velocities', dq), ('accelerations', ddq)):
            if a.shape != (n,):
                raise DataError(f'{name} have shape {a.shape}, expected ({n},) for joints '
                                f'{list(robot.joint_names)}')
        y = pin.computeJointTorqueRegressor(robot.model, robot.data, robot._pin_q(q),
                                            robot._pin_v(dq), robot._pin_v(ddq))[robot._idx_v]
        if self.armature:
            y = np.hstack([y, np.diag(ddq)])
        return y

    def rigid_body_torques(self, q, dq, ddq):
        """Rigid-body torques ``Y_b β`` (N·m): (n,) or (N, n) inputs and output."""
        q, dq, ddq = (np.asarray(a, dtype=float) for a in (q, dq, ddq))
        if q.ndim == 1:
            return self._single_regressor(q, dq, ddq) @ self._theta()
        return rigid_torques(self.robot, q, dq, ddq, self._theta(), armature=self.armature,
                             physical=self._physical_theta())

    def _physical_theta(self):
        """A θ of the model's base values near the URDF's: the consistent fit's own when it
        gives them (no payload added since), else the nominal θ moved by the least change
        that gives them (``B⁺``)."""
        beta = self.beta + self._payload_beta
        B = base_matrix(self.base)
        if self.standard is not None and len(self.standard) == B.shape[1] and np.allclose(
                B @ self.standard, beta, rtol=1e-9, atol=1e-12):
            return self.standard
        nominal = nominal_standard_parameters(self.robot, self.armature)
        return nominal + np.linalg.pinv(B) @ (beta - B @ nominal)

    def nominal_load(self, q, dq, ddq):
        """``τ_load``: the nominal URDF's rigid-body torque (N·m), the load of the
        load-dependent Coulomb term; (n,) or (N, n)."""
        q, dq, ddq = (np.asarray(a, dtype=float) for a in (q, dq, ddq))
        theta = nominal_standard_parameters(self.robot, self.armature)
        if q.ndim == 1:
            return self._single_regressor(q, dq, ddq) @ theta
        return rigid_torques(self.robot, q, dq, ddq, theta, armature=self.armature,
                             physical=theta)

    def friction_torques(self, dq, q=None, ddq=None):
        """Friction torques ``F(q̇) φ`` (N·m): (n,) or (N, n).

        A load-dependent model needs q and q̈ for its ``fl`` term (the nominal load
        torque); without them that term is left out (friction at no load)."""
        dq = np.asarray(dq, dtype=float)
        if dq.ndim not in (1, 2) or dq.shape[-1] != self.robot.n_joints:
            raise DataError(f'velocities have shape {dq.shape}, expected (N, '
                            f'{self.robot.n_joints})')
        load = None
        if self.friction_model.load and q is not None:
            load = self.nominal_load(q, dq, np.zeros_like(dq) if ddq is None else ddq)
        return self.friction_model.torques(dq, self.phi, load)

    def torques(self, q, dq, ddq):
        """Full inverse dynamics with friction (N·m): (n,) or (N, n)."""
        return self.rigid_body_torques(q, dq, ddq) + self.friction_torques(dq, q, ddq)

    def gravity_torques(self, q, gravity=None):
        """G(q) (N·m), as :meth:`GravityModel.gravity_torques`.

        Parameters
        ----------
        q : ndarray, (n,) or (N, n)
        gravity : float, optional
            Magnitude (m/s²), same direction; default the robot's current one.
        """
        q = np.asarray(q, dtype=float)
        if q.ndim not in (1, 2) or q.shape[-1] != self.robot.n_joints:
            raise DataError(f'positions have shape {q.shape}, expected (N, '
                            f'{self.robot.n_joints})')
        g = None
        if gravity is not None:
            direction = self.robot.gravity_vector / self.robot.gravity_magnitude
            g = float(gravity) * direction
        if q.ndim == 1:
            # the rigid-body regressor at rest is the gravity regressor; gravity is
            # linear in g, so another magnitude along the same direction scales it
            zero = np.zeros_like(q)
            out = self._single_regressor(q, zero, zero) @ self._theta()
            return out if gravity is None else out * float(gravity) / \
                self.robot.gravity_magnitude
        theta = self._theta()[:self._nb10].reshape(-1, 10)[:, :4].ravel()
        return self.robot.gravity_torques_batch(q, theta, gravity=g)

    def gravity_torques_along(self, q, vector):
        """G(q) (N, n) with gravity ``vector`` (m/s², (3,), in the URDF's root frame) in
        place of the fit's: the model's first moments under another direction (the base
        values, zeros on the parameters the fit leaves undetermined); linear in
        ``vector``. Unlike a gravity fit's (:meth:`GravityModel.gravity_torques_along
        <arm_dyn_id.model.gravity.GravityModel.gravity_torques_along>`), the motion
        determines the first moments a tilt needs: the URDF's values in place of the
        zeros moved the tilt read on UR5 and Panda records (0-6°) by under 0.1°."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        theta = self._theta()[:self._nb10].reshape(-1, 10)[:, :4].ravel()
        return self.robot.gravity_torques_batch(q, theta,
                                                gravity=np.asarray(vector, dtype=float))

    def set_gravity(self, magnitude):
        """Serve another gravity magnitude from now on (m/s²)."""
        self.robot.set_gravity(magnitude)
        return self

    def payload_beta(self, payload):
        """Δβ of a rigid payload (linear in its 10 inertial parameters)."""
        loaded = self.robot.with_payload(payload)
        delta = loaded.parameters('inertial') - self.robot.parameters('inertial')
        if self.armature:
            delta = np.concatenate([delta, np.zeros(self.robot.n_joints)])
        return self.base.beta(delta)

    def set_payload(self, payload):
        """Add a known payload analytically (None removes it)."""
        self._payload_beta = (np.zeros(self.base.count) if payload is None
                              else self.payload_beta(payload))
        return self

    # files --------------------------------------------------------------------
    def to_dict(self):
        table = self.friction_table()
        doc = files.header(SCHEMA, VERSION, 'full', self.robot, self.metadata, self.fit_gravity)
        doc['base'] = files.base_section(
            self.base, self.beta, self.std_errors[:self.base.count],
            'kg, kg*m, kg*m^2 (inertia about the joint frame origin)')
        # friction has its own section; rotor inertias (armature) are base columns here
        doc['base'].update(friction=False, armature=self.armature)
        doc['friction'] = {
            'model': self.friction_model.to_dict(),
            'names': list(self.friction_names), 'values': files.floats(self.phi),
            'std_errors': files.floats(self.std_errors[self.base.count:]),
            'units': 'N*m (fc, fcp, fcn, fo, fs), N*m*s/rad (fv), 1 (fl)',
            **{k: files.floats(v) for k, v in table.items()},
        }
        doc['consistent'] = self.consistent
        if self.standard is not None:
            doc['standard'] = {'names': list(self.base.parameter_names),
                               'values': files.floats(self.standard)}
        return files.add_metadata(doc, self.metadata, METADATA_SECTIONS)

    def to_yaml(self):
        return files.to_yaml(self.to_dict())

    def save(self, path):
        """Write the model file (YAML); atomic (temp file + rename)."""
        return files.save(self.to_dict(), path)

    @classmethod
    def from_dict(cls, doc, urdf=None, source='<model>'):
        """Rebuild a model from its file contents (see :meth:`GravityModel.from_dict`)."""
        files.check_header(doc, SCHEMA, VERSION, source, 'full-dynamics')
        try:
            robot, urdf_path = files.robot_of(doc, urdf, source)
            b = doc['base']
            base = BaseParameters.from_dict(b)
            fr = doc.get('friction', {})
            friction_model = FrictionModel.from_dict(fr.get('model'))
            beta = files.array(b['values'])
            phi = files.array(fr.get('values'))
            errors = np.concatenate([files.array(b.get('std_errors'), len(beta)),
                                     files.array(fr.get('std_errors'), len(phi))])
        except JointNameError:
            raise                 # its joints are not the URDF's: another robot, not a key
        except (KeyError, TypeError) as exc:
            raise ConfigError(f'{source}: model file is missing {exc}') from exc
        metadata = files.read_metadata(doc, urdf_path, METADATA_SECTIONS)
        measurement = files.read_measurement(doc, source)
        if measurement is not None:
            metadata['measurement'] = measurement
        standard = doc.get('standard')
        return cls(robot, base, beta, friction_model, phi, errors,
                   standard=None if standard is None else files.array(standard['values']),
                   consistent=bool(doc.get('consistent', False)), metadata=metadata,
                   fit_gravity=doc['gravity']['magnitude'])

    @classmethod
    def load(cls, path, urdf=None):
        """Read a model file written by :meth:`save`."""
        return cls.from_dict(files.read_model_file(path), urdf=urdf, source=str(path))


__all__ = ['DynamicsModel', 'FrictionModel', 'parse_friction', 'FRICTION_WORDS',
           'parameter_legend', 'parameter_term',
           'rigid_regressor', 'rigid_base_parameters', 'gravity_base_regressor',
           'standard_parameter_names', 'nominal_standard_parameters', 'base_matrix',
           'rigid_torques',
           'SCHEMA', 'SLOW_SPEED', 'VERSION']
