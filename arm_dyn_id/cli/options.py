"""The options every bag command reads the same way: data options, per-joint
numbers, joint maps, estimators, gravity, the robot the command line names.

Argument parsing and printing only: the work is in the lower wings.
"""

from pathlib import Path

import numpy as np

from arm_dyn_id.errors import ConfigError


def add_data_arguments(parser, several=False):
    """Options that say how to read a bag and what arm it holds (fit, validate, check).

    Parameters
    ----------
    parser : argparse.ArgumentParser
    several : bool
        Positional ``bags`` (one or more) instead of one ``bag``.
    """
    if several:
        parser.add_argument('bags', type=Path, nargs='+', metavar='BAG',
                            help='rosbag2 bag folder(s) (MCAP or sqlite3); several are read '
                            'one after another')
    else:
        parser.add_argument('bag', type=Path, help='rosbag2 bag folder (MCAP or sqlite3)')
    parser.add_argument('--config', type=Path,
                        help='arm config YAML (/**: ros__parameters: urdf, joints, '
                        'torque_constants, ...); optional: --urdf and --torque-constants '
                        'suffice, and recorder bags store theirs')
    parser.add_argument('--urdf', type=Path, help='the arm\'s URDF (instead of the config\'s)')
    parser.add_argument('--torque-constants', metavar='K1,K2,...',
                        help='torque constants k_e (N·m/A) per joint, in the order of the '
                        'joints (the URDF\'s movable joints unless --joints or the config '
                        'says otherwise); commas or spaces between them')
    parser.add_argument('--effort', choices=('current', 'torque'), default=None,
                        help='what joint_states.effort holds: motor current in A (default, '
                        'or with a MODEL the effort it was fitted from; converted with the '
                        'torque constants) or joint torque in N·m '
                        '(Franka-style drivers; no torque constants)')
    parser.add_argument('--joints', metavar='J1,J2,...',
                        help='the joints to fit, by URDF name (default: the config\'s, else '
                        'every movable joint of the URDF in its order)')
    parser.add_argument('--joint-map', metavar='BAG_NAME:URDF_NAME,...',
                        help='rename joints of the bag to the URDF\'s (names that differ by a '
                        'prefix, e.g. ur_shoulder_pan_joint, are matched without it)')
    parser.add_argument('--gravity-vector', metavar='GX,GY,GZ',
                        help='gravity (m/s²) in the URDF\'s root frame for an arm mounted '
                        'tilted, on a wall or a ceiling (default 0,0,-9.81)')
    parser.add_argument('--states-topic', metavar='TOPIC',
                        help='JointState topic to read (default: the recorder\'s, else '
                        '/joint_states, else the only JointState topic)')
    parser.add_argument('--segments', choices=('auto', 'markers', 'detect', 'quasi_static'),
                        default='auto',
                        help='forward/backward sweeps from the bag\'s markers, or detected in '
                        'the joint angles; or the quasi-static samples of any slow motion '
                        '(static holds averaged); auto: markers, else detected sweeps, else '
                        'quasi-static (default)')
    parser.add_argument('--recover', action='store_true',
                        help='repair an unfinished recorder bag (no metadata.yaml) first; a '
                        'bag whose writer is still running is never touched')
    parser.add_argument('--force', action='store_true',
                        help='go on past a refusal: a bag recorded with another URDF, or (fit) '
                        'a fit the data cannot support, written marked "rejected"')
    parser.add_argument('--quiet', action='store_true', help='no progress output')


def parse_constants(text, n=None, option='--torque-constants', unit='N·m/A'):
    try:
        values = [float(x) for x in text.replace(' ', '').split(',') if x]
    except ValueError as exc:
        raise ConfigError(f'{option} {text!r}: give numbers separated by commas '
                          f'({unit} per joint)') from exc
    if not values or not all(np.isfinite(values)):
        raise ConfigError(f'{option} {text!r}: give finite numbers separated by commas')
    if n is not None and len(values) != n:
        raise ConfigError(f'{option} has {len(values)} values, the arm has {n} '
                          'joints: give one per joint in the order of joints')
    return values


def parse_joint_map(text):
    """``--joint-map a:b,c:d`` -> {'a': 'b', 'c': 'd'} (bag name -> URDF name)."""
    if not text:
        return {}
    mapping = {}
    for item in text.split(','):
        item = item.strip()
        if not item:
            continue
        bag_name, sep, urdf_name = item.partition(':')
        if not sep or not bag_name.strip() or not urdf_name.strip():
            raise ConfigError(f'--joint-map item {item!r}: write BAG_NAME:URDF_NAME, comma '
                              'separated')
        mapping[bag_name.strip()] = urdf_name.strip()
    if len(set(mapping.values())) != len(mapping):
        raise ConfigError(f'--joint-map {text!r} maps two bag joints onto one URDF joint')
    return mapping


def parse_methods(text, extra=()):
    """``--methods`` -> tuple of estimator names, refusing unknown and empty ones.

    Parameters
    ----------
    extra : sequence of str
        Names accepted besides the estimators (``consistent`` for full dynamics).
    """
    from arm_dyn_id.identification.estimators import ESTIMATORS
    known = list(ESTIMATORS) + [e for e in extra if e not in ESTIMATORS]
    methods = tuple(m.strip() for m in (text or '').split(',') if m.strip())
    if not methods:
        raise ConfigError(f'--methods {text!r} is empty: choose from {", ".join(known)}')
    for m in methods:
        if m not in known:
            raise ConfigError(f'--methods: unknown estimator {m!r}; choose from '
                              f'{", ".join(known)}')
    return methods


def check_gravity_options(args):
    """``--gravity`` and ``--gravity-vector``: (magnitude or None, unit direction or None)."""
    magnitude = getattr(args, 'gravity', None)
    if magnitude is not None and not (np.isfinite(magnitude) and magnitude > 0):
        raise ConfigError(f'--gravity {magnitude:g} must be a positive magnitude (m/s²)')
    text = getattr(args, 'gravity_vector', None)
    if not text:
        return magnitude, None
    g = np.array(parse_constants(text, 3, '--gravity-vector', 'm/s²'))
    norm = float(np.linalg.norm(g))
    if norm <= 0:
        raise ConfigError(f'--gravity-vector {text}: must not be zero')
    if magnitude is not None and abs(magnitude - norm) > 1e-6 * norm:
        raise ConfigError(f'--gravity {magnitude:g} disagrees with --gravity-vector {text} '
                          f'(|g| = {norm:g}): give one of them')
    return norm, g / norm


def given_robot(args):
    """The URDF and joints the command line gives, however given: (--urdf, else the
    --config's urdf, resolved as the config resolves it; --joints, else the config's).
    None for what is not given (the model's own then)."""
    from arm_dyn_id.config import read_parameter_file
    from arm_dyn_id.paths import resolve_data_file
    urdf = args.urdf.expanduser() if args.urdf is not None else None
    joints = [j.strip() for j in args.joints.split(',') if j.strip()] if args.joints else None
    if args.config is not None and (urdf is None or joints is None):
        resolved = resolve_data_file(args.config, 'config')
        params = read_parameter_file(resolved)
        if urdf is None and isinstance(params.get('urdf'), str):
            urdf = resolve_data_file(params['urdf'], 'urdf', resolved.parent)
        if joints is None and isinstance(params.get('joints'), list):
            joints = [str(j) for j in params['joints']]
    return urdf, joints
