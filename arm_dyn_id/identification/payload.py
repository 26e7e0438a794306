"""Identify a payload's mass and centre of mass with the arm model frozen.

A rigid payload at a frame f of body b (placement R_f, p_f in the body frame)
adds to body b's mass parameters ``Δm = m`` and ``Δh = R_f h + p_f m``, with
``h = m c`` its first moment in the frame. The gravity torque is linear in the
link parameters, so the extra torque is linear in (m, h):

    τ - G_arm(q) = [Y_m + Y_h p_f,  Y_h R_f] (m, h)ᵀ,

Y_m, Y_h being body b's columns of the gravity regressor. Four parameters,
fitted by weighted least squares on friction-free samples (forward/backward
averaged, seed 000 eq. 5) with the identified arm model frozen.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError, JointNameError
from arm_dyn_id.identification.estimators import fit_wls
from arm_dyn_id.model.robot import Payload
from arm_dyn_id.identification.pairing import average_pairs, sweeps_from_markers

PAYLOAD_PARAMS = ('m', 'mx', 'my', 'mz')


@dataclass(frozen=True)
class PayloadFit:
    """An identified payload.

    Attributes
    ----------
    payload : Payload
        Mass (kg) and centre of mass (m, in ``payload.frame``).
    std_errors : ndarray, (4,)
        Of (m, m·cx, m·cy, m·cz) (kg, kg·m).
    com_std_errors : ndarray, (3,)
        First-order standard errors of the centre of mass (m).
    result : IdentificationResult
    """

    payload: Payload
    std_errors: np.ndarray
    com_std_errors: np.ndarray
    result: object


def payload_regressor(robot, q, frame='flange', gravity=None):
    """Regressor of the payload's (m, m·c) at ``frame``, (M, n, 4) for q (M, n).

    Raises
    ------
    JointNameError
        If the frame is not in the model.
    """
    model = robot.model
    if not model.existFrame(frame):
        raise JointNameError(f'payload frame {frame!r} is not in {robot.source} '
                             f'(frames: {[f.name for f in model.frames]})')
    f = model.frames[model.getFrameId(frame)]
    body = (f.parentJoint if hasattr(f, 'parentJoint') else f.parent) - 1
    Y = robot.gravity_regressor(np.atleast_2d(q), gravity=gravity)
    Ym = Y[..., 4 * body]                       # (M, n)
    Yh = Y[..., 4 * body + 1:4 * body + 4]      # (M, n, 3)
    R, p = f.placement.rotation, f.placement.translation
    return np.concatenate([(Ym + Yh @ p)[..., None], Yh @ R], axis=-1)


def identify_payload(model, t, q, tau, markers=None, noise=None, frame='flange',
                     average=True):
    """Payload mass and centre of mass from data taken with it attached.

    Parameters
    ----------
    model : GravityModel
        The identified arm without payload (frozen); its robot's gravity must be
        the gravity of the data.
    t : ndarray, (N,)
    q : ndarray, (N, n)
        rad.
    tau : ndarray, (N, n)
        Measured joint torques (N·m).
    markers : list of dict, optional
        Segment markers; with ``average`` the forward/backward passes are averaged
        to cancel friction.
    noise : array_like, (n,), optional
        Torque noise σ per joint (N·m) for the weights.
    frame : str
        Frame the centre of mass is expressed in.

    Returns
    -------
    PayloadFit

    Raises
    ------
    DataError
        When the data shows no payload (mass not significantly above zero).
    RankDeficientError
        When the data cannot separate the centre-of-mass components (named).
    """
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    if average:
        if not markers:
            raise DataError('payload identification averages forward/backward passes: pass '
                            'the segment markers, or average=False')
        paired = average_pairs(t, q, tau, sweeps_from_markers(t, markers))
        q, tau = paired.q, paired.tau
    extra = tau - (model.gravity_torques(q) if len(q) else np.empty_like(tau))
    P = payload_regressor(model.robot, q, frame)
    result = fit_wls(P, extra, PAYLOAD_PARAMS, noise=noise, method='payload_wls')
    mass, h = float(result.beta[0]), result.beta[1:]
    sigma = result.std_errors
    if not mass > 3 * sigma[0]:
        raise DataError(f'no payload detected at {frame!r}: estimated mass {mass:.4g} ± '
                        f'{sigma[0]:.2g} kg')
    com = h / mass
    # first-order propagation of c = h / m
    J = np.column_stack([-h / mass ** 2, np.eye(3) / mass])      # (3, 4)
    com_cov = J @ result.covariance @ J.T
    return PayloadFit(payload=Payload(mass=mass, com=tuple(float(c) for c in com), frame=frame),
                      std_errors=sigma, com_std_errors=np.sqrt(np.diag(com_cov)),
                      result=result)
