"""A simulated arm at work that picks a load up and puts it down (the payload watch's case).

:func:`pick_and_place` runs the MuJoCo Staubli TX-60 (``config/staubli_tx60.yaml``: the
simulator's friction, current noise, quantisation and gross errors) through slow sinusoids
of every joint (normal work, not an excitation plan) with a point mass attached at the
flange between two times, and optionally a push on link_4.

:func:`realistic_pick_and_place` is the same run as a real arm's watch sees it: the served
arm model is not the simulated arm's but an identified one with its errors, and the torque
carries what the model never explains:

* rigid body: every standard link parameter (mass, first moment, inertia) off by a random
  few per cent (``inertial_error``, relative σ);
* friction: Coulomb and viscous of the served model ``friction_error`` higher than the arm's
  (a model fitted on cold drives, served warm), each joint off by its own random amount;
* torque constant: each joint's gain off by a random ``gain_error`` (σ);
* a slowly varying torque error per joint, an Ornstein-Uhlenbeck process with correlation
  time ``drift_time`` and σ ``drift`` × the config's torque noise (thermal offsets, cable
  and seal forces: what an identified model leaves correlated in time);
* encoder noise ``encoder_noise`` rad, sampled at ``rate`` Hz (500 Hz: a UR's controller).

The errors are drawn from ``np.random.default_rng(seed)``; the run states them
(:attr:`PickAndPlace.notes`).
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.model.dynamics import DynamicsModel, nominal_standard_parameters
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.sim.arm import SimArm, SimParams, true_model

Q0 = np.array([0.0, 0.6, 1.2, 0.0, 0.5, 0.0])          # rad, start pose (collision-free)
AMPLITUDES = np.array([0.8, 0.4, 0.4, 1.0, 0.6, 1.0])  # rad
FREQUENCIES = np.array([0.13, 0.21, 0.17, 0.29, 0.23, 0.31])  # Hz


@dataclass(frozen=True)
class PickAndPlace:
    """One simulated run.

    Attributes
    ----------
    config : ArmConfig
    model : DynamicsModel
        The simulated arm's own dynamics without load (URDF inertias, its friction).
    served : DynamicsModel
        The model a node serves: ``model`` itself, or an imperfect identified one.
    t : ndarray, (N,)
        s.
    q, dq, tau : ndarray, (N, n)
        Measured positions (rad), velocities (rad/s), joint torques k·(i − offset) (N·m).
    mass : float
        kg, held in [t_on, t_off).
    com : tuple
        m, in the flange frame.
    t_on, t_off : float or None
    notes : dict
        The served model's errors (realistic runs).
    """

    config: object
    model: object
    served: object
    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    mass: float
    com: tuple
    t_on: object
    t_off: object
    notes: dict = field(default_factory=dict)


def pick_and_place(mass=1.0, com=(0.0, 0.0, 0.05), t_on=8.0, t_off=12.0, seconds=15.0,
                   seed=0, push=None):
    """The TX-60 moving every joint with ``mass`` (kg) at ``com`` in [t_on, t_off).

    Parameters
    ----------
    mass : float
    com : tuple of 3 float
        m, flange frame.
    t_on, t_off : float or None
        s; ``t_on`` None: never loaded.
    seconds : float
    seed : int
        The simulator's noise.
    push : tuple (start, end, F), optional
        A force F (N, (3,), world frame) on link_4 in [start, end).

    Returns
    -------
    PickAndPlace
        At 1 kHz; ``served`` is the true model.
    """
    import mujoco

    config = load_arm_config('staubli_tx60.yaml', node_name='sim_arm_node')
    params = SimParams.from_params(dict(config.extra, initial_positions=Q0.tolist(),
                                        seed=seed), config.n_joints)
    arm = SimArm(config, params)
    model = true_model(RobotModel.from_config(config), params)
    w = 2 * np.pi * FREQUENCIES
    t = np.arange(int(round(seconds / params.timestep))) * params.timestep
    q, dq, current = (np.empty((len(t), config.n_joints)) for _ in range(3))
    body = None if push is None else \
        mujoco.mj_name2id(arm.model, mujoco.mjtObj.mjOBJ_BODY, 'link_4')
    held = False
    for k, tk in enumerate(t):
        on = t_on is not None and t_on <= tk < t_off
        if on != held:
            if on:
                arm.attach_payload(mass, com)
            else:
                arm.detach_payload()
            held = on
        if push is not None:
            arm.data.xfrc_applied[body, :3] = push[2] if push[0] <= tk < push[1] else 0.0
        arm.step(Q0 + AMPLITUDES * np.sin(w * tk), AMPLITUDES * w * np.cos(w * tk),
                 -AMPLITUDES * w * w * np.sin(w * tk))
        _, q[k], dq[k], current[k] = arm.measure()
    tau = config.joint_torque_gains * (current - config.current_offsets)
    return PickAndPlace(config, model, model, t, q, dq, tau, float(mass), tuple(com),
                        t_on, t_off)


def imperfect_model(model, rng, inertial_error=0.05, friction_error=0.3):
    """``model`` as an identification would give it: every standard link parameter times
    (1 + N(0, inertial_error²)), Coulomb and viscous friction times
    (1 + friction_error·U(0.5, 1.5)) per joint (the served model's friction is higher).

    Returns
    -------
    DynamicsModel
    """
    robot = model.robot
    theta = nominal_standard_parameters(robot)
    theta = theta * (1.0 + inertial_error * rng.standard_normal(theta.shape))
    phi = model.phi.reshape(robot.n_joints, -1)
    phi = phi * (1.0 + friction_error * rng.uniform(0.5, 1.5, (robot.n_joints, 1)))
    return DynamicsModel(robot, model.base, model.base.beta(theta), model.friction_model,
                         phi.ravel())


def torque_drift(t, sigma, correlation, rng):
    """An Ornstein-Uhlenbeck torque error per joint: σ ``sigma`` (N·m, (n,)), correlation
    time ``correlation`` (s), stationary from the start. Returns ndarray (N, n)."""
    sigma = np.asarray(sigma, dtype=float)
    out = np.empty((len(t), len(sigma)))
    out[0] = sigma * rng.standard_normal(len(sigma))
    for k in range(1, len(t)):
        a = np.exp(-(t[k] - t[k - 1]) / correlation)
        out[k] = a * out[k - 1] + sigma * np.sqrt(1 - a * a) * rng.standard_normal(len(sigma))
    return out


def realistic_pick_and_place(mass=2.0, com=(0.0, 0.0, 0.05), t_on=20.0, t_off=45.0,
                             seconds=65.0, seed=0, rate=500.0, inertial_error=0.05,
                             friction_error=0.3, gain_error=0.03, drift=3.0,
                             drift_time=3.0, encoder_noise=1e-4):
    """:func:`pick_and_place` as a real arm's watch sees it (module notes).

    Returns
    -------
    PickAndPlace
        At ``rate`` Hz; ``served`` the imperfect model; ``notes`` its errors.
    """
    run = pick_and_place(mass, com, t_on, t_off, seconds, seed)
    rng = np.random.default_rng(1000 + seed)
    every = max(1, int(round(1.0 / (rate * (run.t[1] - run.t[0])))))
    t, q, dq, tau = (a[::every] for a in (run.t, run.q, run.dq, run.tau))
    n = run.config.n_joints
    served = imperfect_model(run.model, rng, inertial_error, friction_error)
    gains = 1.0 + gain_error * rng.standard_normal(n)
    sigma = drift * np.asarray(run.config.torque_noise, dtype=float)
    tau = tau * gains + torque_drift(t, sigma, drift_time, rng)
    q = q + encoder_noise * rng.standard_normal(q.shape)
    notes = {'inertial_error': inertial_error, 'friction_error': friction_error,
             'gains': gains.round(3).tolist(), 'drift_sigma': sigma.tolist(),
             'drift_time': drift_time, 'rate': 1.0 / (t[1] - t[0]),
             'encoder_noise': encoder_noise}
    return PickAndPlace(run.config, run.model, served, t, q, dq, tau, run.mass, run.com,
                        t_on, t_off, notes)


__all__ = ['PickAndPlace', 'imperfect_model', 'pick_and_place', 'realistic_pick_and_place',
           'torque_drift']
