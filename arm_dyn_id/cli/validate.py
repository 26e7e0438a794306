"""Metrics of a fitted model on another bag (another payload, another g, another day).

The bag is read like `arm-dyn-id fit` reads it. A gravity model is scored on
forward/backward pairs: every pair is averaged (friction cancels, seed 000 eq. 5)
and compared with the model's G(q). A full-dynamics model is scored on ANY
trajectory: q and τ go through the model's own filter (its stated cut-off), q̇ and
q̈ are taken from the filtered q, and the measured torque (filtered, or raw with
--against raw) is compared with the model's inverse dynamics plus friction.
Nothing is fitted, so all of it is held-out data. Prints the per-joint table
(max |τ|, RMSE, RMSE %, MAE, ρ); --json writes {case: {joint: metrics}} plus a
fit_summary of what was read (the same keys for both kinds of model).

The model goes through the model gate (arm_dyn_id.model.gate, docs/offline.md
"What a model must pass"): an unreadable, corrupt, future-version, non-finite,
implausible or floating-base model file is refused in one line, and so is a
model marked rejected (--force scores it anyway). The bag is checked to be of
the model's robot: the joints, and the URDF the model was fitted with against
the URDF given, however it is given (--urdf, or the --config's urdf), and
against the URDF a recorder bag was recorded with; a model of another robot is
refused, not scored (--force scores it anyway).

Verdict: the last line says PASS or FAIL. A joint is judged when its measured
torque carries signal (its largest |τ| at least 10x its noise σ); it passes
when its RMSE is at most --max-rmse-percent % of its largest torque (default
25) and its correlation ρ is at least --min-rho (default 0.5), the thresholds
`arm-dyn-id fit` refuses a fit by on held-out data. Exit codes: 0 every judged
joint passes; 3 a joint fails (the line names it and by how much; --json is
still written); 2 a usage or input error, a refused model or bag (one line).

examples:
  arm-dyn-id validate fit/model.yaml other_day_bag/ --urdf arm.urdf --torque-constants 8.2,...
  arm-dyn-id validate fit/model.yaml other_day_bag/ --config my_arm.yaml
  arm-dyn-id validate fit/model.yaml moon_bag/ --config my_arm.yaml --gravity 1.63 --json m.json
  arm-dyn-id validate fit/model.yaml ci_bag/ --config my_arm.yaml --max-rmse-percent 10
"""

from pathlib import Path

import numpy as np

HELP = 'metrics of a fitted model on another bag, and a pass / fail verdict'
#: A joint is judged when its largest |τ| is at least this many times its noise σ.
SIGNAL_NOISE = 10.0
#: Its ρ is judged when its torque's standard deviation is at least this many times its
#: noise σ: a joint held still varies by its noise only, and ρ is then the noise's.
VARY_NOISE = 3.0
#: rad: a joint whose position spans less than this over the recording was held still
STILL_RANGE = 0.02
#: What a joint held still carries (the verdict says it where such a joint fails)
STILL = ('a joint held still holds its friction at rest (stiction) and drive offsets, '
         'which a velocity-driven friction model does not predict: judge it on a recording '
         'where it moves')
#: What such a joint carries
PUSHED = ('a joint held still with an error beyond the friction it may hold carries a force '
          'from outside the model: a push or contact, a load the model lacks (validate on '
          'free motion; arm-dyn-id residual finds contacts, arm-dyn-id payload a load)')


def add_arguments(parser):
    from arm_dyn_id.cli.options import add_data_arguments
    parser.add_argument('model', type=Path, help='model.yaml written by arm-dyn-id fit')
    add_data_arguments(parser, several=True)
    parser.add_argument('--gravity', type=float,
                        help='gravity magnitude (m/s²) the bag was recorded at (default: the '
                        'model\'s)')
    parser.add_argument('--against', choices=('filtered', 'raw'), default='filtered',
                        help='full models: compare with the torque filtered like the fit '
                        '(default) or the raw one')
    parser.add_argument('--json', type=Path, metavar='PATH', help='write the metrics as JSON')
    parser.add_argument('--max-rmse-percent', type=float, metavar='P', default=None,
                        help='verdict: a judged joint fails when its RMSE exceeds P %% of its '
                        'largest torque (default 25, as fit\'s held-out check); exit 3')
    parser.add_argument('--min-rho', type=float, metavar='R', default=None,
                        help='verdict: a judged joint fails when its correlation ρ is below R '
                        '(default 0.5, as fit\'s held-out check); exit 3')


def run(args):
    from arm_dyn_id.cli import EXIT_REFUSED
    from arm_dyn_id.cli.arm import check_level, model_for_bags, model_on_recording
    from arm_dyn_id.cli.bags import read_all
    from arm_dyn_id.cli.options import check_gravity_options
    from arm_dyn_id.cli.output import metrics_text, write_json
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.errors import DataError
    from arm_dyn_id.identification.pairing import pair_sweeps, sweeps_from_markers
    from arm_dyn_id.identification.pipeline import (choose_markers, metrics_dict,
                                                    noise_estimate, pair_metrics)
    progress = Progress(quiet=args.quiet)
    magnitude, direction = check_gravity_options(args)
    thresholds = _thresholds(args)
    bags = [b.expanduser() for b in args.bags]
    model, stored, config, conversion = model_for_bags(args, bags, use='scored')
    rec, _ = read_all(args, conversion, progress, bags)
    gravity = model_on_recording(model, rec, magnitude, direction, 'the configuration')
    # a torque read as current (another unit, a flipped sign) is a scale, not a fit error
    check_level(model, args.model, rec, ', '.join(str(b) for b in bags),
                getattr(args, 'effort', None) or 'current', conversion, args.force, 'scored')
    noise = noise_estimate(rec.tau)
    if model.dynamics == 'full':
        metrics, segments = _full_metrics(model, rec, args.against, noise, progress)
    else:
        markers, source = choose_markers(rec.t, rec.q, rec.joints, rec.markers, args.segments,
                                         where=f'bag {rec.source}', phase=progress.phase)
        pairs = pair_sweeps(sweeps_from_markers(rec.t, markers), rec.q)
        if not pairs:
            raise DataError(f'bag {rec.source} has no forward/backward sweep pair to validate '
                            'on (a gravity model is scored on sweep pairs; a full-dynamics '
                            'model scores any trajectory)')
        scored, _, _ = pair_metrics(model, rec.t, rec.q, rec.tau, pairs, rec.joints, noise)
        metrics = metrics_dict(scored, noise)
        segments = {'source': source, 'pairs': len(pairs)}
    verdict = judge(metrics, **thresholds)
    from arm_dyn_id.identification.payload import arm_model_error
    verdict['beyond_held_out'] = beyond_held_out(metrics, dict(zip(
        model.joint_names, arm_model_error(model))), verdict['judged'])
    bag = bags[0]
    case = f'{bag.name}_g{gravity:g}'
    result = {case: metrics, 'fit_summary': {
        'model': str(args.model), 'dynamics': model.dynamics, 'bag': str(bag),
        'bags': [str(b) for b in bags], 'states_topic': rec.states_topic,
        'gravity': gravity, 'gravity_vector': model.robot.gravity_vector.tolist(),
        'model_gravity': model.fit_gravity, 'n_samples': rec.n_samples,
        'segments': segments,
        'quality': rec.quality['loaded'], 'noise_std': np.asarray(noise).tolist(),
        'warnings': model.metadata.get('warnings', []),
        'gate': model.metadata.get('gate'), 'verdict': verdict}}
    for joint, text in verdict['beyond_held_out'].items():
        progress.phase(f'warning: {joint}: {text}')
    print(metrics_text(result))
    if args.json:
        print(f'json: {write_json(args.json.expanduser(), result)}')
    print(verdict['line'])
    if not verdict['passed']:
        import sys
        print(f'arm-dyn-id validate: {verdict["line"]}', file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _thresholds(args):
    """The verdict's thresholds from the options (defaults: fit's held-out refusals)."""
    from arm_dyn_id.errors import ConfigError
    from arm_dyn_id.validation.plausibility import MAX_RMSE_PERCENT, MIN_RHO
    percent = MAX_RMSE_PERCENT if args.max_rmse_percent is None else args.max_rmse_percent
    rho = MIN_RHO if args.min_rho is None else args.min_rho
    if not (np.isfinite(percent) and percent >= 0):
        raise ConfigError(f'--max-rmse-percent {percent:g}: give a percentage >= 0')
    if not (np.isfinite(rho) and -1 <= rho <= 1):
        raise ConfigError(f'--min-rho {rho:g}: give a correlation in [-1, 1]')
    return {'max_rmse_percent': float(percent), 'min_rho': float(rho)}


#: A judged joint whose RMSE here is more than this many times the model's own held-out
#: RMSE is warned of, whatever the verdict: the model was right on its own data and is not
#: on this one (a load it lacks, another or a changed arm, another effort reading)
BEYOND_HELD_OUT = 5.0


def beyond_held_out(metrics, own, judged, factor=BEYOND_HELD_OUT):
    """{joint: text} for the judged joints whose RMSE exceeds ``factor`` x the model's own
    held-out RMSE ``own`` ({joint: N·m}, NaN unknown) and 3x their noise (not the joints
    held still: their friction at rest is said by the verdict)."""
    out = {}
    for joint in judged:
        m, base = metrics.get(joint) or {}, own.get(joint, np.nan)
        rmse, sigma = m.get('rmse'), m.get('noise_std') or 0.0
        moved = m.get('motion_range')
        if rmse is None or not np.isfinite(base) or not base > 0 or \
                (moved is not None and moved < STILL_RANGE):
            continue
        if rmse > factor * base and rmse > 3.0 * sigma:
            out[joint] = (f'RMSE {rmse:.3g} N·m is {rmse / base:.3g}x the model\'s own held-out '
                          f'RMSE ({base:.3g} N·m): right on its own data, not on this one: a '
                          'load the model lacks (arm-dyn-id payload), a changed or another arm, '
                          'or another effort reading?')
    return out


def judge(metrics, max_rmse_percent, min_rho):
    """The pass / fail verdict of per-joint metrics.

    Parameters
    ----------
    metrics : dict
        ``{joint: {max_torque, rmse, rmse_percent, rho, noise_std, ...}}`` (N·m);
        ``motion_range`` (rad) and ``holding_friction`` (N·m) tell a joint held still
        with stiction from one held against a force.
    max_rmse_percent : float
        A judged joint fails above this RMSE (% of its largest |τ|).
    min_rho : float
        A judged joint fails below this correlation.

    Returns
    -------
    dict
        ``passed``, ``line`` (one line for people), ``failures`` ({joint: text}),
        ``judged`` and ``not_judged`` joints, ``rho_not_judged`` ({joint: why}: its torque
        did not vary beyond its noise), the thresholds.
    """
    # a joint held still whose RMSE exceeds BEYOND_HOLDING x the friction it may hold at
    # rest carries more than stiction: a force on the arm (the check's limit)
    from arm_dyn_id.validation.check import BEYOND_HOLDING
    judged, skipped, failures, still, held, pushed = [], {}, {}, {}, [], []
    for joint, m in metrics.items():
        peak, sigma = m.get('max_torque'), m.get('noise_std')
        if peak is None:
            skipped[joint] = 'no samples scored'
            continue
        if sigma is not None and peak < SIGNAL_NOISE * sigma:
            skipped[joint] = f'largest |τ| {peak:.3g} N·m < {SIGNAL_NOISE:g}x its noise'
            continue
        judged.append(joint)
        spread = m.get('torque_std')
        if sigma is not None and spread is not None and spread < VARY_NOISE * sigma:
            still[joint] = (f'its torque varied by {spread:.3g} N·m (std) < {VARY_NOISE:g}x '
                            f'its noise {sigma:.3g} N·m')
        why = []
        percent, rho = m.get('rmse_percent'), m.get('rho')
        if percent is None or percent > max_rmse_percent:
            over = 'unknown' if percent is None else f'{percent:.3g} %'
            why.append(f'RMSE {over} > {max_rmse_percent:g} %' + (
                '' if percent is None else f' (by {percent - max_rmse_percent:.3g} points)'))
        if joint not in still and (rho is None or rho < min_rho):
            value = 'unknown' if rho is None else f'{rho:.3g}'
            why.append(f'ρ {value} < {min_rho:g}' + (
                '' if rho is None else f' (by {min_rho - rho:.3g})'))
        moved = m.get('motion_range')
        hold, rmse = m.get('holding_friction'), m.get('rmse')
        if why and moved is not None and moved < STILL_RANGE:
            if hold and rmse is not None and rmse > BEYOND_HOLDING * hold:
                why.append(f'held still (its position spans {moved:.2g} rad) with an RMSE of '
                           f'{rmse:.3g} N·m, beyond the {hold:.3g} N·m its friction may hold')
                pushed.append(joint)
            else:
                why.append(f'held still (its position spans {moved:.2g} rad)')
                held.append(joint)
        if why:
            failures[joint] = ', '.join(why)
    limits = f'RMSE <= {max_rmse_percent:g} % and ρ >= {min_rho:g}'
    note = '' if not still else \
        f' (ρ not judged on {", ".join(still)}: the torque did not vary beyond ' \
        f'{VARY_NOISE:g}x its noise)'
    if held:
        note += f'; {STILL}'
    if pushed:
        note += f'; {PUSHED}'
    if not judged:
        line = (f'verdict: FAIL: no joint carries signal to judge ({limits}); '
                f'{"; ".join(f"{j}: {t}" for j, t in skipped.items())}')
        passed = False
    elif failures:
        line = 'verdict: FAIL: ' + '; '.join(f'{j} {t}' for j, t in failures.items()) + \
            f' ({len(failures)} of {len(judged)} judged joints fail {limits})' + note
        passed = False
    else:
        line = f'verdict: PASS: {len(judged)} judged joints within {limits}' + note
        if skipped:
            line += f' (not judged: {", ".join(skipped)}: torque within noise)'
        passed = True
    return {'passed': passed, 'line': line, 'failures': failures, 'judged': judged,
            'not_judged': skipped, 'rho_not_judged': still,
            'max_rmse_percent': max_rmse_percent, 'min_rho': min_rho}


def _full_metrics(model, rec, against, noise, progress):
    """Per-joint metrics of a full model on the whole recording, and what was scored."""
    from arm_dyn_id.identification.full_dynamics import validate_full
    prep = model.metadata.get('preparation') or {}
    progress.phase(f'scoring the full-dynamics model on all {rec.n_samples} samples '
                   f'(the model\'s filter: {prep.get("cutoff_hz", float("nan")):.3g} Hz; '
                   f'against the {against} torque)')
    metrics = validate_full(model, rec.t, rec.q, rec.tau, against=against)
    from arm_dyn_id.validation.check import holding_friction
    hold = holding_friction(model.robot)
    for i, (joint, sigma) in enumerate(zip(rec.joints, noise)):
        if joint in metrics:
            metrics[joint]['noise_std'] = None if not np.isfinite(sigma) else float(sigma)
            # how far it moved: a joint held still carries its holding friction (judge)
            metrics[joint]['motion_range'] = float(np.ptp(rec.q[:, i]))
            metrics[joint]['holding_friction'] = float(hold[i]) if hold[i] > 0 else None
    return metrics, {'source': 'trajectory', 'against': against,
                     'cutoff_hz': prep.get('cutoff_hz'), 'samples_scored':
                     max((m.get('n_samples') or 0 for m in metrics.values()), default=0)}
