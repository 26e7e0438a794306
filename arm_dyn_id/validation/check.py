"""Pre-flight check of measured joint torques against a nominal URDF.

Before a fit is trusted, the torques a driver reports should agree with the
torques the arm's nominal URDF predicts. Per joint ``i`` the measured torque is
fitted by least squares as::

    tau_i ≈ s_i τ_nominal,i + b_i + nuisance_i

with ``s_i`` the scale (measured / nominal: the torque constant's error),
``b_i`` a constant offset (N·m) and nuisance terms that keep friction (and the
unknown rotor inertia) from biasing the scale. Two ways to get τ_nominal:

- :func:`check_dynamics`, any recording: the full rigid-body model of the URDF
  (pinocchio RNEA at the filtered q, q̇, q̈ of
  :func:`arm_dyn_id.data.preparation.prepare`); where the arm is still it is the
  gravity torque G(q), where it moves fast it adds the inertial torques, so every
  sample counts. Nuisance: Coulomb ``tanh(q̇_i / v)``, viscous ``q̇_i`` and a rotor
  inertia (armature) ``q̈_i`` of the joint, filtered like the torque; the fit is
  robust (Huber weights), so samples the model does not explain (gross errors)
  count little;
- :func:`check_gravity` / :func:`check_samples`, quasi-static samples only
  (:func:`arm_dyn_id.data.segmentation.quasi_static_mask`): τ_nominal = G(q),
  nuisance ``sign(q̇_i)`` where the joint moves slowly.

What each joint's numbers mean:

- ``s_i`` near -1: the joint's sign is reversed (a common fault of new drivers);
- ``|s_i|`` far from 1: the torque constant k_e is off by that factor. With
  τ = k_e·I, the measured torque is s·τ_true, so the right constant is ``k_e / s``;
  near 1000 (or 0.001) currents in mA are read as A (or the reverse); near k_e (or
  1/k_e) the effort is joint torque read as motor current (or the reverse);
- measured joint ``i`` explained much better by nominal joint ``j``'s torque
  than by its own: the two joints' data look swapped;
- a joint whose scale the data cannot pin down (its axis vertical so gravity never
  loads it, and a motion too slow to load it by inertia) is UNTESTABLE, with the
  reason; untestable is not OK.

The URDF is checked first (:func:`urdf_problem`): a negative mass would turn every
torque around and look like flipped signs. Everything here takes arrays; nothing
is printed.
"""

from dataclasses import dataclass, field, replace
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from arm_dyn_id.errors import DataError, JointNameError, URDFError
from arm_dyn_id.model.gate import inertia_problem
from arm_dyn_id.model.payload import payload_frame, payload_full_regressor, payload_regressor

#: status of one joint
OK, WARN, FAIL, UNTESTABLE = 'ok', 'warn', 'fail', 'untestable'


class ImplausibleURDFError(URDFError, DataError):
    """The nominal URDF cannot be a physical robot (a negative mass, an impossible inertia).

    A :class:`~arm_dyn_id.errors.URDFError` (what is wrong is the file) and a
    :class:`~arm_dyn_id.errors.DataError` (what callers of a check already catch).
    """


#: tolerances (fractions unless said otherwise)
DEFAULTS = {
    'scale_fail': 0.30,      # |s| outside [0.7, 1.3]: fail
    'scale_warn': 0.10,      # |s| outside [0.9, 1.1]: warning
    'min_load': 0.01,        # a joint below this x the arm's largest RMS torque: "barely"
    'min_spread': 0.10,      # std of the nominal torque below this x its RMS: no offset
    'max_scale_se': 0.10,    # scale standard error above this x max(1, |s|): untestable
    'offset_warn': 0.10,     # |b| above this x max |τ_nominal,i|: warning
    'swap_ratio': 0.5,       # residual with τ_j below this x with τ_i: swapped
    'moving_speed': 0.01,    # rad/s: above it a joint moves (friction columns)
    'effective_samples': 200,  # independent samples assumed at most (correlated data)
    'coulomb_velocity': 0.01,  # rad/s: v of the smooth Coulomb sign tanh(q̇ / v)
    'armature': True,        # a rotor-inertia column q̈_i (the URDF holds none)
    'robust': True,          # Huber weights in check_dynamics
    'units_band': 0.3,       # |log(s / 1000)| below log(1 + this): mA read as A
    'derivative_noise': 2.0,  # nominal torque this x rougher than the measured: noise
    'holding_friction': 0.03,  # x the URDF effort limit: the friction a still joint may
                               # hold, when the URDF's <dynamics friction> gives none
    'breakaway_ratio': 1.5,   # friction held at rest / the Coulomb level fitted where it moves
}


@dataclass(frozen=True)
class JointCheck:
    """What the check found on one joint (torques in N·m).

    Attributes
    ----------
    joint : str
    status : {'ok', 'warn', 'fail', 'untestable'}
    verdict : str
        Short verdict ('ok', 'sign flipped', 'scale off x2.01', ...) or, when
        untestable, the reason ('its axis is vertical, gravity never loads it, ...').
    fix : str
        What to change, or ''.
    scale, scale_se : float
        Least-squares measured / nominal torque ratio and its standard error
        (NaN when it could not be fitted).
    offset : float
        Constant offset of the measured torque (N·m; 0 when it could not be
        separated from the scale).
    offset_current : float
        ``offset`` over the torque constant (A), when a constant was given.
    friction : float
        Coulomb friction (N·m; 0 when the joint did not move).
    load_rms, load_max : float
        RMS and maximum of the nominal |τ_i| over the samples.
    gravity_max, inertial_rms : float
        Largest nominal gravity torque and RMS of the nominal inertial torque
        (N·m; NaN on the quasi-static path, where there is only gravity).
    residual_rms : float
        RMS of the fit's residual.
    swapped_with : str or None
        The joint whose nominal torque explains this joint's torque far better.
    torque_constant, corrected_constant : float
        The k_e used (N·m/A, NaN without) and ``k_e / |scale|``, the constant that
        would make the scale 1 (NaN when not fitted).
    holding_friction : float
        The friction the joint may hold at rest (N·m, :func:`holding_friction`; 0 when
        unknown).
    friction_reach : float
        How far that friction, held on the still samples, could move the fitted scale
        (worst case over every way it could be held; 0 when the joint never rests, or
        when it was judged on its moving samples alone).
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
    gravity_max: float = float('nan')
    inertial_rms: float = float('nan')
    residual_rms: float = float('nan')
    swapped_with: str = None
    torque_constant: float = float('nan')
    corrected_constant: float = float('nan')
    holding_friction: float = 0.0
    friction_reach: float = 0.0

    def to_dict(self):
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in self.__dict__.items()}

    def line(self):
        """``joint: STATUS: verdict[: fix]``, one line."""
        text = f'{self.joint}: {self.status.upper()}'
        if self.status == OK:
            text += self.verdict[2:]         # 'ok' and a note, if any
        else:
            text += f': {self.verdict}'
        return text + (f': {self.fix}' if self.fix else '')


@dataclass(frozen=True)
class CheckResult:
    """The per-joint checks and the overall verdict.

    Attributes
    ----------
    joints : tuple of JointCheck
    status : {'ok', 'warn', 'fail', 'untestable'}
        'fail' if any joint failed, else 'untestable' if any joint could not be
        tested, else 'warn' if any joint warned, else 'ok'.
    verdict : str
        One line summing up.
    n_samples : int
        Samples used.
    effort : {'current', 'torque'}
        What the effort was taken to be.
    model : {'gravity', 'full'}
        Gravity on quasi-static samples, or the full rigid-body model.
    load : dict or None
        A load the URDF lacks that explains the scales that failed (:func:`_load_explains`):
        ``frame``, ``mass`` and ``mass_std_error`` (kg), ``com`` (m, in the frame) and
        ``scales`` (joint -> scale with the load).
    """

    joints: tuple
    status: str
    verdict: str
    n_samples: int
    effort: str = 'current'
    options: dict = field(default_factory=dict)
    model: str = 'gravity'
    load: dict = None

    @property
    def failed(self):
        return self.status == FAIL

    def table(self):
        """The aligned text table, one line per joint, and the overall verdict."""
        head = ('joint', 'scale', '±', 'offset N·m', 'friction', '|τ| max', 'verdict')
        rows = []
        for c in self.joints:
            fitted = np.isfinite(c.scale) and c.status != UNTESTABLE
            rows.append((c.joint, _num(c.scale, '{:+.3f}'), _num(c.scale_se, '{:.3f}'),
                         _num(c.offset, '{:+.3f}') if fitted else '-',
                         _num(c.friction, '{:.3f}') if fitted else '-',
                         f'{c.load_max:.3g}',
                         'UNTESTABLE' if c.status == UNTESTABLE else c.verdict))
        widths = [max(len(r[k]) for r in rows + [head]) for k in range(len(head))]
        left = (0, len(head) - 1)

        def line(r):
            return '  '.join(v.ljust(w) if k in left else v.rjust(w)
                             for k, (v, w) in enumerate(zip(r, widths))).rstrip()
        out = [line(head), line(tuple('-' * w for w in widths))]
        out += [line(r) for r in rows]
        out += [''] + [c.line() for c in self.joints]
        out += ['', f'{self.status.upper()}: {self.verdict}']
        return '\n'.join(out)

    def to_dict(self):
        return {'status': self.status, 'verdict': self.verdict, 'n_samples': self.n_samples,
                'effort': self.effort, 'model': self.model, 'options': dict(self.options),
                'load': self.load, 'joints': {c.joint: c.to_dict() for c in self.joints}}


def _num(value, fmt):
    return fmt.format(value) if np.isfinite(value) else '-'


# -- the URDF first ---------------------------------------------------------------------

def _urdf_links(path):
    """(link name, mass, inertia about the CoM) of every link with an <inertial>."""
    out = []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return out
    for link in root.iter('link'):
        inertial = link.find('inertial')
        if inertial is None:
            continue
        try:
            mass_el = inertial.find('mass')
            mass = float(mass_el.get('value')) if mass_el is not None else 0.0
            el = inertial.find('inertia')
            get = (lambda k: float(el.get(k, 0.0))) if el is not None else (lambda k: 0.0)
        except (TypeError, ValueError):
            out.append((link.get('name'), float('nan'), np.full((3, 3), np.nan)))
            continue
        inertia = np.array([[get('ixx'), get('ixy'), get('ixz')],
                            [get('ixy'), get('iyy'), get('iyz')],
                            [get('ixz'), get('iyz'), get('izz')]])
        out.append((link.get('name'), mass, inertia))
    return out


def urdf_problem(robot):
    """Why the nominal URDF cannot be a physical robot, or None.

    Every link of the URDF file (when ``robot.source`` is one) and every body of the
    model (links merged over fixed joints) must have a finite, non-negative mass and an
    inertia that is positive semi-definite and meets the triangle inequality; the arm
    must carry some mass.

    Parameters
    ----------
    robot : RobotModel

    Returns
    -------
    str or None
        E.g. ``"link 'link_3' has a negative mass (-0.5 kg)"``.
    """
    for name, mass, inertia in _urdf_links(robot.source):
        problem = inertia_problem(mass, inertia, massless_inertia=False)
        if problem:
            return f'link {name!r} has {problem}'
    model = robot.model
    total = 0.0
    for j in range(1, model.njoints):
        inertia = model.inertias[j]
        problem = inertia_problem(float(inertia.mass), np.array(inertia.inertia),
                                  massless_inertia=False)
        if problem:
            return f'the body moved by joint {model.names[j]!r} has {problem}'
        total += float(inertia.mass)
    if not total > 0:
        return 'no link moved by the joints has mass: every nominal torque is zero'
    return None


def check_urdf(robot):
    """Raise :class:`ImplausibleURDFError` if :func:`urdf_problem` finds one.

    Checked before any torque is compared: a negative mass flips the URDF's torques
    and would be read as reversed joints.
    """
    problem = urdf_problem(robot)
    if problem:
        raise ImplausibleURDFError(
            f'the nominal URDF {robot.source} is implausible: {problem}, not a physical '
            'robot, so the measured torques cannot be compared with it: fix its masses and '
            'inertias first')


# -- nominal torques ------------------------------------------------------------------

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


def nominal_columns(robot, armature=True, payload_frame=None):
    """The nominal-torque columns of :func:`check_dynamics`, as a ``regressor`` callable.

    Give it to :func:`arm_dyn_id.data.preparation.prepare` (``regressor=``) so the
    columns go through the same low-pass as the measured torque.

    Parameters
    ----------
    robot : RobotModel
    armature : bool
        Append ``q̈_i`` (the column of an unknown rotor inertia of joint i).
    payload_frame : str, optional
        Append the four torque columns of a load's mass and first moment at this frame
        (:func:`arm_dyn_id.model.payload.payload_full_regressor`), with which the check
        tells a load the URDF lacks from wrong constants.

    Returns
    -------
    callable
        ``(q, dq, ddq)`` (M, n) each -> (M, n, 2, 3, 6 or 7): the URDF's inverse dynamics
        τ = M q̈ + C q̇ + G (pinocchio RNEA, N·m), its gravity part G(q) (N·m), ``q̈``
        (rad/s²), then the load's four columns.
    """
    def columns(q, dq, ddq):
        q, dq, ddq = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, dq, ddq))
        model, data, rows = robot.model, robot.model.createData(), robot._idx_v
        Q, V, A = robot.pin_arrays(q, dq, ddq)
        rnea = np.array([pin.rnea(model, data, *s)[rows] for s in zip(Q, V, A)])
        cols = [rnea.reshape(q.shape), nominal_gravity(robot, q)] + ([ddq] if armature else [])
        out = np.stack(cols, axis=2)
        if payload_frame is None:
            return out
        load = payload_full_regressor(robot, q, dq, ddq, payload_frame)[..., :4]
        return np.concatenate([out, load], axis=2)
    return columns


def holding_friction(robot, fraction=DEFAULTS['holding_friction']):
    """The friction torque each joint may hold at rest (N·m), from the URDF.

    A geared joint at rest holds any torque up to its breakaway friction without moving,
    so a still joint's measured torque is its gravity torque plus up to that much. The
    URDF's ``<dynamics friction>`` (Coulomb friction) when it gives one, else ``fraction``
    of its ``<limit effort>``: drives break away at a few percent of their peak torque
    (the arms this suite simulates at up to 2.7 %). 0 where neither is known.

    Parameters
    ----------
    robot : RobotModel
    fraction : float
        Of the effort limit; 0 trusts a still joint's torque as if it held no friction.

    Returns
    -------
    ndarray, (n,)
    """
    model, rows = robot.model, robot._idx_v
    dry = np.asarray(getattr(model, 'upperDryFrictionLimit', model.friction), dtype=float)[rows]
    effort = np.asarray(model.effortLimit, dtype=float)[rows]
    limit = np.where(np.isfinite(effort) & (effort > 0) & (effort < 1e9), effort, 0.0)
    return np.where(np.isfinite(dry) & (dry > 0), dry, fraction * limit)


#: rad: a joint a recording moves less than this is held still throughout (the friction
#: it holds at rest stays in its torque: forward/backward pairs cancel only a moving one's)
STILL_SPAN = np.radians(5.0)


#: A joint held still whose torque departs from the nominal one (std, after its scale) by
#: more than this many times the friction it may hold at rest carries a force from outside
#: the model (a push, a contact, a load put on or taken off): friction at rest keeps a
#: still joint's torque within ± that friction of its gravity torque, varying by less.
BEYOND_HOLDING = 1.5


def held_still(q):
    """Mask (n,) of the joints a recording ``q`` (N, n) moves less than STILL_SPAN."""
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or not len(q):
        return np.zeros(q.shape[-1] if q.ndim else 0, dtype=bool)
    return joint_spans(q) < STILL_SPAN


def joint_spans(q):
    """rad (n,): how far a recording ``q`` (N, n) moves each joint (NaN samples left out)."""
    q = np.asarray(q, dtype=float)
    return np.nanmax(q, axis=0) - np.nanmin(q, axis=0)


def friction_features(velocity=DEFAULTS['coulomb_velocity']):
    """The friction columns of :func:`check_dynamics`, as a ``features`` callable.

    Returns
    -------
    callable
        ``dq`` (N, n) -> (N, n, 2): ``tanh(q̇ / velocity)`` (Coulomb) and ``q̇`` (viscous).
    """
    def features(dq):
        dq = np.asarray(dq, dtype=float)
        return np.stack([np.tanh(dq / velocity), dq], axis=2)
    return features


# -- fitting ------------------------------------------------------------------------

def _fit(y, columns, robust=False):
    """Least squares y ≈ X c, Huber-weighted when ``robust``.

    Returns
    -------
    coef : ndarray, (k,)
    rms : float
        RMS of the (weighted) residual.
    X : ndarray, (N, k)
        The design, rows scaled by the square root of the weights.
    sw : ndarray, (N,)
        Those square roots.
    """
    X = np.column_stack(columns)
    w = np.ones(len(y))
    for _ in range(6 if robust else 1):
        sw = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
        res = y - X @ coef
        if not robust:
            break
        sigma = 1.4826 * np.median(np.abs(res - np.median(res)))
        if not sigma > 0:
            break
        c = 1.345 * sigma
        w = np.minimum(1.0, c / np.maximum(np.abs(res), 1e-300))
    sw = np.sqrt(w)
    rms = float(np.sqrt(np.sum(w * res ** 2) / np.sum(w)))
    return coef, rms, X * sw[:, None], sw


def _reach(X, sw, mask):
    """Σ |∂c₀/∂y_t| over the samples in ``mask``: how far the first coefficient moves per
    unit of an error bounded by 1 on those samples, whatever its pattern (worst case)."""
    if not np.any(mask):
        return 0.0
    e0 = np.zeros(X.shape[1])
    e0[0] = 1.0
    row = X @ (np.linalg.pinv(X.T @ X) @ e0)        # c = (XᵀX)⁻¹ Xᵀ (sw·y)
    return float(np.sum(np.abs(row * sw)[mask]))


def _se(X, rms, n_eff):
    """Standard errors of the coefficients with at most ``n_eff`` independent samples."""
    N = X.shape[0]
    try:
        cov = np.linalg.inv(X.T @ X) * rms ** 2 * N / max(1, min(N, n_eff) - X.shape[1])
    except np.linalg.LinAlgError:
        return np.full(X.shape[1], np.inf)
    if not np.all(np.isfinite(cov)):
        return np.full(X.shape[1], np.inf)
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


#: Condition number (columns scaled to unit norm) above which :func:`nuisance_scales`
#: leaves a joint's scale undetermined.
NUISANCE_CONDITION = 1e6


def nuisance_scales(measured, nominal, velocity, acceleration, options=None):
    """Each joint's scale against the URDF's torque with friction and rotor inertia fitted
    apart, with :func:`check_dynamics`' nuisance terms, from arrays: on every sample and
    for every joint (no still or holding samples set apart, as that check does).

    Per joint i, a robust least-squares fit ``τ_i ≈ s_i τ_nominal,i + b_i + fc_i tanh(q̇_i /
    v) + fv_i q̇_i + Ia_i q̈_i`` on samples already filtered alike.

    Parameters
    ----------
    measured, nominal, velocity, acceleration : array_like, (M, n)
        N·m, N·m, rad/s, rad/s² (non-finite rows skipped).
    options : dict, optional
        Overrides of :data:`DEFAULTS` (``coulomb_velocity``, ``effective_samples``,
        ``robust``).

    Returns
    -------
    scale, std_error : ndarray, (n,)
        NaN and ``inf`` where a joint's columns are degenerate (condition number above
        :data:`NUISANCE_CONDITION`).
    """
    opt = dict(DEFAULTS, **(options or {}))
    arrays = [np.asarray(a, dtype=float) for a in (measured, nominal, velocity, acceleration)]
    rows = np.all([np.all(np.isfinite(a), axis=1) for a in arrays], axis=0)
    y, g, dq, ddq = (a[rows] for a in arrays)
    n = y.shape[1]
    scale, se = np.full(n, np.nan), np.full(n, np.inf)
    if len(y) < 10:
        return scale, se
    for i in range(n):
        columns = [g[:, i], np.ones(len(y)), np.tanh(dq[:, i] / opt['coulomb_velocity']),
                   dq[:, i], ddq[:, i]]
        coef, rms, X, _ = _fit(y[:, i], columns, robust=opt['robust'])
        norms = np.linalg.norm(X, axis=0)
        # a URDF torque (nearly) a combination of the nuisance columns (a joint whose
        # torque is its own inertia alone): its scale is not determined
        if np.any(norms <= 0) or np.linalg.cond(X / norms) > NUISANCE_CONDITION:
            continue
        error = _se(X, rms, opt['effective_samples'])[0]
        scale[i], se[i] = coef[0], error if error > 0 else np.inf
    return scale, se


def _validate(joints, nominal, tau, torque_constants, effort):
    joints = tuple(joints)
    G = np.asarray(nominal, dtype=float)
    T = np.asarray(tau, dtype=float)
    n = len(joints)
    if G.ndim != 2 or G.shape != T.shape or G.shape[1] != n:
        raise DataError(f'nominal torques {G.shape} and tau {T.shape} must both be (N, {n}) '
                        f'for joints {list(joints)}')
    N = G.shape[0]
    if N < 10:
        raise DataError(f'only {N} usable samples: hold the arm still at a few poses '
                        '(or move it) while recording')
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(T))):
        raise DataError('the torques or the joint angles hold NaN or inf')
    if effort not in ('current', 'torque'):
        raise DataError(f'effort {effort!r} must be current or torque')
    k_e = None if torque_constants is None else np.asarray(torque_constants, dtype=float)
    if k_e is not None and k_e.shape != (n,):
        raise DataError(f'{k_e.size} torque constants for {n} joints {list(joints)}')
    if not float(np.max(np.abs(G))) > 0:
        raise DataError('the nominal torques are zero at every sample: check the URDF\'s '
                        'masses and the gravity direction')
    return joints, G, T, k_e


def _judge(joints, G, T, nuisance, opt, k_e, effort, why_untestable, robust=False,
           context=None, still=None, holding=None, coulomb=None, spans=None):
    """The per-joint fits, swaps and verdicts shared by both paths.

    ``nuisance[i]`` lists the extra columns of joint i; ``why_untestable(i, se)`` the
    reason a joint whose scale is not pinned down is untestable; ``context[i]`` extra
    :class:`JointCheck` fields; ``still`` (N, n) the samples where a joint rests, and
    ``holding`` (n,) the friction (N·m) it may hold there (:func:`_friction_matters`);
    ``coulomb[i]`` whether ``nuisance[i]`` starts with a Coulomb column (default: when it
    has any): its fitted level, times ``breakaway_ratio``, then replaces ``holding[i]``.
    ``spans`` (n,) rad: how far the recording moves each joint; one it holds still
    (below :data:`STILL_SPAN`) whose torque departs from the nominal one by more than
    :data:`BEYOND_HOLDING` × ``holding`` is UNTESTABLE: a force from outside the model
    acts, and its scale is not its torque constant's.
    """
    n, N = len(joints), G.shape[0]
    context = context or [{} for _ in range(n)]
    still = np.ones((N, n), dtype=bool) if still is None else np.asarray(still, dtype=bool)
    holding = np.zeros(n) if holding is None else np.asarray(holding, dtype=float)
    coulomb = [bool(extra) for extra in nuisance] if coulomb is None else coulomb
    load_rms, load_max, carries, separable = _loads(G, opt)
    top = int(np.argmax(load_rms))
    present = load_rms > 1e-9 * load_rms.max()
    ones = np.ones(N)

    def design(i, j):
        return [G[:, j]] + ([ones] if separable[j] else []) + list(nuisance[i])

    # residual of measured joint i explained by nominal joint j's torque
    fits = {}
    resid = np.full((n, n), np.inf)
    for i in range(n):
        for j in range(n):
            if carries[j] or (i == j and present[i]):
                fits[i, j] = _fit(T[:, i], design(i, j), robust)
                resid[i, j] = fits[i, j][1]
    own = np.empty(n)
    for i in range(n):
        if (i, i) in fits:
            own[i] = resid[i, i]
        else:   # what is left around a constant (and the nuisance): nothing to explain
            own[i] = _fit(T[:, i], [ones] + list(nuisance[i]), robust)[1]
    floor = 0.02 * float(load_max.max())
    swapped = [None] * n
    for i in range(n):
        others = [j for j in range(n) if j != i and carries[j]]
        if not others:
            continue
        j = min(others, key=lambda k: resid[i, k])
        # what joint j's torque explains must be more than joint i could hold at rest
        # when it never moves (stiction that happens to follow another joint's torque)
        explained = abs(fits[i, j][0][0]) * np.ptp(G[:, j]) / 2
        held = holding[i] if not coulomb[i] else 0.0
        if resid[i, j] < opt['swap_ratio'] * own[i] and own[i] - resid[i, j] > floor and \
                explained > held:
            swapped[i] = j
    # two loaded joints whose torques are alike (a shoulder and an elbow under gravity):
    # the own fits absorb much of a swap with a wrong scale, so the residual ratio above
    # does not fall to swap_ratio. Each one's slot read at the other's nominal torque with
    # the scale a swap gives, and better than by its own (whose scale is off), is a swap
    # too: 1 for swapped names, k_i / k_k for swapped currents (each read with the other's
    # torque constant)
    for i in range(n):
        for k in range(i + 1, n):
            if swapped[i] is not None or swapped[k] is not None or \
                    not all(key in fits for key in ((i, i), (k, k), (i, k), (k, i))):
                continue
            ratios = [1.0] + ([] if k_e is None else [float(k_e[i] / k_e[k])])
            if not _scale_near(fits[i, i][0][0], 1.0, opt) and \
                    not _scale_near(fits[k, k][0][0], 1.0, opt) and any(
                        _scale_near(fits[i, k][0][0], r, opt) and
                        _scale_near(fits[k, i][0][0], 1.0 / r, opt) for r in ratios) and \
                    resid[i, k] < own[i] and resid[k, i] < own[k]:
                swapped[i], swapped[k] = k, i
    for i in range(n):
        # k's slot holds i's torque: i's slot, if its own torque does not explain it,
        # holds k's (a swap seen from the side of a joint that carries little)
        partners = [k for k in range(n) if swapped[k] == i]
        if swapped[i] is None and partners and (i, i) in fits:
            s = fits[i, i][0][0]
            if s < 0 or abs(abs(s) - 1) > opt['scale_fail']:
                swapped[i] = partners[0]

    checks = []
    for i, name in enumerate(joints):
        ke = None if k_e is None else float(k_e[i])
        base = dict(load_rms=float(load_rms[i]), load_max=float(load_max[i]),
                    torque_constant=float('nan') if ke is None else ke, **context[i])
        if swapped[i] is not None:
            other = joints[swapped[i]]
            fit = fits.get((i, swapped[i]))
            checks.append(JointCheck(
                name, FAIL, f'swapped with {other}?',
                fix=f'the torque in {name}\'s slot follows {other}\'s: check the joint '
                'names (or --joint-map) and the order of torque_constants',
                scale=float(fit[0][0]) if fit else float('nan'), residual_rms=float(own[i]),
                swapped_with=other, **base))
            continue
        if (i, i) not in fits:
            checks.append(JointCheck(name, UNTESTABLE, why_untestable(i, float('inf')),
                                     residual_rms=float(own[i]), **base))
            continue
        coef, rms, X, sw = fits[i, i]
        pushed = _pushed(T[:, i], G[:, i], float(coef[0]), holding[i],
                         None if spans is None else spans[i])
        if pushed:
            checks.append(JointCheck(name, UNTESTABLE, pushed, scale=float(coef[0]),
                                     residual_rms=float(rms),
                                     holding_friction=float(holding[i]), **base))
            continue
        se = _se(X, rms, opt['effective_samples'])
        k_fric = 1 + int(separable[i])
        hold = float(holding[i])
        if coulomb[i]:      # it moves: its friction is measured, the prior is not needed
            hold = opt['breakaway_ratio'] * abs(float(coef[k_fric]))
        reach = hold * _reach(X, sw, still[:, i]) if hold > 0 else 0.0
        moving = ~still[:, i]
        on_motion = False
        if _friction_matters(float(coef[0]), reach, opt) and \
                np.count_nonzero(moving) > 10 + X.shape[1]:
            # what friction held at rest could decide, the motion alone may: judge on it
            alt = _fit(T[moving, i], [c[moving] for c in design(i, i)], robust)
            alt_se = _se(alt[2], alt[1], opt['effective_samples'])
            if alt_se[0] <= opt['max_scale_se'] * max(1.0, abs(alt[0][0])):
                (coef, rms, X, sw), se, reach = alt, alt_se, 0.0
                on_motion = True
        s, s_se = float(coef[0]), float(se[0])
        b = float(coef[1]) if separable[i] else 0.0
        b_se = float(se[1]) if separable[i] else 0.0
        c = float(coef[k_fric]) if coulomb[i] else 0.0
        mag = abs(s)
        common = dict(scale=s, scale_se=s_se, friction=c, residual_rms=rms,
                      holding_friction=hold, friction_reach=reach, **base)

        def held_still(reading=''):
            return (f'held still against its friction: up to {hold:.2g} N·m held at rest '
                    f'could move its scale ({s:+.2f}) by ±{reach:.2g} (|τ| max '
                    f'{load_max[i]:.2g} N·m){reading}: hold poses where gravity loads it '
                    f'well above {hold:.2g} N·m, or move it')
        if not s_se <= opt['max_scale_se'] * max(1.0, mag):
            loaded = load_max[i] >= opt['min_load'] * load_max.max()
            why = held_still() if loaded and _friction_matters(s, reach, opt) else \
                why_untestable(i, s_se)
            checks.append(JointCheck(name, UNTESTABLE, why, **common))
            continue
        status, verdicts, fixes = OK, [], []
        if s < 0:
            status = FAIL
            verdicts.append('sign flipped')
            fixes.append('reverse its sign (current_signs: multiply by -1)')
        mismatch = _effort_mismatch(mag, ke, effort, opt['scale_fail'])
        if mismatch:
            status = FAIL
            verdicts.append(mismatch[0])
            fixes.append(mismatch[1])
        elif effort == 'torque' and ke is None and mag < 0.5 and s_se < 0.1 * mag and \
                not _units(mag, opt):
            # no k_e to compare with (read as torque), but the effort follows the torque
            # closely at a fraction of it: a motor current, 1 / k_e of the torque
            status = FAIL
            verdicts.append(f'looks like current, not torque (scale x{mag:.2g}, precise: '
                            f'1/k_e for k_e about {1.0 / mag:.3g} N·m/A?)')
            fixes.append('the effort follows the torque at a fraction of it: if it is motor '
                         'current, pass --effort current with --torque-constants')
        elif mag < 0.1 and not _units(mag, opt):
            status = FAIL
            verdicts.append(f'no torque (scale x{mag:.2g})')
            fixes.append('its effort barely follows the nominal torque: is it this joint\'s '
                         'effort, and is the effort recorded at all?')
        elif abs(mag - 1) > opt['scale_fail']:
            status = FAIL
            verdicts.append(f'scale off x{_x(mag)}' + _units(mag, opt))
            fixes.append(_constant_fix(mag, ke))
        elif abs(mag - 1) > opt['scale_warn']:
            status = max(status, WARN, key=_RANK.get)     # a flipped sign still fails
            verdicts.append(f'scale x{mag:.2f}')
            fixes.append('if a fit confirms it, ' + _constant_fix(mag, ke))
        if separable[i] and abs(b) > opt['offset_warn'] * load_max[i] and abs(b) > 3 * b_se:
            status = max(status, WARN, key=_RANK.get)
            verdicts.append(f'offset {b:+.3g} N·m')
            fixes.append(f'subtract the offset ({b:+.3g} N·m'
                         + (f' = {b / ke:+.3g} A in current_offsets' if ke else '') + ')')
        if _friction_matters(s, reach, opt):
            if status == FAIL and abs(s - 1.0) <= reach and not mismatch and \
                    not _units(mag, opt):
                # friction held at rest could make a right constant and sign read so
                checks.append(JointCheck(
                    name, UNTESTABLE,
                    held_still(f', so its reading ({", ".join(verdicts)}) may be friction'),
                    **common))
                continue
            verdicts = (verdicts or ['ok']) + [
                f'held still: friction at rest could move the scale ±{reach:.2g}']
        reversed_only = s < 0 and abs(mag - 1) <= opt['scale_fail']    # a clean x-1
        if status == FAIL and not carries[i] and not mismatch and not _units(mag, opt) \
                and not reversed_only:
            # a joint the URDF barely loads: a few millimetres of its centres of mass, or
            # a friction model a few percent off, read as any scale or sign (but hardly
            # as exactly its torque reversed)
            checks.append(JointCheck(
                name, UNTESTABLE,
                f'the URDF barely loads it (|τ| RMS {load_rms[i]:.2g} N·m, '
                f'{100 * load_rms[i] / load_rms.max():.2g} % of {joints[top]}\'s), so small '
                f'errors of its masses and of the friction model can give its reading '
                f'({", ".join(verdicts)}): test it where it carries more torque (poses that '
                'load it, a faster motion)', **common))
            continue
        if on_motion:
            verdicts = (verdicts or ['ok']) + ['judged on its motion (friction held at rest '
                                               'could mislead its holds)']
        note = '' if separable[i] else ' (offset not separable: its torque barely varied)'
        checks.append(JointCheck(
            name, status, (', '.join(verdicts) if verdicts else 'ok') + note,
            fix='; '.join(fixes), offset=b,
            offset_current=b / ke if ke else float('nan'),
            corrected_constant=ke / mag if ke and mag > 0 else float('nan'), **common))
    return checks


_RANK = {OK: 0, UNTESTABLE: 0, WARN: 1, FAIL: 2}


def _pushed(tau, nominal, scale, holding, span):
    """Why a joint held still carries a force from outside the model, or ''.

    Held still (``span`` < :data:`STILL_SPAN` rad) its torque stays within the friction
    ``holding`` it may hold of its gravity torque; a departure (std of τ − s·G) beyond
    :data:`BEYOND_HOLDING` × that is a push, a contact or a load changed while
    recording (a real UR10e pushed by hand: 1.65-1.79x on the shoulder and elbow, its
    static poses 0.05-0.18x)."""
    if span is None or not span < STILL_SPAN or not holding > 0:
        return ''
    departure = float(np.std(tau - scale * nominal))
    if not departure > BEYOND_HOLDING * holding:
        return ''
    return (f'carries a force from outside the model: held still (its position spans '
            f'{np.degrees(span):.2g}°), its torque departs from the nominal by {departure:.3g} '
            f'N·m (std), beyond the {holding:.3g} N·m its friction may hold at rest: a push or '
            f'contact, or a load put on or taken off while recording, so its scale '
            f'(x{scale:.2f}) does not measure its torque constant: check a recording without '
            'contact (arm-dyn-id residual finds contacts)')


def _loads(G, opt):
    """Per joint: RMS and max of the nominal |τ|, whether it carries torque (``min_load``
    of the arm's largest RMS), whether an offset is separable (``min_spread``)."""
    load_rms = np.sqrt(np.mean(G ** 2, axis=0))
    carries = load_rms >= opt['min_load'] * load_rms.max()
    separable = np.std(G, axis=0) >= opt['min_spread'] * load_rms
    return load_rms, np.max(np.abs(G), axis=0), carries, separable


#: distinct poses a load the URDF lacks needs before it may explain failing scales
LOAD_POSES = 6
#: joints whose torques must agree with that load (one more may be left failing)
LOAD_WITNESSES = 3


def _load_explains(checks, G, T, nuisance, P, frame, opt, robust=False, still_torque=None):
    """A load at ``frame`` that the URDF lacks, when it explains the scales that failed.

    A gripper or tool missing from the URDF adds torque to every joint, most (relative
    to the arm's own) to the distal ones: read as torque constants off by x1.4 on the
    elbow and x2 on a wrist. The load's mass and first moment (``P``: their torque
    columns, (N, n, 4)) are fitted to what the URDF leaves, over the judged joints at
    once (at least :data:`LOAD_WITNESSES`) with each joint's offset and friction. The
    load explains the failures when its mass is positive and significant (3 standard
    errors, counting distinct poses, not samples, and at least :data:`LOAD_POSES` of
    them) and, with it, every judged joint agrees: a scale within ``scale_fail`` of 1,
    within ``scale_warn`` for a joint that was OK. Then each joint that failed on its
    scale becomes a warning that names the load. One joint that failed may stay off (a
    wrong constant beside the load): the load is then fitted on the others and that
    joint keeps its failure; a joint that did not fail is never left out, so a load
    cannot absorb one joint's wrong constant. ``still_torque`` (N, n): the torque whose
    distinct values count the poses (default ``G``; the gravity part on the full path,
    where inertia makes every sample distinct). Returns (checks, load or None).
    """
    failed = [i for i, c in enumerate(checks) if c.status == FAIL and c.swapped_with is None
              and c.verdict.startswith('scale off') and 'read as' not in c.verdict]
    if P is None or not failed:
        return checks, None
    n, N = G.shape[1], G.shape[0]
    load_rms, _, carries, separable = _loads(G, opt)
    # poses the torques of the joints that carry any tell apart (1 % of the arm's largest):
    # at fewer than LOAD_POSES a load's four parameters could absorb a joint's error
    pose_torque = (G if still_torque is None else np.asarray(still_torque))[:, carries]
    step = 0.01 * max(float(np.max(np.abs(pose_torque))), 1e-12)
    poses = len(np.unique(np.round(pose_torque / step), axis=0))
    if poses < LOAD_POSES:
        return checks, None
    ones = np.ones(N)
    extra = [([ones] if separable[i] else []) + list(nuisance[i]) for i in range(n)]
    # the joints the check could judge, each weighted by its own residual; an untestable
    # one's torque holds what its model misses (friction at rest, the URDF's small errors)
    judged = [i for i, c in enumerate(checks) if c.status != UNTESTABLE and
              c.swapped_with is None and np.isfinite(c.residual_rms) and carries[i] and
              c.scale > 0]      # a reversed joint's torque is no witness of a load
    if len(judged) < LOAD_WITNESSES:
        return checks, None

    def consistent(joints):
        """The load fitted on ``joints`` when every one of them agrees with it, else None."""
        fit = _fit_load(checks, G, T, P, extra, joints, load_rms, poses, opt, robust)
        if fit is None:
            return None
        for i in joints:
            band = opt['scale_warn'] if checks[i].status == OK else opt['scale_fail']
            if abs(fit[2][checks[i].joint] - 1.0) > band:
                return None
        return fit
    fit = consistent(judged)
    if fit is None and len(judged) > LOAD_WITNESSES:
        # a wrong constant beside the load: the load from the others; the joint left out
        # must have failed, and still be off with that load
        tried = []
        for j in (i for i in judged if i in failed):
            found = consistent([i for i in judged if i != j])
            if found is None:
                continue
            own = _scale_with_load(T, G, P, extra, j, found[0], robust)
            if abs(own - 1.0) > opt['scale_fail']:
                tried.append((abs(own - 1.0), j, found))
        if tried:
            _, j, fit = max(tried, key=lambda x: x[0])
            judged = [i for i in judged if i != j]
    if fit is None:
        return checks, None
    coef, se, scales = fit
    mass = float(coef[0])
    load = {'frame': frame, 'mass': mass, 'mass_std_error': float(se[0]),
            'com': [float(h / mass) for h in coef[1:4]], 'scales': scales}
    text = f'a load at {frame} the URDF lacks? ({mass:.3g} ± {se[0]:.2g} kg)'
    out = list(checks)
    for i in failed:
        c = checks[i]
        if i not in judged:
            continue
        out[i] = replace(c, status=WARN, verdict=f'scale x{abs(c.scale):.2f}, explained by '
                         f'{text}: x{scales[c.joint]:.2f} with it',
                         fix='put the load in the URDF (after a fit, `arm-dyn-id payload` '
                         'measures it), or check without it; if there is no load, ' + c.fix)
    return out, load


def _fit_load(checks, G, T, P, extra, judged, load_rms, poses, opt, robust):
    """The load fitted on the joints ``judged``: (coef, its standard errors, {joint: scale
    with it}), or None when its mass is not positive and significant."""
    N = G.shape[0]
    width = [len(extra[i]) for i in judged]
    rows, ys = [], []
    for k, i in enumerate(judged):
        w = 1.0 / max(float(checks[i].residual_rms), 1e-6 * float(load_rms.max()), 1e-12)
        block = np.zeros((N, 4 + sum(width)))
        block[:, :4] = P[:, i, :]
        at = 4 + sum(width[:k])
        for m, col in enumerate(extra[i]):
            block[:, at + m] = col
        rows.append(w * block)
        ys.append(w * (T[:, i] - G[:, i]))
    X, y = np.vstack(rows), np.concatenate(ys)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    rms = float(np.sqrt(np.mean((y - X @ coef) ** 2)))
    se = _se(X, rms, min(opt['effective_samples'], poses) * len(judged))[:4]
    if not (coef[0] > 0 and coef[0] > 3 * se[0]):
        return None
    scales = {checks[i].joint: _scale_with_load(T, G, P, extra, i, coef, robust)
              for i in judged}
    return coef, se, scales


def _scale_with_load(T, G, P, extra, i, coef, robust):
    """Joint i's scale against the URDF's torque plus that of the load ``coef[:4]``."""
    return float(_fit(T[:, i], [G[:, i] + P[:, i, :] @ coef[:4]] + extra[i], robust)[0][0])


def _holding(holding, n):
    if holding is None:
        return np.zeros(n)
    out = np.asarray(holding, dtype=float)
    if out.shape != (n,) or not np.all(np.isfinite(out) & (out >= 0)):
        raise DataError(f'holding friction {out.tolist()} must be {n} finite values >= 0 N·m')
    return out


def _friction_matters(scale, reach, opt):
    """Whether friction held at rest could move the fitted scale by more than the check's
    precision (``max_scale_se``).

    A joint at rest holds any friction torque up to its breakaway level, and which one
    depends on how it came to rest, not on the pose: stiction is not noise that averages
    out, so ``reach`` (:func:`_reach`) is a worst case, not a standard error. A scale that
    fails but lies within ``reach`` of 1 may be friction: the joint is then untestable
    ('held still against its friction'), not failed, so a right constant or sign is
    never blamed.
    """
    return reach > opt['max_scale_se'] * max(1.0, abs(scale))


def _units(mag, opt):
    """' (currents in mA read as A?)' when the scale is near 1000 (or 1/1000), else ''."""
    band = np.log1p(opt['units_band'])
    if abs(np.log(mag / 1000.0)) < band:
        return ' (currents in mA read as A?)'
    if mag > 0 and abs(np.log(mag * 1000.0)) < band:
        return ' (currents in A read as mA?)'
    return ''


def _constant_fix(mag, ke):
    """The corrected torque constant, the right way round: measured = s x nominal, k / s."""
    if ke:
        return (f'fix torque_constants: {ke:.4g} -> {ke / mag:.4g} N·m/A (the measured '
                f'torque is {_x(mag)}x the nominal: divide the constant by {_x(mag)})')
    return (f'the effort is {_x(mag)}x the nominal torque: check its unit and scaling '
            f'(divide it by {_x(mag)})')


def _scale_near(scale, expected, opt):
    """Whether a fitted scale is within ``scale_fail`` (relative) of ``expected``."""
    return abs(scale / expected - 1.0) <= opt['scale_fail']


def _x(mag):
    """A scale for a message: two decimals between 0.1 and 100, else three digits."""
    return f'{mag:.2f}' if 0.1 <= mag < 100 else f'{mag:.3g}'


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


def _overall(checks, effort, model):
    failed = [c for c in checks if c.status == FAIL]
    warned = [c for c in checks if c.status == WARN]
    tested = [c for c in checks if c.status != UNTESTABLE]
    untested = [c.joint for c in checks if c.status == UNTESTABLE]
    skip = f'; untestable: {", ".join(untested)}' if untested else ''
    what = 'the nominal gravity' if model == 'gravity' else 'the nominal URDF\'s torques'
    if not tested:
        return UNTESTABLE, ('no joint could be tested: record static holds at poses where '
                            'gravity loads the joints, or a rich motion (Fourier excitation)')
    if failed:
        kinds = sorted({c.verdict for c in failed})
        if len(failed) == len(tested) and all('looks like' in k for k in kinds):
            return FAIL, (f'every joint {kinds[0].split(" (")[0]}: the effort is not '
                          f'{effort}' + skip)
        text = '; '.join(f'{c.joint}: {c.verdict}' for c in failed)
        return FAIL, f'do not fit yet: {text}' + skip
    warnings = '; '.join(f'{c.joint}: {c.verdict}' for c in warned)
    if untested:
        return UNTESTABLE, (f'{len(tested) - len(warned)} of {len(tested)} tested joints agree '
                            f'with {what}' + (f' (with warnings: {warnings})' if warned else '')
                            + f', but not every joint could be tested{skip}')
    if warned:
        return WARN, f'usable, with warnings: {warnings}'
    return OK, f'all {len(tested)} joints agree with {what}'


# -- the quasi-static path -----------------------------------------------------------

def check_gravity(joints, gravity, tau, dq=None, torque_constants=None, effort='current',
                  options=None, holding=None, load=None, load_frame=None, spans=None):
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
        tell effort that is torque from effort that is current, give the
        offset in A and the corrected constant.
    effort : {'current', 'torque'}
        What the driver's effort was taken to be.
    options : dict, optional
        Tolerances overriding :data:`DEFAULTS`.
    holding : array_like, (n,), optional
        The friction each joint may hold at rest (N·m, :func:`holding_friction`). A
        joint whose scale that friction could carry across the failing tolerance on
        its still samples (``|q̇| <=`` ``moving_speed``, or all without ``dq``) is
        UNTESTABLE ('held still against its friction'), not failed. Default none.
    load : ndarray, (N, n, 4), optional
        Gravity torque columns of a load's mass and first moment at ``load_frame``
        (:func:`arm_dyn_id.model.payload.payload_regressor`): scales that fail but a
        load the URDF lacks explains are warnings that name it (``CheckResult.load``).
    load_frame : str, optional
        That frame's name, for the messages.
    spans : array_like, (n,), optional
        rad: how far the recording moves each joint; a joint it holds still whose torque
        departs from the nominal by more than :data:`BEYOND_HOLDING` × ``holding`` is
        UNTESTABLE (a force from outside the model: a push, a contact, a load changed).

    Returns
    -------
    CheckResult

    Raises
    ------
    DataError
        Shapes disagree, too few samples, non-finite values, or no gravity at all.
    """
    opt = dict(DEFAULTS, **(options or {}))
    joints, G, T, k_e = _validate(joints, gravity, tau, torque_constants, effort)
    n = len(joints)
    load = None if load is None else np.asarray(load, dtype=float)
    if load is not None and load.shape != G.shape + (4,):
        raise DataError(f'load columns {load.shape} must be {G.shape + (4,)}')
    if dq is None:
        nuisance = [[] for _ in range(n)]
        still = None
    else:
        dq = np.asarray(dq, dtype=float)
        fric = np.where(np.abs(np.nan_to_num(dq)) > opt['moving_speed'], np.sign(dq), 0.0)
        nuisance = [[fric[:, i]] if np.any(fric[:, i]) else [] for i in range(n)]
        still = fric == 0
    load_max = np.max(np.abs(G), axis=0)

    def why(i, se):
        if load_max[i] <= 1e-9 * load_max.max():
            return ('gravity never loads it here and only still or slow samples were '
                    'compared: compare the full rigid-body model on fast motion (a Fourier '
                    'excitation)')
        if load_max[i] < opt['min_load'] * load_max.max() or not np.isfinite(se):
            return (f'gravity barely loads it (|G| max {load_max[i]:.2g} N·m) and only '
                    'still or slow samples were compared: hold poses where gravity loads it, '
                    'or compare the full rigid-body model on fast motion (a Fourier '
                    'excitation)')
        return (f'its gravity torque is too small against the noise (scale ±{se:.2f}): '
                'more poses, longer holds')
    checks = _judge(joints, G, T, nuisance, opt, k_e, effort, why, still=still,
                    holding=_holding(holding, n), spans=spans)
    checks, found = _load_explains(checks, G, T, nuisance, load, load_frame, opt)
    status, verdict = _overall(checks, effort, 'gravity')
    return CheckResult(tuple(checks), status, verdict, G.shape[0], effort, opt, 'gravity',
                       found)


def check_samples(robot, q, tau, mask=None, velocity=None, torque_constants=None,
                  effort='current', max_samples=20000, options=None, load_frame='auto'):
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
    load_frame : str or None
        Where a load the URDF lacks would sit (:func:`check_gravity`'s ``load``); 'auto':
        :func:`arm_dyn_id.model.payload.payload_frame`'s default; None: not looked for.

    Returns
    -------
    CheckResult

    Raises
    ------
    ImplausibleURDFError
        The URDF is implausible (:func:`check_urdf`).
    DataError
        No quasi-static sample, or what :func:`check_gravity` refuses.
    """
    check_urdf(robot)
    q = np.asarray(q, dtype=float)
    tau = np.asarray(tau, dtype=float)
    idx = np.arange(q.shape[0]) if mask is None else np.flatnonzero(mask)
    if idx.size == 0:
        raise DataError(f'none of the {q.shape[0]} samples is quasi-static (every joint '
                        'still or slow): hold the arm still at a few poses, a second or more '
                        'each, while recording')
    idx = idx[::max(1, -(-idx.size // max_samples))]
    fraction = dict(DEFAULTS, **(options or {}))['holding_friction']
    frame = default_load_frame(robot, load_frame)
    return check_gravity(robot.joint_names, nominal_gravity(robot, q[idx]), tau[idx],
                         None if velocity is None else np.asarray(velocity)[idx],
                         torque_constants=torque_constants, effort=effort, options=options,
                         holding=holding_friction(robot, fraction),
                         load=None if frame is None else payload_regressor(robot, q[idx], frame),
                         load_frame=frame, spans=joint_spans(q))


def default_load_frame(robot, frame='auto'):
    """``frame``, or for 'auto' the default payload frame (None if the URDF has none)."""
    if frame != 'auto':
        return frame
    try:
        return payload_frame(robot)
    except JointNameError:
        return None


# -- the full rigid-body path ----------------------------------------------------------

def vertical_axes(robot, q, tolerance=1e-3):
    """Whether each joint's axis stays parallel to gravity over the samples.

    Parameters
    ----------
    robot : RobotModel
    q : ndarray, (N, n)
        rad; up to 50 evenly spread samples are looked at.
    tolerance : float
        ``1 - |cos|`` of the angle between the axis and gravity below which it is vertical.

    Returns
    -------
    ndarray of bool, (n,)
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    g = np.asarray(robot.gravity_vector, dtype=float)[:3]
    if not np.linalg.norm(g) > 0:
        return np.zeros(robot.n_joints, dtype=bool)
    g = g / np.linalg.norm(g)
    model, data = robot.model, robot.model.createData()
    vertical = np.ones(robot.n_joints, dtype=bool)
    for row in q[::max(1, len(q) // 50)]:
        pin.forwardKinematics(model, data, robot._pin_q(row))
        for k, jid in enumerate(robot._jid):
            axis = data.oMi[int(jid)].rotation @ robot._axes[int(jid) - 1]
            vertical[k] &= 1.0 - abs(float(axis @ g)) < tolerance
    return vertical


def roughness_ratio(nominal, tau):
    """How much rougher the nominal torque is than the measured one, per joint.

    The roughness of a signal is the RMS of its sample-to-sample change over its
    standard deviation (scale-free, so a wrong torque constant does not change it).
    On well-filtered data both are smooth and the ratio is about 1 or below; when the
    cut-off lets encoder noise into q̈, the URDF's inverse dynamics turns it into
    torque noise that the measured torque does not have (a ratio of 10 or more).

    Parameters
    ----------
    nominal, tau : ndarray, (M, n)
        The URDF's torques and the measured ones at the same filtered samples (N·m).

    Returns
    -------
    ndarray, (n,)
        NaN where a signal is constant.
    """
    def rough(x):
        sd = np.std(x, axis=0)
        return np.where(sd > 0, np.sqrt(np.mean(np.diff(x, axis=0) ** 2, axis=0))
                        / np.where(sd > 0, sd, 1.0), np.nan)
    return rough(np.asarray(nominal, dtype=float)) / rough(np.asarray(tau, dtype=float))


def check_dynamics(robot, q, dq, ddq, tau, columns, features=None, torque_constants=None,
                   effort='current', max_samples=4000, options=None, load_frame=None):
    """Check measured torques against the nominal URDF's full rigid-body torques.

    Per joint i, a (robust) least-squares fit of the measured torque::

        tau_i ≈ s_i τ_i(q, q̇, q̈) + b_i + fc_i tanh(q̇_i / v) + fv_i q̇_i + Ia_i q̈_i

    with τ the URDF's inverse dynamics: scale and sign from every sample, gravity
    where the arm holds, inertia where it moves fast; Coulomb, viscous friction and
    a rotor inertia (the URDF carries none) as nuisance terms, so that they do not
    bias the scale.

    Parameters
    ----------
    robot : RobotModel
        The nominal arm at the gravity the data was recorded under.
    q, dq, ddq : ndarray, (M, n)
        Filtered positions (rad), velocities (rad/s) and accelerations (rad/s²):
        :func:`arm_dyn_id.data.preparation.prepare`'s.
    tau : ndarray, (M, n)
        Measured torques through the same filter (N·m).
    columns : ndarray, (M, n, 2 or 3, plus 4 with ``load_frame``)
        :func:`nominal_columns`' output at the samples, through the same filter
        (``prepare(..., regressor=nominal_columns(robot, payload_frame=load_frame))``).
    features : ndarray, (M, n, 2), optional
        :func:`friction_features`' output, filtered likewise; without it no
        friction is fitted.
    torque_constants, effort, options
        As :func:`check_gravity`.
    max_samples : int
        Evenly thinned to at most this many samples for the fits (the standard
        errors assume at most ``effective_samples`` independent ones anyway).
    load_frame : str, optional
        The frame ``columns`` carries a load's four columns for (``nominal_columns(...,
        payload_frame=load_frame)``): scales that fail but a load the URDF lacks explains
        are warnings that name it.

    Returns
    -------
    CheckResult

    Raises
    ------
    ImplausibleURDFError
        The URDF is implausible (:func:`check_urdf`).
    DataError
        Shapes disagree, too few samples, non-finite values, zero nominal torques, or
        derivatives that are noise (:func:`roughness_ratio` above
        ``derivative_noise`` on most joints): the filter's cut-off is too high.
    """
    check_urdf(robot)
    opt = dict(DEFAULTS, **(options or {}))
    cols = np.asarray(columns, dtype=float)
    q, dq, ddq = (np.asarray(a, dtype=float) for a in (q, dq, ddq))
    if cols.ndim == 3 and cols.shape[:2] == q.shape and np.shape(tau) == q.shape:
        ratio = roughness_ratio(cols[:, :, 0], tau)
        typical = float(np.nanmedian(ratio)) if np.any(np.isfinite(ratio)) else 0.0
        if typical > opt['derivative_noise']:
            raise DataError('derivatives are noise: the URDF\'s torque on the filtered samples '
                            f'is {typical:.3g}x rougher than the measured torque (the cut-off '
                            'is too high for the encoder noise)')
    every = slice(None, None, max(1, -(-q.shape[0] // max_samples)))
    q, dq, ddq, cols, tau = q[every], dq[every], ddq[every], cols[every], \
        np.asarray(tau, dtype=float)[every]
    features = None if features is None else np.asarray(features, dtype=float)[every]
    n = robot.n_joints
    if cols.ndim != 3 or cols.shape[:2] != q.shape or \
            cols.shape[2] < (6 if load_frame is not None else 2):
        raise DataError(f'nominal columns {cols.shape} must be (M, {n}, 2 or 3, and 4 more '
                        f'with a load frame) like the positions {q.shape}')
    joints, G, T, k_e = _validate(robot.joint_names, cols[:, :, 0], tau, torque_constants,
                                  effort)
    load = cols[:, :, -4:] if load_frame is not None else None
    if load is not None:
        cols = cols[:, :, :-4]
    gravity = cols[:, :, 1]
    moving = np.max(np.abs(dq), axis=0) > opt['moving_speed']
    nuisance = []
    for i in range(n):
        extra = []
        if moving[i]:
            if features is not None:
                extra += [features[:, i, k] for k in range(features.shape[2])]
            if opt['armature'] and cols.shape[2] > 2:
                extra.append(cols[:, i, 2])
        nuisance.append(extra)
    gravity_max = np.max(np.abs(gravity), axis=0)
    inertial_rms = np.sqrt(np.mean((G - gravity) ** 2, axis=0))
    vertical = vertical_axes(robot, q)
    top = float(np.sqrt(np.mean(G ** 2, axis=0)).max())

    def why(i, se):
        little = opt['min_load'] * top
        if vertical[i]:
            g_part = 'its axis is vertical, gravity never loads it'
        elif gravity_max[i] <= 1e-9 * top:
            g_part = ('gravity never loads it (what it carries has its centre of mass on '
                      'its axis)')
        elif gravity_max[i] < little:
            g_part = f'gravity barely loads it (|G| max {gravity_max[i]:.2g} N·m)'
        else:
            g_part = None
        if not moving[i]:
            i_part = 'and it does not move'
        elif inertial_rms[i] < little or (opt['armature'] and g_part):
            i_part = 'and the motion gives too little inertial torque'
        else:
            i_part = None
        if g_part and i_part:
            text = f'{g_part}, {i_part}'
        elif g_part:
            text = f'{g_part}, and its inertial torque is too small against the noise'
        else:
            text = 'its nominal torque is too small against the noise and friction'
        scale = f' (scale ±{se:.2g})' if np.isfinite(se) else ''
        if g_part and (vertical[i] or gravity_max[i] <= 1e-9 * top):
            todo = 'move it faster (a Fourier excitation): only inertia can load it'
        else:
            todo = 'record poses where gravity loads it, or move it faster (a Fourier excitation)'
        return f'{text}{scale}: {todo}'
    context = [dict(gravity_max=float(gravity_max[i]), inertial_rms=float(inertial_rms[i]))
               for i in range(n)]
    checks = _judge(joints, G, T, nuisance, opt, k_e, effort, why, robust=opt['robust'],
                    context=context, still=np.abs(dq) <= opt['moving_speed'],
                    holding=holding_friction(robot, opt['holding_friction']),
                    coulomb=[bool(moving[i] and features is not None) for i in range(n)],
                    spans=joint_spans(q))
    checks, found = _load_explains(checks, G, T, nuisance, load, load_frame, opt,
                                   robust=opt['robust'], still_torque=gravity)
    status, verdict = _overall(checks, effort, 'full')
    return CheckResult(tuple(checks), status, verdict, G.shape[0], effort, opt, 'full', found)


__all__ = ['OK', 'WARN', 'FAIL', 'UNTESTABLE', 'DEFAULTS', 'ImplausibleURDFError', 'joint_spans',
           'JointCheck', 'CheckResult',
           'urdf_problem', 'check_urdf', 'nominal_gravity', 'nominal_columns',
           'friction_features', 'holding_friction', 'held_still', 'STILL_SPAN',
           'BEYOND_HOLDING',
           'vertical_axes', 'roughness_ratio',
           'check_gravity', 'check_samples', 'check_dynamics', 'default_load_frame',
           'nuisance_scales']
