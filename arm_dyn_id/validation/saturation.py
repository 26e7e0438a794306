"""An effort that stays at one level while the torque the arm needs goes on past it.

A drive at its current limit, an effort field of a fixed range, a torque the controller
clips: the recorded effort of that joint is flat at its extreme while the motion asks
for more. No rigid arm makes such torques, and the fits did not say it: a Panda whose
second joint was clipped at 66 % of its peak was refused as "the cut-off is too high
for the encoder noise" (a flat effort has no sample-to-sample change, so the URDF's
looks noisy beside it), as another joint's torque constant, or written with a negative
inertia. :func:`saturated` reads it before any of those.

For each joint the URDF loads, on each side (its largest and its smallest effort): the
samples within :data:`BAND` of the joint's range (at least 4 σ of its noise) of that
extreme. When they are at least :data:`MIN_SHARE` of the recording, the URDF's torque
(a scale, a constant, Coulomb and viscous friction, fitted on the other samples, where
it must explain all but :data:`UNEXPLAINED` of the joint's torque at a scale within
:data:`SCALE`) is predicted there. At a natural peak the prediction peaks with the
effort; at a plateau it goes on past the level: by more than :data:`BEYOND` of the range
on the median sample, and spread over those samples more than 3 times the band the
effort stays in.
"""

import numpy as np

from arm_dyn_id.validation.angle_convention import loaded_joints

#: the band below a joint's extreme effort (a share of its range; at least 4 σ of noise)
BAND = 0.005
#: the share of the samples within the band at which a plateau is looked for
MIN_SHARE = 0.02
#: how far past the level the URDF's torque goes on the median sample of the band, as a
#: share of the joint's range (a clip at 80 % of a sine's peak: about 0.08)
BEYOND = 0.04
#: away from the level the URDF's torque must explain all but this share of the joint's
#: (a joint whose effort is another's, swapped, reads flat against it)
UNEXPLAINED = 0.2
#: ... at a scale within these (a joint carrying another's effort, swapped, can fit the
#: URDF's torque at a tenth of it with friction)
SCALE = (0.5, 2.0)
#: rad/s: the smooth sign of the friction fitted beside the URDF's torque
SMOOTH = 0.01


def _prediction(y, g, v, fit):
    """The URDF's torque ``g`` in the measured one's scale, with a constant and Coulomb and
    viscous friction, fitted on the samples ``fit``; None when its scale is not within
    :data:`SCALE` or it leaves more than :data:`UNEXPLAINED` of their torque unexplained
    (the joint does not follow the URDF's even away from the level: its wiring, units or
    constants are judged instead)."""
    X = np.column_stack([g, np.ones(len(g)), np.tanh(v / SMOOTH), v])
    coef, *_ = np.linalg.lstsq(X[fit], y[fit], rcond=None)
    spread = float(((y[fit] - y[fit].mean()) ** 2).sum())
    left = float(((y[fit] - X[fit] @ coef) ** 2).sum())
    ok = SCALE[0] <= coef[0] <= SCALE[1] and left <= UNEXPLAINED * spread
    return X @ coef if ok else None


def saturated(effort, nominal, velocity, joints, noise=None):
    """The joints whose effort stays at a level the URDF's torque goes on past.

    Parameters
    ----------
    effort : ndarray, (M, n)
        The recorded torque at the samples (not filtered: a filter rings at a plateau's
        corners), N·m.
    nominal : ndarray, (M, n)
        The URDF's inverse dynamics at the same samples (N·m).
    velocity : ndarray, (M, n)
        q̇ there (rad/s).
    joints : sequence of str
    noise : array_like, (n,), optional
        The effort's noise σ per joint (N·m).

    Returns
    -------
    list of dict
        Per plateau: ``joint``, ``level`` (N·m, signed), ``share`` (of the samples),
        ``needed`` (the URDF's torque furthest past the level there, N·m).
    """
    y, g = np.asarray(effort, dtype=float), np.asarray(nominal, dtype=float)
    v = np.asarray(velocity, dtype=float)
    ok = np.all(np.isfinite(y) & np.isfinite(g) & np.isfinite(v), axis=1)
    y, g, v = y[ok], g[ok], v[ok]
    if len(y) < 50:
        return []
    sigma = np.zeros(y.shape[1]) if noise is None else np.nan_to_num(
        np.asarray(noise, dtype=float))
    found = []
    for j in np.flatnonzero(loaded_joints(g)):
        span = float(np.ptp(y[:, j]))
        if span <= 0:
            continue
        band = max(BAND * span, 4.0 * sigma[j])
        for side in (1.0, -1.0):
            top = side * y[:, j]
            level = float(top.max())
            at = top >= level - band
            if at.mean() < MIN_SHARE or at.all():
                continue
            predicted = _prediction(y[:, j], g[:, j], v[:, j], ~at)
            if predicted is None:
                continue
            past = side * predicted[at] - level
            if np.median(past) > BEYOND * span and past.std() > 3.0 * band:
                found.append({'joint': joints[j], 'level': side * level,
                              'share': float(at.mean()),
                              'needed': float(side * (level + past.max()))})
    return found


def saturation_message(found):
    """The refusal's sentence for :func:`saturated`'s findings (a non-empty list)."""
    each = '; '.join(f"{f['joint']}'s effort stays at {f['level']:.4g} N·m on "
                     f"{100 * f['share']:.0f} % of the samples, where the URDF's torque goes "
                     f"on to {f['needed']:.4g} N·m" for f in found)
    return (f'{each}: the effort saturates (a drive at its current limit, an effort of a '
            'fixed range, a torque the controller clips), and no model follows a torque '
            'the arm did not get: record a slower or smaller motion within the limit, or '
            'raise it')


__all__ = ['BAND', 'BEYOND', 'MIN_SHARE', 'saturated', 'saturation_message']
