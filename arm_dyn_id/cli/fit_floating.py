"""``arm-dyn-id fit`` of a floating-base robot: the branch taken when --config has a
``floating_base`` section (docs/floating_base.md).

Reads the bag with :func:`arm_dyn_id.data.floating.read_floating_bag`, fits with
:func:`arm_dyn_id.identification.floating_fit.fit_floating` and writes into --out
``model.yaml`` (:class:`~arm_dyn_id.model.floating.FloatingIdentification`),
``identified.urdf``, ``validation.json``, ``fit_data.npz`` (the held-out series) and
``report.html``. Printing and file writing only; the work is in the lower wings.
"""

import shlex
import sys
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.config import file_sha256
from arm_dyn_id.cli.output import check_out, write_json
from arm_dyn_id.errors import ConfigError, DataError

#: a fit whose held-out error exceeds the nominal URDF's by this factor is refused
#: (exit 3) unless --force
REFUSE_RATIO = 1.25

#: fit options of the arm path that mean nothing here, with their defaults
_ARM_ONLY = (('urdf', None), ('torque_constants', None), ('effort', None),
             ('joints', None), ('joint_map', None), ('gravity_vector', None),
             ('states_topic', None), ('segments', 'auto'), ('recover', False),
             ('dynamics', 'auto'), ('methods', None), ('cutoff', None), ('gravity', None),
             ('holdout', 0.2))


def floating_config(config_path, bags=()):
    """The configuration when it describes a floating-base robot, else None: the
    --config file, or without one the configuration file a recorder bag names.

    Raises
    ------
    ConfigError
        A floating_base section that does not validate (one line naming the key), or a
        recorder bag of a floating-base robot whose configuration file is not found.
    """
    from arm_dyn_id.config import load_arm_config, read_parameter_file
    from arm_dyn_id.paths import resolve_data_file
    if config_path is None:
        from arm_dyn_id.data.bag_reader import read_stored_config
        bag = Path(bags[0]).expanduser() if bags else None
        stored = read_stored_config(bag) if bag is not None and bag.is_dir() else None
        if not stored or 'floating_base' not in stored:
            return None
        config_path = stored.get('config_file')
        if not config_path or not Path(config_path).is_file():
            raise ConfigError(f'{bag} was recorded from a floating-base robot whose '
                              f'configuration file {config_path or "(none named)"} is not '
                              'here: pass it with --config')
    resolved = resolve_data_file(config_path, 'config')
    if 'floating_base' not in read_parameter_file(resolved):
        return None
    return load_arm_config(resolved, need_limits=False, need_torque_constants=False)


def _check_options(args):
    for name, default in _ARM_ONLY:
        if getattr(args, name, default) != default:
            option = '--' + name.replace('_', '-')
            hint = {'methods': ' (use --method)',
                    'holdout': ' (the last 25 % of the bag is held out, or --validate BAG2)'
                    }.get(name, '')
            raise ConfigError(f'{option} does not apply to a floating-base robot (the '
                              f'configuration has floating_base){hint}')
    if len(args.bags) != 1:
        raise ConfigError(f'a floating-base fit reads one bag, got {len(args.bags)}; '
                          'give a second recording to score on with --validate')


def _read(path, config, progress, what):
    from arm_dyn_id.data.floating import read_floating_bag
    if not path.exists():
        raise DataError(f'{what} {path} does not exist')
    progress.phase(f'reading {path}')
    bar = progress.bar('reading')
    data = read_floating_bag(path, config, progress=bar)
    if bar is not None:
        bar.finish()
    span = float(data.t[-1] - data.t[0])
    progress.phase(f'read {len(data.t)} samples of {data.q.shape[1]} joints ({span:.1f} s)')
    return data


def run_floating(args, config):
    """``arm-dyn-id fit`` of a floating-base robot. Returns the exit code."""
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.identification.floating_fit import fit_floating
    from arm_dyn_id.identification.floating_fit import ESTIMATORS
    progress = Progress(quiet=args.quiet)
    _check_options(args)
    kind = config.floating_base.method
    if args.method is not None and args.method not in ESTIMATORS[kind]:
        raise ConfigError(f'--method {args.method!r} does not apply to the {kind} method of '
                          f'{config.source}; choose from {", ".join(ESTIMATORS[kind])}')
    bag = args.bags[0].expanduser()
    validate = args.validate.expanduser() if args.validate else None
    out = check_out(args.out, [bag] + ([validate] if validate else []))
    start = time.perf_counter()
    data = _read(bag, config, progress, 'bag')
    held = _read(validate, config, progress, 'validation bag') if validate else None
    read_s = time.perf_counter() - start
    res = fit_floating(config, data, method=args.method, validate=held,
                       rng=np.random.default_rng(args.seed), progress=progress.phase)
    ident = res.identification
    ident.provenance.update(bag=str(bag), validate=str(validate) if validate else None,
                            config=str(config.source),
                            command=shlex.join(['arm-dyn-id'] + sys.argv[1:]))
    verdict = _verdict(res.metrics)
    if verdict and not args.force:
        print(f'arm-dyn-id fit: fit refused, {verdict} (nothing written; --force writes the '
              'model marked rejected)', file=sys.stderr)
        return 3
    if verdict:
        progress.warn(f'the fit is implausible ({verdict}); written because of --force, '
                      'marked rejected')
        ident.metrics['rejected'] = res.metrics['rejected'] = verdict
    out.mkdir(parents=True, exist_ok=True)
    paths = {'model': ident.save(out / 'model.yaml')}
    urdf = out / 'identified.urdf'
    urdf.write_text(ident.model().identified_urdf(ident.phi))
    paths['urdf'] = urdf
    summary = dict(res.summary, bag=str(bag), validate=str(validate) if validate else None,
                   config=str(config.source), urdf=str(config.urdf),
                   robot_name=ident.robot_name, n_samples=len(data.t),
                   duration_s=float(data.t[-1] - data.t[0]),
                   timings_s={'read': read_s, 'fit': res.seconds},
                   outputs={k: str(v) for k, v in paths.items()},
                   model_sha256=file_sha256(paths['model']))
    paths['validation'] = write_json(out / 'validation.json',
                                     {'floating': res.metrics, 'fit_summary': summary})
    h = res.held_out
    np.savez_compressed(out / 'fit_data.npz', dynamics=np.array('floating'),
                        kind=np.array(h['kind']), t=h['t'], measured=h['measured'],
                        identified=h['identified'], nominal=h['nominal'],
                        labels=np.array(h['labels']))
    paths['data'] = out / 'fit_data.npz'
    print(summary_text(res, ident.model()))
    if not args.no_report:
        from arm_dyn_id.validation.report import write_report
        progress.phase('writing the report')
        paths['report'] = write_report(out)
    for name, path in paths.items():
        print(f'{name}: {path}')
    return 0


def _verdict(metrics):
    """Why the fit is implausible (held-out worse than the nominal URDF), or None."""
    for key, what in (('zmp_vs_nominal', 'ZMP'), ('linear_vs_nominal', 'linear momentum'),
                      ('angular_vs_nominal', 'angular momentum')):
        ratio = metrics.get(key)
        if ratio is not None and ratio > REFUSE_RATIO:
            return (f'on held-out data the identified model predicts the {what} '
                    f'{ratio:.2f} x worse than the nominal URDF')
    return None


def _groups(names):
    """Unknown names grouped by body ('<body>.<param>'), or one group of their own."""
    groups = {}
    for i, name in enumerate(names):
        body, _, param = name.rpartition('.')
        groups.setdefault(body or '', []).append((i, param or name))
    return groups


def summary_text(res, model):
    """The one-screen summary of a floating-base fit."""
    s, m, ident = res.summary, res.metrics, res.identification
    lines = [f'floating-base fit of {ident.robot_name}: {ident.method} method, '
             f'{ident.estimator} estimator, {s["samples_fitted"]} samples fitted, '
             f'{m["samples"]} held out ({m["held_out"]})',
             f'total mass {s["identified_total_mass"]:.6g} kg (configured '
             f'{s["total_mass"]:.6g} kg)']
    names, values, nominal = s['unknowns'], s['values'], s['nominal_values']
    excited = s['identified']
    lines.append('unknowns (identified, nominal URDF; * = not excited, kept nominal):')
    for body, items in _groups(names).items():
        cells = [f'{p} {values[i]:.4g}{"*" if not excited[i] else ""} ({nominal[i]:.4g})'
                 for i, p in items]
        lines.append(f'  {body + ": " if body else ""}' + '  '.join(cells))
    if res.unexcited:
        scaled = ', masses moved onto the total mass with the others' \
            if ident.method == 'zmp' else ''
        lines.append(f'not excited by this motion (kept at the nominal value{scaled}): '
                     f'{", ".join(res.unexcited)}')
    else:
        lines.append('every unknown was excited')
    odd = [f'{n} {values[i]:.3g}' for i, n in enumerate(names)
           if excited[i] and values[i] < 0 and n.rpartition('.')[2].startswith('I')]
    if odd:
        lines.append(f'not physical alone: {", ".join(odd)} (an excited unknown carries the '
                     'combination it forms with the unexcited ones: validation.json '
                     'fit_summary.combinations)')
    if ident.method == 'momentum':
        lines.append(f'held-out momentum RMS: linear {m["linear_momentum_rms"]:.4g} N·s '
                     f'(nominal URDF {m["nominal_linear_momentum_rms"]:.4g}), angular '
                     f'{m["angular_momentum_rms"]:.4g} N·m·s (nominal '
                     f'{m["nominal_angular_momentum_rms"]:.4g})')
        lines.append('  per axis: ' + '  '.join(f'{a} {v:.3g}'
                                                for a, v in m['momentum_rms'].items()))
    else:
        lines.append(f'held-out ZMP RMS: {m["zmp_rms_mm"]:.3g} mm (nominal URDF '
                     f'{m["nominal_zmp_rms_mm"]:.3g} mm; x {m["zmp_rms_mm_per_axis"]["x"]:.3g}, '
                     f'y {m["zmp_rms_mm_per_axis"]["y"]:.3g} mm)')
    return '\n'.join(lines)


def add_arguments(parser):
    """The options only a floating-base fit reads (added to ``fit``'s parser)."""
    parser.add_argument('--method', metavar='ESTIMATOR',
                        help='floating-base robots: momentum method linear (default), ga '
                        '(seed 002\'s improved GA) or ga-plain; zmp method newton (default) '
                        'or linear')
    parser.add_argument('--validate', type=Path, metavar='BAG2',
                        help='floating-base robots: score the fit on this second recording '
                        'instead of the last 25 %% of BAG')
