"""Identification recordings that are not clean free motion, and an effort out of time
with the angles: what `arm-dyn-id fit` says, and how far off the model it writes is.

A user's trial (docs/benchmarks.md, "Recordings that are not clean free motion") found
right records refused for a light wrist's angle convention, a clipped effort refused
naming the encoder noise or another joint's constant (or written with a negative
inertia), rests with stiction refused while the model was right, and an effort lagging
the angles written off the true gravity with no word. Each record is
``test/arm_bags.realistic_fourier`` of a true arm (example-robot-data's UR5 or Panda,
masses 10 % and centres of mass 1.5 cm off the URDF; 200 Hz), torque in ``effort``,
fitted as

    python -m arm_dyn_id fit BAG --urdf URDF --effort torque --no-report --quiet

Cases per arm and seed (16, 17): right; the most loaded joint's effort clipped at 66 %
of its peak; two rests of 5 s (stiction within ± the Coulomb level there); the effort
10 and 20 ms late and the angles 10 ms late on a 0.3 Hz excitation (the default is
0.1 Hz); a first-order current filter at 5 Hz; and the UR5 right at seeds 19 and 20 (a
light wrist a turned URDF fits better). Per case: exit, the warnings (first words), the
refusal's first words, the gravity error of the written model (RMS % of each loaded
joint's peak over 200 random poses, worst joint).

    .venv/bin/python bench/disturbed_records.py [--tree DIR]

``--tree DIR``: another checkout's command (``git archive REV | tar -x -C DIR``), for a
before / after. About 3 minutes.
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
from scipy.interpolate import CubicSpline  # noqa: E402
from scipy.signal import lfilter  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

import benchlib  # noqa: E402
from full_gate_rates import gravity_error  # noqa: E402
from user_cases import record  # noqa: E402

from arm_dyn_id.data.bag_writer import write_bag  # noqa: E402

RATE = 200.0


def late(t, x, seconds):
    """``x`` (N, n) as recorded ``seconds`` late: its value at t - seconds."""
    return CubicSpline(t, x, axis=0)(np.clip(t - seconds, t[0], t[-1]))


def cases():
    """(name, arm, urdf, t, q, effort)."""
    out = []
    for key in ('ur5', 'panda'):
        for seed in (16, 17):
            arm, urdf, t, q, tau = record(key, seed)
            out.append((f'{key} s{seed} right', arm, urdf, t, q, tau))
            peak = np.abs(tau).max(axis=0)
            j = int(np.argmax(peak))
            clipped = tau.copy()
            clipped[:, j] = np.clip(tau[:, j], -0.66 * peak[j], 0.66 * peak[j])
            out.append((f'{key} s{seed} {arm.joints[j]} clipped at 66 %', arm, urdf, t, q,
                        clipped))
            arm, urdf, t, q, tau = record(key, seed, holds=[(8.0, 5.0), (20.0, 5.0)])
            out.append((f'{key} s{seed} two rests of 5 s, stiction', arm, urdf, t, q, tau))
            arm, urdf, t, q, tau = record(key, seed, base_hz=0.3)
            for ms in (10, 20):
                out.append((f'{key} s{seed} 0.3 Hz, effort {ms} ms late', arm, urdf, t, q,
                            late(t, tau, ms / 1000.0)))
            out.append((f'{key} s{seed} 0.3 Hz, angles 10 ms late', arm, urdf, t,
                        late(t, q, 0.01), tau))
            arm, urdf, t, q, tau = record(key, seed)
            a = np.exp(-2 * np.pi * 5.0 / RATE)
            out.append((f'{key} s{seed} current filtered at 5 Hz', arm, urdf, t, q,
                        lfilter([1 - a], [1, -a], tau, axis=0)))
    for seed in (19, 20):
        arm, urdf, t, q, tau = record('ur5', seed)
        out.append((f'ur5 s{seed} right', arm, urdf, t, q, tau))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--tree', help='another checkout to run the command from')
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f'# records that are not clean free motion ({args.tree or "this tree"}), '
          f'{platform.node()}, {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
    print('| case | exit | warnings said | refusal | gravity error % (worst loaded joint) | '
          'with the --effort-delay said |')
    print('|---|---|---|---|---|---|')
    with tempfile.TemporaryDirectory(prefix='disturbed_') as tmp:
        tmp = Path(tmp)
        for i, (name, arm, urdf, t, q, effort) in enumerate(cases()):
            bag, out = tmp / f'bag{i}', tmp / f'fit{i}'
            names = list(arm.joints) + list(arm.extra)
            pad = np.full((len(t), len(arm.extra)), 0.01)
            write_bag(bag, 1.7e9 + t, names, np.hstack([q, pad]),
                      np.hstack([effort, 0 * pad]))
            done = benchlib.run_cli(['fit', bag, '--urdf', urdf, '--effort', 'torque',
                                     '--out', out, '--no-report', '--quiet'], args.tree)
            said = [' '.join(line.split(': ', 1)[1].split()[:9]) for line in
                    done.stderr.splitlines() if line.startswith('warning: ')]
            refusal = '' if done.returncode == 0 else \
                ' '.join(re.sub(r'^arm-dyn-id \w+: (fit refused, )?', '',
                                done.stderr.strip().splitlines()[-1]).split()[:12])
            err = gravity_error(arm, out / 'model.yaml', urdf) \
                if (out / 'model.yaml').is_file() else None
            delay = re.search(r'--effort-delay (-?[\d.]+)', done.stderr)
            moved = '—'
            if delay:       # fitted again as the warning says
                again = benchlib.run_cli(['fit', bag, '--urdf', urdf, '--effort', 'torque',
                                          '--out', tmp / f'moved{i}', '--no-report',
                                          '--quiet', '--effort-delay', delay.group(1)],
                                         args.tree)
                moved = (f'{delay.group(1)} s: exit {again.returncode}, ' + (
                    f'{gravity_error(arm, tmp / f"moved{i}" / "model.yaml", urdf):.2f}'
                    if again.returncode == 0 else 'refused'))
            print(f'| {name} | {done.returncode} | {"; ".join(said) or "—"} | '
                  f'{refusal or "—"} | {"—" if err is None else f"{err:.2f}"} | {moved} |',
                  flush=True)
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
