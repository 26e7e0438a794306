"""Gravity fits of sweep recordings through encoder noise: refused or written, and how far off?

The gravity path finds the sweeps in the joint angles (``data/segmentation.py``) and
averages each forward pass with its backward pass (``identification/pairing.py``). With
enough encoder noise some passes are lost; a pass whose partner was lost used to pair
with the next pose's opposite pass, and the average of two poses' torques made the model
wrong. ``arm-dyn-id fit --effort torque`` as a user would run it on simulated sweep
recordings (``test/arm_bags.py``'s ``realistic_sweeps``: three poses per joint, 40°
sweeps at 15 °/s, geared friction with held friction on the still joints, 1 % noise) of a
true arm whose masses are N(1, 10 %) and centres of mass 1.5 cm off the URDF, with white
encoder noise on q. Per record: exit, cause, pairs used, and the worst loaded joint's
gravity error over 200 random poses of the joints' range against the true arm (% of its
largest gravity torque).

    .venv/bin/python bench/sweep_noise.py [--rates 100 1000] [--encoder 0 1e-4 5e-4]
                                          [--seeds 0 1] [--tree /tmp/old]
"""

import os

os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

from arm_bags import realistic_sweeps  # noqa: E402
from full_gate_rates import ARMS, fit_case, true_arm  # noqa: E402

from arm_dyn_id.validation.check import holding_friction  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rates', type=float, nargs='+', default=[100, 1000])
    parser.add_argument('--encoder', type=float, nargs='+', default=[0.0, 1e-4, 5e-4])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1])
    parser.add_argument('--arms', default='humanoid,ur5,panda')
    parser.add_argument('--tree', type=Path, help='fit with this checkout\'s arm_dyn_id')
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix='sweep_noise_') as tmp:
        tmp = Path(tmp)
        for key in args.arms.split(','):
            urdf = ARMS[key]()
            for rate in args.rates:
                for encoder in args.encoder:
                    for seed in args.seeds:
                        arm, robot = true_arm(urdf, seed)
                        rng = np.random.default_rng(seed)
                        t, q, tau = realistic_sweeps(arm, holding_friction(robot), rng,
                                                     poses_per_joint=3, rate=rate,
                                                     speed_deg=15.0)
                        if encoder > 0:
                            q = q + rng.normal(0.0, encoder, q.shape)
                        name = f'{key}_{rate:g}_{encoder:g}_{seed}'
                        code, what, _, err, reason = fit_case(
                            tmp, name, arm, urdf, t, q, tau, args.tree, options=())
                        out = tmp / f'{name}_fit' / 'validation.json'
                        pairs = json.loads(out.read_text())['fit_summary'].get(
                            'segments', {}).get('pairs') if out.is_file() else None
                        rows.append((key, rate, encoder, seed, code, what, pairs, err, reason))
    print(f'# gravity fits of sweeps through encoder noise ({args.tree or "this tree"}), '
          f'{platform.node()} {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{time.perf_counter() - started:.0f} s\n')
    print('| arm | rate (Hz) | encoder (rad) | seed | exit | fitted / cause | pairs | '
          'gravity error % (worst loaded joint) |')
    print('|---|---|---|---|---|---|---|---|')
    for key, rate, encoder, seed, code, what, pairs, err, _ in rows:
        print(f'| {key} | {rate:g} | {encoder:g} | {seed} | {code} | {what} | {pairs} | '
              f'{"—" if err is None else f"{err:.1f}"} |')
    refused = [r for r in rows if r[4] != 0]
    bad = [r for r in rows if r[4] == 0 and r[7] is not None and r[7] > 10.0]
    print(f'\nrefused: {len(refused)} of {len(rows)}; written more than 10 % off: {len(bad)}')
    for r in refused:
        print(f'- {r[0]} {r[1]:g} Hz {r[2]:g} rad seed {r[3]}: {r[8][:160]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
