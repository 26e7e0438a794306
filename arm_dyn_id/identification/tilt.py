"""A base that is not level: how much of a fit's torques gravity tilted from the URDF's
direction explains, and the gravity vector they read.

A base that is not level loads a first joint about a vertical axis, which an upright
URDF never does, and bends the other joints' gravity: a fit that assumes it level writes
a model wrong on both (a UR5 on a base tilted 4°: shoulder_pan's gravity, up to 4.7 N·m,
missed whole), or is refused for a held-out quality it cannot reach. For a small tilt
the links' torque under the true gravity is theirs under the URDF's plus their torque
under the tilt's horizontal part, linear in it: the model's gravity torques along two
directions square to the URDF's gravity (:func:`tilt_columns`) are fitted beside the
model's own columns (:func:`column_gain`), and their coefficients read the tilt
(:func:`tilt_reading`).

- a full-dynamics fit (:func:`gravity_tilt`): the fit's residual first (cheap), then,
  beyond :data:`TILT_SCREEN`, the record refitted with the two columns
  (:func:`arm_dyn_id.identification.full_dynamics.tilt_refit`);
- a gravity fit of sweep pairs or quasi-static samples (:func:`sweep_tilt`): its
  samples refitted with the two columns, judged also by a jackknife over its pairs
  (their held joints keep a friction that differs from hold to hold, which the share
  removed alone cannot tell from a tilt).

:func:`tilt_message` says a tilt read beyond the thresholds, with the vector to give.
Nothing here prints or reads files.
"""

import numpy as np

#: A full fit's tilt of at least this many degrees that removes :data:`TILT_SHARE` of the
#: weighted residual is said (a refusal names it first, a written model carries it as a
#: warning). A UR5 on a base tilted 3, 6 and 10° read 3.1, 7.1 and 10.3°, removing
#: 47-88 %; right records removed at most 4.3 % (docs/benchmarks.md).
TILT_DEGREES = 1.0
TILT_SHARE = 0.2
#: ... and no more than this many: the reading is a small tilt's linear part, and one
#: beyond this is not a tilt it can read (the real UR10e's single-joint record of its
#: wrist_3, level, read 90°, and its refusal for too little excitation was put after a
#: tilt sentence).
TILT_MAX = 30.0
#: The residual's first reading (no refit) beyond which the refit is made: right records
#: read 0.07-0.16° removing under 1 %, tilted ones 0.7-3.8° removing 5-23 %.
TILT_SCREEN = (0.3, 0.02)
#: Samples of that first reading and of a gravity fit's reading, about (evenly spaced;
#: up to twice as many).
TILT_SAMPLES = 2000
#: A gravity fit's tilt (sweep pairs or quasi-static samples) is said from
#: :data:`TILT_DEGREES` that remove this share of its weighted residual ...
SWEEP_TILT_SHARE = 0.1
#: ... and stand from level beyond chance at this level: the two coefficients' jackknife
#: distance (over the pairs) judged as Hotelling's T² with the pairs' count, an F(2, k-2)
#: tail (:func:`tilt_significance`): with few pairs the jackknife covariance is itself
#: uncertain (at 2 poses a joint, 12 pairs, T² must reach 33, a z of 5.7; at 30 pairs, a
#: z of 4.3). A review found level UR5 and humanoid sweeps at 1-2 poses a joint read 3-6°
#: at z 4.4-5.2, said under a plain z of 4 (docs/benchmarks.md).
SWEEP_TILT_P = 1e-3
#: ... from at least this many pairs.
SWEEP_TILT_PAIRS = 8


def square_to(vector):
    """Two unit vectors (3,) square to ``vector`` and to each other."""
    down = np.asarray(vector, dtype=float) / np.linalg.norm(vector)
    first = np.cross(down, np.eye(3)[int(np.argmin(np.abs(down)))])
    first /= np.linalg.norm(first)
    return first, np.cross(down, first)


def tilt_columns(model, q):
    """(N, n, 2): ``model``'s gravity torques at ``q`` along the two directions
    :func:`square_to` its gravity, at its magnitude: the torques a small tilt's
    horizontal part adds, linear in it (:func:`tilt_reading` reads their coefficients).
    ``model``: a full-dynamics or a gravity model (``gravity_torques_along``)."""
    g = np.asarray(model.robot.gravity_vector, dtype=float)
    magnitude = float(np.linalg.norm(g))
    return np.stack([model.gravity_torques_along(q, magnitude * e) for e in square_to(g)],
                    axis=2)


def tilt_reading(gravity, coef, removed):
    """``{degrees, removed, gravity_vector}`` of a tilt read as ``coef`` (2,) along
    :func:`square_to` ``gravity``'s two directions (the horizontal part over the
    magnitude)."""
    g = np.asarray(gravity, dtype=float)
    magnitude = float(np.linalg.norm(g))
    first, second = square_to(g)
    sideways = float(np.hypot(*coef))
    read = np.sqrt(max(1.0 - sideways ** 2, 0.0)) * g / magnitude + \
        coef[0] * first + coef[1] * second
    return {'degrees': float(np.degrees(np.arcsin(min(sideways, 1.0)))),
            'removed': float(removed),
            'gravity_vector': (magnitude * read / np.linalg.norm(read)).tolist()}


def _solve(A, b):
    """Least squares with the columns of ``A`` brought to unit norm first: a joint whose
    residual is its noise alone (a first joint about a vertical axis, its sweeps'
    constants eliminated) weighs orders of magnitude above the others, and lstsq's cut-off
    would drop the model's columns."""
    norms = np.linalg.norm(A, axis=0)
    norms[~(norms > 0)] = 1.0
    return np.linalg.lstsq(A / norms, b, rcond=None)[0] / norms


def column_gain(W, G, target, groups=None, tilt_weights=False, use=None):
    """The two columns ``G`` fitted beside a model's own ``W`` by weighted least squares,
    each joint weighted by the spread of its residual without them (with them:
    ``tilt_weights``).

    Parameters
    ----------
    W : ndarray, (M, n, p)
        The model's columns per sample and joint.
    G : ndarray, (M, n, 2)
        The two columns :func:`tilt_columns`.
    target : ndarray, (M, n)
        N·m. Samples with a value that is not finite are left out.
    groups : ndarray of int, (M,), optional
        The samples' groups (pairs, holds) for a jackknife of the two coefficients.
    tilt_weights : bool, optional
        Weight each joint by the spread of its residual with the two columns fitted.
    use : ndarray of bool, (M, n), optional
        The (sample, joint) torques to fit; the others are left out.

    Returns
    -------
    coef : ndarray, (2,)
    removed : float
        Share of the weighted residual without the two columns that they remove.
    z : float or None
        The two coefficients' distance from zero in jackknife standard errors (the
        Mahalanobis norm over the groups; None without ``groups`` or with fewer than 3).
    groups : int
        How many groups the jackknife had (0 without ``groups``).
    """
    rows = (np.all(np.isfinite(target), axis=1) & np.all(np.isfinite(W), axis=(1, 2)) &
            np.all(np.isfinite(G), axis=(1, 2)))
    W, G, target = W[rows], G[rows], target[rows]
    n, p = target.shape[1], W.shape[2]
    if use is not None:
        # a torque left out is a row of zeros: it adds nothing to either side
        use = np.asarray(use, dtype=bool)[rows]
        W, G, target = W * use[:, :, None], G * use[:, :, None], target * use
    else:
        use = np.ones(target.shape, dtype=bool)
    if tilt_weights:
        both = np.concatenate([W, G], axis=2).reshape(-1, p + 2)
        residual = target - (both @ _solve(both, target.ravel())).reshape(target.shape)
    else:
        plain = np.linalg.lstsq(W.reshape(-1, p), target.ravel(), rcond=None)[0]
        residual = target - W @ plain
    counts = use.sum(axis=0)
    mean = np.where(use, residual, 0.0).sum(axis=0) / np.maximum(counts, 1)
    spread = np.sqrt(np.where(use, (residual - mean) ** 2, 0.0).sum(axis=0) /
                     np.maximum(counts, 1))
    floor = 1e-12 * max(float(spread.max()), 1e-300)
    w = np.where(counts > 0, 1.0 / np.maximum(spread, floor), 0.0)
    Ww = (W * w[None, :, None]).reshape(-1, p)
    Gw = (G * w[None, :, None]).reshape(-1, 2)
    y = (target * w).ravel()

    def fit(keep):
        A, b = Ww[keep], y[keep]
        without = b - A @ _solve(A, b)
        both = np.hstack([A, Gw[keep]])
        coef = _solve(both, b)
        rss0, rss1 = float(without @ without), float(np.sum((b - both @ coef) ** 2))
        return coef[-2:], (1.0 - rss1 / rss0 if rss0 > 0 else 0.0)

    coef, removed = fit(np.ones(len(y), dtype=bool))
    z, k = None, 0
    if groups is not None:
        member = np.repeat(np.asarray(groups)[rows], n)
        labels = np.unique(member)
        if len(labels) >= 3:
            dropped = np.array([fit(member != g)[0] for g in labels])
            k = len(labels)
            centred = dropped - dropped.mean(axis=0)
            covariance = (k - 1) / k * centred.T @ centred
            try:
                z = float(np.sqrt(max(coef @ np.linalg.solve(covariance, coef), 0.0)))
            except np.linalg.LinAlgError:
                z = None
    return coef, removed, z, k


def gravity_tilt(fitted, robot):
    """How much of a full fit's torques gravity tilted from the URDF's direction explains.

    First the fit's residual (each joint weighted by its spread) is regressed on
    :func:`tilt_columns`: cheap, but it reads low, as the fitted parameters bent to take
    some of it up. Beyond :data:`TILT_SCREEN` the record is refitted with those two
    columns beside the model's own
    (:func:`~arm_dyn_id.identification.full_dynamics.tilt_refit`).

    Parameters
    ----------
    fitted : arm_dyn_id.identification.pipeline.FullPipelineFit
    robot : RobotModel

    Returns
    -------
    dict or None
        ``degrees`` (the tilt read), ``removed`` (share of the weighted residual it
        removes), ``gravity_vector`` (m/s², the URDF's root frame: the gravity it reads),
        ``by`` ('residual' or 'refit'); None when the record has too few finite samples.
    """
    from arm_dyn_id.identification.full_dynamics import tilt_refit
    model, prepared = fitted.model, fitted.prepared
    residual = prepared.tau - fitted.predicted
    rows = np.all(np.isfinite(residual), axis=1) & np.all(np.isfinite(prepared.q), axis=1)
    g = np.asarray(model.robot.gravity_vector, dtype=float)
    if rows.sum() < 10 or not np.linalg.norm(g) > 0:
        return None
    # gravity torques change slowly: at most TILT_SAMPLES evenly spaced samples
    index = np.flatnonzero(rows)
    index = index[::max(1, len(index) // TILT_SAMPLES)]
    r = residual[index]
    weights = 1.0 / np.maximum(np.std(r, axis=0), 1e-12)
    A = (tilt_columns(model, prepared.q[index]) * weights[None, :, None]).reshape(-1, 2)
    y = (r * weights).ravel()
    coef = np.linalg.lstsq(A, y, rcond=None)[0]
    total = float(y @ y)
    found = {**tilt_reading(g, coef, 1.0 - float(np.sum((y - A @ coef) ** 2)) / total
                            if total > 0 else 0.0), 'by': 'residual'}
    if (found['degrees'] >= TILT_SCREEN[0] or found['removed'] >= TILT_SCREEN[1]) and \
            fitted.record is not None:
        found = {**tilt_refit(robot, model, *fitted.record), 'by': 'refit'}
    return found


def sweep_tilt(fitted, robot, jackknife=False):
    """How much of a gravity fit's samples (its sweep pairs' forward/backward averages, or
    its quasi-static samples; held out and fitted) gravity tilted from the URDF's
    direction explains: the samples refitted with the model's gravity base regressor and
    :func:`tilt_columns`, the two coefficients judged by a jackknife over the pairs. On
    sweep pairs, what no gravity explains is eliminated first
    (:func:`_without_pair_constants`: the held joints' offsets over each pair, the swept
    joints' constants), the own sweeps of a joint the URDF barely loads are left out
    (:func:`_not_own_sweeps_of_unloaded`) and each joint is weighted by its residual with
    the tilt fitted; quasi-static samples are read as they are, each joint weighted by its
    residual without it.

    Parameters
    ----------
    fitted : arm_dyn_id.identification.pipeline.GravityPipelineFit
    robot : RobotModel
    jackknife : bool, optional
        Compute the jackknife on every record (a benchmark's table), not only where the
        tilt may be said.

    Returns
    -------
    dict or None
        ``degrees``, ``removed``, ``gravity_vector`` as :func:`gravity_tilt`, ``z`` (the
        jackknife standard errors from level; None below :data:`TILT_DEGREES`,
        :data:`SWEEP_TILT_SHARE` or :data:`SWEEP_TILT_PAIRS`, where it is not needed,
        unless ``jackknife``),
        ``pairs``, ``p`` (:func:`tilt_significance`) and ``by`` ('sweeps'); None with too
        few finite samples.
    """
    from arm_dyn_id.identification.pairing import PairedData, join_paired, thinned
    model = fitted.model
    g = np.asarray(model.robot.gravity_vector, dtype=float)
    if not fitted.cases or not np.linalg.norm(g) > 0:
        return None
    joined = join_paired([case[0] for case in fitted.cases.values()])
    rows = np.all(np.isfinite(joined.q), axis=1) & np.all(np.isfinite(joined.tau), axis=1)
    if rows.sum() < 10:
        return None
    joined = thinned(PairedData(**{k: v[rows] for k, v in vars(joined).items()}),
                     TILT_SAMPLES)
    q, tau, groups = joined.q, joined.tau, joined.pair_id
    W = model.base.reduce(robot.gravity_regressor(q))
    G = tilt_columns(model, q)
    sweeps = not (model.metadata.get('fit') or {}).get('quasi_static')
    use = None
    if sweeps:
        W, G, tau = _without_pair_constants(W, G, tau, joined)
        use = _not_own_sweeps_of_unloaded(robot, joined)
    options = {'tilt_weights': sweeps, 'use': use}
    coef, removed = column_gain(W, G, tau, **options)[:2]
    z, pairs = None, len(np.unique(groups))
    if jackknife or (np.degrees(np.arcsin(min(float(np.hypot(*coef)), 1.0))) >= TILT_DEGREES
                     and removed >= SWEEP_TILT_SHARE and pairs >= SWEEP_TILT_PAIRS):
        # a jackknife over the pairs only where it may be said (30-40 refits)
        z, pairs = column_gain(W, G, tau, groups, **options)[2:]
    return {**tilt_reading(g, coef, removed), 'z': z, 'pairs': int(pairs),
            'p': tilt_significance(z, pairs), 'by': 'sweeps'}


def _not_own_sweeps_of_unloaded(robot, paired):
    """(M, n) bool: every torque of sweep pairs (``paired``) but a joint's own sweeps where
    the URDF barely loads that joint (a gravity RMS over the record's poses under
    :data:`~arm_dyn_id.model.robot.CARRY_SHARE` of the most loaded joint's,
    :func:`~arm_dyn_id.model.robot.carries_gravity`: a first joint about a vertical
    axis, a UR5's wrists).

    Such a joint's torque as it sweeps follows whatever depends on its own angle: a
    cable's spring, an eccentric load, cogging. Weighted by its residual once the tilt
    is fitted (nothing else explains it), a 0.5-2 N·m spring on a level UR5's
    shoulder_pan read as a tilt of 1.0-1.6° and was said on 6 of 42 records (a review).
    Held while the other joints sweep, its torque changes only with the arm's horizontal
    reach under a tilt: that part is kept."""
    from arm_dyn_id.identification.gravity import still_joints
    from arm_dyn_id.model.robot import carries_gravity
    loaded = carries_gravity(np.sqrt(np.mean(robot.gravity_torques(paired.q) ** 2, axis=0)))
    return still_joints(paired) | loaded[None, :]


def _without_pair_constants(W, G, tau, paired):
    """The model's columns ``W``, the tilt's ``G`` and τ of sweep pairs (``paired``) with
    what no gravity explains eliminated as free unknowns, as the effort scales' reading
    does (:func:`~arm_dyn_id.identification.gravity.pair_effort_scales`): each held
    joint's offset over each pair (the friction it holds, which changes from hold to hold)
    and each swept joint's constant over its pairs (friction stronger one way, an effort
    offset). Read with them, a level UR5 or Panda swept at 2 poses a joint read a tilt of
    1.5-3°, as much as one tilted 2-4°; without them, 0.0-0.1° against 1.2-4.3°
    (docs/benchmarks.md)."""
    from arm_dyn_id.identification.gravity import still_joints, without_pair_constants
    # every swept joint's constant, at one pose too: a tilt is read from how the torque
    # varies
    both, tau = without_pair_constants(np.concatenate([W, G], axis=2), tau, paired,
                                       ~still_joints(paired))
    return both[:, :, :-2], both[:, :, -2:], tau


def tilt_significance(z, pairs):
    """The chance that level sweeps read a jackknife distance ``z`` or more over ``pairs``
    pairs: Hotelling's T² = z² with the covariance from ``pairs`` groups, whose
    ``(k - 2) / (2 (k - 1)) T²`` is F(2, k - 2), the tail ``(1 + 2x / m)^(-m / 2)``.
    None without a distance or with under 3 pairs."""
    if z is None or pairs < 3:
        return None
    m = pairs - 2
    x = (pairs - 2) / (2.0 * (pairs - 1)) * z * z
    return float((1.0 + 2.0 * x / m) ** (-m / 2.0))


def tilt_message(tilt):
    """The sentence of a tilt :func:`gravity_tilt` or :func:`sweep_tilt` read between
    :data:`TILT_DEGREES` and :data:`TILT_MAX`, beyond the share (:data:`TILT_SHARE`, or
    :data:`SWEEP_TILT_SHARE` and :data:`SWEEP_TILT_P` for a gravity fit), else None."""
    sweeps = bool(tilt) and tilt.get('by') == 'sweeps'
    if not tilt or tilt['degrees'] < TILT_DEGREES or tilt['degrees'] > TILT_MAX or \
            tilt['removed'] < (SWEEP_TILT_SHARE if sweeps else TILT_SHARE):
        return None
    if sweeps and not (tilt.get('p') is not None and tilt['p'] <= SWEEP_TILT_P):
        return None
    # full precision: its length is the fit's gravity, which a config's `gravity` must match
    vector = ','.join(f'{v:.9g}' for v in tilt['gravity_vector'])
    return (f"the torques follow gravity tilted about {tilt['degrees']:.1f}° from the "
            f"fit's (gravity along it removes {100 * tilt['removed']:.0f} % of the fit's "
            f'residual): is the base not level? A tilted mount fitted as level leaves the '
            f'model wrong; give the mount\'s gravity (m/s^2 in the URDF\'s root frame, '
            f'config key gravity_vector) and fit again. This record reads about '
            f'--gravity-vector={vector}, a first estimate from a small tilt\'s linear part: '
            'fit again with it until this is no longer said')


def read_tilt(reader, fitted, robot):
    """``reader(fitted, robot)`` guarded: a reading that fails must not stop a fit the
    gate passed (None then)."""
    try:
        return reader(fitted, robot)
    except (ValueError, ArithmeticError, LookupError, MemoryError):   # LinAlgError too
        return None


__all__ = ['SWEEP_TILT_P', 'SWEEP_TILT_PAIRS', 'SWEEP_TILT_SHARE', 'TILT_DEGREES',
           'TILT_MAX', 'TILT_SAMPLES', 'TILT_SCREEN', 'TILT_SHARE', 'column_gain', 'gravity_tilt',
           'read_tilt', 'square_to', 'sweep_tilt', 'tilt_columns', 'tilt_message',
           'tilt_reading', 'tilt_significance']
