"""Check a bag's torques against the nominal URDF before trusting a fit.

For rich motion (a Fourier excitation: how ``fit --dynamics auto`` decides), every
sample of the bag is compared with the full rigid-body torque of the nominal URDF
(pinocchio RNEA at the filtered q, q̇, q̈, as ``fit`` prepares them); otherwise (static
holds, slow sweeps) gravity is compared on the still or slow samples. ``--dynamics``
asks for one. Per joint a scale (the torque constant's error), its sign (a reversed
joint), an offset and, as nuisance terms, friction (and, in the full model, a rotor
inertia) are fitted; two joints that look swapped and effort that looks like joint
torque read as motor current (or the reverse) are named. Each joint is OK, WARN, FAIL
or UNTESTABLE with the reason, and a wrong constant comes with the corrected one
(measured = s x nominal, so k / s). A nominal URDF with a negative mass or an
impossible inertia is refused first. See docs/check.md.

Exit code 0 when every joint was tested and agrees (warnings allowed), 4 when a joint
fails (sign flipped, swapped, scale off by more than 30 %), 3 when none fails but a
joint could not be tested, 2 for bad input (a missing file or option, an implausible
URDF), printed as one line.

examples:
  arm-dyn-id check my_bag/ --urdf arm.urdf --torque-constants 8.2,8.2,6.1,2.3,2.3,2.3
  arm-dyn-id check my_bag/ --config my_arm.yaml --json check.json
"""

from pathlib import Path

import numpy as np

HELP = 'pre-flight check: signs, torque constants, offsets, swapped joints against the URDF'

#: exit codes besides 0 (2, bad input, is the dispatcher's)
EXIT_UNTESTABLE, EXIT_FAILED = 3, 4


def add_arguments(parser):
    from arm_dyn_id.cli.options import add_data_arguments
    add_data_arguments(parser)
    if not any('--effort' in a.option_strings for a in parser._actions):
        parser.add_argument('--effort', choices=('current', 'torque'), default='current',
                            help='what the driver puts in joint_states.effort (default '
                            'current, converted with --torque-constants)')
    parser.add_argument('--gravity', type=float,
                        help='gravity (m/s²) the bag was recorded at (default: the config\'s, '
                        'else 9.81)')
    parser.add_argument('--max-speed', type=float, default=None, metavar='RAD_S',
                        help='gravity comparison: joint speed under which a sample counts as '
                        'slow (default 0.05)')
    if not any('--dynamics' in a.option_strings for a in parser._actions):
        parser.add_argument('--dynamics', choices=('auto', 'gravity', 'full'), default='auto',
                            help='compare gravity on the still or slow samples, or the full '
                            'rigid-body torque on every sample; auto (default): as fit '
                            'chooses, full for rich motion such as a Fourier excitation')
    if not any('--cutoff' in a.option_strings for a in parser._actions):
        parser.add_argument('--cutoff', type=float, default=None, metavar='HZ',
                            help='low-pass cut-off of the full model\'s derivatives (default: '
                            'from the data, as fit does)')
    parser.add_argument('--holding-friction', type=float, default=None, metavar='FRACTION',
                        help='friction a joint may hold at rest, as a fraction of its URDF '
                        'effort limit, where the URDF\'s <dynamics friction> gives none and '
                        'the joint never moves (default 0.03; 0 trusts still joints as if '
                        'frictionless). A joint whose failing reading that friction could '
                        'explain is untestable, not failed')
    parser.add_argument('--json', type=Path, metavar='PATH',
                        help='write the per-joint numbers as JSON')


def _plain_conversion(args, urdf):
    """Current -> torque for a bag without stored configuration, joints from the URDF.

    Used only when :func:`arm_dyn_id.cli.arm.arm_setup` gives none.
    """
    from arm_dyn_id.cli.options import parse_constants
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


#: a cut-off whose derivatives are noise is halved at most this many times
CUTOFF_RETRIES = 3


#: a step longer than this many median steps splits the recording for the full model
GAP_STEPS = 10


def _pieces(t):
    """Index ranges of the gap-free pieces of a recording, longest first."""
    steps = np.diff(t)
    cuts = np.flatnonzero(steps > GAP_STEPS * np.median(steps)) + 1 if len(steps) else []
    edges = [0, *cuts, len(t)]
    return sorted(((a, b) for a, b in zip(edges[:-1], edges[1:])), key=lambda r: r[0] - r[1])


def _prepare(rec, robot, cutoff, load_frame=None):
    """:func:`prepare` of every gap-free piece long enough, at one cut-off (the longest
    piece's when not given), stacked; (Prepared-like namespace, info)."""
    from types import SimpleNamespace

    from arm_dyn_id.data.preparation import prepare
    from arm_dyn_id.errors import DataError
    from arm_dyn_id.validation.check import DEFAULTS, friction_features, nominal_columns
    parts, info, first_error = [], None, None
    for a, b in _pieces(rec.t):
        try:
            prep = prepare(rec.t[a:b], rec.q[a:b], rec.tau[a:b], cutoff_hz=cutoff,
                           features=friction_features(DEFAULTS['coulomb_velocity']),
                           regressor=nominal_columns(robot, payload_frame=load_frame))
        except DataError as exc:
            if info is None and first_error is None:
                first_error = exc
            continue
        if info is None:
            info = dict(prep.info, pieces=0, n_kept=0)
            cutoff = info['cutoff_hz']
        info['pieces'] += 1
        info['n_kept'] += int(prep.info['n_kept'])
        parts.append(prep)
    if not parts:
        raise first_error or DataError('no piece of the recording is long enough to filter')
    stack = SimpleNamespace(**{k: np.concatenate([getattr(p, k) for p in parts])
                               for k in ('q', 'dq', 'ddq', 'tau', 'regressor', 'features')})
    return stack, info


def _options(args):
    """The check's tolerances the command line overrides."""
    from arm_dyn_id.errors import ConfigError
    value = getattr(args, 'holding_friction', None)
    if value is None:
        return {}
    if not (np.isfinite(value) and 0 <= value < 1):
        raise ConfigError(f'--holding-friction {value:g}: give a fraction of the effort '
                          'limit in [0, 1), e.g. 0.03')
    return {'holding_friction': float(value)}


def _full_check(rec, robot, k_e, effort, cutoff, progress, options=None):
    """The full rigid-body check of the whole recording; (result, info) or None, reason.

    A recording with gaps is filtered piece by piece. When the derivatives at the
    cut-off are noise (the URDF's torque much rougher than the measured one), the
    cut-off is halved and the check run again. When a scale fails, it is run once more
    with the torque columns of a load at the payload frame (a load the URDF lacks).
    """
    from arm_dyn_id.data.preparation import MIN_CUTOFF_HZ
    from arm_dyn_id.errors import DataError
    from arm_dyn_id.validation.check import FAIL, check_dynamics, default_load_frame
    for attempt in range(CUTOFF_RETRIES + 1):
        try:
            prep, info = _prepare(rec, robot, cutoff)
        except DataError as exc:
            return None, str(exc)
        pieces = f', {info["pieces"]} pieces between gaps' if info['pieces'] > 1 else ''
        progress.phase(f'full model on {info["n_kept"]} filtered samples (cut-off '
                       f'{info["cutoff_hz"]:.3g} Hz, {info["cutoff_source"]}{pieces})')
        try:
            result = check_dynamics(robot, prep.q, prep.dq, prep.ddq, prep.tau,
                                    prep.regressor, prep.features, torque_constants=k_e,
                                    effort=effort, options=options)
            frame = default_load_frame(robot)
            if frame is not None and any(c.status == FAIL and 'scale off' in c.verdict
                                         for c in result.joints):
                progress.phase(f'a scale fails: is there a load at {frame} the URDF lacks?')
                prep, _ = _prepare(rec, robot, info['cutoff_hz'], frame)
                result = check_dynamics(robot, prep.q, prep.dq, prep.ddq, prep.tau,
                                        prep.regressor, prep.features, torque_constants=k_e,
                                        effort=effort, options=options, load_frame=frame)
        except DataError as exc:
            if 'derivatives are noise' not in str(exc):
                raise
            why = f'cut-off {info["cutoff_hz"]:.3g} Hz: {exc}'
            cutoff = 0.5 * info['cutoff_hz']
            if attempt == CUTOFF_RETRIES or cutoff < MIN_CUTOFF_HZ:
                return None, why
            progress.warn(f'{why}: trying {cutoff:.3g} Hz')
            continue
        return (result, info), None


def run(args):
    from arm_dyn_id.cli.arm import arm_setup, urdf_for
    from arm_dyn_id.cli.bags import read
    from arm_dyn_id.cli.options import check_gravity_options, parse_constants
    from arm_dyn_id.cli.output import write_json
    from arm_dyn_id.cli.progress import Progress
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.data.segmentation import (QUASI_STATIC_SPEED, filtered_derivatives,
                                              quasi_static_mask)
    from arm_dyn_id.errors import ConfigError, DataError
    from arm_dyn_id.identification.pipeline import choose_dynamics
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.validation.check import OK, FAIL, UNTESTABLE, check_samples, check_urdf
    progress = Progress(quiet=args.quiet)
    effort = getattr(args, 'effort', None) or 'current'
    magnitude, given_direction = check_gravity_options(args)
    if args.cutoff is not None and not args.cutoff > 0:
        raise ConfigError(f'--cutoff {args.cutoff} must be > 0 (Hz)')
    options = _options(args)
    bag = args.bag.expanduser()
    if not bag.exists():
        raise DataError(f'bag {bag} does not exist')
    stored = read_stored_config(bag)
    config, conversion = arm_setup(args, stored)
    urdf = urdf_for(args, config, stored)
    if conversion is None and stored is None:
        conversion = _plain_conversion(args, urdf)
    gravity = magnitude or (config.gravity if config else None) or \
        float((stored or {}).get('gravity', 9.81))
    direction = given_direction if given_direction is not None else \
        (getattr(config, 'gravity_direction', None) if config else None)
    # the URDF first: a negative mass would read as flipped signs
    check_urdf(RobotModel.from_urdf(urdf, gravity=gravity))
    rec, _ = read(args, conversion, progress)
    robot = RobotModel.from_urdf(urdf, joints=rec.joints, gravity=gravity,
                                 **({'gravity_direction': direction}
                                    if direction is not None else {}))
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
    from arm_dyn_id.validation.angle_convention import degrees_message
    in_degrees = degrees_message(robot, rec.q)
    if in_degrees:      # before any comparison: every derivative would be 57x
        print(f'pre-flight check of {bag} against {urdf}\n\nFAIL: {in_degrees}')
        return EXIT_FAILED
    dynamics = getattr(args, 'dynamics', None) or 'auto'
    measured = rec.dq if rec.dq is not None and np.shape(rec.dq) == np.shape(rec.q) and \
        np.all(np.isfinite(rec.dq)) and np.any(rec.dq != 0) else None
    choice = choose_dynamics(rec.t, rec.q, rec.markers, stored, dq=measured, mode=dynamics,
                             joints=rec.joints)
    progress.phase(f'dynamics: {choice.kind} ({choice.reason})')
    full, why_not = None, None
    if choice.kind == 'full':
        full, why_not = _full_check(rec, robot, k_e, effort, args.cutoff, progress,
                                    options)
        if full is None:
            progress.warn(f'the full model cannot use this recording ({why_not}): '
                          'gravity on its still or slow samples only')
    extra = {'dynamics': {'kind': choice.kind, 'reason': choice.reason}}
    if full is not None:
        result, info = full
        what = (f'full rigid-body model, {result.n_samples} filtered samples, cut-off '
                f'{info["cutoff_hz"]:.3g} Hz')
        extra['preparation'] = info
    else:
        dq = rec.dq if np.all(np.isfinite(rec.dq)) else None
        speed = QUASI_STATIC_SPEED if args.max_speed is None else args.max_speed
        mask = quasi_static_mask(rec.t, rec.q, dq, max_speed=speed)
        _, velocity, _ = filtered_derivatives(rec.t, rec.q, dq=dq)
        span = float(np.sum(np.diff(rec.t)[mask[1:] & mask[:-1]]))
        progress.phase(f'{int(mask.sum())} of {rec.n_samples} samples are static or slow '
                       f'(every joint under {speed:g} rad/s; {span:.1f} s)')
        try:
            result = check_samples(robot, rec.q, rec.tau, mask=mask, velocity=velocity,
                                   torque_constants=k_e, effort=effort, options=options)
        except DataError as exc:
            # as fit's auto: when the gravity comparison cannot use the recording, the
            # full model may
            if dynamics != 'auto' or why_not is not None or 'quasi-static' not in str(exc):
                raise
            full, why_not = _full_check(rec, robot, k_e, effort, args.cutoff, progress,
                                        options)
            if full is None:
                raise
            (result, info), mask = full, None
        if mask is None:
            what = (f'full rigid-body model, {result.n_samples} filtered samples, cut-off '
                    f'{info["cutoff_hz"]:.3g} Hz')
            extra['preparation'] = info
        else:
            what = f'gravity, {result.n_samples} quasi-static samples'
            extra.update(n_quasi_static=int(mask.sum()), quasi_static_seconds=span,
                         full_model_not_used=why_not)
    print(f'pre-flight check of {bag} against {urdf} (g = {gravity:g} m/s², effort = '
          f'{effort}, {what})\n')
    print(result.table())
    angles = None
    if result.status != OK:
        # a joint's zero or direction off the URDF's reads as signs and scales per joint
        # (degrees were said before anything was compared)
        from arm_dyn_id.data.segmentation import filtered_derivatives
        from arm_dyn_id.validation.angle_convention import angle_hint
        smoothed = filtered_derivatives(rec.t, rec.q,
                                        dq=rec.dq if np.all(np.isfinite(rec.dq)) else None)
        angles = angle_hint(robot, smoothed[0], rec.tau, *smoothed[1:3])
        if angles:
            print(f'\nFAIL: the angles, before any joint: {angles}')
            extra['angles'] = angles
    geared = [conv.get(k) for k in ('gear_ratios', 'efficiencies') if conv.get(k) is not None]
    if effort == 'current' and any(np.any(np.asarray(g, dtype=float) != 1.0) for g in geared):
        print('(the constants shown are at the joint: torque_constants x gear_ratios x '
              'efficiencies; divide torque_constants by the same scale)')
    if args.json:
        doc = dict(result.to_dict(), bag=str(bag), urdf=str(urdf), gravity=gravity,
                   states_topic=rec.states_topic, n_read=rec.n_samples,
                   torque_constants=None if k_e is None else list(map(float, k_e)), **extra)
        print(f'json: {write_json(args.json.expanduser(), doc)}')
    # a constant off by its scale, not a joint that failed by its sign alone (x-1)
    from arm_dyn_id.validation.check import DEFAULTS
    wrong_constants = [c.joint for c in result.joints if c.status == FAIL
                       and np.isfinite(c.corrected_constant) and c.torque_constant
                       and abs(c.corrected_constant / c.torque_constant - 1)
                       > DEFAULTS['scale_fail']]
    if effort == 'current' and wrong_constants:
        print(f'torque constants of {", ".join(wrong_constants)} off: if the drive gains are '
              'uncertain, measure them from two runs of one trajectory without and with a '
              'known load: arm-dyn-id calibrate (docs/calibrate.md)')
    if result.status == FAIL or angles:
        return EXIT_FAILED
    if result.status == UNTESTABLE:
        return EXIT_UNTESTABLE
    return 0
