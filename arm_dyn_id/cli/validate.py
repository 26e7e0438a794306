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

The bag is checked to be of the model's robot: the joints, and the URDF's
sha256 the model stores against the --urdf given and the URDF a recorder bag
was recorded with; a model of another robot is refused, not scored.

examples:
  arm-dyn-id validate fit/model.yaml other_day_bag/ --urdf arm.urdf --torque-constants 8.2,...
  arm-dyn-id validate fit/model.yaml other_day_bag/ --config my_arm.yaml
  arm-dyn-id validate fit/model.yaml moon_bag/ --config my_arm.yaml --gravity 1.63 --json m.json
"""

from pathlib import Path

import numpy as np

HELP = 'metrics of a fitted model on another bag'


def add_arguments(parser):
    from arm_dyn_id.cli.common import add_data_arguments
    parser.add_argument('model', type=Path, help='model.yaml written by arm-dyn-id fit')
    add_data_arguments(parser, several=True)
    parser.add_argument('--gravity', type=float,
                        help='gravity magnitude (m/s²) the bag was recorded at (default: the '
                        'model\'s)')
    parser.add_argument('--against', choices=('filtered', 'raw'), default='filtered',
                        help='full models: compare with the torque filtered like the fit '
                        '(default) or the raw one')
    parser.add_argument('--json', type=Path, metavar='PATH', help='write the metrics as JSON')


def run(args):
    from arm_dyn_id.cli.common import (Progress, arm_setup, check_gravity_options,
                                       check_same_robot, metrics_text, model_on_recording,
                                       read_all, write_json)
    from arm_dyn_id.config import file_sha256
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.errors import DataError, JointNameError
    from arm_dyn_id.identification.pairing import pair_sweeps, sweeps_from_markers
    from arm_dyn_id.identification.pipeline import (choose_markers, metrics_dict,
                                                    noise_estimate, pair_metrics)
    from arm_dyn_id.model import load_model
    progress = Progress(quiet=args.quiet)
    magnitude, direction = check_gravity_options(args)
    model = load_model(args.model.expanduser(), urdf=args.urdf)
    bags = [b.expanduser() for b in args.bags]
    for bag in bags:
        if not bag.exists():
            raise DataError(f'bag {bag} does not exist')
    stored = [read_stored_config(bag) for bag in bags]
    model_sha = (model.to_dict().get('urdf') or {}).get('sha256')
    if args.urdf is None:
        args.urdf = model.robot.source and Path(model.robot.source)
    if args.joints is None and args.config is None:
        args.joints = ','.join(model.joint_names)
    if model.metadata.get('warnings') and not args.force:
        raise DataError(f'model {args.model} is of another robot: {model.metadata["warnings"][0]}'
                        ' (--force scores it anyway)')
    config, conversion = arm_setup(args, next((s for s in stored if s), None))
    if tuple(config.joints) != tuple(model.joint_names):
        raise JointNameError(f'model {args.model} is of joints {list(model.joint_names)}, the '
                             f'arm given has {list(config.joints)}: a model of another robot '
                             'is not scored')
    for bag, doc in zip(bags, stored):
        check_same_robot(bag, doc, config, force=args.force)
        if doc and doc.get('urdf_sha256') and model_sha and doc['urdf_sha256'] != model_sha \
                and not args.force:
            raise DataError(f'bag {bag} was recorded with another URDF than model '
                            f'{args.model} was fitted with (sha256 differ): a model of another '
                            'robot is not scored (--force scores it anyway)')
    if model_sha and Path(config.urdf).is_file() and file_sha256(config.urdf) != model_sha \
            and not args.force:
        raise DataError(f'model {args.model} was fitted with another URDF than {config.urdf} '
                        '(sha256 differ): a model of another robot is not scored')
    rec, _ = read_all(args, conversion, progress, bags)
    gravity = model_on_recording(model, rec, magnitude, direction, 'the configuration')
    noise = noise_estimate(rec.tau)
    if model.dynamics == 'full':
        metrics, segments = _full_metrics(model, rec, args.against, noise, progress)
    else:
        markers, source = choose_markers(rec.t, rec.q, rec.joints, rec.markers, args.segments,
                                         where=f'bag {rec.source}', phase=progress.phase)
        pairs = pair_sweeps(sweeps_from_markers(rec.t, markers))
        if not pairs:
            raise DataError(f'bag {rec.source} has no forward/backward sweep pair to validate '
                            'on (a gravity model is scored on sweep pairs; a full-dynamics '
                            'model scores any trajectory)')
        scored, _, _ = pair_metrics(model, rec.t, rec.q, rec.tau, pairs, rec.joints, noise)
        metrics = metrics_dict(scored, noise)
        segments = {'source': source, 'pairs': len(pairs)}
    bag = bags[0]
    case = f'{bag.name}_g{gravity:g}'
    result = {case: metrics, 'fit_summary': {
        'model': str(args.model), 'dynamics': model.dynamics, 'bag': str(bag),
        'bags': [str(b) for b in bags], 'states_topic': rec.states_topic,
        'gravity': gravity, 'gravity_vector': model.robot.gravity_vector.tolist(),
        'model_gravity': model.fit_gravity, 'n_samples': rec.n_samples,
        'segments': segments,
        'quality': rec.quality['loaded'], 'noise_std': np.asarray(noise).tolist(),
        'warnings': model.metadata.get('warnings', [])}}
    for warning in model.metadata.get('warnings', []):
        progress.phase(f'warning: {warning}')
    print(metrics_text(result))
    if args.json:
        print(f'json: {write_json(args.json.expanduser(), result)}')
    return 0


def _full_metrics(model, rec, against, noise, progress):
    """Per-joint metrics of a full model on the whole recording, and what was scored."""
    from arm_dyn_id.identification.full_dynamics import validate_full
    prep = model.metadata.get('preparation') or {}
    progress.phase(f'scoring the full-dynamics model on all {rec.n_samples} samples '
                   f'(the model\'s filter: {prep.get("cutoff_hz", float("nan")):.3g} Hz; '
                   f'against the {against} torque)')
    metrics = validate_full(model, rec.t, rec.q, rec.tau, against=against)
    for joint, sigma in zip(rec.joints, noise):
        if joint in metrics:
            metrics[joint]['noise_std'] = None if not np.isfinite(sigma) else float(sigma)
    return metrics, {'source': 'trajectory', 'against': against,
                     'cutoff_hz': prep.get('cutoff_hz'), 'samples_scored':
                     max((m.get('n_samples') or 0 for m in metrics.values()), default=0)}
