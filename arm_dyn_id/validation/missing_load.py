"""What the URDF's torque misses on every joint at once, in a full fit's data gate: one
effort scale that all the joints share (the effort in other units), or a load at the
flange that the URDF lacks (a gripper, a tool).

Both are read from each joint's scale against the URDF's inverse dynamics with friction
and rotor inertia fitted apart (:func:`arm_dyn_id.validation.check.nuisance_scales`). A
unit, or every torque constant off by one factor, scales every joint alike: the joints
read one scale (simulated UR3, UR5, Kinova, Panda and humanoid, effort scaled 0.4-3x:
within 1.3x of one another). A load raises the joints by its lever arm over the arm's
own, the outer joints far more than the inner ones (a humanoid with 0.8 kg: x1.85 to
x3.6; a UR3 with 1.5 kg: x1.16 to x10), and its mass and centre of mass, fitted to what
the URDF leaves, bring every joint back to about 1 (0.90-1.09 on those arms, 0.8-3 kg).
A load fitted to a shared scale can also bring the joints near 1 (a Panda's effort 2x
"is" 5.5 kg), so the shared scale is judged first; and torque constants that grow along
the chain as a load does are told from one by how closely the load brings the joints
back (:data:`LOAD_AGREEMENT`).
"""

import numpy as np

from arm_dyn_id.model.payload import payload_regressor
# LOAD_WITNESSES: the joints that must bear a load's torque before it may explain the
# scales (its four parameters could absorb two joints' errors), as in `check`
from arm_dyn_id.validation.check import (DEFAULTS, LOAD_WITNESSES, default_load_frame,
                                         nuisance_scales)

#: A joint's scale is judged where the URDF's torque varies (σ) by more than this many
#: times what its centres of mass can get wrong (:func:`~arm_dyn_id.validation.
#: plausibility.com_error_bound`, a worst case): right simulated arms read 0.84-1.18
#: there, down to a ratio of 0.6.
SCALE_MARGIN = 0.5
#: Scales within this factor of one another are one shared scale (an effort scaled
#: alike: up to 1.3x apart; a load: 1.9x and more).
SHARED_SPREAD = 1.5
#: A shared scale (geometric mean) beyond this, every joint beyond
#: :data:`LOAD_AGREEMENT` the same way, is the effort's, not the URDF's errors: right
#: arms read 0.84-1.24 on each joint (simulated, 5 arms; the real UR10e's free run
#: 0.89-1.15), an effort 1.7x on a UR3 x1.43-x1.67 (1.58 shared).
SHARED_LIMIT = 1.4
#: Samples at most for the load's fit (evenly spread over the recording).
LOAD_ROWS = 4000
#: Samples at most for the judged scales (evenly spread: an hour at 1 kHz is 3.6 M).
SCALE_ROWS = 20000
#: With the load, every determined witness reads within this factor of 1 and of one
#: another: loads of 0.8-3 kg on five simulated arms read 0.90-1.09, at most 1.12x apart;
#: a humanoid's currents read as N·m (constants 0.5 to 0.2 N·m/A, x2 to x5 along the
#: chain, a load's rise) "were" 0.88 kg reading 0.81-1.36, 1.68x apart.
LOAD_AGREEMENT = 1.25


def judged_scales(measured, nominal, velocity, acceleration, bound):
    """The joints whose friction-free scale is judged, and that scale.

    Judged: the URDF's torque varies by more than :data:`SCALE_MARGIN` × ``bound``, and
    the scale is positive and determined (3 standard errors under a fifth of it).

    Returns
    -------
    index : list of int
    scale, std_error : ndarray, (len(index),)
    """
    rows = _rows(len(measured), SCALE_ROWS)
    g = np.asarray(nominal, dtype=float)[rows]
    spread = np.nanstd(g, axis=0)
    strong = [j for j in range(g.shape[1]) if spread[j] > SCALE_MARGIN * bound[j]]
    if not strong:
        return [], np.zeros(0), np.zeros(0)
    scale, se = nuisance_scales(np.asarray(measured)[rows][:, strong], g[:, strong],
                                np.asarray(velocity)[rows][:, strong],
                                np.asarray(acceleration)[rows][:, strong])
    keep = [k for k in range(len(strong))
            if np.isfinite(scale[k]) and scale[k] > 0 and 3.0 * se[k] < 0.2 * scale[k]]
    return [strong[k] for k in keep], scale[keep], se[keep]


def shared_scale(scales, limit=SHARED_LIMIT):
    """The scale that at least two judged joints share (their geometric mean), when it is
    off beyond ``limit``, every joint is off the same way beyond :data:`LOAD_AGREEMENT`
    (where right arms stay) and within :data:`SHARED_SPREAD` of the others; else None.

    Every joint is not asked to be beyond ``limit`` itself: a UR3's effort 1.7x read
    x1.66, x1.67 and x1.43 and was written 70 % off. Of three joints or more, one may
    stand apart from the others' spread (still beyond :data:`LOAD_AGREEMENT` the same
    way, within :data:`SHARED_SPREAD` squared of their scale): every constant 2x but a
    Panda's joint 2 1.6x read x1.54-x2.37, 1.54x apart, and a 5 kg load "explained" it;
    a load's own rise keeps the others apart (1.7x and more with any one left out), or
    raises the one apart far beyond them (a Z1 with 1.5 kg: its gripper x24, joints 2-5
    x1.48-x1.85, which alone would read as one scale)."""
    s = np.asarray(scales, dtype=float)
    if len(s) < 2 or not np.all(s > 0):
        return None
    if np.all(s > LOAD_AGREEMENT):
        beyond = limit
    elif np.all(s < 1.0 / LOAD_AGREEMENT):
        beyond = 1.0 / limit
    else:
        return None
    rest = s
    if not s.max() <= SHARED_SPREAD * s.min() and len(s) >= 3:
        apart = np.argmax(np.abs(np.log(s) - np.median(np.log(s))))
        rest = np.delete(s, apart)
        # near the others' scale, not raised far beyond it as a load raises the joint it
        # weighs on most (a Z1's gripper with 1.5 kg: x24 against x1.5-x1.85)
        if abs(np.log(s[apart]) - np.mean(np.log(rest))) > 2.0 * np.log(SHARED_SPREAD):
            return None
    if not rest.max() <= SHARED_SPREAD * rest.min():
        return None
    common = float(np.exp(np.mean(np.log(rest))))
    return common if (common > beyond if beyond > 1 else common < beyond) else None


def _rows(count, most=LOAD_ROWS):
    return np.arange(0, count, max(1, int(np.ceil(count / most))))


def fit_missing_load(robot, q, measured, nominal, velocity, acceleration, bound,
                     frame='auto'):
    """A load at ``frame`` that the URDF lacks, fitted to what the URDF leaves.

    Its mass and first moment (:func:`arm_dyn_id.model.payload.payload_regressor`) are
    fitted over every witness joint at once (the URDF's torque varies there by more than
    :data:`SCALE_MARGIN` × ``bound`` and the load's gravity reaches it), each with its
    own offset, friction (``tanh(q̇ / v)``, ``q̇``) and rotor inertia, each joint weighted by
    what the URDF leaves there. It explains the scales when its mass is positive and
    significant (3 standard errors, at most ``effective_samples`` independent samples a
    joint) and the witnesses whose scales, with the load's torque added to the URDF's, are
    determined (at least two) read them within :data:`LOAD_AGREEMENT` of 1 and of one
    another.

    Parameters
    ----------
    robot : RobotModel
        The nominal URDF.
    q, measured, nominal, velocity, acceleration : array_like, (M, n)
        Positions, measured torque, the URDF's inverse dynamics, q̇ and q̈ (finite rows).
    bound : array_like, (n,)
        What the URDF's centres of mass can get wrong per joint (N·m).
    frame : str
        The load's frame (``auto``: the URDF's payload frame).

    Returns
    -------
    dict or None
        None when the URDF has no such frame or fewer than :data:`LOAD_WITNESSES`
        witnesses; else (JSON-ready) ``frame``, ``mass``, ``mass_std_error`` (kg),
        ``com`` (m, in ``frame``), ``parameters`` (m, m·c: for :func:`load_torque`),
        ``witnesses``, ``scales`` (per witness with the load, None where not
        determined), ``explains`` (bool).
    """
    where = default_load_frame(robot, frame)
    if where is None:
        return None
    y, g, dq, ddq = (np.asarray(a, dtype=float) for a in (measured, nominal, velocity,
                                                          acceleration))
    rows = _rows(len(y))
    P = payload_regressor(robot, np.asarray(q, dtype=float)[rows], where)   # (K, n, 4)
    spread = np.nanstd(g, axis=0)
    reach = np.sqrt(np.mean(P ** 2, axis=(0, 2)))
    witnesses = [j for j in range(y.shape[1]) if spread[j] > SCALE_MARGIN * bound[j] and
                 reach[j] > 1e-9 * max(float(reach.max()), 1e-300)]
    if len(witnesses) < LOAD_WITNESSES:
        return None
    v = DEFAULTS['coulomb_velocity']
    K, w = len(rows), len(witnesses)
    X = np.zeros((K * w, 4 + 4 * w))
    Y = np.zeros(K * w)
    for k, j in enumerate(witnesses):
        left = y[rows, j] - g[rows, j]
        weight = 1.0 / max(float(np.std(left)), 1e-9)
        block = slice(k * K, (k + 1) * K)
        X[block, :4] = weight * P[:, j, :]
        X[block, 4 + 4 * k:8 + 4 * k] = weight * np.column_stack(
            [np.ones(K), np.tanh(dq[rows, j] / v), dq[rows, j], ddq[rows, j]])
        Y[block] = weight * left
    norms = np.maximum(np.linalg.norm(X, axis=0), 1e-300)
    independent = min(K, DEFAULTS['effective_samples']) * w
    try:
        coef, *_ = np.linalg.lstsq(X / norms, Y, rcond=None)
        coef = coef / norms
        rms = float(np.sqrt(np.mean((Y - X @ coef) ** 2)))
        cov = np.linalg.pinv(X.T @ X) * rms ** 2 * len(Y) / max(1, independent - X.shape[1])
        mass_se = float(np.sqrt(max(cov[0, 0], 0.0)))
    except (np.linalg.LinAlgError, ValueError):
        return None                 # non-finite samples: no load can be told
    if not (np.all(np.isfinite(coef)) and np.isfinite(mass_se)):
        return None
    mass = float(coef[0])
    load = coef[:4]
    scale, se = nuisance_scales(y[rows][:, witnesses],
                                g[rows][:, witnesses] + P[:, witnesses, :] @ load,
                                dq[rows][:, witnesses], ddq[rows][:, witnesses])
    determined = np.isfinite(scale) & (3.0 * se < 0.2 * np.abs(scale))
    judged = scale[determined]
    agree = bool(len(judged) >= 2 and np.all(judged <= LOAD_AGREEMENT) and
                 np.all(judged >= 1.0 / LOAD_AGREEMENT) and
                 judged.max() <= LOAD_AGREEMENT * judged.min())
    explains = bool(mass > 0 and mass > 3.0 * mass_se and agree)
    names = list(robot.joint_names)
    return {'frame': where, 'mass': mass, 'mass_std_error': mass_se,
            'com': [float(h / mass) if mass != 0 else None for h in coef[1:4]],
            'parameters': [float(c) for c in load],
            'witnesses': [names[j] for j in witnesses],
            'scales': {names[j]: float(s) if d else None
                       for j, s, d in zip(witnesses, scale, determined)},
            'explains': explains}


def load_torque(robot, load, q):
    """The torque (K, n) of ``load`` (:func:`fit_missing_load`'s dict) at positions ``q``
    (K, n), the regressor a chunk of :data:`LOAD_ROWS` at a time."""
    q = np.asarray(q, dtype=float)
    parameters = np.asarray(load['parameters'], dtype=float)
    out = np.empty(q.shape)
    for a in range(0, len(q), LOAD_ROWS):
        out[a:a + LOAD_ROWS] = payload_regressor(robot, q[a:a + LOAD_ROWS],
                                                 load['frame']) @ parameters
    return out


def load_warning(checks):
    """The warning of a fit written with a load the URDF lacks (``checks['missing_load']``
    explaining its scales), else None."""
    load = (checks or {}).get('missing_load') or {}
    if not load.get('explains') or 'withdrew' not in load:
        return None
    com = ', '.join('?' if c is None else f'{100 * c:.2g}' for c in load['com'])
    return (f'the recording carries a load the URDF lacks: {load["mass"]:.3g} ± '
            f'{load["mass_std_error"]:.2g} kg at {load["frame"]} (centre of mass {com} cm '
            f'there), which explains its torques\' scale against the URDF ({load["scale"]}); '
            'the model includes it: serve it with that load attached, or declare the load '
            '(the config\'s payload) and fit again')


__all__ = ['LOAD_AGREEMENT', 'LOAD_ROWS', 'SCALE_MARGIN', 'SCALE_ROWS', 'SHARED_LIMIT',
           'SHARED_SPREAD', 'fit_missing_load', 'judged_scales', 'load_torque', 'load_warning',
           'shared_scale']
