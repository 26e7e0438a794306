"""Torque constants of a real UR10e from its twin runs without and with a 2.602 kg load.

Data: ``../shared/real-data/ur10e`` beside the repository (README there for provenance
and licence). Evaluation only: the recordings are turned into bags in a temporary
folder with the data's own ``to_bag.py``, nothing of them (or derived from them)
is written into the project, and without the data this script says it skipped and
exits 0.

Procedure:

1. ``to_bag.py`` turns ``ur-19_12_23_free`` (no load) and ``ur-20_01_13-load_2600``
   (2.602 kg at the flange, starting about 2.7 s later) into plain bags, effort =
   measured motor current (A), all rows.
2. ``arm-dyn-id calibrate FREE LOAD --urdf ur10e.urdf --mass 2.602`` (in-process,
   the real command): the constants, their standard errors and the per-joint
   determination, printed beside the source project's drive gains (README,
   ``drvGains``).
3. Check: the payload identified back with each set of constants, the way a user
   would: ``arm-dyn-id fit FREE --dynamics full`` with the constants, then
   ``arm-dyn-id payload MODEL LOAD`` with the same constants. This is the same
   pair the constants were calibrated on (no second pair is available here), so
   it checks consistency between two formulations (difference of twin runs
   against a frozen arm model), not independent accuracy.
4. Each half of the free run calibrated against the whole loaded run: the two
   halves' constants differ by about their combined standard error when the
   errors are honest.

    .venv/bin/python bench/calibrate_ur10e.py [--data ../shared/real-data/ur10e]
"""

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.cli import main as _main  # noqa: E402

DATA = benchlib.UR10E
SOURCE_GAINS = [10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232]      # README, N·m/A
FREE, LOADED, MASS = 'ur-19_12_23_free', 'ur-20_01_13-load_2600', 2.602


def cli(argv):
    """``arm-dyn-id ARGV`` in-process, its printout kept back (the JSON files tell)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _main(argv)


def to_bag(data, name, out, rows=None):
    return benchlib.ur10e_bag(name, out, None if rows is None else f'{rows[0]}:{rows[1]}',
                              data=data)


def halves(data, tmp, urdf, loaded, rows=2036):
    """The constants from each half of the free run against the whole loaded run:
    their differences against the standard errors (a check of the errors on real data)."""
    docs = []
    for k, part in enumerate(((1, rows // 2), (rows // 2 + 1, rows))):
        free = to_bag(data, FREE, tmp / f'free_half{k}', part)
        out = tmp / f'half{k}.json'
        if cli(['calibrate', str(free), str(loaded), '--urdf', str(urdf), '--mass', str(MASS),
                '--json', str(out), '--quiet']) != 0:
            return None
        docs.append(json.loads(out.read_text()))
    return docs


def payload_mass(tmp, urdf, free, loaded, gains, label):
    """Mass (kg) and its standard error identified with ``gains`` (fit, then payload)."""
    k = ','.join(f'{g:.6g}' for g in gains)
    fit = tmp / f'fit_{label}'
    code = cli(['fit', str(free), '--urdf', str(urdf), '--torque-constants', k, '--dynamics',
                'full', '--no-report', '--quiet', '--out', str(fit)])
    if code != 0:
        return None
    out = tmp / f'payload_{label}.json'
    code = cli(['payload', str(fit / 'model.yaml'), str(loaded), '--urdf', str(urdf),
                '--torque-constants', k, '--frame', 'tool0', '--quiet', '--json', str(out)])
    if code != 0:
        return None
    doc = json.loads(out.read_text())
    return doc['mass'], doc['mass_std_error']


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data', type=Path, default=DATA)
    args = parser.parse_args()
    if not (args.data / 'data' / f'{FREE}.csv.gz').is_file():
        print(f'calibrate_ur10e: skipped, no data at {args.data}')
        return 0
    urdf = args.data / 'urdf' / 'ur10e.urdf'
    print(json.dumps({'machine': benchlib.machine(), 'commit': benchlib._git_commit()}))
    with tempfile.TemporaryDirectory(prefix='calibrate_ur10e_') as folder:
        tmp = Path(folder)
        free = to_bag(args.data, FREE, tmp / 'free')
        loaded = to_bag(args.data, LOADED, tmp / 'loaded')
        out = tmp / 'k.json'
        t0 = time.perf_counter()
        code = cli(['calibrate', str(free), str(loaded), '--urdf', str(urdf), '--mass',
                    str(MASS), '--json', str(out), '--quiet'])
        seconds = time.perf_counter() - t0
        if code != 0:
            print(f'calibrate_ur10e: the command failed with exit code {code}')
            return 1
        doc = json.loads(out.read_text())
        a = doc['alignment']
        info = doc['info']
        print(f'\ncalibrate: {seconds:.1f} s; shift {a["shift_s"]:.3f} s, overlap '
              f'{a["overlap_s"]:.1f} s; {doc["n_samples"]} samples, cut-off '
              f'{info["cutoff_hz"]:.3g} Hz ({info["cutoff_source"]}); load centre of mass '
              f'{doc["load"]["com"]} m; {info["load_model"]}')
        print('\n| joint | k (N·m/A) | s.e. | rel. s.e. | determination | source project '
              '| k / source |')
        print('|---|---|---|---|---|---|---|')
        for name, src in zip(doc['joints'], SOURCE_GAINS):
            p = doc['per_joint'][name]
            print(f'| {name} | {p["torque_constant"]:.3f} | {p["std_error"]:.2f} | '
                  f'{100 * p["relative_std_error"]:.1f} % | {p["determination"]} | {src:g} | '
                  f'{p["torque_constant"] / src:.3f} |')
        for name in doc['joints']:
            if doc['per_joint'][name]['advice']:
                print(f'  {doc["per_joint"][name]["advice"]}')
        docs = halves(args.data, tmp, urdf, loaded)
        if docs is None:
            print('\nhalves: the command failed on a half of the free run')
        else:
            print('\neach half of the free run (rows 1-1018, 1019-2036) against the whole '
                  'loaded run:')
            print('| joint | first half | second half | difference / combined s.e. |')
            print('|---|---|---|---|')
            for j, name in enumerate(doc['joints']):
                (k1, k2), (s1, s2) = ([d[key][j] for d in docs] for key in (
                    'torque_constants', 'torque_constants_std_error'))
                print(f'| {name} | {k1:.3f} ± {s1:.2f} | {k2:.3f} ± {s2:.2f} | '
                      f'{(k1 - k2) / (s1 ** 2 + s2 ** 2) ** 0.5:+.2f} |')
        print(f'\npayload identified back ({MASS} kg known; fit on {FREE}, payload on '
              f'{LOADED}: the calibration pair itself):')
        for label, gains in (('calibrated', doc['torque_constants']),
                             ('source project', SOURCE_GAINS)):
            got = payload_mass(tmp, urdf, free, loaded, gains, label.split()[0])
            if got is None:
                print(f'  {label}: the fit or the payload command failed')
                continue
            print(f'  {label:15s} {got[0]:.3f} ± {got[1]:.3f} kg ({got[0] / MASS:.3f}x)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
