"""Generic seeded optimisers, shared by the excitation design and the estimators.

- :func:`particle_swarm`: THE particle swarm (seed 000 eqs. 16-17), optionally with
  the term of seed 001 eqs. 16-17 by which each particle also learns from the best
  of a random other particle;
- :func:`hybrid_ga_pso`: the genetic + particle-swarm hybrid of seed 000 (a genetic
  phase with adaptive crossover/mutation probabilities, eqs. 14-15, improves the
  initial swarm; :func:`particle_swarm` continues from it);
- :func:`differential_evolution`: ``scipy.optimize.differential_evolution``, stopped
  at the same number of evaluations;
- :func:`genetic_algorithm`: a real-coded GA, plain or with seed 002's improvements
  (small-interval initialisation, large mutation when the population has gathered,
  elitism; seed 002 §2.3 and steps 1-13 of §3.1).

``hybrid_ga_pso`` and ``differential_evolution`` minimise over the unit box with the
same interface and the same budget of objective evaluations, driven by a seeded
``numpy.random.Generator`` passed in; :func:`run_optimiser` picks one by name.

Foundation level: imports NumPy, SciPy and :mod:`arm_dyn_id.errors` only, so that
both the excitation and the identification wings can use it.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from arm_dyn_id.errors import ConfigError

OPTIMISERS = ('hybrid', 'de', 'ga', 'improved_ga')


@dataclass
class OptimisationResult:
    """Outcome of one optimiser run.

    Attributes
    ----------
    x : ndarray, (d,)
        Best point.
    fun : float
        Its objective.
    nfev : int
        Objective evaluations used.
    seconds : float
        Wall time.
    method : str
    history : list of (nfev, best fun)
    """

    x: np.ndarray
    fun: float
    nfev: int
    seconds: float
    method: str
    history: list = field(default_factory=list)


class EvaluationCounter:
    """An objective on the unit box that counts evaluations, tracks the best point,
    reports progress and enforces the budget.

    Past the budget it returns the best value seen without evaluating, so an optimiser
    that asks for more (scipy's) gets no new information. Points are clipped to the
    box; non-finite values count as 1e30.

    Parameters
    ----------
    fun : callable
        x (d,) -> float.
    budget : int
    progress : callable, optional
        ``progress(percent, best)``, called when the whole percentage changes.
    """

    def __init__(self, fun, budget, progress=None):
        self.fun, self.budget, self.progress = fun, int(budget), progress
        self.nfev, self.best, self.best_x, self.history = 0, np.inf, None, []
        self._last = -1

    @property
    def exhausted(self):
        return self.nfev >= self.budget

    @property
    def remaining(self):
        return max(self.budget - self.nfev, 0)

    def __call__(self, x):
        if self.exhausted:
            return self.best if np.isfinite(self.best) else 1e30
        x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        value = float(self.fun(x))
        if not np.isfinite(value):
            value = 1e30
        self.nfev += 1
        if value < self.best:
            self.best, self.best_x = value, x.copy()
            self.history.append((self.nfev, value))
        pct = int(100 * self.nfev / self.budget)
        if self.progress is not None and pct != self._last:
            self._last = pct
            self.progress(pct, self.best)
        return value


def particle_swarm(fun, x, budget, rng, cost=None, bounds=(0.0, 1.0), inertia=(0.9, 0.4),
                   c1=2.0, c2=2.0, c3=0.0, max_speed=None, walls='reflect', batch=False):
    """Particle swarm minimisation from a given swarm (seed 000 eqs. 16-17).

    Velocity update, with ω falling linearly from ``inertia[0]`` to ``inertia[1]``
    over the budget and r1, r2, r3 uniform in [0, 1) per particle and coordinate::

        v ← ω v + c1 r1 (p_i - x) + c2 r2 (g - x) [+ c3 r3 (p_k - x)]
        x ← x + v

    p_i is the particle's own best, g the swarm's best and p_k the best of a random
    other particle k, drawn anew for each particle at each step (seed 001 eqs. 16-17;
    the term is used when ``c3 > 0``).

    Parameters
    ----------
    fun : callable
        x (d,) -> float, or with ``batch`` the whole swarm X (m, d) -> (m,).
    x : ndarray, (P, d)
        Initial swarm (copied).
    budget : int
        Objective evaluations for the moves (the initial swarm's too when ``cost`` is
        not given). One-at-a-time evaluation stops exactly at the budget; a batch
        evaluates only as many particles as the budget has left.
    rng : numpy.random.Generator
    cost : ndarray, (P,), optional
        Objective of the initial swarm, when already known.
    bounds : (float or ndarray (d,), float or ndarray (d,))
        Box the particles stay in.
    inertia : (float, float)
        ω at the start and at the end of the budget.
    c1, c2, c3 : float
        Learning factors: own best, swarm best, random other particle's best.
    max_speed : float, optional
        Velocity clamp per coordinate as a fraction of the box width (none by default).
    walls : {'reflect', 'clip'}
        At the box walls a particle is mirrored back and its velocity reversed and
        halved (``reflect``), or it stops on the wall (``clip``).
    batch : bool
        ``fun`` takes the whole swarm at once.

    Returns
    -------
    OptimisationResult
        ``x`` is the swarm's best point, ``nfev`` the evaluations made here.
    """
    if walls not in ('reflect', 'clip'):
        raise ConfigError(f'walls {walls!r} must be reflect or clip')
    start = time.perf_counter()
    lower, upper = bounds
    x = np.array(x, dtype=float)
    population, dim = x.shape
    budget = int(budget)
    used = 0
    if cost is None:
        if batch:
            cost = np.asarray(fun(x[:budget]), dtype=float)
        else:
            cost = np.array([fun(xi) for xi in x[:budget]])
        used = len(cost)
        # particles the budget could not evaluate never lead the swarm
        cost = np.concatenate([cost, np.full(population - used, np.inf)])
    p_best, p_cost = x.copy(), np.array(cost, dtype=float)
    g = int(np.argmin(p_cost))
    history = [(used, float(p_cost[g]))]
    vel = np.zeros_like(x)
    speed = None if max_speed is None else max_speed * (np.asarray(upper) - lower)
    span = max(budget, 1)
    while used < budget:
        frac = used / span
        w = inertia[0] + (inertia[1] - inertia[0]) * frac
        if c3 > 0:
            others = rng.integers(0, population, size=population)
            r1, r2, r3 = rng.random((3, population, dim))
        else:
            r1, r2 = rng.random((2, population, dim))
        vel = w * vel + c1 * r1 * (p_best - x) + c2 * r2 * (p_best[g] - x)   # eq. 16
        if c3 > 0:
            vel = vel + c3 * r3 * (p_best[others] - x)
        if speed is not None:
            vel = np.clip(vel, -speed, speed)
        x = x + vel                                                           # eq. 17
        if walls == 'reflect':
            over, under = x > upper, x < lower
            x = np.where(over, 2 * upper - x, np.where(under, 2 * lower - x, x))
            vel[over | under] *= -0.5
        x = np.clip(x, lower, upper)
        if batch:
            m = min(population, budget - used)
            cost = np.asarray(fun(x[:m]), dtype=float)
            used += m
            better = np.flatnonzero(cost < p_cost[:m])
            p_best[better], p_cost[better] = x[better], cost[better]
        else:
            for i in range(population):
                if used >= budget:
                    break
                c = fun(x[i])
                used += 1
                if c < p_cost[i]:
                    p_best[i], p_cost[i] = x[i].copy(), c
        g = int(np.argmin(p_cost))
        if p_cost[g] < history[-1][1]:
            history.append((used, float(p_cost[g])))
    return OptimisationResult(p_best[g].copy(), float(p_cost[g]), used,
                              time.perf_counter() - start, 'pso', history)


def hybrid_ga_pso(fun, dim, budget, rng, population=30, ga_fraction=0.3,
                  pc=(0.9, 0.6), pm=(0.1, 0.01), inertia=(0.9, 0.4), c1=2.0, c2=2.0,
                  max_speed=0.2, progress=None):
    """Genetic + particle-swarm hybrid of seed 000 (Fig. 3, eqs. 13-17), minimising.

    Parameters
    ----------
    fun : callable
        x (dim,) in [0, 1] -> float to minimise (the evaluation W of eq. 13).
    dim : int
    budget : int
        Objective evaluations.
    rng : numpy.random.Generator
    population : int
        Individuals = particles.
    ga_fraction : float
        Share of the budget spent in the genetic phase.
    pc, pm : (float, float)
        Maximum and minimum crossover / mutation probabilities (p_c1, p_c2; p_m1, p_m2).
    inertia : (float, float)
        ω of eq. 16, decreasing linearly from the first to the second value.
    c1, c2 : float
        Individual and social learning factors (eq. 16).
    max_speed : float
        Velocity clamp per coordinate (fraction of the box).
    progress : callable, optional
        ``progress(percent, best)``.

    Returns
    -------
    OptimisationResult
    """
    start = time.perf_counter()
    f = EvaluationCounter(fun, budget, progress)
    pop = rng.uniform(size=(population, dim))
    cost = np.array([f(x) for x in pop])
    ga_budget = int(ga_fraction * budget)
    # --- genetic phase: fitness Y = -cost (larger is better) -------------------
    while f.nfev + population <= ga_budget:
        fit = -cost
        f_max, f_avg = fit.max(), fit.mean()
        spread = max(f_max - f_avg, 1e-300)
        # tournament selection
        a, b = rng.integers(population, size=(2, population))
        parents = np.where((cost[a] < cost[b])[:, None], pop[a], pop[b])
        pfit = np.maximum(fit[a], fit[b])
        children = parents.copy()
        for i in range(0, population - 1, 2):
            y = max(pfit[i], pfit[i + 1])
            p_c = pc[0] - (pc[0] - pc[1]) * (y - f_avg) / spread if y > f_avg else pc[0]  # eq 14
            if rng.uniform() < p_c:
                lam = rng.uniform(size=dim)
                children[i] = lam * parents[i] + (1 - lam) * parents[i + 1]
                children[i + 1] = lam * parents[i + 1] + (1 - lam) * parents[i]
        for i in range(population):
            y = pfit[i]
            # eq. 15 as printed: better individuals mutate less
            p_m = pm[0] - (pm[0] - pm[1]) * (y - f_avg) / spread if y > f_avg else pm[0]
            mask = rng.uniform(size=dim) < p_m
            children[i, mask] += rng.normal(0.0, 0.1, size=mask.sum())
        children = np.clip(children, 0.0, 1.0)
        child_cost = np.array([f(x) for x in children])
        # elitism: the best individual so far survives
        worst = int(np.argmax(child_cost))
        best = int(np.argmin(cost))
        if child_cost[worst] > cost[best]:
            children[worst], child_cost[worst] = pop[best], cost[best]
        pop, cost = children, child_cost
    # --- particle swarm phase (eqs. 16-17) on the rest of the budget -------------
    particle_swarm(f, pop, f.remaining, rng, cost=cost, inertia=inertia, c1=c1, c2=c2,
                   max_speed=max_speed)
    return OptimisationResult(f.best_x, f.best, f.nfev, time.perf_counter() - start, 'hybrid',
                              f.history)


def differential_evolution(fun, dim, budget, rng, population=30, progress=None):
    """scipy's differential evolution on the unit box with the same evaluation budget.

    Parameters as :func:`hybrid_ga_pso`; ``population`` is the total population
    (scipy's ``popsize`` is per dimension).
    """
    import scipy.optimize
    start = time.perf_counter()
    f = EvaluationCounter(fun, budget, progress)
    popsize = max(1, int(round(population / dim)))
    seed = int(rng.integers(2 ** 31 - 1))
    scipy.optimize.differential_evolution(
        f, [(0.0, 1.0)] * dim, maxiter=10 ** 6, popsize=popsize, tol=0.0, atol=0.0,
        polish=False, seed=seed, init='latinhypercube',
        callback=lambda *args, **kwargs: f.exhausted)
    return OptimisationResult(f.best_x, f.best, f.nfev, time.perf_counter() - start, 'de',
                              f.history)


def genetic_algorithm(fun, dim, budget, rng, population=40, pc=0.8, pm=0.02, sigma=0.1,
                      improved=False, init_box=None, pm_large=0.3, alpha=0.9, progress=None):
    """Real-coded genetic algorithm on the unit box, minimising; plain or improved as
    in seed 002 §2.3 / §3.1.

    Both: floating-point genes, roulette-wheel selection on the fitness ``1 / cost``
    (step 7), arithmetic crossover of random pairs with probability ``pc`` (step 8),
    Gaussian mutation of each gene with probability ``pm`` and standard deviation
    ``sigma`` (box widths), generational replacement (step 11).

    ``improved=True`` adds the paper's three changes:

    1. small-interval initialisation: the first population is drawn inside
       ``init_box`` (the "small intervals" the parameters are known to lie in);
    2. large mutation: when the population has gathered, ``alpha · f_max < f_avg``
       (step 9, ``f = 1 / cost`` the fitness), the offspring mutate with ``pm_large``
       instead of ``pm``;
    3. elitism: the best parent replaces the worst child when it is better than the
       best child (step 10).

    Parameters
    ----------
    fun : callable
        x (dim,) in [0, 1] -> cost (the fitness function H of seed 002 §2.4).
    dim, budget : int
        Dimension; objective evaluations.
    rng : numpy.random.Generator
    population : int
    pc, pm, pm_large : float
        Crossover, mutation and large-mutation probabilities (p_c, p_m, p_max).
    sigma : float
        Mutation step, fraction of the box.
    improved : bool
    init_box : (ndarray (dim,), ndarray (dim,)), optional
        Lower and upper corner of the initial population's box inside [0, 1]
        (improved GA only; default the whole box).
    alpha : float
        Density factor of step 9, in (0, 1).
    progress : callable, optional

    Returns
    -------
    OptimisationResult
        ``method`` is ``'improved_ga'`` or ``'ga'``; ``history`` (evaluations, best).
    """
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f'alpha {alpha} must lie in (0, 1)')
    if population < 2:
        raise ConfigError(f'population {population} must be at least 2')
    start = time.perf_counter()
    f = EvaluationCounter(fun, budget, progress)
    if improved and init_box is not None:
        lo = np.clip(np.broadcast_to(np.asarray(init_box[0], float), dim), 0.0, 1.0)
        hi = np.clip(np.broadcast_to(np.asarray(init_box[1], float), dim), 0.0, 1.0)
    else:
        lo, hi = np.zeros(dim), np.ones(dim)
    pop = lo + (hi - lo) * rng.uniform(size=(population, dim))
    cost = np.array([f(x) for x in pop])
    while f.nfev + population <= f.budget:
        fit = 1.0 / np.maximum(cost, 1e-300)
        prob = fit / fit.sum()
        parents = pop[rng.choice(population, size=population, p=prob)]
        children = parents.copy()
        order = rng.permutation(population)
        for i, j in zip(order[0::2], order[1::2]):
            if rng.uniform() < pc:
                lam = rng.uniform()
                children[i] = lam * parents[i] + (1 - lam) * parents[j]
                children[j] = lam * parents[j] + (1 - lam) * parents[i]
        # step 9 compares the offspring's f_max and f_avg after crossover; their fitness
        # is known only by evaluating them, so the current population's is used (the
        # offspring are drawn from it) and no evaluation is spent on the test
        p_m = pm_large if improved and alpha * fit.max() < fit.mean() else pm
        mask = rng.uniform(size=children.shape) < p_m
        children[mask] += rng.normal(0.0, sigma, size=int(mask.sum()))
        children = np.clip(children, 0.0, 1.0)
        child_cost = np.array([f(x) for x in children])
        if improved:
            best = int(np.argmin(cost))
            if cost[best] < child_cost.min():                     # step 10: elitism
                worst = int(np.argmax(child_cost))
                children[worst], child_cost[worst] = pop[best], cost[best]
        pop, cost = children, child_cost
    return OptimisationResult(f.best_x, f.best, f.nfev, time.perf_counter() - start,
                              'improved_ga' if improved else 'ga', f.history)


def run_optimiser(name, fun, dim, budget, rng, progress=None, **kwargs):
    """Run ``'hybrid'``, ``'de'``, ``'ga'`` or ``'improved_ga'`` (see :data:`OPTIMISERS`)."""
    if name == 'hybrid':
        return hybrid_ga_pso(fun, dim, budget, rng, progress=progress, **kwargs)
    if name == 'de':
        return differential_evolution(fun, dim, budget, rng, progress=progress, **kwargs)
    if name in ('ga', 'improved_ga'):
        return genetic_algorithm(fun, dim, budget, rng, improved=name == 'improved_ga',
                                 progress=progress, **kwargs)
    raise ConfigError(f'optimiser {name!r} is unknown; choose one of {OPTIMISERS}')
