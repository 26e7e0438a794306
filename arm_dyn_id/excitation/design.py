"""Optimal excitation: static poses (seed 000 eqs. 12-17) and Fourier coefficients
(seed 001 eqs. 8-10).

The problems live here; the optimisers that solve them are the generic ones of
:mod:`arm_dyn_id.optimisers` (``'hybrid'``: the genetic + particle-swarm hybrid of
seed 000; ``'de'``: differential evolution), with the same budget of objective
evaluations and a seeded ``numpy.random.Generator`` passed in.

Problems minimise a penalised objective over the unit box: a candidate that breaks a
constraint that cannot be repaired (collision, end-effector speed) scores
``10 + 100 · violation`` above its raw objective, so every feasible candidate beats
every infeasible one.
"""

import numpy as np

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import (DEFAULT_POSITION_MARGIN, DEFAULT_SWEEP_RANGE,
                                         QUICK_SWEEP_RANGE, TWO_PI, Sweep, fourier_plan,
                                         fourier_series, pose_bounds,
                                         rest_fourier_coefficients, sweep_limits)
from arm_dyn_id.model.base_parameters import (condition_number, gravity_base_parameters,
                                              inertial_base_parameters)
from arm_dyn_id.optimisers import run_optimiser

INFEASIBLE = 10.0


# ---------------------------------------------------------------------------
# static poses of the reciprocating plan (seed 000 eq. 12)
# ---------------------------------------------------------------------------
class PoseProblem:
    """Static poses as a point of the unit box, and the penalised criterion.

    Each sweep (joint, pose k) has n coordinates: the static angle of every other joint
    and the sweep centre of its own joint, each mapped linearly onto its allowed range.

    Parameters
    ----------
    robot : RobotModel
    config : ArmConfig
    checker : ClearanceChecker or None
    criterion : {'range', 'condition'}
        ``range``: minimise W = 1 / (1 + Q) (seed 000 eqs. 12-13); ``condition``:
        minimise log10 of the condition number of the stacked gravity base regressor.
    poses_per_joint : int
    sweep_range : float (rad)
    joint_order : sequence of int, optional (default last joint to first)
    samples : int
        Configurations per sweep at which the criterion and clearance are evaluated.
    clearance_pad : float
        Extra clearance (m) demanded during the search, since it samples coarsely.
    """

    def __init__(self, robot, config, checker=None, criterion='range', poses_per_joint=2,
                 sweep_range=DEFAULT_SWEEP_RANGE, joint_order=None, samples=7,
                 margin=DEFAULT_POSITION_MARGIN, clearance_pad=0.01):
        if criterion not in ('range', 'condition'):
            raise ConfigError(f'criterion {criterion!r} must be range or condition')
        self.robot, self.config, self.checker = robot, config, checker
        self.criterion, self.samples, self.pad = criterion, int(samples), float(clearance_pad)
        n = config.n_joints
        order = list(range(n - 1, -1, -1)) if joint_order is None else list(joint_order)
        self.layout = [j for j in order for _ in range(poses_per_joint)]
        self.base = gravity_base_parameters(robot)
        self.g = robot.gravity_magnitude
        self.static_lo, self.static_hi = pose_bounds(config, margin)
        self.sweep = {j: sweep_limits(config, j, sweep_range, margin) for j in set(order)}
        self.dim = n * len(self.layout)

    def sweeps(self, x):
        """Unit-box point (dim,) -> list of :class:`Sweep`."""
        x = np.asarray(x, dtype=float).reshape(len(self.layout), -1)
        out = []
        for row, j in zip(x, self.layout):
            pose = self.static_lo + row * (self.static_hi - self.static_lo)
            c_lo, c_hi, half = self.sweep[j]
            pose[j] = c_lo + row[j] * (c_hi - c_lo)
            out.append(Sweep(j, pose, pose[j] - half, pose[j] + half))
        return out

    def poses(self, x):
        """``(joint_index, pose)`` pairs for
        :func:`~arm_dyn_id.excitation.plans.reciprocating_plan`."""
        return [(s.joint_index, s.pose) for s in self.sweeps(x)]

    def criteria(self, x):
        """(range objective Q, condition number) of the sweeps' samples."""
        q = np.concatenate([s.samples(self.samples) for s in self.sweeps(x)])
        Y = self.base.reduce(self.robot.gravity_regressor(q)) / self.g
        Q = float(np.sum(Y.max(axis=0) - Y.min(axis=0)))
        return Q, condition_number(Y)

    def clearance(self, x):
        """Minimum clearance (m) along the sweeps and the straight transfers between them."""
        if self.checker is None:
            return np.inf
        sweeps = self.sweeps(x)
        qs = [s.samples(self.samples) for s in sweeps]
        for prev, nxt in zip(sweeps[:-1], sweeps[1:]):
            qs.append(np.linspace(prev.start(), nxt.start(), 6)[1:-1])
        return float(self.checker.clearance(np.concatenate(qs)).min())

    def __call__(self, x):
        Q, cond = self.criteria(x)
        raw = 1.0 / (1.0 + Q) if self.criterion == 'range' else \
            np.log10(min(max(cond, 1.0), 1e12))
        if self.checker is not None:
            need = self.checker.min_clearance + self.pad
            d = self.clearance(x)
            if d < need:
                return raw + INFEASIBLE + 100.0 * (need - d)
        return raw


def design_poses(robot, config, optimiser='hybrid', budget=2000, rng=None, criterion='range',
                 poses_per_joint=None, sweep_range=None, quick=False, checker=None,
                 progress=None, population=30, joint_order=None):
    """Optimise the static poses of a reciprocating plan (seed 000 eq. 12).

    Parameters
    ----------
    robot : RobotModel
    config : ArmConfig
    optimiser : {'hybrid', 'de'}
    budget : int
        Objective evaluations.
    rng : numpy.random.Generator, optional
        Default ``np.random.default_rng(0)``.
    criterion : {'range', 'condition'}
    poses_per_joint : int, optional (default 2, 1 with ``quick``)
    sweep_range : float, optional (rad; default 1.2, 0.5 with ``quick``)
    checker : ClearanceChecker, optional
        Default: from the config (``environment_boxes``, ``min_clearance``).
    progress : callable, optional
        ``progress(percent, best objective)``.

    Returns
    -------
    poses : list of (joint_index, ndarray (n,))
        For :func:`~arm_dyn_id.excitation.plans.reciprocating_plan`.
    report : dict
        Optimiser, budget, evaluations, seconds, best objective, both criteria,
        the clearance found by the search and whether it is feasible.
    """
    from arm_dyn_id.excitation.collision import ClearanceChecker
    rng = np.random.default_rng(0) if rng is None else rng
    if checker is None:
        checker = ClearanceChecker.from_config(config)
    if poses_per_joint is None:
        poses_per_joint = 1 if quick else 2
    if sweep_range is None:
        sweep_range = QUICK_SWEEP_RANGE if quick else DEFAULT_SWEEP_RANGE
    problem = PoseProblem(robot, config, checker, criterion, poses_per_joint, sweep_range,
                          joint_order)
    result = run_optimiser(optimiser, problem, problem.dim, budget, rng, progress,
                           population=population)
    Q, cond = problem.criteria(result.x)
    clearance = problem.clearance(result.x)
    report = {'optimiser': optimiser, 'criterion': criterion, 'budget': int(budget),
              'evaluations': int(result.nfev), 'seconds': round(result.seconds, 3),
              'objective': float(result.fun), 'range_objective': Q, 'condition_number': cond,
              'search_clearance': clearance,
              'feasible': bool(clearance >= checker.min_clearance)}
    return problem.poses(result.x), report


# ---------------------------------------------------------------------------
# Fourier coefficients (seed 001 eqs. 8-10)
# ---------------------------------------------------------------------------
class FourierProblem:
    """Fourier coefficients as a point of the unit box, and the penalised criterion.

    Coordinates per joint: L values of a, L of b (each in ±v_max/L, v_max the allowed
    speed) and the offset q0 within the limits. Each candidate is *repaired* before it
    is scored: the first harmonic makes it start and end at rest
    (:func:`~arm_dyn_id.excitation.plans.rest_fourier_coefficients`), then each joint's
    coefficients are scaled down until position, velocity and acceleration fit the
    limits (× the given fractions). End-effector speed and clearance are penalties.
    The criterion is log10 of the condition number of the stacked full base regressor
    with friction (seed 001 eq. 9).
    """

    def __init__(self, robot, config, checker=None, harmonics=5, omega=TWO_PI * 0.1,
                 samples=40, velocity_fraction=0.5, acceleration_fraction=0.5,
                 margin=DEFAULT_POSITION_MARGIN, ee_frame=None, clearance_pad=0.01):
        self.robot, self.config, self.checker = robot, config, checker
        self.L, self.omega = int(harmonics), float(omega)
        n = config.n_joints
        self.n = n
        self.t = np.linspace(0.0, TWO_PI / self.omega, int(samples), endpoint=False)
        self.lo, self.hi = pose_bounds(config, margin)
        self.vmax = velocity_fraction * config.velocity_limits
        self.amax = acceleration_fraction * config.acceleration_limits
        self.base = inertial_base_parameters(robot, friction=True)
        self.dim = n * (2 * self.L + 1)
        self.pad = float(clearance_pad)
        extra = config.extra or {}
        self.ee_v = float(extra.get('ee_linear_speed_limit', np.inf))
        self.ee_w = float(extra.get('ee_angular_speed_limit', np.inf))
        model = robot.model
        if ee_frame is None:
            ee_frame = 'flange' if model.existFrame('flange') else model.frames[-1].name
        self.ee_frame = model.getFrameId(ee_frame)

    def coefficients(self, x):
        """Unit-box point -> repaired (a (n, L), b (n, L), q0 (n,))."""
        x = np.asarray(x, dtype=float).reshape(self.n, 2 * self.L + 1)
        span = (self.vmax / self.L)[:, None]
        a = (2 * x[:, :self.L] - 1) * span
        b = (2 * x[:, self.L:2 * self.L] - 1) * span
        q0 = self.lo + x[:, -1] * (self.hi - self.lo)
        a, b = rest_fourier_coefficients(a, b)
        t = np.linspace(0.0, TWO_PI / self.omega, 400, endpoint=False)
        p, dq, ddq = fourier_series(t, self.omega, a, b, np.zeros(self.n))
        with np.errstate(divide='ignore', invalid='ignore'):
            s = np.minimum.reduce([
                np.ones(self.n),
                self.vmax / np.abs(dq).max(axis=0),
                self.amax / np.abs(ddq).max(axis=0)])
            # fit q0 + s p into [lo, hi]; move q0 to the middle of the room if needed
            width = p.max(axis=0) - p.min(axis=0)
            s = np.minimum(s, (self.hi - self.lo) / np.where(width > 0, width, np.inf))
        s = np.nan_to_num(s, nan=1.0)
        a, b = a * s[:, None], b * s[:, None]
        p = p * s
        q0 = np.clip(q0, self.lo - p.min(axis=0), self.hi - p.max(axis=0))
        return a, b, q0

    def trajectory(self, x, samples=None):
        """q, q̇, q̈ over one period at the search's samples (or ``samples`` of them)."""
        a, b, q0 = self.coefficients(x)
        t = self.t if samples is None else \
            np.linspace(0.0, TWO_PI / self.omega, int(samples), endpoint=False)
        return fourier_series(t, self.omega, a, b, q0)

    def condition_number(self, x):
        q, dq, ddq = self.trajectory(x)
        Y = self.base.reduce(self.robot.full_regressor(q, dq, ddq, friction=True))
        return condition_number(Y)

    def ee_speeds(self, q, dq):
        """Peak end-effector linear (m/s) and angular (rad/s) speed over samples."""
        import pinocchio as pin
        model, data = self.robot.model, self.robot.data
        v_peak = w_peak = 0.0
        for qi, dqi in zip(q, dq):
            pin.forwardKinematics(model, data, self.robot._pin_q(qi), self.robot._pin_v(dqi))
            pin.updateFramePlacements(model, data)
            vel = pin.getFrameVelocity(model, data, self.ee_frame, pin.LOCAL_WORLD_ALIGNED)
            v_peak = max(v_peak, float(np.linalg.norm(vel.linear)))
            w_peak = max(w_peak, float(np.linalg.norm(vel.angular)))
        return v_peak, w_peak

    def violation(self, x, pad=None, samples=None):
        """Sum of constraint violations that repair cannot remove (m/s, rad/s, m).

        The search asks for ``clearance_pad`` more than the minimum clearance at its
        few samples; ``pad=0`` with many ``samples`` checks the constraint itself.
        """
        q, dq, _ = self.trajectory(x, samples)
        pad = self.pad if pad is None else float(pad)
        total = 0.0
        if np.isfinite(self.ee_v) or np.isfinite(self.ee_w):
            v, w = self.ee_speeds(q, dq)
            total += max(0.0, v - self.ee_v) + max(0.0, w - self.ee_w)
        if self.checker is not None:
            need = self.checker.min_clearance + pad
            total += max(0.0, need - float(self.checker.clearance(q).min()))
        return total

    def feasible(self, x, fine=True):
        """The constraints hold: themselves at 400 samples per period (``fine``), or
        with the search's pad at its samples."""
        if fine:
            return self.violation(x, pad=0.0, samples=400) == 0.0
        return self.violation(x) == 0.0

    def shrink_to_feasible(self, x, centre=None, steps=12, fine=True):
        """The same harmonics with amplitudes scaled down until :meth:`feasible`.

        Parameters
        ----------
        x : ndarray, (dim,)
            Unit-box point.
        centre : ndarray, (n,), optional
            Unit offsets to put in place of x's (default x's own).
        steps : int
            Bisection steps on the common amplitude scale in (0, 1].

        Returns
        -------
        x : ndarray, (dim,)
            The scaled point (0.5 in a coefficient coordinate is a zero coefficient).
        scale : float
            The largest scale found feasible (0 when even the static pose is not: then
            the point returned is that static pose, still infeasible).
        """
        y, scale, _ = self._shrink(x, centre, steps, fine, check_full=True)
        return y, scale

    def _shrink(self, x, centre, steps, fine, check_full):
        """Bisection of :meth:`shrink_to_feasible`; also returns the violation of the
        point returned (computed once: the objective needs it too)."""
        x = np.asarray(x, dtype=float).reshape(self.n, 2 * self.L + 1).copy()
        if centre is not None:
            x[:, -1] = centre
        swing = x[:, :-1] - 0.5

        def scaled(s):
            y = x.copy()
            y[:, :-1] = 0.5 + s * swing
            return y.ravel()

        def violation(y):
            return self.violation(y, pad=0.0, samples=400) if fine else self.violation(y)
        if check_full and violation(scaled(1.0)) == 0.0:
            return scaled(1.0), 1.0, 0.0
        lo, hi = 0.0, 1.0
        for _ in range(int(steps)):
            mid = 0.5 * (lo + hi)
            if violation(scaled(mid)) == 0.0:
                lo = mid
            else:
                hi = mid
        # a scale that passed was checked above; the static pose (0) was not
        return scaled(lo), lo, (0.0 if lo > 0.0 else violation(scaled(0.0)))

    def repaired(self, x):
        """x with its amplitudes shrunk (6 bisection steps, the search's check) when it
        is infeasible: the point the objective scores."""
        return self._repaired(x)[0]

    def _repaired(self, x):
        x = np.asarray(x, dtype=float)
        bad = self.violation(x)
        if bad == 0.0:
            return x, 0.0
        y, _, bad = self._shrink(x, None, 6, False, check_full=False)   # x itself failed
        return y, bad

    def __call__(self, x):
        # score the repaired point: nearly every random candidate reaches the floor or an
        # end-effector limit, and a penalty alone left 3 of 4 searches infeasible
        x, bad = self._repaired(x)
        raw = np.log10(min(max(self.condition_number(x), 1.0), 1e12))
        return raw + INFEASIBLE + 100.0 * bad if bad > 0 else raw


def design_fourier(robot, config, optimiser='hybrid', budget=1500, rng=None, harmonics=5,
                   base_frequency=0.1, periods=None, quick=False, checker=None, progress=None,
                   population=30, velocity_fraction=0.5, acceleration_fraction=0.5):
    """Optimise a Fourier excitation plan (seed 001 eqs. 7-10).

    Parameters
    ----------
    robot : RobotModel
    config : ArmConfig
    optimiser : {'hybrid', 'de'}
    budget : int
        Objective evaluations.
    rng : numpy.random.Generator, optional
    harmonics : int
        L.
    base_frequency : float
        ω_f / 2π (Hz).
    periods : int, optional
        Repetitions of the period (default 50, 10 with ``quick``: 8.3 / 1.7 min at 0.1 Hz).
    checker : ClearanceChecker, optional
    progress : callable, optional

    Returns
    -------
    Plan
        With ``info`` holding the condition number, peak end-effector speeds,
        minimum clearance and the optimiser's report.
    """
    from arm_dyn_id.excitation.collision import ClearanceChecker
    rng = np.random.default_rng(0) if rng is None else rng
    if checker is None:
        checker = ClearanceChecker.from_config(config)
    if periods is None:
        periods = 10 if quick else 50
    problem = FourierProblem(robot, config, checker, harmonics, TWO_PI * base_frequency,
                             velocity_fraction=velocity_fraction,
                             acceleration_fraction=acceleration_fraction)
    result = run_optimiser(optimiser, problem, problem.dim, budget, rng, progress,
                           population=population)
    x, shrink = problem.repaired(result.x), 1.0
    if not problem.feasible(x):
        # the search ended outside the feasible set (random coefficients almost always
        # reach the floor or the end-effector limits): keep its harmonics, smaller
        x, shrink = problem.shrink_to_feasible(x)
    a, b, q0 = problem.coefficients(x)
    plan = fourier_plan(config, a, b, q0, problem.omega, periods, name='fourier')
    q, dq, _ = problem.trajectory(x)
    v, w = problem.ee_speeds(q, dq)
    plan.info.update({
        'condition_number': problem.condition_number(x),
        'ee_linear_speed_peak': v, 'ee_angular_speed_peak': w,
        'optimiser': {'name': optimiser, 'budget': int(budget), 'evaluations': int(result.nfev),
                      'seconds': round(result.seconds, 3), 'objective': float(result.fun),
                      'feasible': bool(problem.feasible(x)),
                      # the search's own point was infeasible and was shrunk to this plan
                      'repaired': bool(problem.violation(result.x) > 0.0),
                      'amplitude_scale': float(shrink)},
    })
    return plan
