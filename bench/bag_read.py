"""Reading a recorder bag: joint_states and joint_torques interleaved message by message.

The recorder (data.bag_writer, nodes/recorder_node.py) writes ``/joint_states`` and
``/joint_torques`` one message each per sample, plus markers, so a chunk holds no
run of consecutive records of one topic. This generates such a bag (seed-000
reciprocating excitation of the humanoid arm, ``test_cli_fit.write_synthetic_bag``
with ``recorder=True``: currents, torques, markers, stored configuration; seed 0)
and times

- ``read``: ``bag_reader.read_bag`` as it is (best of ``--repeat``);
- ``read_rosbags``: the same with the MCAP record path switched off, rosbags
  yielding every message; the two recordings are checked equal;
- ``read_baseline`` (with ``--baseline-records FILE``): ``read_bag`` with another
  version of ``data/mcap_records.py`` (e.g. ``git show HEAD~1:...``), same run;
- ``fit_command`` (with ``--fit``): ``arm-dyn-id fit BAG --config arm.yaml
  --dynamics gravity --no-report --quiet`` as a fresh process, wall time; with
  ``--baseline-tree DIR`` also from another source tree (``git archive`` of a
  commit), one after the other, ``--fit-repeat`` times.

The excitation is one pose per joint with the sweep shortened so that the bag
lasts about ``--seconds`` (several poses of 1.2 rad sweeps for long bags).

``--profile`` prints the cProfile of one ``read_bag`` to stderr. Prints one JSON
line per row; tables to docs/results/bag_read.md / .json (not with ``--no-save``)::

    .venv/bin/python bench/bag_read.py [--seconds 60] [--rate 1000] [--fit]
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / 'test'))

import benchlib  # noqa: E402


def _best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _equal(a, b):
    import numpy as np
    return bool(all(np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True)
                    for f in ('t', 'q', 'dq', 'current', 'tau'))
                and a.markers == b.markers and a.quality == b.quality)


def _records_module(path):
    spec = importlib.util.spec_from_file_location('baseline_mcap_records', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fit_command(bag, cfg, out, tree=None):
    env = dict(os.environ)
    if tree is not None:
        # run from the tree: ``-m`` puts the working folder first on sys.path, ahead of
        # the editable install of this checkout
        env['PYTHONPATH'] = os.pathsep.join([str(tree), env.get('PYTHONPATH', '')])
    argv = [sys.executable, '-m', 'arm_dyn_id', 'fit', str(bag), '--config', str(cfg),
            '--out', str(out), '--dynamics', 'gravity', '--seed', '0', '--quiet',
            '--no-report']
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f'fit failed ({proc.returncode}): {proc.stderr[-2000:]}')
    return wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=60.0, help='bag length (s)')
    parser.add_argument('--rate', type=float, default=1000.0, help='sample rate (Hz)')
    parser.add_argument('--repeat', type=int, default=3, help='reads timed, best kept')
    parser.add_argument('--profile', action='store_true', help='cProfile one read_bag')
    parser.add_argument('--fit', action='store_true', help='time arm-dyn-id fit too')
    parser.add_argument('--baseline-records', type=Path,
                        help='another mcap_records.py to time read_bag with')
    parser.add_argument('--baseline-tree', type=Path,
                        help='another source tree to time the fit command with')
    parser.add_argument('--fit-repeat', type=int, default=3, help='fit commands timed')
    parser.add_argument('--keep', type=Path, help='keep the bag here (reused if present)')
    benchlib.add_arguments(parser)
    args = parser.parse_args(argv)
    report = benchlib.Report('bag_read', args, title='Reading a recorder bag '
                                                     '(joint_states and joint_torques '
                                                     'interleaved)')
    from test_cli_fit import reciprocating_data, write_config, write_synthetic_bag
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.data import bag_reader
    from arm_dyn_id.data.bag_reader import bag_info, read_bag

    root = Path(tempfile.mkdtemp(prefix='bag_read_')) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    bag = root / 'bag'
    try:
        if not bag.exists():
            def length(sweep):
                one = reciprocating_data(seed=0, rate=100.0, poses=1, speed=0.05,
                                         sweep_range=sweep)
                return one['t'][-1] - one['t'][0]
            full, short = length(1.2), length(0.6)
            poses, sweep = max(1, int(round(args.seconds / full))), 1.2
            if args.seconds < full:
                # one pose per joint, its sweep shortened: the length is affine in the sweep
                sweep = 0.6 + 0.6 * (args.seconds - short) / (full - short)
            data = reciprocating_data(seed=0, rate=args.rate, poses=poses, speed=0.05,
                                      sweep_range=sweep)
            write_synthetic_bag(bag, data, recorder=True, version=9)
            del data
        cfg = write_config(root / 'arm.yaml')
        config = load_arm_config(cfg)
        topics = bag_info(bag)['topics']
        info = {'messages': sum(v['count'] for v in topics.values()),
                'joint_states': topics['/joint_states']['count'],
                'joint_torques': topics.get('/joint_torques', {}).get('count', 0),
                'bag_bytes': sum(p.stat().st_size for p in bag.iterdir())}

        read_s, rec = _best(lambda: read_bag(bag, config), args.repeat)
        row = {**info, 'samples': rec.n_samples,
               'duration_s': float(rec.t[-1] - rec.t[0]), 'read_s': read_s,
               'samples_per_s': rec.n_samples / read_s}
        fast_path = bag_reader.joint_state_batches, bag_reader.raw_messages
        if args.baseline_records is not None:
            old = _records_module(args.baseline_records)
            bag_reader.joint_state_batches = old.joint_state_batches
            bag_reader.raw_messages = old.raw_messages
            try:
                base_s, base = _best(lambda: read_bag(bag, config), 1)
            finally:
                bag_reader.joint_state_batches, bag_reader.raw_messages = fast_path
            row.update(read_baseline_s=base_s, baseline_over_now=base_s / read_s,
                       baseline_equal=_equal(rec, base))
            del base
        bag_reader.joint_state_batches = lambda reader, conn: None
        bag_reader.raw_messages = lambda reader, conns: reader.messages(conns)
        try:
            ros_s, ros = _best(lambda: read_bag(bag, config), 1)
        finally:
            bag_reader.joint_state_batches, bag_reader.raw_messages = fast_path
        row.update(read_rosbags_s=ros_s, rosbags_over_now=ros_s / read_s,
                   rosbags_equal=_equal(rec, ros))
        del ros, rec
        report.add('read', row)

        if args.profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.enable()
            read_bag(bag, config)
            prof.disable()
            pstats.Stats(prof, stream=sys.stderr).sort_stats('cumulative').print_stats(25)

        if args.fit:
            now, base = [], []
            for i in range(args.fit_repeat):
                # alternated, so that a change of load hits both
                now.append(_fit_command(bag, cfg, root / f'fit{i}'))
                if args.baseline_tree is not None:
                    base.append(_fit_command(bag, cfg, root / f'fit_base{i}',
                                             args.baseline_tree.resolve()))
            fit = {'fit_command_s': min(now), 'fit_command_all_s': now}
            if base:
                fit.update(fit_command_baseline_s=min(base), fit_command_baseline_all_s=base,
                           baseline_over_now=min(base) / min(now))
            report.add('fit_command', fit)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report.note('read: best of --repeat read_bag calls (read_s) of the recorder bag; '
                'read_rosbags_s with rosbags yielding every message (same run, same bag; '
                'rosbags_equal: identical arrays, markers and quality); read_baseline_s with '
                'the --baseline-records version of data/mcap_records.py.')
    report.note('fit_command: wall time of `arm-dyn-id fit BAG --config arm.yaml --dynamics '
                'gravity --seed 0 --quiet --no-report` in a fresh process (imports '
                'included), best of --fit-repeat; the baseline from the --baseline-tree '
                'source tree, alternated with it.')
    report.save()
    return 0


if __name__ == '__main__':
    sys.exit(main())
