"""Serving an identified full-dynamics model: inverse-dynamics queries and the residual.

Two services, both without a Node (the identifier node is a thin adapter):

**Inverse dynamics.** ``τ = M(q) q̈ + C(q, q̇) q̇ + G(q) + τ_f(q̇)``, the rigid-body part
and the friction part separately. Like :class:`arm_dyn_id.service.gravity.FastGravity`,
:class:`EquivalentDynamics` loads into pinocchio link parameters θ (10 per body) and a
rotor inertia per joint that reproduce the identified model exactly: only base
combinations of θ are identified, but *every* θ whose base combinations equal the
identified ones gives the same ``τ(q, q̇, q̈)`` for every state (seed 001 eq. 6), hence
the same M(q), C(q, q̇) and G(q). Such a θ is found by least squares against the
model's own rigid-body torques on random states (minimum-norm correction of the
URDF's nominal θ), checked on other random states, and then every query is one
``pinocchio.rnea`` (a few µs). When no such θ can be loaded (a body of zero mass
with a first moment) the model's own functions serve instead (``exact`` False) and
the residual stream is not offered.

**Residual.** For every joint_states message: the external torque estimate
``r ≈ τ_measured − τ_model`` by a generalized-momentum observer (De Luca & Mattone
2005; Haddadin et al. 2017)::

    p = M(q) q̇,   ṗ = τ_m + C(q, q̇)ᵀ q̇ − G(q) − τ_f(q̇) + τ_ext
    r(t) = K (p(t) − p(t0) − ∫ (τ_m + Cᵀ q̇ − G − τ_f + r) dt)     -> ṙ = K (τ_ext − r)

so r is τ_ext seen through a first-order low-pass of bandwidth K (1/s) per joint.
It needs q and q̇ only, never q̈: numerically differentiating a noisy 1 kHz
velocity twice (what ``τ_measured − ID(q, q̇, q̈)`` would need) amplifies noise by
the sample rate, while the observer integrates. The update is implicit in r
(unconditionally stable for any K·Δt). The "model torque" reported beside it is
``τ_measured − r``: what the model explains of the measured torque. q̇ is the
message's velocity when it has one; otherwise a causal estimate (backward
difference of q through a first-order low-pass, ``velocity_cutoff_hz``; a step of a
whole turn, a driver wrapping a continuous joint, is no motion: ``data.angles.step``). A gap
in the stamps (longer than ``max_gap`` s) or a stamp that does not move forward
restarts the observer (r = 0): a residual across a gap would integrate nothing
known. Contact: any ``|r_i| > threshold_i`` (constant thresholds), or the band,
persistence and holding-friction tracker of :mod:`arm_dyn_id.service.contact` when the
stream is given a :class:`~arm_dyn_id.service.contact.ContactThresholds`.
"""

import copy

import numpy as np
import pinocchio as pin

from arm_dyn_id.data import angles
from arm_dyn_id.data.joint_states import JointStateCheck, Rejection
from arm_dyn_id.data.velocity import VelocityCheck
from arm_dyn_id.errors import DataError
from arm_dyn_id.service.contact import CalibrationRun, ContactDetector, ContactThresholds

NO_MODEL = 'no_model'    # the rejection reason when nothing is served
_MIN_MASS = 1e-9        # kg; below this a body cannot carry a first moment in pinocchio


def _as_float(x):
    return np.asarray(x, dtype=float)


def is_full(model):
    """Whether ``model`` is a full-dynamics model (it has rigid-body and friction torques)."""
    return hasattr(model, 'rigid_body_torques') and hasattr(model, 'friction_torques')


class EquivalentDynamics:
    """A pinocchio model whose link parameters reproduce an identified full model.

    Parameters
    ----------
    model : DynamicsModel
        Identified model (not modified): ``robot``, ``joint_names``,
        ``rigid_body_torques(q, dq, ddq)`` at its fit gravity, ``friction_torques(dq)``.
    gravity : float, optional
        Gravity magnitude served (m/s²), along the model's gravity direction;
        default the model's.
    payload : Payload, optional
        A rigid payload added at its frame (mass, centre of mass, inertia).
    check_samples : int
        Random states on which the equivalent model is checked against ``model``.
    seed : int

    Attributes
    ----------
    exact : bool
        False when the equivalent model could not be loaded; the model's own
        functions serve then (slower; no payload, no gravity change, no observer).
    max_error : float
        Largest difference (N·m) to ``model.rigid_body_torques`` on the check states.
    gravity : float
    payload : Payload or None
    """

    def __init__(self, model, gravity=None, payload=None, check_samples=20, seed=0):
        self.model = model
        robot = model.robot
        self.n = robot.n_joints
        # the gravity the model's rigid_body_torques use (its robot's); served by default
        self.fit_gravity = float(robot.gravity_magnitude)
        self.gravity = float(self.fit_gravity if gravity is None else gravity)
        if not np.isfinite(self.gravity) or self.gravity < 0:
            raise ValueError(f'gravity {self.gravity} m/s² must be a finite magnitude >= 0')
        self.payload = payload
        rng = np.random.default_rng(seed)
        equivalent = robot.copy()
        self.exact = self._load_equivalent(equivalent, model, rng)
        self.max_error = 0.0
        if self.exact:
            q, dq, ddq = self._states(rng, check_samples)
            mine = np.array([self._rnea(equivalent, *s) for s in zip(q, dq, ddq)])
            ref = np.asarray(model.rigid_body_torques(q, dq, ddq), dtype=float)
            self.max_error = float(np.max(np.abs(mine - ref)))
            if self.max_error > 1e-8 * max(1.0, float(np.max(np.abs(ref)))):
                self.exact = False
        if self.exact:
            if self.gravity != self.fit_gravity:
                equivalent.set_gravity(self.gravity)
            if payload is not None and payload.mass > 0:
                equivalent = equivalent.with_payload(payload)
        elif (payload is not None and payload.mass > 0) or self.gravity != self.fit_gravity:
            raise DataError('this model has no pinocchio equivalent (a body of zero mass '
                            'with a first moment): it is served only at its fit gravity '
                            'and without a payload')
        self._friction = self._fast_friction(rng)
        self.robot = equivalent
        self._pm, self._pd = equivalent.model, equivalent.model.createData()
        self._v = equivalent._idx_v
        self._zero = np.zeros(self._pm.nv)
        # the common case (every joint one q, in order): no per-call mapping
        plain = (self._pm.nq == self._pm.nv == self.n
                 and np.array_equal(equivalent._idx_q, np.arange(self.n))
                 and np.array_equal(self._v, np.arange(self.n)))
        self._pin_q = _as_float if plain else equivalent._pin_q
        self._pin_v = _as_float if plain else equivalent._pin_v

    def _states(self, rng, count):
        n = self.n
        return (rng.uniform(-np.pi, np.pi, (count, n)), rng.uniform(-2.0, 2.0, (count, n)),
                rng.uniform(-5.0, 5.0, (count, n)))

    @staticmethod
    def _rnea(robot, q, dq, ddq):
        return pin.rnea(robot.model, robot.data, robot._pin_q(q), robot._pin_v(dq),
                        robot._pin_v(ddq))[robot._idx_v]

    def _load_equivalent(self, robot, model, rng):
        """θ, armature := nominal + the minimum-norm correction that fits the model."""
        pm = robot.model
        nb, n = robot.n_bodies, self.n
        theta = robot.parameters('inertial')
        armature = np.array(pm.armature, dtype=float)[robot._idx_v]
        count = max(4, int(np.ceil(3 * (10 * nb + n) / n)))
        q, dq, ddq = self._states(rng, count)
        Y = robot.full_regressor(q, dq, ddq, friction=False)             # (M, n, 10 nb)
        A = np.concatenate([Y, ddq[:, :, None] * np.eye(n)[None]], axis=2)
        target = np.asarray(model.rigid_body_torques(q, dq, ddq), dtype=float) \
            - Y @ theta - ddq * armature
        A = A.reshape(-1, A.shape[-1])
        scale = np.linalg.norm(A, axis=0)
        scale[scale == 0] = 1.0
        delta = np.linalg.lstsq(A / scale, target.ravel(), rcond=None)[0] / scale
        theta = theta + delta[:10 * nb]
        armature = armature + delta[10 * nb:]
        for body in range(nb):
            dyn = theta[10 * body:10 * body + 10]
            if abs(dyn[0]) < _MIN_MASS:
                if np.max(np.abs(dyn[1:4])) > 0:
                    return False
                dyn = dyn.copy()
                dyn[0] = 0.0
            try:
                pm.inertias[body + 1] = pin.Inertia.FromDynamicParameters(dyn)
            except (RuntimeError, ValueError):
                return False
        full_armature = np.array(pm.armature, dtype=float)
        full_armature[robot._idx_v] = armature
        pm.armature = full_armature
        robot.data = pm.createData()
        return True

    @property
    def joint_names(self):
        return self.model.joint_names

    def rigid_body(self, q, dq, ddq):
        """M(q) q̈ + C(q, q̇) q̇ + G(q) (N·m), (n,), at the served gravity and payload."""
        if not self.exact:
            return np.asarray(self.model.rigid_body_torques(q, dq, ddq), dtype=float)
        return pin.rnea(self._pm, self._pd, self._pin_q(q), self._pin_v(dq),
                        self._pin_v(ddq))[self._v]

    def friction(self, dq):
        """Friction torque τ_f(q̇) of the identified model (N·m), (n,)."""
        if self._friction is not None:
            return self._friction(np.asarray(dq, dtype=float))
        return np.asarray(self.model.friction_torques(np.asarray(dq, dtype=float)),
                          dtype=float)

    def _fast_friction(self, rng, count=50):
        """The model's per-joint friction law as one closed form over (n,) arrays (a few
        µs instead of the generic feature stack); None unless it matches the model."""
        model = self.model
        try:
            table = model.friction_table()
            fm = model.friction_model
        except AttributeError:
            return None
        n = self.n
        zero = np.zeros(n)
        fc, fv = table.get('coulomb', zero), table.get('viscous', zero)
        fo, fs = table.get('offset', zero), table.get('stribeck', zero)
        smooth = getattr(fm, 'coulomb', 'sign') == 'tanh'
        inv_vs = 1.0 / float(getattr(fm, 'smooth_velocity', 1.0))
        inv_vst = 1.0 / float(getattr(fm, 'stribeck_velocity', 1.0))
        stribeck = bool(np.any(fs != 0))

        def friction(v):
            s = np.tanh(v * inv_vs) if smooth else np.sign(v)
            out = fc * s + fv * v + fo
            if stribeck:
                out += fs * s * np.exp(-(v * inv_vst) ** 2)     # the same (smooth) sign
            return out
        v = np.concatenate([rng.uniform(-2.0, 2.0, (count, n)),
                            rng.uniform(-0.02, 0.02, (count, n)), np.zeros((1, n))])
        ref = np.asarray(model.friction_torques(v), dtype=float)
        mine = np.array([friction(row) for row in v])
        return friction if np.allclose(mine, ref, rtol=1e-12, atol=1e-12) else None

    def with_friction(self, phi):
        """The same rigid body (shared pinocchio model) with friction parameters ``phi``
        (the model's layout, (n·k,)): what an online friction update serves
        (:mod:`arm_dyn_id.service.friction_drift`). A few ms; ``self`` is not changed."""
        out = copy.copy(self)
        out.model = copy.copy(self.model)
        out.model.phi = np.asarray(phi, dtype=float).copy()
        if out.model.phi.shape != self.model.phi.shape:
            raise ValueError(f'{out.model.phi.size} friction values for '
                             f'{self.model.phi.size}')
        out._friction = out._fast_friction(np.random.default_rng(0))
        return out

    def gravity_torques(self, q):
        """G(q) (N·m), (n,), at the served gravity and payload."""
        if not self.exact:
            return np.asarray(self.model.rigid_body_torques(q, np.zeros(self.n),
                                                            np.zeros(self.n)), dtype=float)
        return pin.computeGeneralizedGravity(self._pm, self._pd, self._pin_q(q))[self._v]

    # the name FastGravity serves under, so ServedModel takes either
    torques = gravity_torques

    def momentum_terms(self, q, dq):
        """(M(q) q̇, C(q, q̇)ᵀ q̇ − G(q)), each (n,): what the momentum observer needs.

        ``M q̇ = rnea(q, 0, q̇) − G(q)`` (rotor inertia included) and pinocchio's
        Coriolis matrix of the equivalent model; only with ``exact``.
        """
        pm, pd = self._pm, self._pd
        qp, v = self._pin_q(q), self._pin_v(dq)
        g = pin.computeGeneralizedGravity(pm, pd, qp).copy()
        p = pin.rnea(pm, pd, qp, self._zero, v) - g
        C = pin.computeCoriolisMatrix(pm, pd, qp, v)
        idx = self._v
        return p[idx], (C.T @ v - g)[idx]


def _id_detail(rejection):
    """A rejection's sentence with the effort field named as the query uses it."""
    detail = rejection.detail
    if detail.startswith('effort'):     # 'effort is empty ...', 'effort of joint_3 is NaN'
        detail = 'acceleration (effort)' + detail[len('effort'):]
    detail = detail.replace(' efforts', ' accelerations (effort)')
    return Rejection(rejection.reason, detail)


class MomentumObserver:
    """Generalized-momentum residual of one joint_states stream (module notes).

    Parameters
    ----------
    dynamics : EquivalentDynamics
        With ``exact`` True.
    gains : array_like, (n,)
        Observer bandwidth K per joint (1/s): r follows τ_ext with time constant 1/K.
    thresholds : array_like, (n,), optional
        Contact when any ``|r_i|`` exceeds ``thresholds[i]`` (N·m, > 0; ``inf``
        leaves a joint out); None: never.
    max_gap : float
        A step between stamps longer than this (s), or one that does not move
        forward, restarts the observer.
    velocity_cutoff_hz : float
        Cut-off of the causal velocity estimate used when a message has no velocity.
    """

    def __init__(self, dynamics, gains, thresholds=None, max_gap=0.05, velocity_cutoff_hz=20.0):
        if not dynamics.exact:
            raise DataError('the residual observer needs a pinocchio equivalent of the '
                            'model; this one has none (see EquivalentDynamics.exact)')
        n = dynamics.n
        self.dynamics = dynamics
        self.gains = _per_joint(gains, n, 'observer gains', positive=True)
        self.thresholds = None if thresholds is None else \
            _per_joint(thresholds, n, 'contact thresholds', positive=True, infinite=True)
        self.max_gap = float(max_gap)
        self.velocity_cutoff_hz = float(velocity_cutoff_hz)
        if not self.max_gap > 0 or not self.velocity_cutoff_hz > 0:
            raise ValueError(f'max_gap {max_gap} s and velocity_cutoff_hz '
                             f'{velocity_cutoff_hz} Hz must be > 0')
        self.restarts = 0
        self.reset()

    def reset(self):
        """Forget the past: the next sample starts the observer again (r = 0)."""
        self._t = None
        self._p = None
        self._q = None
        self._dq_est = None
        self.residual = np.zeros(self.dynamics.n)

    @property
    def velocity(self):
        """The q̇ used for the last sample (rad/s), measured or estimated, (n,)."""
        return self._dq_est

    def _velocity(self, t, q, dq, dt):
        if dq is not None:
            self._dq_est = dq
            return dq
        if self._q is None or dt is None:
            self._dq_est = np.zeros_like(q)
        else:
            alpha = 1.0 - np.exp(-2.0 * np.pi * self.velocity_cutoff_hz * dt)
            raw = angles.step(q, self._q) / dt   # a driver's wrap is no motion
            self._dq_est = self._dq_est + alpha * (raw - self._dq_est)
        return self._dq_est

    def update(self, t, q, dq, tau):
        """One sample in; (model torque, residual, contact) out.

        Parameters
        ----------
        t : float
            Stamp (s).
        q : ndarray, (n,)
            rad.
        dq : ndarray, (n,) or None
            rad/s; None: estimated from q.
        tau : ndarray, (n,)
            Measured joint torque (N·m).

        Returns
        -------
        model : ndarray, (n,)
            ``tau − r`` (N·m).
        residual : ndarray, (n,)
            r, the external torque estimate (N·m).
        contact : bool
        """
        dt = None if self._t is None else t - self._t
        if dt is not None and not 0 < dt <= self.max_gap:
            self.restarts += 1
            self.reset()
            dt = None
        dq = self._velocity(t, q, dq, dt)
        p, beta = self.dynamics.momentum_terms(q, dq)
        beta -= self.dynamics.friction(dq)              # Cᵀq̇ − G − τ_f
        if dt is None:
            r = np.zeros_like(q)
        else:
            k = self.gains
            # r_k (1 + K dt) = r_{k-1} + K ((p_k - p_{k-1}) - (τ + Cᵀq̇ - G - τ_f) dt)
            beta += tau
            beta *= dt
            r = p - self._p
            r -= beta
            r *= k
            r += self.residual
            r /= 1.0 + k * dt
        self.residual = r
        self._t, self._p, self._q = t, p, q
        contact = self.thresholds is not None and bool((np.abs(r) > self.thresholds).any())
        return tau - r, r, contact

    def run(self, t, q, dq, tau):
        """Many samples in, as :meth:`update` takes them one by one (a row of ``dq`` that
        is not all finite as a message without velocity), with the same result (to
        rounding) and the same state after: the dynamics terms of every sample first
        (pinocchio per sample, the friction law over all of them), then the observer's
        recursion. What a recording replayed through the stream spends its time on
        (:func:`run_stream`); a node takes its messages one at a time with :meth:`update`.

        Parameters
        ----------
        t : ndarray, (N,)
            Stamps (s).
        q : ndarray, (N, n)
            rad.
        dq : ndarray, (N, n) or None
            rad/s; a row that is not all finite (or None for every row) is estimated from
            q, as :meth:`update` with ``dq`` None.
        tau : ndarray, (N, n)
            Measured joint torque (N·m).

        Returns
        -------
        residual : ndarray, (N, n)
            r of every sample (N·m).
        velocity : ndarray, (N, n)
            The q̇ each sample used (rad/s).
        contact : ndarray of bool, (N,)
            Any ``|r_i|`` over its constant threshold (all False without thresholds).
        restarts : ndarray of int, (N,)
            :attr:`restarts` after each sample.
        """
        t = np.asarray(t, dtype=float)
        q = np.asarray(q, dtype=float)
        tau = np.asarray(tau, dtype=float)
        N, n = q.shape
        if N == 0:
            return np.empty((0, n)), np.empty((0, n)), np.zeros(0, dtype=bool), \
                np.zeros(0, dtype=int)
        given = np.zeros(N, dtype=bool) if dq is None else np.all(np.isfinite(dq), axis=1)
        # a step outside (0, max_gap] restarts, as in update (the first sample only steps
        # from the state this observer holds)
        step = np.empty(N)
        step[1:] = np.diff(t)
        step[0] = np.nan if self._t is None else t[0] - self._t
        restart = ~((step > 0) & (step <= self.max_gap))
        restart[0] = self._t is not None and restart[0]
        first = restart.copy()
        first[0] = first[0] or self._t is None          # no step into this sample
        restarts = self.restarts + np.cumsum(restart)
        velocity = np.empty((N, n))
        if dq is not None:
            velocity[given] = np.asarray(dq, dtype=float)[given]
        if not given.all():
            w = 2.0 * np.pi * self.velocity_cutoff_hz
            est, prev = self._dq_est, self._q
            for k in range(N):
                if restart[k]:
                    est = prev = None
                if given[k]:
                    est = velocity[k]
                elif prev is None or first[k]:
                    est = np.zeros(n)
                else:
                    dt = step[k]
                    alpha = 1.0 - np.exp(-w * dt)
                    est = est + alpha * (angles.step(q[k], prev) / dt - est)
                velocity[k] = est
                prev = q[k]
        terms = self.dynamics.momentum_terms
        p, beta = np.empty((N, n)), np.empty((N, n))
        for k in range(N):
            p[k], beta[k] = terms(q[k], velocity[k])
        steps = np.where(first, 0.0, step)[:, None]     # 0 where the observer starts
        beta -= self.dynamics.friction(velocity)
        beta += tau
        beta *= steps
        k_gain = self.gains
        drive = np.empty((N, n))
        drive[1:] = p[1:] - p[:-1]
        drive[0] = p[0] - self._p if not first[0] else 0.0
        drive -= beta
        drive *= k_gain
        damping = 1.0 + k_gain * steps
        residual = np.empty((N, n))
        r = self.residual
        for k in range(N):
            if first[k]:
                r = np.zeros(n)
            else:
                r = r + drive[k]
                r /= damping[k]
            residual[k] = r
        self.restarts = int(restarts[-1])
        self.residual, self._dq_est = residual[-1].copy(), velocity[-1].copy()
        self._t, self._p, self._q = float(t[-1]), p[-1].copy(), q[-1].copy()
        contact = np.zeros(N, dtype=bool) if self.thresholds is None else \
            np.any(np.abs(residual) > self.thresholds, axis=1)
        return residual, velocity, contact, restarts


def _per_joint(values, n, what, positive=False, infinite=False):
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    if arr.size == 1:
        arr = np.full(n, float(arr[0]))
    finite = np.isfinite(arr) | (infinite & (arr == np.inf))
    if arr.shape != (n,) or not np.all(finite) or (positive and np.any(arr <= 0)):
        raise ValueError(f'{what} = {arr.tolist()} must be one finite value per joint ({n})'
                         + (', each > 0' if positive else ''))
    return arr


class ServedDynamics:
    """An identified full model as served: inverse dynamics plus the checks of every request.

    Swapped as one reference by the node, never mutated (the observers it makes
    hold the per-stream state).

    Parameters
    ----------
    model : DynamicsModel
    gravity : float or None
        Gravity served (m/s²); None or 0: the model's fit gravity.
    payload : Payload or None

    Attributes
    ----------
    fast : EquivalentDynamics
    joints : list of str
        The model's joint order, that of every reply.
    """

    def __init__(self, model, gravity=None, payload=None):
        self.model = model
        self.fast = EquivalentDynamics(model, gravity=gravity or None, payload=payload)
        self.joints = list(model.joint_names)
        self._query = JointStateCheck(model.joint_names, strict=True)

    def query(self, names, positions, velocities, accelerations):
        """Answer one inverse-dynamics query, or a Rejection.

        Parameters
        ----------
        names : sequence of str
            Exactly the model's joints, any order.
        positions, velocities, accelerations : sequence of float, (len(names),)
            rad, rad/s, rad/s²; all finite.

        Returns
        -------
        (q, dq, ddq, rigid_body, friction) each (n,) in model order (torques N·m),
        or Rejection (``length_mismatch``, ``empty_array``, ``unknown_joints``,
        ``missing_joints``, ``duplicate_joints``, ``non_finite``).
        """
        sample = self._query.check(names, position=positions, velocity=velocities,
                                   effort=accelerations,
                                   require=('position', 'velocity', 'effort'),
                                   finite=('position', 'velocity', 'effort'))
        if isinstance(sample, Rejection):
            return _id_detail(sample)
        q, dq, ddq = sample.position, sample.velocity, sample.effort
        return q, dq, ddq, self.fast.rigid_body(q, dq, ddq), self.fast.friction(dq)

    def with_friction(self, phi):
        """A ServedDynamics of the same model with friction ``phi`` (EquivalentDynamics
        .with_friction); ``self`` is not changed."""
        out = copy.copy(self)
        out.fast = self.fast.with_friction(phi)
        out.model = out.fast.model
        return out

    def observer(self, gains, thresholds=None, max_gap=0.05, velocity_cutoff_hz=20.0):
        """A fresh :class:`MomentumObserver` for one joint_states stream."""
        return MomentumObserver(self.fast, gains, thresholds, max_gap, velocity_cutoff_hz)


class ResidualStream:
    """The residual of one joint_states stream: checks, effort -> torque, the observer.

    Parameters
    ----------
    served : ServedDynamics
    gains, max_gap, velocity_cutoff_hz
        Of the :class:`MomentumObserver`.
    thresholds : array_like (n,) or ContactThresholds, optional
        Constant thresholds (N·m, the observer's own check), or the band, persistence
        and holding tracker of :class:`~arm_dyn_id.service.contact.ContactThresholds`
        (then the residual returned is the observer's minus the tracked holding
        torque); None: no contact flag.
    torque_gains : array_like, (n,), optional
        ``effort`` is a motor current: torque = ``torque_gains · (effort − offsets)``
        (seed 000 eq. 19, the recorder's conversion); None: ``effort`` is a torque (N·m).
    offsets : array_like, (n,), optional
        Current offsets (A).

    Attributes
    ----------
    observer : MomentumObserver
    detector : ContactDetector or None
        With ContactThresholds: its band, flagged joints and holding offset of the last
        sample.
    """

    def __init__(self, served, gains, thresholds=None, max_gap=0.05, velocity_cutoff_hz=20.0,
                 torque_gains=None, offsets=None):
        n = len(served.joints)
        self.joints = served.joints
        self.detector = None
        if isinstance(thresholds, ContactThresholds):
            if thresholds.joints != tuple(served.joints):
                raise ValueError(f'contact thresholds of joints {list(thresholds.joints)}, '
                                 f'the model has {list(served.joints)}')
            self.detector = ContactDetector(thresholds)
            thresholds = None
        self.observer = served.observer(gains, thresholds, max_gap, velocity_cutoff_hz)
        self._restarts = -1
        self._gains = None if torque_gains is None else \
            _per_joint(torque_gains, n, 'torque gains')
        self._offsets = np.zeros(n) if offsets is None else \
            _per_joint(offsets, n, 'current offsets')
        self._check = JointStateCheck(served.joints)
        #: the messages' velocity against their angles (data.velocity): once it is found
        #: not to be their rate, the observer estimates q̇ from q instead
        self.velocity_check = VelocityCheck(served.joints, max_gap)

    def update(self, names, t, positions, velocities, efforts):
        """One joint_states message in.

        Parameters
        ----------
        names : sequence of str
            Any order; extra joints ignored.
        t : float
            Its stamp (s).
        positions, velocities, efforts : sequence of float
            rad, rad/s (may be empty: estimated), motor current (A) or torque (N·m).

        Returns
        -------
        (q, dq, model, residual, contact) with arrays (n,) in model order, or a
        Rejection (missing joint, lengths, NaN in position, velocity or effort).
        """
        sample = self._check.check(names, position=positions, velocity=velocities,
                                   effort=efforts, require=('position', 'effort'),
                                   finite=('position', 'velocity', 'effort'))
        if isinstance(sample, Rejection):
            return sample
        tau = sample.effort if self._gains is None else \
            self._gains * (sample.effort - self._offsets)
        return self.step(t, sample.position, sample.velocity, tau)

    @property
    def flags_contact(self):
        """Whether the stream flags contact: constant thresholds or a ContactDetector."""
        return self.detector is not None or self.observer.thresholds is not None

    def contact_joint(self, residual):
        """The joint furthest over its threshold (or band) at the last sample, for
        ``residual`` the last one :meth:`step` returned."""
        if self.detector is not None:
            over = np.abs(residual) / np.maximum(self.detector.band, 1e-300)
            if self.detector.joints_flagged.any():      # over its band for the persistence
                over = np.where(self.detector.joints_flagged, over, -np.inf)
        else:
            over = np.abs(residual) / self.observer.thresholds
        return self.joints[int(np.argmax(over))]

    def serve(self, served):
        """Go on with the friction of ``served`` (a :meth:`ServedDynamics.with_friction` or
        :meth:`EquivalentDynamics.with_friction` of the stream's model): the observer keeps
        its state, so r stays continuous."""
        self.observer.dynamics = getattr(served, 'fast', served)

    def step(self, t, q, dq, tau):
        """One checked sample in model order (q rad, dq rad/s or None, tau N·m): what
        :meth:`update` does after its checks. Returns (q, dq, model, residual, contact)."""
        dq = self.velocity_check.update(t, q, dq)
        model, residual, contact = self.observer.update(t, q, dq, tau)
        if self.detector is not None:
            if self.observer.restarts != self._restarts:
                self._restarts = self.observer.restarts
                self.detector.reset()
            residual, contact = self.detector.update(t, self.observer.velocity, residual)
            model = tau - residual
        return q, self.observer.velocity, model, residual, contact


def run_stream(stream, t, q, dq, tau):
    """A recording through a :class:`ResidualStream`: the result of its samples given to
    :meth:`ResidualStream.step` one by one (the node's code), computed over all of them
    at once where that gives the same numbers (:meth:`MomentumObserver.run`,
    :meth:`~arm_dyn_id.service.contact.ContactDetector.run`).

    Parameters
    ----------
    stream : ResidualStream
        Fresh (its state carries over otherwise).
    t : ndarray, (N,)
        s.
    q : ndarray, (N, n)
        rad, model order.
    dq : ndarray, (N, n) or None
        rad/s; rows with NaN (or None) are estimated from q, as a message without velocity.
    tau : ndarray, (N, n)
        Joint torque (N·m).

    Returns
    -------
    dict of ndarray
        ``residual`` (N, n) N·m, ``contact`` (N,) bool, ``velocity`` (N, n); with a
        detector also ``band`` (N, n), ``flagged`` (N, n) bool, ``offset`` (N, n),
        ``speed``, ``acceleration`` (N,), ``standstill``, ``settling``, ``starting`` (N,)
        bool.
    """
    if dq is not None:      # the messages' velocity until the check refuses it, as step
        unused = stream.velocity_check.run(t, q, dq)
        if unused < len(t):
            dq = np.array(dq, dtype=float)
            dq[unused:] = np.nan
    residual, velocity, contact, restarts = stream.observer.run(t, q, dq, tau)
    out = {'residual': residual, 'contact': contact, 'velocity': velocity}
    if stream.detector is None:
        return out
    # the detector starts again wherever the observer did (ResidualStream.step)
    resets = np.diff(restarts, prepend=stream._restarts) != 0
    if len(restarts):
        stream._restarts = int(restarts[-1])
    out.update(stream.detector.run(t, velocity, residual, resets))
    return out


def calibration_run(served, gains, t, q, dq, tau, settings=None, max_gap=0.05,
                    velocity_cutoff_hz=20.0, source=''):
    """A no-contact recording through the stream with a detector that never flags (same
    tracker settings), as :func:`arm_dyn_id.service.contact.calibrate` takes it.

    Parameters
    ----------
    settings : ContactThresholds, optional
        Its tracker and state settings are used (bands ignored); default the defaults
        with no holding tracker.
    """
    n = len(served.joints)
    inf = np.full(n, np.inf)
    if settings is None:
        settings = ContactThresholds(tuple(served.joints), inf, inf, np.zeros(n), np.zeros(n))
    probe = settings.with_settings(standstill=inf, base=inf)
    stream = ResidualStream(served, gains, probe, max_gap, velocity_cutoff_hz)
    out = run_stream(stream, t, q, dq, tau)
    return CalibrationRun(np.asarray(t, dtype=float), out['residual'], out['velocity'],
                          out['speed'],
                          out['acceleration'], out['standstill'], out['settling'],
                          source=source, starting=out['starting'])


def answer_dynamics_query(served, names, positions, velocities, accelerations):
    """An inverse-dynamics answer, or a Rejection; ``served`` None -> ``no_model``.

    ``served`` is a :class:`ServedDynamics`, or None / anything else when the
    node serves no full model (a gravity model answers only gravity queries).
    """
    if served is None:
        return Rejection(NO_MODEL, 'no full-dynamics model loaded: fit one from rich '
                         '(Fourier) motion (~/fit with dynamics full) or give a full '
                         'model_file; a gravity model answers gravity_query only')
    return served.query(names, positions, velocities, accelerations)


__all__ = ['EquivalentDynamics', 'MomentumObserver', 'ResidualStream', 'ServedDynamics',
           'answer_dynamics_query', 'calibration_run', 'is_full', 'run_stream']
