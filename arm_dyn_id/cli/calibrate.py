"""Torque constants (N·m/A) of every joint from twin runs without and with a known load.

UNLOADED_BAG and LOADED_BAG hold the same trajectory run twice: without a load,
and with a rigid load of known mass (--mass, kg) fixed at --frame (default
'flange' if the URDF has it, else 'tool0', else the last link). effort is read
as motor current (A). The runs may start at different times: they are aligned
on the joint angles first. In the difference of the currents at the same q, q̇,
q̈ the arm's own dynamics and friction cancel, leaving k_j Δi_j = the load's
torque on joint j; the load's centre of mass (and its inertia, when the motion
excites it) is fitted with the constants, and so are per-joint Coulomb and
viscous friction terms that differ between the runs (--friction-difference). See
docs/calibrate.md.

Prints per joint k ± its standard error and how well it is determined
(relative standard error: determined <= 5 %, poorly determined <= 20 %,
undetermined beyond) with what motion would determine it better; --json writes
`torque_constants` and `torque_constants_std_error` in the order of the joints
(the URDF's movable joints unless --joints), with `per_joint` details.

Constants that cannot be right are refused (exit 3, no JSON unless --force): the two
runs' efforts at another level (different units), the load hanging beyond the frame
given, an overlap too short for honest errors, every constant negative (the bags swapped,
or every current's sign reversed), or the unloaded run's torque with the constants found
at another scale than the URDF's (the mass, or the effort's units).

examples:
  arm-dyn-id calibrate free_bag/ loaded_bag/ --urdf ur10e.urdf --mass 2.602 --json k.json
  arm-dyn-id calibrate free_bag/ loaded_bag/ --config my_arm.yaml --mass 1.2 --frame tool0
"""

from argparse import Namespace
from pathlib import Path

HELP = 'torque constants from twin runs without and with a load of known mass'


def add_arguments(parser):
    parser.add_argument('unloaded', type=Path, metavar='UNLOADED_BAG',
                        help='bag of the trajectory without the load')
    parser.add_argument('loaded', type=Path, metavar='LOADED_BAG',
                        help='bag of the same trajectory with the load')
    parser.add_argument('--mass', type=float, required=True, metavar='KG',
                        help='the load\'s mass (kg), known (weighed)')
    parser.add_argument('--frame',
                        help='URDF frame the load is fixed at (default: flange if the URDF '
                        'has it, else tool0, else the last link)')
    parser.add_argument('--config', type=Path,
                        help='arm config YAML (urdf, joints, current_signs, ...); '
                        'its torque_constants are not used')
    parser.add_argument('--urdf', type=Path, help='the arm\'s URDF (instead of the config\'s)')
    parser.add_argument('--joints', metavar='J1,J2,...',
                        help='the joints, by URDF name (default: the config\'s, else every '
                        'movable joint of the URDF in its order)')
    parser.add_argument('--joint-map', metavar='BAG_NAME:URDF_NAME,...',
                        help='rename joints of the bags to the URDF\'s')
    parser.add_argument('--gravity-vector', metavar='GX,GY,GZ',
                        help='gravity (m/s²) in the URDF\'s root frame (default 0,0,-9.81)')
    parser.add_argument('--states-topic', metavar='TOPIC',
                        help='JointState topic to read (default: /joint_states, else the only '
                        'JointState topic)')
    parser.add_argument('--inertia', choices=('auto', 'yes', 'no'), default='auto',
                        help='fit the load\'s inertia too: when the motion excites it (auto, '
                        'default), always, or never (a point mass)')
    parser.add_argument('--friction-difference', default='coulomb,viscous',
                        metavar='TERMS',
                        help='per-joint friction terms that may differ between the runs '
                        '(another day, another temperature, a loaded gear), fitted and left '
                        'out: comma-separated from coulomb, viscous, offset, or none '
                        '(default coulomb,viscous)')
    parser.add_argument('--cutoff', type=float, metavar='HZ',
                        help='low-pass cut-off of both runs (default: from the unloaded run)')
    parser.add_argument('--recover', action='store_true',
                        help='repair unfinished recorder bags (no metadata.yaml) first')
    parser.add_argument('--json', type=Path, metavar='PATH',
                        help='write the constants, their standard errors and the per-joint '
                        'determination as JSON')
    parser.add_argument('--force', dest='keep_refused', action='store_true',
                        help='write the JSON even when the constants are refused')
    parser.add_argument('--quiet', action='store_true', help='no progress output')


def _setup(args, stored):
    """(config, conversion with k = 1): the arm, effort read as current (signs kept)."""
    from arm_dyn_id.cli.arm import arm_setup
    base = dict(config=args.config, urdf=args.urdf, joints=args.joints,
                gravity_vector=args.gravity_vector, torque_constants=None)
    config, _ = arm_setup(Namespace(**base, effort='torque'), stored)
    ones = ','.join(['1'] * len(config.joints))
    base['joints'] = ','.join(config.joints)
    base['torque_constants'] = ones
    return arm_setup(Namespace(**base, effort='current'), stored)


def run(args):
    from arm_dyn_id.cli.bags import read
    from arm_dyn_id.cli.output import write_json
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.errors import ConfigError, DataError, JointNameError
    from arm_dyn_id.identification.calibration import calibrate, default_frame
    from arm_dyn_id.model.robot import RobotModel
    import numpy as np
    progress = Progress(quiet=args.quiet)
    from arm_dyn_id.identification.calibration import FRICTION_TERMS
    if not (np.isfinite(args.mass) and args.mass > 0):
        raise ConfigError(f'--mass {args.mass:g}: give the load\'s mass in kg (> 0)')
    friction = tuple(t.strip() for t in args.friction_difference.split(',') if t.strip())
    friction = () if friction == ('none',) else friction
    if set(friction) - set(FRICTION_TERMS):
        raise ConfigError(f'--friction-difference {args.friction_difference}: give none or '
                          f'terms from {", ".join(FRICTION_TERMS)}, comma-separated')
    bags = [args.unloaded.expanduser(), args.loaded.expanduser()]
    for bag in bags:
        if not bag.exists():
            raise DataError(f'bag {bag} does not exist')
    if bags[0].resolve() == bags[1].resolve():
        raise ConfigError('UNLOADED_BAG and LOADED_BAG are the same bag')
    stored = read_stored_config(bags[0])
    config, conversion = _setup(args, stored)
    robot = RobotModel.from_config(config)
    if args.gravity_vector:
        robot.set_gravity(config.gravity, config.gravity_direction)
    frame = args.frame or default_frame(robot)
    if not robot.model.existFrame(frame):
        raise JointNameError(f'--frame {frame!r} is not in {config.urdf} (frames: '
                             f'{[f.name for f in robot.model.frames]})')
    args.force = False
    recs = [read(args, conversion, progress, bag)[0] for bag in bags]
    progress.phase(f'aligning the runs and calibrating with a {args.mass:g} kg load at '
                   f'{frame!r}')
    inertia = {'auto': 'auto', 'yes': True, 'no': False}[args.inertia]
    cal = calibrate(robot, *[(r.t, r.q, r.tau) for r in recs], mass=args.mass, frame=frame,
                    inertia=inertia, cutoff_hz=args.cutoff, friction=friction)
    doc = cal.to_dict()
    doc['bags'] = {'unloaded': str(bags[0]), 'loaded': str(bags[1])}
    doc['urdf'] = str(config.urdf)
    print(calibration_text(doc))
    if args.json and (cal.refusal is None or args.keep_refused):
        print(f'json: {write_json(args.json.expanduser(), doc)}')
    if cal.refusal is not None:
        import sys
        from arm_dyn_id.cli import EXIT_REFUSED
        print(f'arm-dyn-id calibrate: refused ({cal.refusal[0]}): {cal.refusal[1]}'
              + ('' if args.keep_refused or not args.json else ' (--force: write the JSON '
                 'anyway)'), file=sys.stderr)
        return EXIT_REFUSED
    return 0


def calibration_text(doc):
    """The constants per joint with their errors and determination, for people."""
    a, load = doc['alignment'], doc['load']
    lines = [f'aligned: the unloaded run\'s start is {a["shift_s"]:+.3f} s into the loaded run '
             f'(overlap {a["overlap_s"]:.1f} s, q RMS difference {a["rms_rad"]:.2g} rad); '
             f'{doc["n_samples"]} samples at {doc["info"]["cutoff_hz"]:.3g} Hz cut-off',
             f'load {load["mass"]:g} kg at {load["frame"]!r}, centre of mass ' +
             ', '.join(f'{c:.4g} ± {e:.2g}' for c, e in zip(load['com'], load['com_std_error']))
             + ' m' + ('' if load['inertia_about_frame_origin'] is None
                       else ' (inertia fitted)'),
             f'{"joint":24s} {"k (N·m/A)":>10s} {"± s.e.":>8s} {"rel.":>7s}  determination']
    for name in doc['joints']:
        p = doc['per_joint'][name]
        lines.append(f'{name:24s} {p["torque_constant"]:10.4g} {p["std_error"]:8.2g} '
                     f'{100 * p["relative_std_error"]:6.1f} %  {p["determination"]}')
    for name in doc['joints']:
        if doc['per_joint'][name]['advice']:
            lines.append(f'  {doc["per_joint"][name]["advice"]}')
    return '\n'.join(lines)
