"""Pre-flight check of measured joint torques against a nominal URDF's gravity.

Before a fit is trusted, the torques a driver reports should agree with the
gravity torques G(q) of the arm's nominal URDF wherever the arm is still or
moves slowly (there the measured torque is G(q) plus friction and noise). Per
joint ``i`` the measured torque is fitted by least squares as::

    tau_i ≈ s_i G_i(q) + b_i + c_i sign(q̇_i)

with ``s_i`` the scale (the torque-constant error: measured / nominal), ``b_i``
a constant offset (N·m) and ``c_i`` the Coulomb friction of slow moves (only
where the joint moves). What each joint's numbers mean:

- ``s_i`` near -1: the joint's sign is reversed (a common fault of new drivers);
- ``|s_i|`` far from 1: the torque constant k_e is off by that factor; near k_e
  (or 1/k_e) the effort is joint torque read as motor current (or the reverse);
- measured joint ``i`` explained much better by nominal joint ``j``'s gravity
  than by its own: the two joints' data look swapped;
- a joint that carries almost no gravity torque over the data (a last wrist
  joint about a vertical axis) cannot be checked here and is reported so,
  never flagged.

Everything here takes arrays of already selected quasi-static samples (see
:func:`arm_dyn_id.data.segmentation.quasi_static_mask`); nothing is printed.
"""

from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import DataError

#: status of one joint, worst last
OK, WARN, FAIL, UNTESTABLE = 'ok', 'warn', 'fail', 'untestable'

#: tolerances of :func:`check_gravity` (fractions unless said otherwise)
DEFAULTS = {
    'scale_fail': 0.30,      # |s| outside [0.7, 1.3]: fail
    'scale_warn': 0.10,      # |s| outside [0.9, 1.1]: warning
    'min_load': 0.01,        # RMS nominal gravity below this x the arm's largest: untestable
    'min_spread': 0.10,      # std of G_i below this x its RMS: offset not separable
    'max_scale_se': 0.10,    # scale standard error above this: untestable
    'offset_warn': 0.10,     # |b| above this x max |G_i|: warning
    'swap_ratio': 0.5,       # residual with G_j below this x with G_i: swapped
    'moving_speed': 0.01,    # rad/s: above it, Coulomb friction takes the sign of q̇
    'effective_samples': 200,  # independent samples assumed at most (correlated data)
}


@dataclass(frozen=True)
class JointCheck:
    """What the check found on one joint (torques in N·m).

    Attributes
    ----------
    joint : str
    status : {'ok', 'warn', 'fail', 'untestable'}
    verdict : str
        One line for the table ('ok', 'sign flipped', 'scale off x2.01', ...).
    fix : str
        What to change, or ''.
    scale, scale_se : float
        Least-squares measured / nominal gravity ratio and its standard error
        (NaN when untestable).
    offset : float
        Constant offset (N·m; 0 when it could not be separated from the scale).
    offset_current : float
        ``offset`` over the torque constant (A), when a constant was given.
    friction : float
        Coulomb friction fitted on slow moves (N·m; 0 when the joint did not move).
    load_rms, load_max : float
        RMS and maximum of |G_i| over the samples (how much gravity the joint carries).
    residual_rms : float
        RMS of the fit's residual.
    swapped_with : str or None
        The joint whose nominal gravity explains this joint's torque far better.
    """

    joint: str
    status: str
    verdict: str
    fix: str = ''
    scale: float = float('nan')
    scale_se: float = float('nan')
    offset: float = 0.0
    offset_current: float = float('nan')
    friction: float = 0.0
    load_rms: float = 0.0
    load_max: float = 0.0
    residual_rms: float = float('nan')
    swapped_with: str = None

    def to_dict(self):
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class CheckResult:
    """The per-joint checks and the overall verdict.

    Attributes
    ----------
    joints : tuple of JointCheck
    status : {'ok', 'warn', 'fail', 'untestable'}
        'fail' if any joint failed; 'untestable' if no joint could be checked.
    verdict : str
        One line summing up.
    n_samples : int
        Quasi-static samples used.
    effort : {'current', 'torque'}
        What the effort was taken to be.
    """

    joints: tuple
    status: str
    verdict: str
    n_samples: int
    effort: str = 'current'
    options: dict = field(default_factory=dict)

    @property
    def failed(self):
        return self.status == FAIL

    def table(self):
        """The aligned text table (joint names of any length) and the overall verdict."""
        head = ('joint', 'scale', '±', 'offset N·m', 'friction', '|G| max', 'verdict')
        rows = []
        for c in self.joints:
            rows.append((c.joint, _num(c.scale, '{:+.3f}'), _num(c.scale_se, '{:.3f}'),
                         _num(c.offset, '{:+.3f}') if c.status != UNTESTABLE else '-',
                         _num(c.friction, '{:.3f}') if c.status != UNTESTABLE else '-',
                         f'{c.load_max:.3g}', c.verdict))
        widths = [max(len(r[k]) for r in rows + [head]) for k in range(len(head))]
        left = (0, len(head) - 1)

        def line(r):
            return '  '.join(v.ljust(w) if k in left else v.rjust(w)
                             for k, (v, w) in enumerate(zip(r, widths))).rstrip()
        out = [line(head), line(tuple('-' * w for w in widths))]
        out += [line(r) for r in rows]
        fixes = [f'  {c.joint}: {c.fix}' for c in self.joints if c.fix]
        if fixes:
            out += ['', 'to fix:'] + fixes
        out += ['', f'{self.status.upper()}: {self.verdict}']
        return '\n'.join(out)

    def to_dict(self):
        return {'status': self.status, 'verdict': self.verdict, 'n_samples': self.n_samples,
                'effort': self.effort, 'options': dict(self.options),
                'joints': {c.joint: c.to_dict() for c in self.joints}}


def _num(value, fmt):
    return fmt.format(value) if np.isfinite(value) else '-'


def nominal_gravity(robot, q):
    """G(q) of a :class:`~arm_dyn_id.model.robot.RobotModel` for many samples.

    Parameters
    ----------
    robot : RobotModel
    q : ndarray, (N, n)
        Joint angles (rad) in the order of ``robot.joint_names``.

    Returns
    -------
    ndarray, (N, n)
        Gravity torques (N·m) at the robot's gravity vector.
    """
    Y = robot.gravity_regressor_joint_major(np.atleast_2d(q))     # (n, p, N)
    return np.einsum('jpN,p->Nj', Y, robot.parameters('gravity'))


def _fit(y, columns):
    """Least squares y ≈ X c; (coefficients, residual RMS, standard errors)."""
    X = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    res = y - X @ coef
    rms = float(np.sqrt(np.mean(res ** 2)))
    return coef, rms, X


def _se(X, rms, n_eff):
    """Standard errors of the coefficients with at most ``n_eff`` independent samples."""
    N = X.shape[0]
    try:
        cov = np.linalg.inv(X.T @ X) * rms ** 2 * N / max(1, min(N, n_eff) - X.shape[1])
    except np.linalg.LinAlgError:
        return np.full(X.shape[1], np.inf)
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


def check_gravity(joints, gravity, tau, dq=None, torque_constants=None, effort='current',
                  options=None):
    """Check measured torques against nominal gravity torques, joint by joint.

    Parameters
    ----------
    joints : sequence of str, (n,)
    gravity : ndarray, (N, n)
        Nominal G(q) (N·m) at the quasi-static samples (:func:`nominal_gravity`).
    tau : ndarray, (N, n)
        Measured joint torques at the same samples (N·m): ``k_e · current`` for
        ``effort='current'``, the effort itself for ``effort='torque'``.
    dq : ndarray, (N, n), optional
        Joint velocities (rad/s); with them a Coulomb term is fitted where the
        joint moves, so slow moves in both directions do not bias the offset.
    torque_constants : array_like, (n,), optional
        The k_e (N·m/A) used to make ``tau`` from the current; lets the check
        tell effort that is torque from effort that is current, and give the
        offset in A.
    effort : {'current', 'torque'}
        What the driver's effort was taken to be.
    options : dict, optional
        Tolerances overriding :data:`DEFAULTS`.

    Returns
    -------
    CheckResult

    Raises
    ------
    DataError
        Shapes disagree, too few samples, non-finite values, or no gravity at all.
    """
    opt = dict(DEFAULTS, **(options or {}))
    joints = tuple(joints)
    G = np.asarray(gravity, dtype=float)
    T = np.asarray(tau, dtype=float)
    n = len(joints)
    if G.ndim != 2 or G.shape != T.shape or G.shape[1] != n:
        raise DataError(f'gravity {G.shape} and tau {T.shape} must both be (N, {n}) for '
                        f'joints {list(joints)}')
    N = G.shape[0]
    if N < 10:
        raise DataError(f'only {N} quasi-static samples: hold the arm still at a few poses '
                        '(or move it slowly) while recording')
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(T))):
        raise DataError('the torques or the joint angles hold NaN or inf')
    if effort not in ('current', 'torque'):
        raise DataError(f'effort {effort!r} must be current or torque')
    k_e = None if torque_constants is None else np.asarray(torque_constants, dtype=float)
    if k_e is not None and k_e.shape != (n,):
        raise DataError(f'{k_e.size} torque constants for {n} joints {list(joints)}')
    if dq is None:
        fric = np.zeros_like(T)
    else:
        dq = np.asarray(dq, dtype=float)
        fric = np.where(np.abs(np.nan_to_num(dq)) > opt['moving_speed'], np.sign(dq), 0.0)
    gmax = float(np.max(np.abs(G)))
    if gmax <= 0:
        raise DataError('the nominal gravity torques are zero at every sample: check the '
                        'URDF\'s masses and the gravity direction')
    load_rms = np.sqrt(np.mean(G ** 2, axis=0))
    load_max = np.max(np.abs(G), axis=0)
    spread = np.std(G, axis=0)
    testable = load_rms >= opt['min_load'] * gmax
    separable = spread >= opt['min_spread'] * load_rms
    ones = np.ones(N)

    def design(i, j):
        cols = [G[:, j]]
        if separable[j]:
            cols.append(ones)
        if np.any(fric[:, i]):
            cols.append(fric[:, i])
        return cols

    # residual of measured joint i explained by nominal joint j's gravity
    fits = {}
    resid = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            if testable[j]:
                fits[i, j] = _fit(T[:, i], design(i, j))
                resid[i, j] = fits[i, j][1]
    own = np.empty(n)
    for i in range(n):
        if testable[i]:
            own[i] = resid[i, i]
        else:   # what is left around a constant (and friction): nothing to explain
            cols = [ones] + ([fric[:, i]] if np.any(fric[:, i]) else [])
            own[i] = _fit(T[:, i], cols)[1]
    floor = 0.02 * gmax
    swapped = [None] * n
    for i in range(n):
        others = [j for j in range(n) if j != i and testable[j]]
        if not others:
            continue
        j = min(others, key=lambda k: resid[i, k])
        if resid[i, j] < opt['swap_ratio'] * own[i] and own[i] - resid[i, j] > floor:
            swapped[i] = j
    for i in range(n):
        # k's slot holds i's torque: i's slot, if its own gravity does not explain it,
        # holds k's (a swap seen from the side of a joint that carries no gravity)
        partners = [k for k in range(n) if swapped[k] == i]
        if swapped[i] is None and partners and testable[i]:
            s = abs(fits[i, i][0][0]) * np.sign(fits[i, i][0][0])
            if s < 0 or abs(s - 1) > opt['scale_fail']:
                swapped[i] = partners[0]

    checks = []
    for i, name in enumerate(joints):
        ke = None if k_e is None else float(k_e[i])
        if swapped[i] is not None:
            other = joints[swapped[i]]
            fit = fits.get((i, swapped[i]))
            checks.append(JointCheck(
                name, FAIL, f'swapped with {other}?',
                fix=f'the torque in {name}\'s slot follows {other}\'s gravity: check the '
                'joint names (or --joint-map) and the order of torque_constants',
                scale=float(fit[0][0]) if fit else float('nan'), load_rms=float(load_rms[i]),
                load_max=float(load_max[i]), residual_rms=float(own[i]),
                swapped_with=other))
            continue
        if not testable[i]:
            checks.append(JointCheck(
                name, UNTESTABLE, 'not testable here (barely loaded by gravity)',
                load_rms=float(load_rms[i]), load_max=float(load_max[i]),
                residual_rms=float(own[i])))
            continue
        coef, rms, X = fits[i, i]
        se = _se(X, rms, opt['effective_samples'])
        s, s_se = float(coef[0]), float(se[0])
        b = float(coef[1]) if separable[i] else 0.0
        b_se = float(se[1]) if separable[i] else 0.0
        c = float(coef[-1]) if np.any(fric[:, i]) else 0.0
        common = dict(scale=s, scale_se=s_se, friction=c, load_rms=float(load_rms[i]),
                      load_max=float(load_max[i]), residual_rms=rms)
        if s_se > opt['max_scale_se']:
            checks.append(JointCheck(name, UNTESTABLE, 'not testable here (gravity too '
                                     f'small against the noise, scale ±{s_se:.2f})',
                                     **common))
            continue
        status, verdicts, fixes = OK, [], []
        mag = abs(s)
        if s < 0:
            status = FAIL
            verdicts.append('sign flipped')
            fixes.append('reverse its sign (current_signs: multiply by -1)')
        mismatch = _effort_mismatch(mag, ke, effort, opt['scale_fail'])
        if mismatch:
            status = FAIL
            verdicts.append(mismatch[0])
            fixes.append(mismatch[1])
        elif mag < 0.1:
            status = FAIL
            verdicts.append(f'no torque (scale x{mag:.2f})')
            fixes.append('its effort barely follows gravity: is it this joint\'s effort, '
                         'and is the effort recorded at all?')
        elif abs(mag - 1) > opt['scale_fail']:
            status = FAIL
            verdicts.append(f'scale off x{mag:.2f}')
            fixes.append(f'torque constant x{mag:.3g}'
                         + (f' ({ke:.4g} -> {ke * mag:.4g} N·m/A)' if ke else ''))
        elif abs(mag - 1) > opt['scale_warn']:
            status = max(status, WARN, key=_RANK.get)
            verdicts.append(f'scale x{mag:.2f}')
            fixes.append(f'torque constant x{mag:.3g} if this persists')
        if separable[i] and abs(b) > opt['offset_warn'] * load_max[i] and abs(b) > 3 * b_se:
            status = max(status, WARN, key=_RANK.get)
            verdicts.append(f'offset {b:+.3g} N·m')
            fixes.append(f'subtract the offset ({b:+.3g} N·m'
                         + (f' = {b / ke / mag:+.3g} A in current_offsets' if ke else '')
                         + ')')
        if not separable[i]:
            verdicts.append('(one pose: offset not separable)')
        checks.append(JointCheck(
            name, status, ', '.join(verdicts) if verdicts and status != OK else
            ' '.join(['ok'] + verdicts), fix='; '.join(fixes), offset=b,
            offset_current=b / ke / max(mag, 1e-9) if ke else float('nan'), **common))
    status, verdict = _overall(checks, effort)
    return CheckResult(tuple(checks), status, verdict, N, effort, opt)


_RANK = {OK: 0, UNTESTABLE: 0, WARN: 1, FAIL: 2}


def _effort_mismatch(mag, ke, effort, tolerance):
    """A (verdict, fix) when the scale says the effort is the other kind."""
    if ke is None or abs(np.log(ke)) < 2 * np.log1p(tolerance):
        return None     # k_e too near 1: the two kinds cannot be told apart
    other = ke if effort == 'current' else 1.0 / ke
    if abs(np.log(mag / other)) < np.log1p(tolerance) and abs(mag - 1) > tolerance:
        if effort == 'current':
            return (f'looks like torque, not current (scale x{mag:.3g} ≈ k_e)',
                    'the effort is joint torque already: pass --effort torque')
        return (f'looks like current, not torque (scale x{mag:.3g} ≈ 1/k_e)',
                'the effort is motor current: pass --effort current with --torque-constants')
    return None


def _overall(checks, effort):
    failed = [c for c in checks if c.status == FAIL]
    warned = [c for c in checks if c.status == WARN]
    tested = [c for c in checks if c.status != UNTESTABLE]
    untested = [c.joint for c in checks if c.status == UNTESTABLE]
    skip = f'; not testable here: {", ".join(untested)}' if untested else ''
    if not tested:
        return UNTESTABLE, ('no joint could be checked: record static holds at a few poses '
                            'where gravity loads the joints' + skip)
    if failed:
        kinds = sorted({c.verdict for c in failed})
        if len(failed) == len(tested) and all('looks like' in k for k in kinds):
            return FAIL, (f'every joint {kinds[0].split(" (")[0]}: the effort is not '
                          f'{effort}' + skip)
        what = '; '.join(f'{c.joint}: {c.verdict}' for c in failed)
        return FAIL, f'do not fit yet: {what}' + skip
    if warned:
        what = '; '.join(f'{c.joint}: {c.verdict}' for c in warned)
        return WARN, f'usable, with warnings: {what}' + skip
    return OK, f'{len(tested)} joints agree with the nominal gravity' + skip


def check_samples(robot, q, tau, mask=None, velocity=None, torque_constants=None,
                  effort='current', max_samples=20000, options=None):
    """:func:`check_gravity` on the selected samples of a recording.

    Parameters
    ----------
    robot : RobotModel
        The nominal arm, joints in the order of the columns of ``q`` and ``tau``,
        at the gravity the data was recorded under.
    q, tau : ndarray, (N, n)
        Joint angles (rad) and measured torques (N·m).
    mask : ndarray of bool, (N,), optional
        Quasi-static samples (:func:`arm_dyn_id.data.segmentation.quasi_static_mask`);
        default all.
    velocity : ndarray, (N, n), optional
        Joint velocities (rad/s; filtered), for the Coulomb term of slow moves.
    torque_constants, effort, options
        As :func:`check_gravity`.
    max_samples : int
        Evenly thinned to at most this many samples (neighbours carry the same
        information at 1 kHz).

    Returns
    -------
    CheckResult

    Raises
    ------
    DataError
        No quasi-static sample, or what :func:`check_gravity` refuses.
    """
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    idx = np.arange(q.shape[0]) if mask is None else np.flatnonzero(mask)
    if idx.size == 0:
        raise DataError(f'none of the {q.shape[0]} samples is quasi-static (every joint '
                        'still or slow): hold the arm still at a few poses, a second or more '
                        'each, while recording')
    idx = idx[::max(1, -(-idx.size // max_samples))]
    return check_gravity(robot.joint_names, nominal_gravity(robot, q[idx]), tau[idx],
                         None if velocity is None else np.asarray(velocity)[idx],
                         torque_constants=torque_constants, effort=effort, options=options)
