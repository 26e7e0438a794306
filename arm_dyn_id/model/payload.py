"""Where a payload enters the arm model: its frame and its regressors.

A rigid payload at a frame f of body b (placement R_f, p_f in the body frame) adds to
body b's mass parameters ``Δm = m`` and ``Δh = R_f h + p_f m``, with ``h = m c`` its
first moment in the frame, so the extra gravity torque is linear in (m, h)
(:func:`payload_regressor`); for the whole inverse dynamics its ten inertial parameters
enter body b's through :func:`payload_transform` (:func:`payload_full_regressor`).

Used to identify a payload (:mod:`arm_dyn_id.identification.payload`), to watch for one
while serving (:mod:`arm_dyn_id.service.payload_watch`) and to tell a load the URDF
lacks from wrong torque constants (:mod:`arm_dyn_id.validation.check`).
"""

import numpy as np

from arm_dyn_id.errors import DataError, JointNameError

#: Payload frames tried in turn when none is given (then the chain's tip link).
DEFAULT_FRAMES = ('flange', 'tool0')
#: Among the frames rigid with the chain's last link, one whose name holds one of these
#: is the tool's (else the last listed).
TOOL_WORDS = ('tcp', 'tool', 'eef', 'end_effector')


def _frame(robot, frame):
    """(body index 0-based, frame placement) of ``frame``; JointNameError when absent."""
    model = robot.model
    if not model.existFrame(frame):
        raise JointNameError(f'payload frame {frame!r} is not in {robot.source} '
                             f'(frames: {[f.name for f in model.frames]})')
    f = model.frames[model.getFrameId(frame)]
    return (f.parentJoint if hasattr(f, 'parentJoint') else f.parent) - 1, f.placement


def frame_reached(robot, frame):
    """Which joints move ``frame`` (bool, (n,)): those between it and the base. A load
    there puts torque on them only."""
    body, _ = _frame(robot, frame)
    chain = {int(j) for j in robot.model.supports[body + 1]}
    return np.array([int(j) in chain for j in robot._jid])


def payload_frame(robot, frame=None):
    """The payload frame: ``frame`` when given (checked), else ``flange`` if the URDF
    has it, else ``tool0``, else the tip link of the chain (of the frames rigid with the
    child link of the last joint, the last named as a tool's, :data:`TOOL_WORDS`, or the
    last listed). Called before any reading.

    Parameters
    ----------
    robot : RobotModel
    frame : str, optional

    Returns
    -------
    str

    Raises
    ------
    JointNameError
        A given frame that is not in the URDF (``--frame`` named).
    DataError
        A given frame that no joint of the arm moves (a load there loads none of them).
    """
    model = robot.model
    if frame is not None:
        if not model.existFrame(frame):
            links = [f.name for f in model.frames if str(f.type).endswith('BODY')]
            raise JointNameError(f'payload frame {frame!r} is not in {robot.source}: pass '
                                 f'--frame with one of its links ({", ".join(links)})')
        if not frame_reached(robot, frame).any():
            raise DataError(f'payload frame {frame!r} is moved by no joint of the arm: a load '
                            'there loads none of them. Give the frame the load is attached to '
                            f'(default {payload_frame(robot)!r})')
        return frame
    for name in DEFAULT_FRAMES:
        if model.existFrame(name):
            return name
    last = model.njoints - 1
    tips = [f.name for f in model.frames
            if str(f.type).endswith('BODY') and
            (f.parentJoint if hasattr(f, 'parentJoint') else f.parent) == last]
    if not tips:
        raise JointNameError(f'no payload frame: {robot.source} has no flange, tool0 or link '
                             'after its last joint; pass --frame')
    # of the frames rigid with the last link, one named as a tool's (a Kinova's
    # j2s6s200_end_effector, not the last listed, a finger tip)
    named = [t for t in tips if any(k in t.lower() for k in TOOL_WORDS)]
    return (named or tips)[-1]


def _skew(v):
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def _sym(six):
    """pinocchio's (xx, xy, yy, xz, yz, zz) -> 3x3."""
    xx, xy, yy, xz, yz, zz = six
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def _six(mat):
    return np.array([mat[0, 0], mat[0, 1], mat[1, 1], mat[0, 2], mat[1, 2], mat[2, 2]])


def payload_transform(rotation, translation):
    """T (10, 10): a payload's parameters in its frame -> its body's (see module notes).

    Parameters
    ----------
    rotation : ndarray, (3, 3)
        R of the frame in the body's joint frame.
    translation : ndarray, (3,)
        p of the frame in the body's joint frame (m).
    """
    R, p = np.asarray(rotation, dtype=float), np.asarray(translation, dtype=float)
    Sp = _skew(p)
    T = np.empty((10, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = 1.0
        m, h, inertia = e[0], e[1:4], _sym(e[4:])
        Rh = R @ h
        body = R @ inertia @ R.T - m * Sp @ Sp - Sp @ _skew(Rh) - _skew(Rh) @ Sp
        T[:, k] = np.concatenate([[m], Rh + m * p, _six(body)])
    return T


def payload_full_regressor(robot, q, dq, ddq, frame='flange'):
    """Regressor of the payload's ten parameters (m, h, I_f) at ``frame``, (M, n, 10).

    ``τ_loaded - τ_arm = Y @ π_f`` for the full inverse dynamics (no friction).

    Raises
    ------
    JointNameError
        If the frame is not in the model.
    """
    body, placement = _frame(robot, frame)
    q, dq, ddq = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, dq, ddq))
    Y = robot.full_regressor(q, dq, ddq, friction=False)[..., 10 * body:10 * body + 10]
    return Y @ payload_transform(placement.rotation, placement.translation)


def payload_regressor(robot, q, frame='flange', gravity=None):
    """Regressor of the payload's (m, m·c) at ``frame``, (M, n, 4) for q (M, n).

    Raises
    ------
    JointNameError
        If the frame is not in the model.
    """
    body, placement = _frame(robot, frame)
    Y = robot.gravity_regressor(np.atleast_2d(q), gravity=gravity)
    Ym = Y[..., 4 * body]                       # (M, n)
    Yh = Y[..., 4 * body + 1:4 * body + 4]      # (M, n, 3)
    R, p = placement.rotation, placement.translation
    return np.concatenate([(Ym + Yh @ p)[..., None], Yh @ R], axis=-1)


__all__ = ['DEFAULT_FRAMES', 'TOOL_WORDS', 'payload_frame', 'payload_transform',
           'payload_full_regressor', 'payload_regressor']
