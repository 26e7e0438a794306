"""Gravity compensation for a torque- or current-controlled arm, testable without a Node.

For every joint state the compensation command is::

    tau = clamp( G(q; g, payload) + s_f (f_c tanh(dq / v_b) + f_v dq),  ±tau_max )
    I   = tau / k                      (current-controlled drivers: k = sign·k_e·ratio·eff)

``G`` is the identified model's gravity torque at the gravity *vector* ``g`` (root
frame of the URDF: floor, tilted, wall or ceiling mount) with a payload added
analytically; the friction term is an optional feed-forward (Coulomb with a smooth
breakaway of velocity ``v_b`` plus viscous, scaled by ``s_f`` in [0, 1]) and
``tau_max`` the URDF effort limits. When no joint state arrived for longer than
the stale timeout the command is all zeros. ``k`` comes from the configured torque
constants, else from the model file's ``measurement`` section (a model fitted from
currents carries them: :func:`output_gains`).

How G is served at any gravity vector: only base combinations ``β`` of the link
mass parameters are identified (seed 000 eq. 8), so the model is turned into one
full parameter vector ``θ`` with ``base.beta(θ) = β`` - the URDF's nominal values,
moved on the independent entries (as :class:`~arm_dyn_id.service.gravity.FastGravity`
does). At the gravity direction of the fit every such ``θ`` gives the same G(q);
at another direction, combinations the fit could not see (for a floor-mounted
arm, e.g. the first link's horizontal first moments) keep their URDF values, and
:attr:`GravityTorques.notes` says so. A pinocchio model carrying ``θ`` then serves
``computeGeneralizedGravity`` in microseconds, the payload being a rigid body added
to its frame.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pinocchio as pin

from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.data.motor import effort_reading
from arm_dyn_id.errors import ConfigError, JointNameError
from arm_dyn_id.model.robot import FRICTION_PARAMS
from arm_dyn_id.service.gravity import carry_mass_parameters

OUTPUTS = ('effort', 'current')
#: States of a :class:`Compensator`: no joint state yet, commanding, or stale (zeros).
WAITING, ACTIVE, STALE = 'waiting', 'active', 'stale'
_DIRECTION_TOLERANCE = np.deg2rad(1.0)


def gravity_vector_from(values):
    """A gravity vector (3,) m/s² from a parameter value, checked.

    Raises
    ------
    ConfigError
        Not three finite numbers, or zero.
    """
    try:
        g = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ConfigError(f'parameter gravity_vector = {values!r} must be three numbers '
                          '[gx, gy, gz] (m/s², URDF root frame)') from None
    if g.shape != (3,) or not np.all(np.isfinite(g)) or np.linalg.norm(g) == 0:
        raise ConfigError(f'parameter gravity_vector = {g.tolist()} must be three finite '
                          'numbers, not all zero (m/s², URDF root frame; floor: [0, 0, -9.81])')
    return g


def _full_theta(model):
    """One full parameter vector θ (named by ``model.base.parameter_names``) with
    ``base.beta(θ) = β``: URDF nominal values moved on the independent entries."""
    base, robot = model.base, model.robot
    nominal = dict(zip(robot.parameter_names('inertial'), robot.parameters('inertial')))
    friction = getattr(model, 'friction', None) or {}
    for k in range(robot.n_joints):
        for key, label in (('coulomb', 'fc'), ('viscous', 'fv')):
            values = np.asarray(friction.get(key, []), dtype=float)
            value = values[k] if values.shape == (robot.n_joints,) else np.nan
            nominal[f'{label}{k + 1}'] = value if np.isfinite(value) else 0.0
        nominal[f'Ia{k + 1}'] = 0.0         # rotor inertia (armature): no gravity
    names = list(base.parameter_names)
    unknown = [n for n in names if n not in nominal]
    if unknown:
        raise ConfigError(f'model parameter {unknown[0]!r} is not a link or friction parameter '
                          'this arm_dyn_id knows; upgrade arm_dyn_id')
    theta = np.array([nominal[n] for n in names], dtype=float)
    beta = np.asarray(model.beta, dtype=float)
    if not np.all(np.isfinite(beta)):
        raise ConfigError('the model has NaN base parameters; it cannot be served')
    theta[base.independent] += beta - base.beta(theta)
    return dict(zip(names, theta))


def model_friction(model):
    """(coulomb, viscous) per joint (n,) of a model, NaN where the model does not know.

    A full-dynamics model with friction columns gives its identified values; a
    gravity model gives what its file's ``friction`` section holds.
    """
    n = model.robot.n_joints
    fc, fv = np.full(n, np.nan), np.full(n, np.nan)
    friction = getattr(model, 'friction', None) or {}
    for out, key in ((fc, 'coulomb'), (fv, 'viscous')):
        values = np.asarray(friction.get(key, []), dtype=float)
        if values.shape == (n,):
            out[:] = values
    base = getattr(model, 'base', None)
    if base is not None and base.friction:
        theta = _full_theta(model)
        for k in range(n):
            for out, label in ((fc, FRICTION_PARAMS[0]), (fv, FRICTION_PARAMS[1])):
                name = f'{label}{k + 1}'
                if name in theta:
                    out[k] = theta[name]
    return fc, fv


class GravityTorques:
    """G(q) (N·m) at a gravity vector with a payload, one configuration in microseconds.

    Build with :meth:`from_model` (an identified model) or :meth:`from_robot` (the
    URDF's nominal parameters). Instances are never mutated: :meth:`with_payload`
    and :meth:`with_gravity` return new ones, so a node swaps one reference.

    Attributes
    ----------
    joint_names : tuple of str
    gravity_vector : ndarray, (3,)
        m/s², URDF root frame.
    payload : Payload or None
    source : str
        ``'model'`` or ``'urdf'`` (nominal).
    notes : list of str
        What a user should know (e.g. a gravity direction other than the fit's).
    """

    def __init__(self, robot, theta, gravity_vector, payload=None, source='urdf',
                 fit_direction=None):
        self._robot = robot
        self._theta = np.asarray(theta, dtype=float)
        self.gravity_vector = gravity_vector_from(gravity_vector)
        self.payload = payload
        self.source = source
        self._fit_direction = fit_direction
        self.joint_names = tuple(robot.joint_names)
        self.notes = []
        served = robot.copy()
        self._exact = self._carry(served, self._theta)
        if payload is not None:
            try:
                loaded = served.with_payload(payload)
            except JointNameError as exc:
                raise ConfigError(f'parameter payload_frame = {payload.frame!r}: {exc}') \
                    from None
            self._theta = self._theta + (loaded.parameters('gravity')
                                         - served.parameters('gravity'))
            served = loaded
        g = self.gravity_vector
        served.set_gravity(float(np.linalg.norm(g)), g)
        self._served = served
        self._pin_model = served.model
        self._pin_data = served.data
        self._idx_v = np.array([served.model.joints[served.model.getJointId(j)].idx_v
                                for j in self.joint_names], dtype=int)
        self._q = pin.neutral(served.model)
        self._idx_q = np.array([served.model.joints[served.model.getJointId(j)].idx_q
                                for j in self.joint_names], dtype=int)
        self._continuous = np.array([served.model.joints[served.model.getJointId(j)].nq == 2
                                     for j in self.joint_names])
        if fit_direction is not None:
            cos = float(np.dot(fit_direction, g) / np.linalg.norm(g))
            if np.arccos(np.clip(cos, -1.0, 1.0)) > _DIRECTION_TOLERANCE:
                self.notes.append(
                    f'gravity direction {np.round(g / np.linalg.norm(g), 4).tolist()} differs '
                    f'from the one the model was fitted at '
                    f'{np.round(fit_direction, 4).tolist()}: mass moments the fit could not '
                    'see keep their URDF values')
        if not self._exact:
            self.notes.append('a body of zero mass carries a first moment: serving through '
                              'the regressor (slower, same values)')

    # construction -------------------------------------------------------------
    @classmethod
    def from_model(cls, model, gravity_vector=None, payload=None):
        """From an identified model (GravityModel, or any model with ``robot``, ``base``
        with its ``parameter_names`` and ``beta``: a full-dynamics model works too).

        Parameters
        ----------
        gravity_vector : array_like (3,), optional
            m/s² in the URDF root frame; default the gravity the model was fitted at.
        """
        robot = model.robot
        fit = np.asarray(robot.gravity_vector, dtype=float)
        fit_direction = fit / np.linalg.norm(fit)
        if gravity_vector is None:
            magnitude = float(getattr(model, 'fit_gravity', np.linalg.norm(fit)))
            gravity_vector = magnitude * fit_direction
        full = _full_theta(model)
        theta = np.array([full.get(name, nominal) for name, nominal in zip(
            robot.parameter_names('gravity'), robot.parameters('gravity'))])
        return cls(robot, theta, gravity_vector, payload, source='model',
                   fit_direction=fit_direction)

    @classmethod
    def from_robot(cls, robot, gravity_vector=None, payload=None):
        """From a URDF's nominal inertial parameters (:class:`RobotModel`)."""
        if gravity_vector is None:
            gravity_vector = robot.gravity_vector
        return cls(robot, robot.parameters('gravity'), gravity_vector, payload, source='urdf')

    def with_payload(self, payload):
        """The same model with another payload (None: none)."""
        return GravityTorques(self._robot, self._base_theta, self.gravity_vector, payload,
                              self.source, self._fit_direction)

    def with_gravity(self, gravity_vector):
        """The same model at another gravity vector (m/s², (3,))."""
        return GravityTorques(self._robot, self._base_theta, gravity_vector, self.payload,
                              self.source, self._fit_direction)

    def _carry(self, robot, theta):
        """Put the mass parameters θ into ``robot``'s pinocchio inertias; False when one
        cannot be represented (zero mass with a first moment)."""
        self._base_theta = np.array(theta, dtype=float)
        return carry_mass_parameters(robot, theta)

    # serving --------------------------------------------------------------------
    def torques(self, q):
        """G(q) (N·m), (n,), for q (n,) rad in the order of :attr:`joint_names`."""
        if not self._exact:
            return self.batch(np.asarray(q, dtype=float)[None, :])[0]
        qq = self._q
        q = np.asarray(q, dtype=float)
        if self._continuous.any():
            for k, i in enumerate(self._idx_q):
                if self._continuous[k]:
                    qq[i:i + 2] = (np.cos(q[k]), np.sin(q[k]))
                else:
                    qq[i] = q[k]
        else:
            qq[self._idx_q] = q
        return pin.computeGeneralizedGravity(self._pin_model, self._pin_data, qq)[self._idx_v]

    def batch(self, q):
        """G for many configurations, (N, n) -> (N, n) N·m."""
        return self._robot.gravity_torques_batch(np.atleast_2d(q), self._theta,
                                                 gravity=self.gravity_vector)

    @property
    def effort_limits(self):
        """URDF ``<limit effort>`` per joint (N·m), (n,); inf where the URDF gives none."""
        limits = np.asarray(self._pin_model.effortLimit, dtype=float)[self._idx_v]
        return np.where(limits > 0, limits, np.inf)


@dataclass(frozen=True)
class FrictionFeedforward:
    """Coulomb friction with a smooth breakaway plus viscous, as a feed-forward.

    ``tau_f = fraction (coulomb tanh(dq / breakaway_velocity) + viscous dq)``
    (seed 001 eq. 2 with sign() smoothed). A fraction below 1 keeps a little of the
    friction's damping, so velocity noise at rest does not make the arm creep.

    Attributes
    ----------
    coulomb, viscous : ndarray, (n,)
        N·m and N·m·s/rad.
    breakaway_velocity : float
        rad/s; the tanh reaches 76 % of the Coulomb level at this speed.
    fraction : float
        0 (off) .. 1 (full compensation).
    """

    coulomb: np.ndarray
    viscous: np.ndarray
    breakaway_velocity: float = 0.05
    fraction: float = 1.0

    def __post_init__(self):
        for name in ('coulomb', 'viscous'):
            values = np.asarray(getattr(self, name), dtype=float)
            if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ConfigError(f'parameter friction_{name} = {values.tolist()} must be '
                                  'one finite value >= 0 per joint')
            object.__setattr__(self, name, values)
        if not np.isfinite(self.breakaway_velocity) or self.breakaway_velocity <= 0:
            raise ConfigError(f'parameter friction_breakaway_velocity = '
                              f'{self.breakaway_velocity} must be > 0 (rad/s)')
        if not 0.0 <= self.fraction <= 1.0:
            raise ConfigError(f'parameter friction_compensation = {self.fraction} must be in '
                              '[0, 1]')

    def torques(self, dq):
        """Feed-forward (N·m), (n,), at joint velocities ``dq`` (n,) rad/s."""
        dq = np.asarray(dq, dtype=float)
        return self.fraction * (self.coulomb * np.tanh(dq / self.breakaway_velocity)
                                + self.viscous * dq)


def friction_feedforward(model_coulomb, model_viscous, joints, coulomb=None, viscous=None,
                         breakaway_velocity=0.05, fraction=0.0, model_width=0.0):
    """The friction feed-forward from a model's friction and the values a user gave.

    A user's value wins over the model's. A model's coefficient that is negative (a
    gravity fit from single-speed sweeps could write one: it cannot tell viscous friction
    from an offset) or unknown (NaN) is not physically signed: that joint gets no such
    feed-forward, and a note says so; the model is still served. Only a value the user
    gave is refused, and the error names its parameter.

    Parameters
    ----------
    model_coulomb, model_viscous : array_like (n,)
        The model's coefficients in the output order (N·m, N·m·s/rad), NaN where unknown.
    joints : sequence of str
        Output joint names (n,), for the note.
    coulomb, viscous : array_like (n,), optional
        ``friction_coulomb`` / ``friction_viscous`` given by the user.
    breakaway_velocity, fraction : float
        As :class:`FrictionFeedforward`.
    model_width : float
        rad/s, the width of the model's own smooth sign (``friction.model.smooth_velocity``
        of a full-dynamics model, chosen by its fit: up to 0.32 rad/s): the breakaway
        velocity used is at least this, so the model's Coulomb term is not fed forward
        faster than the model itself has it rise (with the model's coefficients only).

    Returns
    -------
    (FrictionFeedforward, list of str)
        The feed-forward and the notes (one line at most).

    Raises
    ------
    ConfigError
        A value the user gave (``friction_coulomb``, ``friction_viscous``,
        ``friction_breakaway_velocity``, ``friction_compensation``) is wrong.
    """
    n = len(joints)
    out, dropped = {}, []
    for key, model_values, given in (('coulomb', model_coulomb, coulomb),
                                     ('viscous', model_viscous, viscous)):
        name = f'friction_{key}'
        if given is not None:
            values = np.asarray(given, dtype=float).reshape(-1)
            if values.shape != (n,) or not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ConfigError(f'parameter {name} = {values.tolist()} must be {n} finite '
                                  'values >= 0 (one per joint)')
            out[key] = values
            continue
        values = np.asarray(model_values, dtype=float).reshape(-1)
        if values.shape != (n,):
            raise ConfigError(f'the model\'s {key} friction has {values.size} values for {n} '
                              f'joints {list(joints)}')
        negative = np.isfinite(values) & (values < 0)
        dropped += [f'{j} {key} {v:.4g}' for j, v, bad in zip(joints, values, negative) if bad]
        out[key] = np.where(np.isfinite(values) & ~negative, values, 0.0)
    try:
        breakaway_velocity = float(breakaway_velocity)
        fraction = float(fraction)
    except (TypeError, ValueError):
        raise ConfigError(f'parameters friction_breakaway_velocity = {breakaway_velocity!r} '
                          f'and friction_compensation = {fraction!r} must be numbers') from None
    notes = []
    if coulomb is None and np.isfinite(model_width) and model_width > breakaway_velocity:
        breakaway_velocity = float(model_width)
    if dropped:
        notes.append(f'the model\'s friction is negative for {", ".join(dropped)} (not '
                     'physical: a fit from single-speed sweeps cannot separate it): no friction '
                     'feed-forward for these terms; give friction_coulomb / friction_viscous '
                     'to feed some forward')
    return FrictionFeedforward(out['coulomb'], out['viscous'], breakaway_velocity,
                               fraction), notes


class Command(NamedTuple):
    """One compensation command.

    Attributes
    ----------
    values : ndarray, (n,)
        What to publish: N·m (``effort``) or A (``current``), in the output joint order.
    torques : ndarray, (n,)
        The joint torques after clamping (N·m).
    saturated : ndarray of bool, (n,)
        Joints whose torque was clamped to the effort limit.
    state : str
        :data:`ACTIVE` or :data:`STALE` (all zeros).
    """

    values: np.ndarray
    torques: np.ndarray
    saturated: np.ndarray
    state: str


def output_gains(output, joints, model=None, config=None):
    """The N·m per A that output ``current`` divides by, and where they come from.

    The configured torque constants when there are, else the model file's (its
    ``measurement`` section: a model fitted from currents), by
    :func:`arm_dyn_id.data.motor.effort_reading`.

    Parameters
    ----------
    output : {'effort', 'current'}
    joints : sequence of str, (n,)
        Output order.
    model : GravityModel or DynamicsModel, optional
        The served model (None: the URDF's nominal values).
    config : ArmConfig, optional
        Only when its torque constants were configured explicitly.

    Returns
    -------
    (ndarray (n,) or None, str)
        Gains (sign included; None for output effort) and ``torque constants of ...``.

    Raises
    ------
    ConfigError
        Output current and no torque constants anywhere: says what to give.
    """
    if output != 'current':
        return None, ''
    reading = effort_reading(joints, getattr(model, 'measurement', None), effort='current',
                             config=config, model_joints=getattr(model, 'joint_names', None),
                             need='output current gives A = N·m / k_e')
    return reading.gains, f'torque constants of {reading.source}'


class Compensator:
    """Joint states in, compensation commands out; stale input gives zeros.

    Parameters
    ----------
    gravity : GravityTorques
    joints : sequence of str, optional
        Output order (the effort controller's ``joints``); default the model's.
        Must name the model's joints, in any order.
    effort_limits : array_like (n,), optional
        N·m in the output order; default the URDF's. Every joint needs a finite one.
    output : {'effort', 'current'}
    torque_gains : array_like (n,), optional
        ``current``: N·m per A at the joint, sign included (``ArmConfig.joint_torque_gains``,
        or :func:`output_gains`).
    gains_source : str
        Where ``torque_gains`` came from, for diagnostics.
    friction : FrictionFeedforward, optional
        In the output order.
    stale_timeout : float
        s without a usable joint state after which the command is zeros.

    Raises
    ------
    ConfigError
        Naming the parameter that is wrong.
    """

    def __init__(self, gravity, joints=None, effort_limits=None, output='effort',
                 torque_gains=None, friction=None, stale_timeout=0.1, gains_source=''):
        joints = tuple(gravity.joint_names if not joints else joints)
        if sorted(joints) != sorted(gravity.joint_names) or len(set(joints)) != len(joints):
            raise ConfigError(f'parameter joints = {list(joints)} must name the model\'s '
                              f'joints {list(gravity.joint_names)} once each (any order)')
        self.joints = joints
        n = len(joints)
        self._set_order(gravity)
        if output not in OUTPUTS:
            raise ConfigError(f'parameter output = {output!r} must be one of {list(OUTPUTS)}')
        self.output = output
        if effort_limits is None or len(effort_limits) == 0:
            limits = gravity.effort_limits[self._order]
            missing = [j for j, v in zip(joints, limits) if not np.isfinite(v)]
            if missing:
                raise ConfigError(f'joint {missing[0]!r} has no <limit effort> in the URDF: '
                                  'give effort_limits (N·m, one per joint)')
        else:
            limits = self._per_joint('effort_limits', effort_limits, n)
            if np.any(limits <= 0):
                raise ConfigError(f'parameter effort_limits = {limits.tolist()} must be > 0 '
                                  '(N·m)')
        self.effort_limits = limits
        self.torque_gains = None
        if output == 'current':
            if torque_gains is None:
                raise ConfigError('output current needs torque_constants (N·m/A per joint)')
            gains = self._per_joint('torque_constants', torque_gains, n)
            if np.any(gains == 0):
                raise ConfigError(f'parameter torque_constants = {gains.tolist()} must not be '
                                  'zero for output current')
            self.torque_gains = gains
        self.gains_source = gains_source if output == 'current' else ''
        if friction is not None and np.asarray(friction.coulomb).shape != (n,):
            raise ConfigError(f'friction feed-forward has {len(friction.coulomb)} values for '
                              f'{n} joints')
        self.friction = friction
        if not np.isfinite(stale_timeout) or stale_timeout <= 0:
            raise ConfigError(f'parameter stale_timeout = {stale_timeout} must be > 0 (s)')
        self.stale_timeout = float(stale_timeout)
        self.gravity = gravity
        self.check = JointStateCheck(joints)
        self._last = None          # receipt time (s, monotonic) of the last usable state
        self.counts = {'commands': 0, 'zeros': 0, 'rejected': 0, 'saturated': 0,
                       'no_velocity': 0, 'stale_events': 0}
        self.state = WAITING
        self._zero = Command(np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool), STALE)

    @staticmethod
    def _per_joint(name, values, n):
        arr = np.asarray(values, dtype=float).reshape(-1)
        if arr.shape != (n,) or not np.all(np.isfinite(arr)):
            raise ConfigError(f'parameter {name} = {arr.tolist()} must be {n} finite values '
                              '(one per joint)')
        return arr

    def set_gravity_model(self, gravity):
        """Swap the gravity model (payload or gravity vector changed, new model file)."""
        if sorted(gravity.joint_names) != sorted(self.joints):
            raise ConfigError(f'model joints {list(gravity.joint_names)} differ from '
                              f'{list(self.joints)}')
        self._set_order(gravity)
        self.gravity = gravity

    def update(self, now, names, position, velocity=()):
        """One joint state received at ``now`` (s, monotonic): its command, or a Rejection.

        A rejected message (missing joints, NaN, ...) does not count as fresh.
        """
        sample = self.check.check(names, position=position, velocity=velocity)
        if isinstance(sample, Rejection):
            self.counts['rejected'] += 1
            return sample
        self._last = now
        self.state = ACTIVE
        tau = self.gravity.torques(sample.position[self._inverse])[self._order]
        if self.friction is not None and self.friction.fraction > 0:
            if sample.velocity is None:
                self.counts['no_velocity'] += 1
            else:
                tau = tau + self.friction.torques(sample.velocity)
        return self._command(tau)

    def _set_order(self, gravity):
        # _order: output joint k is model joint _order[k]; _inverse: model joint i is
        # output joint _inverse[i]
        self._order = np.array([gravity.joint_names.index(j) for j in self.joints])
        self._inverse = np.empty_like(self._order)
        self._inverse[self._order] = np.arange(len(self._order))

    def command_for(self, q, dq=None):
        """The command at q (n,) [and dq] in the output order, freshness left alone."""
        tau = self.gravity.torques(np.asarray(q, dtype=float)[self._inverse])[self._order]
        if self.friction is not None and dq is not None:
            tau = tau + self.friction.torques(dq)
        return self._command(tau)

    def _command(self, tau):
        limits = self.effort_limits
        clamped = np.clip(tau, -limits, limits)
        saturated = clamped != tau
        if saturated.any():
            self.counts['saturated'] += 1
        values = clamped / self.torque_gains if self.output == 'current' else clamped
        self.counts['commands'] += 1
        return Command(values, clamped, saturated, ACTIVE)

    def poll(self, now):
        """At ``now`` (s, monotonic): the zero command if the input is stale, else None.

        Returns
        -------
        (Command or None, bool)
            The zeros to send (every poll while stale), and whether the input *became*
            stale at this poll (to say so once).
        """
        if self._last is None:
            return None, False
        if now - self._last <= self.stale_timeout:
            return None, False
        became = self.state != STALE
        if became:
            self.counts['stale_events'] += 1
        self.state = STALE
        self.counts['zeros'] += 1
        return self._zero, became

    def age(self, now):
        """Seconds since the last usable joint state (inf before the first)."""
        return np.inf if self._last is None else now - self._last


__all__ = ['GravityTorques', 'FrictionFeedforward', 'Compensator', 'Command',
           'gravity_vector_from', 'model_friction', 'friction_feedforward', 'output_gains',
           'OUTPUTS', 'WAITING', 'ACTIVE', 'STALE']
