"""Whether a fitted gravity model is one the data can support, or garbage to refuse.

A least-squares fit always returns numbers. Fed with random or all-zero effort,
with motor currents in mA read as A, or with the wrong torque constants, it
still "fits", and its metrics can even look fine on the training data. Before a
model is saved as good, :func:`judge_fit` compares what it predicts with the
measurements and with the nominal model of the URDF, and returns the first
reason to refuse it, in one sentence:

1. the effort does not move: every joint's measured torque is constant
   (all zero, or a driver that publishes a fixed value);
2. the effort holds no signal: no joint's torque varies by more than a few
   times its own sample-to-sample noise (random effort, or effort that is not
   the joint's current or torque);
3. the identified gravity torques are far larger or smaller than the URDF's
   (by more than :data:`SCALE_LIMIT`): a unit error (mA read as A) or wrong
   torque constants, since URDF masses are rarely off by that much;
4. on held-out data the model does not follow the measured torque on a joint
   that carries gravity: correlation ρ below :data:`MIN_RHO`, or an RMSE far
   above the noise (:data:`RMSE_NOISE_LIMIT` times) and above
   :data:`MAX_RMSE_PERCENT` % of that joint's largest torque.
"""

from dataclasses import dataclass, field

import numpy as np

# Identified / nominal gravity torque ratio beyond which (or below 1 / it) a fit is
# refused: one limit with the model gate's, which judges a saved model the same way.
from arm_dyn_id.model.gate import FIT_WARNINGS, SCALE_LIMIT
from arm_dyn_id.model.robot import carries_gravity
from arm_dyn_id.validation.missing_load import (LOAD_AGREEMENT, SHARED_LIMIT, fit_missing_load,
                                                judged_scales, load_torque, load_warning,
                                                shared_scale)
#: A joint carries signal when its torque's standard deviation exceeds this many noise σ.
SIGNAL_NOISE = 3.0
#: Held-out correlation below which a joint with signal is not predicted.
MIN_RHO = 0.5
#: Held-out RMSE refused above this many noise σ ...
RMSE_NOISE_LIMIT = 10.0
#: ... and above this percentage of the joint's largest torque.
MAX_RMSE_PERCENT = 25.0


@dataclass(frozen=True)
class Plausibility:
    """Verdict of :func:`judge_fit`.

    Attributes
    ----------
    ok : bool
    reason : str or None
        One sentence saying why the fit is refused (None when ``ok``).
    checks : dict
        The numbers behind the verdict (JSON-ready): ``scale`` (identified over
        nominal gravity torque, None without nominal masses), ``signal_to_noise``
        per joint, ``judged_joints``, and from the data gate ``agreement`` (per
        joint scale and correlation of the measured torque against the URDF's).
    cause : str or None
        The most likely cause of a refusal, one of :data:`CAUSES`.
    """

    ok: bool
    reason: str = None
    checks: dict = field(default_factory=dict)
    cause: str = None


def _rho(a, b):
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den > 0 else 0.0


def _finite_rows(a, b, joints=None):
    """``a``, ``b`` (M, n) as float arrays on the rows where both are finite, that row
    mask, and the joint names (default ``joint_1`` ...)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    keep = np.all(np.isfinite(a), axis=1) & np.all(np.isfinite(b), axis=1)
    n = a.shape[1]
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
    return a[keep], b[keep], keep, joints


def judge_fit(measured, predicted, nominal=None, noise=None, joints=None, held_out=True,
              raw=None, held=None):
    """Judge a fitted gravity model against its validation samples.

    Parameters
    ----------
    measured : array_like, (M, n)
        Measured joint torques at the validation samples (N·m; friction
        cancelled, e.g. forward/backward averages).
    predicted : array_like, (M, n)
        The fitted model's gravity torques at the same samples (N·m).
    nominal : array_like, (M, n), optional
        The URDF's nominal gravity torques there (N·m); the scale check is
        skipped without it, or when the URDF carries no mass.
    noise : array_like, (n,), optional
        Torque noise σ per joint of the raw samples (N·m); default from the
        sample-to-sample differences of ``measured``.
    joints : sequence of str, (n,), optional
        Names for the messages (default ``joint_1`` ...).
    held_out : bool
        Whether the samples were left out of the fit; the correlation and RMSE
        checks only judge held-out samples (in-sample ones flatter any fit).
    raw : array_like, (N, n), optional
        Every measured torque of the recording (N·m): the constant-effort and
        signal checks look at the whole recording when given (the held-out
        samples may move one wrist joint only); default ``measured``.
    held : array_like, (n,), optional
        N·m of friction a joint held still may hold in these samples (the pairs cancel
        only the swept joint's; a static hold cancels none): a joint is judged only where
        its torque varies by more than twice it, and its held-out RMSE may exceed the
        noise's limit by that much.

    Returns
    -------
    Plausibility
    """
    y, p, keep, joints = _finite_rows(measured, predicted, joints)
    n = y.shape[1]
    if noise is None:
        d = np.diff(y, axis=0)
        noise = 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0) / np.sqrt(2) \
            if len(d) > 2 else np.zeros(n)
    noise = np.nan_to_num(np.asarray(noise, dtype=float), nan=0.0)
    checks = {'samples': int(y.shape[0])}
    if y.shape[0] < 3:
        return Plausibility(True, None, dict(checks, note='too few samples to judge'))
    r = y if raw is None else np.asarray(raw, dtype=float)
    r = r[::max(1, len(r) // 500_000)]       # spread and range need no more rows than that
    r = r[np.all(np.isfinite(r), axis=1)]
    if np.all(np.ptp(r, axis=0) <= 1e-12 * (1 + np.abs(r).max())):
        return Plausibility(False, 'the measured effort is constant on every joint '
                            f'({float(r.flat[0]):g}): it carries no torque', checks,
                            'constant_effort')
    snr = r.std(axis=0) / np.maximum(noise, 1e-12)
    checks['signal_to_noise'] = {j: float(s) for j, s in zip(joints, snr)}
    if not np.any(snr > SIGNAL_NOISE):
        best = int(np.argmax(snr))
        return Plausibility(False, 'the effort holds no gravity signal: no joint\'s torque '
                            f'varies by more than {SIGNAL_NOISE:g}x its noise (best '
                            f'{joints[best]}: {snr[best]:.2g}x); random or unrelated '
                            'effort?', checks, 'no_signal')
    if nominal is not None:
        g = np.asarray(nominal, dtype=float)[keep]
        amp = np.sqrt((g * g).mean(axis=0))
        carry = carries_gravity(amp)
        if carry.any():
            scale = float(np.sqrt((p[:, carry] ** 2).sum() / (g[:, carry] ** 2).sum()))
            checks['scale'] = scale
            if not SCALE_LIMIT ** -1 <= scale <= SCALE_LIMIT:
                return Plausibility(
                    False, f'the identified gravity torques are {scale:.3g}x those of the '
                    'URDF\'s masses: effort in other units (mA read as A?), wrong '
                    '--torque-constants, or --effort torque/current mixed up', checks,
                    'units')
        else:
            checks['scale'] = None
    local = y.std(axis=0) / np.maximum(noise, 1e-12)
    # a joint the URDF's gravity barely loads (a vertical first axis) has nothing for a
    # gravity model to follow: its held-out rho says nothing about the fit
    loaded = carry if nominal is not None else np.ones(n, dtype=bool)
    held = np.zeros(n) if held is None else np.nan_to_num(np.asarray(held, dtype=float))
    judged = [i for i in range(n) if local[i] > SIGNAL_NOISE and loaded[i] and
              y[:, i].std() > 2.0 * held[i]]
    checks['judged_joints'] = [joints[i] for i in judged]
    if not held_out:
        return Plausibility(True, None, checks)
    for i in judged:
        rho = _rho(y[:, i], p[:, i])
        rmse = float(np.sqrt(np.mean((y[:, i] - p[:, i]) ** 2)))
        peak = float(np.abs(y[:, i]).max())
        percent = 100.0 * rmse / peak if peak > 0 else np.inf
        if rho < MIN_RHO:
            return Plausibility(False, f'on held-out data the model does not follow '
                                f'{joints[i]} (correlation rho = {rho:.2f} < {MIN_RHO})',
                                checks, 'held_out')
        if rmse > RMSE_NOISE_LIMIT * max(noise[i], 1e-12) + held[i] and \
                percent > MAX_RMSE_PERCENT:
            return Plausibility(False, f'on held-out data the RMSE of {joints[i]} is '
                                f'{percent:.0f} % of its largest torque, '
                                f'{rmse / max(noise[i], 1e-12):.0f}x its noise', checks,
                                'held_out')
    return Plausibility(True, None, checks)


# --- the data gate: every fit path (gravity, full, payload) and ``check`` ---------------

#: Causes a refusal names (:attr:`Plausibility.cause`).
CAUSES = ('constant_effort', 'no_signal', 'units', 'torque_constant', 'sign', 'swap',
          'cutoff', 'excitation', 'held_out', 'no_payload', 'frame', 'load', 'angle_convention',
          'implausible', 'saturated')
#: |ρ| between a joint's measured torque and the URDF's above which its scale and
#: sign are judged (below it the URDF does not explain that joint: untested).
AGREE_RHO = 0.6
#: |ρ| above which a joint's scale is judged (a scale from a loose fit says little).
SCALE_RHO = 0.9
#: A joint is loaded when the URDF's torque varies there by more than this share of
#: the most loaded joint's.
LOADED_SHARE = 0.05
#: A cut-off at or above this fraction of the Nyquist frequency sits at the rate limit.
RATE_LIMIT = 0.5
#: Derivatives are noise when the URDF's torque on the filtered samples varies from
#: sample to sample this many times more than the measured torque through the same filter
#: with the cut-off at the rate limit ...
DERIVATIVE_NOISE = 2.0
#: ... or this many times more at any cut-off.
DERIVATIVE_NOISE_ANY = 10.0
#: A joint's measured torque more than this many times the URDF's (or less than 1 / it)
#: is refused: the URDF's masses are rarely off by that much, a unit or a torque constant is.
JOINT_SCALE_LIMIT = 2.0
#: A joint whose |scale| against the URDF's is this many times the other tested joints'
#: (their median), or 1 / it, has its own torque constant off (or the URDF's masses beyond
#: it that far off): simulated right arms (link masses 10 %, centres of mass 1-2 cm off
#: the URDF) reach at most 1.41, a constant 2x 1.42-2.53 (63 of 64 above 1.6), and a load
#: the URDF lacks raises the outer joints gradually (2 kg on a Panda: at most 1.2).
RELATIVE_SCALE_LIMIT = 1.6
#: A parameter is not identified when its standard error exceeds its |value|.
UNIDENTIFIED_SE = 1.0
#: A fit whose gravity torque, at poses drawn over the joints' whole range, is uncertain
#: (1σ, median over the poses) by more than this fraction of the URDF's gravity torque
#: there (RMS) on a joint that carries gravity is refused: the data determines the model
#: only near the poses it visited (one joint swept at one pose of the others, ...).
WORKSPACE_UNCERTAINTY = 0.1
#: A full fit is also refused when that uncertainty is this many times its uncertainty
#: at the poses the data visited (the extrapolation; the residual's size cancels in the
#: ratio) and above :data:`WORKSPACE_FLOOR` of the URDF's gravity. The formal
#: uncertainty shrinks with the residual: joint_3 of the humanoid swinging alone,
#: fitted with the sharp Coulomb sign that matched its simulated friction, read 0.064
#: (passed) while its gravity was 30.6 % off over the range; its extrapolation read
#: 72-119 on the loaded joints, right Fourier records of simulated arms 1.6-4.6 and the
#: real UR10e's 1.0-1.7 (docs/benchmarks.md).
WORKSPACE_EXTRAPOLATION = 20.0
#: ... (an uncertainty below 1 % of the URDF's gravity torque is no model's problem).
WORKSPACE_FLOOR = 0.01
#: m: how far the URDF may put the centre of mass of each link beyond a joint (CAD
#: models leave out cables, grease, fasteners): what bounds the URDF's error on a joint
#: that carries little gravity (:func:`judge_sweep_signs`).
COM_ERROR = 0.01
#: Of a joint's holding friction, the share a forward/backward pair may leave (Coulomb
#: friction up to 20 % stronger one way than the other).
PAIR_FRICTION = 0.2
#: A joint the 5 % rule leaves untested has its sign judged on its own sweeps where the
#: URDF's gravity torque there (RMS) exceeds this many times what the URDF may get wrong.
SIGN_MARGIN = 2.0
#: A full fit's joint the URDF left untested whose URDF torque varies more than
#: SIGN_MARGIN times what its centres of mass can get wrong is refused when its scale
#: with friction and rotor inertia fitted apart stands, 3 standard errors up, below this
#: share of the least a right joint reads, ``1 − b/σ`` (the other half: masses and torque
#: constants a little off). Right simulated records read 0.84-1.2, swapped ones -0.3-0.38.
SCALE_FLOOR = 0.5
#: With the cut-off at the rate limit, a held-out RMSE above this many noise σ ...
CUTOFF_NOISE_LIMIT = 10.0
#: ... and above this percentage of the joint's largest torque is refused.
CUTOFF_RMSE_PERCENT = 5.0


def _signal_check(raw, noise, joints):
    """A refusal when the effort is constant or holds no signal, else None."""
    r = np.asarray(raw, dtype=float)
    r = r[::max(1, len(r) // 500_000)]
    r = r[np.all(np.isfinite(r), axis=1)]
    if len(r) < 3:
        return None
    if np.all(np.ptp(r, axis=0) <= 1e-12 * (1 + np.abs(r).max())):
        return Plausibility(False, 'the measured effort is constant on every joint '
                            f'({float(r.flat[0]):g}): it carries no torque', {},
                            'constant_effort')
    if noise is None:
        d = np.diff(r, axis=0)
        noise = 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0) / np.sqrt(2)
    noise = np.nan_to_num(np.asarray(noise, dtype=float), nan=0.0)
    snr = r.std(axis=0) / np.maximum(noise, 1e-12)
    if not np.any(snr > SIGNAL_NOISE):
        best = int(np.argmax(snr))
        return Plausibility(False, 'the effort holds no signal: no joint\'s torque varies by '
                            f'more than {SIGNAL_NOISE:g}x its noise (best {joints[best]}: '
                            f'{snr[best]:.2g}x); random or unrelated effort?',
                            {'signal_to_noise': {j: float(v) for j, v in zip(joints, snr)}},
                            'no_signal')
    return None


def torque_agreement(measured, nominal, joints=None, floor=None):
    """Per joint scale and correlation of the measured torque against the URDF's.

    The evidence of the data gate: a unit error scales every joint alike (mA read
    as A: x1000), a wrong torque constant one joint, a flipped sign makes ρ
    negative, swapped effort columns make joint i follow the URDF's joint k.

    Parameters
    ----------
    measured : array_like, (M, n)
        Measured joint torques (N·m) at some samples.
    nominal : array_like, (M, n)
        The nominal URDF's torques at the same samples, computed on the same
        prepared q (gravity, or inverse dynamics with the filtered q̇, q̈), N·m.
    joints : sequence of str, (n,), optional
    floor : array_like, (n,), optional
        N·m: a joint whose URDF torque varies (RMS about its mean) by no more than this is
        not loaded (a joint held still: the friction it holds can vary by that much).

    Returns
    -------
    dict
        ``scale`` (n,) least-squares slope of measured on nominal (offset removed),
        ``rho`` (n,) their correlation, ``loaded`` (n,) bool (the URDF's torque
        varies there, above ``floor``), ``tested`` (n,) bool (loaded and |ρ| ≥ :data:`AGREE_RHO`),
        ``cross`` (n, n) ρ of measured joint i against nominal joint k, and
        ``joints``.
    """
    y, g, _, joints = _finite_rows(measured, nominal, joints)
    n = y.shape[1]
    yc, gc = y - y.mean(axis=0), g - g.mean(axis=0)
    sy, sg = np.sqrt((yc * yc).sum(axis=0)), np.sqrt((gc * gc).sum(axis=0))
    cross = (yc.T @ gc) / np.maximum(np.outer(sy, sg), 1e-300)
    rho = np.diag(cross).copy()
    scale = (yc * gc).sum(axis=0) / np.maximum(sg * sg, 1e-300)
    # measured joint i against the URDF's joint k: ~1 for the pair of a swap
    cross_scale = (yc.T @ gc) / np.maximum(sg * sg, 1e-300)[None, :]
    amp = sg / np.sqrt(max(len(y), 1))
    loaded = (amp > LOADED_SHARE * amp.max()) & (amp > 0) if len(y) > 2 else np.zeros(n, bool)
    if floor is not None:
        loaded &= amp > np.nan_to_num(np.asarray(floor, dtype=float), nan=0.0)
    tested = loaded & (np.abs(rho) >= AGREE_RHO) & (sy > 0)
    return {'scale': scale, 'rho': rho, 'loaded': loaded, 'tested': tested, 'cross': cross,
            'cross_scale': cross_scale, 'joints': joints, 'samples': int(len(y))}


#: Two joints whose own scales are off the opposite ways by more than this factor each
#: while each reads the other's URDF torque within it look swapped (:func:`_swapped_by_scale`).
SWAP_SCALE = 1.3


def _swapped_by_shape(ik, ki, own_i, own_k):
    """Do joints i and k look swapped by their shapes? Each measured torque follows the
    other's URDF torque (``ik``, ``ki`` ≥ :data:`AGREE_RHO`: :func:`judge_data` passes
    |ρ|, :func:`light_joint_signs` the signed ρ) better than its own (|ρ| ``own_i``,
    ``own_k``): by 0.2 each, or by 0.4 together (two joints whose URDF torques
    look alike: the Panda's third and fourth, each measured one following its own URDF
    torque 0.2-0.7 when swapped, the other's 0.86-0.93)."""
    if min(ik, ki) < AGREE_RHO:
        return False
    return min(ik, ki) > max(own_i, own_k) + 0.2 or (ik + ki) - (own_i + own_k) > 0.4


def _swapped_by_scale(agreement, i, k, gains=None):
    """Whether joints i and k of :func:`torque_agreement` look swapped by their scales:
    the torques of a shoulder and an elbow follow each other under gravity (their
    correlations cannot tell a swap), but slot i read against the URDF's joint k, and k
    against i, come out near 1 (swapped names; swapped currents: k_i / k_k and its
    inverse, each read with the other's constant) while their own scales are off the
    opposite ways (a UR5's pair was blamed on units, 'scale 6.5')."""
    s, c = agreement['scale'], agreement['cross_scale']
    cross = agreement['cross']
    off_i, off_k = np.log(abs(s[i]) + 1e-300), np.log(abs(s[k]) + 1e-300)
    limit = np.log(SWAP_SCALE)
    if not (abs(off_i) > limit and abs(off_k) > limit and off_i * off_k < 0 and
            c[i, k] > 0 and c[k, i] > 0 and min(cross[i, k], cross[k, i]) >= AGREE_RHO):
        return False
    ratios = [1.0]
    if gains is not None:
        g = np.abs(np.asarray(gains, dtype=float))
        if g[k] > 0 and np.all(np.isfinite(g[[i, k]])):
            ratios.append(float(g[i] / g[k]))
    return any(abs(np.log(c[i, k] / r)) < limit and abs(np.log(c[k, i] * r)) < limit
               for r in ratios)


def units_message(scales, joints, effort=None, gains=None, subject='torque',
                  limit=JOINT_SCALE_LIMIT, reference='the URDF\'s'):
    """Why measured torques are ``scales`` times the URDF's, the most likely cause first.

    Parameters
    ----------
    scales : array_like, (k,)
        |measured / URDF| of the joints judged (k ≥ 1).
    joints : sequence of str, (k,)
    effort : {'current', 'torque'}, optional
        How the effort was read.
    gains : array_like, (k,), optional
        The N·m per A used for those joints (``--effort current``).
    subject : str
        What was compared (``torque``, ``gravity torque``).
    limit : float
        Scales outside [1 / limit, limit] are off.
    reference : str
        What was compared against (``the URDF's``, ``the arm model's``).

    Returns
    -------
    (cause, message) : (str, str)
        ``units`` (every joint off alike, or the effort read in the wrong unit),
        ``load`` (every joint above 1, growing along the chain: a load the reference
        lacks) or ``torque_constant`` (some joints only).
    """
    s = np.abs(np.asarray(scales, dtype=float))
    off = (s > limit) | (s < 1.0 / limit)
    typical = float(np.exp(np.median(np.log(np.maximum(s, 1e-300)))))
    each = ', '.join(f'{j} x{v:.3g}' for j, v in zip(joints, s))
    head = f'scale {typical:.3g} of the measured {subject} against {reference} ({each})'
    if 300 <= typical <= 3000:
        return 'units', f'{head}: currents in mA read as A (or mN·m read as N·m)?'
    if 1 / 3000 <= typical <= 1 / 300:
        return 'units', (f'{head}: the effort 1000x too small: torque constants in N·m/mA '
                         'given as N·m/A, or A read as mA?')
    bad = [j for j, o in zip(joints, off) if o]
    good = [j for j, o in zip(joints, off) if not o]
    like_gains = False
    if gains is not None and len(s) >= 1:
        k = np.abs(np.asarray(gains, dtype=float))
        ratio = s / np.maximum(k, 1e-300)
        like_gains = bool(np.all(np.isfinite(ratio)) and
                          np.all(np.abs(np.log(ratio)) < np.log(2.0)))
    load = (f'{head}: the scale grows along the chain, as the torque of a load at the '
            f'flange that {reference} arm lacks does: a gripper or tool attached? Declare it '
            '(the config\'s payload) or record without it; else the effort\'s units or the '
            'torque constants')
    growing = not like_gains and len(s) >= 2 and np.all(s > 1.0) and \
        s[-1] >= 1.5 * s[0] and np.all(np.diff(np.log(s)) > -np.log(1.15)) and typical < 30
    if growing and (len(s) >= 3 or effort != 'torque'):
        # a unit scales every joint alike; a load's torque grows along the chain, its lever
        # arm over the arm's own shrinking the further out the joint (whatever the effort;
        # two joints alone cannot tell that rise from one joint's scale)
        return 'load', load
    if effort == 'torque' and good and len(good) >= len(bad):
        # at least half the joints agree: not the effort's kind, which would put them all
        # off (motor currents read as N·m: each by its own 1 / k, far from 1)
        return 'torque_constant', (f'{head}: {", ".join(bad)} off while {", ".join(good)} '
                                   f'agree: the scale of {", ".join(bad)}\'s effort (the '
                                   'torque constant or gear ratio the driver applies)')
    if effort == 'torque':
        return 'units', (f'{head}: motor currents read as N·m? (--effort current with '
                         '--torque-constants, or torque_constants in the config)')
    if like_gains and len(s) >= 2 and np.ptp(np.log(k)) > np.log(1.5):
        return 'units', (f'{head}, the torque constants\' pattern: the effort is already '
                         'joint torque (N·m) read as current (--effort torque)')
    # constants too alike to show their pattern: the scale is still about theirs
    already = (' The scale is about the torque constants themselves: is the effort already '
               'joint torque (N·m), read as current (--effort torque)?') if like_gains else ''
    if len(s) == 1 and off.all():
        # one joint alone cannot tell a unit, its own constant or its name from each other
        return 'units', (f'{head}: only {joints[0]} could be judged: its torque constant '
                         '(--torque-constants), the effort\'s units, or its name mapped to '
                         'another joint of the URDF (--joint-map, the driver\'s joint '
                         'names).' + already)
    if off.all() and np.ptp(np.log(np.maximum(s, 1e-300))) < np.log(2.0):
        return 'units', (f'{head}: effort in other units, or every --torque-constants '
                         '(gear ratio?) off by that factor.' + already)
    if good:
        return 'torque_constant', (f'{head}: {", ".join(bad)} off while {", ".join(good)} '
                                   f'agree: wrong torque constant of {", ".join(bad)} '
                                   '(--torque-constants, torque_constants)')
    return 'units', (f'{head}: effort in other units (mA read as A?), wrong '
                     '--torque-constants, or --effort torque/current mixed up')


def _constant_advice(gain, ratio, effort):
    """``(what, why)`` naming one joint's effort scale read ``ratio`` x the others': the
    driver's scale (effort in N·m) or its torque constant, with the constant that would
    bring it in line when ``gain`` (N·m/A) is known."""
    if effort == 'torque':
        return ('the scale the driver applies to its effort',
                '(its torque constant or gear ratio there)')
    fix = ''
    if gain is not None and np.isfinite(gain) and gain > 0:
        fix = f': about {gain / ratio:.4g} N·m/A instead of {gain:.4g} if the others are right'
    return 'its torque constant', f'(--torque-constants{fix}; arm-dyn-id calibrate measures it)'


def odd_scale_message(scales, joints, gains=None, subject='torque',
                      reference='the URDF\'s', limit=RELATIVE_SCALE_LIMIT, effort=None):
    """The message of a joint whose |scale| stands apart from the other tested joints' by
    more than ``limit`` (two joints: from each other), or None.

    A URDF's errors move every joint's scale by tens of percent, a load it lacks raises
    the outer joints gradually; one constant off moves its joint alone (2x stays within
    :data:`JOINT_SCALE_LIMIT` of a URDF that reads it 1.4x: written with exit 0, the
    joint's model 25-53 % off).
    """
    s = np.abs(np.asarray(scales, dtype=float))
    if len(s) < 2 or not np.all(np.isfinite(s)) or np.any(s <= 0):
        return None
    if len(s) == 2:
        ratio = float(s[1] / s[0])
        if max(ratio, 1.0 / ratio) <= limit:
            return None
        which = ('the scale the driver applies to one of their efforts is off (torque '
                 'constant or gear ratio; arm-dyn-id check tells which)' if effort == 'torque'
                 else 'one of their torque constants is off (--torque-constants; arm-dyn-id '
                 'check tells which, arm-dyn-id calibrate measures them)')
        return (f'{joints[0]} reads x{s[0]:.3g} and {joints[1]} x{s[1]:.3g} of {reference} '
                f'{subject}, {max(ratio, 1.0 / ratio):.2g}x apart, where a URDF\'s own errors '
                f'keep a right arm within {limit:g}x: {which}, or a heavy load the URDF lacks '
                'beyond them')
    others = np.array([np.median(np.delete(s, i)) for i in range(len(s))])
    rel = s / others
    worst = int(np.argmax(np.abs(np.log(rel))))
    r = float(rel[worst])
    if max(r, 1.0 / r) <= limit:
        return None
    what, why = _constant_advice(None if gains is None else gains[worst], r, effort)
    what = f'{what} off {why}'
    return (f'{joints[worst]} reads x{s[worst]:.3g} of {reference} {subject}, {r:.2g}x the '
            f'other joints\' (x{others[worst]:.3g}), where a URDF\'s own errors keep a right '
            f'arm within {limit:g}x: {what}, or the URDF\'s masses beyond it that far off')


def sign_message(joints, rhos, subject='torque', reference='the URDF\'s', label='rho'):
    """The message of joints whose torque has the opposite sign of the URDF's (``rhos``:
    what shows it, named ``label``: their correlations, or scales)."""
    if len(joints) == 1:
        return (f'{joints[0]}\'s torque has the opposite sign of {reference} {subject} '
                f'({label} = {rhos[0]:.2f}): flipped sign (current_signs)')
    return (f'{", ".join(joints)}: the torque has the opposite sign of {reference} {subject} '
            f'({label} {", ".join(f"{r:.2f}" for r in rhos)}): flipped signs (current_signs)')


def swap_message(a, b, rho_ab, rho_ba):
    """The message of two joints whose effort columns look swapped."""
    return (f'{a}\'s and {b}\'s torques look swapped: {a}\'s measured torque follows the '
            f'URDF\'s {b} (rho = {rho_ab:.2f}) and {b}\'s follows {a} (rho = {rho_ba:.2f}): '
            'joint order of the effort (joint_map, the driver\'s joint names)')


def cutoff_message(cutoff_hz, rate_hz, ratio=None):
    """The message of a cut-off that lets the derivatives be noise."""
    nyquist = rate_hz / 2.0
    where = ('sits at the rate limit' if cutoff_hz >= RATE_LIMIT * nyquist else
             'is too high for the encoder noise')
    why = '' if ratio is None else (f'; the URDF\'s torque on the filtered samples is '
                                    f'{ratio:.3g}x noisier than the measured torque')
    return (f'the cut-off ({cutoff_hz:.3g} Hz) {where} (Nyquist {nyquist:.3g} Hz at '
            f'{rate_hz:.3g} Hz sampling): derivatives are noise{why} (a lower --cutoff: a '
            'few times the highest frequency of the motion)')


def excitation_message(names, condition=None):
    """The message of parameters the data cannot identify."""
    from arm_dyn_id.model.dynamics import parameter_legend
    shown = ', '.join(list(names)[:6]) + (f' and {len(names) - 6} more' if len(names) > 6
                                          else '') + parameter_legend(list(names)[:6])
    cond = '' if condition is None else f', condition number {condition:.3g}'
    return (f'too little excitation: the data cannot identify {shown} (standard error above '
            f'the value{cond}): a longer recording, larger and faster motion of more joints')


def still_floor(robot, q, limit=JOINT_SCALE_LIMIT):
    """The ``floor`` of :func:`judge_data` for a recording ``q`` (N, n) of ``robot``.

    A joint the recording holds still (moved less than
    :data:`arm_dyn_id.validation.check.STILL_SPAN`) keeps whatever friction F it holds at
    rest (:func:`arm_dyn_id.validation.check.holding_friction`): a bounded F moves a
    least-squares scale by at most F over the RMS variation of the reference torque, so
    its scale stays within ``[1 / limit, limit]`` of the truth only where that variation
    exceeds F / (1 − 1 / limit). 0 for the joints that move (N·m, (n,)).
    """
    from arm_dyn_id.validation.check import held_still, holding_friction
    return np.where(held_still(q), holding_friction(robot) / (1.0 - 1.0 / limit), 0.0)


def com_error_bound(robot):
    """N·m, (n,): what the URDF may get wrong in a joint's gravity torque with every link
    beyond it with its centre of mass :data:`COM_ERROR` off (at most the mass it carries
    × g × that)."""
    return robot.mass_beyond * robot.gravity_magnitude * COM_ERROR


def urdf_error_bound(robot):
    """N·m, (n,): what the URDF may get wrong in a joint's gravity torque on the samples
    of its own forward/backward pairs: :func:`com_error_bound` and the
    :data:`PAIR_FRICTION` share of its holding friction that a pair leaves."""
    from arm_dyn_id.validation.check import holding_friction
    return com_error_bound(robot) + PAIR_FRICTION * holding_friction(robot)


def judge_sweep_signs(measured, nominal, moving, bound, joints, candidates,
                      subject='gravity torque', reference='the URDF\'s'):
    """The sign of joints that carry too little gravity for :func:`judge_data`'s 5 % rule,
    judged on their own sweeps.

    Where a joint sweeps itself, the average of its forward and backward passes holds
    its gravity torque with its friction cancelled, and the URDF's torque there can be
    off by at most ``bound``. Where the URDF's torque (RMS over those samples) exceeds
    :data:`SIGN_MARGIN` × ``bound``, a right arm's measurement points the URDF's way
    (their cosine is positive whatever the error within the bound), and one pointing
    the other way (cosine ≤ −:data:`AGREE_RHO`) has its sign flipped. Joints whose
    URDF torque is within the margin are not judged: a wrist whose centre of mass sits
    a few millimetres off its axis.

    Parameters
    ----------
    measured, nominal : array_like, (M, n)
        Forward/backward averages and the URDF's gravity torque at the same q (N·m).
    moving : array_like of int, (M,)
        The joint each sample's pair sweeps.
    bound : array_like, (n,)
        :func:`urdf_error_bound` (N·m).
    joints : sequence of str
    candidates : iterable of int
        The joints to judge (those :func:`judge_data` left untested).

    Returns
    -------
    Plausibility
        ``checks``: per judged candidate ``urdf_rms``, ``bound``, ``cosine``, ``rho`` (the
        centred correlation: where the URDF's torque varies along the sweep by more than
        :data:`SIGN_MARGIN` × ``bound``, a flip must turn that shape around, which an
        effort offset alone does not), ``judged``; refused with cause ``sign`` naming the
        flipped joints.
    """
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    moving = np.asarray(moving)
    checks, flipped = {}, []
    for j in candidates:
        rows = (moving == j) & np.isfinite(y[:, j]) & np.isfinite(g[:, j])
        if rows.sum() < 10:
            continue
        m, u = y[rows, j], g[rows, j]
        size = float(np.sqrt(np.mean(u * u)))
        cosine = float(m @ u / max(np.linalg.norm(m) * np.linalg.norm(u), 1e-300))
        # the shape too, where the URDF's torque varies along the sweep beyond its error
        # (then a reversed sign turns that variation around as well): a constant offset
        # of the effort (current_offsets) moves the level alone
        shape = _rho(m, u)
        shaped = bool(np.std(u) > SIGN_MARGIN * bound[j])
        judged = bool(size > SIGN_MARGIN * bound[j])
        checks[joints[j]] = {'urdf_rms': size, 'bound': float(bound[j]), 'cosine': cosine,
                             'rho': shape, 'judged': judged}
        if judged and cosine <= -AGREE_RHO and not (shaped and shape > 0):
            flipped.append(j)
    if flipped:
        return Plausibility(False, sign_message([joints[j] for j in flipped],
                                                [checks[joints[j]]['cosine'] for j in flipped],
                                                subject + ' over its own sweeps', reference,
                                                label='cosine'),
                            {'own_sweeps': checks}, 'sign')
    return Plausibility(True, None, {'own_sweeps': checks})


def _without_friction(y, g, v):
    """A joint's measured and URDF torques ``y``, ``g`` (M,) at velocity ``v`` (M,) less
    their least-squares fits on its friction shapes: an offset, the sharp and the smooth
    sign (``tanh(v / 0.01 rad/s)``) and ``v``."""
    F = np.column_stack([np.ones_like(v), np.sign(v), np.tanh(v / 0.01), v])
    both = np.column_stack([y, g])
    rest = both - F @ np.linalg.lstsq(F, both, rcond=None)[0]
    return rest[:, 0], rest[:, 1]


def light_joint_signs(measured, nominal, bound, joints, candidates, velocity=None):
    """The sign and wiring of joints :func:`judge_data` left untested, over a whole rich
    recording.

    A full fit's measured torque holds each joint's friction, which lowers its
    correlation with the URDF's inverse dynamics. Where the URDF's torque varies (σ about
    its mean) by more than what the URDF's centres of mass can get wrong (``bound``,
    :func:`com_error_bound`), a right arm's torque does not follow it the opposite way:
    with σ_u above the bound b and the centre-of-mass error e within it (σ_e ≤ b),
    cov(u, u + e) ≥ σ_u (σ_u − b) > 0. One that does (ρ ≤ −:data:`AGREE_RHO`) has its
    sign flipped. Such a joint and another whose URDF torque varies as much, each
    following the other's URDF torque better than its own (:func:`_swapped_by_shape`),
    are swapped.

    Parameters
    ----------
    measured, nominal : array_like, (M, n)
        Measured torque and the URDF's inverse dynamics at the same samples (N·m).
    bound : array_like, (n,)
        :func:`com_error_bound` (N·m).
    joints : sequence of str, (n,)
    candidates : iterable of str
        The joints to judge.
    velocity : array_like, (M, n), optional
        q̇ at the same samples: a joint's sign is then judged on both torques less what
        its friction shapes explain (:func:`_without_friction`; swaps as without). A
        joint whose torque is mostly friction can follow the URDF's small torque the
        opposite way through its friction alone (a simulated SO-101's gripper, 0.3 N·m of
        friction against a URDF torque of 0.0016 N·m, read ρ = −0.70 wired right), and
        where its friction shapes explain the URDF's torque's variation down to the
        bound there is nothing left to judge.

    Returns
    -------
    Plausibility
        ``checks``: per candidate ``urdf_std``, ``bound``, ``rho``, ``judged``; refused
        with cause ``swap`` naming two swapped joints, or ``sign`` naming the flipped
        ones.
    """
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    ok = np.all(np.isfinite(y), axis=1) & np.all(np.isfinite(g), axis=1)
    v = None
    if velocity is not None:
        v = np.asarray(velocity, dtype=float)
        ok &= np.all(np.isfinite(v), axis=1)
        v = v[ok]
    y, g = y[ok], g[ok]
    bound = np.asarray(bound, dtype=float)
    joints = list(joints)
    candidates = [name for name in candidates if name in joints]
    index = [joints.index(name) for name in candidates]
    checks, flipped, judged = {}, [], []
    if len(y) < 10:
        return Plausibility(True, None, checks)
    for name, j in zip(candidates, index):
        spread, rho = float(np.std(g[:, j])), _rho(y[:, j], g[:, j])
        checks[name] = {'urdf_std': spread, 'bound': float(bound[j]), 'rho': rho,
                        'judged': bool(spread > bound[j])}
        if checks[name]['judged']:
            judged.append(j)
        if v is not None:
            # the same with the joint's friction shapes fitted apart (the sign is judged
            # on it)
            yj, gj = _without_friction(y[:, j], g[:, j], v[:, j])
            apart = float(np.std(gj))
            checks[name].update(urdf_std_without_friction=apart,
                                rho_without_friction=_rho(yj, gj),
                                judged_without_friction=bool(apart > bound[j]))
    # a judged joint and another whose URDF torque varies as much, each following the
    # other's URDF torque, not its own: swapped (judged first: a swap can turn one
    # joint's own correlation negative)
    others = [k for k in range(len(joints)) if k not in index and np.std(g[:, k]) > bound[k]]
    for a, b in [(a, b) for i, a in enumerate(judged) for b in judged[i + 1:] + others]:
        a, b = min(a, b), max(a, b)
        ab, ba = _rho(y[:, a], g[:, b]), _rho(y[:, b], g[:, a])
        if _swapped_by_shape(ab, ba, abs(_rho(y[:, a], g[:, a])), abs(_rho(y[:, b], g[:, b]))):
            return Plausibility(False, swap_message(joints[a], joints[b], ab, ba), checks,
                                'swap')
    for name, j in zip(candidates, index):
        c = checks[name]
        # with q̇ known, on the torques less the joint's friction shapes: a joint whose
        # friction explains the URDF's torque's variation down to the bound is not judged
        judged, rho = ((c['judged'], c['rho']) if v is None else
                       (c['judged_without_friction'], c['rho_without_friction']))
        if judged and rho <= -AGREE_RHO:
            flipped.append((name, rho))
    if flipped:
        # the ρ the sign was judged on
        return Plausibility(False, sign_message([f[0] for f in flipped],
                                                [f[1] for f in flipped]), checks, 'sign')
    return Plausibility(True, None, checks)


def untested_scales(measured, nominal, velocity, acceleration, bound, joints, candidates):
    """The wiring of joints :func:`judge_data` left untested, by their scale with friction
    and rotor inertia fitted apart (:func:`arm_dyn_id.validation.check.nuisance_scales`).

    Friction lowers a joint's correlation with the URDF's torque, but cannot make a right
    joint's torque stop following it once fitted apart: where the URDF's torque varies
    (σ) by more than :data:`SIGN_MARGIN` × what its centres of mass can get wrong (b), a
    right joint reads a scale of at least about ``1 − b/σ``. One whose scale stands, 3
    standard errors up, below :data:`SCALE_FLOOR` of that is another joint's column (or
    flipped). Judge it only where the derivatives are not noise (a URDF torque of noise
    reads a scale near 0 whatever the wiring).

    Parameters
    ----------
    measured, nominal, velocity, acceleration : array_like, (M, n)
        Measured torque, the URDF's inverse dynamics, q̇ and q̈ at the same samples.
    bound : array_like, (n,)
        :func:`com_error_bound` (N·m).
    joints : sequence of str, (n,)
    candidates : iterable of str
        The joints to judge.

    Returns
    -------
    Plausibility
        ``checks``: per judged joint ``scale``, ``std_error``, ``floor``, ``urdf_std``,
        ``below_floor`` (3 standard errors up, below the floor); refused with cause
        ``swap`` (``sign`` for a scale ≤ −:data:`AGREE_RHO`).
    """
    from arm_dyn_id.validation.check import nuisance_scales
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    bound = np.asarray(bound, dtype=float)
    joints = list(joints)
    index = [joints.index(name) for name in candidates if name in joints]
    spread = np.nanstd(g, axis=0)
    strong = [j for j in index if spread[j] > SIGN_MARGIN * bound[j]]
    checks = {}
    if not strong:
        return Plausibility(True, None, checks)
    # the humanoid's joints 3 and 4 swapped: joint 3 read -0.17 ± 0.08 (ρ -0.07), and was
    # written 103 % off; right simulated records read 0.84-1.2
    scale, se = nuisance_scales(y[:, strong], g[:, strong], np.asarray(velocity)[:, strong],
                                np.asarray(acceleration)[:, strong])
    for k, j in enumerate(strong):
        least = SCALE_FLOOR * (1.0 - bound[j] / spread[j])
        checks[joints[j]] = {
            'scale': float(scale[k]) if np.isfinite(scale[k]) else None,
            'std_error': float(se[k]) if np.isfinite(se[k]) else None,
            'floor': float(least), 'urdf_std': float(spread[j]),
            'below_floor': bool(scale[k] + 3.0 * se[k] < least)}
    for k, j in enumerate(strong):
        if checks[joints[j]]['below_floor']:
            times = '' if not bound[j] > 0 else \
                f', {spread[j] / bound[j]:.1f}x what its centres of mass can get wrong'
            # clearly positive and small: a column of another joint reads near 0, an
            # effort scaled too small (its torque constant) reads its scale
            constant = (f', or its torque constant (effort scale) {1 / scale[k]:.2g}x too '
                        'small (--torque-constants)' if scale[k] - 3.0 * se[k] > 0 else '')
            return Plausibility(
                False, f"{joints[j]}'s torque does not follow the URDF's once friction and "
                f'rotor inertia are fitted apart (scale {scale[k]:.2f} ± {se[k]:.2g}, where '
                f"the URDF's torque varies {spread[j]:.3g} N·m{times}, and a right joint "
                "reads about 1): is its column another joint's (--joint-map), or its sign "
                f'flipped (current_signs){constant}? `arm-dyn-id check` tests each joint',
                checks, 'sign' if scale[k] <= -AGREE_RHO else 'swap')
    return Plausibility(True, None, checks)


#: A joint reading high against the joints beyond it is a load's pattern, not its own
#: constant, when the joints before it read within this factor of it (a load off the
#: flange's axis raised a Kinova's joints 2 and 3 to x1.53 and x1.63, its wrists not)
SHARED_RISE = 1.25


def constant_scales(measured, nominal, velocity, acceleration, bound, joints, effort=None,
                    gains=None, limit=RELATIVE_SCALE_LIMIT, beyond=None, load=None):
    """One joint's torque constant off, in a full fit: each joint's scale with friction and
    rotor inertia fitted apart (:func:`arm_dyn_id.validation.check.nuisance_scales`),
    against the joints beyond it and before it in the chain.

    Against the full inverse dynamics a joint's plain scale moves with the friction and
    inertia the URDF gets wrong, so :func:`judge_data` leaves the joints' scales relative
    to one another unjudged there; with those fitted apart, a right joint reads within
    1.25x of the others (simulated arms, 3 seeds each: 0.82-1.24; a real UR10e's Fourier
    runs 0.81-1.21). A load the URDF lacks, though, raises joints unevenly (a real UR10e
    with 2.6 kg: wrist_1 x1.99, elbow x1.39, shoulder_lift x1.15; a Kinova with 1.5 kg
    off the flange's axis: joints 2 and 3 x1.53 and x1.63, its wrists x1.04 and x0.88),
    so only what a load does not do is judged, on the joints whose URDF torque varies
    more than :data:`SIGN_MARGIN` × what their centres of mass can get wrong:

    * a joint reading more than ``limit`` × the median of the joints beyond it and more
      than ``limit`` itself, unless a joint before it reads within :data:`SHARED_RISE`
      of it (a rise shared along the chain), or
    * less than 1 / ``limit`` × the median of the joints before it and less than
      1 / ``limit`` itself (a load lifts the joints it weighs on, so the joints beyond a
      heavily loaded one read low against it, yet near 1: the Kinova's fifth x0.88).

    ``beyond``: bool (n, n), joint i beyond joint k (:attr:`RobotModel.beyond`); default:
    ``joints`` run from the base to the flange. A constant 0.5x on the first such joint
    is a load's pattern and is not judged here (the absolute limits still apply); the
    message names a load as the other cause. Before this, a constant 2x on a loaded
    joint of a full fit was written with exit 0, 51-72 % off (Kinova, xArm, UR10
    shoulders). A constant 2x on the last such joint reads as a load does (a real UR10e's
    wrist_1 with 2.6 kg x1.99, its joints before it x1.15-1.39), so there ``load`` (a
    callable returning :func:`arm_dyn_id.validation.missing_load.fit_missing_load`'s
    dict, or None) decides: the last joint above ``limit`` and ``limit`` × the median of
    the joints before it is refused unless a load explains the scales (the real UR10e's
    wrist_1 constant 2x: x2.22 against x0.91-1.02, the load fitted to it -0.37 kg, was
    written with exit 0). Without ``load`` it is not judged.

    Returns
    -------
    Plausibility
        ``checks``: per judged joint ``scale``, ``std_error``; refused with cause
        ``torque_constant``.
    """
    from arm_dyn_id.validation.check import nuisance_scales
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    bound = np.asarray(bound, dtype=float)
    joints = list(joints)
    spread = np.nanstd(g, axis=0)
    strong = [j for j in range(len(joints)) if spread[j] > SIGN_MARGIN * bound[j]]
    checks = {}
    if len(strong) < 2:
        return Plausibility(True, None, checks)
    scale, se = nuisance_scales(y[:, strong], g[:, strong], np.asarray(velocity)[:, strong],
                                np.asarray(acceleration)[:, strong])
    # a scale judged is positive (a sign or a swap is judged before) and determined
    use = [k for k in range(len(strong))
           if np.isfinite(scale[k]) and scale[k] > 0 and 3.0 * se[k] < 0.2 * scale[k]]
    for k in use:
        checks[joints[strong[k]]] = {'scale': float(scale[k]), 'std_error': float(se[k])}
    n = len(joints)
    if beyond is None:
        beyond = np.arange(n)[None, :] > np.arange(n)[:, None]
    beyond = np.asarray(beyond, dtype=bool)
    off = []
    found = []                  # the load fitted for the last joint, once
    for k in use:
        after = [scale[i] for i in use if beyond[strong[k], strong[i]]]
        before = [scale[i] for i in use if beyond[strong[i], strong[k]]]
        # out of line with the others and off on its own (a load lifts the joints it
        # weighs on, so those beyond a heavy one read low against it, yet near 1)
        high = bool(after) and scale[k] > limit * max(1.0, np.median(after)) and not (
            before and scale[k] <= SHARED_RISE * max(before))
        low = bool(before) and scale[k] < min(1.0, np.median(before)) / limit
        last = load is not None and bool(before) and not after and \
            scale[k] > limit * max(1.0, np.median(before))
        if last:
            # the last joint high: a load's pattern, or its own constant
            if not found:
                fitted = load()
                found.append(fitted)
                checks['last_joint_load'] = None if fitted is None else {
                    key: fitted[key] for key in ('mass', 'mass_std_error', 'scales',
                                                 'explains')}
            # no load could be tried (no payload frame, too few joints it reaches): not
            # judged, as without one
            if found[0] is not None and not found[0]['explains']:
                off.append((abs(np.log(scale[k] / np.median(before))), k, 'last', before))
                continue
        if high or low:
            others = [scale[i] for i in use if i != k]
            off.append((abs(np.log(scale[k] / np.median(others))), k, high,
                        after if high else before))
    if off:
        # a constant 0.5x on the last joint also sets the one before it 2x above it: of
        # the joints out of line, the one farthest from all the others is named
        _, k, high, group = max(off, key=lambda o: (o[0], o[1]))
        j = strong[k]
        others = float(np.median(group))
        r = float(scale[k] / others)
        what, why = _constant_advice(None if gains is None else gains[j], r, effort)
        what = f'{what} {why}'
        where = ('the joints before it' if high == 'last' or not high else
                 'the joints beyond it')
        if high == 'last':
            tried = found[0]
            best = f'{tried["mass"]:.3g} ± {tried["mass_std_error"]:.2g} kg'
            load = ('no load at the flange explains it (the load that fits it best, '
                    f'{best}, leaves the joints apart)' if
                    tried['mass'] > 3.0 * tried['mass_std_error'] else
                    f'no load at the flange explains it (the load that fits it best: {best})')
        else:
            load = ('or a load the URDF lacks that weighs on it far more than on the joints '
                    'beyond it (a heavy tool off the flange\'s axis: add it to the URDF)'
                    if high else 'a load the URDF lacks does not lower a joint\'s own scale')
        return Plausibility(
            False, f"{joints[j]} reads x{scale[k]:.3g} of the URDF's torque once friction and "
            f'rotor inertia are fitted apart, {max(r, 1 / r):.2g}x {"above" if high else "below"}'
            f' {where} (x{others:.3g}), where a right arm stays within {limit:g}x: {what} looks '
            f'off{", " if high is True else "; "}{load}', checks, 'torque_constant')
    return Plausibility(True, None, checks)


#: A joint's effort scale against the other joints' (:func:`arm_dyn_id.identification.
#: effort_scales.relative_effort_scales`) is judged only where freeing it removes at
#: least this share of the fit's weighted residual: a joint whose torque the rigid body's
#: coupling hardly predicts (a wrist's friction) reads a scale that changes nothing.
#: Right simulated records (11 arms) removed at most 0.028 (a Kinova's wrist, at
#: 0.33 ± 0.10, not determined), a real UR10e's Fourier runs 0.044; one constant 2x
#: that was judged removed 0.029-3.8.
EFFORT_SCALE_DROP = 0.02
#: ... and only in a fit this well conditioned (scaled regressor): a motion that leaves
#: the parameters undetermined leaves the coupling that pins a scale undetermined too (a
#: real UR10e's single-joint runs: 930 to 5.6e6, wrist_1's reading shoulder_lift x2.7;
#: its Fourier runs 8-10, simulated Fourier records 37-64).
EFFORT_SCALE_CONDITION = 300.0
#: ... and only where freeing it also removes this share of the loss on the other joints'
#: rows: a constant off bends the parameters the joints share, so the others' residual
#: falls too (one constant 2x judged: 0.007-0.73), where a joint misread through errors
#: of its own improves its own row alone (a right Kinova's fourth joint at 500 Hz with
#: 1e-4 rad encoder noise read x3.85 ± 0.37, removing 4.5 %, the others' -1.8 %).
EFFORT_SCALE_OTHERS = 0.005
#: A joint whose freed scale removes this share of the weighted residual or more (the
#: loss falls 1.5x) is said as the model is written whenever it reads off 1 by
#: :data:`EFFORT_SCALE_OFF` and 3 standard errors, high or low, inside ``limit`` too:
#: right records removed at most 0.044 (above), where one torque constant 15-30 % off on
#: a UR5's shoulder or elbow or a Panda's fourth joint (a user's trial, 2026-11-29:
#: readings 0.80-1.29) removed 3.1-77, and the other joint of a pair that shares the
#: links read the reciprocal with about as much.
EFFORT_SCALE_DECISIVE = 0.5
EFFORT_SCALE_OFF = 0.05


#: A joint's effort reads negative against the other joints' (a sign flipped) when its
#: best negative scale lies within this factor of -1 and lowers the fit's weighted loss by
#: a ``flip_drop`` (``(L(1) - L(s)) / L(s)``: the loss falls ``1 + drop`` times) of at
#: least :data:`FLIP_DROP`, more than any joint's positive scale or any other joint's
#: negative one. Right simulated records (36: humanoid, UR5, Panda at
#: 100 Hz-2 kHz, 0-5e-4 rad) had no negative scale with a drop of even 0.001; one joint flipped
#: (the 9 of 19 that the checks against the URDF had not refused already) read -0.97 to
#: -1.15, drops of 0.43-297.
FLIP_RANGE = 2.0
FLIP_DROP = 0.1
#: ... and explains it this much better than the joint's row cut loose from the others
#: (``flip_coupled``, ``(L(0⁺) - L(s)) / L(s)``): a flipped effort carries the coupling
#: with its sign turned. One joint flipped (humanoid, UR5, Panda, 100 Hz-1 kHz, 0-5e-4
#: rad: the 37 of 38 whose flip dropped the loss by 0.1) read 2.7 to 7e5; a right humanoid at 1 kHz
#: whose friction rose over 0.1-0.4 rad/s and shifted with direction (a Panda's, that the
#: fit's Coulomb + viscous describes poorly) read its light wrist x-1.33, removing 18 %,
#: but only 0.34 better than cut loose: its row disagreed with the others, it carried no
#: sign.
FLIP_COUPLED = 1.0


def flipped_effort(scales, joints, condition=None):
    """The joint whose effort's sign looks flipped against the other joints' efforts
    (:func:`arm_dyn_id.identification.effort_scales.relative_effort_scales`), with no URDF:
    its negative scale explains the record better than anything else the profiles try
    (:data:`FLIP_RANGE`, :data:`FLIP_DROP`) and far better than its row cut loose from
    the others (:data:`FLIP_COUPLED`). It names a flip that no check against the
    URDF can judge: a humanoid's joint_6, whose URDF torque varies 0.0035 N·m against
    0.02 N·m its centres of mass may get wrong, was refused for the held-out fit of
    joint_5, which the flip had thrown off.

    Returns
    -------
    Plausibility
        Refused with cause ``sign``; ``checks['flipped_effort']`` names the joint.
    """
    checks = {}
    table = dict(scales or {})
    if not table or (condition is not None and not condition <= EFFORT_SCALE_CONDITION):
        return Plausibility(True, None, checks)

    def value(d, key):
        """A reading of the profile: 0 when it holds none (no such key), NaN when it is
        not a number."""
        if key not in d:
            return 0.0
        x = d[key]
        return float(x) if isinstance(x, (int, float)) else np.nan

    names = [j for j in joints if isinstance(table.get(j), dict)]
    # a profile that did not come out finite judges nothing (the answer would hang on the
    # joints' order)
    if not names or not all(np.isfinite(value(table[j], k)) for j in names
                            for k in ('drop', 'flip_drop', 'flip_scale')):
        return Plausibility(True, None, checks)

    def flip(j):
        d = table[j]
        s = value(d, 'flip_scale')
        if d.get('flip_at_end', True) or ('flip_coupled' in d and
                                          not value(d, 'flip_coupled') >= FLIP_COUPLED):
            return 0.0
        return value(d, 'flip_drop') if -FLIP_RANGE <= s <= -1.0 / FLIP_RANGE else 0.0
    name = max(names, key=flip)
    best = flip(name)
    rivals = [value(table[j], 'drop') for j in names] + \
        [value(table[j], 'flip_drop') for j in names if j != name]
    if not (best >= FLIP_DROP and best > max(rivals)):
        return Plausibility(True, None, checks)
    d = table[name]
    checks['flipped_effort'] = {'joint': name, 'scale': float(d['flip_scale']),
                                'drop': best}
    return Plausibility(
        False, f"{name}'s effort reads x{d['flip_scale']:.3g} of what the other joints' "
        "efforts make of the arm (the rigid body's coupling between joints, fitted with no "
        f"URDF): with its sign flipped the fit's residual falls {1.0 + best:.3g}x, more than "
        "any joint's scale explains: flipped sign (current_signs)", checks, 'sign')


def effort_scales(scales, joints, effort=None, gains=None, limit=RELATIVE_SCALE_LIMIT,
                  condition=None, flipped=None, union=None):
    """One joint's torque constant off, read from the fit itself: each joint's effort
    scale against the other joints' (:func:`arm_dyn_id.identification.effort_scales.
    relative_effort_scales`, in the fit's metadata), pinned by the rigid body's coupling
    between joints, with no URDF: a load the URDF lacks is fitted, not read as a scale
    (a real UR10e with 2.6 kg: 0.88-1.13).

    A joint is refused when its scale lies above ``limit`` by 3 standard errors (jackknife
    over the held-out time blocks), not at the searched range's ends (``at_end``), and
    freeing it removes :data:`EFFORT_SCALE_DROP` of the weighted residual, some of it
    (:data:`EFFORT_SCALE_OTHERS`) on the other joints' rows, and its profile is pinned:
    the loss rises by :data:`EFFORT_SCALE_DROP` with the scale 2x off its reading (``rise``;
    one constant 2x read 0.07-244 on simulated arms; a right Kinova at 1 kHz whose wrist
    friction the model described poorly read its last joint x2.83 ± 0.18, removing 5 %,
    yet with a rise of 0.011: the residual's own pattern, steady from block to block, not
    a scale the coupling holds; :func:`unchecked_scales` names such a joint). One that reads above
    ``limit`` and 3 standard errors above 1, but whose 3 standard errors reach ``limit``,
    is not refused: it is recorded in ``checks['effort_scale_suspects']`` for
    :func:`effort_scale_warning` (a real UR10e's wrist_2 with its constant 2x, x2.00 ±
    0.27, and a right geared humanoid's joint_5, x1.70 ± 0.24). Not below its inverse:
    errors in a joint's own prediction shrink its scale toward 0, as in any regression,
    and right simulated joints read down to 0.3 with small standard errors. Of such
    joints the one whose scale removes the most is named, and every joint whose scale
    removes at least half as much beside it: two joints that carry the same links (a
    double pendulum, a UR's shoulder and elbow) read one's 2x as the other's 0.5x about
    equally well.

    Parameters
    ----------
    scales : dict
        joint -> the keys of :func:`arm_dyn_id.identification.effort_scales.
        relative_effort_scales`; None: nothing judged.
    joints : sequence of str
    effort, gains, limit
        As :func:`constant_scales`.
    condition : float, optional
        The fit's condition number: above :data:`EFFORT_SCALE_CONDITION` nothing is
        judged (a motion that leaves the parameters undetermined).
    flipped : Plausibility, optional
        :func:`flipped_effort`'s verdict on the same scales, when the caller holds it.
    union : dict, optional
        The same profiles with every friction term ``friction='auto'`` tried (the fit's
        ``effort_scales_union``): a joint is refused only where this reading too is off;
        one off with the friction chosen alone is warned of. A right humanoid whose
        friction rose over 0.05-0.4 rad/s, shifted with direction, read its joint_5 x4.26
        ± 0.34 (removing 20 %) with the friction chosen and x1.3 with the union;
        one constant 2x reads about 2 in both.

    Returns
    -------
    Plausibility
        ``checks``: the scales; refused with cause ``torque_constant``.
    """
    checks = {'effort_scales': dict(scales or {}), 'effort_scales_judged': False}
    if condition is not None and not condition <= EFFORT_SCALE_CONDITION:
        return Plausibility(True, None, checks)
    checks['effort_scales_judged'] = scales is not None

    def inside(d):
        s = d.get('scale')
        return s is not None and np.isfinite(s) and not d.get('at_end', True)

    def reading(d):
        """``(s, 3 standard errors below s in log)``, or None: not judged."""
        s, se = d.get('scale'), d.get('std_error')
        if not (inside(d) and se is not None and np.isfinite(se) and
                (d.get('drop') or 0.0) >= EFFORT_SCALE_DROP and
                (d.get('drop_others') or 0.0) >= EFFORT_SCALE_OTHERS and
                # pinned: a profile that barely rises with the scale 2x off its reading
                # reads nothing (unchecked_scales names the joint)
                d.get('rise', EFFORT_SCALE_DROP) >= EFFORT_SCALE_DROP):
            return None
        return s, np.log(s) - 3.0 * se / s

    def off(d):
        # high only: a prediction with errors of its own (derivatives with encoder noise,
        # friction the model gets wrong) shrinks the scale toward 0, so a right joint
        # reads low (a UR5's shoulder_pan at 100 Hz with 5e-4 rad encoder noise, x0.32 ±
        # 0.04); one read high through such errors improves its own row alone
        read = reading(d)
        return read is not None and read[1] > np.log(limit)

    def suspect(d):
        read = reading(d)
        return read is not None and read[0] > limit and read[1] > 0.0

    table = checks['effort_scales']
    union = union if isinstance(union, dict) else {}
    if union:
        checks['effort_scales_union'] = dict(union)

    def confirmed(j):
        # off with the friction chosen, and with the union's where it was read
        return off(table[j]) and (not isinstance(union.get(j), dict) or off(union[j]))

    def decisive(d):
        # off either way, where freeing it explains much of the record: no right record
        # comes near (EFFORT_SCALE_DECISIVE)
        read = reading(d)
        return (read is not None and (d.get('drop') or 0.0) >= EFFORT_SCALE_DECISIVE and
                abs(np.log(read[0])) >= np.log1p(EFFORT_SCALE_OFF) and
                abs(np.log(read[0])) > 3.0 * (d['std_error'] or 0.0) / read[0])

    found = [j for j in joints if j in table and confirmed(j)]
    if not found:
        # warned of: high but not beyond the limit, or beyond it with the friction chosen
        # only (a friction it describes poorly, a rotor inertia it leaves out)
        suspects = [j for j in joints if j in table and (suspect(table[j]) or off(table[j]))]
        if suspects:
            checks['effort_scale_suspects'] = suspects
        strong = sorted((j for j in joints if j in table and j not in suspects and
                         decisive(table[j])), key=lambda j: -table[j]['drop'])
        if strong:
            checks['effort_scale_decisive'] = strong
        return Plausibility(True, None, checks)
    # a sign flipped throws the others' scales off too: left to flipped_effort, which
    # names it (a weaker negative reading leaves the constant's refusal standing)
    if flipped is None:
        flipped = flipped_effort(table, joints, condition)
    if not flipped.ok:
        return Plausibility(True, None, checks)
    name = max(found, key=lambda j: table[j]['drop'])
    d = table[name]
    s = d['scale']
    i = list(joints).index(name)
    what, why = _constant_advice(None if gains is None else gains[i], s, effort)
    alike = [j for j in joints if j != name and j in table and inside(table[j]) and
             table[j].get('drop', 0.0) >= 0.5 * d['drop']]
    also = ''.join(f"; or {j}'s, read x{table[j]['scale']:.3g}" for j in alike)
    if alike:
        also += (', which the data tell apart poorly: these joints carry the same links, '
                 "and one's scale high reads as the other's low")
    return Plausibility(
        False, f"{name}'s effort reads x{s:.3g} ± {d['std_error']:.2g} of what the other "
        f"joints' efforts make of the arm (the rigid body's coupling between joints, fitted "
        f"with no URDF; freeing this one scale removes {100 * d['drop']:.0f} % of the fit's "
        f'residual), where a right arm reads within {limit:g}x: {what} looks off {why}'
        f'{also}. A load the URDF lacks does not move this scale: the fit identifies it',
        checks, 'torque_constant')


#: A gravity fit from sweeps (:func:`arm_dyn_id.identification.gravity.
#: pair_effort_scales`) judges a joint's effort scale where freeing it removes this share
#: of the weighted residual: right sweeps of three arms at 1-3 poses a joint, with friction
#: the same both ways, stronger one way or held, removed at most 0.001, and a review's
#: right two-joint arm with 2-3 % torque noise 0.0022-0.0049 (its jackknife optimistic
#: over 6 pairs); one constant 0.8x or 1.2x removed 0.007-2.4 (docs/benchmarks.md, "One
#: torque constant off on a gravity fit from sweeps").
PAIR_SCALE_DROP = 0.006


def pair_scales(scales, joints, effort=None, gains=None, limit=RELATIVE_SCALE_LIMIT):
    """A gravity fit's effort scales, read from its sweeps (``scales``: :func:`arm_dyn_id.
    identification.gravity.pair_effort_scales`), judged: a joint whose freed scale
    removes :data:`PAIR_SCALE_DROP` of the residual, pinned by the coupling (``rise``
    :data:`EFFORT_SCALE_DROP`, not at the searched range's end), off 1 by
    :data:`EFFORT_SCALE_OFF` and 3 standard errors, is said as the model is written
    (``checks['pair_scale_warning']``); beyond ``limit`` by 3 standard errors it is
    refused (cause ``torque_constant``). Both ways: the swept joint's averaged torque and
    the gravity regressor carry no error that would shrink a scale (right sweeps read
    0.98-1.02). The joint named is the one whose scale removes the most, with every joint
    whose scale removes half as much: joints that carry the same links read one's 2x as
    the other's 0.5x. A base tilted 4° that the tilt reading leaves unsaid (2 poses a
    joint) was warned of 3 times in 18 this way, so the warning names the tilt too.

    Returns
    -------
    Plausibility
        ``checks['pair_scales']``: the readings.
    """
    checks = {'pair_scales': dict(scales or {})}
    table = checks['pair_scales']

    def reading(d):
        """``(s, |log s| less 3 standard errors)`` of a judged joint, else None."""
        s, se = d.get('scale'), d.get('std_error')
        if not (isinstance(s, (int, float)) and np.isfinite(s) and s > 0 and
                se is not None and np.isfinite(se) and not d.get('at_end', True) and
                (d.get('drop') or 0.0) >= PAIR_SCALE_DROP and
                (d.get('rise') or 0.0) >= EFFORT_SCALE_DROP):
            return None
        return s, abs(np.log(s)) - 3.0 * se / s

    off = {j: reading(table[j]) for j in joints if isinstance(table.get(j), dict)}
    off = {j: r for j, r in off.items()
           if r is not None and abs(np.log(r[0])) >= np.log1p(EFFORT_SCALE_OFF) and r[1] > 0}
    if not off:
        return Plausibility(True, None, checks)
    name = max(off, key=lambda j: table[j]['drop'])
    alike = [j for j in off if j != name and table[j]['drop'] >= 0.5 * table[name]['drop']]

    def reads(j):
        d = table[j]
        return f"{j}'s reads x{d['scale']:.3g} ± {d['std_error']:.2g}"
    also = ''.join(f'; or {reads(j)}' for j in alike)
    if alike:
        also += (' (these joints carry the same links: one\'s scale high reads as the '
                 "other's low)")
    share = f"freeing it removes {100 * table[name]['drop']:.0f} % of the fit's residual"
    if off[name][1] > np.log(limit):
        what, why = _constant_advice(None if gains is None else gains[list(joints).index(name)],
                                     table[name]['scale'], effort)
        return Plausibility(
            False, f"on these sweeps {reads(name)} of what the other joints' efforts make of "
            f"the arm (the gravity torque each joint shares with those before it, fitted "
            f"with no URDF; {share}){also}, where a right arm reads within {limit:g}x: "
            f'{what} looks off {why}', checks, 'torque_constant')
    checks['pair_scale_warning'] = (
        f"the joints' efforts disagree on the arm: on these sweeps {reads(name)} of what "
        f"the other joints' efforts make of it (the gravity torque each joint shares with "
        f"those before it, fitted with no URDF; {share}, where right sweeps remove under "
        f'{100 * PAIR_SCALE_DROP:g} %){also}. A torque constant off by that factor there '
        "leaves the model wrong on that joint and the links it shares: check the "
        'constants (arm-dyn-id check compares each joint with the URDF, arm-dyn-id '
        'calibrate measures them with a known load). A base that is not level reads this '
        "way too: if the arm's mount is tilted, give its gravity (--gravity-vector, "
        'config key gravity_vector)')
    return Plausibility(True, None, checks)


def effort_scale_warning(checks, limit=RELATIVE_SCALE_LIMIT):
    """The warning of a fit written while a joint's effort reads high against the other
    joints' (``checks['effort_scale_suspects']`` of :func:`effort_scales`), or off either
    way with a freed scale that explains much of the record
    (``checks['effort_scale_decisive']``), or a gravity fit's from its sweeps
    (``checks['pair_scale_warning']`` of :func:`pair_scales`), else None."""
    table = (checks or {}).get('effort_scales') or {}
    union = (checks or {}).get('effort_scales_union') or {}

    def also(j):
        d = union.get(j)
        if not isinstance(d, dict) or not isinstance(d.get('scale'), (int, float)):
            return ''
        return f"; x{d['scale']:.3g} with every friction term fitted"

    def reads(j):
        return (f"{j}'s reads x{table[j]['scale']:.3g} ± {table[j]['std_error']:.2g} "
                f"(freeing it removes {100 * table[j]['drop']:.0f} % of the fit's residual"
                f"{also(j)})")
    said = []
    parts = [reads(j) for j in (checks or {}).get('effort_scale_suspects') or ()
             if j in table]
    if parts:
        both = ' both with the friction chosen and with every friction term fitted' \
            if union else ''
        said.append(
            f"a joint's effort reads high against what the other joints' efforts make of "
            f"the arm (the rigid body's coupling, fitted with no URDF): {'; '.join(parts)}. "
            f'Not 1, yet not beyond the {limit:g}x a right arm may read by 3 standard '
            f'errors{both}, so the '
            "model is written: if that joint's torque constant is off, the model is wrong on "
            'it and on the links it shares (arm-dyn-id calibrate measures the constants); a '
            "geared joint's rotor inertia the fit leaves out (--armature yes, config key "
            'armature) or a friction the chosen model describes poorly reads this way too')
    strong = [reads(j) for j in (checks or {}).get('effort_scale_decisive') or ()
              if j in table]
    if strong:
        said.append(
            f"the joints' efforts disagree on the arm (the rigid body's coupling, fitted "
            f"with no URDF): {'; '.join(strong)}, where no right arm's freed scale removes "
            'even 5 % of it. '
            "A torque constant off by that factor there (or, for joints that carry the same "
            "links, one's high read as the other's low) leaves the model wrong on that "
            'joint and the links it shares: check the constants (arm-dyn-id check compares '
            'each joint with the URDF, arm-dyn-id calibrate measures them with a known '
            'load)')
    if (checks or {}).get('pair_scale_warning'):
        said.append(checks['pair_scale_warning'])    # a gravity fit's, from its sweeps
    return '; and '.join(said) or None


def unchecked_scales(checks, joints):
    """The joints whose effort scale (torque constant) the full fit's gate could not check
    (``checks`` of :func:`judge_full`): not judged against the URDF (absent from
    ``constant_scales``: its torque varies too little against what its centres of mass
    can get wrong, or its scale is not determined) and not pinned by the coupling between
    joints (its effort-scale profile not judged, at the searched range's end, or rising
    by less than :data:`EFFORT_SCALE_DROP` with the scale 2x off its reading); every
    joint when the cut-off sat at the rate limit (no scale judged). A constant off by 2x
    there is written like a right one: a real UR10e's wrist_3, whose profile runs to the
    range's end whether its constant is right or doubled. The joints not named are not
    all checked both ways: the profile judges high readings only, and the URDF-based
    checks compare a joint with those before and beyond it (offline.md)."""
    checks = checks or {}
    tested = checks.get('constant_scales') or {}
    profile = (checks.get('effort_scales') or {}) if checks.get('effort_scales_judged') \
        else {}

    def pinned(d):
        return (isinstance(d, dict) and not d.get('at_end', True) and
                (d.get('rise') or 0.0) >= EFFORT_SCALE_DROP)
    return [j for j in joints if j not in tested and not pinned(profile.get(j))]


def written_warnings(checks):
    """What a fit the gate let through must say as it is written: ``{key: text}`` for the
    model's ``fit`` section (``missing_load``: a load the URDF lacks explains the scales;
    ``effort_scale_warning``: a joint's effort reads high against the others';
    ``gravity_tilt_warning``: the torques follow gravity tilted from the URDF's;
    ``narrow_motion_warning``: a joint barely moved; ``pair_offset_warning``: a gravity
    fit from sweeps moves with each swept joint's constant in its pair averages free;
    ``effort_lag_warning``: the effort lags the angles)."""
    found = {'missing_load': load_warning(checks),
             'effort_scale_warning': effort_scale_warning(checks),
             # a base that is not level (identification.tilt: gravity_tilt, sweep_tilt)
             'gravity_tilt_warning': (checks or {}).get('gravity_tilt_warning'),
             # a joint barely moved (identification.pipeline.narrow_motion_message)
             'narrow_motion_warning': (checks or {}).get('narrow_motion_warning'),
             # sweeps whose model moves with the pair offsets free
             # (identification.gravity.pair_offset_warning)
             'pair_offset_warning': (checks or {}).get('pair_offset_warning'),
             # the effort lags the angles (validation.timing)
             'effort_lag_warning': (checks or {}).get('effort_lag_warning')}
    assert tuple(found) == FIT_WARNINGS, 'model.gate.FIT_WARNINGS lists these keys'
    return {key: text for key, text in found.items() if text}


def fit_notes(checks, joints=None):
    """What a fit the gate let through adds to its model's ``fit`` section: its warnings
    (:func:`written_warnings`, keys :data:`~arm_dyn_id.model.gate.FIT_WARNINGS`) and, for
    a full fit (``joints`` given), ``unchecked_scales`` (:func:`unchecked_scales`); for a
    gravity fit from sweeps, ``unchecked_sweeps``: {joint: poses} of the loaded joints
    swept at fewer than two poses of the others (the gate's ``few_poses``), whose pair
    constant and effort scale the sweeps do not read."""
    notes = written_warnings(checks)
    if joints is not None:
        notes['unchecked_scales'] = unchecked_scales(checks, joints)
    if 'few_poses' in (checks or {}):
        # a gravity fit from sweeps: its loaded joints swept at fewer than two poses
        notes['unchecked_sweeps'] = dict(checks['few_poses'])
    return notes


def unchecked_note(notes, checks, effort='current'):
    """The sentence naming what a fit the gate let through could not check (``notes`` of
    :func:`fit_notes`): a full fit's ``unchecked_scales``, a gravity fit's
    ``unchecked_sweeps``; None when there is none. ``effort``: 'current' (the effort was
    converted by torque constants) or 'torque'. ``fit`` says it as it writes the model,
    the identifier node in its fit's reply and log."""
    current = effort == 'current'
    few = (notes or {}).get('unchecked_sweeps')
    if few:
        swept = ', '.join(f'{joint} ({"not swept" if poses == 0 else "one pose"})'
                          for joint, poses in few.items())
        return (f'not checked by these sweeps: {swept} (swept at fewer than two poses of '
                f'the other joints): friction stronger one way or an effort offset there, '
                f'and {"a torque constant" if current else "an effort scale"} off against '
                "the other joints', would be written like a right model; sweep each joint "
                'at two poses or more (arm-dyn-id design) to have them read')
    unchecked = (notes or {}).get('unchecked_scales')
    if unchecked:
        why = ('the cut-off at the rate limit: no scale was judged' if
               ((checks or {}).get('cutoff') or {}).get('at_rate_limit') else
               "neither the URDF's torque nor the coupling between joints tells it")
        return (f'not checked by this recording: the '
                f'{"torque constant" if current else "effort scale"} of '
                f'{", ".join(unchecked)} ({why}; one 2x off there would be written like a '
                'right one: arm-dyn-id calibrate measures it)')
    return None


def _scales_in_line(measured, nominal, velocity, acceleration, joints, tested, checks):
    """Whether every tested joint's scale, with friction and rotor inertia fitted apart
    (:func:`arm_dyn_id.validation.check.nuisance_scales`), is determined and within
    :data:`RELATIVE_SCALE_LIMIT` of 1; stores them in ``checks['friction_free_scales']``.

    A full fit's plain scale against the inverse dynamics takes in the friction that
    follows the URDF's torque: a right Z1's third joint read x4.45 (ρ 0.91) and was
    refused as a torque constant, where its friction-free scale is 1.18 ± 0.03. A
    constant 2x reads about 2, a unit error further: neither is in line.
    """
    from arm_dyn_id.validation.check import nuisance_scales
    index = [i for i in range(len(joints)) if tested[i]]
    if not index:
        return False
    scale, se = nuisance_scales(np.asarray(measured)[:, index], np.asarray(nominal)[:, index],
                                np.asarray(velocity)[:, index],
                                np.asarray(acceleration)[:, index])
    checks['friction_free_scales'] = {
        joints[i]: {'scale': float(s) if np.isfinite(s) else None,
                    'std_error': float(e) if np.isfinite(e) else None}
        for i, s, e in zip(index, scale, se)}
    return bool(np.all(np.isfinite(scale)) and np.all(3.0 * se < 0.2 * np.abs(scale)) and
                np.all(scale <= RELATIVE_SCALE_LIMIT) and
                np.all(scale >= 1.0 / RELATIVE_SCALE_LIMIT))


def judge_workspace(sigma, nominal, joints, moved=None, weak=(), advice='',
                    extrapolation=None, scatter=None):
    """Refuse a model that its data determines only near the poses it visited.

    Parameters
    ----------
    sigma : array_like, (n,)
        Per joint, the 1σ uncertainty of the model's gravity torque at poses drawn over
        the joints' range (median over the poses), N·m.
    nominal : array_like, (n,)
        The URDF's gravity torque over the same poses (RMS), N·m; the joints with less
        than 5 % of the largest carry no gravity and are not judged.
    joints : sequence of str
    moved : dict, optional
        joint -> range the data moved it over (rad), the joints it moves, for the message.
    weak : sequence of str
        The base parameters behind most of the uncertainty.
    advice : str
        A motion that would determine the first of them.
    extrapolation : array_like, (n,), optional
        Per joint, ``sigma`` over its uncertainty at the poses the data visited (a full
        fit's); judged against :data:`WORKSPACE_EXTRAPOLATION`.
    scatter : str, optional
        Said instead of a motion when the data already moves every joint widely: the
        torques' scatter about the model over the samples it has (a gravity fit's).

    Returns
    -------
    Plausibility
        cause ``'excitation'`` when some joint's ratio exceeds
        :data:`WORKSPACE_UNCERTAINTY`, or its extrapolation
        :data:`WORKSPACE_EXTRAPOLATION` with a ratio above :data:`WORKSPACE_FLOOR`;
        ``checks['workspace']`` holds every ratio.
    """
    sigma = np.asarray(sigma, dtype=float)
    nominal = np.asarray(nominal, dtype=float)
    carry = carries_gravity(nominal)
    ratio = np.where(carry, sigma / np.maximum(nominal, 1e-300), np.nan)
    far = np.full(len(sigma), np.nan) if extrapolation is None else \
        np.asarray(extrapolation, dtype=float)
    checks = {'workspace': {j: {'uncertainty_nm': float(s), 'urdf_gravity_nm': float(g),
                                'ratio': None if not np.isfinite(r) else float(r),
                                'extrapolation': None if not np.isfinite(e) else float(e)}
                            for j, s, g, r, e in zip(joints, sigma, nominal, ratio, far)}}
    bad = [i for i in range(len(sigma)) if carry[i] and (
        not ratio[i] <= WORKSPACE_UNCERTAINTY or
        (far[i] > WORKSPACE_EXTRAPOLATION and ratio[i] > WORKSPACE_FLOOR))]
    if not bad:
        return Plausibility(True, None, checks)
    worst = sorted(bad, key=lambda i: -np.nan_to_num(ratio[i], nan=np.inf))
    shown = ', '.join(f'{joints[i]} ±{sigma[i]:.3g} N·m ({ratio[i]:.3g}x its URDF gravity '
                      'torque' + (f', {far[i]:.3g}x its uncertainty at the poses visited'
                                  if far[i] > WORKSPACE_EXTRAPOLATION else '') + ')'
                      for i in worst[:3])
    head = ('the data determines the model only near the poses it visited' if not scatter
            else 'the torques scatter too much about the model for the samples the data has')
    text = f'{head}: over the joints\' range its gravity torque is uncertain by {shown}'
    if moved is not None:
        went = ', '.join(f'{j} over {np.degrees(r):.0f}°' for j, r in moved.items())
        text += f'; the data moves {went or "no joint by more than a few degrees"}'
    if weak:
        text += f'; not determined: {", ".join(list(weak)[:4])}'
        text += f' ({scatter or advice})' if scatter or advice else ''
    text += ('. Sweep every joint in several poses of the others (the excitation node, '
             'arm-dyn-id design), or a Fourier excitation')
    return Plausibility(False, text, checks, 'excitation')


def unidentified(names, values, std_errors):
    """Names of the parameters whose standard error exceeds :data:`UNIDENTIFIED_SE` x |value|.

    Parameters
    ----------
    names : sequence of str, (p,)
    values, std_errors : array_like, (p,)

    Returns
    -------
    list of str
    """
    v = np.abs(np.asarray(values, dtype=float))
    e = np.asarray(std_errors, dtype=float)
    return [str(n) for n, a, b in zip(names, v, e)
            if not np.isfinite(b) or not np.isfinite(a) or b > UNIDENTIFIED_SE * a]


def derivative_noise(robot, prepared, rows=1500, gain=None):
    """How much noisier the URDF's torque on the filtered samples is than the measured one.

    The prepared q̇, q̈ are derivatives of the filtered q: with a cut-off near the
    rate limit they carry the encoder noise amplified by (2π f)², and the
    inverse dynamics of the nominal URDF at them varies from sample to sample far
    more than the measured torque through the same filter.

    Parameters
    ----------
    robot : RobotModel
        The nominal URDF.
    prepared : Prepared
        The samples as the fit's filter prepared them (``q``, ``dq``, ``ddq``, ``tau``).
    rows : int
        Contiguous samples (the middle of the record) to look at.
    gain : array_like, (n,), optional
        The measured torque's scale against the URDF's per joint (NaN: the plain
        least-squares slope over those samples, the default everywhere).

    Returns
    -------
    ndarray, (n,)
        σ of the sample-to-sample change of the URDF's torque over that of the
        measured filtered torque, per joint (NaN when it cannot be told).
    """
    m = len(prepared.t)
    n = prepared.q.shape[1]
    if m < 8 or prepared.tau is None:
        return np.full(n, np.nan)
    a = max(0, m // 2 - rows // 2)
    sl = slice(a, min(m, a + rows))
    nominal = robot.inverse_dynamics(prepared.q[sl], prepared.dq[sl], prepared.ddq[sl])

    def spread(x):
        d = np.diff(x, axis=0)
        return 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0)

    sn, sm = spread(nominal), spread(prepared.tau[sl])
    # the measured torque in the URDF's scale (a unit error is judged before this)
    yc, gc = prepared.tau[sl] - prepared.tau[sl].mean(0), nominal - nominal.mean(0)
    slope = np.abs((yc * gc).sum(0)) / np.maximum((gc * gc).sum(0), 1e-300)
    if gain is not None:
        given = np.abs(np.asarray(gain, dtype=float))
        slope = np.where(np.isfinite(given), given, slope)
    sm = sm / np.where(slope > 0, slope, 1.0)
    return np.where(sm > 0, sn / np.maximum(sm, 1e-300), np.nan)


def _off_scale(s, tested, joints, effort, gains, subject, limit, reference, checks,
               relative=RELATIVE_SCALE_LIMIT):
    """The refusal of the ``tested`` joints (indices) when a |scale| ``s`` of theirs lies
    outside [1 / limit, limit] (:func:`units_message` names the cause), or (``relative``)
    when one stands apart from the others (:func:`odd_scale_message`), else a pass."""
    if not len(tested):
        return Plausibility(True, None, checks)
    if not np.any((s > limit) | (s < 1.0 / limit)):
        odd = None if relative is None else odd_scale_message(
            s, [joints[i] for i in tested],
            None if gains is None else np.asarray(gains, dtype=float)[tested], subject,
            reference, relative, effort)
        if odd is None:
            return Plausibility(True, None, checks)
        return Plausibility(False, odd, checks, 'torque_constant')
    cause, text = units_message(
        s, [joints[i] for i in tested], effort,
        None if gains is None else np.asarray(gains, dtype=float)[tested], subject, limit,
        reference)
    return Plausibility(False, text, checks, cause)


def level_scales(measured, expected, floor=None):
    """Median of measured / expected per joint over the samples where the expected torque
    stands above 3x ``floor`` (the friction a joint may hold, N·m; default 0) and above
    :data:`LOADED_SHARE` of the most loaded joint's RMS; NaN where fewer than 10 samples
    do (or where either is not finite). ndarray (n,)."""
    y = np.asarray(measured, dtype=float)
    e = np.asarray(expected, dtype=float)
    n = y.shape[1]
    floor = np.zeros(n) if floor is None else np.nan_to_num(np.asarray(floor, dtype=float))
    known = np.isfinite(e)
    rms = np.sqrt((np.where(known, e, 0.0) ** 2).sum(axis=0) / np.maximum(known.sum(axis=0), 1))
    least = LOADED_SHARE * float(rms.max()) if n else 0.0
    scale = np.full(n, np.nan)
    for i in range(n):
        big = np.isfinite(y[:, i]) & known[:, i] & \
            (np.abs(e[:, i]) > max(3.0 * floor[i], least, 1e-9))
        if big.sum() >= 10:
            scale[i] = float(np.median(y[big, i] / e[big, i]))
    return scale


def judge_level(measured, expected, joints=None, floor=None, effort=None, gains=None,
                limit=JOINT_SCALE_LIMIT, subject='torque', reference='the arm model\'s',
                every=False):
    """Is the measured torque the model's arm's, in N·m, judged from its level?

    For a model applied to a recording whose torque need not vary (a pose held while a
    person pushes the arm): on each joint where the expected torque stands well above
    the friction it may hold (``floor``; 3x) and above :data:`LOADED_SHARE` of the most
    loaded joint's RMS (a floor of 0, a URDF without limits, judges no near-empty
    joint), the median over those samples of measured / expected. A contact moves a
    share of the samples, not the median. A scale outside [1 / limit, limit] is a unit
    or a torque constant (:func:`units_message`), one below -1 / limit a flipped sign (a
    median near 0, an effort of zeros, falls to the scale).

    Parameters
    ----------
    measured, expected : array_like, (M, n)
        Measured torque and the model's at the same samples (N·m).
    joints : sequence of str, (n,), optional
    floor : array_like, (n,), optional
        Torque a joint may hold at rest (N·m; default 0).
    effort, gains, limit, subject, reference
        See :func:`judge_data`.
    every : bool
        Refuse a scale only when every judged joint is off the same way (a unit, an
        effort read as another kind): a load the reference lacks raises some joints
        more than others.

    Returns
    -------
    Plausibility
        ``checks['level']``: per joint ``scale`` (None where not judged).
    """
    n = np.shape(measured)[1]
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
    scale = level_scales(measured, expected, floor)
    checks = {'level': {j: None if not np.isfinite(s) else float(s)
                        for j, s in zip(joints, scale)}}
    tested = np.flatnonzero(np.isfinite(scale))
    flipped = [i for i in tested if scale[i] < -1.0 / limit]
    if flipped:
        return Plausibility(False, sign_message([joints[i] for i in flipped],
                                                [scale[i] for i in flipped], subject,
                                                reference, 'scale'), checks, 'sign')
    s = np.abs(scale[tested])
    if every and len(tested) and not (np.all(s > limit) or np.all(s < 1.0 / limit)):
        return Plausibility(True, None, checks)
    return _off_scale(s, tested, joints, effort, gains, subject, limit, reference, checks,
                      relative=None)


def judge_data(measured, nominal, joints=None, noise=None, raw=None, effort=None,
               gains=None, subject='torque', limit=JOINT_SCALE_LIMIT, reference='the URDF\'s',
               floor=None, relative=RELATIVE_SCALE_LIMIT, signed_swaps=False):
    """The data gate: is the measured torque the URDF's arm's, in N·m, joint by joint?

    Checked in turn, the first failure refused with its cause: constant effort,
    no signal, swapped joints, flipped signs, scale against the URDF (units, torque
    constants). Joints where the URDF does not explain the measurement
    (|ρ| < :data:`AGREE_RHO`) are left untested (``checks['untested']``).

    Parameters
    ----------
    measured, nominal : array_like, (M, n)
        Measured torque and the nominal URDF's at the same prepared samples (N·m).
    joints : sequence of str, (n,), optional
    noise : array_like, (n,), optional
        Torque σ of the raw samples (N·m).
    raw : array_like, (N, n), optional
        Every measured torque (constant-effort and signal checks; default ``measured``).
    effort : {'current', 'torque'}, optional
    gains : array_like, (n,), optional
        N·m per A used with ``effort='current'``.
    subject : str
        What the URDF's torque is (``torque``, ``gravity torque``) for the messages.
    limit : float
        A tested joint's |scale| outside [1 / limit, limit] is refused (default
        :data:`JOINT_SCALE_LIMIT`; a payload adds torque: the payload gate uses
        :data:`SCALE_LIMIT`).
    reference : str
        What ``nominal`` is, for the messages (``the URDF's``, ``the arm model's``).
    floor : array_like, (n,), optional
        See :func:`torque_agreement`: joints held still whose URDF torque varies less
        than the friction they may hold are left untested.
    relative : float or None
        A tested joint whose scale is this many times the others' is refused
        (:func:`odd_scale_message`); None: not judged (a payload adds torque to the
        outer joints by design).
    signed_swaps : bool
        Two joints look swapped by their shapes only when each follows the other's URDF
        torque the same way (signed ρ), not also the opposite way (a swap with a sign
        flipped). A full fit's inverse dynamics gives two joints' torques a chance to
        mirror each other: a right UR3 record's shoulder_pan followed the URDF's elbow at
        ρ = −0.71 and was refused as swapped; there the refit with the columns exchanged
        names swaps, and the sign checks flips.

    Returns
    -------
    Plausibility
        ``checks['agreement']``: per joint ``scale``, ``rho``, ``tested``, ``loaded``.
    """
    y = np.asarray(measured, dtype=float)
    n = y.shape[1]
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
    refused = _signal_check(y if raw is None else raw, noise, joints)
    if refused is not None:
        return refused
    a = torque_agreement(y, nominal, joints, floor)
    checks = {'agreement': {j: {'scale': float(s), 'rho': float(r), 'tested': bool(t),
                                'loaded': bool(ld)}
                            for j, s, r, t, ld in zip(joints, a['scale'], a['rho'], a['tested'],
                                                      a['loaded'])},
              'untested': [j for j, t in zip(joints, a['tested']) if not t]}
    if a['samples'] < 3:
        return Plausibility(True, None, dict(checks, note='too few samples to judge'))
    cross, loaded = (a['cross'] if signed_swaps else np.abs(a['cross'])), a['loaded']
    own = np.abs(a['rho'])
    for i in range(n):
        for k in range(i + 1, n):
            if not (loaded[i] and loaded[k]):
                continue
            if _swapped_by_shape(cross[i, k], cross[k, i], own[i], own[k]) or \
                    _swapped_by_scale(a, i, k, gains):
                return Plausibility(False, swap_message(joints[i], joints[k], a['cross'][i, k],
                                                        a['cross'][k, i]), checks, 'swap')
    tested = np.flatnonzero(a['tested'])
    flipped = [i for i in tested if a['rho'][i] < 0]
    if flipped:
        return Plausibility(False, sign_message([joints[i] for i in flipped],
                                                [a['rho'][i] for i in flipped], subject,
                                                reference), checks, 'sign')
    # a scale is judged where the URDF explains the torque well (|ρ| ≥ SCALE_RHO), and
    # wherever it is tested and off beyond limit²: friction the URDF lacks lowers ρ
    # without biasing the slope (a UR5's torque read as current, 7x, had ρ 0.63 and was
    # blamed on the excitation)
    far = (np.abs(a['scale'][tested]) > limit ** 2) | (np.abs(a['scale'][tested]) < limit ** -2)
    tested = tested[(np.abs(a['rho'][tested]) >= SCALE_RHO) | far]
    return _off_scale(np.abs(a['scale'][tested]), tested, joints, effort, gains, subject,
                      limit, reference, checks, relative)


def _friction_at_bound(names, values, joint):
    """The physically signed friction terms of ``joint`` (index) when every one of them is
    at its bound 0 (names, e.g. ``['fc6', 'fv6']``), else []."""
    if names is None or values is None:
        return []
    from arm_dyn_id.model.dynamics import FrictionModel, parameter_term
    signed, terms = [], []          # every physically signed friction term, the joint's
    for name, value in zip(names, values):
        term, number = parameter_term(name)
        if term in FrictionModel.POSITIVE and number is not None:
            signed.append(float(value))
            if number == joint + 1:
                terms.append((name, float(value)))
    # at the bound: zero to the solver's precision, against the arm's largest friction
    tiny = 1e-6 * max([abs(v) for v in signed if np.isfinite(v)] + [1e-12])
    if not terms or any(not abs(v) <= tiny for _, v in terms):
        return []
    return [name for name, _ in terms]


#: The refusals of a full fit's plain scale that are judged again once friction (or a
#: load the URDF lacks) is fitted apart.
SCALE_CAUSES = ('units', 'torque_constant', 'load')


def shared_effort_scale(measured, nominal, velocity, acceleration, bound, joints,
                        effort=None, gains=None, limit=SHARED_LIMIT, judged=None):
    """Every judged joint off by one shared scale, friction and rotor inertia fitted apart
    (:func:`arm_dyn_id.validation.missing_load.judged_scales`, :func:`~arm_dyn_id.
    validation.missing_load.shared_scale`): the effort in other units, or every torque
    constant off by one factor, refused as :func:`units_message` names it.

    ``judged``: :func:`~arm_dyn_id.validation.missing_load.judged_scales` of these
    arrays, when already computed.

    Returns
    -------
    Plausibility
        ``checks``: per judged joint ``scale``, ``std_error``; ``shared`` (or None).
    """
    index, scale, se = judged if judged is not None else judged_scales(
        measured, nominal, velocity, acceleration, bound)
    joints = list(joints)
    checks = {joints[j]: {'scale': float(s), 'std_error': float(e)}
              for j, s, e in zip(index, scale, se)}
    common = shared_scale(scale, limit)
    checks['shared'] = common
    if common is None:
        return Plausibility(True, None, checks)
    cause, text = units_message(
        scale, [joints[j] for j in index], effort,
        None if gains is None else np.asarray(gains, dtype=float)[index],
        'torque (friction fitted apart)', limit)
    if cause != 'units' or not any(s > JOINT_SCALE_LIMIT or s < 1 / JOINT_SCALE_LIMIT
                                   for s in scale):
        # one scale on every joint judged is no single joint's constant, nor a load; within
        # 2x, the URDF's masses all that far off are told too
        cause, text = 'units', (f'{text.split(":")[0]}: every joint judged reads one scale: '
                                'the effort in other units, every torque constant off by '
                                'that factor (--torque-constants, torque_constants), or the '
                                'URDF\'s masses all that far off')
    return Plausibility(False, text, checks, cause)


def judge_full(prepared, predicted, nominal, held_out, noise, joints=None, robot=None,
               parameter_names=None, values=None, std_errors=None, condition=None,
               raw=None, effort=None, gains=None, unmodelled=None, scales=None,
               rigid_condition=None, union_scales=None):
    """The data gate of a full-dynamics fit, the first failure with its most likely cause.

    :func:`judge_data` on the prepared samples against the URDF's inverse dynamics
    there (and :func:`light_joint_signs`), then the cut-off (:func:`derivative_noise`;
    the cut-off against the Nyquist frequency), then, below the rate limit, the untested
    joints' scales (:func:`untested_scales`), then the held-out quality against the noise
    level, the parameters the data cannot identify named when it fails.

    Parameters
    ----------
    prepared : Prepared
        The recording through the model's filter (every sample).
    predicted : ndarray, (M, n)
        The model's torques at ``prepared`` (N·m).
    nominal : ndarray, (M, n)
        The URDF's inverse dynamics at ``prepared`` (NaN rows skipped), N·m.
    held_out : dict
        ``{joint: {rmse, rmse_percent, rho, ...}}`` out-of-fold metrics.
    noise : array_like, (n,)
        Torque σ of the raw samples (N·m).
    joints : sequence of str, optional
    robot : RobotModel, optional
        The nominal URDF (for :func:`derivative_noise`).
    parameter_names, values, std_errors : sequence, optional
        The fitted parameters (for naming the unidentified ones).
    condition : float, optional
        Condition number of the fit.
    raw, effort, gains
        See :func:`judge_data`.
    unmodelled : str, optional
        A term the model leaves out that would also keep it from following its held-out
        blocks (a geared arm's rotor inertia), with the option that fits it: added to a
        held-out refusal that is not a wiring mistake (a joint's friction pinned at its
        bound, or an untested joint anti-correlated on held-out blocks: a term left out
        loosens a fit, it does not invert it).
    scales : dict, optional
        Each joint's effort scale against the others' (the fit's ``effort_scales``),
        judged by :func:`effort_scales` below the rate limit.
    union_scales : dict, optional
        The same with every friction term the choice tried (``effort_scales_union``).
    rigid_condition : float, optional
        Condition number of the fit's rigid body alone (its friction taken as known):
        what :func:`effort_scales` asks of the motion (default ``condition``). A friction
        term that trades with a rigid-body one (a direction-dependent Coulomb term is an
        offset while the joint moves) raises the fit's condition, not the coupling's.

    Returns
    -------
    Plausibility
    """
    also = f'. Or {unmodelled}' if unmodelled else ''
    y = prepared.tau
    n = y.shape[1]
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
    rows = np.all(np.isfinite(nominal), axis=1)
    floor = None if robot is None else still_floor(robot, prepared.q)
    # one joint's scale apart from the others' is not judged here: against the full
    # inverse dynamics a right Panda's fourth joint read 1.8x (friction and inertia the
    # URDF gets wrong weigh in), where its gravity scales stay within 1.4x
    verdict = judge_data(y[rows], nominal[rows], joints, noise=noise, raw=raw, effort=effort,
                         gains=gains, floor=floor, relative=None, signed_swaps=True)
    checks = dict(verdict.checks)
    agreement = checks.get('agreement')
    tested = None if agreement is None else np.array([agreement[j]['tested'] for j in joints])
    untested = [] if tested is None else [j for j, t in zip(joints, tested) if not t]
    if robot is not None and tested is not None:
        light = light_joint_signs(y[rows], nominal[rows], com_error_bound(robot), joints,
                                  untested, velocity=prepared.dq[rows])
        checks['light_signs'] = light.checks
        # a swap with a light joint comes before a loaded joint's scale, as judge_data
        # names swaps before scales (a Panda's joints 4 and 5 swapped: joint 4 read
        # x0.22, a "torque constant")
        if not light.ok and (verdict.ok or (light.cause == 'swap' and
                                            verdict.cause in SCALE_CAUSES)):
            return Plausibility(False, light.reason, checks, light.cause)
    held = None
    if not verdict.ok:
        if robot is None or verdict.cause not in SCALE_CAUSES:
            return Plausibility(False, verdict.reason, checks, verdict.cause)
        # a scale against the full inverse dynamics: judged again below, with friction
        # and rotor inertia fitted apart, once the derivatives are known not to be noise
        held = Plausibility(False, verdict.reason, checks, verdict.cause)
    rate = float(prepared.info.get('rate_hz', np.nan))
    cutoff = float(prepared.info.get('cutoff_hz', np.nan))
    at_limit = bool(np.isfinite(rate) and cutoff >= RATE_LIMIT * rate / 2)
    # judged where the URDF explains the measured torque (the tested joints): elsewhere
    # the measured torque is mostly friction, flat between reversals, and the URDF's
    # small smooth torque reads many times "rougher" with no noise at all (a humanoid
    # wrist at 1 kHz read 106x). With no joint tested (derivatives so noisy that the
    # URDF's torque no longer follows the measured one, or friction the URDF lacks), the
    # joints whose scale friction fitted apart determines are judged with that scale:
    # the plain slope puts a friction-bound joint's torque in the URDF's scale by a factor
    # of tens (a right UR3 at 500 Hz: shoulder_pan, its URDF torque 0.08 N·m of inertia
    # under 10 N·m of friction, x96 and "22x rougher"); every other loaded joint is judged
    # with their median scale (about 1: the URDF's torque and the measured one compared in
    # N·m), so that a joint whose scale is not determined still shows derivatives of noise
    # (the same UR3 at --cutoff 20: its elbow 140x). With none of those, every loaded
    # joint is judged by its plain slope: an unloaded one's measured torque, put in the
    # URDF's scale by a slope of hundreds, reads rough whatever the cut-off (a SO-101's
    # gripper 13x at 8.8 Hz, 200 Hz).
    loaded = None if agreement is None else np.array([agreement[j]['loaded'] for j in joints])
    examined = tested if tested.any() else (loaded if loaded is not None and loaded.any()
                                            else np.ones(n, bool))
    gain = None
    # each joint's friction-free scale, for the cut-off (no joint tested) and the shared
    # scale (below the rate limit)
    judged = None if robot is None or (tested.any() and at_limit) else judged_scales(
        y[rows], nominal[rows], prepared.dq[rows], prepared.ddq[rows], com_error_bound(robot))
    if robot is not None and not tested.any():
        index, scale, _ = judged
        if index:
            gain = np.where(examined, float(np.median(scale)), np.nan)
            gain[index] = scale
            examined = examined | np.isin(np.arange(n), index)
            checks['cutoff_scales'] = {joints[j]: float(s) for j, s in zip(index, scale)}
    ratio = derivative_noise(robot, prepared, gain=gain) if robot is not None else \
        np.full(n, np.nan)
    rough = np.where(examined, ratio, np.nan)
    worst = float(np.nanmax(rough)) if np.any(np.isfinite(rough)) else None
    checks['cutoff'] = {'cutoff_hz': cutoff, 'rate_hz': rate, 'at_rate_limit': at_limit,
                        'derivative_noise': None if worst is None else worst,
                        'derivative_noise_per_joint': {
                            j: None if not np.isfinite(r) else float(r)
                            for j, r in zip(joints, ratio)}}
    lost = []
    if parameter_names is not None and std_errors is not None:
        lost = unidentified(parameter_names, values, std_errors)
        checks['unidentified'] = lost
    if condition is not None:
        checks['condition_number'] = float(condition)
    noise = np.nan_to_num(np.asarray(noise, dtype=float), nan=0.0)
    if worst is not None and (worst > DERIVATIVE_NOISE_ANY or
                              (at_limit and worst > DERIVATIVE_NOISE)):
        if held is not None:
            return held
        return Plausibility(False, cutoff_message(cutoff, rate, worst), checks, 'cutoff')
    reference = nominal[rows]
    if robot is not None and not at_limit:
        # derivatives that are not noise: every joint off by one shared scale, friction
        # fitted apart (where friction keeps the URDF from explaining the torque, no joint
        # is tested above: a UR5's effort 2x, 0.4x was written)
        shared = shared_effort_scale(y[rows], reference, prepared.dq[rows],
                                     prepared.ddq[rows], com_error_bound(robot), joints,
                                     effort, gains, judged=judged)
        checks['shared_scale'] = shared.checks
        if not shared.ok:
            return Plausibility(False, shared.reason, checks, shared.cause)
    if held is not None:
        if at_limit:
            return held
        if not _scales_in_line(y[rows], reference, prepared.dq[rows], prepared.ddq[rows],
                               joints, tested, checks):
            # a load the URDF lacks (its scales are not one shared scale, judged above)
            load = fit_missing_load(robot, prepared.q[rows], y[rows], reference,
                                    prepared.dq[rows], prepared.ddq[rows],
                                    com_error_bound(robot))
            if load is not None:
                checks['missing_load'] = load
            if load is None or not load['explains']:
                return held
            load.update(withdrew=held.cause, scale=held.reason.split(':')[0])
            # the URDF with the load is the reference of the joints' wiring below
            reference = reference + load_torque(robot, load, prepared.q[rows])
        # friction (or a load) the URDF lacks made the plain scale: the refusal is
        # withdrawn, and kept in the evidence
        checks['scale_refusal_withdrawn'] = held.reason
    if robot is not None and not at_limit:
        # derivatives that are not noise: the untested joints' wiring by their scale
        wiring = untested_scales(y[rows], reference, prepared.dq[rows],
                                 prepared.ddq[rows], com_error_bound(robot), joints,
                                 untested)
        checks['untested_scales'] = wiring.checks
        if not wiring.ok:
            return Plausibility(False, wiring.reason, checks, wiring.cause)
        # one joint's torque constant off, judged against the joints beyond and before it
        constants = constant_scales(
            y[rows], reference, prepared.dq[rows], prepared.ddq[rows],
            com_error_bound(robot), joints, effort, gains, beyond=robot.beyond,
            load=lambda: fit_missing_load(
                robot, prepared.q[rows], y[rows], reference, prepared.dq[rows],
                prepared.ddq[rows], com_error_bound(robot)))
        checks['constant_scales'] = constants.checks
        if not constants.ok:
            return Plausibility(False, constants.reason, checks, constants.cause)
    if scales is not None and not at_limit:
        # one joint's effort against the others', from the fit alone (a load the URDF
        # lacks does not move it): derivatives that are not noise
        rigid = condition if rigid_condition is None else rigid_condition
        # a sign flipped, read the same way: where no check against the URDF could judge
        # the joint (a light wrist), or before a held-out failure it causes elsewhere
        flipped = flipped_effort(scales, joints, condition=rigid)
        relative = effort_scales(scales, joints, effort, gains, condition=rigid,
                                 flipped=flipped, union=union_scales)
        checks.update(relative.checks)
        if not relative.ok:
            return Plausibility(False, relative.reason, checks, relative.cause)
        checks.update(flipped.checks)
        if not flipped.ok:
            return Plausibility(False, flipped.reason, checks, flipped.cause)
    # held-out quality against the noise level: on the joints the URDF explains, and on
    # every other joint whose torque the motion varies well above its noise (and above
    # the friction it may hold, if still). The fitted model carries friction: it follows
    # a rightly wired joint the URDF's rigid body alone does not explain (a wrist whose
    # torque is mostly friction); one it cannot follow on held-out blocks is a sign
    # flipped, two joints' efforts swapped, or a motion that does not determine it.
    spread = np.nanstd(y, axis=0)
    hold = np.zeros(n) if floor is None else np.nan_to_num(np.asarray(floor, dtype=float))
    judged = [i for i in range(n) if tested[i] or (
        spread[i] > SIGNAL_NOISE * max(noise[i], 1e-12) and spread[i] > 2.0 * hold[i])]
    checks['judged_joints'] = [joints[i] for i in judged]
    held_out = held_out or {}
    for i in judged:
        m = held_out.get(joints[i]) or {}
        rho, rmse, pct = m.get('rho'), m.get('rmse'), m.get('rmse_percent')
        if rho is None or rmse is None:
            continue
        over = rmse / max(noise[i], 1e-12)
        bad_rho = rho < MIN_RHO
        bad_rmse = over > RMSE_NOISE_LIMIT and pct is not None and pct > MAX_RMSE_PERCENT
        bad_cut = at_limit and over > CUTOFF_NOISE_LIMIT and pct is not None and \
            pct > CUTOFF_RMSE_PERCENT
        pinned = [] if tested[i] else _friction_at_bound(parameter_names, values, i)
        # a joint the model follows within 25 % but far above its noise (and 5 % of its
        # peak) whose friction the fit pinned at 0: a humanoid's fourth joint, flipped,
        # read 21.6 % and 68x (a right one 2.9 % and 9x, its Coulomb friction 0.28 N·m)
        bad_pinned = bool(pinned) and over > RMSE_NOISE_LIMIT and pct is not None and \
            pct > CUTOFF_RMSE_PERCENT
        if not (bad_rho or bad_rmse or bad_cut or bad_pinned):
            continue
        what = (f'on held-out time blocks the model does not follow {joints[i]} (rho = '
                f'{rho:.2f}, RMSE {pct:.3g} % of its largest torque, {over:.0f}x its noise)')
        checks['held_out_failed'] = joints[i]
        if at_limit and (bad_rho or bad_rmse or bad_cut):
            return Plausibility(False, f'{what}; {cutoff_message(cutoff, rate, worst)}',
                                checks, 'cutoff')
        wiring = (f'. The URDF alone does not explain {joints[i]} (friction), so its '
                  'wiring was not tested against it; a model with friction follows a joint '
                  f'wired right: is its effort\'s sign right (current_signs), or its column '
                  'another joint\'s (--joint-map)? `arm-dyn-id check` tests each joint with '
                  'friction')
        if pinned:
            # every signed friction term of the joint at its bound 0: the fit wanted a
            # friction that feeds energy in, which a flipped effort (or another joint's)
            # gives, and a motion too poor does not
            return Plausibility(False, f'{what}; its friction came out at the bound 0 '
                                f'({", ".join(pinned)}): the fit wanted it negative, a '
                                'friction that feeds energy in' + wiring, checks, 'sign')
        if not tested[i] and rho < 0:
            # anti-correlated on held-out blocks of the same motion: not a motion too
            # poor to determine the model (that gives a loose fit, not an inverted one)
            return Plausibility(False, what + wiring, checks, 'held_out')
        if lost:
            return Plausibility(False, f'{what}; {excitation_message(lost, condition)}' +
                                ('' if tested[i] else f'; or its wiring ({joints[i]} is not '
                                 'tested against the URDF: `arm-dyn-id check`)') + also,
                                checks, 'excitation')
        return Plausibility(False, what + ('' if tested[i] else wiring) + also, checks,
                            'held_out')
    if robot is not None and not at_limit and 'missing_load' not in checks:
        _note_missing_load(checks, robot, prepared.q[rows], y[rows], reference,
                           prepared.dq[rows], prepared.ddq[rows], joints)
    return Plausibility(True, None, checks)


def _note_missing_load(checks, robot, q, measured, nominal, velocity, acceleration, joints):
    """A fit that passed whose joints read above the URDF (friction fitted apart, beyond
    :data:`~arm_dyn_id.validation.missing_load.LOAD_AGREEMENT`) where a load the URDF lacks
    explains them: ``checks['missing_load']`` (no refusal withdrawn), for the warning that
    the model holds it. The real UR10e's loaded twin run (2.6 kg, joints x1.15-1.99) was
    written with nothing said; right records read 0.84-1.21."""
    judged = {j: d['scale'] for j, d in (checks.get('shared_scale') or {}).items()
              if isinstance(d, dict)}
    if not judged or max(judged.values()) <= LOAD_AGREEMENT:
        return
    load = fit_missing_load(robot, q, measured, nominal, velocity, acceleration,
                            com_error_bound(robot))
    if load is None or not load['explains']:
        return
    each = ', '.join(f'{j} x{judged[j]:.3g}' for j in joints if j in judged)
    load.update(withdrew=None, scale=f'friction fitted apart, {each}')
    checks['missing_load'] = load


__all__ = ['AGREE_RHO', 'CAUSES', 'DERIVATIVE_NOISE', 'DERIVATIVE_NOISE_ANY', 'JOINT_SCALE_LIMIT',
           'MAX_RMSE_PERCENT', 'MIN_RHO', 'Plausibility', 'RATE_LIMIT', 'SCALE_FLOOR',
           'SCALE_LIMIT', 'SCALE_RHO', 'WORKSPACE_EXTRAPOLATION', 'WORKSPACE_FLOOR',
           'WORKSPACE_UNCERTAINTY', 'com_error_bound', 'cutoff_message', 'derivative_noise',
           'excitation_message', 'judge_data', 'judge_fit', 'judge_full', 'judge_level',
           'judge_workspace', 'level_scales', 'light_joint_signs', 'sign_message', 'still_floor',
           'swap_message', 'torque_agreement', 'unidentified', 'units_message', 'untested_scales',
           'constant_scales', 'effort_scales', 'EFFORT_SCALE_CONDITION', 'EFFORT_SCALE_DROP',
           'EFFORT_SCALE_OTHERS', 'EFFORT_SCALE_DECISIVE', 'EFFORT_SCALE_OFF', 'FLIP_DROP',
           'FLIP_RANGE', 'SCALE_CAUSES',
           'effort_scale_warning', 'flipped_effort', 'shared_effort_scale',
           'fit_notes', 'unchecked_note', 'unchecked_scales', 'written_warnings']
