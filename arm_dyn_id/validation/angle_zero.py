"""A joint whose angle reads a quarter or half turn off the URDF's zero.

A driver's zero can differ from the URDF's: a joint calibrated against another
reference, a horn mounted a spline off, a description written for another firmware.
The data gate then compares the measured torque with the URDF's at the wrong angle,
and a 90° offset read as "does not follow the URDF's" and a 180° one as a flipped sign
(on a Panda, three flipped signs), advice that would write a wrong model.

Every gravity and full fit tries it (18 offsets of a 6-joint arm, at 200 of the gate's
samples: about 25 ms): :func:`zero_offset` computes the URDF's torque again with one
joint's angle moved by -90°, 90° or 180° at a time and fits the measured torque with it,
joint by joint (a scale, a constant and, in a full fit, friction). An offset is named
when with it the URDF's torque leaves at most :data:`EXPLAINED` of every judged joint's
measured torque unexplained, at most half as much as recorded and :data:`MIN_DROP` less
(on average over the joints loaded with either angle), every loaded joint's scale
within :data:`SCALE`. The fit is then refused, whatever the gate said: fitted on these
angles a model holds near the recorded motion only. Where a refusal names flipped signs
and those signs flipped explain the torque as well, both are said: with the arm's
gravity alone, half a turn of the last loaded joint is a flipped sign. An offset the
recorded torque cannot show (a light wrist's, whose URDF torque barely varies; a last
joint's, which its own link's parameters absorb exactly) is not named.
"""

import numpy as np

#: rad: the offsets tried, a quarter and half turn either way
OFFSETS = (-np.pi / 2, np.pi / 2, np.pi)
#: a joint is loaded where the URDF's torque varies by more than this share of the most
#: loaded joint's (the data gate's LOADED_SHARE)
LOADED_SHARE = 0.05
#: the share of the loaded joints' measured torque (about its mean) the URDF's must leave
#: unexplained with the offset, at most, and against as recorded (and a sign flipped)
EXPLAINED = 0.2
GAIN = 0.5
#: and by at least this share less than as recorded (not a choice between two fits of noise)
MIN_DROP = 0.01
#: each loaded joint's scale on the URDF's torque with the offset (URDF masses off)
SCALE = (0.5, 2.0)
#: rad/s: the smooth sign of the friction fitted apart (the model's default ε)
SMOOTH = 0.01


def explained(measured, nominal, velocity=None):
    """``(unexplained, scales, loaded)``: each joint's measured torque fitted by the URDF's
    (a scale, not negative: a torque against the URDF's is not explained by it), a
    constant and, given ``velocity``, Coulomb and viscous friction; per joint the share of
    its measured torque (about its mean) the fit leaves, its scale, and which joints are
    loaded (the URDF's torque varies there)."""
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    amp = g.std(axis=0)
    loaded = amp > LOADED_SHARE * amp.max() if amp.max() > 0 else np.zeros(g.shape[1], bool)
    share = np.full(g.shape[1], np.nan)
    scales = np.full(g.shape[1], np.nan)
    for j in range(g.shape[1]):
        cols = [g[:, j], np.ones(len(g))]
        if velocity is not None:
            v = velocity[:, j]
            cols += [np.tanh(v / SMOOTH), v]
        X = np.column_stack(cols)
        coef, *_ = np.linalg.lstsq(X, y[:, j], rcond=None)
        if coef[0] < 0:     # against the URDF's: it explains none of the torque
            coef = np.concatenate([[0.0], np.linalg.lstsq(X[:, 1:], y[:, j], rcond=None)[0]])
        tss = float(((y[:, j] - y[:, j].mean()) ** 2).sum())
        share[j] = float(((y[:, j] - X @ coef) ** 2).sum()) / tss if tss > 0 else 1.0
        scales[j] = coef[0]
    return share, scales, loaded


def _score(share, loaded):
    """Mean unexplained share over the ``loaded`` joints (1 with none)."""
    return float(np.mean(share[loaded])) if loaded.any() else 1.0


def zero_offset(q, nominal_at, measured, joints, velocity=None, flip=()):
    """``(joint, offset rad, unexplained with it, as recorded, a sign alike)`` of the
    one-joint angle offset with which the URDF's torque explains the measured one, or
    None. Unexplained: the mean over loaded joints of the share each leaves; ``a sign
    alike``: the joints of ``flip`` with their sign flipped explain it as well.

    Parameters
    ----------
    q : ndarray, (M, n)
        The angles the nominal torque is computed at (rad).
    nominal_at : callable
        ``nominal_at(q)`` -> the URDF's torque (M, n) at angles ``q``.
    measured : ndarray, (M, n)
        The measured torque (N·m).
    joints : sequence of str
    velocity : ndarray, (M, n), optional
        q̇ (rad/s): friction fitted apart (a full fit); None: the torques hold no friction
        (a gravity fit's averaged pairs).
    flip : sequence of str
        Joints a sign refusal names.
    """
    q = np.asarray(q, dtype=float)
    as_recorded, _, loaded_then = explained(measured, nominal_at(q), velocity)
    best = None
    for k in range(len(joints)):
        for offset in OFFSETS:
            moved = q.copy()
            moved[:, k] -= offset
            share, scales, loaded = explained(measured, nominal_at(moved), velocity)
            # judged on the joints loaded either way: an angle at which a joint's URDF
            # torque fades must not drop what it leaves unexplained
            judged = loaded | loaded_then
            ok = loaded.any() and np.all((scales[loaded] >= SCALE[0]) &
                                         (scales[loaded] <= SCALE[1]))
            score, recorded = _score(share, judged), _score(as_recorded, judged)
            if ok and share[judged].max() <= EXPLAINED and score <= GAIN * recorded and \
                    recorded - score >= MIN_DROP and (best is None or score < best[2]):
                best = (joints[k], offset, score, recorded, judged)
    if best is None:
        return None
    alike = False
    if flip:
        flipped = np.array(measured, dtype=float)
        for j in flip:
            flipped[:, list(joints).index(j)] *= -1
        signs = explained(flipped, nominal_at(q), velocity)[0]
        alike = best[2] > GAIN * _score(signs, best[4])
    return best[:4] + (alike,)


def offset_message(joint, offset, score, recorded, alike=False):
    """The refusal's sentence for an angle offset found by :func:`zero_offset`."""
    degrees = int(round(np.degrees(offset)))
    return (f"{joint}'s angle reads {degrees:+d}° off the URDF's zero: with {degrees:+d}° "
            f"taken from it the URDF's torque leaves {100 * score:.0f} % of the measured "
            f'one unexplained (as recorded {100 * recorded:.0f} %'
            + ('; as much with the sign flipped' if alike else '') +
            "). The driver's zero (its calibration) and the URDF's joint origin differ: "
            "correct one of them, so that the angles the model is served match the URDF's")


#: rad: how far beyond its URDF limits a bounded joint's recorded angle must go for the
#: angles to be judged as degrees: a whole turn, which no angle in radians of a bounded
#: joint goes (a joint's 6° in degrees is 6 "rad")
BEYOND = 2 * np.pi


def _excess(q, lo, hi):
    """rad, per joint: how far the angles ``q`` go beyond (lo, hi) either way."""
    return np.maximum(lo - np.nanmin(q, axis=0), 0) + np.maximum(np.nanmax(q, axis=0) - hi, 0)


def degrees_message(robot, q):
    """A refusal's sentence when the angles look like degrees, else None: a joint with
    limits in the URDF leaves them by more than :data:`BEYOND`, and divided by 180/π the
    angles leave them (summed over the bounded joints) by a tenth as much at most."""
    q = np.asarray(q, dtype=float)
    bounded = robot.bounded
    if not bounded.any() or not len(q):
        return None
    lo, hi = robot.position_limits
    raw = np.where(bounded, _excess(q, lo, hi), 0.0)
    converted = np.where(bounded, _excess(np.radians(q), lo, hi), 0.0)
    out = raw > BEYOND
    if not out.any() or converted.sum() > 0.1 * raw.sum():
        return None
    names = [j for j, o in zip(robot.joint_names, out) if o]
    reach = float(np.nanmax(np.abs(q[:, out])))
    return (f'the angles look like degrees: {", ".join(names)} '
            f'{"leaves its" if len(names) == 1 else "leave their"} URDF limits (up to '
            f'{reach:.0f} "rad"), and within them once divided by 57.3; give the angles in '
            'radians (JointState.position is rad)')


def angle_hint(robot, t, q, tau, dq=None, rows=200):
    """What ``arm-dyn-id check`` adds to a verdict that is not OK: the angles in degrees
    (:func:`degrees_message`) or one joint's zero off the URDF's (:func:`zero_offset` on
    ``rows`` samples of the recording, the URDF's inverse dynamics at its smoothed
    derivatives, friction fitted apart); None when neither."""
    said = degrees_message(robot, q)
    if said is not None or len(t) < 10:
        return said
    from arm_dyn_id.data.segmentation import filtered_derivatives
    qs, v, a = filtered_derivatives(t, q, dq=dq)
    pick = np.arange(0, len(t), max(1, len(t) // rows))

    def nominal_at(angles):
        return np.array([robot.inverse_dynamics(x, y, z)
                         for x, y, z in zip(angles, v[pick], a[pick])])
    found = zero_offset(qs[pick], nominal_at, np.asarray(tau, dtype=float)[pick],
                        list(robot.joint_names), velocity=v[pick])
    return None if found is None else offset_message(*found)
