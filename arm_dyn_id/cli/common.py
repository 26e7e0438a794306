"""What the bag commands (fit, validate) share: reading options, progress, output.

Argument parsing and printing only; the fitting and validating logic is in
:mod:`arm_dyn_id.identification.pipeline`.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from arm_dyn_id.data.bag_writer import json_default
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError


class Progress:
    """What a command says while it works: phase lines and progress bars.

    On a terminal a bar is one line redrawn in place (``\\r``):
    ``reading [#########               ]  38 %  2.0 s, ~3.3 s left``; piped or
    redirected, the same figures come as plain lines, one every ``interval``
    seconds, so a log holds no carriage returns. A phase line printed while a
    bar is drawn goes above it. 100 % is shown only when the work is done
    (``done >= total`` or :meth:`_Bar.finish`), never rounded up.

    The time left is the work left over the rate of the bar's recent updates
    (the last ``_Bar.window`` seconds, from its first update on): what happened
    before the bar's first update (opening a file, starting processes) does not
    distort it, and it is there from the second update on.

    Parameters
    ----------
    stream : file, optional
        Default ``sys.stderr``.
    quiet : bool
        No output at all.
    tty : bool, optional
        Draw bars in place; default: whether ``stream`` is a terminal.
    clock : callable, optional
        Monotonic seconds (default :func:`time.monotonic`).
    interval : float
        Seconds between two plain progress lines when not on a terminal.
    """

    def __init__(self, stream=None, quiet=False, tty=None, clock=None, interval=5.0):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, 'isatty', lambda: False)()) if tty is None \
            else bool(tty)
        self.clock = clock or time.monotonic
        self.interval = float(interval)
        self._t0 = self.clock()
        self._bar = None        # the open bar, if any

    def phase(self, text):
        """One line: ``[   12.3 s] text`` (seconds since the command started)."""
        if self.quiet:
            return
        bar = self._bar if self.tty else None
        if bar is not None:
            bar._erase()
        print(f'[{self.clock() - self._t0:7.1f} s] {text}', file=self.stream, flush=True)
        if bar is not None:
            bar._draw()

    def warn(self, text):
        """``warning: text`` on a line of its own, also when quiet."""
        bar = self._bar if self.tty and not self.quiet else None
        if bar is not None:
            bar._erase()
        print(f'warning: {text}', file=self.stream, flush=True)
        if bar is not None:
            bar._draw()

    def bar(self, label, width=24):
        """A progress bar, called as ``bar(done, total)`` or ``bar(fraction)``.

        Returns None when quiet. A bar ends when ``done`` reaches ``total``, on
        ``bar.finish()`` (the work is done) or ``bar.close()`` (it stopped
        short), or when the next bar starts.
        """
        if self.quiet:
            return None
        if self._bar is not None:
            self._bar.close()
        self._bar = _Bar(self, label, width)
        return self._bar


def _columns(stream):
    """The terminal's width (80 when it cannot be told)."""
    import os
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80


def _duration(seconds):
    """``4.2 s``, ``42 s``, ``3 min 05 s``, ``2 h 10 min``."""
    if seconds < 59.5:
        return f'{seconds:.1f} s' if seconds < 9.95 else f'{seconds:.0f} s'
    seconds = round(seconds)
    if seconds < 3600:
        return f'{seconds // 60} min {seconds % 60:02d} s'
    return f'{seconds // 3600} h {seconds % 3600 // 60:02d} min'


class _Bar:
    """One progress bar of :class:`Progress` (see there)."""

    #: seconds of recent updates the rate is measured over
    window = 10.0
    #: a terminal bar is redrawn at most this often (s) unless its percent changed
    redraw = 0.25

    def __init__(self, progress, label, width):
        self._p, self.label, self.width = progress, label, width
        self.t0 = progress.clock()
        self.done, self.total = 0.0, 1.0
        self.closed = False
        self._history = []          # (time, done) of the updates, the last `window` s
        self._last = (self.t0, -1)  # (time, percent) of the last line drawn or printed
        self._shown = ''            # the terminal line as drawn
        self._printed = False       # a plain progress line was printed
        self.note = ''              # shown after the figures (what is being done)

    def __call__(self, done, total=1.0, note=None):
        """Update: ``done`` of ``total`` (any unit); ``note`` is shown after the figures."""
        if self.closed:
            return
        now = self._p.clock()
        self.done, self.total = float(done), float(total)
        if note is not None:
            self.note = str(note)
        history = self._history
        history.append((now, self.done))
        while len(history) > 2 and now - history[1][0] >= self.window:
            history.pop(0)
        if self.total <= 0 or self.done >= self.total:
            self.finish()
            return
        since, shown = self._last
        percent = self.percent
        if self._p.tty:
            if percent != shown or now - since >= self.redraw:
                self._emit(now)
        elif now - since >= self._p.interval and percent != shown:
            self._emit(now)

    @property
    def percent(self):
        """Whole percent done, rounded down: 100 only when done >= total."""
        if self.total <= 0 or self.done >= self.total:
            return 100
        return min(99, max(0, int(100.0 * self.done / self.total)))

    def time_left(self):
        """Seconds left at the rate of the recent updates; None before two updates."""
        if len(self._history) < 2:
            return None
        (t_a, d_a), (t_b, d_b) = self._history[0], self._history[-1]
        if t_b <= t_a or d_b <= d_a:
            return None
        return max(0.0, (self.total - self.done) * (t_b - t_a) / (d_b - d_a))

    def text(self, now, bar=True, width=None):
        """``label [####    ]  41 %  2.0 s, ~2.9 s left`` (no bar: a plain line)."""
        parts = [self.label]
        if bar:
            width = self.width if width is None else width
            fill = width * self.percent // 100
            parts.append(f'[{"#" * fill}{" " * (width - fill)}]')
        parts.append(f'{self.percent:3d} %  {_duration(now - self.t0)}')
        if self.percent < 100:
            left = self.time_left()
            parts[-1] += ', time left ...' if left is None else f', ~{_duration(left)} left'
            if self.note:
                parts.append(f'  {self.note}')
        return ' '.join(parts)

    def _emit(self, now):
        self._last = (now, self.percent)
        if self._p.tty:
            room = max(_columns(self._p.stream) - 1, 20)
            line = self.text(now)
            if len(line) > room:     # a narrow terminal: a shorter bar, then cut the end
                line = self.text(now, width=max(self.width - (len(line) - room), 8))
            self._shown = line[:room]
            self._draw()
        else:
            self._printed = True
            print(self.text(now, bar=False), file=self._p.stream, flush=True)

    def _draw(self):
        if self._shown:
            self._p.stream.write('\r' + self._shown)
            self._p.stream.flush()

    def _erase(self):
        if self._shown:
            self._p.stream.write('\r' + ' ' * len(self._shown) + '\r')
            self._p.stream.flush()

    def finish(self):
        """The work is done: 100 % (on a terminal, or piped after progress lines).

        A bar that never had an update stays silent.
        """
        if self.closed:
            return
        self.done = max(self.done, self.total)
        if self._history and (self._p.tty or self._printed):
            self._emit(self._p.clock())
        self.close()

    def close(self):
        """End the bar where it stands; a terminal line is left on a line of its own."""
        if self.closed:
            return
        self.closed = True
        if self._p._bar is self:
            self._p._bar = None
        if self._p.tty and self._shown:
            self._p.stream.write('\n')
            self._p.stream.flush()


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
    parser.add_argument('--effort', choices=('current', 'torque'), default='current',
                        help='what joint_states.effort holds: motor current in A (default; '
                        'converted with the torque constants) or joint torque in N·m '
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
    for bag in bags:
        if not bag.exists():
            raise DataError(f'bag {bag} does not exist')
    stored = [read_stored_config(bag) for bag in bags]
    if args.urdf is None and args.config is None:
        args.urdf = model.robot.source and Path(model.robot.source)
    if args.joints is None and args.config is None:
        args.joints = ','.join(model.joint_names)
    config, conversion = arm_setup(args, next((s for s in stored if s), None))
    if tuple(config.joints) != tuple(model.joint_names):
        raise JointNameError(f'model {args.model} is of joints {list(model.joint_names)}, the '
                             f'arm given has {list(config.joints)}: a model of another robot '
                             f'is not {use}')
    model_sha = (model.to_dict().get('urdf') or {}).get('sha256')
    for bag, doc in zip(bags, stored):
        check_same_robot(bag, doc, config, force=args.force)
        if doc and doc.get('urdf_sha256') and model_sha and doc['urdf_sha256'] != model_sha \
                and not args.force:
            raise DataError(f'bag {bag} was recorded with another URDF than model '
                            f'{args.model} was fitted with (sha256 differ): a model of another '
                            f'robot is not {use} (--force anyway)')
    return model, stored, config, conversion


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


def check_out(out, bags):
    """Refuse an output folder that cannot be written or lies inside an input bag.

    Returns
    -------
    pathlib.Path
        The folder, user-expanded (not created yet).
    """
    import os
    out = Path(out).expanduser()
    target = out.resolve()
    for bag in bags:
        b = Path(bag).expanduser().resolve()
        if target == b or b in target.parents:
            raise ConfigError(f'--out {out} is inside the input bag {bag}: choose a folder '
                              'outside it')
    if target.exists() and not target.is_dir():
        raise ConfigError(f'--out {out} is a file, not a folder')
    if (target / 'metadata.yaml').exists():
        raise ConfigError(f'--out {out} is a rosbag2 bag: choose another folder')
    parent = target
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f'--out {out}: cannot write in {parent}')
    return out


def describe_quality(q):
    """One line of what reading kept and dropped, with every discarded message counted.

    The delivered share of the expected samples comes first when it is below
    :data:`arm_dyn_id.data.quality.MIN_DELIVERED` (see :func:`loss_warning` for the
    warning line that goes with it).
    """
    from arm_dyn_id.data.quality import MIN_DELIVERED, delivered_fraction, rate_text
    dropped = q['duplicates'] + q['out_of_order'] + q['nonfinite'] + \
        sum((q.get('rejected') or {}).values())
    parts = [f'{q["rate_hz"]:.1f} Hz']
    fraction = delivered_fraction(q)
    if fraction < MIN_DELIVERED:
        parts[0] += (f' of {rate_text(q["expected_rate_hz"])} expected, {100 * fraction:.1f} % '
                     'delivered')
    if q['gaps']:
        parts.append(f'{q["gaps"]} gaps (longest {q["max_gap_s"]:.3g} s, ~{q["drops"]} '
                     'samples missing; not interpolated)')
    else:
        parts.append('no gaps')
    if dropped:
        what = [f'{q[k]} {label}' for k, label in (
            ('duplicates', 'repeated stamps'), ('out_of_order', 'backward stamps'),
            ('nonfinite', 'NaN or inf')) if q[k]]
        what += [f'{v} {k.replace("_", " ")}' for k, v in (q.get('rejected') or {}).items()
                 if v]
        parts.append(f'dropped {dropped} of {q["messages"]} messages ({", ".join(what)})')
    else:
        parts.append(f'nothing dropped of {q["messages"]} messages')
    return ', '.join(parts)


def read(args, conversion, progress, bag=None):
    """Read one bag (``bag``, default ``args.bag``), reporting what was read.

    Returns
    -------
    rec : Recording
    seconds : float
    """
    from arm_dyn_id.data.bag_reader import read_bag
    bag = args.bag if bag is None else bag
    progress.phase(f'reading {bag}')
    t0 = time.perf_counter()
    rec = read_bag(bag, config=conversion, states_topic=args.states_topic,
                   recover=args.recover, progress=progress.bar('reading'),
                   joint_map=parse_joint_map(getattr(args, 'joint_map', None)))
    seconds = time.perf_counter() - t0
    for note in rec.notes:
        progress.phase(note)
    progress.phase(f'read {rec.n_samples} samples of {len(rec.joints)} joints from '
                   f'{rec.states_topic} in {seconds:.1f} s '
                   f'({describe_quality(rec.quality["loaded"])})')
    from arm_dyn_id.data.quality import loss_warning
    lossy = loss_warning(rec.quality['loaded'], what=f'bag {bag}')
    if lossy:
        progress.warn(lossy)
    return rec, seconds


def read_all(args, conversion, progress, bags):
    """Read every bag and place them one after another (:func:`concatenate_recordings`).

    Returns
    -------
    rec : Recording
    seconds : float
    """
    from arm_dyn_id.data.bag_reader import concatenate_recordings
    recs, seconds = [], 0.0
    for bag in bags:
        rec, s = read(args, conversion, progress, bag)
        recs.append(rec)
        seconds += s
    if len(recs) > 1:
        progress.phase(f'{len(recs)} bags read one after another: {sum(r.n_samples for r in recs)}'
                       ' samples')
    return concatenate_recordings(recs), seconds


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


def _finite(obj):
    # strict JSON: NaN and inf become null
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    return obj


def write_json(path, doc):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(doc), indent=1, default=json_default,
                               allow_nan=False) + '\n')
    return path


def metrics_text(validation):
    """Tables (seed 000 Tables 3-4 style) of every case of a validation dict."""
    from arm_dyn_id.validation.metrics import metrics_table
    parts = []
    for case, joints in validation.items():
        if case == 'fit_summary':
            continue
        parts.append(metrics_table([_Row(j, **v) for j, v in joints.items()], title=case))
    return '\n\n'.join(parts)


class _Row:
    def __init__(self, joint, **kw):
        self.joint = joint
        for k in ('max_torque', 'rmse', 'rmse_percent', 'mae', 'rho'):
            v = kw.get(k)
            setattr(self, k, float('nan') if v is None else v)
