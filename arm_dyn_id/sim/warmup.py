"""A friction warm-up, simulated offline: the arm moves while its joint friction falls.

Joint friction falls as the drives warm up; :class:`arm_dyn_id.service.friction_drift
.FrictionTracker` follows it while serving. This is the recording it is tested
(``test/test_friction_drift.py``) and benchmarked (``bench/friction_drift.py``) on.

The arm is a :class:`~arm_dyn_id.model.dynamics.DynamicsModel` (e.g.
:func:`arm_dyn_id.sim.arm.true_model`: the simulator's rigid body and friction) driven
along a random Fourier motion of every joint (seed 001 eq. 7). Its torque is the model's
rigid-body torque plus its friction scaled by::

    s(t) = 1 - fall · clip((t - cold) / ramp, 0, 1)

(``cold`` seconds at the fitted friction, then a linear fall over ``ramp`` seconds, then
held), plus Gaussian torque noise. The torques come from the model's own inverse dynamics
(no MuJoCo), so an hour of 200 Hz samples takes seconds.
"""

from typing import NamedTuple

import numpy as np

from arm_dyn_id.excitation.plans import fourier_series

CHUNK = 20000       # samples per regressor evaluation (bounds the memory of a long run)


class WarmUp(NamedTuple):
    """A simulated warm-up recording.

    Attributes
    ----------
    t : ndarray, (N,)
        Stamps (s), from 0 at the recording's rate.
    q, dq : ndarray, (N, n)
        Joint positions (rad) and velocities (rad/s).
    tau : ndarray, (N, n)
        Joint torques (N·m): rigid body + scaled friction + noise.
    scale : ndarray, (N,)
        The factor of the model's friction at each sample (1 cold, 1 - fall at the end).
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    scale: np.ndarray


def random_fourier_motion(t, n, rng, harmonics=3, frequency=0.1, amplitude=0.3):
    """A Fourier motion of every joint (seed 001 eq. 7, offset 0) with random coefficients:
    harmonic h of joint j is ``a sin(h ω t) + b cos(h ω t)``, a and b drawn from
    N(0, (amplitude / h)²) (rad) in the order joint, harmonic, (a, b).

    Parameters
    ----------
    t : ndarray, (N,)
        Time (s).
    n : int
        Number of joints.
    rng : numpy.random.Generator
        Draws the coefficients.
    harmonics : int
        Harmonics per joint.
    frequency : float
        Base frequency (Hz).
    amplitude : float
        Standard deviation of the first harmonic's coefficients (rad).

    Returns
    -------
    q, dq, ddq : ndarray, (N, n) each
        rad, rad/s, rad/s².
    """
    a, b = np.empty((n, harmonics)), np.empty((n, harmonics))
    for j in range(n):
        for h in range(harmonics):
            a[j, h], b[j, h] = rng.normal(0.0, amplitude / (h + 1), 2)
    omega = 2 * np.pi * frequency
    rate = omega * np.arange(1, harmonics + 1)      # eq. 7's a_l, b_l are rad/s
    return fourier_series(t, omega, a * rate, -b * rate, np.zeros(n))


def warm_up(model, seconds, rate=100.0, fall=0.3, ramp=90.0, cold=0.0, noise=0.02, seed=0):
    """The arm of ``model`` moving for ``seconds`` while its friction falls by ``fall``.

    Parameters
    ----------
    model : DynamicsModel
        The arm: its rigid body and its (cold) friction.
    seconds : float
        Length of the recording (s).
    rate : float
        Sample rate (Hz).
    fall : float
        Fraction of the friction (every term of every joint) lost at the end of the ramp.
    ramp : float
        Duration of the linear fall (s).
    cold : float
        Time before the fall starts (s).
    noise : float or ndarray, (n,)
        Standard deviation of the torque noise (N·m), one for all joints or per joint.
    seed : int
        Seed of the motion's coefficients, then the noise (one generator).

    Returns
    -------
    WarmUp
    """
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 1.0 / rate)
    q, dq, ddq = random_fourier_motion(t, model.robot.n_joints, rng)
    scale = 1.0 - fall * np.clip((t - cold) / ramp, 0.0, 1.0)
    tau = np.empty_like(q)
    for lo in range(0, len(t), CHUNK):
        sl = slice(lo, lo + CHUNK)
        tau[sl] = (np.asarray(model.rigid_body_torques(q[sl], dq[sl], ddq[sl]))
                   + scale[sl, None] * np.asarray(model.friction_torques(dq[sl])))
    tau += np.asarray(noise) * rng.standard_normal(q.shape)
    return WarmUp(t, q, dq, tau, scale)


__all__ = ['WarmUp', 'random_fourier_motion', 'warm_up']
