"""Right data at 100 Hz-2 kHz through the full-dynamics fit's data gate: refused or not?

The realism matrix (``bench/realism_matrix.py``) scores ``fit_full`` at every rate and
encoder noise, but not the gate that ``arm-dyn-id fit`` puts after it. This bench runs
the command as a user would on simulated right recordings and counts the refusals (a
right record refused is a false refusal) and the cause named, with the model's error.

Arms: the humanoid arm of ``urdf/``, example-robot-data's UR5 and Panda. The true arm is
the URDF with each link's mass N(1, 10 %) and its centre of mass 1.5 cm off in a random
direction (``test/arm_bags.py``'s ``Arm.perturb``). Its recording is
``test/arm_bags.py``'s ``realistic_fourier``: 4 harmonics of 0.1 Hz about the middle of
each joint's range, amplitude min(0.8 rad, a quarter of the range), 3 periods (30 s);
torque from pinocchio's RNEA of the true arm, plus the URDF's holding friction
(``check.holding_friction``) as Coulomb friction ``tanh(q̇ / 1e-3)``, viscous friction
0.3x that per rad/s, white noise of 0.5 % of each joint's largest rigid-body torque,
effort in N·m (``--effort torque``). Encoder noise: white, 0, 1e-4 or 5e-4 rad.

Per record: exit code and cause (``--force`` writes the model marked rejected, so the
model is read either way), the held-out RMSE % (mean over the joints), and the gravity
model's RMS error over 200 random poses of the joints' range against the true arm's, as
% of each joint's largest gravity torque, on the loaded joints (the URDF's gravity RMS
above 5 % of the most loaded joint's).

    .venv/bin/python bench/full_gate_rates.py [--rates 100 500 1000 2000]
                                              [--encoder 0 1e-4 5e-4] [--tree /tmp/old]

``--part geared``: geared arms, whose rotor inertia (0.1 or 0.3 kg·m² on every joint;
URDFs have none; 0 for the arm without) the model may lack, at 200 Hz,
the same motion at 0.1 and 0.2 Hz: the friction ``auto`` chose (and set aside), the
exit and the gravity error. A friction term that trades for gravity shows there.

``--part mistakes``: each joint's sign flipped, each neighbouring pair's efforts swapped
and each joint's effort 2x (its torque constant), at 200 Hz: written or refused, the
cause named, per kind of mistake.

``--part scales`` (not in ``all``): the humanoid, UR3, UR5, Panda and Kinova right, with
a load the URDF lacks (0.8, 1.5, 3 kg on the last body) and with the effort off by one
scale on every joint (1.7x, 2x, 2.69x, 3x, 0.55x, 0.4x), at 200 Hz: a scale written is a
wrong model, a load refused a false refusal; the load the fit names, and the gravity error
against the true, loaded arm.

``--part soft`` (not in ``all``): right records of the humanoid, UR5, Panda and Kinova
whose friction the fit's law describes poorly (``test/arm_bags.py``'s ``soft_friction``: a
Coulomb level rising over 0.1-0.4 rad/s, its centre shifted with direction, a sensor's
constant offset), seeds 0-2, at 200 Hz and 1 kHz: every refusal is a false one.

``--tree PATH`` runs another checkout's ``arm_dyn_id`` (``git archive REV | tar -x -C
PATH``) on the same bags: the before.
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
import yaml  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'test'))

import benchlib  # noqa: E402
from arm_bags import (Arm, example_robot, realistic_fourier, soft_friction,  # noqa: E402
                      torque_scale)

from arm_dyn_id.data.bag_writer import write_bag  # noqa: E402
from arm_dyn_id.model import load_model  # noqa: E402
from arm_dyn_id.model.robot import RobotModel, carries_gravity  # noqa: E402
from arm_dyn_id.validation.check import holding_friction  # noqa: E402

ARMS = {'humanoid': lambda: benchlib.REPO / 'urdf' / 'humanoid_arm.urdf',
        'ur5': lambda: example_robot('ur_description/urdf/ur5_robot.urdf'),
        'panda': lambda: example_robot('panda_description/urdf/panda.urdf'),
        'ur3': lambda: example_robot('ur_description/urdf/ur3_robot.urdf'),
        'kinova': lambda: example_robot('kinova_description/robots/kinova.urdf')}
#: --part scales: loads the URDF lacks (kg, on the last joint's body at LOAD_AT, m) and
#: efforts off by one scale on every joint
LOADS = (0.8, 1.5, 3.0)
LOAD_AT = (0.03, 0.02, 0.08)
SCALES = (1.7, 2.0, 2.69, 3.0, 0.55, 0.4)


def gravity_error(arm, model_path, urdf):
    """RMS error % of the fitted gravity against the true arm's over 200 random poses, on
    the joints whose gravity RMS exceeds 5 % of the most loaded joint's; worst joint."""
    model = load_model(model_path, urdf=urdf)
    Q = np.random.default_rng(999).uniform(arm.lower, arm.upper, size=(200, arm.n))
    true = arm.gravity(Q, {e: 0.01 for e in arm.extra})
    fitted = np.asarray(model.gravity_torques(Q))
    rms = np.sqrt((true ** 2).mean(axis=0))
    loaded = carries_gravity(rms)
    err = 100 * np.sqrt(((fitted - true) ** 2).mean(axis=0)) / np.abs(true).max(axis=0)
    return float(err[loaded].max())


def fit_case(tmp, name, arm, urdf, t, q, tau, tree, options=('--dynamics', 'full')):
    """Write the bag, fit it as a user would (``--effort torque`` and ``options``); (exit,
    fitted / cause, held-out RMSE % mean, gravity error %, refusal)."""
    names = list(arm.joints) + list(arm.extra)
    pad = np.full((len(t), len(arm.extra)), 0.01)
    write_bag(tmp / name, 1.7e9 + t, names, np.hstack([q, pad]), np.hstack([tau, 0 * pad]))
    out = tmp / f'{name}_fit'
    code, what, _, reason = benchlib.gated_fit(
        tmp / name, out, ['--urdf', urdf, '--effort', 'torque', *options], tree)
    held, err = None, None
    if (out / 'validation.json').is_file():
        doc = json.loads((out / 'validation.json').read_text())
        pct = [m['rmse_percent'] for m in (doc.get('held_out') or {}).values()
               if isinstance(m, dict) and 'rmse_percent' in m]
        held = float(np.mean(pct)) if pct else None
        err = gravity_error(arm, out / 'model.yaml', urdf)
    print(f'{name}: exit {code} {what}', file=sys.stderr, flush=True)
    return code, what, held, err, reason


def true_arm(urdf, seed):
    """The perturbed true arm, the URDF's model of it and its recording's generator."""
    arm = Arm(urdf).perturb(np.random.default_rng(seed + 100), mass=0.1, com=0.015)
    return arm, RobotModel.from_urdf(urdf, joints=list(arm.joints))


def mistakes(tmp, args):
    """Each joint's sign flipped, each neighbouring pair's torques swapped and each joint's
    torque scaled 2x (its constant), 200 Hz."""
    rows = []
    for key in args.arms.split(','):
        urdf = ARMS[key]()
        arm, robot = true_arm(urdf, args.seed)
        t, q, tau = realistic_fourier(arm, holding_friction(robot),
                                      np.random.default_rng(args.seed), 200.0)
        cases = []
        for j in range(arm.n):
            flipped = tau.copy()
            flipped[:, j] *= -1
            cases.append((f'{arm.joints[j]} sign flipped', 'sign', flipped))
        for j in range(arm.n - 1):
            swapped = tau.copy()
            swapped[:, [j, j + 1]] = swapped[:, [j + 1, j]]
            cases.append((f'{arm.joints[j]} and {arm.joints[j + 1]} swapped', 'swap',
                          swapped))
        for j in range(arm.n):
            doubled = tau.copy()
            doubled[:, j] *= 2.0
            cases.append((f'{arm.joints[j]} constant 2x', 'torque_constant', doubled))
        for k, (label, kind, effort) in enumerate(cases):
            code, what, _, err, reason = fit_case(tmp, f'{key}_m{k}', arm, urdf, t, q,
                                                  effort, args.tree)
            rows.append((key, label, kind, code, what, err, reason))
    print('| arm | mistake | exit | fitted / cause | gravity error % (worst loaded joint) |')
    print('|---|---|---|---|---|')
    for key, label, _, code, what, err, _ in rows:
        print(f'| {key} | {label} | {code} | {what} | '
              f'{"—" if err is None else f"{err:.1f}"} |')
    for kind in ('sign', 'swap', 'torque_constant'):
        mine = [r for r in rows if r[2] == kind]
        written = [f'{r[0]} {r[1]} ({"—" if r[5] is None else f"{r[5]:.1f} %"})'
                   for r in mine if r[3] == 0]
        # a constant is named by the scale checks: torque_constant or units
        named = [r for r in mine if r[3] != 0 and (r[4].endswith(f': {kind}') or (
            kind == 'torque_constant' and r[4].endswith(': units')))]
        print(f'\n{kind}: written with exit 0 {len(written)} of {len(mine)} {written}; '
              f'refused naming it: {len(named)}')


def scales_and_loads(tmp, args):
    """Each arm right, with a load the URDF lacks and with its effort off by one scale on
    every joint (a unit, a Dynamixel's current unit read as mA: 2.69x), at 200 Hz: written
    or refused, the cause, the load named and the model's gravity error against the true
    (loaded) arm."""
    import pinocchio as pin
    rows = []
    for key in args.arms.split(','):
        urdf = ARMS[key]()
        cases = [('right', 0.0, 1.0)] + [(f'{m:g} kg', m, 1.0) for m in LOADS] + \
            [(f'effort x{k:g}', 0.0, k) for k in SCALES]
        for label, load, scale in cases:
            arm, robot = true_arm(urdf, args.seed)
            if load:
                last = arm.model.getJointId(arm.joints[-1])
                arm.model.inertias[last] = arm.model.inertias[last] + pin.Inertia(
                    load, np.array(LOAD_AT), np.eye(3) * 2e-4)
                arm.data = arm.model.createData()
            t, q, tau = realistic_fourier(arm, holding_friction(robot),
                                          np.random.default_rng(args.seed), 200.0)
            name = f'{key}_{label.replace(" ", "_")}'
            names = list(arm.joints) + list(arm.extra)
            pad = np.full((len(t), len(arm.extra)), 0.01)
            write_bag(tmp / name, 1.7e9 + t, names, np.hstack([q, pad]),
                      np.hstack([scale * tau, 0 * pad]))
            out = tmp / f'{name}_fit'
            code, what, gate, reason = benchlib.gated_fit(
                tmp / name, out, ['--urdf', urdf, '--effort', 'torque', '--dynamics', 'full'],
                args.tree)
            found = gate.get('missing_load') or {}
            named = found.get('mass') if found.get('explains') else None
            err = gravity_error(arm, out / 'model.yaml', urdf) if \
                (out / 'model.yaml').is_file() else None
            rows.append((key, label, code, what, named, err, reason))
            print(f'{name}: exit {code} {what}', file=sys.stderr, flush=True)
    print('| arm | case | exit | fitted / cause | load named (kg) | gravity error % (worst '
          'loaded joint, against the true arm) |')
    print('|---|---|---|---|---|---|')
    for key, label, code, what, named, err, _ in rows:
        print(f'| {key} | {label} | {code} | {what} | '
              f'{"—" if named is None else f"{named:.3g}"} | '
              f'{"—" if err is None else f"{err:.2f}"} |')
    for kind, pick, right in (('right', 'right', 0), ('loads', ' kg', 0),
                              ('efforts off by one scale', 'effort', 3)):
        mine = [r for r in rows if pick in r[1]]
        wrong = [f'{r[0]} {r[1]} ({r[3]})' for r in mine if (r[2] == 0) != (right == 0)]
        print(f'\n{kind}: {"written" if right == 0 else "refused"} {len(mine) - len(wrong)} '
              f'of {len(mine)}; not: {wrong}')
    named = [r for r in rows if r[4] is not None]
    print(f'\na load named on {len(named)} fits: '
          f'{[f"{r[0]} {r[1]}: {r[4]:.3g} kg" for r in named]}')


def geared(tmp, args):
    """Rotor inertia the URDF lacks, 200 Hz, 0.1 and 0.2 Hz motions: the friction chosen,
    the exit and the gravity error."""
    rows = []
    for key in args.arms.split(','):
        urdf = ARMS[key]()
        for armature in (0.0, 0.1, 0.3):
            for base_hz in (0.1, 0.2):
                arm, robot = true_arm(urdf, args.seed)
                t, q, tau = realistic_fourier(arm, holding_friction(robot),
                                              np.random.default_rng(args.seed), 200.0,
                                              base_hz=base_hz, armature=armature)
                name = f'{key}_geared_{armature:g}_{base_hz:g}'
                code, what, held, err, _ = fit_case(
                    tmp, name, arm, urdf, t, q, tau, args.tree,
                    ('--dynamics', 'full', *args.fit_options.split()))
                chosen = {}
                model = tmp / f'{name}_fit' / 'model.yaml'
                if model.is_file():
                    doc = yaml.safe_load(model.read_text())
                    chosen = (doc.get('selection') or {}).get('friction') or {}
                rows.append((key, armature, base_hz, code, what, chosen.get('chosen', '—'),
                             ', '.join(chosen.get('set_aside') or []) or '—', held, err))
    print('| arm | rotor inertia (kg·m²) | motion (Hz) | exit | fitted / cause | friction '
          'chosen | set aside | held-out RMSE % (mean) | gravity error % (worst loaded '
          'joint) |')
    print('|---|---|---|---|---|---|---|---|---|')
    for key, armature, base_hz, code, what, chosen, aside, held, err in rows:
        print(f'| {key} | {armature:g} | {base_hz:g} | {code} | {what} | {chosen} | {aside} | '
              f'{"—" if held is None else f"{held:.2f}"} | '
              f'{"—" if err is None else f"{err:.1f}"} |')
    written = [r[8] for r in rows if r[3] == 0 and r[8] is not None]
    if written:
        print(f'\nwritten with exit 0: {len(written)} of {len(rows)}, gravity error up to '
              f'{max(written):.1f} % (median {np.median(written):.1f} %)')


def soft(tmp, args):
    """Right records whose friction the fit's law describes poorly (``soft_friction``: a
    Coulomb level rising over 0.1-0.4 rad/s, shifted with direction, a sensor's offset), 4
    arms x 3 seeds x 200 Hz and 1 kHz: refused (a false refusal) or written, the friction
    chosen (and its width), the held-out RMSE and the gravity error."""
    rows = []
    for key in args.arms.split(','):
        urdf = ARMS[key]()
        for seed in (0, 1, 2):
            for rate in (200.0, 1000.0):
                arm, robot = true_arm(urdf, seed)
                t, q, tau = realistic_fourier(
                    arm, None, np.random.default_rng(seed), rate,
                    friction=soft_friction(torque_scale(arm), np.random.default_rng(seed + 7)))
                name = f'{key}_soft_{seed}_{rate:g}'
                code, what, held, err, _ = fit_case(tmp, name, arm, urdf, t, q, tau,
                                                    args.tree)
                chosen = {}
                model = tmp / f'{name}_fit' / 'model.yaml'
                if model.is_file():
                    doc = yaml.safe_load(model.read_text())
                    chosen = (doc.get('selection') or {}).get('friction') or {}
                width = (chosen.get('smooth_velocity') or {}).get('chosen')
                rows.append((key, seed, rate, code, what,
                             f'{chosen.get("chosen", "—")}'
                             f'{"" if width is None else f" (eps {width:g})"}', held, err))
    print('| arm | seed | rate (Hz) | exit | fitted / cause | friction chosen | held-out '
          'RMSE % (mean) | gravity error % (worst loaded joint) |')
    print('|---|---|---|---|---|---|---|---|')
    for key, seed, rate, code, what, chosen, held, err in rows:
        print(f'| {key} | {seed} | {rate:g} | {code} | {what} | {chosen} | '
              f'{"—" if held is None else f"{held:.2f}"} | '
              f'{"—" if err is None else f"{err:.2f}"} |')
    refused = [f'{r[0]} {r[1]} {r[2]:g} Hz ({r[4]})' for r in rows if r[3] != 0]
    print(f'\nright records refused: {len(refused)} of {len(rows)} {refused}')
    written = [r[7] for r in rows if r[3] == 0 and r[7] is not None]
    if written:
        print(f'written: gravity error up to {max(written):.2f} % (median '
              f'{np.median(written):.2f} %)')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rates', type=float, nargs='+', default=[100, 500, 1000, 2000])
    parser.add_argument('--encoder', type=float, nargs='+', default=[0.0, 1e-4, 5e-4])
    parser.add_argument('--arms', default='humanoid,ur5,panda')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--tree', type=Path, help='fit with this checkout\'s arm_dyn_id')
    parser.add_argument('--fit-options', default='',
                        help='more options of fit for --part geared, e.g. "--armature auto"')
    parser.add_argument('--part', choices=('rates', 'mistakes', 'geared', 'scales', 'soft',
                                           'all'),
                        default='all')
    args = parser.parse_args(argv)
    if args.part == 'scales' and args.arms == parser.get_default('arms'):
        args.arms = 'humanoid,ur3,ur5,panda,kinova'
    if args.part == 'soft' and args.arms == parser.get_default('arms'):
        args.arms = 'humanoid,ur5,panda,kinova'
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix='full_gate_rates_') as tmp:
        tmp = Path(tmp)
        if args.part == 'scales':
            print(f'# a load the URDF lacks and an effort off by one scale, 200 Hz '
                  f'({args.tree or "this tree"}), '
                  f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
            scales_and_loads(tmp, args)
            print(f'\n{time.perf_counter() - started:.0f} s in all')
            return 0
        if args.part == 'soft':
            print(f'# right records with a friction the fit\'s law describes poorly '
                  f'({args.tree or "this tree"}), '
                  f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
            soft(tmp, args)
            print(f'\n{time.perf_counter() - started:.0f} s in all')
            return 0
        if args.part == 'geared':
            print(f'# rotor inertia the URDF lacks, 200 Hz ({args.tree or "this tree"}'
                  f'{", fit " + args.fit_options if args.fit_options else ""}), '
                  f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}\n')
            geared(tmp, args)
            print(f'\n{time.perf_counter() - started:.0f} s in all')
            return 0
        if args.part != 'rates':
            print(f'# wiring mistakes of right recordings at 200 Hz '
                  f'({args.tree or "this tree"})\n')
            mistakes(tmp, args)
            print()
        for key in args.arms.split(',') if args.part != 'mistakes' else ():
            urdf = ARMS[key]()
            for rate in args.rates:
                for encoder in args.encoder:
                    arm, robot = true_arm(urdf, args.seed)
                    t, q, tau = realistic_fourier(arm, holding_friction(robot),
                                                  np.random.default_rng(args.seed), rate,
                                                  encoder)
                    rows.append((key, rate, encoder) + fit_case(
                        tmp, f'{key}_{rate:g}_{encoder:g}', arm, urdf, t, q, tau,
                        args.tree))
    if args.part == 'mistakes':
        return 0
    print(f'# right full-dynamics records through the gate ({args.tree or "this tree"}), '
          f'{platform.node()} {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, '
          f'{time.perf_counter() - started:.0f} s\n')
    print('| arm | rate (Hz) | encoder (rad) | exit | fitted / cause | held-out RMSE % '
          '(mean) | gravity error % (worst loaded joint) |')
    print('|---|---|---|---|---|---|---|')
    for key, rate, encoder, code, what, held, err, _ in rows:
        print(f'| {key} | {rate:g} | {encoder:g} | {code} | {what} | '
              f'{"—" if held is None else f"{held:.2f}"} | '
              f'{"—" if err is None else f"{err:.2f}"} |')
    refused = [r for r in rows if r[3] != 0]
    print(f'\nright records refused: {len(refused)} of {len(rows)}')
    for r in refused:
        print(f'- {r[0]} {r[1]:g} Hz {r[2]:g} rad: {r[7][:160]}')
    print(f'\n{time.perf_counter() - started:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
