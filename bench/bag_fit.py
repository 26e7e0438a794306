"""Offline fit of a long bag: write, read and fit times (issue 7).

Generates a synthetic 1 kHz bag of the humanoid arm (6 joints, seed 000
reciprocating excitation, torque = G(q) + friction + noise stored as currents,
segment markers) once in a temporary folder, then times

- ``write``: rosbags Writer, CDR bytes built with NumPy (write_synthetic_bag);
- ``read``: arm_dyn_id.data.bag_reader.read_bag as it is (MCAP chunks read as
  records, JointState CDR decoded with NumPy: data.mcap_records);
- ``read_rosbags``: the same read_bag with the MCAP record path switched off,
  rosbags yielding every message (the reader before it), in the same run, on
  the same bag; the two recordings are checked equal;
- ``read_reference``: read_bag(fast=False) (rosbags' deserialiser, message
  objects) on the first ``--reference-messages`` messages, extrapolated;
- ``fit``: what ``arm-dyn-id fit`` does after reading (pairing, regressor,
  estimators, held-out validation), without the report;
- ``report``: the HTML report and its plots.

Seeded: the synthetic data (poses, torque and encoder noise) comes from seed 0
(test_cli_fit.reciprocating_data), the held-out split of ``arm-dyn-id fit`` from
its ``--seed`` 0.

Prints one JSON line per table row; the tables go to docs/results/bag_fit.md /
.json (not with ``--no-save``). Usage::

    .venv/bin/python bench/bag_fit.py [--seconds 3600] [--rate 1000] [--storage mcap]
"""

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / 'test'))

import benchlib  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=3600.0, help='bag length (s)')
    parser.add_argument('--rate', type=float, default=1000.0, help='sample rate (Hz)')
    parser.add_argument('--storage', choices=('mcap', 'sqlite3'), default='mcap')
    parser.add_argument('--reference-messages', type=int, default=100000)
    parser.add_argument('--keep', type=Path, help='keep the bag and fit folder here')
    benchlib.add_arguments(parser)
    args = parser.parse_args(argv)
    report = benchlib.Report('bag_fit', args, title='Offline fit of a long bag: write, read '
                                                    'and fit times (humanoid arm)')

    import numpy as np
    from test_cli_fit import reciprocating_data, write_config, write_synthetic_bag
    from arm_dyn_id.data.bag_reader import read_bag
    from arm_dyn_id.cli.fit import Progress, fit_bag

    root = Path(tempfile.mkdtemp(prefix='bag_fit_')) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    result = {'storage': args.storage, 'rate_hz': args.rate}
    try:
        t0 = time.perf_counter()
        # poses per joint so that the excitation lasts about --seconds
        one = reciprocating_data(seed=0, rate=100.0, poses=1, speed=0.05, sweep_range=1.2)
        per_pose = (one['t'][-1] - one['t'][0]) / 6
        poses = max(1, int(round(args.seconds / (6 * per_pose))))
        data = reciprocating_data(seed=0, rate=args.rate, poses=poses, speed=0.05,
                                  sweep_range=1.2)
        n = data['t'].shape[0]
        result.update(messages=n, joints=6, duration_s=float(data['t'][-1] - data['t'][0]),
                      generate_s=time.perf_counter() - t0)
        bag = root / 'bag'
        t0 = time.perf_counter()
        write_synthetic_bag(bag, data, storage=args.storage, version=9)
        result['write_s'] = time.perf_counter() - t0
        result['bag_bytes'] = sum(p.stat().st_size for p in bag.iterdir())
        cfg = write_config(root / 'arm.yaml')
        del data

        from arm_dyn_id.config import load_arm_config
        config = load_arm_config(cfg)
        from arm_dyn_id.data import bag_reader
        fast_path = bag_reader.joint_state_batches, bag_reader.raw_messages
        t0 = time.perf_counter()
        bag_reader.joint_state_batches = lambda reader, conn: None
        bag_reader.raw_messages = lambda reader, conns: reader.messages(conns)
        try:
            old = read_bag(bag, config)
        finally:
            bag_reader.joint_state_batches, bag_reader.raw_messages = fast_path
        result['read_rosbags_s'] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rec = read_bag(bag, config)
        result['read_s'] = time.perf_counter() - t0
        result['read_speedup'] = result['read_rosbags_s'] / result['read_s']
        result['read_msgs_per_s'] = rec.n_samples / result['read_s']
        result['read_equal'] = bool(
            all(np.array_equal(getattr(rec, f), getattr(old, f), equal_nan=True)
                for f in ('t', 'q', 'dq', 'current', 'tau'))
            and rec.markers == old.markers and rec.quality == old.quality)
        del rec, old

        small = root / 'small'
        ref = reciprocating_data(seed=0, rate=args.rate, poses=1, speed=0.05, sweep_range=1.2)
        m = min(args.reference_messages, ref['t'].shape[0])
        ref = {k: (v[:m] if isinstance(v, np.ndarray) else v) for k, v in ref.items()}
        write_synthetic_bag(small, ref, storage=args.storage, version=9)
        t0 = time.perf_counter()
        read_bag(small, config, fast=False)
        ref_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        read_bag(small, config)
        fast_small_s = time.perf_counter() - t0
        read_reference = {
            'messages': m, 'rosbags_decode_s': ref_s, 'read_bag_s': fast_small_s,
            'rosbags_decode_msgs_per_s': m / ref_s,
            'rosbags_decode_extrapolated_s': ref_s * n / m}

        from arm_dyn_id.cli import build_parser
        argv = ['fit', str(bag), '--config', str(cfg), '--out', str(root / 'fit'),
                '--seed', '0', '--quiet', '--no-report']
        fit_args = build_parser(argv).parse_args(argv)
        t0 = time.perf_counter()
        _, validation = fit_bag(fit_args, Progress(quiet=True))
        total = time.perf_counter() - t0
        timings = validation['fit_summary']['timings_s']
        result['fit_command_s'] = total
        result['fit_command_read_s'] = timings['read']
        result['fit_s'] = timings['fit']
        result['validate_and_write_s'] = total - timings['read'] - timings['fit']
        for key, value in timings.items():
            if key not in ('read', 'fit'):
                result[f'fit_command_{key}_s'] = value
        held_out = validation.get('held_out', {})
        fit_summary = {
            'pairs': validation['fit_summary']['segments']['pairs'],
            'held_out_pairs': validation['fit_summary']['holdout']['held_out_pairs'],
            'fitted_samples': validation['fit_summary']['fit']['n_samples'],
            'method': validation['fit_summary']['fit']['method'],
            'joints': list(held_out),
            'held_out_rmse_percent': [v['rmse_percent'] for v in held_out.values()]}
        from arm_dyn_id.validation.report import write_report
        t0 = time.perf_counter()
        write_report(root / 'fit')
        result['report_s'] = time.perf_counter() - t0
        try:
            import resource
            result['max_rss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        except ImportError:
            pass
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report.add('timings', result)
    report.add('read_reference', read_reference)
    report.add('fit_summary', fit_summary)
    report.note('timings: seconds of each step (generate the data, write the bag, read it with '
                'bag_reader.read_bag: read_s as it is, read_rosbags_s with rosbags yielding '
                'every message as before (same run, same bag; read_equal: identical arrays, '
                'markers and quality); fit_command_s: fit_bag end to end without the report, of '
                'which fit_command_read_s reading, fit_s the fit, validate_and_write_s the '
                'held-out validation and the written model; report_s: the HTML report); '
                'max_rss_mb: peak resident memory of the whole run.')
    report.note('read_reference: read_bag(fast=False) (rosbags deserialiser, message '
                'objects) against read_bag on the first messages of a second bag, the '
                'former extrapolated to the full bag.')
    report.note('fit_summary: held_out_rmse_percent per joint against the averaged measured '
                'torque of the held-out pairs (includes the simulated noise).')
    report.save()
    return 0


if __name__ == '__main__':
    sys.exit(main())
