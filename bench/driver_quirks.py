"""A driver's own ways: angles reported within one turn, in degrees or with one joint's
zero off the URDF's, a published velocity that is not the rate of the angles. What `fit`
and the residual make of them.

Fits (``python -m arm_dyn_id fit BAG --urdf URDF --effort torque --no-report --quiet``,
this tree and, with ``--tree DIR``, another checkout for a before / after):

- a Kinova (example-robot-data's j2s6s200, continuous joints 1, 4, 6), a UR5 and a Panda,
  30 s Fourier at 200 Hz (``test/arm_bags.realistic_fourier``, the URDF's arm, torque in
  effort), angles as measured, reported in [0, 2π), in degrees, with one joint's zero a
  quarter or half turn off the URDF's, and one joint reversed (angle and effort);
- the humanoid arm's seed-000 sweeps at 100 Hz (``test/test_cli_fit.reciprocating_data``),
  the same ways.

Per case: exit, the warnings said (first words), the refusal's first words, the gravity
error of the angles the dynamics do not change (RMS % of each loaded joint's peak over
200 random poses, worst joint).

Residual (the humanoid arm's full model fitted on a Fourier bag, thresholds calibrated on
two free runs, as ``test/test_residual.py``): a third free run without contact whose
``JointState.velocity`` is right, all zeros, in degrees per second or of the opposite sign
on joint_2; contact episodes from ``arm-dyn-id residual`` (this tree / ``--tree``) and
through the node's stream sample by sample (this tree, with the velocity check and with
it switched off).

Real UR10e (when ``../shared/real-data/ur10e`` exists): the controller's velocity against
its angles on every recording (gain and correlation over 0.5 s windows).

    .venv/bin/python bench/driver_quirks.py [--tree DIR]
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

import benchlib  # noqa: E402
from arm_bags import Arm, example_robot, realistic_fourier  # noqa: E402
from full_gate_rates import gravity_error  # noqa: E402

from arm_dyn_id.data import velocity  # noqa: E402
from arm_dyn_id.data.bag_writer import write_bag  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

ARMS = {'kinova': 'kinova_description/robots/kinova.urdf',
        'ur5': 'ur_description/urdf/ur5_robot.urdf',
        'panda': 'panda_description/urdf/panda.urdf'}
#: (joint index, degrees of its zero offset, or None: the joint reversed, angle and
#: effort) of the conventions tried per arm
OFFSET_CASES = {'kinova': (), 'ur5': ((1, 90), (1, 180), (1, None), (2, None)),
                'panda': ((1, 180), (4, -90), (1, None), (3, None))}


def convention_case(q, tau, j, deg, names):
    """(label, angles, effort) of joint ``j``'s zero ``deg`` off, or reversed (None)."""
    q, tau = q.copy(), tau.copy()
    if deg is None:
        q[:, j], tau[:, j] = -q[:, j], -tau[:, j]
        return f'{names[j]} reversed (angle and effort)', q, tau
    q[:, j] += np.radians(deg)
    return f'{names[j]} {deg:+d}° off the URDF\'s zero', q, tau


FAULTS = {'right': lambda v: v, 'all zeros': lambda v: 0.0 * v, 'degrees per second':
          np.degrees, 'joint_2 sign flipped': lambda v: v * [1, -1, 1, 1, 1, 1]}


def said(stderr):
    return '; '.join(' '.join(line.split(': ', 1)[1].split()[:6])
                     for line in stderr.splitlines() if line.startswith('warning: ')) or '—'


def refusal(done):
    if done.returncode == 0:
        return '—'
    return ' '.join(re.sub(r'^arm-dyn-id \w+: (fit refused, )?', '',
                           done.stderr.strip().splitlines()[-1]).split()[:14])


def fit_cases(tmp, tree):
    """One markdown row per fit case."""
    rows = []
    for key, rel in ARMS.items():
        urdf = str(example_robot(rel))
        arm = Arm(urdf)
        robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
        t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(0))
        cases = [('as measured', q, tau), ('in [0, 2π)', np.mod(q, 2 * np.pi), tau),
                 ('in degrees', np.degrees(q), tau)]
        cases += [convention_case(q, tau, j, deg, arm.joints) for j, deg in OFFSET_CASES[key]]
        for how, angles, effort in cases:
            bag, out = tmp / f'{key}_{len(rows)}', tmp / f'{key}_{len(rows)}_fit'
            write_bag(bag, 1.7e9 + t, list(arm.joints), angles, effort)
            done = benchlib.run_cli(['fit', bag, '--urdf', urdf, '--effort', 'torque',
                                     '--out', out, '--no-report', '--quiet'], tree)
            err = gravity_error(arm, out / 'model.yaml', urdf) \
                if (out / 'model.yaml').is_file() else None
            rows.append((f'{key} Fourier, angles {how}', done,
                         err if how in ('as measured', 'in [0, 2π)') else None))
    from test_cli_fit import JOINTS, URDF, reciprocating_data
    from test_cli_user_bags import plain_bag
    data = reciprocating_data(seed=3, rate=100.0, poses=2)
    arm = Arm(URDF, JOINTS)
    cases = [('as measured', data['q'], data['tau']),
             ('in [0, 2π)', np.mod(data['q'], 2 * np.pi), data['tau']),
             ('in degrees', np.degrees(data['q']), data['tau'])]
    cases += [convention_case(data['q'], data['tau'], j, deg, JOINTS)
              for j, deg in ((1, 90), (3, -90), (4, 180), (1, None), (2, None))]
    for how, angles, effort in cases:
        bag, out = tmp / f'sweeps_{len(rows)}', tmp / f'sweeps_{len(rows)}_fit'
        plain_bag(bag, data, q=angles, effort=effort)
        done = benchlib.run_cli(['fit', bag, '--urdf', URDF, '--effort', 'torque', '--out',
                                 out, '--no-report', '--quiet'], tree)
        err = gravity_error(arm, out / 'model.yaml', str(URDF)) \
            if (out / 'model.yaml').is_file() and how in ('as measured', 'in [0, 2π)') \
            else None
        rows.append((f'humanoid sweeps, angles {how}', done, err))
    return [f'| {name} | {done.returncode} | {said(done.stderr)} | {refusal(done)} | '
            f'{"—" if err is None else f"{err:.2f}"} |' for name, done, err in rows]


def residual_cases(tmp, tree):
    """One markdown row per velocity fault."""
    import contextlib
    import io
    import test_residual as tr
    from arm_dyn_id.model import load_model
    from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics, run_stream
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        model_file, config = tr.fitted.__wrapped__(tmp)
    served = ServedDynamics(load_model(model_file))
    thresholds = tr.thresholds.__wrapped__(served, (model_file, config))
    th_file = tmp / 'thresholds.yaml'
    thresholds.save(th_file)
    data = tr.free_run(24, segments=3)
    rows = []
    for name, fault in FAULTS.items():
        wrong = fault(data['dq'])
        bag = tr.write_run(tmp / f'run_{len(rows)}', dict(data, dq=wrong))
        done = benchlib.run_cli(['residual', model_file, bag, '--config', config,
                                 '--thresholds', th_file], tree)
        found = re.search(r'contact episodes: (\d+)', done.stdout)
        offline = found.group(1) if found else f'exit {done.returncode}'
        live = []
        for check in (True, False):
            stream = ResidualStream(served, tr.GAINS, thresholds)
            if not check:       # the stream before data.velocity: the message's, always
                stream.velocity_check.update = lambda t, q, dq: dq
                stream.velocity_check.run = lambda t, q, dq: len(t)
            flags = run_stream(stream, data['t'], data['q'], wrong, data['tau'])['contact']
            starts = int((np.diff(flags.astype(int), prepend=0) == 1).sum())
            live.append(f'{starts} ({flags.sum() / tr.RATE:.2f} s)')
        rows.append(f'| {name} | {offline} | {live[0]} | {live[1]} |')
    return rows


def ur10e_velocity():
    """(gain low, gain high, lowest correlation, joints judged, refused) over every
    real UR10e recording, or None without the data."""
    if not benchlib.UR10E.is_dir():
        return None
    gains, rhos, refused = [], [], 0
    for f in sorted((benchlib.UR10E / 'data').glob('*.csv.gz')):
        rec = benchlib.ur10e_csv(f.name[:-len('.csv.gz')])
        t, q, dq = rec['t'], rec['q'], rec['qd']
        keep = np.concatenate([[True], np.diff(t) > 0])
        keep &= np.isfinite(q).all(axis=1) & np.isfinite(dq).all(axis=1)
        t, q, dq = t[keep], q[keep], dq[keep]
        refused += bool(velocity.judge([f'j{i}' for i in range(6)], t, q, dq))
        vq, qq, vv, path = velocity.window_sums(t, q, dq)
        judged = path >= velocity.MIN_PATH
        gains += list(vq[judged] / qq[judged])
        rhos += list(vq[judged] / np.sqrt(qq[judged] * vv[judged]))
    return min(gains), max(gains), min(rhos), len(gains), refused


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--tree', help='another checkout to run the commands from')
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f'# a driver\'s own ways ({args.tree or "this tree"}), {platform.node()}, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
    with tempfile.TemporaryDirectory(prefix='driver_quirks_') as tmp:
        tmp = Path(tmp)
        print('| fit | exit | warnings said | refusal | gravity error % |')
        print('|---|---|---|---|---|')
        for row in fit_cases(tmp, args.tree):
            print(row, flush=True)
        print('\n| velocity published | `residual` episodes | node stream: episodes (flagged) '
              '| node stream without the check |')
        print('|---|---|---|---|')
        for row in residual_cases(tmp, args.tree):
            print(row, flush=True)
    real = ur10e_velocity()
    if real is None:
        print(f'\nreal UR10e: skipped, {benchlib.UR10E} does not exist')
    else:
        print(f'\nreal UR10e, the controller\'s velocity against its angles: gain '
              f'{real[0]:.4f}-{real[1]:.4f}, correlation >= {real[2]:.6f} over {real[3]} '
              f'judged joint-recordings; recordings refused: {real[4]}')
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
