"""The driver's angles against the URDF's: degrees, one joint's zero, one joint's direction.

A driver's conventions can differ from the URDF's: its zero on a joint (calibrated
against another reference, a horn a spline off, a description for another firmware), a
joint whose positive direction is the other way (its angle and its effort both
reversed), angles in degrees. The data gate then compares the measured torque with the
URDF's at the wrong angles: a 90° offset read as "does not follow the URDF's", a 180° one
as a flipped sign (a Panda's second joint: three flipped signs), a reversed joint as a
flipped sign or a scale, advice that would write a wrong model when followed.

Every gravity and full fit tries the one-joint changes (each joint's angle moved by
-90°, 90° or 180°, or its angle and effort negated: 24 of a 6-joint arm at 200 of the
gate's samples, about 35 ms): :func:`convention` computes the URDF's torque again with the
change and fits the measured torque with it, joint by joint (a scale, a constant and,
in a full fit, Coulomb and viscous friction). A change is named when with it the URDF's
torque leaves at most :data:`EXPLAINED` of every judged joint's measured torque
unexplained, at most half as much as recorded and :data:`MIN_DROP` less (on average over
the joints loaded either way), every loaded joint's scale within :data:`SCALE`, and when
it explains within :data:`EXPLAINED` some joint's torque that the URDF leaves more
unexplained as recorded (a URDF whose masses are a little off may fit a light wrist
turned half a turn better than as recorded, while explaining every joint as recorded). The fit is
then refused, whatever the gate said: fitted on these angles a model holds near the
recorded motion only. Changes that explain the torque nearly as well are said beside it
(:data:`ALIKE`): a Panda's second joint reversed is its third joint half a turn off, the
arm the same either way; with gravity alone half a turn of the last loaded joint is a
flipped sign (a sign refusal whose signs flipped explain it as well keeps its cause). A
change the recorded torque cannot show (a light wrist's, whose URDF torque barely
varies; a last joint's offset, which its link's parameters absorb exactly) is not named.
:func:`degrees_message` says degrees: a bounded joint more than a turn beyond its URDF
limits, within them divided by 57.3.
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


def loaded_joints(nominal):
    """(n,) bool: the joints whose URDF torque (``nominal``, (M, n)) varies by more than
    :data:`LOADED_SHARE` of the most loaded joint's (none when no joint's varies)."""
    amp = np.asarray(nominal, dtype=float).std(axis=0)
    return amp > LOADED_SHARE * amp.max() if amp.max() > 0 else np.zeros(len(amp), bool)


def explained(measured, nominal, velocity=None, smooth=SMOOTH):
    """``(unexplained, scales, loaded)``: each joint's measured torque fitted by the URDF's
    (a scale, not negative: a torque against the URDF's is not explained by it), a
    constant and, given ``velocity``, Coulomb (``tanh(q̇ / smooth)``) and viscous friction;
    per joint the share of
    its measured torque (about its mean) the fit leaves, its scale, and which joints are
    loaded (the URDF's torque varies there)."""
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    loaded = loaded_joints(g)
    share = np.ones(g.shape[1])
    scales = np.zeros(g.shape[1])
    for j in range(g.shape[1]):
        cols = [g[:, j], np.ones(len(g))]
        if velocity is not None:
            v = velocity[:, j]
            cols += [np.tanh(v / smooth), v]
        X = np.column_stack(cols)
        coef, *_ = np.linalg.lstsq(X, y[:, j], rcond=None)
        if coef[0] < 0:     # against the URDF's: it explains none of the torque
            coef = np.concatenate([[0.0], np.linalg.lstsq(X[:, 1:], y[:, j], rcond=None)[0]])
        tss = float(((y[:, j] - y[:, j].mean()) ** 2).sum())
        if tss > 0:
            share[j] = float(((y[:, j] - X @ coef) ** 2).sum()) / tss
        scales[j] = coef[0]
    return share, scales, loaded


def _score(share, loaded):
    """Mean unexplained share over the ``loaded`` joints (1 with none)."""
    return float(np.mean(share[loaded])) if loaded.any() else 1.0


#: a change explaining the torque within this factor of the best one's unexplained share
#: is said beside it
ALIKE = 2.0


def _changes(n):
    """Every one-joint change tried: (joint index, offset rad or None for reversed)."""
    return [(k, offset) for k in range(n) for offset in OFFSETS + (None,)]


def _apply(q, measured, velocity, k, offset):
    """The angles, measured torque and velocity with joint ``k``'s change made: its angle
    moved by ``offset``, or (None) its angle, torque and velocity negated."""
    if offset is None:
        return (_reversed(q, k), _reversed(measured, k),
                None if velocity is None else _reversed(velocity, k))
    moved = q.copy()
    moved[:, k] -= offset
    return moved, measured, velocity


def convention(q, nominal_at, measured, joints, velocity=None, flip=(), smooth=SMOOTH):
    """The one-joint changes of convention that explain the measured torque, best first
    (a list, empty when none): each ``(joint, offset rad or None: reversed, unexplained
    with it, as recorded)``, the best one's and those within :data:`ALIKE` of it;
    ``flip`` (joints a sign refusal names) with their signs flipped as recorded counts
    as one such explanation, ``('joint, joint', 'sign', ...)``.

    Parameters
    ----------
    q : ndarray, (M, n)
        The angles the nominal torque is computed at (rad).
    nominal_at : callable
        ``nominal_at(q, reversed)`` -> the URDF's torque (M, n) at angles ``q``, with the
        velocity and acceleration of joint ``reversed`` (an index, or None) negated.
    measured : ndarray, (M, n)
        The measured torque (N·m).
    joints : sequence of str
    velocity : ndarray, (M, n), optional
        q̇ (rad/s): friction fitted apart (a full fit); None: the torques hold no friction
        (a gravity fit's averaged pairs). A reversed joint's velocity is negated with it.
    flip : sequence of str
        Joints a sign refusal names.
    smooth : float
        rad/s, the Coulomb term's width (the fit's).
    """
    q, measured = np.asarray(q, dtype=float), np.asarray(measured, dtype=float)
    as_recorded, _, loaded_then = explained(measured, nominal_at(q, None), velocity, smooth)
    found = []
    for k, offset in _changes(len(joints)):
        moved, y, v = _apply(q, measured, velocity, k, offset)
        share, scales, loaded = explained(y, nominal_at(moved, k if offset is None else None),
                                          v, smooth)
        # judged on the joints loaded either way: an angle at which a joint's URDF torque
        # fades must not drop what it leaves unexplained
        judged = loaded | loaded_then
        ok = loaded.any() and np.all((scales[loaded] >= SCALE[0]) &
                                     (scales[loaded] <= SCALE[1]))
        score, recorded = _score(share, judged), _score(as_recorded, judged)
        # and the change must explain a joint's torque the URDF fails as recorded (loaded
        # or not): where none is, the angles are as good as a change can show (a joint
        # the URDF barely loads, of masses a little off, may fit a turned one better)
        mends = np.any((as_recorded > EXPLAINED) & (share <= EXPLAINED))
        if ok and mends and share[judged].max() <= EXPLAINED and \
                score <= GAIN * recorded and recorded - score >= MIN_DROP:
            found.append((joints[k], offset, score, recorded, judged))
    if not found:
        return []
    found.sort(key=lambda f: f[2])
    best = found[0]
    alike = [f[:4] for f in found if f[2] <= ALIKE * best[2] + 1e-3]
    if flip:
        flipped = measured.copy()
        for j in flip:
            flipped[:, list(joints).index(j)] *= -1
        signs = _score(explained(flipped, nominal_at(q, None), velocity, smooth)[0], best[4])
        if signs <= ALIKE * best[2] + 1e-3:
            alike.append((', '.join(flip), 'sign', signs, best[3]))
    return alike


def _reversed(x, k):
    """``x`` (M, n) with column ``k`` negated (a copy), or ``x`` when ``k`` is None."""
    if k is None:
        return x
    x = x.copy()
    x[:, k] = -x[:, k]
    return x


def inverse_dynamics_at(robot, velocity, acceleration):
    """The ``nominal_at(q, reversed)`` :func:`convention` asks of a full fit: the URDF's
    inverse dynamics at angles ``q`` with these derivatives, joint ``reversed``'s negated."""
    def nominal_at(angles, reversed=None):
        return robot.inverse_dynamics(angles, _reversed(velocity, reversed),
                                      _reversed(acceleration, reversed))
    return nominal_at


def _change_text(joint, offset):
    if offset == 'sign':
        return f'the sign of {joint} flipped (current_signs)'
    if offset is None:
        return f"{joint} turns the other way than the URDF's axis (its angle and effort reversed)"
    degrees = int(round(np.degrees(offset)))
    return f"{joint}'s angle reads {degrees:+d}° off the URDF's zero"


def convention_message(found):
    """The refusal's sentence for :func:`convention`'s findings (a non-empty list)."""
    joint, offset, score, recorded = found[0]
    how = 'its angle and effort negated' if offset is None else \
        f'{int(round(np.degrees(offset))):+d}° taken from it'
    alike = [_change_text(j, o) for j, o, _, _ in found[1:]]
    text = (f'{_change_text(joint, offset)}: with {how} the URDF\'s torque leaves '
            f'{100 * score:.0f} % of the measured one unexplained (as recorded '
            f'{100 * recorded:.0f} %)')
    if alike:
        text += '; as well explained: ' + '; '.join(alike)
    return (text + ". The driver's convention and the URDF's differ: correct one of them, so "
            "that the angles and torques the model is served match the URDF's")


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


def angle_hint(robot, q, tau, velocity, acceleration, rows=200):
    """What ``arm-dyn-id check`` adds to a verdict that is not OK (it says degrees before
    comparing anything): a joint's convention off the URDF's (:func:`convention` on
    ``rows`` samples of the recording, the URDF's inverse dynamics at its smoothed
    angles ``q`` and derivatives, friction fitted apart); None when none explains it."""
    if len(q) < 10:
        return None
    pick = np.arange(0, len(q), max(1, len(q) // rows))
    v, a = np.asarray(velocity, dtype=float)[pick], np.asarray(acceleration, dtype=float)[pick]
    found = convention(np.asarray(q, dtype=float)[pick], inverse_dynamics_at(robot, v, a),
                       np.asarray(tau, dtype=float)[pick], list(robot.joint_names), velocity=v)
    return convention_message(found) if found else None
