"""Metrics of a fitted model on another bag (another payload, another g, another day).

The bag is read like `arm-dyn-id fit` reads it; every forward/backward pair is
averaged (friction cancels, seed 000 eq. 5) and compared with the model's G(q).
Nothing is fitted, so all of it is held-out data. Prints the per-joint table
(max |τ|, RMSE, RMSE %, MAE, ρ); --json writes {case: {joint: metrics}} plus a
fit_summary of what was read.

examples:
  arm-dyn-id validate fit/model.yaml other_day_bag/ --config my_arm.yaml
  arm-dyn-id validate fit/model.yaml moon_bag/ --config my_arm.yaml --gravity 1.63 --json m.json
"""

from pathlib import Path

import numpy as np

HELP = 'metrics of a fitted model on another bag'


def add_arguments(parser):
    from arm_dyn_id.cli.common import add_data_arguments
    parser.add_argument('model', type=Path, help='model.yaml written by arm-dyn-id fit')
    add_data_arguments(parser)
    parser.add_argument('--gravity', type=float,
                        help='gravity (m/s²) the bag was recorded at (default: the model\'s)')
    parser.add_argument('--json', type=Path, metavar='PATH', help='write the metrics as JSON')


def run(args):
    from arm_dyn_id.cli.common import Progress, arm_setup, metrics_text, read, write_json
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.errors import DataError, JointNameError
    from arm_dyn_id.identification.pairing import pair_sweeps, sweeps_from_markers
    from arm_dyn_id.identification.pipeline import (choose_markers, metrics_dict,
                                                    noise_estimate, pair_metrics)
    from arm_dyn_id.model.gravity import GravityModel
    progress = Progress(quiet=args.quiet)
    model = GravityModel.load(args.model.expanduser(), urdf=args.urdf)
    bag = args.bag.expanduser()
    if not bag.exists():
        raise DataError(f'bag {bag} does not exist')
    stored = read_stored_config(bag)
    args_urdf, args.urdf = args.urdf, None     # --urdf is the model's here
    config, conversion = arm_setup(args, stored)
    args.urdf = args_urdf
    if conversion is None and stored is None:
        raise DataError(f'bag {bag} has no stored configuration (/arm_dyn_id/config): pass '
                        '--config with the arm\'s joints and torque_constants')
    rec, _ = read(args, conversion, progress)
    if tuple(rec.joints) != tuple(model.joint_names):
        raise JointNameError(f'the model has joints {list(model.joint_names)}, the '
                             f'configuration {list(rec.joints)}: pass the --config of the arm '
                             'the model was fitted for')
    markers, source = choose_markers(rec.t, rec.q, rec.joints, rec.markers, args.segments,
                                     where=f'bag {rec.source}', phase=progress.phase)
    pairs = pair_sweeps(sweeps_from_markers(rec.t, markers))
    if not pairs:
        raise DataError(f'bag {bag} has no forward/backward sweep pair to validate on')
    gravity = args.gravity or model.fit_gravity
    noise = noise_estimate(rec.tau)
    metrics, _, _ = pair_metrics(model, rec.t, rec.q, rec.tau, pairs, rec.joints, noise,
                                 gravity=gravity)
    case = f'{bag.name}_g{gravity:g}'
    result = {case: metrics_dict(metrics, noise), 'fit_summary': {
        'model': str(args.model), 'bag': str(bag), 'states_topic': rec.states_topic,
        'gravity': gravity, 'model_gravity': model.fit_gravity, 'n_samples': rec.n_samples,
        'segments': {'source': source, 'pairs': len(pairs)},
        'quality': rec.quality['loaded'], 'noise_std': np.asarray(noise).tolist(),
        'warnings': model.metadata.get('warnings', [])}}
    for warning in model.metadata.get('warnings', []):
        progress.phase(f'warning: {warning}')
    print(metrics_text(result))
    if args.json:
        print(f'json: {write_json(args.json.expanduser(), result)}')
    return 0
