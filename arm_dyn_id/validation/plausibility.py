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

#: Identified / nominal gravity torque ratio beyond which (or below 1 / it) a fit is refused.
SCALE_LIMIT = 5.0
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
        per joint, ``judged_joints``.
    """

    ok: bool
    reason: str = None
    checks: dict = field(default_factory=dict)


def _rho(a, b):
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den > 0 else 0.0


def judge_fit(measured, predicted, nominal=None, noise=None, joints=None, held_out=True,
              raw=None):
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

    Returns
    -------
    Plausibility
    """
    y = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    keep = np.all(np.isfinite(y), axis=1) & np.all(np.isfinite(p), axis=1)
    y, p = y[keep], p[keep]
    n = y.shape[1]
    joints = list(joints) if joints is not None else [f'joint_{i + 1}' for i in range(n)]
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
                            f'({float(r.flat[0]):g}): it carries no torque', checks)
    snr = r.std(axis=0) / np.maximum(noise, 1e-12)
    checks['signal_to_noise'] = {j: float(s) for j, s in zip(joints, snr)}
    if not np.any(snr > SIGNAL_NOISE):
        best = int(np.argmax(snr))
        return Plausibility(False, 'the effort holds no gravity signal: no joint\'s torque '
                            f'varies by more than {SIGNAL_NOISE:g}x its noise (best '
                            f'{joints[best]}: {snr[best]:.2g}x); random or unrelated '
                            'effort?', checks)
    if nominal is not None:
        g = np.asarray(nominal, dtype=float)[keep]
        amp = np.sqrt((g * g).mean(axis=0))
        carry = amp > 0.05 * amp.max() if amp.max() > 0 else np.zeros(n, bool)
        if carry.any():
            scale = float(np.sqrt((p[:, carry] ** 2).sum() / (g[:, carry] ** 2).sum()))
            checks['scale'] = scale
            if not SCALE_LIMIT ** -1 <= scale <= SCALE_LIMIT:
                return Plausibility(
                    False, f'the identified gravity torques are {scale:.3g}x those of the '
                    'URDF\'s masses: effort in other units (mA read as A?), wrong '
                    '--torque-constants, or --effort torque/current mixed up', checks)
        else:
            checks['scale'] = None
    local = y.std(axis=0) / np.maximum(noise, 1e-12)
    # a joint the URDF's gravity barely loads (a vertical first axis) has nothing for a
    # gravity model to follow: its held-out rho says nothing about the fit
    loaded = carry if nominal is not None else np.ones(n, dtype=bool)
    judged = [i for i in range(n) if local[i] > SIGNAL_NOISE and loaded[i]]
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
                                checks)
        if rmse > RMSE_NOISE_LIMIT * max(noise[i], 1e-12) and percent > MAX_RMSE_PERCENT:
            return Plausibility(False, f'on held-out data the RMSE of {joints[i]} is '
                                f'{percent:.0f} % of its largest torque, '
                                f'{rmse / max(noise[i], 1e-12):.0f}x its noise', checks)
    return Plausibility(True, None, checks)


__all__ = ['Plausibility', 'judge_fit']
