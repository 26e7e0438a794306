"""Real UR10e: does ``arm-dyn-id check`` blame the wiring only when the wiring is wrong?

Reads ``../shared/real-data/ur10e`` (relative to the repository root; see its README)
when it exists and prints a skip message otherwise (exit 0). Every recording of the
free arm (the three Fourier runs, the six single-joint oscillations, the ten static
poses one by one and all ten in one bag, the twin runs without and with the 2.6 kg
load, the URDF holding no load) is turned into a bag with the data's own
``to_bag.py`` in a temporary folder OUTSIDE the repository and checked with
``arm-dyn-id check --effort torque`` (defaults, the README's URDF):

- effort = k·I with the README's drive gains: the wiring is right, so every FAIL is a
  wrong blame;
- with one fault in the effort, as a driver or a configuration would put it there:
  the elbow's or wrist_1's sign reversed, the elbow's torque doubled. Each should FAIL
  on that joint (or, where the recording cannot test it, be UNTESTABLE), and blame no
  other joint.

``--tree PATH`` runs another checkout's code (``git archive REV | tar -x -C PATH``) with
the same script, for a before / after in the same minutes. Nothing derived from the data
is written into the repository: only counts are printed.

Usage::

    .venv/bin/python bench/check_ur10e.py [--tree /tmp/old] [--json PATH]
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

REPO = Path(__file__).resolve().parents[1]
DATA = benchlib.UR10E
GAINS = [10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232]
JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
          'wrist_2_joint', 'wrist_3_joint')
#: recording -> (inputs, rows of each input or None)
RECORDINGS = {
    'fourier 30 s': (['ur-20_02_10-30sec_12harm'], ['635:3510']),
    'fourier 50 s': (['ur-20_02_12-50sec_12harm'], ['355:5090']),
    'fourier 14 harm.': (['ur-20_02_19_14harm50sec'], ['195:4966']),
    **{f'joint_{i} only': ([f'ur-20_01_22-joint_{i}'], None) for i in range(1, 7)},
    **{f'pose p{i}': ([f'ur-20_01_17-p{i}'], None) for i in range(1, 11)},
    'poses p1-p10': ([f'ur-20_01_17-p{i}' for i in range(1, 11)], None),
    'twin run, no load': (['ur-19_12_23_free'], None),
    'twin run, 2.6 kg load': (['ur-20_01_13-load_2600'], None),
}
#: case -> (joint index or None, factor on its constant)
CASES = {'right wiring': (None, 1.0), 'elbow sign reversed': (2, -1.0),
         'elbow constant 2x': (2, 2.0), 'wrist_1 sign reversed': (3, -1.0)}


def run(argv, env=None, cwd=REPO):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd,
                          env=env)


def to_bag(inputs, rows, out, gains):
    return benchlib.ur10e_bag(inputs, out, rows, ('--effort', 'torque', '--torque-constants',
                                                  ','.join(repr(k) for k in gains)))


def check(bag, tree, out):
    env = dict(os.environ)
    if tree:        # python -m puts the working folder first on the path
        env['PYTHONPATH'] = str(tree)
    argv = [REPO / '.venv' / 'bin' / 'python', '-m', 'arm_dyn_id', 'check', bag, '--urdf',
            DATA / 'urdf' / 'ur10e.urdf', '--quiet', '--json', out, '--effort', 'torque']
    done = run(argv, env, cwd=tree or REPO)
    if done.returncode == 2 or not out.is_file():
        raise RuntimeError(f'check {bag}: exit {done.returncode}: {done.stderr.strip()}')
    doc = json.loads(out.read_text())
    return done.returncode, {j: v['status'] for j, v in doc['joints'].items()}


def main(argv=None):
    args = benchlib.ur10e_arguments(__doc__, argv, lambda parser: parser.add_argument(
        '--json', type=Path, help='write every verdict as JSON'))
    if args is None:
        return 0
    started = time.perf_counter()
    rows, verdicts = [], {}
    with tempfile.TemporaryDirectory(prefix='check_ur10e_') as tmp:
        tmp = Path(tmp)
        for k, (name, (inputs, ranges)) in enumerate(RECORDINGS.items()):
            for c, (case, (joint, factor)) in enumerate(CASES.items()):
                gains = list(GAINS)
                if joint is not None:
                    gains[joint] *= factor
                # the effort is k·I: a reversed sign or a doubled constant is in the bag,
                # as a driver or a user's configuration would put it there
                bag = to_bag(inputs, ranges, tmp / f'bag{k}_{c}', gains)
                code, status = check(bag, args.tree, tmp / f'c{k}_{c}.json')
                verdicts[f'{name} / {case}'] = {'exit': code, 'joints': status}
                wrong = [j for j in JOINTS if status[j] == 'fail'
                         and (joint is None or j != JOINTS[joint])]
                caught = None if joint is None else status[JOINTS[joint]]
                rows.append((name, case, code, caught, wrong))
            print(f'{name}: done', file=sys.stderr, flush=True)
    print(f'# check on the real UR10e ({args.tree or "this tree"}), '
          f'{platform.node()} {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{time.perf_counter() - started:.0f} s\n')
    print('| recording | ' + ' | '.join(CASES) + ' |')
    print('|---|' + '---|' * len(CASES))
    for name in RECORDINGS:
        cells = []
        for (r, case, code, caught, wrong) in rows:
            if r != name:
                continue
            text = f'exit {code}' + (f', faulty joint {caught}' if caught else '')
            if wrong:
                text += ', **blamed ' + ', '.join(j.replace('_joint', '') for j in wrong) + '**'
            cells.append(text)
        print(f'| {name} | ' + ' | '.join(cells) + ' |')
    blamed = sum(bool(w) for *_, w in rows)
    fault_rows = [r for r in rows if r[1] != 'right wiring']
    print(f'\nwrong blames: {blamed} of {len(rows)} checks '
          f'({sum(bool(r[4]) for r in rows if r[1] == "right wiring")} of '
          f'{len(RECORDINGS)} with the right wiring); faults caught (FAIL on the faulty '
          f'joint): {sum(r[3] == "fail" for r in fault_rows)} of {len(fault_rows)}, '
          f'untestable {sum(r[3] == "untestable" for r in fault_rows)}, passed as ok/warn '
          f'{sum(r[3] in ("ok", "warn") for r in fault_rows)}')
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
