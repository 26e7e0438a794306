#!/usr/bin/env python3
"""Contact detection on the real UR10e: pushes flagged, delay, false alarms on free motion.

Reads ../shared/real-data/ur10e (relative to the repository root; README there) when it
exists, else says it skipped and exits 0. Nothing derived from the data is written into the
repository: the bags, the model and the thresholds go to a temporary folder outside it.

1. Fit: the 30 s Fourier run, rows 635:3510, ``arm-dyn-id fit`` with its defaults
   (``--no-report`` only saves time; the model is the same).
2. Thresholds: ``arm-dyn-id residual MODEL BAG... --calibrate`` (defaults: quantile 0.999,
   margin 3, persistence 0.05 s, holding tracker on) on free-motion recordings the fit did
   not use: CALIBRATION below. Also ('from the fit'): the contact_thresholds.yaml that
   ``fit`` writes beside the model from its own held-out residuals, no other recording.
3. ``arm-dyn-id residual`` (the node's ResidualStream, sample by sample) on push_pose_1 and on
   every free-motion recording not used for the thresholds (EVALUATION; for the fit's own
   thresholds, CALIBRATION too): the contact episodes. On push_pose_1, each push's visible
   start (below) against the first flag. Any episode on such a recording is a false alarm.
   The load_2600 recording carries a 2.6 kg payload the model does not know: reported
   apart, not counted as free motion.

Visible start of a push (there are no labels), from the measured torque k·i alone, never
from the residual: the arm holds one pose, so each joint's torque at rest is its median over
the recording; its noise is 1.4826 x the median absolute deviation. A push is a stretch where
some joint's torque leaves its median by more than 10 N·m (half the smallest excursion the
README states), stretches closer than 0.5 s merged; its visible start is the last sample
before the first 10 N·m crossing at which every joint was still within 4 noise widths of
its median. The delay is the first flag of an episode overlapping the push minus that start.

Also, for comparison: the same with the holding tracker off (--no-holding) and with the
persistence 0 (a flag per crossing). And what the holding tracker costs: a synthetic push
ramping at ρ N·m/s on shoulder_lift is added to the measured torque of a static-pose
recording of the evaluation set (p2, from 3 s on); reported is the ramp's torque when the
flag comes, with the tracker and without it (each with its own calibrated thresholds).

    .venv/bin/python bench/contact_ur10e.py [--keep DIR]
"""

import argparse
import contextlib
import io
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import benchlib

REPO = Path(__file__).resolve().parents[1]
DATA = benchlib.UR10E
K = '10.0,10.6956,8.4566,9.0029,9.48,10.1232'
FIT = ('ur-20_02_10-30sec_12harm', '635:3510')
CALIBRATION = ['ur-20_02_12-50sec_12harm', 'ur-20_01_22-joint_1', 'ur-20_01_22-joint_3',
               'ur-20_01_22-joint_5', 'ur-20_01_17-p1', 'ur-20_01_17-p3', 'ur-20_01_17-p5',
               'ur-20_01_17-p7', 'ur-20_01_17-p9']
EVALUATION = ['ur-20_02_19_14harm50sec', 'ur-20_01_22-joint_2', 'ur-20_01_22-joint_4',
              'ur-20_01_22-joint_6', 'ur-20_01_17-p2', 'ur-20_01_17-p4', 'ur-20_01_17-p6',
              'ur-20_01_17-p8', 'ur-20_01_17-p10', 'ur-19_12_23_free']
LOADED = 'ur-20_01_13-load_2600'
PUSH = 'ur-20_01_22-push_pose_1'
EPOCH = 1_579_000_000
VISIBLE_NM = 10.0
QUIET_WIDTHS = 4.0
MERGE_S = 0.5


def _to_bag(tmp, name, rows=None):
    out = tmp / name
    return out if out.exists() else benchlib.ur10e_bag(name, out, rows)


def _cli(*argv):
    from arm_dyn_id import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f'arm-dyn-id {" ".join(map(str, argv[:2]))}... exit {code}: '
                         f'{err.getvalue().strip()[-800:]}')
    return out.getvalue()


def visible_pushes(name):
    """[(visible start, end)] of the pushes (s, stamps as in the bag), from k·i alone."""
    d = benchlib.ur10e_csv(name)
    tau = d['i'] * np.array([float(x) for x in K.split(',')])
    t = d['t'] + EPOCH
    dev = tau - np.median(tau, axis=0)
    noise = 1.4826 * np.median(np.abs(dev), axis=0)
    loud = np.any(np.abs(dev) > VISIBLE_NM, axis=1)
    quiet = np.all(np.abs(dev) <= QUIET_WIDTHS * noise, axis=1)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], loud.astype(int), [0]])))
    spans = []
    for a, b in zip(edges[::2], edges[1::2]):
        if spans and t[a] - spans[-1][1] < MERGE_S:
            spans[-1][1] = t[b - 1]
            continue
        k = a
        while k > 0 and not quiet[k]:
            k -= 1
        spans.append([t[k], t[b - 1], t[a]])
    return [tuple(s) for s in spans], noise


def residual(model, bags, json_path, *extra):
    _cli('residual', model, *bags, '--urdf', DATA / 'urdf' / 'ur10e.urdf',
         '--torque-constants', K, '--json', json_path, '--quiet', *extra)
    return json.loads(Path(json_path).read_text())


def slow_push_cost(model, thresholds, bag, joint=1, start=3.0,
                   rates=(1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)):
    """{ρ: torque of the ramp (N·m) at the first flag, or None} on one static recording."""
    from arm_dyn_id.data.bag_reader import read_bag
    from arm_dyn_id.model import load_model
    from arm_dyn_id.service.contact import ContactThresholds
    from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics, run_stream
    served = ServedDynamics(load_model(model))
    th = ContactThresholds.load(thresholds)
    rec = read_bag(bag, config={'joints': list(served.joints),
                                'torque_constants': [float(x) for x in K.split(',')]})
    t = rec.t - rec.t[0]
    out = {}
    for rate in rates:
        tau = rec.tau.copy()
        tau[:, joint] -= rate * np.clip(t - start, 0, None)      # the motor holds against it
        series = run_stream(ResidualStream(served, 25.0, th), rec.t, rec.q, rec.dq, tau)
        hit = np.flatnonzero(series['contact'] & (t >= start))
        out[rate] = None if not len(hit) else round(float(rate * (t[hit[0]] - start)), 1)
    return out


def closest_approach(model, thresholds, bags):
    """{recording: (largest |r| / band held for the persistence, joint, s into it, during a
    start)}: how near each free-motion recording comes to a flag (1 would be one)."""
    from arm_dyn_id.data.bag_reader import read_bag
    from arm_dyn_id.model import load_model
    from arm_dyn_id.service.contact import ContactThresholds, persisted
    from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics, run_stream
    served = ServedDynamics(load_model(model))
    th = ContactThresholds.load(thresholds)
    out = {}
    for bag in bags:
        rec = read_bag(bag, config={'joints': list(served.joints),
                                    'torque_constants': [float(x) for x in K.split(',')]})
        series = run_stream(ResidualStream(served, 25.0, th), rec.t, rec.q, rec.dq, rec.tau)
        ratio = persisted(rec.t, np.abs(series['residual']) / series['band'], th.persistence)
        ratio[series['settling']] = 0.0
        k, j = np.unravel_index(np.argmax(ratio), ratio.shape)
        out[Path(bag).name] = (round(float(ratio[k, j]), 2), served.joints[j],
                               round(float(rec.t[k] - rec.t[0]), 2),
                               bool(series['starting'][k]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--keep', type=Path, help='work in this folder (outside the repository)')
    a = p.parse_args(argv)
    if not (DATA / 'data' / f'{PUSH}.csv.gz').exists():
        print(f'skipped: no real UR10e data at {DATA} (see bench/contact_ur10e.py)')
        return 0
    tmp = a.keep or Path(tempfile.mkdtemp(prefix='contact_ur10e_'))
    tmp.mkdir(parents=True, exist_ok=True)
    if REPO in tmp.resolve().parents:
        raise SystemExit('work outside the repository')
    t_start = time.time()
    fit_bag = _to_bag(tmp, FIT[0], FIT[1])
    model = tmp / 'fit' / 'model.yaml'
    if not model.exists():
        _cli('fit', fit_bag, '--urdf', DATA / 'urdf' / 'ur10e.urdf', '--torque-constants', K,
             '--out', tmp / 'fit', '--no-report', '--quiet')
    cal = [_to_bag(tmp, n) for n in CALIBRATION]
    ev = [_to_bag(tmp, n) for n in EVALUATION]
    push = _to_bag(tmp, PUSH)
    loaded = _to_bag(tmp, LOADED)
    spans, noise = visible_pushes(PUSH)
    print(f'model: {model}')
    print(f'push_pose_1: {len(spans)} pushes visible in k·i (>{VISIBLE_NM:g} N·m off the '
          f'median; quiet = within {QUIET_WIDTHS:g} x noise {np.round(noise, 2).tolist()} N·m)')
    variants = {'calibrated': [], 'no holding tracker': ['--no-holding'],
                'persistence 0': ['--persistence', '0'], 'from the fit': None}
    for label, extra in variants.items():
        if extra is None:
            # what `fit` wrote beside the model: its own held-out residuals, no other
            # recording (the CALIBRATION recordings stay unused)
            thresholds, extra = model.parent / 'contact_thresholds.yaml', []
        else:
            thresholds = tmp / f'thresholds_{label.replace(" ", "_")}.yaml'
            _cli('residual', model, *cal, '--urdf', DATA / 'urdf' / 'ur10e.urdf',
                 '--torque-constants', K, '--calibrate', '--out', thresholds, '--quiet',
                 *extra)
        extra = extra + ['--thresholds', thresholds]
        pushed = residual(model, [push], tmp / 'push.json', *extra)['bags'][0]
        eps = pushed['episodes']
        delays, detected = [], 0
        for start, end, crossing in spans:
            hits = [e for e in eps if e['end'] >= start and e['start'] <= end + 0.3]
            if hits:
                detected += 1
                delays.append(hits[0]['start'] - start)
        extra_eps = [e for e in eps if not any(e['end'] >= s and e['start'] <= en + 0.3
                                               for s, en, _ in spans)]
        # the fit's thresholds used no other recording: every free-motion one is judged
        unused = ev + cal if label == 'from the fit' else ev
        free = residual(model, unused, tmp / 'free.json', *extra)['bags']
        fa = {Path(b['bag']).name: len(b['episodes']) for b in free}
        fa_time = {Path(b['bag']).name: sum(e['duration'] for e in b['episodes']) /
                   max(b['duration'], 1e-9) for b in free}
        load = residual(model, [loaded], tmp / 'load.json', *extra)['bags'][0]
        th = json.loads(json.dumps(__import__('yaml').safe_load(thresholds.read_text())))
        print(f'\n== {label} (thresholds: {thresholds.name})')
        print('thresholds (N·m): standstill', [round(x, 2) for x in th['standstill']],
              '; in motion base', [round(x, 2) for x in th['base']], '+ per ‖q̇‖',
              [round(x, 2) for x in th['per_velocity']], '+ per ‖q̈‖',
              [round(x, 2) for x in th['per_acceleration']], '; holding bounds',
              [round(x, 2) for x in th['holding']['bounds']])
        print(f'pushes detected: {detected} of {len(spans)}; delays from visible start '
              f'(ms): {[round(1e3 * d) for d in delays]}; episodes outside pushes on '
              f'push_pose_1: {len(extra_eps)}')
        for e in eps:
            print(f'  episode {e["start"] - EPOCH:8.3f} .. {e["end"] - EPOCH:8.3f} s  '
                  f'peak {e["peak"]:.1f} N·m at {e["peak_joint"]}; joints {e["joints"]}')
        print(f'  visible starts (s): {[round(float(s) - EPOCH, 3) for s, _, _ in spans]}')
        print(f'false-alarm episodes on {len(free)} free-motion recordings not used for the '
              f'thresholds: {sum(fa.values())}  {fa}')
        if label in ('calibrated', 'from the fit'):
            near = closest_approach(model, thresholds, unused)
            worst = max(near, key=lambda k: near[k][0])
            print('closest approach to a flag on the free-motion recordings (|r| / band held '
                  f'for the persistence; 1 flags): worst {near[worst][0]} on {worst} '
                  f'({near[worst][1]} at {near[worst][2]} s'
                  f'{", the arm starting" if near[worst][3] else ""}); all '
                  f'{ {k: v[0] for k, v in near.items()} }')
        if label != 'persistence 0':
            cost = slow_push_cost(model, thresholds, tmp / 'ur-20_01_17-p2')
            print('slow push on shoulder_lift at p2: ramp ρ (N·m/s) -> its torque at the flag '
                  f'(N·m; None: not flagged in the recording): {cost}')
        busy = {k: round(100 * v, 1) for k, v in fa_time.items() if v > 0}
        if busy:
            print(f'  time flagged (%): {busy}')
        print(f'loaded recording (2.6 kg unknown to the model, not free motion): '
              f'{len(load["episodes"])} episodes, '
              f'{100 * sum(e["duration"] for e in load["episodes"]) / load["duration"]:.0f} % '
              'of the time flagged')
    print(f'\n{platform.node()} {platform.machine()}, python {platform.python_version()}, '
          f'{time.time() - t_start:.0f} s wall; work folder {tmp}'
          + ('' if a.keep else ' (removed)'))
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
