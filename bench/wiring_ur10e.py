"""Real UR10e: the wiring mistakes a user makes, and what ``fit``, ``payload`` and
``validate`` make of them.

Reads ``../shared/real-data/ur10e`` (relative to the repository root; see its README)
when it exists and prints a skip message otherwise (exit 0). Bags are written in a
temporary folder OUTSIDE the repository and deleted; only the table is printed.

The 30 s Fourier run (rows 635:3510, the README's URDF and drive gains: the wiring is
right) is fitted as a user would (``arm-dyn-id fit`` with its defaults), right and with
one mistake at a time:

- the sign of one joint's current flipped (``current_signs`` in a config file);
- two neighbouring joints' currents swapped (the bag's effort columns, positions kept);
- one joint's torque constant 2x.

A mistake fitted with exit 0 is a wrong model leaving unnoticed. Then the right model is
applied by ``arm-dyn-id payload`` and ``validate`` to the free run (nothing attached)
read with one joint's torque constant 2x: a payload reported or a PASS is wrong.

``--part calibrate`` (or ``all``): ``arm-dyn-id calibrate`` of the 2.602 kg twin runs right
and with the mistakes a user makes (the bags swapped, the mass 10x or 0.1x, one run's
effort already torque, a load frame no joint moves), and ``arm-dyn-id residual`` of the
right model on the push recording read right and as torque read as current, and
``--calibrate`` on a "no-contact" set that holds the pushes, or on torque read as current.
A mistake with exit 0 is a wrong result leaving unnoticed.

``--tree PATH`` runs another checkout's code (``git archive REV | tar -x -C PATH``) for
a before / after in the same minutes.

Usage::

    .venv/bin/python bench/wiring_ur10e.py [--tree /tmp/old] [--part fit|calibrate|all]
"""

import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

import benchlib

from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.model.robot import RobotModel

DATA = benchlib.UR10E
URDF = DATA / 'urdf' / 'ur10e.urdf'
GAINS = np.array([10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232])
FIT = ('ur-20_02_10-30sec_12harm', '635:3510')
FREE = 'ur-19_12_23_free'
LOADED = 'ur-20_01_13-load_2600'
PUSH = 'ur-20_01_22-push_pose_1'
FOURIER_50 = ('ur-20_02_12-50sec_12harm', '355:5090')
MASS = 2.602


def config(path, signs=None, gains=GAINS):
    doc = {'/**': {'ros__parameters': {
        'urdf': str(URDF), 'torque_constants': [float(k) for k in gains],
        **({'current_signs': [int(s) for s in signs]} if signs is not None else {})}}}
    path.write_text(yaml.safe_dump(doc))
    return path


def swapped_bag(path, a, b):
    """The fit run with the currents of joints ``a`` and ``b`` swapped (positions kept)."""
    run = benchlib.ur10e_csv(FIT[0])
    lo, hi = (int(x) for x in FIT[1].split(':'))
    current = np.array(run['i'][lo:hi], dtype=float)
    current[:, [a, b]] = current[:, [b, a]]
    names = list(RobotModel.from_urdf(URDF).joint_names)
    write_bag(path, 1_579_000_000 + run['t'][lo:hi], names, run['q'][lo:hi], current,
              velocity=run['qd'][lo:hi])
    return path


def calibrate_and_residual(tmp, model, tree):
    """(label, command, expected exit 0?, exit, last line) of the calibrate and residual
    cases (module text)."""
    torque = ['--effort', 'torque']
    bags = {'free': benchlib.ur10e_bag(FREE, tmp / 'free'),
            'load': benchlib.ur10e_bag(LOADED, tmp / 'load'),
            'free_tq': benchlib.ur10e_bag(FREE, tmp / 'free_tq', options=torque),
            'load_tq': benchlib.ur10e_bag(LOADED, tmp / 'load_tq', options=torque),
            'push': benchlib.ur10e_bag(PUSH, tmp / 'push'),
            'push_tq': benchlib.ur10e_bag(PUSH, tmp / 'push_tq', options=torque),
            'fourier50': benchlib.ur10e_bag(FOURIER_50[0], tmp / 'fourier50', FOURIER_50[1])}
    mass = ['--urdf', URDF, '--mass']
    cases = [('right', 'calibrate', True, [bags['free'], bags['load'], *mass, MASS]),
             ('bags swapped', 'calibrate', False, [bags['load'], bags['free'], *mass, MASS]),
             ('mass 10x (26.02)', 'calibrate', False,
              [bags['free'], bags['load'], *mass, 10 * MASS]),
             ('mass 0.1x (0.2602)', 'calibrate', False,
              [bags['free'], bags['load'], *mass, MASS / 10]),
             ('loaded run as torque', 'calibrate', False,
              [bags['free'], bags['load_tq'], *mass, MASS]),
             ('unloaded run as torque', 'calibrate', False,
              [bags['free_tq'], bags['load'], *mass, MASS]),
             ('--frame base_link', 'calibrate', False,
              [bags['free'], bags['load'], *mass, MASS, '--frame', 'base_link'])]
    folder = tmp / 'contact'
    folder.mkdir()
    (folder / 'model.yaml').write_text(model.read_text())
    if (model.parent / 'contact_thresholds.yaml').is_file():
        (folder / 'contact_thresholds.yaml').write_text(
            (model.parent / 'contact_thresholds.yaml').read_text())
    served = folder / 'model.yaml'
    out = ['--urdf', URDF, '--out', tmp / 'thresholds.yaml']
    cases += [('push recording, read right', 'residual', True,
               [served, bags['push'], '--urdf', URDF]),
              ('push recording, torque read as current', 'residual', False,
               [served, bags['push_tq'], '--urdf', URDF]),
              ('--calibrate on a Fourier run and the push recording', 'residual', False,
               [served, bags['fourier50'], bags['push'], '--calibrate', *out]),
              ('--calibrate on the free run as torque read as current', 'residual', False,
               [served, bags['free_tq'], '--calibrate', *out]),
              ('--calibrate on a Fourier run', 'residual', True,
               [served, bags['fourier50'], '--calibrate', *out])]
    given = ['--urdf', URDF, '--torque-constants', ','.join(f'{k:g}' for k in GAINS)]
    cases += [(f'2.602 kg at tool0, --frame {frame}', 'payload', frame in ('tool0', None),
               [served, bags['load'], *given] + (['--frame', frame] if frame else []))
              for frame in (None, 'wrist_1_link', 'forearm_link', 'upper_arm_link',
                            'base_link')]
    rows = []
    for label, command, right, argv in cases:
        done = benchlib.run_cli([command, *argv, '--quiet'], tree)
        lines = [line for line in (done.stderr + done.stdout).strip().splitlines()
                 if 'effort read as model' not in line]
        last = next((line for line in lines if 'error' in line or 'refused' in line),
                    lines[-1] if lines else '')
        rows.append((label, command, right, done.returncode, last.split(': ', 1)[-1][:120]))
        print(f'{command} {label}: exit {done.returncode}', file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    args = benchlib.ur10e_arguments(__doc__, argv, more=lambda p: p.add_argument(
        '--part', choices=('fit', 'calibrate', 'all'), default='all'))
    if args is None:
        return 0
    started = time.perf_counter()
    names = list(RobotModel.from_urdf(URDF).joint_names)
    short = [n.replace('_joint', '') for n in names]
    rows = []
    with tempfile.TemporaryDirectory(prefix='wiring_ur10e_') as tmp:
        tmp = Path(tmp)
        bag = benchlib.ur10e_bag(FIT[0], tmp / 'fit_bag', FIT[1])
        cases = [('right', bag, config(tmp / 'right.yaml'))]
        for j in range(6):
            signs = np.ones(6)
            signs[j] = -1
            cases.append((f'{short[j]} sign flipped', bag,
                          config(tmp / f'sign{j}.yaml', signs=signs)))
        for j in range(5):
            cases.append((f'{short[j]} and {short[j + 1]} currents swapped',
                          swapped_bag(tmp / f'swap{j}', j, j + 1), config(tmp / 'right.yaml')))
        for j in range(6):
            gains = GAINS.copy()
            gains[j] *= 2
            cases.append((f'{short[j]} constant 2x', bag,
                          config(tmp / f'gain{j}.yaml', gains=gains)))
        if args.part == 'calibrate':
            cases = cases[:1]                   # the right model, to apply
        for label, case_bag, cfg in cases:
            code, what, gate, reason = benchlib.gated_fit(
                case_bag, tmp / f'fit_{len(rows)}', ['--config', cfg], args.tree)
            rows.append((label, code, what, len(gate.get('judged_joints') or []), reason))
            print(f'{label}: exit {code}', file=sys.stderr, flush=True)
        model = tmp / 'fit_0' / 'model.yaml'
        free = benchlib.ur10e_bag(FREE, tmp / 'free_run')
        applied, more = [], []
        if args.part != 'fit':
            more = calibrate_and_residual(tmp, model, args.tree)
        for j in (range(6) if args.part != 'calibrate' else ()):
            gains = GAINS.copy()
            gains[j] *= 2
            given = ['--urdf', URDF, '--torque-constants', ','.join(f'{k:g}' for k in gains)]
            for command in ('payload', 'validate'):
                done = benchlib.run_cli([command, model, free, *given], args.tree)
                last = (done.stderr.strip().splitlines() or [''])[-1]
                verdict = next((line for line in done.stdout.splitlines()
                                if line.startswith(('verdict', '  mass'))), '')
                applied.append((f'{short[j]} constant 2x', command, done.returncode,
                                (verdict or last.split(': ', 1)[-1])[:90]))
    print(f'# wiring mistakes on the real UR10e ({args.tree or "this tree"}), '
          f'{platform.node()} {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{time.perf_counter() - started:.0f} s\n')
    if more:
        print('`arm-dyn-id calibrate` of the 2.602 kg twin runs, `residual` of the right '
              'model:\n')
        print('| case | command | exit | what it said |\n|---|---|---|---|')
        for label, command, _, code, said in more:
            print(f'| {label} | {command} | {code} | {said} |')
        wrong = [f'{r[1]} {r[0]}' for r in more if not r[2] and r[3] == 0]
        blocked = [f'{r[1]} {r[0]}' for r in more if r[2] and r[3] != 0]
        print(f'\nmistakes with exit 0: {len(wrong)} of {sum(not r[2] for r in more)} '
              f'{wrong}; right cases refused: {len(blocked)} {blocked}\n')
    if args.part == 'calibrate':
        return 0
    print('`arm-dyn-id fit` of the 30 s Fourier run:\n')
    print('| wiring | exit | fitted / cause | joints judged on held-out data | refusal |')
    print('|---|---|---|---|---|')
    for label, code, what, judged, reason in rows:
        print(f'| {label} | {code} | {what} | {judged} | {reason[:110]} |')
    wrong = [r[0] for r in rows[1:] if r[1] == 0]
    silent = [r[0] for r in rows[1:] if r[1] == 0 and '(warned' not in r[2]]
    print(f'\nmistakes fitted with exit 0: {len(wrong)} of {len(rows) - 1} {wrong}; '
          f'without a warning: {len(silent)} {silent}')
    print('\nthe right model on the free run (nothing attached), read with one constant 2x:\n')
    print('| reading | command | exit | what it said |\n|---|---|---|---|')
    for label, command, code, said in applied:
        print(f'| {label} | {command} | {code} | {said} |')
    passed = [f'{a[0]} {a[1]}' for a in applied if a[2] == 0]
    print(f'\nexit 0 (a payload reported, or a PASS): {len(passed)} of {len(applied)} {passed}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
