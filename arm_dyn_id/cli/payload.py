"""Identify a payload (mass, centre of mass, inertia) from a bag, the arm model frozen.

MODEL is a model.yaml of `arm-dyn-id fit` of the arm WITHOUT the payload; BAG is
a recording WITH it, read like `fit` reads bags. With a full-dynamics model any
motion works: the bag is filtered with the model's own filter and the payload's
parameters are fitted against the model's torques; its inertia (about its
centre of mass) is identified when the motion excites it (wrist rotations), else
the payload is taken as a point mass and the report says why. With a gravity
model the forward/backward sweep pairs (recorded or detected) are averaged, or
the static holds and slow motion are used: hold the payload still at a few poses
for a second or two. Prints mass, centre of mass (and inertia) with their
standard errors; --json writes them (`mass`, `mass_std_error`, `com`,
`com_std_error`, `inertia`, `inertia_std_error`, ...). Data that shows no payload
exits 3.

examples:
  arm-dyn-id payload fit/model.yaml with_gripper_bag/ --config my_arm.yaml --json payload.json
  arm-dyn-id payload fit/model.yaml bag/ --urdf arm.urdf --effort torque --frame tool0
"""

from pathlib import Path

import numpy as np

HELP = 'identify a payload (mass, centre of mass, inertia) with the arm model frozen'


def add_arguments(parser):
    from arm_dyn_id.cli.options import add_data_arguments
    parser.add_argument('model', type=Path, help='model.yaml of the arm without the payload')
    add_data_arguments(parser)
    parser.add_argument('--frame',
                        help='URDF frame the payload is expressed in (default flange if the '
                        'URDF has it, else tool0, else the link after the last joint)')
    parser.add_argument('--inertia', choices=('auto', 'yes', 'no'), default='auto',
                        help='full models: identify the inertia when the motion excites it '
                        '(auto, default), always (yes: refused when not excited) or never')
    parser.add_argument('--gravity', type=float,
                        help='gravity magnitude (m/s²) the bag was recorded at (default: the '
                        'model\'s)')
    parser.add_argument('--json', type=Path, metavar='PATH',
                        help='write mass, com, inertia and their standard errors as JSON')


def run(args):
    import sys
    from arm_dyn_id.cli.arm import model_for_bags, model_on_recording
    from arm_dyn_id.cli.bags import read
    from arm_dyn_id.cli.options import check_gravity_options
    from arm_dyn_id.cli.output import write_json
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.identification.payload import (NoPayloadError, PayloadDataRefused,
                                                   identify_payload_samples, payload_frame)
    from arm_dyn_id.identification.pipeline import noise_estimate
    progress = Progress(quiet=args.quiet)
    magnitude, direction = check_gravity_options(args)
    bag = args.bag.expanduser()
    # THE model gate: a rejected model or another robot's means nothing here (--force)
    model, _, config, conversion = model_for_bags(args, [bag])
    # the frame before any reading: a wrong --frame costs no minutes of reading
    frame = payload_frame(model.robot, args.frame)
    rec, _ = read(args, conversion, progress, bag)
    gravity = model_on_recording(model, rec, magnitude, direction, 'the bag')
    noise = _weights(noise_estimate(rec.tau), rec.tau)
    inertia = {'auto': 'auto', 'yes': True, 'no': False}[args.inertia]
    dq = rec.dq if getattr(rec, 'dq', None) is not None and np.any(rec.dq != 0) else None
    try:
        effort = getattr(args, 'effort', None) or 'current'
        gains = None if effort == 'torque' or len(conversion.gains) != len(rec.joints) else \
            np.asarray(conversion.gains, dtype=float)
        fit = identify_payload_samples(model, rec.t, rec.q, rec.tau, rec.markers, noise=noise,
                                       frame=frame, inertia=inertia, dq=dq,
                                       say=progress.phase, effort=effort, gains=gains)
    except PayloadDataRefused as exc:
        if getattr(args, 'debug', False):
            import traceback
            traceback.print_exception(exc, file=sys.stderr)
        print(f'arm-dyn-id payload: refused, {exc} (nothing written)', file=sys.stderr)
        return 3
    except NoPayloadError as exc:
        if getattr(args, 'debug', False):
            import traceback
            traceback.print_exception(exc, file=sys.stderr)
        print(f'arm-dyn-id payload: {exc}: is the payload attached, and the model of the arm '
              'without it?', file=sys.stderr)
        return 3
    doc = fit.to_dict()
    doc['fit_summary'] = {'model': str(args.model), 'dynamics': model.dynamics,
                          'bag': str(bag), 'states_topic': rec.states_topic,
                          'n_samples': rec.n_samples, 'gravity': gravity,
                          'quality': rec.quality['loaded']}
    print(payload_text(doc))
    if args.json:
        print(f'json: {write_json(args.json.expanduser(), doc)}')
    return 0


def _weights(sigma, tau):
    """σ per joint for the weights: the estimate, floored for quantised or quiet joints."""
    scale = np.nan_to_num(np.nanmax(np.abs(tau), axis=0), nan=1.0)
    floor = np.maximum(1e-4 * scale, 1e-9)
    return np.where(np.isfinite(sigma), np.maximum(sigma, floor), floor)


def payload_text(doc):
    """Mass, centre of mass and inertia with their standard errors, for people."""
    lines = [f'payload at {doc["frame"]!r} ({doc["note"]})',
             f'  mass     {doc["mass"]:.5g} ± {doc["mass_std_error"]:.2g} kg',
             '  com      ' + ', '.join(f'{c:.5g} ± {e:.2g}' for c, e in
                                       zip(doc['com'], doc['com_std_error'])) + ' m']
    if doc.get('inertia') is not None:
        inertia, err = np.asarray(doc['inertia']), np.asarray(doc['inertia_std_error'])
        for k, label in enumerate(('inertia ', '', '')):
            row = ', '.join(f'{v:.4g} ± {e:.2g}' for v, e in zip(inertia[k], err[k]))
            unit = ' kg·m² (about the centre of mass)' if k == 0 else ''
            lines.append(f'  {label:9s}{row}{unit}')
    else:
        lines.append('  inertia  not identified (point mass)')
    lines.append('  (± are the fit\'s standard errors: they leave out the torque\'s scale. A '
                 'torque constant x off moves the mass by about x; `arm-dyn-id calibrate` '
                 'measures the constants from a known load, docs/calibrate.md)')
    return '\n'.join(lines)
