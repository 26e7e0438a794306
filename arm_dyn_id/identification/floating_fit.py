"""A floating-base robot's recording in, identified model out (issue 17; seeds 002, 003).

:func:`fit_floating` is what ``arm-dyn-id fit`` runs when the configuration has a
``floating_base`` section. It takes the recorded arrays
(:class:`arm_dyn_id.data.floating.FloatingData`, e.g. from
:func:`~arm_dyn_id.data.floating.read_floating_bag`), and

- **momentum** (seed 002, a free-floating robot): the momentum computed from the
  measured base and joint motion must equal the configured conserved momentum
  (``floating_base.momentum``); the unknowns are each body's mass and principal
  moments (:func:`~arm_dyn_id.identification.momentum.principal_parametrisation`),
  fitted by the constrained linear solution (default) or seed 002's improved / plain
  genetic algorithm (``'ga'`` / ``'ga-plain'``, box 0.5-1.5 x nominal);
- **zmp** (seed 003, a biped on sole sensors): the torso pose follows from the joint
  angles with the stance foot still at its configured pose
  (:func:`~arm_dyn_id.identification.zmp.stance_motion`), the measured ZMP is the
  centre of pressure of the sole sensors moved to the world by forward kinematics,
  and the link masses and CoM positions are fitted by seed 003's constrained Newton
  iteration (default) or the linear reformulation (``'linear'``), box 0.5-1.5 x
  nominal, the masses summing to ``floating_base.total_mass`` exactly.

Both fit on the first 75 % of the recording and score on the last 25 % (or on a
second recording, ``validate``): momentum RMS per axis against the configured
momentum, ZMP RMS (mm) against the sole sensors, each beside the nominal URDF's.
Unknowns the motion does not excite stay at their nominal value and are named.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import ConfigError, DataError, JointNameError
from arm_dyn_id.model.floating import FloatingIdentification, FloatingModel, zmp

#: estimators of each method; the first is the default
ESTIMATORS = {'momentum': ('linear', 'ga', 'ga-plain'), 'zmp': ('newton', 'linear')}
#: fraction of the recording held out when no second recording is given
HELD_OUT_FRACTION = 0.25
#: the fit and the held-out score use at most this many samples (evenly spaced)
MAX_SAMPLES = 4000
#: box of the GA and of the ZMP fit, as factors of the nominal values
BOX = (0.5, 1.5)
#: ZMP: the smoothing window of the joint angles (s, stance_motion's); samples closer than
#: one window to a contact change, or half a window to either end, are not used
ZMP_WINDOW = 0.5
#: ZMP: faster recordings are averaged in blocks down to at most this rate (Hz) first
ZMP_RATE = 200.0
#: a sole sensor touches when it carries this fraction of the total normal force
CONTACT_FRACTION = 0.02
#: ZMP: relative pivot of the scaled Jacobian under which an unknown counts as not
#: excited. The weakly excited unknowns of seed 003's weight shift (feet, thighs) have
#: pivots of 0.5-2e-3 and the excited ones above 3e-2; zmp.RANK_TOLERANCE (1e-3) splits
#: that cluster, and what it let through came out 20-50 % off on 20-30 s recordings
#: with the held-out ZMP still good (they barely move it): 1e-2 holds them instead
ZMP_RANK_TOLERANCE = 1e-2
#: seed 002's GA: population and evaluations (bench/floating_base.py's, Fig. 5)
GA_POPULATION, GA_BUDGET = 40, 24000
MOMENTUM_AXES = ('p_x', 'p_y', 'p_z', 'L_x', 'L_y', 'L_z')


@dataclass
class FloatingFitResult:
    """What :func:`fit_floating` returns.

    Attributes
    ----------
    identification : FloatingIdentification
        The model file's contents.
    fit : MomentumFit or ZmpFit
        The estimator's result (unknowns, estimate, iterations, seconds, ...).
    metrics : dict
        Held-out metrics (also in ``identification.metrics``).
    unexcited : tuple of str
        Unknowns the motion did not excite (kept nominal).
    held_out : dict of ndarray
        The held-out series for plots: ``t``, ``measured``, ``identified``, ``nominal``
        ((N, 6) momentum, or (N, 2) ZMP in m) and ``labels``.
    summary : dict
        Samples, split, unknowns and their values, for validation.json.
    problem : MomentumProblem or ZmpProblem
        The fitted equations (training samples): base parameters, fitness, residuals.
    seconds : float
    """

    identification: FloatingIdentification
    fit: object
    metrics: dict
    unexcited: tuple
    held_out: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    problem: object = None
    seconds: float = 0.0


def _say(progress, text):
    if progress is not None:
        progress(text)


def _section(config):
    fb = getattr(config, 'floating_base', None)
    if fb is None:
        raise ConfigError(f'configuration {getattr(config, "source", "") or ""} has no '
                          'floating_base section: it describes a fixed-base arm')
    return fb


def _get(obj, key, default=None):
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def _joint_columns(model, config, data):
    """Column of each of the model's joints in the data (config joint order)."""
    joints = tuple(getattr(config, 'joints', None) or model.joint_names)
    missing = [j for j in model.joint_names if j not in joints]
    if missing:
        raise ConfigError(f'the configuration\'s joints {list(joints)} lack the URDF\'s '
                          f'{missing}: a floating-base fit needs every joint of '
                          f'{model.source}')
    q = np.asarray(data.q, float)
    if q.ndim != 2 or q.shape[1] != len(joints):
        raise DataError(f'joint angles must be (samples, {len(joints)}) for the joints '
                        f'{list(joints)}, got {q.shape}')
    return [joints.index(j) for j in model.joint_names]


#: what each method reads from a recording, and the topics that give it
NEEDS = {'momentum': (('base_position', 'base_quaternion', 'base_linear', 'base_angular',
                       'q', 'dq'), 'floating_base.odometry_topic (the base pose and twist; an '
                      'imu gives no position or velocity)'),
         'zmp': (('q', 'forces'), 'floating_base.sole_sensors (one WrenchStamped per sensor)')}


def _check_data(data, kind, what):
    t = np.asarray(data.t, float)
    n = len(t)
    if n < 8:
        raise DataError(f'{what} has {n} samples: too short for a floating-base fit')
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise DataError(f'{what}: sample times are not finite and increasing')
    names, topics = NEEDS[kind]
    for name in names:
        x = getattr(data, name, None)
        if x is None:
            raise DataError(f'{what} has no {name.replace("_", " ")}: the {kind} method needs '
                            f'{topics} in the bag')
        x = np.asarray(x, float)
        if len(x) != n:
            raise DataError(f'{what}: {name} has {len(x)} samples, t has {n}')
        bad = ~np.all(np.isfinite(x.reshape(n, -1)), axis=1)
        if np.any(bad):
            raise DataError(f'{what}: {name} is not finite (first bad sample '
                            f'{int(np.flatnonzero(bad)[0])})')


def _split(n, validate):
    """Training and held-out index arrays of one recording (no second one)."""
    if validate is not None:
        return np.arange(n), None
    cut = int(round(n * (1 - HELD_OUT_FRACTION)))
    return np.arange(cut), np.arange(cut, n)


def _thin(idx, limit=MAX_SAMPLES):
    return idx if len(idx) <= limit else idx[np.linspace(0, len(idx) - 1, limit).astype(int)]


def _rms(x, axis=0):
    return np.sqrt(np.mean(np.square(x), axis=axis))


def _ratio(a, b):
    return float(a / b) if b > 0 else None


def fit_floating(config, data, method=None, validate=None, rng=None, progress=None):
    """Identify a floating-base robot from one recording.

    Parameters
    ----------
    config : ArmConfig
        With ``floating_base`` (method, total_mass, momentum / stance foot and sole
        sensors) and the nominal ``urdf``.
    data : FloatingData
        The recording (joints in ``config.joints`` order).
    method : str, optional
        Estimator: momentum ``'linear'`` (default), ``'ga'``, ``'ga-plain'``; zmp
        ``'newton'`` (default), ``'linear'``.
    validate : FloatingData, optional
        A second recording scored instead of the last 25 % of ``data``.
    rng : numpy.random.Generator, optional
        For the GA (default seed 0).
    progress : callable, optional
        Called with one line per phase.

    Returns
    -------
    FloatingFitResult

    Raises
    ------
    ConfigError
        Unknown estimator, missing floating_base keys, joints that do not cover the URDF.
    DataError
        Unusable recordings (one line naming what).
    """
    start = time.perf_counter()
    fb = _section(config)
    kind = _get(fb, 'method', 'momentum')
    if kind not in ESTIMATORS:
        raise ConfigError(f'floating_base.method {kind!r} must be one of {list(ESTIMATORS)}')
    estimator = method or ESTIMATORS[kind][0]
    if estimator not in ESTIMATORS[kind]:
        raise ConfigError(f'--method {estimator!r} does not apply to the {kind} method; '
                          f'choose from {", ".join(ESTIMATORS[kind])}')
    total_mass = _get(fb, 'total_mass')
    if total_mass is None or not np.isfinite(total_mass) or total_mass <= 0:
        raise ConfigError(f'floating_base.total_mass {total_mass} must be a positive mass '
                          '(kg)')
    model = FloatingModel(config.urdf)
    _check_data(data, kind, 'the recording')
    if validate is not None:
        _check_data(validate, kind, 'the validation recording')
    cols = _joint_columns(model, config, data)
    if validate is not None:
        _joint_columns(model, config, validate)
    if kind == 'momentum':
        out = _fit_momentum(model, fb, data, validate, cols, estimator, float(total_mass),
                            rng, progress)
    else:
        out = _fit_zmp(model, fb, data, validate, cols, estimator, float(total_mass),
                       progress)
    fit, metrics, held, summary, problem = out
    masses = fit.phi[::10]
    if np.any(masses <= 0):
        b = int(np.flatnonzero(masses <= 0)[0])
        raise DataError(f'the {estimator} fit gives {model.body_names[b]} a mass of '
                        f'{masses[b]:.4g} kg: the recording does not determine it; record '
                        'richer motion' + (' or use --method ga (bounded)'
                                           if kind == 'momentum' else ''))
    from arm_dyn_id.config import file_sha256
    ident = FloatingIdentification(
        getattr(config, 'robot_name', '') or model.body_names[0], str(config.urdf),
        file_sha256(config.urdf), kind, estimator, model.body_names, fit.phi,
        float(total_mass), unexcited=list(fit.unexcited), metrics=metrics)
    summary.update(method=kind, estimator=estimator, total_mass=float(total_mass),
                   identified_total_mass=float(np.sum(fit.phi[::10])),
                   unexcited=list(fit.unexcited))
    return FloatingFitResult(ident, fit, metrics, tuple(fit.unexcited), held, summary,
                             problem, time.perf_counter() - start)


# ------------------------------------------------------------------ momentum -----
def _momentum_state(model, data, cols, rows):
    """Configurations and velocities of the samples ``rows`` of a recording."""
    q = np.asarray(data.q, float)[rows][:, cols]
    dq = np.asarray(data.dq, float)[rows][:, cols]
    Q = model.configuration(np.asarray(data.base_position)[rows],
                            np.asarray(data.base_quaternion)[rows], q)
    V = model.velocity(Q, np.asarray(data.base_linear)[rows],
                       np.asarray(data.base_angular)[rows], dq)
    return Q, V


def _fit_momentum(model, fb, data, validate, cols, estimator, total_mass, rng, progress):
    from arm_dyn_id.identification.momentum import (MomentumProblem, fit_ga, fit_linear,
                                                    principal_parametrisation, theta_of)
    h0 = _get(fb, 'momentum', None)
    h0 = np.zeros(6) if h0 is None else np.asarray(h0, float)
    if h0.shape != (6,) or not np.all(np.isfinite(h0)):
        raise ConfigError(f'floating_base.momentum must be 6 numbers (linear N·s, angular '
                          f'N·m·s), got {h0.tolist()}')
    # the momentum is algebraic in the state (no derivatives): evenly thinned samples
    train, held = _split(len(data.t), validate)
    train = _thin(train)
    Q, V = _momentum_state(model, data, cols, train)
    source = data if validate is None else validate
    keep = _thin(held if validate is None else np.arange(len(validate.t)))
    Qh, Vh = _momentum_state(model, source, cols, keep)
    th = np.asarray(source.t, float)[keep] - source.t[0]
    param = principal_parametrisation(model)
    nominal = theta_of(param, model.parameters())
    _say(progress, f'momentum fit ({estimator}) of {len(param.names)} unknowns (mass and '
                   f'principal moments of {len(model.body_names)} bodies) on {len(train)} '
                   'samples')
    problem = MomentumProblem(model, Q, V, param, momentum=h0)
    if estimator == 'linear':
        fit = fit_linear(problem, nominal, total_mass)
    else:
        lo, hi = BOX[0] * nominal, BOX[1] * nominal
        fit = fit_ga(problem, nominal, total_mass, np.minimum(lo, hi), np.maximum(lo, hi),
                     np.random.default_rng(0) if rng is None else rng,
                     improved=estimator == 'ga', budget=GA_BUDGET, population=GA_POPULATION)
    A = model.momentum_regressor(Qh, Vh)
    ident, nom = A @ fit.phi, A @ model.parameters()
    e_id, e_nom = _rms(ident - h0), _rms(nom - h0)
    lin = (float(np.linalg.norm(e_id[:3])), float(np.linalg.norm(e_nom[:3])))
    ang = (float(np.linalg.norm(e_id[3:])), float(np.linalg.norm(e_nom[3:])))
    metrics = {
        'held_out': 'validation recording' if validate is not None else
                    f'last {HELD_OUT_FRACTION:.0%} of the recording',
        'samples': int(len(keep)),
        'momentum_rms': dict(zip(MOMENTUM_AXES, e_id.tolist())),
        'nominal_momentum_rms': dict(zip(MOMENTUM_AXES, e_nom.tolist())),
        'linear_momentum_rms': lin[0], 'nominal_linear_momentum_rms': lin[1],
        'angular_momentum_rms': ang[0], 'nominal_angular_momentum_rms': ang[1],
        'linear_vs_nominal': _ratio(*lin), 'angular_vs_nominal': _ratio(*ang),
    }
    held_series = {'kind': 'momentum', 't': th, 'measured': np.tile(h0, (len(keep), 1)),
                   'identified': ident, 'nominal': nom, 'labels': list(MOMENTUM_AXES)}
    summary = {'samples_fitted': int(len(train)), 'unknowns': list(param.names),
               'values': fit.theta.tolist(), 'nominal_values': nominal.tolist(),
               'identified': fit.identified.tolist(), 'combinations': list(fit.combinations),
               'std_errors': None if fit.std is None else fit.std.tolist(),
               'fitness_H': fit.fitness, 'evaluations': fit.nfev, 'fit_seconds': fit.seconds,
               'conserved_momentum': h0.tolist()}
    return fit, metrics, held_series, summary, problem


# ----------------------------------------------------------------------- ZMP -----
def _uniform(data):
    """The data on even time steps of at most 1 / ZMP_RATE s (stance_motion's filter needs
    even steps): resampled onto an even grid when the stamps are uneven, then averaged in
    blocks when faster. Returns (t from 0 (s), q, forces, sensor positions)."""
    t = np.asarray(data.t, float)
    t = t - t[0]                  # bag stamps are absolute: keep the steps' precision
    q = np.asarray(data.q, float)
    f = np.asarray(data.forces, float).reshape(len(t), -1)
    p = np.asarray(data.sensor_positions, float)
    series = [q, f] + ([p] if p.ndim == 3 else [])
    dt = np.diff(t)
    if np.ptp(dt) > 1e-6 * dt.mean() + 1e-9:
        grid = np.linspace(t[0], t[-1], len(t))
        series = [np.stack([np.interp(grid, t, c) for c in x.reshape(len(t), -1).T],
                           1).reshape(x.shape) for x in series]
        t = grid
    block = int(np.floor(1.0 / ZMP_RATE / (t[1] - t[0]) + 1e-6))
    if block > 1:
        n = len(t) // block * block
        t, *series = [x[:n].reshape((n // block, block) + x.shape[1:]).mean(axis=1)
                      for x in [t] + series]
    return t, series[0], series[1], series[2] if p.ndim == 3 else p


def contact_steady(t, forces, window=ZMP_WINDOW, fraction=CONTACT_FRACTION):
    """Samples away from contact changes, (N,) bool.

    A foot touching down or lifting off (a sole sensor's share of the load crossing
    ``fraction``) is impulsive: the smoothed joint motion cannot follow it, so samples
    within ``window`` seconds of a change, and within half a window of either end of
    the recording (the filter's edges), are left out of the ZMP fit and its score.
    """
    t = np.asarray(t, float)
    f = np.maximum(np.asarray(forces, float), 0.0)
    on = f > fraction * np.maximum(f.sum(axis=1, keepdims=True), 1e-12)
    keep = (t >= t[0] + window / 2) & (t <= t[-1] - window / 2)
    for k in np.flatnonzero(np.any(on[1:] != on[:-1], axis=1)) + 1:
        keep &= np.abs(t - t[k]) > window
    return keep


def _sensor_frames(data, k):
    frames = getattr(data, 'sensor_frames', None)
    if frames is None:
        return None
    frames = tuple(frames)
    if len(frames) != k:
        raise DataError(f'{k} sole sensors but {len(frames)} sensor frames')
    return frames


def _world_sensors(model, Q, positions, frames):
    """Sensor positions (N, k, 3) in the world: local ones moved by forward kinematics."""
    if frames is None:
        return positions
    import pinocchio as pin
    ids = [model.frame_id(f) for f in frames]
    out = np.empty((len(Q), len(frames), 3))
    for n, q in enumerate(Q):
        pin.framesForwardKinematics(model.model, model.data, q)
        for s, (fid, p) in enumerate(zip(ids, positions)):
            out[n, s] = model.data.oMf[fid].act(p)
    return out


def _zmp_data(model, fb, data, cols, what):
    """Q, V, A from the joint angles with the stance foot still, the measured ZMP, and
    the samples away from contact changes (:func:`contact_steady`)."""
    import pinocchio as pin

    from arm_dyn_id.identification.zmp import stance_motion
    from arm_dyn_id.model.floating import zmp_from_sensors
    if data.sensor_positions is None:
        raise DataError(f'{what} has no sole sensor positions')
    foot = _get(fb, 'stance_foot')
    pose = _get(fb, 'stance_foot_pose', None)
    if not foot or pose is None:
        raise ConfigError('floating_base.stance_foot and stance_foot_pose are needed by the '
                          'zmp method: the frame of the foot that stands still and its pose '
                          'in the world')
    pose = np.asarray(pose, float)
    try:
        model.frame_id(foot)
    except JointNameError as exc:
        raise ConfigError(f'floating_base.stance_foot: {exc}') from None
    if pose.shape != (7,) or abs(np.linalg.norm(pose[3:]) - 1) > 1e-3:
        raise ConfigError(f'floating_base.stance_foot_pose {pose.tolist()} must be x y z qx '
                          'qy qz qw with a unit quaternion')
    t, q, f, p = _uniform(data)
    frames = _sensor_frames(data, f.shape[1])
    foot_pose = pin.XYZQUATToSE3(pose)
    Q, V, A = stance_motion(model, t, q[:, cols], foot, foot_pose, window=ZMP_WINDOW)
    world = _world_sensors(model, Q, p, frames)
    steady = contact_steady(t, f)
    if steady.sum() < 16:
        raise DataError(f'{what} has {int(steady.sum())} samples away from contact changes '
                        f'(a foot touching down or lifting, and {ZMP_WINDOW / 2:g} s at '
                        'either end): record a longer stance')
    z = np.full((len(t), 2), np.nan)
    z[steady] = zmp_from_sensors(f[steady], world[steady])
    return t[steady], Q[steady], V[steady], A[steady], z[steady], len(t)


def _zmp_problem():
    from arm_dyn_id.identification.zmp import ZmpProblem

    class Problem(ZmpProblem):
        """seed 003's equations with the stricter rank threshold ZMP_RANK_TOLERANCE."""

        def base(self, Phi, scales, tolerance=ZMP_RANK_TOLERANCE):
            return super().base(Phi, scales, max(tolerance, ZMP_RANK_TOLERANCE))
    return Problem


def _bounds(nominal):
    lo, hi = BOX[0] * nominal, BOX[1] * nominal
    lower, upper = np.minimum(lo, hi), np.maximum(lo, hi)
    zero = nominal == 0
    lower[zero], upper[zero] = -0.1, 0.1
    return lower, upper


def _fit_zmp(model, fb, data, validate, cols, estimator, total_mass, progress):
    from arm_dyn_id.identification import zmp as zmpid
    try:
        types = zmpid.LinkTypes(model)
    except JointNameError as exc:
        raise ConfigError(f'the zmp method fits seed 003\'s link types (torso, thighs, '
                          f'shanks, feet) and {exc}') from None
    t, Q, V, A, z, total = _zmp_data(model, fb, data, cols, 'the recording')
    _say(progress, f'{len(t)} of {total} samples ({1 / np.median(np.diff(t)):.0f} Hz) away from '
                   f'contact changes and the ends; {total - len(t)} left out')
    train, held = _split(len(Q), validate)
    if validate is not None:
        th, Qh, Vh, Ah, zh, _ = _zmp_data(model, fb, validate, cols,
                                          'the validation recording')
    else:
        th, Qh, Vh, Ah, zh = t[held], Q[held], V[held], A[held], z[held]
    train = _thin(train)
    _say(progress, f'ZMP fit ({estimator}) of {len(types.names)} unknowns (masses and CoM '
                   f'offsets of {len(types.types)} link types) on {len(train)} samples')
    problem = _zmp_problem()(model, Q[train], V[train], A[train], z[train], types)
    lower, upper = _bounds(types.nominal)
    fitter = zmpid.fit_newton if estimator == 'newton' else zmpid.fit_linear
    try:
        fit = fitter(problem, total_mass, types.nominal, lower, upper)
    except ConfigError as exc:
        raise ConfigError(f'floating_base.total_mass: {exc}') from None
    keep = _thin(np.arange(len(Qh)))
    W = model.wrench_regressor(Qh[keep], Vh[keep], Ah[keep])
    ident, nom = zmp(W, fit.phi), zmp(W, model.parameters())
    d_id = np.linalg.norm(ident - zh[keep], axis=1)
    d_nom = np.linalg.norm(nom - zh[keep], axis=1)
    metrics = {
        'held_out': 'validation recording' if validate is not None else
                    f'last {HELD_OUT_FRACTION:.0%} of the recording',
        'samples': int(len(keep)),
        'zmp_rms_mm': 1000 * float(_rms(d_id)),
        'nominal_zmp_rms_mm': 1000 * float(_rms(d_nom)),
        'zmp_rms_mm_per_axis': dict(zip(('x', 'y'), (1000 * _rms(ident - zh[keep])).tolist())),
        'zmp_vs_nominal': _ratio(_rms(d_id), _rms(d_nom)),
        'training_zmp_rms_mm': 1000 * fit.zmp_rms,
    }
    held_series = {'kind': 'zmp', 't': th[keep], 'measured': zh[keep], 'identified': ident,
                   'nominal': nom, 'labels': ['x', 'y']}
    summary = {'samples_fitted': int(len(train)), 'unknowns': list(types.names),
               'values': fit.Phi.tolist(), 'nominal_values': types.nominal.tolist(),
               'identified': fit.identified.tolist(), 'iterations': fit.iterations,
               'newton_steps': fit.newton_steps, 'descent_steps': fit.descent_steps,
               'fit_seconds': fit.seconds,
               'stance_foot': _get(fb, 'stance_foot')}
    return fit, metrics, held_series, summary, problem
