"""Contact thresholds from a full fit's own held-out residuals (issue 24 item 2).

A full-dynamics fit is made on a recording without contact, so the recording itself can
say how large the residual of a contact-free arm is. Fitted on all samples, the model
would be scored on samples it has seen; instead the last contiguous block of the
recording is held out, the same model structure (the chosen friction model, armature
as chosen, the same cut-off) is fitted by weighted least squares on the rest, and that
held-out model's momentum-observer residual on the block is what
:func:`arm_dyn_id.service.contact.calibrate` turns into thresholds for the stated
false-alarm target. The model actually served (fitted on every sample) fits the block
at least as well, so the thresholds err on the side of fewer false alarms.

``arm-dyn-id fit --dynamics full`` writes them as ``contact_thresholds.yaml`` beside
``model.yaml`` (``--no-thresholds`` does not); the identifier node uses that file by
default (:func:`arm_dyn_id.service.contact.calibrated_thresholds`).
"""

import numpy as np

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.service import contact
from arm_dyn_id.service.dynamics import ServedDynamics, calibration_run

#: Fraction of the recording's time held out (its last block).
HELD_OUT_FRACTION = 0.25
#: The held-out block is at least this long (s); shorter recordings get no thresholds.
MIN_HELD_OUT_SECONDS = 5.0
#: The observer gain the thresholds are calibrated for (the node's default, 1/s).
DEFAULT_OBSERVER_GAIN = 25.0


def held_out_thresholds(robot, model, t, q, tau, fraction=HELD_OUT_FRACTION,
                        observer_gains=DEFAULT_OBSERVER_GAIN, quantile=contact.QUANTILE,
                        margin=contact.MARGIN, persistence=contact.PERSISTENCE,
                        min_seconds=MIN_HELD_OUT_SECONDS, model_file=''):
    """Thresholds for ``model`` from a held-out block of the recording it was fitted on.

    Parameters
    ----------
    robot : RobotModel
        The recording's joints, in its order (the model's).
    model : DynamicsModel
        The fitted model (served); its friction model, armature, cut-off and order are
        used for the held-out fit, its fingerprint is written into the thresholds.
    t, q, tau : ndarray
        The recording (s, rad, N·m), as fitted.
    fraction : float
        Of the recording's time held out, at its end.
    observer_gains : float or sequence of float
        The momentum observer's gains (1/s) the node will serve with.
    quantile, margin, persistence
        The false-alarm target and its margin (:func:`contact.calibrate`).
    min_seconds : float
        The shortest held-out block worth calibrating on.
    model_file : str
        Where the model is written (recorded in the thresholds' calibration).

    Returns
    -------
    (ContactThresholds, dict)
        The thresholds, and what was done: ``held_out_s`` (start and end, s),
        ``samples``, ``held_out_rms`` (per joint, N·m), ``false_alarm_target``.

    Raises
    ------
    ConfigError
        The recording is too short to hold out ``min_seconds``, or the held-out fit
        has no exact pinocchio equivalent (no residual can be computed).
    """
    from arm_dyn_id.identification.full_dynamics import fit_full
    t = np.asarray(t, dtype=float)
    q, tau = np.asarray(q, dtype=float), np.asarray(tau, dtype=float)
    if not 0 < fraction < 1:
        raise ConfigError(f'held-out fraction {fraction} must be in (0, 1)')
    span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
    t_split = t[-1] - fraction * span
    if span * fraction < min_seconds:
        raise ConfigError(f'the recording is {span:.1f} s long: {fraction:g} of it is less than '
                          f'{min_seconds:g} s to hold out for contact thresholds')
    train, held = t < t_split, t >= t_split
    prep = model.metadata.get('preparation') or {}
    held_model, _ = fit_full(robot, t[train], q[train], tau[train], methods=('wls',),
                             cutoff_hz=prep.get('cutoff_hz'), order=int(prep.get('order', 4)),
                             friction=model.friction_model, armature=model.armature,
                             robot_name=model.metadata.get('robot_name'))
    served = ServedDynamics(held_model)
    if not served.fast.exact:
        raise ConfigError('the held-out model has no pinocchio equivalent (a massless body): '
                          'no residual to calibrate on')
    n = len(served.joints)
    gains = np.atleast_1d(np.asarray(observer_gains, dtype=float))
    gains = np.full(n, float(gains[0])) if gains.size == 1 else gains
    inf = np.full(n, np.inf)
    settings = contact.ContactThresholds(
        tuple(served.joints), inf, inf, np.zeros(n), np.zeros(n),
        holding_bounds=contact.holding_bounds(model), persistence=persistence)
    run = calibration_run(served, gains, t[held], q[held], None, tau[held], settings,
                          source='the last block of the fitted recording (held out)')
    keep = ('still_velocity', 'acceleration_cutoff_hz', 'breakaway_velocity', 'holding_time',
            'release_time', 'settle_time', 'max_freeze')
    th = contact.calibrate(
        [run], served.joints, holding_bounds=settings.holding_bounds, quantile=quantile,
        margin=margin, persistence=persistence,
        calibration={'observer_gains': gains.tolist(), 'model': str(model_file),
                     'model_sha256': contact.model_fingerprint(model),
                     'from': 'the fit\'s own held-out residuals: the last '
                             f'{fraction:g} of the recording, predicted by the same model '
                             'structure fitted (WLS) without it'},
        **{k: getattr(settings, k) for k in keep})
    residual = np.asarray(run.residual, dtype=float)
    info = {'held_out_s': [float(t[held][0]), float(t[held][-1])],
            'samples': int(held.sum()),
            'held_out_rms': np.sqrt(np.nanmean(residual ** 2, axis=0)).tolist(),
            'false_alarm_target': 1 - quantile}
    return th, info


__all__ = ['DEFAULT_OBSERVER_GAIN', 'HELD_OUT_FRACTION', 'MIN_HELD_OUT_SECONDS',
           'held_out_thresholds']
