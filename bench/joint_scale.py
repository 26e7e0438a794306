"""Can a fit tell, by itself, that one joint's torque constant is off? A measured no.

A joint's rigid-body torque shares its parameters with the joints before it, so a joint
whose torque is read at s times its true value pulls the fit between its rows and the
others'; its friction, its own, takes the scale without a trace. The test tried here:
fit again with one free scale more on each joint's fitted rigid-body torque (one joint
at a time against all the others, or every joint the URDF does not test at once against
the ones it does), judged against its jackknife standard error over 8 time blocks.

Simulated records (the humanoid arm, example-robot-data's UR5 and Panda; 30 s of a
5-harmonic Fourier plan at 200 Hz, encoder noise 1e-4 rad) with what real arms have
and the model does not quite: link masses 10 % and centres of mass 1 cm off the URDF,
unmodelled rotor inertia (5 % of each joint's torque), Coulomb friction with ±20 %
direction asymmetry, a Stribeck bump, friction growing with the load (5 % of |τ|),
viscous friction, a torque error correlated over ~1 s (3 % RMS) plus 2 % white noise,
and torque constants N(0, 5 %) off (the wiring is right). Each record is fitted with the
defaults (``fit_full_samples``) right and with one joint's torque read 2x; the table
counts how often a threshold flags a joint of a right record (a false refusal) and the
doubled joint of a 2x record the URDF test let through (a catch).

    .venv/bin/python bench/joint_scale.py [--seeds 4] [--arms humanoid,ur5,panda]

Nothing here is used by the suite: it is the evidence for leaving the check to
``arm-dyn-id check`` and ``calibrate`` (docs/methods.md, "A torque constant off").
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402
import scipy.signal  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

from arm_dyn_id.identification.pipeline import fit_full_samples, judge_full_fit  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from test_preparation_matrix import ARMS, fourier_motion  # noqa: E402

#: Samples at most of the prepared recording the test uses (every k-th beyond).
ROWS = 5000
#: Contiguous time blocks of the jackknife.
BLOCKS = 8


@dataclass
class JointScales:
    """Outcome of :func:`relative_scales`.

    Attributes
    ----------
    delta : ndarray, (n,)
        Each joint's fitted scale on its rigid-body torque, minus 1 (0 for a reference
        joint).
    std_error : ndarray, (n,)
        Jackknife standard error of ``delta`` over time blocks (inf where the joint's
        rigid-body torque does not vary: untestable; 0 for a reference joint).
    reference : tuple of int
        Joints held at scale 1 (the URDF's tested ones), or () when each joint was taken
        against all the others in turn.
    """

    delta: np.ndarray
    std_error: np.ndarray
    reference: tuple

    def to_dict(self, joints):
        """``{joint: {delta, std_error}}`` plus ``reference`` (names), plain types."""
        out = {j: {'delta': float(d), 'std_error': float(s)}
               for j, d, s in zip(joints, self.delta, self.std_error)}
        return {'joints': out, 'reference': [joints[i] for i in self.reference]}


def _regressor(model, q, dq, ddq):
    """The model's base + friction regressor W (M, n, r + f) at these states."""
    from arm_dyn_id.model.dynamics import rigid_regressor
    Y = model.base.reduce(rigid_regressor(model.robot, q, dq, ddq, armature=model.armature))
    friction = model.friction_model
    load = model.nominal_load(q, dq, ddq) if friction.load else None
    F = friction.regressor(dq, friction.features(dq, load))
    return np.concatenate([Y, F], axis=2)


def _solve(gram, moment):
    """Least squares from normal equations whose columns may be dependent (a joint's
    friction columns all zero when it stands still): minimum-norm, scaled columns."""
    d = np.sqrt(np.maximum(np.diag(gram), 0.0))
    d[d == 0] = 1.0
    x, *_ = np.linalg.lstsq(gram / np.outer(d, d), moment / d, rcond=1e-12)
    return x / d


def relative_scales(model, prepared, rigid, predicted, reference=(), rows=ROWS,
                    blocks=BLOCKS):
    """Each joint's scale on its fitted rigid-body torque, refitted with the rest.

    Parameters
    ----------
    model : DynamicsModel
        The fitted model (its base set and friction law).
    prepared : Prepared
        The recording through the model's filter (q, q̇, q̈, τ).
    rigid, predicted : ndarray, (M, n)
        The model's rigid-body and whole torques at ``prepared`` (N·m).
    reference : sequence of int
        Joints whose scale is held at 1; every other joint gets a free scale at once.
        Empty: each joint in turn against all the others.
    rows : int
        Samples used at most (evenly spaced).
    blocks : int
        Time blocks of the jackknife.

    Returns
    -------
    JointScales
    """
    step = max(1, len(prepared.t) // rows)
    take = slice(None, None, step)
    q, dq, ddq = prepared.q[take], prepared.dq[take], prepared.ddq[take]
    tau, c = prepared.tau[take], rigid[take]
    M, n = tau.shape
    sigma = np.std(tau - predicted[take], axis=0)
    sigma = np.where(sigma > 0, sigma, 1.0)
    W = _regressor(model, q, dq, ddq)
    C = np.zeros((M, n, n))
    C[:, np.arange(n), np.arange(n)] = c          # joint k's rigid torque on its own row
    A = np.concatenate([W, C], axis=2) / sigma[None, :, None]
    y = tau / sigma
    p = W.shape[2]
    edges = np.linspace(0, M, blocks + 1).astype(int)
    grams = np.array([np.einsum('mjp,mjq->pq', A[a:b], A[a:b]) for a, b in
                      zip(edges[:-1], edges[1:])])
    moments = np.array([np.einsum('mjp,mj->p', A[a:b], y[a:b]) for a, b in
                        zip(edges[:-1], edges[1:])])
    G, h = grams.sum(axis=0), moments.sum(axis=0)
    reference = tuple(int(i) for i in reference)
    free = [k for k in range(n) if k not in reference]
    groups = [free] if reference else [[k] for k in range(n)]
    delta, se = np.zeros(n), np.zeros(n)
    for group in groups:
        cols = list(range(p)) + [p + k for k in group]
        sub = np.ix_(cols, cols)
        whole = _solve(G[sub], h[cols])[p:]
        left = np.array([_solve((G - g)[sub], (h - m)[cols])[p:]
                         for g, m in zip(grams, moments)])
        spread = np.sqrt((blocks - 1) / blocks * np.sum((left - left.mean(axis=0)) ** 2,
                                                        axis=0))
        for i, k in enumerate(group):
            delta[k] = whole[i]
            varies = np.std(c[:, k]) > 1e-9 * max(float(np.std(c)), 1e-300)
            se[k] = spread[i] if varies else np.inf
    return JointScales(delta=delta, std_error=se, reference=reference)


def simulate(robot, seed, rate=200.0, seconds=30.0, encoder=1e-4):
    """(t, q, τ) of one record with the imperfections of the module's text."""
    rng = np.random.default_rng(seed)
    n = robot.n_joints
    t = np.arange(int(seconds * rate)) / rate
    q, dq, ddq = fourier_motion(robot, t, 10 + seed)
    model = robot.model.copy()
    data = model.createData()
    for i in range(1, model.njoints):
        inertia = model.inertias[i]
        model.inertias[i] = pin.Inertia(inertia.mass * (1 + 0.1 * rng.standard_normal()),
                                        inertia.lever + 0.01 * rng.standard_normal(3),
                                        inertia.inertia)
    rigid = np.array([pin.rnea(model, data, robot._pin_q(a), robot._pin_v(b),
                               robot._pin_v(c))[robot._idx_v] for a, b, c in zip(q, dq, ddq)])
    rms = np.sqrt(np.mean(rigid ** 2, axis=0))
    armature = 0.05 * rms / np.sqrt(np.mean(ddq ** 2, axis=0)) * rng.uniform(0.5, 2, n)
    fc = np.maximum(0.1 * rms, 0.03 * rms.max()) * rng.uniform(0.5, 1.5, n)
    fv = fc * rng.uniform(0.2, 1.0, n)
    asym = 1 + 0.2 * rng.uniform(-1, 1, n)
    s = np.tanh(dq / 0.01)
    friction = (fc * np.where(dq > 0, asym, 1 / asym) * s + fv * dq + 0.05 * np.abs(rigid) * s +
                0.5 * fc * s * np.exp(-(dq / 0.05) ** 2))
    tau = rigid + armature * ddq + friction
    b, a = scipy.signal.butter(2, 1.0, fs=rate)
    slow = scipy.signal.filtfilt(b, a, rng.standard_normal(tau.shape), axis=0)
    slow /= slow.std(axis=0)
    level = np.sqrt(np.mean(tau ** 2, axis=0))
    tau = tau + 0.03 * level * slow + 0.02 * level * rng.standard_normal(tau.shape)
    gains = 1 + 0.05 * rng.standard_normal(n)
    return t, q + encoder * rng.standard_normal(q.shape), tau * gains


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', type=int, default=4)
    parser.add_argument('--arms', default='humanoid,ur5,panda')
    args = parser.parse_args(argv)
    started = time.time()
    right, doubled = [], []          # (arm, seed, z per joint, delta, untested) ...
    for name in args.arms.split(','):
        if ARMS.get(name) is None:
            print(f'{name}: skipped (example-robot-data missing)')
            continue
        robot = RobotModel.from_urdf(ARMS[name])
        n = robot.n_joints
        for seed in range(args.seeds):
            t, q, tau = simulate(robot, seed)
            for j in [None] + list(range(n)):
                k = np.ones(n)
                if j is not None:
                    k[j] = 2.0
                fitted = fit_full_samples(robot, t, q, tau * k)
                verdict = judge_full_fit(fitted, robot, tau * k)
                agree = verdict.checks.get('agreement') or {}
                tested = [i for i, joint in enumerate(robot.joint_names)
                          if (agree.get(joint) or {}).get('tested')]
                for kind, ref in (('one', ()), ('ref', tested)):
                    s = relative_scales(fitted.model, fitted.prepared, fitted.rigid,
                                        fitted.predicted, reference=ref)
                    z = np.where(np.isfinite(s.std_error) & (s.std_error > 0),
                                 s.delta / np.where(s.std_error > 0, s.std_error, 1), 0.0)
                    row = (name, seed, kind, j, verdict.ok, s.delta, z,
                           [i for i in range(n) if i not in tested])
                    (right if j is None else doubled).append(row)
                print(f'{name} seed {seed} 2x on {j}: gate {verdict.ok} ({verdict.cause})',
                      flush=True)
    print(f'\nmachine: {platform.platform()}; {time.time() - started:.0f} s')
    print('\n| test | |delta| > | z > | right records flagged (false) | 2x records the '
          'URDF let through, doubled joint flagged |')
    print('|---|---|---|---|---|')
    for kind in ('one', 'ref'):
        for limit in (0.3, 0.5):
            for zmin in (3.0, 4.0, 6.0, 8.0):
                def flagged(row, joint=None):
                    _, _, _, _, _, delta, z, untested = row
                    joints = untested if joint is None else [joint]
                    return any(abs(delta[i]) > limit and abs(z[i]) > zmin for i in joints)
                rs = [r for r in right if r[2] == kind]
                ds = [r for r in doubled if r[2] == kind and r[4] and r[3] in r[7]]
                print(f'| {kind} | {limit} | {zmin:g} | {sum(map(flagged, rs))} of {len(rs)} '
                      f'| {sum(flagged(r, r[3]) for r in ds)} of {len(ds)} |')
    print('\nright records, largest |z| among untested joints (delta):')
    for r in right:
        if r[2] == 'one' and r[7]:
            i = max(r[7], key=lambda i: abs(r[6][i]))
            print(f'  {r[0]} seed {r[1]}: joint {i + 1} z {r[6][i]:+.1f} (delta {r[5][i]:+.2f})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
