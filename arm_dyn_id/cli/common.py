"""What the bag commands (fit, validate) share: reading options, progress, output.

Argument parsing and printing only; the fitting and validating logic is in
:mod:`arm_dyn_id.identification.pipeline`.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.data.bag_writer import json_default
from arm_dyn_id.errors import ConfigError, DataError


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
    """Read the bag named by ``args``, reporting what was read; (Recording, seconds)."""
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


class _Row:
    def __init__(self, joint, **kw):
        self.joint = joint
        for k in ('max_torque', 'rmse', 'rmse_percent', 'mae', 'rho'):
            v = kw.get(k)
            setattr(self, k, float('nan') if v is None else v)
