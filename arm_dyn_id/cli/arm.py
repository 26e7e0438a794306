"""The arm of a command: its configuration and current conversion from the options, the
--config file or the bag, the model gate for a model applied to bags, the same robot
across bag and config.

Argument parsing and printing only: the work is in the lower wings.
"""

import sys
from pathlib import Path

from arm_dyn_id.cli.options import check_gravity_options, given_robot, parse_constants
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError


def arm_setup(args, stored=None):
    """The arm of a command: configuration and current conversion from options and bag.

    Sources, highest first: the options (--urdf, --joints, --torque-constants,
    --effort, --gravity, --gravity-vector), the --config file, the configuration a
    recorder stored in the bag. Joints default to the URDF's movable joints;
    limits are not needed offline.

    Returns
    -------
    config : ArmConfig
    conversion : CurrentToTorque
        Effort -> joint torque (identity for ``--effort torque``).

    Raises
    ------
    ConfigError, DataError, URDFError
        One line naming the missing or wrong option, key or file.
    """
    import dataclasses
    from arm_dyn_id.config import ARM_KEYS, ArmConfig, check_keys, read_parameter_file
    from arm_dyn_id.data.motor import CurrentToTorque
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.paths import resolve_data_file
    effort = getattr(args, 'effort', None) or 'current'
    magnitude, direction = check_gravity_options(args)
    params, base_dir, source = {}, None, None
    if args.config is not None:
        resolved = resolve_data_file(args.config, 'config')
        params = read_parameter_file(resolved)
        check_keys(params, resolved)
        base_dir, source = resolved.parent, resolved
    elif stored:
        params = {k: v for k, v in stored.items() if k in ARM_KEYS and k != 'urdf'}
        urdf = _stored_urdf(stored)
        if urdf is not None:
            params['urdf'] = str(urdf)
    if args.urdf is not None:
        params['urdf'] = str(args.urdf.expanduser().resolve())
    if not params.get('urdf'):
        raise DataError('no URDF for the arm: pass --urdf PATH (or --config naming its urdf)')
    urdf = resolve_data_file(params['urdf'], 'urdf', base_dir) \
        if isinstance(params['urdf'], str) else None
    if urdf is not None and not urdf.is_file():
        # said first: the joints default to the URDF's, and a missing URDF is the cause
        given = '--urdf' if args.urdf is not None else f'the urdf of {source or "the bag"}'
        raise URDFError(f'{given} {urdf} does not exist (or is not a file)')
    if getattr(args, 'joints', None):
        params['joints'] = [j.strip() for j in args.joints.split(',') if j.strip()]
    if 'joints' not in params and urdf is not None and urdf.is_file():
        params['joints'] = list(RobotModel.from_urdf(urdf).joint_names)
    joints = params.get('joints') if isinstance(params.get('joints'), list) else None
    n = len(joints) if joints else None
    if args.torque_constants:
        if effort == 'torque':
            raise ConfigError('--torque-constants with --effort torque: effort is already '
                              'joint torque (N·m); drop one of them')
        params['torque_constants'] = parse_constants(args.torque_constants, n)
    if effort == 'torque':
        for key in ('torque_constants', 'current_signs', 'current_offsets', 'gear_ratios',
                    'efficiencies'):
            params.pop(key, None)
    elif 'torque_constants' not in params:
        raise ConfigError(f'effort is read as motor current (A): pass --torque-constants '
                          f'K1,...,K{n or "n"} (N·m/A, one per joint in the order '
                          f'{joints}), --effort torque if it is already N·m, or --config')
    config = ArmConfig.from_params(params, base_dir=base_dir, source=source,
                                   need_limits=False,
                                   need_torque_constants=effort == 'current')
    if magnitude is not None or direction is not None:
        config = dataclasses.replace(
            config, gravity=config.gravity if magnitude is None else magnitude,
            gravity_direction=config.gravity_direction if direction is None else direction)
    return config, CurrentToTorque.from_config(config)


def _stored_urdf(stored):
    """The URDF a recorder bag's stored config names, when it is found; else None."""
    from arm_dyn_id.paths import resolve_data_file
    source = stored.get('config_file')
    if source and Path(source).is_file():
        from arm_dyn_id.config import read_parameter_file
        try:
            name = read_parameter_file(source).get('urdf')
            if name:
                path = resolve_data_file(name, 'urdf', Path(source).parent)
                if path.is_file():
                    return path
        except ConfigError:
            pass
    if stored.get('urdf'):
        path = resolve_data_file(stored['urdf'], 'urdf')
        if path.is_file():
            return path
    return None


def urdf_for(args, config, stored):
    """The URDF path: --urdf, the config's, or the stored config's (file beside/shipped)."""
    if args.urdf is not None:
        return args.urdf.expanduser()
    if config is not None:
        return config.urdf
    if stored:
        path = _stored_urdf(stored)
        if path is not None:
            return path
    raise DataError('no URDF for the fit: pass --config (an arm config naming its urdf) or '
                    '--urdf PATH')


def model_for_bags(args, bags, kinds=('gravity', 'full'), use='used'):
    """THE model gate for a command that applies ``args.model`` to ``bags``.

    The model is admitted (:func:`arm_dyn_id.model.gate.admit_model`) against the URDF
    and joints the command line gives however given (``--force`` admits a rejected
    model or one of another URDF), the bags must exist, the arm is set up from the
    options, else the first bag's stored config, else the model's own URDF and joints,
    and every bag must be of that arm.

    Returns
    -------
    model, stored (one stored config or None per bag), config, conversion
    """
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.model.gate import admit_model
    urdf, joints = given_robot(args)
    model = admit_model(args.model.expanduser(), urdf=urdf, joints=joints, kinds=kinds,
                        allow_rejected=args.force, allow_other_urdf=args.force)
    # what the gate admitted the model with (opted in, or what the fit said as it wrote
    # it): said by every command that applies it, also when quiet
    for warning in model.metadata.get('warnings', []):
        print(f'warning: {warning}', file=sys.stderr, flush=True)
    for bag in bags:
        if not bag.exists():
            raise DataError(f'bag {bag} does not exist')
    stored = [read_stored_config(bag) for bag in bags]
    if args.urdf is None and args.config is None:
        args.urdf = model.robot.source and Path(model.robot.source)
    if args.joints is None and args.config is None:
        args.joints = ','.join(model.joint_names)
    first = next((s for s in stored if s), None)
    measured = model.measurement if isinstance(model.measurement, dict) else None
    given = _reading_given(args)
    if measured is not None and not given:
        # read the effort as the model was fitted (its measurement section), as the nodes
        # do; a recorder bag's stored constants give way: the model's parameters are in the
        # torque its own reading gave
        from arm_dyn_id.model.files import MEASUREMENT_ARRAYS
        args.effort = measured.get('effort')
        kept = {k: v for k, v in (first or {}).items() if k not in MEASUREMENT_ARRAYS}
        if args.effort == 'current':
            kept.update({k: v for k, v in measured.items() if k != 'effort'})
        if first and first.get('torque_constants') and \
                first.get('torque_constants') != measured.get('torque_constants'):
            print(f'arm-dyn-id: the bag\'s stored torque constants '
                  f'{first.get("torque_constants")} are not the model\'s: the model\'s are '
                  'used', file=sys.stderr)
        first = kept
        print(f'arm-dyn-id: effort read as model {args.model.name} was fitted: '
              + ('joint torque (N·m)' if args.effort == 'torque' else 'motor current with its '
                 'torque constants ' + ', '.join(f'{k:g}' for k in measured['torque_constants']))
              + ' (its measurement section)', file=sys.stderr)
    config, conversion = arm_setup(args, first)
    if tuple(config.joints) != tuple(model.joint_names):
        raise JointNameError(f'model {args.model} is of joints {list(model.joint_names)}, the '
                             f'arm given has {list(config.joints)}: a model of another robot '
                             f'is not {use}')
    if measured is not None and given and not args.force:
        from arm_dyn_id.data.motor import reading_differs
        differs = reading_differs(measured, getattr(args, 'effort', None) or 'current',
                                  conversion, list(model.joint_names))
        if differs:
            raise DataError(f'model {args.model} was fitted from effort read {differs}: its '
                            'parameters are in the torque that reading gave, so what this '
                            f'command finds under another is off by their ratio (a payload '
                            'that is not there, a scale error called a fit error). Read the '
                            'effort as the model was (give no --torque-constants, --effort '
                            'or config constants: the model\'s are used), or refit the arm with '
                            f'the new reading (--force: {use} anyway)')
    model_sha = (model.to_dict().get('urdf') or {}).get('sha256')
    for bag, doc in zip(bags, stored):
        check_same_robot(bag, doc, config, force=args.force)
        if doc and doc.get('urdf_sha256') and model_sha and doc['urdf_sha256'] != model_sha \
                and not args.force:
            raise DataError(f'bag {bag} was recorded with another URDF than model '
                            f'{args.model} was fitted with (sha256 differ): a model of another '
                            f'robot is not {use} (--force anyway)')
    return model, stored, config, conversion


def _reading_given(args):
    """Whether the command line or its --config says how to read the effort (--effort,
    --torque-constants, a config file). A bag's stored constants do not count: against a
    model with a measurement section (the only use), the model's reading takes their
    place."""
    return bool(getattr(args, 'effort', None) or getattr(args, 'torque_constants', None) or
                args.config is not None)


def model_on_recording(model, rec, magnitude, direction, joints_of):
    """Make ``model`` ready to be compared with ``rec`` (validate, payload): the same joints
    in the same order (JointNameError naming ``joints_of``, where rec's joint list came
    from, otherwise), gravity set from :func:`check_gravity_options`'s result (default:
    the gravity the model was fitted at). Returns the gravity magnitude used (m/s²)."""
    from arm_dyn_id.errors import JointNameError
    if tuple(rec.joints) != tuple(model.joint_names):
        raise JointNameError(f'the model has joints {list(model.joint_names)}, {joints_of} '
                             f'{list(rec.joints)}: pass the --config of the arm the model was '
                             'fitted for')
    if direction is not None:
        model.robot.set_gravity(magnitude, direction)
        return magnitude
    gravity = magnitude or model.fit_gravity
    model.robot.set_gravity(gravity)
    return gravity


def check_same_robot(bag, stored, config, force=False):
    """Refuse a bag recorded for another robot than ``config`` names.

    Compares the robot name and the URDF's sha256 the recorder stored in the
    bag (``/arm_dyn_id/config``) with the given configuration. Plain bags
    store neither and pass.

    Raises
    ------
    DataError
        Unless ``force``.
    """
    from arm_dyn_id.config import file_sha256
    if not stored or force:
        return
    name = stored.get('robot_name')
    if name and config.source is not None and name != config.robot_name:
        raise DataError(f'bag {bag} was recorded for robot {name!r}, the config '
                        f'{config.source} is for {config.robot_name!r}: give the config of '
                        'the arm that was recorded (or --force)')
    sha = stored.get('urdf_sha256')
    if sha and Path(config.urdf).is_file() and file_sha256(config.urdf) != sha:
        raise DataError(f'bag {bag} was recorded with another URDF than {config.urdf} '
                        f'(robot {name!r}, URDF sha256 {sha[:12]}... vs '
                        f'{file_sha256(config.urdf)[:12]}...): give the URDF it was recorded '
                        'with (or --force)')


#: Samples at most of a recording for :func:`check_level` (evenly spaced).
LEVEL_ROWS = 5000
#: :func:`check_level` refuses a joint's torque level outside [1 / this, this] x the
#: model's: a load the model lacks (a payload held, a push) adds torque, a unit or a
#: constant read wrong (mA as A, torque as current with k ~ 10) is off by far more.
LEVEL_LIMIT = 3.0


def _whole_torque(model, rec):
    """``(measured, expected)`` of a full model on a recording: the torque through the
    model's own filter and the model's whole torque (rigid body and friction) there, at
    most :data:`LEVEL_ROWS` samples; None for a gravity model or a recording the filter
    cannot prepare. A Panda's third joint at a 0.3 Hz Fourier excitation carries more
    inertial torque than gravity: against its gravity alone its level read -0.75, and
    validate refused a right recording of a right model as a flipped sign."""
    if getattr(model, 'dynamics', None) != 'full':
        return None
    import numpy as np
    from arm_dyn_id.data.preparation import prepare
    from arm_dyn_id.identification.full_dynamics import predict_model
    prep = model.metadata.get('preparation') or {}
    try:
        data = prepare(rec.t, rec.q, rec.tau, cutoff_hz=prep.get('cutoff_hz'),
                       order=int(prep.get('order', 4)), decimate=1)
    except (DataError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return None
    take = slice(None, None, max(1, len(data.t) // LEVEL_ROWS))
    return data.tau[take], predict_model(model, data.q[take], data.dq[take],
                                         data.ddq[take])


def check_level(model, path, rec, bag, effort, conversion, force=False, use='used',
                gravity=None):
    """Refuse a recording whose torque is not the model's arm's in N·m, from its level
    (:func:`arm_dyn_id.validation.plausibility.judge_level` against the model's gravity
    torque, which dominates where it stands well above the friction a joint may hold; a
    full model's whole torque through its own filter, :func:`_whole_torque`):
    effort read in other units or with other constants than the model's (every judged
    joint off the same way: a payload the model lacks raises some joints more than
    others), a flipped sign. Works on a pose held still (a contact recording). ``path``:
    the model's file, for the message; ``gravity``: the magnitude the recording was made at
    (default the model's). DataError unless ``force``."""
    import numpy as np
    from arm_dyn_id.service.contact import holding_bounds
    from arm_dyn_id.validation.check import holding_friction
    from arm_dyn_id.validation.plausibility import judge_level
    take = slice(None, None, max(1, rec.n_samples // LEVEL_ROWS))
    moving = _whole_torque(model, rec) if gravity is None else None
    if moving is not None:
        tau, expected = moving
    else:
        q, tau = rec.q[take], rec.tau[take]
        rows = np.all(np.isfinite(q), axis=1)
        expected = np.full(tau.shape, np.nan)
        expected[rows] = model.gravity_torques(q[rows], gravity=gravity)
    gains = conversion.gains if effort == 'current' else None
    # the friction a joint may hold: the URDF's bound, or the model's own static friction
    floor = np.maximum(holding_friction(model.robot), holding_bounds(model, 1.0))
    verdict = judge_level(tau, expected, list(model.joint_names), floor=floor, effort=effort,
                          gains=gains, limit=LEVEL_LIMIT, every=True)
    if not verdict.ok and not force:
        at = model.robot.gravity_magnitude if gravity is None else gravity
        raise DataError(f'bag {bag}: {verdict.reason} (the level of its torque against the '
                        f'gravity torque of model {path} at {at:g} m/s²: recorded at another '
                        f'gravity, --gravity; --force: {use} anyway)')
    return verdict
