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
  --dynamics gravity --seed 0 --quiet`` as a fresh process, ``--fit-repeat`` times
  without the report (``--no-report``) and as many times with it, alternated; with
  ``--baseline-tree DIR`` also from another source tree (``git archive`` of a
  commit), one after the other. Each run (table ``fit_runs``) gives the wall time of
  the process (``wall_s``: for the run with the report, the time to the report),
  ``model_s``: model.yaml's modification time after the process started,
  ``outputs_s``: the same for the last of model.yaml, identified.urdf,
  validation.json and fit_data.npz, and ``cpu_s``: user + system CPU time of the
  process and the children it waited for (the report's forked child); the summary
  (table ``fit_command``) has the median and the worst of each.

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


#: what ``fit --no-report`` writes; model.yaml first
OUTPUTS = ('model.yaml', 'identified.urdf', 'validation.json', 'fit_data.npz')


def fit_argv(bag, cfg, out, report=False):
    """The timed command: a fresh ``python -m arm_dyn_id fit`` of the bag."""
    return [sys.executable, '-m', 'arm_dyn_id', 'fit', str(bag), '--config', str(cfg),
            '--out', str(out), '--dynamics', 'gravity', '--seed', '0', '--quiet'] + \
        ([] if report else ['--no-report'])


def fit_command(bag, cfg, out, tree=None, report=False, argv=fit_argv, env_extra=None):
    """One fresh fit command (``argv(bag, cfg, out, report)``, with ``env_extra`` added to
    its environment): wall and CPU time, and when model.yaml and the last output before
    the report were written (file modification times, from the process start)."""
    import resource
    # each tree's command makes its own BLAS settings (arm_dyn_id.blas_threads): one left
    # in this process's environment (arm_dyn_id.nodes sets one) would decide for both
    env = {k: v for k, v in os.environ.items()
           if k not in ('OPENBLAS_NUM_THREADS', 'OPENBLAS_THREAD_TIMEOUT')}
    env.update(env_extra or {})
    if tree is not None:
        # run from the tree: ``-m`` puts the working folder first on sys.path, ahead of
        # the editable install of this checkout
        env['PYTHONPATH'] = os.pathsep.join([str(tree), env.get('PYTHONPATH', '')])
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run(argv(bag, cfg, out, report), env=env, cwd=tree,
                          capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f'fit failed ({proc.returncode}): {proc.stderr[-2000:]}')
    # model.yaml always; identified.urdf only for a model with consistent link parameters
    written = [(Path(out) / name).stat().st_mtime - start for name in OUTPUTS
               if name == OUTPUTS[0] or (Path(out) / name).exists()]
    if report and not (Path(out) / 'report.html').is_file():
        raise RuntimeError(f'fit wrote no report.html in {out}')
    return {'wall_s': wall, 'model_s': written[0], 'outputs_s': max(written),
            'cpu_s': (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            'load_1min': round(os.getloadavg()[0], 2)}


def alternated_fits(report, bag, cfg, root, baseline_tree, repeat, argv=fit_argv,
                    extra=None, tables=('fit_runs', 'fit_command'), variants=None,
                    reports=(False, True)):
    """``repeat`` rounds of fresh fit commands, without and with the report (``reports``),
    from this checkout and ``baseline_tree`` (when given), alternated so that a change of
    load hits every variant alike; each run a row of ``tables[0]`` (with ``extra(out)``'s
    fields), the median and worst of each variant a row of ``tables[1]``. ``variants``,
    a list of ``(name, tree or None, environment added)``, replaces the two trees."""
    if variants is None:
        variants = [('now', None, None)] + (
            [('baseline', Path(baseline_tree).resolve(), None)]
            if baseline_tree is not None else [])
    print('timed: ' + ' '.join(map(str, argv(bag, cfg, root / 'fit', reports[-1]))) +
          (' (and with --no-report)' if len(reports) > 1 else ''), file=sys.stderr,
          flush=True)
    runs = {}
    for i in range(repeat):
        for report_on in reports:
            for name, tree, env_extra in variants:
                out = root / f'fit_{name}_{report_on}_{i}'
                run = fit_command(bag, cfg, out, tree, report_on, argv=argv,
                                  env_extra=env_extra)
                run.update(extra(out) if extra is not None else {})
                runs.setdefault((name, report_on), []).append(run)
                report.add(tables[0], {'tree': name, 'report': report_on, 'run': i, **run})
    for (name, report_on), rows in runs.items():
        said = {k: v for k, v in rows[0].items() if k not in TIMED}     # extra's fields
        report.add(tables[1], {'tree': name, 'report': report_on, **summary(rows), **said})


#: what fit_command measures of a run
TIMED = ('wall_s', 'model_s', 'outputs_s', 'cpu_s', 'load_1min')


def summary(runs):
    import numpy as np
    out = {'runs': len(runs)}
    for key in TIMED[:4]:
        values = [r[key] for r in runs]
        out[f'{key}_median'] = float(np.median(values))
        out[f'{key}_worst'] = float(np.max(values))
    return out


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
    parser.add_argument('--fit-repeat', type=int, default=5,
                        help='fit commands timed (each with and without the report)')
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
            alternated_fits(report, bag, cfg, root, args.baseline_tree, args.fit_repeat)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report.note('read: best of --repeat read_bag calls (read_s) of the recorder bag; '
                'read_rosbags_s with rosbags yielding every message (same run, same bag; '
                'rosbags_equal: identical arrays, markers and quality); read_baseline_s with '
                'the --baseline-records version of data/mcap_records.py.')
    report.note('fit_runs / fit_command: `arm-dyn-id fit BAG --config arm.yaml --dynamics '
                'gravity --seed 0 --quiet` in a fresh process (imports included), with '
                '--no-report (report False) and with the report, --fit-repeat times each, '
                'alternated with the --baseline-tree source tree. wall_s: the process, start '
                'to exit (with the report: the time to the report); model_s: model.yaml '
                'written (its modification time) after the start; outputs_s: the last of '
                'model.yaml, identified.urdf, validation.json, fit_data.npz; cpu_s: user + '
                'system time of the process and its reaped children; load_1min: the 1-min '
                'load average after the run. fit_command: median and worst of the runs.')
    report.save()
    return 0


if __name__ == '__main__':
    sys.exit(main())
