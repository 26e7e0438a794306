"""Real UR10e: what ``arm-dyn-id fit`` makes of recordings that move one joint at a time.

Reads ``../shared/real-data/ur10e`` (relative to the repository root; see its README)
when it exists and prints a skip message otherwise (exit 0). Each of the six
single-joint oscillations (one joint moving, the others still: they cannot determine a
model of the whole arm) and, for contrast, the three Fourier runs (rows the source
project used) are turned into bags by the data's own ``to_bag.py`` in a temporary
folder OUTSIDE the repository and fitted as a user would (the README's URDF and drive
gains), with the default dynamics choice and with ``--dynamics full``.

For each fit: the exit code (0 written, 3 refused by the data gate, 2 an input error),
the cause the gate names and, when the gate judged it, the largest ratio of the fitted
gravity torque's uncertainty over the joints' range to the URDF's gravity torque there
(the workspace check; refused above 0.1). A single-joint recording fitted with exit 0 is
a model right only near the recording's poses, leaving unnoticed.

``--tree PATH`` runs another checkout's code (``git archive REV | tar -x -C PATH``) for
a before / after in the same minutes. Only exit codes, causes and ratios are printed.

Then ``arm-dyn-id payload`` with the model of the 30 s Fourier run on every single-joint
recording, the push recording and the free run (nothing attached: a payload reported is
wrong) and the 2.602 kg run.

Usage::

    .venv/bin/python bench/gate_ur10e.py [--tree /tmp/old]
"""

import platform
import sys
import tempfile
import time
from pathlib import Path

import benchlib

REPO = benchlib.REPO
DATA = benchlib.UR10E
GAINS = '10.0,10.6956,8.4566,9.0029,9.48,10.1232'
RECORDINGS = {**{f'joint_{i}': (f'ur-20_01_22-joint_{i}', None) for i in range(1, 7)},
              '30sec_12harm': ('ur-20_02_10-30sec_12harm', '635:3510'),
              '50sec_12harm': ('ur-20_02_12-50sec_12harm', '355:5090'),
              '14harm50sec': ('ur-20_02_19_14harm50sec', '195:4966')}
DYNAMICS = ('auto', 'full')
#: recordings with nothing at the flange (and the 2.602 kg run) for ``arm-dyn-id payload``
NO_LOAD = {'push_pose_1': 'ur-20_01_22-push_pose_1', 'free': 'ur-19_12_23_free'}
LOADED = {'load_2600': 'ur-20_01_13-load_2600'}


def fit(bag, dynamics, tree, out):
    """(exit code, what was fitted or the cause, the largest workspace ratio or None)."""
    code, what, gate, _ = benchlib.gated_fit(
        bag, out, ['--urdf', DATA / 'urdf' / 'ur10e.urdf', '--torque-constants', GAINS,
                   '--dynamics', dynamics], tree)
    ratios = [w['ratio'] for w in (gate.get('workspace') or {}).values() if w['ratio']]
    return code, what, max(ratios) if ratios else None


def payload(model, bag, tree):
    """``arm-dyn-id payload MODEL BAG``: (exit code, the mass or the first words of why not)."""
    done = benchlib.run_cli(['payload', model, bag, '--torque-constants', GAINS], tree)
    if done.returncode == 0:
        lines = {line.split()[0]: ' '.join(line.split()[1:])
                 for line in done.stdout.splitlines() if line.startswith('  ')}
        return 0, f'{lines.get("mass")}, com {lines.get("com")}'
    why = done.stderr.strip().splitlines()[-1].split(': ', 1)[-1]
    return done.returncode, why[:60]


def main(argv=None):
    args = benchlib.ur10e_arguments(__doc__, argv)
    if args is None:
        return 0
    started = time.perf_counter()
    cells, payloads = {}, {}
    with tempfile.TemporaryDirectory(prefix='gate_ur10e_') as tmp:
        tmp = Path(tmp)
        for name, (recording, rows) in RECORDINGS.items():
            bag = benchlib.ur10e_bag(recording, tmp / name, rows)
            for dynamics in DYNAMICS:
                cells[name, dynamics] = fit(bag, dynamics, args.tree,
                                            tmp / f'fit_{name}_{dynamics}')
            print(f'{name}: done', file=sys.stderr, flush=True)
        # the arm model of the 30 s Fourier run, then a payload from every other run
        model = tmp / 'fit_30sec_12harm_auto' / 'model.yaml'
        bags = {**{n: tmp / n for n in RECORDINGS if n.startswith('joint_')},
                **{n: benchlib.ur10e_bag(r, tmp / n) for n, r in {**NO_LOAD, **LOADED}.items()}}
        for name, bag in bags.items():
            payloads[name] = payload(model, bag, args.tree)
    print(f'# arm-dyn-id fit on the real UR10e ({args.tree or "this tree"}), '
          f'{platform.node()} {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{time.perf_counter() - started:.0f} s\n')
    print('| recording | ' + ' | '.join(f'--dynamics {d}' for d in DYNAMICS) + ' |')
    print('|---|' + '---|' * len(DYNAMICS))
    for name in RECORDINGS:
        shown = []
        for dynamics in DYNAMICS:
            code, what, ratio = cells[name, dynamics]
            shown.append(f'exit {code} ({what})' +
                         ('' if ratio is None else f', workspace {ratio:.3g}'))
        print(f'| {name} | ' + ' | '.join(shown) + ' |')
    single = [cells[n, d] for n in RECORDINGS if n.startswith('joint_') for d in DYNAMICS]
    print(f'\nsingle-joint recordings written with exit 0: '
          f'{sum(c[0] == 0 for c in single)} of {len(single)} fits')
    print('\n`arm-dyn-id payload` with the 30 s run\'s model (nothing attached but on '
          'load_2600, 2.602 kg):\n\n| recording | payload |\n|---|---|')
    for name, (code, what) in payloads.items():
        print(f'| {name} | exit {code}: {what} |')
    wrong = [n for n, (code, _) in payloads.items() if code == 0 and n not in LOADED]
    print(f'\npayloads reported with nothing attached: {len(wrong)} of '
          f'{len(payloads) - len(LOADED)} {wrong}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
