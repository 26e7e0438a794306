"""Check a bag's torques against the nominal URDF's gravity before trusting a fit.

From the static or slow parts of the bag (every joint under 0.05 rad/s), each
joint's measured torque is fitted against the gravity torque of the nominal
URDF: the scale (the torque constant's error), its sign (a reversed joint), a
constant offset, whether two joints look swapped, and whether the effort looks
like joint torque although read as motor current (or the reverse). A joint that
gravity barely loads (a wrist turning about a vertical axis) is reported as not
testable here, not flagged. See docs/check.md for how to read the table.

Exit code 0 when every testable joint agrees (warnings allowed), 4 when a sign
is flipped, two joints look swapped or a scale is off by more than 30 %, 3 when
no joint could be checked.

examples:
  arm-dyn-id check my_bag/ --urdf arm.urdf --torque-constants 8.2,8.2,6.1,2.3,2.3,2.3
  arm-dyn-id check my_bag/ --config my_arm.yaml --json check.json
"""

from pathlib import Path

import numpy as np

HELP = 'pre-flight check: signs, torque constants, offsets, swapped joints against the URDF'

#: exit codes besides 0
EXIT_UNTESTABLE, EXIT_FAILED = 3, 4


def add_arguments(parser):
    from arm_dyn_id.cli.common import add_data_arguments
    add_data_arguments(parser)
    if not any('--effort' in a.option_strings for a in parser._actions):
        parser.add_argument('--effort', choices=('current', 'torque'), default='current',
                            help='what the driver puts in joint_states.effort (default '
                            'current, converted with --torque-constants)')
    parser.add_argument('--gravity', type=float,
                        help='gravity (m/s²) the bag was recorded at (default: the config\'s, '
                        'else 9.81)')
    parser.add_argument('--max-speed', type=float, default=None, metavar='RAD_S',
                        help='joint speed under which a sample counts as slow (default 0.05)')
    parser.add_argument('--json', type=Path, metavar='PATH',
                        help='write the per-joint numbers as JSON')


def _plain_conversion(args, urdf):
    """Current -> torque for a bag without stored configuration, joints from the URDF.

    Used only when :func:`arm_dyn_id.cli.common.arm_setup` gives none.
    """
    from arm_dyn_id.cli.common import parse_constants
    from arm_dyn_id.data.motor import CurrentToTorque
    from arm_dyn_id.errors import ConfigError
    from arm_dyn_id.model.robot import RobotModel
    joints = RobotModel.from_urdf(urdf).joint_names
    if getattr(args, 'effort', 'current') == 'torque':
        return CurrentToTorque(joints, np.ones(len(joints)))
    if not args.torque_constants:
        raise ConfigError('pass --torque-constants K1,K2,... (N·m/A per joint, in the order '
                          f'{list(joints)}), --effort torque, or --config')
    return CurrentToTorque(joints, parse_constants(args.torque_constants, len(joints)))


def run(args):
    from arm_dyn_id.cli.common import (Progress, arm_setup, parse_constants, read, urdf_for,
                                       write_json)
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.data.segmentation import (QUASI_STATIC_SPEED, filtered_derivatives,
                                              quasi_static_mask)
    from arm_dyn_id.errors import ConfigError, DataError
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.validation.check import FAIL, UNTESTABLE, check_samples
    progress = Progress(quiet=args.quiet)
    effort = getattr(args, 'effort', None) or 'current'
    if args.gravity is not None and not args.gravity > 0:
        raise ConfigError(f'--gravity {args.gravity} must be > 0 (m/s²)')
    bag = args.bag.expanduser()
    if not bag.exists():
        raise DataError(f'bag {bag} does not exist')
    stored = read_stored_config(bag)
    config, conversion = arm_setup(args, stored)
    urdf = urdf_for(args, config, stored)
    if conversion is None and stored is None:
        conversion = _plain_conversion(args, urdf)
    rec, _ = read(args, conversion, progress)
    gravity = args.gravity or (config.gravity if config else None) or \
        float((stored or {}).get('gravity', 9.81))
    direction = getattr(config, 'gravity_direction', None) if config else None
    robot = RobotModel.from_urdf(urdf, joints=rec.joints, gravity=gravity,
                                 **({'gravity_direction': direction}
                                    if direction is not None else {}))
    dq = rec.dq if np.all(np.isfinite(rec.dq)) else None
    speed = QUASI_STATIC_SPEED if args.max_speed is None else args.max_speed
    mask = quasi_static_mask(rec.t, rec.q, dq, max_speed=speed)
    _, velocity, _ = filtered_derivatives(rec.t, rec.q, dq=dq)
    span = float(np.sum(np.diff(rec.t)[mask[1:] & mask[:-1]]))
    progress.phase(f'{int(mask.sum())} of {rec.n_samples} samples are static or slow '
                   f'(every joint under {speed:g} rad/s; {span:.1f} s)')
    conv = rec.torque_config or {}
    if effort == 'torque':
        k_e = parse_constants(args.torque_constants, len(rec.joints)) \
            if args.torque_constants else None
    elif conv.get('torque_constants') is not None:
        k_e = np.abs(np.asarray(conv['torque_constants'], dtype=float)
                     * np.asarray(conv.get('gear_ratios') or 1.0, dtype=float)
                     * np.asarray(conv.get('efficiencies') or 1.0, dtype=float))
    else:
        k_e = None
    result = check_samples(robot, rec.q, rec.tau, mask=mask, velocity=velocity,
                           torque_constants=k_e, effort=effort)
    print(f'pre-flight check of {bag} against {urdf} (g = {gravity:g} m/s², effort = '
          f'{effort}, {result.n_samples} quasi-static samples)\n')
    print(result.table())
    if args.json:
        doc = dict(result.to_dict(), bag=str(bag), urdf=str(urdf), gravity=gravity,
                   states_topic=rec.states_topic, n_read=rec.n_samples,
                   n_quasi_static=int(mask.sum()), quasi_static_seconds=span,
                   torque_constants=None if k_e is None else list(map(float, k_e)))
        print(f'json: {write_json(args.json.expanduser(), doc)}')
    if result.status == FAIL:
        return EXIT_FAILED
    if result.status == UNTESTABLE:
        return EXIT_UNTESTABLE
    return 0
