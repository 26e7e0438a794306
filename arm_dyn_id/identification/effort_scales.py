"""Each joint's effort scale against the other joints', from a fit's own moments.

Full fits read it on their time blocks (``full_dynamics``); gravity fits from sweeps on
their averaged pairs (``gravity.pair_effort_scales``), with the held joints' offsets and
the swept joints' constants eliminated.

A joint's torque constant (or the scale its driver applies) off by a factor scales that
joint's row of the dynamic equations alone. The rigid body couples the rows: a link's
mass and first moments weigh on every joint before it, so the parameters that the other
joints pin down also predict part of this joint's torque, and its effort's scale against
theirs can be read from the data alone, with no URDF (a load the URDF lacks is fitted,
not mistaken for a scale). Only the ratios are determined: all constants off by the same
factor move every parameter with them (the absolute scale is the plain-scale check's,
against the URDF, and ``arm-dyn-id calibrate``'s, from a known load).

Per joint j, the profile of the weighted least-squares loss in one extra unknown ``s``,

    L(s) = min_β  Σ_{i≠j} w_i ‖τ_i − W_i β‖² + w_j ‖τ_j − s W_j β‖²,

in the measured torque's units (where its noise is), from the block moments the fit
already holds (no pass over the samples): ``A(s) = Σ w_i A_i + (s² − 1) w_j A_j``,
``b(s) = Σ w_i b_i + (s − 1) w_j b_j``, ``L(s) = Σ w_i Στ_i² − b(s)ᵀ A(s)⁻¹ b(s)``.
The joint's own terms (its friction, the base parameters only its row holds) scale with
``s`` and leave it free: only the shared ones pin it. A joint with nothing shared (a
wrist whose torque is its friction) reads a flat profile, its ``drop`` near 0.

Reported per joint: ``scale`` (the minimum over 0.2-5x), ``std_error`` (jackknife over
the fit's held-out time blocks: the spread of the scale read without each block, so
neighbouring samples' shared errors count), ``at_end`` (the minimum at the range's ends,
:data:`END_MARGIN`: not a scale read), ``drop`` (the share of the whole weighted
loss that freeing it removes, ``(L(1) − L(s)) / L(s)``), ``drop_others`` (the part of
that removed on the other joints' rows: a constant off bends the shared parameters, so
their residual falls too), ``flip_scale`` and ``flip_drop``
(the best negative scale and the share of the loss it removes: a sign flipped, when that
explains the record better than any joint's positive scale), ``flip_coupled`` (how much
better that negative scale explains the record than the joint's row cut loose from the
others, its scale near 0 so that the other rows alone set the parameters they share,
``(L(0⁺) − L(s₋)) / L(s₋)``: a flipped effort carries the coupling with its sign turned,
so it beats the cut-loose row many times; a row that merely disagrees with the others
through errors of its own, a friction the model gets wrong, gains from its negative scale
about what it gains from being cut loose), ``rise`` (the share by which
the loss grows with the scale moved 2x either way from its reading,
``min(L(2s), L(s/2)) / L(s) − 1``: how well the coupling pins the joint's scale, whatever
it reads; a wrist whose torque is its friction rises by nothing).
"""

import math

import numpy as np

from arm_dyn_id.identification.estimators import NormalEquations

#: The scales searched, log-spaced (a constant off by more than 5x is the plain scales'
#: against the URDF to catch).
SCALE_RANGE = (0.2, 5.0)
#: Points of the coarse search over :data:`SCALE_RANGE` before a bounded refinement.
GRID = 25
#: The refinement (golden-section search between the best grid point's neighbours) stops
#: with the bracket this narrow in log-scale: 0.1 % of the scale.
REFINE_TOLERANCE = 1e-3
#: A minimum within this factor of the range's ends is a profile running out of the
#: range (a joint the coupling does not pin, or another joint's mistake throws off), not a
#: scale read: ``at_end``.
END_MARGIN = 1.1
#: The scale of a row cut loose from the others (``flip_coupled``): near 0, where the
#: joint's own terms still fit its row (their coefficients scale with 1/s) and the shared
#: ones are set by the other rows.
DECOUPLED = 1e-3


def _at_end(s):
    s = abs(s)
    return not SCALE_RANGE[0] * END_MARGIN < s < SCALE_RANGE[1] / END_MARGIN


def _solve(neq, w, j, s):
    """``(b(s), β(s))``: the normal equations' right side and solution at joint j's scale
    s, on moments ``neq`` with weights ``w``."""
    A = np.einsum('j,jrs->rs', w, neq.A_joint) + (s * s - 1.0) * w[j] * neq.A_joint[j]
    b = w @ neq.b_joint + (s - 1.0) * w[j] * neq.b_joint[j]
    try:
        return b, np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        return b, np.linalg.lstsq(A, b, rcond=None)[0]


def _profile(neq, w, j, s):
    """L(s) of joint j's effort scale s on moments ``neq`` with weights ``w``."""
    b, x = _solve(neq, w, j, s)
    return float(w @ neq.tau_sq - b @ x)


def _evaluate(neq, w, j, s):
    """``(L(s), each joint's weighted residual sum of squares (n,))`` from one solve."""
    b, x = _solve(neq, w, j, s)
    a = np.ones(len(w))
    a[j] = s
    quad = np.einsum('r,jrs,s->j', x, neq.A_joint, x)
    rows = w * (neq.tau_sq - 2.0 * a * (neq.b_joint @ x) + a * a * quad)
    return float(w @ neq.tau_sq - b @ x), rows


def _best_scale(neq, w, j, sign=1.0):
    """The scale minimising :func:`_profile` over :data:`SCALE_RANGE` (times ``sign``)."""
    grid = np.linspace(np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1]), GRID)
    values = [_profile(neq, w, j, sign * np.exp(g)) for g in grid]
    k = int(np.argmin(values))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, GRID - 1)]
    g, value = golden_minimum(lambda g: _profile(neq, w, j, sign * np.exp(g)), lo, hi,
                              REFINE_TOLERANCE)
    return float(sign * np.exp(g if value <= values[k] else grid[k]))


#: At most this many narrowings of :func:`golden_minimum` (0.618^200 of the bracket).
GOLDEN_STEPS = 200


def golden_minimum(f, lo, hi, tolerance):
    """``(x, f(x))`` at the smallest value golden-section search finds of ``f`` on
    ``[lo, hi]``, the bracket narrowed to ``tolerance`` (a minimum inside it when ``f`` has
    one there and falls toward it from both sides; here a grid point's neighbours)."""
    shrink = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = float(lo), float(hi)
    c, d = b - shrink * (b - a), a + shrink * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(GOLDEN_STEPS):     # a tolerance below the floats' spacing never holds
        if b - a <= tolerance:
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - shrink * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + shrink * (b - a)
            fd = f(d)
    return (c, fc) if fc <= fd else (d, fd)


def relative_effort_scales(parts, w, joints, limit=None, decisive=None):
    """Each joint's effort scale against the others' (see the module's text).

    Parameters
    ----------
    parts : sequence of NormalEquations
        Unweighted moments of the fit's time blocks (``A_joint``, ``b_joint``,
        ``tau_sq`` per joint), the whole regressor (rigid body and friction).
    w : array_like, (n,)
        The fit's per-joint weights (1/σ²).
    joints : sequence of str
    limit : float, optional
        The standard error is computed only for joints reading beyond ``limit`` (or
        below its inverse); every joint's when None.
    decisive : float, optional
        ... and for joints whose freed scale removes at least this share of the loss
        (``drop``), whatever they read.

    Returns
    -------
    dict
        joint -> ``{scale, std_error, drop, drop_others, at_end, flip_scale,
        flip_drop, flip_at_end, flip_coupled, rise}`` (``std_error`` None where not computed).
    """
    w = np.asarray(w, dtype=float)
    parts = [p for p in parts if p.count > 0]
    total = NormalEquations.total(parts)
    out = {}
    for j, name in enumerate(joints):
        s = _best_scale(total, w, j)
        at, rows = _evaluate(total, w, j, s)
        plain, rows_plain = _evaluate(total, w, j, 1.0)
        drop = (plain - at) / max(at, 1e-300)
        gain = rows_plain - rows
        others = float((gain.sum() - gain[j]) / max(at, 1e-300))
        se = None
        if len(parts) >= 2 and (limit is None or max(s, 1.0 / s) > limit or
                                (decisive is not None and drop >= decisive)):
            rest = [_best_scale(NormalEquations.total(p for i, p in enumerate(parts) if i != g),
                                w, j) for g in range(len(parts))]
            rest = np.asarray(rest)
            se = float(np.sqrt((len(rest) - 1) / len(rest) * np.sum((rest - rest.mean()) ** 2)))
        # a flipped effort reads a negative scale best: another mistake than a constant
        flip = _best_scale(total, w, j, -1.0)
        negative = _profile(total, w, j, flip)
        flipped = (plain - negative) / max(negative, 1e-300)
        loose = _profile(total, w, j, DECOUPLED)
        # how much a scale 2x off its reading would cost: the profile's curvature
        moved = min(_profile(total, w, j, 2.0 * s), _profile(total, w, j, 0.5 * s))
        out[name] = {'scale': s, 'std_error': se, 'drop': float(max(drop, 0.0)),
                     'drop_others': others,
                     'at_end': _at_end(s), 'flip_scale': flip,
                     'flip_drop': float(max(flipped, 0.0)), 'flip_at_end': _at_end(flip),
                     'flip_coupled': float((loose - negative) / max(negative, 1e-300)),
                     'rise': float(max((moved - at) / max(at, 1e-300), 0.0))}
    return out


__all__ = ['DECOUPLED', 'END_MARGIN', 'GRID', 'SCALE_RANGE', 'relative_effort_scales']
