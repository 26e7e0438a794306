"""Fit the gravity model to a rosbag2 bag (MCAP or sqlite3, metadata version 8 or 9).

The bag holds sensor_msgs/JointState with the motor current in effort (plain
`ros2 bag record`), or is a recorder bag with its stored configuration. Segments
come from the bag's excitation_segments markers, or are detected in the joint
angles when it has none. A fraction of the forward/backward pairs (--holdout,
seeded) is held out: the model is fitted on the others and validated on them.

Writes DIR/model.yaml, DIR/identified.urdf, DIR/validation.json, DIR/fit_data.npz
and DIR/report.html (unless --no-report).

examples:
  arm-dyn-id fit my_bag/ --config my_arm.yaml --out fit/
  arm-dyn-id fit recording_20250101T120000_000Z/ --urdf arm.urdf --out fit/ --holdout 0
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.data.bag_writer import json_default

HELP = 'fit the gravity model to a rosbag2 bag (MCAP or sqlite3)'

#: samples of the raw time series kept in fit_data.npz for the report's plots
PLOT_SAMPLES = 10000


# ---------------------------------------------------------------------------
# progress on stderr

class Progress:
    """Phase lines always; a redrawn text bar with percent only on a terminal.

    Parameters
    ----------
    stream : file, optional
        Default ``sys.stderr``.
    quiet : bool
        No output at all.
    """

    def __init__(self, stream=None, quiet=False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, 'isatty', lambda: False)())
        self._t0 = time.monotonic()

    def phase(self, text):
        if not self.quiet:
            print(f'[{time.monotonic() - self._t0:7.1f} s] {text}', file=self.stream,
                  flush=True)

    def bar(self, label, width=30):
        """A ``callback(done, total)`` drawing ``label [####    ]  45 %``."""
        if self.quiet or not self.tty:
            return None
        last = [-1]

        def update(done, total):
            pct = int(100 * done / total) if total else 100
            if pct == last[0]:
                return
            last[0] = pct
            fill = width * pct // 100
            end = '\n' if done >= total else ''
            self.stream.write(f'\r{label} [{"#" * fill}{" " * (width - fill)}] {pct:3d} %{end}')
            self.stream.flush()
        return update


# ---------------------------------------------------------------------------
# shared by fit and validate

def add_data_arguments(parser):
    """Options that say how to read a bag (shared by fit and validate)."""
    parser.add_argument('bag', type=Path, help='rosbag2 bag folder (MCAP or sqlite3)')
    parser.add_argument('--config', type=Path,
                        help='arm config YAML (joints, torque_constants, urdf); optional for '
                        'recorder bags, which store theirs')
    parser.add_argument('--urdf', type=Path, help='URDF to use instead of the config\'s')
    parser.add_argument('--torque-constants', metavar='K1,K2,...',
                        help='torque constants k_e (N·m/A) per joint, replacing the config\'s')
    parser.add_argument('--states-topic', metavar='TOPIC',
                        help='JointState topic with the current in effort (default: '
                        '/joint_states, or the one the recorder stored)')
    parser.add_argument('--segments', choices=('auto', 'markers', 'detect'), default='auto',
                        help='sweep segments from the bag\'s markers, detected from the '
                        'joint angles, or markers when present else detected (default)')
    parser.add_argument('--recover', action='store_true',
                        help='repair an unfinished recorder bag (no metadata.yaml) first')
    parser.add_argument('--quiet', action='store_true', help='no progress output')


def parse_constants(text, n=None):
    try:
        values = [float(x) for x in text.replace(' ', '').split(',') if x]
    except ValueError as exc:
        raise ConfigError(f'--torque-constants {text!r}: give numbers separated by commas '
                          '(N·m/A per joint)') from exc
    if n is not None and len(values) != n:
        raise ConfigError(f'--torque-constants has {len(values)} values, the arm has {n} '
                          'joints: give one per joint in the order of joints')
    return values


def arm_setup(args, stored=None):
    """Configuration, current conversion and URDF from the options and the bag.

    Returns
    -------
    config : ArmConfig or None
    conversion : CurrentToTorque or None
        None: use the bag's stored configuration.
    """
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.data.motor import CurrentToTorque
    config = None
    if args.config is not None:
        overrides = {}
        if args.urdf is not None:
            overrides['urdf'] = str(args.urdf.expanduser().resolve())
        if args.torque_constants:
            overrides['torque_constants'] = parse_constants(args.torque_constants)
        config = load_arm_config(args.config, overrides=overrides)
        return config, CurrentToTorque.from_config(config)
    if args.torque_constants and stored is not None:
        doc = dict(stored)
        doc['torque_constants'] = parse_constants(args.torque_constants, len(doc['joints']))
        return None, CurrentToTorque.from_dict(doc)
    return None, None


def stored_config(bag):
    """The recorder's stored configuration of a bag, or None (reads one message)."""
    import yaml
    from arm_dyn_id.data.bag_reader import _open_reader
    from arm_dyn_id.data.bag_format import CONFIG_TOPIC, STRING, typestore
    bag = Path(bag).expanduser()
    if not (bag / 'metadata.yaml').exists():
        return None
    reader = _open_reader(bag)
    try:
        conns = [c for c in reader.connections if c.topic == CONFIG_TOPIC]
        for _, _, raw in reader.messages(conns):
            return yaml.safe_load(typestore().deserialize_cdr(raw, STRING).data)
    finally:
        reader.close()
    return None


def urdf_for(args, config, stored):
    """The URDF path: --urdf, the config's, or the stored config's (file beside/shipped)."""
    from arm_dyn_id.paths import resolve_data_file
    if args.urdf is not None:
        return args.urdf.expanduser()
    if config is not None:
        return config.urdf
    if stored:
        source = stored.get('config_file')
        if source and Path(source).is_file():
            from arm_dyn_id.config import load_arm_config
            return load_arm_config(source).urdf
        if stored.get('urdf'):
            path = resolve_data_file(stored['urdf'], 'urdf')
            if path.is_file():
                return path
    raise DataError('no URDF for the fit: pass --config (an arm config naming its urdf) or '
                    '--urdf PATH')


def read(args, conversion, progress):
    from arm_dyn_id.data.bag_reader import read_bag
    progress.phase(f'reading {args.bag}')
    t0 = time.perf_counter()
    rec = read_bag(args.bag, config=conversion, states_topic=args.states_topic,
                   recover=args.recover, progress=progress.bar('reading'))
    seconds = time.perf_counter() - t0
    q = rec.quality['loaded']
    progress.phase(f'read {rec.n_samples} samples of {len(rec.joints)} joints from '
                   f'{rec.states_topic} in {seconds:.1f} s ({q["rate_hz"]:.1f} Hz, '
                   f'{q["gaps"]} gaps, {q["drops"]} drops, {q["nonfinite"]} NaN)')
    return rec, seconds


def clean_markers(markers):
    """Markers usable by pairing: dicts with t and phase; sweeps need joint and direction."""
    out = []
    for m in markers:
        if not isinstance(m, dict) or 'error' in m or 't' not in m or 'phase' not in m:
            continue
        if m['phase'] == 'sweep' and ('joint_index' not in m or 'direction' not in m):
            continue
        out.append(m)
    return out


def choose_markers(rec, mode, progress):
    """Segment markers of a recording and where they came from ('markers' or 'detected')."""
    from arm_dyn_id.data.segmentation import detect_markers
    markers = clean_markers(rec.markers)
    has_sweeps = any(m['phase'] == 'sweep' for m in markers)
    if mode == 'markers' and not has_sweeps:
        raise DataError(f'bag {rec.source} has no excitation_segments sweep markers: pass '
                        '--segments detect to find the sweeps in the joint angles')
    if mode == 'markers' or (mode == 'auto' and has_sweeps):
        return markers, 'markers'
    progress.phase('no segment markers: detecting constant-speed sweeps' if mode == 'auto'
                   else 'detecting constant-speed sweeps')
    return detect_markers(rec.t, rec.q, rec.joints), 'detected'


def noise_estimate(tau):
    """Torque noise σ per joint (N·m) from sample-to-sample differences (robust, MAD).

    Gravity changes little between 1 kHz samples, so the first difference is
    noise (σ√2) plus rare steps at reversals, which the median ignores.
    """
    d = np.diff(np.asarray(tau, dtype=float), axis=0)
    d = d[np.all(np.isfinite(d), axis=1)]
    if d.shape[0] < 2:
        return np.full(np.shape(tau)[1], np.nan)
    mad = np.median(np.abs(d - np.median(d, axis=0)), axis=0)
    return 1.4826 * mad / np.sqrt(2.0)


def _sweep_markers(t, markers):
    """(marker, start, stop) of each marker that sweeps_from_markers turns into a Sweep."""
    ordered = sorted(markers, key=lambda m: m['t'])
    found = []
    for k, m in enumerate(ordered):
        if m.get('phase') != 'sweep':
            continue
        t_end = ordered[k + 1]['t'] if k + 1 < len(ordered) else np.inf
        start, stop = np.searchsorted(t, [m['t'], t_end])
        if stop - start >= 2:
            found.append((m, int(start), int(stop)))
    return found


def split_pairs(t, markers, fraction, seed):
    """Choose forward/backward pairs to hold out for validation.

    At least one pair is held out when ``fraction`` > 0 and there is more than one
    pair; every joint keeps at least one training pair.

    Returns
    -------
    fit_markers : list of dict
        ``markers`` with the held-out sweeps relabelled ``sweep_held_out`` (no
        longer sweeps for the fit; their samples are not used by it).
    held : list of (Sweep, Sweep)
    train : list of (Sweep, Sweep)
    """
    from arm_dyn_id.identification.pairing import pair_sweeps, sweeps_from_markers
    sweeps = sweeps_from_markers(t, markers)
    pairs = pair_sweeps(sweeps)
    if not pairs:
        raise DataError('no forward/backward sweep pair in the data: each joint must sweep '
                        'forward and back over the same range (seed 000 excitation)')
    n_hold = 0 if fraction <= 0 or len(pairs) < 2 else \
        min(len(pairs) - 1, max(1, int(round(fraction * len(pairs)))))
    rng = np.random.default_rng(seed)
    left = {}
    for fwd, _ in pairs:
        left[fwd.joint_index] = left.get(fwd.joint_index, 0) + 1
    held_ids = set()
    for i in rng.permutation(len(pairs)):
        if len(held_ids) >= n_hold:
            break
        j = pairs[i][0].joint_index
        if left[j] > 1:
            left[j] -= 1
            held_ids.add(int(i))
    held = [p for i, p in enumerate(pairs) if i in held_ids]
    train = [p for i, p in enumerate(pairs) if i not in held_ids]
    starts = {s.start for pair in held for s in pair}
    relabel = {id(m) for m, start, _ in _sweep_markers(t, markers) if start in starts}
    fit_markers = [dict(m, phase='sweep_held_out') if id(m) in relabel else m
                   for m in markers]
    return fit_markers, held, train


def pair_metrics(model, t, q, tau, pairs, joints, noise=None, gravity=None):
    """Metrics of a model on forward/backward-averaged pairs (friction cancelled).

    Returns
    -------
    metrics : list of JointMetrics
    paired : PairedData
    predicted : ndarray, (M, n)
    """
    from arm_dyn_id.identification.pairing import average_pairs
    from arm_dyn_id.validation.metrics import joint_metrics
    sweeps = [s for pair in pairs for s in pair]
    sweeps.sort(key=lambda s: s.start)
    paired = average_pairs(t, q, tau, sweeps)
    predicted = model.gravity_torques(paired.q, gravity=gravity)
    return joint_metrics(paired.tau, predicted, joints, noise), paired, predicted


def metrics_dict(metrics, noise=None):
    out = {}
    for j, m in enumerate(metrics):
        d = m.to_dict()
        d.pop('joint')
        d.pop('noise_amplitude', None)
        if noise is not None:
            d['noise_std'] = None if not np.isfinite(noise[j]) else float(noise[j])
        out[m.joint] = d
    return out


def _finite(obj):
    # strict JSON: NaN and inf become null
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    return obj


def write_json(path, doc):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(doc), indent=1, default=json_default,
                               allow_nan=False) + '\n')
    return path


def metrics_text(validation):
    """Tables (seed 000 Tables 3-4 style) of every case of a validation dict."""
    from arm_dyn_id.validation.metrics import metrics_table
    parts = []
    for case, joints in validation.items():
        if case == 'fit_summary':
            continue
        parts.append(metrics_table([_Row(j, **v) for j, v in joints.items()], title=case))
    return '\n\n'.join(parts)


# ---------------------------------------------------------------------------
# fit

def add_arguments(parser):
    add_data_arguments(parser)
    parser.add_argument('--out', type=Path, required=True, metavar='DIR',
                        help='output folder (model.yaml, identified.urdf, validation.json, '
                        'report.html)')
    parser.add_argument('--holdout', type=float, default=0.2, metavar='FRACTION',
                        help='fraction of forward/backward pairs held out for validation and '
                        'not fitted (default 0.2; 0 fits every pair, as the identifier node '
                        'does)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the hold-out choice')
    parser.add_argument('--methods', default='wls,joint_by_joint',
                        help='estimators to run, comma separated (wls, joint_by_joint, '
                        'threshold, irls, pso); the best weighted residual is kept')
    parser.add_argument('--gravity', type=float,
                        help='gravity (m/s²) the bag was recorded at (default: the config\'s)')
    parser.add_argument('--no-report', action='store_true', help='do not write report.html')


def fit_bag(args, progress):
    """Everything ``fit`` does except the report; returns the output paths."""
    from arm_dyn_id.identification.gravity import identify_gravity
    from arm_dyn_id.model.robot import RobotModel
    if not 0 <= args.holdout < 1:
        raise ConfigError(f'--holdout {args.holdout} must be in [0, 1)')
    bag = args.bag.expanduser()
    if not bag.exists():
        raise DataError(f'bag {bag} does not exist')
    stored = stored_config(bag)
    config, conversion = arm_setup(args, stored)
    if conversion is None and stored is None:
        raise DataError(f'bag {bag} has no stored configuration (/arm_dyn_id/config): pass '
                        '--config with the arm\'s joints and torque_constants to convert '
                        'currents to torques')
    urdf = urdf_for(args, config, stored)
    rec, read_s = read(args, conversion, progress)
    gravity = args.gravity or (config.gravity if config else None) or \
        float((stored or {}).get('gravity', 9.81))
    robot = RobotModel.from_urdf(urdf, joints=rec.joints, gravity=gravity)
    markers, source = choose_markers(rec, args.segments, progress)
    fit_markers, held, train = split_pairs(rec.t, markers, args.holdout, args.seed)
    progress.phase(f'segments from {source}: {len(held) + len(train)} forward/backward pairs, '
                   f'{len(held)} held out for validation')
    methods = tuple(m.strip() for m in args.methods.split(',') if m.strip())
    noise = None if config is None else np.asarray(config.torque_noise)
    t0 = time.perf_counter()
    progress.phase(f'fitting ({", ".join(methods)}) on {len(train)} pairs')
    fit = identify_gravity(robot, rec.t, rec.q, rec.tau, fit_markers, noise=noise,
                           methods=methods, average=True,
                           provenance={'data': str(bag), 'config': str(args.config or ''),
                                       'states_topic': rec.states_topic})
    fit_s = time.perf_counter() - t0
    model = fit.model
    res = fit.result
    progress.phase(f'fitted {model.base.count} base parameters with {res.method} in '
                   f'{fit_s:.1f} s (condition number {res.condition_number:.3g})')
    noise_std = noise_estimate(rec.tau)
    validation = {}
    cases = {}
    if held:
        metrics, paired, pred = pair_metrics(model, rec.t, rec.q, rec.tau, held, rec.joints,
                                             noise_std)
        validation['held_out'] = metrics_dict(metrics, noise_std)
        cases['held_out'] = (paired, pred)
    metrics, paired, pred = pair_metrics(model, rec.t, rec.q, rec.tau, train, rec.joints,
                                         noise_std)
    validation['training'] = metrics_dict(metrics, noise_std)
    cases['training'] = (paired, pred)
    model.metadata['validation'] = {k: v for k, v in validation.items()}
    model.metadata['robot_name'] = (config.robot_name if config else
                                    (stored or {}).get('robot_name'))
    out = args.out.expanduser()
    out.mkdir(parents=True, exist_ok=True)
    paths = {'model': model.save(out / 'model.yaml')}
    urdf_note = _write_urdf(model, urdf, out / 'identified.urdf')
    if urdf_note is None:
        paths['urdf'] = out / 'identified.urdf'
    else:
        progress.phase(f'identified URDF not written: {urdf_note}')
    sweeps = [s for pair in held + train for s in pair]
    held_starts = {s.start for pair in held for s in pair}
    summary = {
        'bag': str(bag), 'states_topic': rec.states_topic, 'joints': list(rec.joints),
        'urdf': str(urdf), 'config': str(args.config) if args.config else None,
        'gravity': gravity, 'n_samples': rec.n_samples,
        'duration_s': float(rec.t[-1] - rec.t[0]),
        'quality': rec.quality['loaded'], 'recorded_quality': rec.quality.get('recorded'),
        'segments': {'source': source, 'sweeps': sum(1 for m in markers
                                                     if m['phase'] == 'sweep'),
                     'pairs': len(held) + len(train)},
        'holdout': {'fraction': args.holdout, 'seed': args.seed, 'held_out_pairs': len(held),
                    'training_pairs': len(train),
                    'note': 'the model is fitted on the training pairs only; held_out '
                    'metrics are on pairs it never saw' if held else
                    'no pair held out: training metrics are in-sample'},
        'fit': model.metadata.get('fit'),
        'base_parameters': {'names': list(model.base.names),
                            'expressions': list(model.base.expressions()),
                            'values': model.beta.tolist(), 'std_errors':
                            model.std_errors.tolist()},
        'friction': {k: v.tolist() for k, v in model.friction.items()},
        'noise_std': noise_std.tolist(),
        'timings_s': {'read': read_s, 'fit': fit_s},
        'outputs': {k: str(v) for k, v in paths.items()},
    }
    validation['fit_summary'] = summary
    paths['validation'] = write_json(out / 'validation.json', validation)
    paths['data'] = _save_plot_data(out / 'fit_data.npz', rec, model, sweeps, held_starts,
                                    cases)
    return paths, validation


class _Row:
    def __init__(self, joint, **kw):
        self.joint = joint
        for k in ('max_torque', 'rmse', 'rmse_percent', 'mae', 'rho'):
            v = kw.get(k)
            setattr(self, k, float('nan') if v is None else v)


def _write_urdf(model, urdf, path):
    """Write the identified URDF; returns None, or why it was not written."""
    try:
        from arm_dyn_id.model.export import identified_urdf
    except ImportError as exc:
        return f'arm_dyn_id.model.export is not available ({exc})'
    try:
        text = identified_urdf(model, urdf)
    except ValueError as exc:
        return str(exc)
    path.write_text(text)
    return None


def _save_plot_data(path, rec, model, sweeps, held_starts, cases):
    """Decimated raw series and the averaged pairs, for the report's plots."""
    step = max(1, rec.n_samples // PLOT_SAMPLES)
    idx = np.arange(0, rec.n_samples, step)
    q = rec.q[idx]
    pred = model.gravity_torques(q)
    from arm_dyn_id.data.segmentation import smoothed_velocity
    v = smoothed_velocity(rec.t, rec.q)[idx] if rec.n_samples >= 3 else np.zeros_like(q)
    fc, fv = (np.nan_to_num(model.friction[k]) for k in ('coulomb', 'viscous'))
    moving = np.abs(v) > 2e-3
    pred_friction = pred + moving * (fc * np.sign(v) + fv * v)
    sw = np.array([[rec.t[s.start], rec.t[s.stop - 1], s.joint_index, s.direction,
                    s.start in held_starts] for s in sweeps], dtype=float).reshape(-1, 5)
    arrays = {'t': rec.t[idx], 'q': q, 'tau': rec.tau[idx], 'predicted': pred,
              'predicted_friction': pred_friction, 'sweeps': sw,
              'joints': np.array(rec.joints)}
    for case, (paired, predicted) in cases.items():
        keep = slice(None, None, max(1, paired.n_samples // PLOT_SAMPLES))
        paired = type(paired)(**{k: getattr(paired, k)[keep] for k in
                                 ('q', 'tau', 'friction', 'dq', 'moving_joint', 'pair_id')})
        predicted = predicted[keep]
        arrays[f'{case}_q'] = paired.q
        arrays[f'{case}_tau'] = paired.tau
        arrays[f'{case}_predicted'] = predicted
        arrays[f'{case}_joint'] = paired.moving_joint
        arrays[f'{case}_pair'] = paired.pair_id
    np.savez_compressed(path, **arrays)
    return path


def run(args):
    progress = Progress(quiet=args.quiet)
    paths, validation = fit_bag(args, progress)
    print(metrics_text(validation))
    if not args.no_report:
        from arm_dyn_id.validation.report import write_report
        progress.phase('writing the report')
        paths['report'] = write_report(args.out.expanduser())
    for name, path in paths.items():
        print(f'{name}: {path}')
    return 0
