"""The node's momentum-observer residual and contact flag, offline, on any bag.

Every bag is read like `arm-dyn-id fit` reads it (effort as current with the torque
constants, or --effort torque) and its samples go one by one through the identifier
node's own ResidualStream (arm_dyn_id.service.dynamics): the same observer, the same
contact band, persistence and holding-friction tracker (arm_dyn_id.service.contact,
docs/contact.md). Each bag is a stream of its own. Prints the contact episodes (start,
end, joints, peak external torque) and per-joint residual statistics; --json writes them,
--plot draws the residual, the band and the episodes (one PNG per bag: PATH, PATH-2, ...).

The contact thresholds are read from the model folder (<model dir>/contact_thresholds.yaml,
what the node uses by default) or --thresholds PATH; without either, no contact flag.

--calibrate: the bags are recordings WITHOUT contact (free motion, holds); the thresholds
are derived from them for a false-alarm target (per joint and state bin, --margin times
the --quantile of the residual that persists --persistence seconds) and written to the
model folder (or --out PATH). Then run the command on other recordings to check them.

The model goes through the model gate (full-dynamics models only).

examples:
  arm-dyn-id residual fit/model.yaml free_1/ free_2/ --urdf arm.urdf --torque-constants ... \\
      --calibrate
  arm-dyn-id residual fit/model.yaml push/ --urdf arm.urdf --torque-constants ... \\
      --json push.json --plot push.png
"""

from pathlib import Path

import numpy as np

HELP = 'the node\'s residual and contact flag on bags; --calibrate derives the thresholds'


def add_arguments(parser):
    from arm_dyn_id.cli.options import add_data_arguments
    from arm_dyn_id.service import contact
    parser.add_argument('model', type=Path, help='model.yaml of a full-dynamics fit')
    add_data_arguments(parser, several=True)
    parser.add_argument('--gravity', type=float,
                        help='gravity magnitude (m/s²) the bags were recorded at (default: the '
                        'model\'s; the node\'s gravity parameter)')
    parser.add_argument('--gains', default='25', metavar='K',
                        help='observer bandwidth K (1/s), one or one per joint (default 25, '
                        'the node\'s observer_gains; a thresholds file says its own)')
    parser.add_argument('--thresholds', type=Path, metavar='PATH',
                        help='contact thresholds file (default: <model dir>/'
                        f'{contact.FILE_NAME} when it exists)')
    parser.add_argument('--persistence', type=float, metavar='S',
                        help='seconds over the band before contact is flagged (default '
                        f'{contact.PERSISTENCE:g}, or the thresholds file\'s)')
    parser.add_argument('--no-holding', action='store_true',
                        help='no holding-friction tracker (the raw observer residual)')
    parser.add_argument('--max-gap', type=float, default=0.05, metavar='S',
                        help='a stamp step longer than this restarts the observer (default '
                        '0.05, the node\'s observer_max_gap)')
    parser.add_argument('--velocity-cutoff', type=float, default=20.0, metavar='HZ',
                        help='cut-off of the velocity estimate when a message has none '
                        '(default 20, the node\'s)')
    parser.add_argument('--calibrate', action='store_true',
                        help='the bags hold no contact: derive the thresholds and write them')
    parser.add_argument('--quantile', type=float, default=contact.QUANTILE,
                        help='calibration: the false-alarm target as a quantile of the '
                        f'persisted residual per joint and state bin (default {contact.QUANTILE})')
    parser.add_argument('--margin', type=float, default=contact.MARGIN,
                        help=f'calibration: factor over that quantile (default {contact.MARGIN})')
    parser.add_argument('--holding-factor', type=float, default=contact.HOLDING_FACTOR,
                        help='calibration: holding offset bound = this x the model\'s static '
                        f'friction (default {contact.HOLDING_FACTOR})')
    parser.add_argument('--out', type=Path, metavar='PATH',
                        help='calibration: where to write the thresholds (default the model '
                        'folder\'s file)')
    parser.add_argument('--allow-contacts', action='store_true',
                        help='calibration: calibrate even on recordings that hold contact '
                        'episodes (refused by default: bands wide enough to pass them)')
    parser.add_argument('--json', type=Path, metavar='PATH', help='write the results as JSON')
    parser.add_argument('--plot', type=Path, metavar='PATH', help='draw the residual (PNG)')


def run(args):
    from arm_dyn_id.cli.arm import check_level, model_for_bags
    from arm_dyn_id.cli.bags import read
    from arm_dyn_id.cli.output import write_json
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.errors import DataError
    from arm_dyn_id.service import contact
    from arm_dyn_id.service.dynamics import ServedDynamics
    progress = Progress(quiet=args.quiet)
    bags = [b.expanduser() for b in args.bags]
    model, stored, config, conversion = model_for_bags(args, bags, kinds=('full',))
    if args.gravity is not None and not (np.isfinite(args.gravity) and args.gravity > 0):
        from arm_dyn_id.errors import ConfigError
        raise ConfigError(f'--gravity {args.gravity:g} must be a positive magnitude (m/s²)')
    served = ServedDynamics(model, gravity=args.gravity)
    if not served.fast.exact:
        raise DataError(f'model {args.model} has no pinocchio equivalent (a massless body '
                        'with a first moment): the node serves no residual for it')
    n = len(served.joints)
    path = args.thresholds.expanduser() if args.thresholds else \
        contact.thresholds_file(args.model.expanduser())
    thresholds = None
    if not args.calibrate and (args.thresholds or path.is_file()):
        thresholds = contact.ContactThresholds.load(path, joints=served.joints)
    gains = _gains(args.gains, n, thresholds)
    theirs = thresholds.calibration.get('model_sha256') if thresholds is not None else None
    if theirs and theirs != contact.model_fingerprint(model) and not args.force:
        from arm_dyn_id.errors import ConfigError
        raise ConfigError(f'contact thresholds {path} were calibrated with another model than '
                          f'{args.model}: calibrate again (--calibrate), or --force')
    settings = _settings(args, thresholds, model, n, contact, served.joints)
    recs = []
    for bag in bags:
        rec, _ = read(args, conversion, progress, bag)
        # a torque read as current (or other constants) is a residual of its own size
        check_level(model, args.model, rec, bag, args.effort or 'current', conversion,
                    args.force, gravity=served.fast.gravity)
        recs.append(rec)
    if args.calibrate:
        return _calibrate(args, served, model, gains, settings, recs, bags, progress)
    if thresholds is None:
        progress.phase(f'no contact thresholds ({path} does not exist): residual only; '
                       'derive them with --calibrate on recordings without contact')
    else:
        thresholds = settings
        progress.phase(f'contact thresholds: {path} (persistence {settings.persistence:g} s, '
                       'holding tracker ' + ('on' if np.any(settings.holding_bounds > 0)
                                             else 'off') + ')')
    results = []
    for k, (bag, rec) in enumerate(zip(bags, recs)):
        progress.phase(f'residual of {bag} ({rec.n_samples} samples)')
        out = analyse(served, gains, thresholds, rec, args.max_gap, args.velocity_cutoff)
        out['bag'] = str(bag)
        results.append(out)
        print(text(out, served.joints))
        if args.plot:
            target = args.plot.expanduser()
            if k:
                target = target.with_name(f'{target.stem}-{k + 1}{target.suffix or ".png"}')
            print(f'plot: {plot(target, rec, out, served.joints)}')
    if args.json:
        doc = {'model': str(args.model), 'thresholds': None if thresholds is None else
               {'path': str(path), **thresholds.to_dict()},
               'observer_gains': gains.tolist(), 'bags': [_public(r) for r in results]}
        print(f'json: {write_json(args.json.expanduser(), doc)}')
    if thresholds is None:
        return 0
    total = sum(len(r['episodes']) for r in results)
    print(f'contact episodes: {total} in {len(results)} bag(s)')
    return 0


def _gains(text, n, thresholds):
    from arm_dyn_id.cli.options import parse_constants
    values = parse_constants(str(text), option='--gains', unit='1/s')
    values = np.full(n, values[0]) if len(values) == 1 else np.asarray(values)
    if values.shape != (n,) or np.any(values <= 0):
        from arm_dyn_id.errors import ConfigError
        raise ConfigError(f'--gains {text}: give one K > 0 or one per joint ({n})')
    if thresholds is not None:
        stored = thresholds.calibration.get('observer_gains')
        if stored is not None and not np.allclose(stored, values):
            from arm_dyn_id.errors import ConfigError
            raise ConfigError(f'the thresholds were calibrated with observer gains {stored}, '
                              f'not {values.tolist()}: pass --gains as calibrated, or '
                              'calibrate again')
    return values


def _settings(args, thresholds, model, n, contact, joints):
    """The thresholds in use (or, calibrating, the settings to calibrate with)."""
    if thresholds is None:
        inf = np.full(n, np.inf)
        thresholds = contact.ContactThresholds(
            tuple(joints), inf, inf, np.zeros(n), np.zeros(n),
            holding_bounds=contact.holding_bounds(model, args.holding_factor))
    changes = {}
    if args.persistence is not None:
        changes['persistence'] = args.persistence
    if args.no_holding:
        changes['holding_bounds'] = np.zeros(n)
    return thresholds.with_settings(**changes) if changes else thresholds


#: s left out on either side of an episode when the recordings' own bands are derived.
EPISODE_PAD = 1.0
#: s: a piece of a recording shorter than this between episodes is left out.
MIN_PIECE = 2.0


def _pieces(rec, episodes=()):
    """(t, q, q̇, τ) of the recording outside the episodes (each ± EPISODE_PAD s), pieces
    of at least MIN_PIECE s."""
    keep = np.ones(len(rec.t), dtype=bool)
    for e in episodes:
        keep &= ~((rec.t >= e['start'] - EPISODE_PAD) & (rec.t <= e['end'] + EPISODE_PAD))
    dq = _velocity(rec)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], keep.astype(int), [0]])))
    out = []
    for a, b in zip(edges[::2], edges[1::2]):
        if rec.t[b - 1] - rec.t[a] >= MIN_PIECE:
            out.append((rec.t[a:b], rec.q[a:b], None if dq is None else dq[a:b],
                        rec.tau[a:b]))
    return out


def _thresholds(args, served, model, gains, settings, pieces, sources):
    """contact.calibrate of the residual of ``pieces`` ((t, q, q̇, τ) each)."""
    from arm_dyn_id.service import contact
    from arm_dyn_id.service.dynamics import calibration_run
    runs = [calibration_run(served, gains, t, q, dq, tau, settings, args.max_gap,
                            args.velocity_cutoff, source=source)
            for (t, q, dq, tau), source in zip(pieces, sources)]
    keep = ('still_velocity', 'acceleration_cutoff_hz', 'breakaway_velocity', 'holding_time',
            'release_time', 'settle_time', 'max_freeze')
    return contact.calibrate(runs, served.joints, holding_bounds=settings.holding_bounds,
                             quantile=args.quantile, margin=args.margin,
                             persistence=settings.persistence,
                             calibration={'observer_gains': gains.tolist(),
                                          'model': str(args.model),
                                          'model_sha256': contact.model_fingerprint(model)},
                             **{k: getattr(settings, k) for k in keep})


def _contacts_in(args, served, model, gains, settings, recs, bags, progress):
    """Refuse calibration recordings that hold contacts. The thresholds in use (those a node
    would use: the model folder's file, of this model and these gains) find the candidate
    episodes; bands derived from the recordings without them (± EPISODE_PAD s) judge
    them: an episode those still flag stands out of the recording's own residual, a
    contact; one they cover was the thresholds in use being too tight for the arm (why
    one calibrates). Calibrating on contacts gives bands wide enough to pass them, which
    the node then uses. DataError unless --allow-contacts."""
    from arm_dyn_id.errors import DataError
    from arm_dyn_id.service import contact
    if args.allow_contacts:
        return
    old, why = contact.calibrated_thresholds(args.model.expanduser(), served.joints, gains,
                                             model)
    if old is None:
        progress.phase(f'calibration recordings not checked for contacts ({why})')
        return
    found = [(bag, rec, analyse(served, gains, old, rec, args.max_gap,
                                args.velocity_cutoff)) for bag, rec in zip(bags, recs)]
    if not any(r['episodes'] for _, _, r in found):
        return
    pieces, sources = [], []
    for bag, rec, r in found:
        for piece in _pieces(rec, r['episodes']):
            pieces.append(piece)
            sources.append(str(bag))
    if not pieces:
        progress.phase('the thresholds in use flag nearly all of the calibration recordings: '
                       'too tight for this arm, not contacts')
        return
    own = _thresholds(args, served, model, gains, settings, pieces, sources)
    for bag, rec, r in found:
        if not r['episodes']:
            continue
        again = analyse(served, gains, own, rec, args.max_gap, args.velocity_cutoff)
        kept = [e for e in again['episodes'] if any(
            e['start'] <= f['end'] + EPISODE_PAD and e['end'] >= f['start'] - EPISODE_PAD
            for f in r['episodes'])]
        if kept:
            t0 = again['t0']
            where = '; '.join(f'{e["start"] - t0:.2f}-{e["end"] - t0:.2f} s, peak '
                              f'{e["peak"]:.3g} N·m at {e["peak_joint"]}' for e in kept[:4])
            raise DataError(
                f'bag {bag} holds {len(kept)} contact episode(s): {where}'
                f'{"; ..." if len(kept) > 4 else ""} (flagged by the thresholds in use and '
                'by bands from the recordings without them). Thresholds calibrated on '
                'contacts are wide enough to pass them' +
                ('' if args.out else ', and would replace the ones in use') + ': calibrate '
                'on recordings without contact (--allow-contacts: calibrate anyway)')
        progress.phase(f'{bag}: {len(r["episodes"])} episode(s) by the thresholds in use are '
                       'within the recording\'s own residual (too tight, not contacts)')


def _calibrate(args, served, model, gains, settings, recs, bags, progress):
    from arm_dyn_id.service import contact
    _contacts_in(args, served, model, gains, settings, recs, bags, progress)
    progress.phase('residual of the bags (no contact) for the thresholds')
    th = _thresholds(args, served, model, gains, settings, [_pieces_all(r) for r in recs],
                     [str(b) for b in bags])
    out = (args.out or contact.thresholds_file(args.model)).expanduser()
    th.save(out)
    w = max(16, max(len(j) for j in th.joints) + 2)
    rows = [f'{"joint":<{w}}{"standstill":>11}{"base":>9}{"per q̇":>9}{"per q̈":>9}'
            f'{"holding":>9}']
    for i, j in enumerate(th.joints):
        rows.append(f'{j:<{w}}{th.standstill[i]:>11.3g}{th.base[i]:>9.3g}'
                    f'{th.per_velocity[i]:>9.3g}{th.per_acceleration[i]:>9.3g}'
                    f'{th.holding_bounds[i]:>9.3g}')
    print('contact thresholds (N·m; band in motion = base + per q̇·‖q̇‖ + per q̈·‖q̈‖):')
    print('\n'.join(rows))
    print(f'from {th.calibration["samples"]} samples of {len(recs)} recording(s): '
          f'{args.margin:g} x the {args.quantile:g} quantile, persistence '
          f'{th.persistence:g} s')
    print(f'thresholds: {out}')
    if th.calibration.get('note'):
        progress.warn(th.calibration['note'])
    if args.json:
        from arm_dyn_id.cli.output import write_json
        print(f'json: {write_json(args.json.expanduser(), {"thresholds": th.to_dict()})}')
    return 0


def _pieces_all(rec):
    """(t, q, q̇, τ) of the whole recording."""
    return rec.t, rec.q, _velocity(rec), rec.tau


def _velocity(rec):
    dq = rec.dq
    return None if dq is None or not np.isfinite(dq).any() else dq


def analyse(served, gains, thresholds, rec, max_gap=0.05, velocity_cutoff_hz=20.0):
    """One recording through a fresh ResidualStream: per-sample arrays, episodes, statistics.

    Returns
    -------
    dict
        ``series`` (what :func:`run_stream` returns), ``episodes``, ``statistics``,
        ``samples``, ``duration`` (s), ``restarts``.
    """
    from arm_dyn_id.service import contact
    from arm_dyn_id.service.dynamics import ResidualStream, run_stream
    stream = ResidualStream(served, gains, thresholds, max_gap, velocity_cutoff_hz)
    series = run_stream(stream, rec.t, rec.q, _velocity(rec), rec.tau)
    eps = [] if thresholds is None else contact.episodes(
        rec.t, series['contact'], series['residual'], series.get('flagged'), served.joints)
    still = series.get('standstill')
    return {'series': series, 'episodes': eps,
            'statistics': contact.residual_statistics(series['residual'], served.joints,
                                                      still),
            'samples': int(rec.n_samples), 'duration': float(rec.t[-1] - rec.t[0]),
            'restarts': int(stream.observer.restarts),
            'persistence': None if thresholds is None else thresholds.persistence,
            't0': float(rec.t[0])}


def _public(result):
    return {k: v for k, v in result.items() if k != 'series'}


def text(result, joints):
    """The episodes and statistics of one bag, as printed."""
    t0 = result['t0']
    lines = [f'{result["bag"]}: {result["samples"]} samples, {result["duration"]:.1f} s, '
             f'{result["restarts"]} observer restart(s)']
    if result['persistence'] is not None:
        lines.append(f'contact episodes: {len(result["episodes"])} (times from the first '
                     f'sample; each flagged {result["persistence"]:g} s after its crossing, '
                     'the persistence)')
        for e in result['episodes']:
            lines.append(f'  {e["start"] - t0:8.3f} .. {e["end"] - t0:8.3f} s  '
                         f'peak {e["peak"]:.3g} N·m at {e["peak_joint"]}  '
                         f'joints {", ".join(e["joints"])}')
    w = max(16, max(len(j) for j in joints) + 2)
    lines.append(f'{"residual (N·m)":<{w}}{"rms":>9}{"p99 |r|":>9}{"max |r|":>9}{"mean":>9}'
                 f'{"still rms":>10}')
    for j in joints:
        s = result['statistics'][j]
        still = '-' if s['standstill_rms'] is None else f'{s["standstill_rms"]:.3g}'
        lines.append(f'{j:<{w}}{s["rms"]:>9.3g}{s["p99_abs"]:>9.3g}{s["max_abs"]:>9.3g}'
                     f'{s["mean"]:>9.3g}{still:>10}')
    return '\n'.join(lines)


def plot(path, rec, result, joints):
    """The residual per joint, its band and the contact episodes; returns the path."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    series = result['series']
    t = rec.t - rec.t[0]
    n = len(joints)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(10, 1.6 * n + 1))
    for i, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(t, series['residual'][:, i], lw=0.7, label='external torque')
        if 'band' in series:
            band = np.where(np.isfinite(series['band'][:, i]), series['band'][:, i], np.nan)
            ax.plot(t, band, 'k:', lw=0.6, label='band')
            ax.plot(t, -band, 'k:', lw=0.6)
        for e in result['episodes']:
            ax.axvspan(e['start'] - rec.t[0], e['end'] - rec.t[0], color='r', alpha=0.2)
        ax.set_ylabel(f'{joints[i]}\nN·m', fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel('s')
    np.atleast_1d(axes)[0].legend(loc='upper right', fontsize=7)
    fig.suptitle(f'{result["bag"]}: {len(result["episodes"])} contact episode(s)', fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
