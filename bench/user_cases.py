"""A user's cases the other benches do not cover: what `arm-dyn-id fit` says, and how far
off the model it writes is from the simulated truth.

A helper tried 18 cases as a new user would (docs/benchmarks.md, "A user's trial"); these
are the ones that left a wrong model without a word, a refusal naming the wrong cause, or
a false warning, beside the right records they must stay silent on. Each record is
``test/arm_bags.realistic_fourier`` of a true arm (example-robot-data's UR5 or Panda,
masses 10 % and centres of mass 1.5 cm off the URDF; 30 s, 4 harmonics of 0.1 Hz, 200 Hz
unless said), torque in ``effort``; fitted as

    python -m arm_dyn_id fit BAG --urdf URDF --effort torque --no-report --quiet

Per case: exit code, the warnings said (their first words), the refusal's first words,
and the gravity error of the written model (RMS % of each loaded joint's peak over 200
random poses, worst joint, against the true arm: for a tilted base, the model served
upright as it was fitted).

    .venv/bin/python bench/user_cases.py [--tree DIR]

``--tree DIR``: another checkout's command (``git archive REV | tar -x -C DIR``), for a
before / after. About 2 minutes.
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

from arm_dyn_id.data.bag_writer import write_bag  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

URDFS = {'ur5': 'ur_description/urdf/ur5_robot.urdf',
         'panda': 'panda_description/urdf/panda.urdf'}


def record(key, seed, tilt_deg=0.0, rate=200.0, **options):
    """(arm, urdf, t, q, τ) of one case's true arm (``options``: realistic_fourier's, e.g.
    ``amplitude``, ``holds``, ``base_hz``)."""
    urdf = str(example_robot(URDFS[key]))
    arm = Arm(urdf).perturb(np.random.default_rng(seed + 100), mass=0.1, com=0.015)
    if tilt_deg:
        a = np.radians(tilt_deg)
        arm.model.gravity.linear = 9.81 * np.array([0.6 * np.sin(a), 0.8 * np.sin(a),
                                                    -np.cos(a)])
        arm.data = arm.model.createData()
    robot = RobotModel.from_urdf(urdf, joints=list(arm.joints))
    t, q, tau = realistic_fourier(arm, holding_friction(robot), np.random.default_rng(seed),
                                  rate, **options)
    return arm, urdf, t, q, tau


def cases():
    """(name, arm, urdf, stamps, q, effort)."""
    out = []
    for key in ('ur5', 'panda'):
        arm, urdf, t, q, tau = record(key, 16)
        out.append((f'{key} right', arm, urdf, t, q, tau))
    arm, urdf, t, q, tau = record('ur5', 16)
    for factor in (1.2, 0.8):
        scaled = tau.copy()
        scaled[:, 2] *= factor
        out.append((f'ur5 elbow constant {factor}x', arm, urdf, t, q, scaled))
    arm, urdf, t, q, tau = record('panda', 16)
    scaled = tau.copy()
    scaled[:, 3] *= 0.8
    out.append(('panda joint 4 constant 0.8x', arm, urdf, t, q, scaled))
    for deg in (3.0, 10.0):
        out.append((f'ur5 base tilted {deg:g}°',) + record('ur5', 16, tilt_deg=deg))
    amplitude = np.ones(6)
    amplitude[2] = 0.02
    out.append(('ur5 elbow barely moving',) + record('ur5', 9, amplitude=amplitude))
    arm, urdf, t, q, tau = record('panda', 8, rate=500.0)
    jitter = t + np.random.default_rng(8).uniform(-0.4, 0.4, len(t)) / 500.0
    out.append(('panda 500 Hz, stamps jittered ±40 %', arm, urdf, jitter, q, tau))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--tree', help='another checkout to run the command from')
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(f'# a user\'s cases ({args.tree or "this tree"}), {platform.node()}, '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
    print('| case | exit | warnings said | refusal | gravity error % (worst loaded joint) |')
    print('|---|---|---|---|---|')
    with tempfile.TemporaryDirectory(prefix='user_cases_') as tmp:
        tmp = Path(tmp)
        for i, (name, arm, urdf, stamps, q, effort) in enumerate(cases()):
            bag, out = tmp / f'bag{i}', tmp / f'fit{i}'
            names = list(arm.joints) + list(arm.extra)
            pad = np.full((len(stamps), len(arm.extra)), 0.01)
            write_bag(bag, 1.7e9 + stamps, names, np.hstack([q, pad]),
                      np.hstack([effort, 0 * pad]))
            done = benchlib.run_cli(['fit', bag, '--urdf', urdf, '--effort', 'torque',
                                     '--out', out, '--no-report', '--quiet'], args.tree)
            said = [' '.join(line.split(': ', 1)[1].split()[:6]) for line in
                    done.stderr.splitlines() if line.startswith('warning: ')]
            refusal = '' if done.returncode == 0 else \
                ' '.join(re.sub(r'^arm-dyn-id \w+: (fit refused, )?', '',
                                done.stderr.strip().splitlines()[-1]).split()[:12])
            err = gravity_error(arm, out / 'model.yaml', urdf) \
                if (out / 'model.yaml').is_file() else None
            print(f'| {name} | {done.returncode} | {"; ".join(said) or "—"} | '
                  f'{refusal or "—"} | {"—" if err is None else f"{err:.2f}"} |', flush=True)
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
