#!/usr/bin/env python3
"""The payload watch (issue 24 item 5): a load picked up and put down while the arm works.

1. MuJoCo: the Staubli TX-60 (config/staubli_tx60.yaml, the simulator's friction, current
   noise and gross errors) moves every joint in slow sinusoids for 10 s; a 1 kg point mass at
   (0, 0, 0.05) m in the flange is attached at 3 s and removed at 7 s. The served model is
   the true one (URDF inertias, the simulator's friction). The watch runs as the node runs it
   (ResidualStream -> PayloadWatch, sample by sample, ``apply`` on: an applied / reverted event
   rebuilds the served model with its payload). Reported per seed: delay of the picked_up
   event after the change (simulated time), its mass error, the applied mass, the put_down
   and reverted delays; and the watch's cost per joint_states sample (wall time, this
   machine). Goals: event within 2 s, mass within 10 %, revert within 2 s.
2. Real UR10e (``../shared/real-data/ur10e``, README there; skipped when absent, nothing of
   it written into the repository): the arm model is ``arm-dyn-id fit`` of the 30 s Fourier
   run (rows 635:3510) with the README's torque constants, in a temporary folder. The twin
   runs ``ur-19_12_23_free`` and ``ur-20_01_13-load_2600`` (the same trajectory without and
   with 2.602 kg at the flange) are concatenated both ways (a 0.1 s gap between: the observer
   restarts), free -> loaded (picked up) and loaded -> free (put down). Effort = k·i, the
   README's k. The watch takes the arm model's held-out RMSE as its own error
   (``arm_model_error``). Settings: the defaults, and a real-arm profile (support and
   confirm 2 s, enter / exit 1.0 / 0.5 kg, max_mass_std 0.2 kg, max_relative_std 0.1) with
   a 10 s and a 20 s window. Reported per setting: the events with their delay and mass, the
   applied mass, and the events on the free part (false). Goal: mass within 20 % of 2.602 kg.

    .venv/bin/python bench/payload_watch.py [--seeds 3] [--first-seed 0] [--no-real] [--keep DIR]
"""

import argparse
import contextlib
import io
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import benchlib

from arm_dyn_id.identification.payload import arm_model_error, payload_frame
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics
from arm_dyn_id.service.payload_watch import (
    APPLIED, CHANGED, PICKED_UP, PUT_DOWN, REVERTED, PayloadWatch, WatchSettings)
from arm_dyn_id.sim import pick_and_place as sim

REPO = Path(__file__).resolve().parents[1]
DATA = benchlib.UR10E
K = np.array([10.0, 10.6956, 8.4566, 9.0029, 9.48, 10.1232])
FIT = ('ur-20_02_10-30sec_12harm', '635:3510')
FREE, LOADED, UR_MASS = 'ur-19_12_23_free', 'ur-20_01_13-load_2600', 2.602
T_ON, T_OFF, MASS, COM = 8.0, 12.0, 1.0, (0.0, 0.0, 0.05)


def simulate(seed, seconds=15.0):
    """TX-60 in MuJoCo with MASS at COM in [T_ON, T_OFF): config, true model, t, q, dq, τ."""
    run = sim.pick_and_place(MASS, COM, T_ON, T_OFF, seconds, seed)
    return run.config, run.model, run.t, run.q, run.dq, run.tau


def follow(model, t, q, dq, tau, settings, frame, noise=None, model_error=None):
    """The node's path without ROS. Returns (events, wall seconds in the watch, samples)."""
    watch = PayloadWatch(model.robot, settings, frame, noise=noise, model_error=model_error)
    served = None
    stream = ResidualStream(ServedDynamics(model), 25.0)
    events, spent = [], 0.0
    for k in range(len(t)):
        _, v, _, r, contact = stream.step(t[k], q[k], dq[k], tau[k])
        start = time.perf_counter()
        out = watch.update(t[k], q[k], v, r, contact, served)
        spent += time.perf_counter() - start
        for event in out:
            events.append(event)
            if event.kind in (APPLIED, REVERTED):
                served = event.payload
                stream = ResidualStream(ServedDynamics(model, payload=served), 25.0)
    return events, spent, len(t)


def first(events, kind, after=-np.inf):
    return next((e for e in events if e.kind == kind and e.t > after), None)


def mujoco_case(seeds, first_seed=0):
    print(f'== MuJoCo TX-60, 1 kg picked up at {T_ON:g} s, put down at {T_OFF:g} s (simulated '
          'time), default WatchSettings with apply')
    print(f'{"seed":>4} {"picked_up s":>11} {"mass err %":>10} {"applied kg":>10} '
          f'{"CoM z mm":>8} {"put_down s":>10} {"reverted s":>10} {"events":>6} '
          f'{"µs/sample":>9}')
    rows = []
    for seed in range(first_seed, first_seed + seeds):
        config, model, t, q, dq, tau = simulate(seed)
        events, spent, n = follow(model, t, q, dq, tau, WatchSettings(apply=True), 'flange',
                                  noise=config.torque_noise)
        up, down = first(events, PICKED_UP), first(events, PUT_DOWN)
        applied, reverted = first(events, APPLIED), first(events, REVERTED)
        row = (up.t - T_ON if up else np.nan, 100 * (up.mass - MASS) / MASS if up else np.nan,
               applied.payload.mass if applied else np.nan,
               1e3 * applied.payload.com[2] if applied else np.nan,
               down.t - T_OFF if down else np.nan, reverted.t - T_OFF if reverted else np.nan,
               len(events), 1e6 * spent / n)
        rows.append(row)
        print(f'{seed:>4} {row[0]:>11.2f} {row[1]:>10.1f} {row[2]:>10.3f} {row[3]:>8.1f} '
              f'{row[4]:>10.2f} {row[5]:>10.2f} {row[6]:>6} {row[7]:>9.0f}')
    rows = np.array(rows)
    print(f'worst: picked_up {np.nanmax(rows[:, 0]):.2f} s after the change, |mass error| '
          f'{np.nanmax(np.abs(rows[:, 1])):.1f} %, reverted {np.nanmax(rows[:, 5]):.2f} s '
          f'after the put-down (goals 2 s, 10 %, 2 s); events per run {rows[:, 6].tolist()} '
          '(4: picked_up, applied, put_down, reverted)')


def realistic_case(seeds, first_seed=0):
    print('\n== realistic simulation (arm_dyn_id.sim.pick_and_place.realistic_pick_and_place): '
          'TX-60, 2 kg at (0, 0, 0.05) m held 20-45 s of 65 s, 500 Hz, served model imperfect '
          '(link parameters 5 %, friction +15-45 %, gains 3 %, 3 s-correlated torque error '
          '3x the noise), default WatchSettings with apply; times from the change')
    for seed in range(first_seed, first_seed + seeds):
        run = sim.realistic_pick_and_place(seed=seed)
        events, spent, n = follow(run.served, run.t, run.q, run.dq, run.tau,
                                  WatchSettings(apply=True), 'flange',
                                  noise=run.config.torque_noise)
        told = []
        for e in events:
            held = run.t_on <= e.since < run.t_off
            change = run.t_on if e.since < run.t_off else run.t_off
            note = ''
            if e.kind in (PICKED_UP, CHANGED):
                note = f' ({100 * (e.mass / run.mass - 1):+.0f} %)' if held else \
                    ' (FALSE: nothing held)'
            elif e.kind == PUT_DOWN and held:
                note = ' (FALSE: still held)'
            elif e.kind == APPLIED:
                note = f' serving {e.payload.mass:.2f} kg'
            told.append(f'{e.kind} {e.t - change:+.1f} s' + (
                f' {e.mass:.2f} ± {e.mass_std:.2f} kg' if e.kind in (PICKED_UP, CHANGED)
                else '') + note)
        print(f'seed {seed}: {", ".join(told) or "none"}; {1e6 * spent / n:.0f} µs/sample')


def _quiet_cli(*argv):
    from arm_dyn_id import cli
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f'arm-dyn-id {argv[0]} failed (exit {code})')


def ur10e_case(keep=None):
    if not (DATA / 'data' / f'{LOADED}.csv.gz').exists():
        print(f'\n== real UR10e: skipped, no data at {DATA}')
        return
    tmp = keep or Path(tempfile.mkdtemp(prefix='payload_watch_ur10e_'))
    tmp.mkdir(parents=True, exist_ok=True)
    if REPO in tmp.resolve().parents:
        raise SystemExit('work outside the repository')
    model_file = tmp / 'fit' / 'model.yaml'
    if not model_file.exists():
        bag = tmp / 'fit_bag'
        if not bag.exists():
            benchlib.ur10e_bag(FIT[0], bag, FIT[1])
        _quiet_cli('fit', bag, '--urdf', DATA / 'urdf' / 'ur10e.urdf', '--torque-constants',
                   ','.join(str(k) for k in K), '--out', tmp / 'fit', '--no-report', '--quiet')
    from arm_dyn_id.model import load_model
    model = load_model(model_file)
    runs = {name: benchlib.ur10e_csv(name) for name in (FREE, LOADED)}
    frame = payload_frame(model.robot)
    error = arm_model_error(model)
    print(f'\n== real UR10e: {FREE} and {LOADED} (2.602 kg) concatenated; arm model '
          f'{FIT[0]} rows {FIT[1]} (held-out RMSE {np.round(error, 2).tolist()} N·m), '
          f'frame {frame}, k = README')
    real = dict(apply=True, support=2.0, confirm=2.0, enter_mass=1.0, exit_mass=0.5,
                max_mass_std=0.2, max_relative_std=0.1)
    settings = {'defaults (window 1 s)': WatchSettings(apply=True),
                'real-arm profile, window 10 s': WatchSettings(window=10.0, **real),
                'real-arm profile, window 20 s': WatchSettings(window=20.0, **real)}
    for case, (a, b) in (('picked up', (FREE, LOADED)), ('put down', (LOADED, FREE))):
        a, b = runs[a], runs[b]
        t_change = a['t'][-1] - a['t'][0] + 0.1
        t = np.concatenate([a['t'] - a['t'][0], b['t'] - b['t'][0] + t_change])
        q, dq = np.vstack([a['q'], b['q']]), np.vstack([a['qd'], b['qd']])
        tau = np.vstack([a['i'], b['i']]) * K
        for label, s in settings.items():
            events, _, _ = follow(model, t, q, dq, tau, s, frame, model_error=error)
            loaded_part = (lambda e: e.t > t_change) if case == 'picked up' else \
                (lambda e: e.t < t_change)
            false = [e.kind for e in events if not loaded_part(e)
                     and e.kind in (PICKED_UP, 'changed')]
            text = ', '.join(f'{e.kind} {e.t - t_change:+.1f} s {e.mass:.2f} kg'
                             for e in events) or 'none'
            masses = [e.payload.mass for e in events if e.kind == APPLIED and loaded_part(e)]
            verdict = '' if not masses else \
                f'; applied mass {masses[-1]:.2f} kg ({100 * (masses[-1] / UR_MASS - 1):+.0f} %)'
            print(f'{case:>9} | {label:<33} | {text}{verdict}'
                  + (f'; false on the free part: {false}' if false and case == 'picked up'
                     else ''))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--seeds', type=int, default=3)
    p.add_argument('--first-seed', type=int, default=0,
                   help='seeds first .. first + seeds - 1 (held-out seeds: 6)')
    p.add_argument('--keep', type=Path, help='UR10e work folder (outside the repository)')
    p.add_argument('--no-real', action='store_true', help='skip the real UR10e part')
    a = p.parse_args(argv)
    load = Path('/proc/loadavg').read_text().split()[:3]
    print(f'machine: {platform.node()} {platform.processor() or platform.machine()}, '
          f'python {platform.python_version()}, load average {load}')
    started = time.time()
    mujoco_case(a.seeds, a.first_seed)
    realistic_case(a.seeds, a.first_seed)
    if not a.no_real:
        ur10e_case(a.keep)
    print(f'\ntotal {time.time() - started:.0f} s')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
