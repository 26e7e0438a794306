"""Serving an identified gravity model fast: one configuration in microseconds.

:meth:`GravityModel.gravity_torques` evaluates ``Y_b(q) β`` with the vectorised
regressor, which costs about 1 ms for a single configuration (array set-up
dominates). A gravity service at 1 kHz needs far less. Gravity is linear in the
link mass parameters θ (m, m·c per body) and only their base combinations
``β = θ_b + K θ_d`` are identified (seed 000 eq. 8), so *any* θ with
``base.beta(θ) = β`` gives the same ``G(q)`` for every q. :class:`FastGravity`
takes the URDF's nominal θ and moves its independent entries by
``β - base.beta(θ_nominal)``; a pinocchio model carrying that θ then serves
``computeGeneralizedGravity`` at a few µs per call. The θ need not be physically
consistent (that is :mod:`arm_dyn_id.model.export`'s job); only a body mass of exactly
zero with a non-zero first moment cannot be represented, and then the slow exact
path is used.

:class:`ServedModel` is what a gravity service serves: the fast path plus the
validation of every query (joint names and positions checked by
:class:`arm_dyn_id.data.joint_states.JointStateCheck`), with a named rejection
reason for every refused request.

A full-dynamics model (:mod:`arm_dyn_id.service.dynamics`) serves its gravity the same
way, through its pinocchio equivalent.
"""

import numpy as np
import pinocchio as pin

from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.errors import DataError
from arm_dyn_id.model.robot import Payload
from arm_dyn_id.service.dynamics import NO_MODEL, EquivalentDynamics, is_full

_MIN_MASS = 1e-9     # kg; below this a body cannot carry a first moment in pinocchio


def carry_mass_parameters(robot, theta):
    """Put the gravity parameters θ (m, m·c per body, 4 per body) into ``robot``'s
    pinocchio inertias (rotational inertia kept). True when every body could take them;
    False when one cannot be represented (zero mass with a first moment): that body is
    left as it was, the others are loaded all the same."""
    pm = robot.model
    exact = True
    for body in range(robot.n_bodies):
        m, mx, my, mz = theta[4 * body:4 * body + 4]
        if abs(m) < _MIN_MASS:
            if max(abs(mx), abs(my), abs(mz)) > 0:
                exact = False
                continue
            m = 0.0
        dyn = np.array(pm.inertias[body + 1].toDynamicParameters(), dtype=float)
        dyn[:4] = (m, mx, my, mz)
        pm.inertias[body + 1] = pin.Inertia.FromDynamicParameters(dyn)
    robot.data = pm.createData()
    return exact


class FastGravity:
    """G(q) of an identified model at a chosen gravity and payload, one q at a time.

    Parameters
    ----------
    model : GravityModel
        The identified model (not modified).
    gravity : float, optional
        Gravity magnitude served (m/s²); default the model's fit gravity.
    payload : Payload, optional
        A known payload added analytically (``GravityModel.payload_beta``).

    Attributes
    ----------
    exact : bool
        False when the equivalent pinocchio model could not be built and the
        (slow, exact) regressor path serves instead.
    max_error : float
        Largest difference (N·m) between the two paths on random check poses.
    """

    def __init__(self, model, gravity=None, payload=None, check_samples=20, seed=0):
        self.model = model
        self.fit_gravity = float(model.fit_gravity)
        self.gravity = float(model.fit_gravity if gravity is None else gravity)
        if not np.isfinite(self.gravity) or self.gravity < 0:
            raise ValueError(f'gravity {self.gravity} m/s² must be a finite magnitude >= 0')
        self.payload = payload
        beta = np.array(model.beta, dtype=float)
        if not np.all(np.isfinite(beta)):
            raise DataError('the model has NaN base parameters; it cannot be served')
        if payload is not None and payload.mass > 0:
            beta = beta + model.payload_beta(payload)
        self.beta = beta
        robot = model.robot.copy()
        direction = robot.gravity_vector / robot.gravity_magnitude
        robot.set_gravity(self.gravity, direction)
        self._robot = robot
        self._direction = direction
        self.exact = self._load_equivalent(robot, model.base, beta)
        self.max_error = 0.0
        if self.exact:
            rng = np.random.default_rng(seed)
            q = rng.uniform(-np.pi, np.pi, size=(check_samples, robot.n_joints))
            fast = np.array([self._fast(qi) for qi in q])
            slow = self._slow(q)
            self.max_error = float(np.max(np.abs(fast - slow)))
            scale = max(1.0, float(np.max(np.abs(slow))))
            if self.max_error > 1e-9 * scale:
                self.exact = False
        self.torques = self._fast if self.exact else self._slow

    @staticmethod
    def _load_equivalent(robot, base, beta):
        theta = robot.parameters('gravity')
        theta[base.independent] += beta - base.beta(theta)
        return carry_mass_parameters(robot, theta)

    def _fast(self, q):
        return self._robot.gravity_torques(q)

    def _slow(self, q):
        q = np.asarray(q, dtype=float)
        Y = self.model.base.reduce(
            self.model.robot.gravity_regressor(q, gravity=self.gravity * self._direction))
        return Y @ self.beta

    @property
    def joint_names(self):
        return self.model.joint_names


def payload_from(mass, com, frame):
    """A :class:`~arm_dyn_id.model.robot.Payload` from parameter values, or None for mass 0.

    Raises
    ------
    ValueError
        If the mass is negative or the centre of mass is not 3 finite numbers.
    """
    mass = float(mass)
    com = tuple(float(c) for c in com)
    if not np.isfinite(mass) or mass < 0:
        raise ValueError(f'payload_mass = {mass} kg must be >= 0')
    if len(com) != 3 or not np.all(np.isfinite(com)):
        raise ValueError(f'payload_com = {list(com)} must be 3 finite numbers (m)')
    if mass == 0:
        return None
    return Payload(mass=mass, com=com, frame=str(frame))


class ServedModel:
    """An identified model as served: G(q) plus the checks of every request.

    Swapped as one reference by the node, never mutated, so the serving paths read
    it without a lock.

    Parameters
    ----------
    model : GravityModel or DynamicsModel
        A full-dynamics model serves its G(q) through
        :class:`arm_dyn_id.service.dynamics.EquivalentDynamics`.
    gravity : float or None
        Gravity served (m/s²); None or 0: the model's fit gravity.
    payload : Payload or None
    fast : EquivalentDynamics, optional
        Already built for this model, gravity and payload (the node shares the one
        its :class:`~arm_dyn_id.service.dynamics.ServedDynamics` built).

    Attributes
    ----------
    fast : FastGravity or EquivalentDynamics
        ``gravity``, ``payload``, ``exact`` and ``torques(q)`` either way.
    joints : list of str
        The model's joint order, that of every reply.
    """

    def __init__(self, model, gravity=None, payload=None, fast=None):
        self.model = model
        self.full = is_full(model)
        self.fast = fast if fast is not None else (
            EquivalentDynamics if self.full else FastGravity)(
                model, gravity=gravity or None, payload=payload)
        self.joints = list(model.joint_names)
        # queries must name exactly the model's joints; a stream may carry more
        self._query = JointStateCheck(model.joint_names, strict=True)
        self._stream = JointStateCheck(model.joint_names)

    def query(self, names, positions):
        """Answer one query: (q, tau) in model order, each (n,), or a Rejection.

        Parameters
        ----------
        names : sequence of str
            Exactly the model's joints, any order (``unknown_joints``,
            ``missing_joints``, ``duplicate_joints`` otherwise).
        positions : sequence of float, (len(names),)
            rad; ``length_mismatch`` / ``empty_array`` / ``non_finite`` otherwise.
        """
        return self._answer(self._query, names, positions)

    def stream(self, names, positions):
        """Like :meth:`query` for a joint_states stream: extra joints are ignored."""
        return self._answer(self._stream, names, positions)

    def _answer(self, check, names, positions):
        sample = check.check(names, position=positions)
        if isinstance(sample, Rejection):
            return sample
        return sample.position, self.fast.torques(sample.position)


def answer_query(served, names, positions):
    """(q, tau) of a gravity query, or a Rejection; ``served`` None -> ``no_model``."""
    if served is None:
        return Rejection(NO_MODEL, 'no model loaded yet: fit one (~/fit) or give model_file')
    return served.query(names, positions)
