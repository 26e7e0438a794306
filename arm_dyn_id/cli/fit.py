"""Fit the gravity or the full dynamic model to rosbag2 bags (MCAP or sqlite3).

A bag holds sensor_msgs/JointState with the motor current (or, with --effort
torque, the joint torque) in effort, as plain `ros2 bag record /joint_states`
writes it, or is a recorder bag with its stored configuration. Only the URDF and
the torque constants are needed: the joints default to the URDF's movable joints,
extra joints in the messages are ignored, prefixed names are matched. Several
bags are read one after another. Segments come from the bags' markers, or are
detected in the joint angles. A fraction of the forward/backward pairs
(--holdout, seeded) is held out: the model is fitted on the others and validated
on them. A fit the data cannot support (constant or random effort, gravity
torques far from the URDF's, held-out predictions that do not follow) is refused
with exit code 3; --force writes it marked "rejected".

--dynamics auto (default) chooses the model from the data and prints the choice
and why in one line: a stated plan kind or recorded sweep markers decide, else
the motion (slow, or one joint at a time: the gravity model G(q) from sweep
pairs or quasi-static samples; rich motion of several joints at once, e.g. a
Fourier excitation: the full dynamics M(q)q̈ + C(q,q̇)q̇ + G(q) + friction). When
the gravity fit cannot use the recording, auto falls through to the full
dynamics. --dynamics gravity or full asks for one. The full fit low-passes q and
τ with a cut-off chosen from the data (or --cutoff) and scores its estimators
(wls, irls, consistent) on contiguous time blocks each held out in turn
(round(1 / --holdout) blocks).

Writes DIR/model.yaml, DIR/identified.urdf, DIR/validation.json, DIR/fit_data.npz
and DIR/report.html (unless --no-report). model.yaml records what effort the bags
carried and the torque constants, signs, offsets and gear ratios used (its measurement
section): the identifier and compensation nodes serve it with currents in joint_states
and no config.

examples:
  arm-dyn-id fit my_bag/ --urdf arm.urdf --torque-constants 8.2,8.2,6.1,2.3,2.3,2.3 --out fit/
  arm-dyn-id fit day1/ day2/ --urdf panda.urdf --effort torque --out fit/
  arm-dyn-id fit my_bag/ --config my_arm.yaml --out fit/
  arm-dyn-id fit recording_20250101T120000_000Z/ --urdf arm.urdf --out fit/ --holdout 0
  arm-dyn-id fit fourier_bag/ --urdf arm.urdf --effort torque --dynamics full --out fit/

A --config with a floating_base section (a space manipulator, a biped;
docs/floating_base.md), or a recorder bag of such a robot, fits the floating-base
robot instead: its momentum or ZMP
method, --method to choose the estimator, the last 25 % of the bag held out (or
--validate BAG2); writes model.yaml, identified.urdf, validation.json, fit_data.npz
and report.html.
  arm-dyn-id fit space_bag/ --config config/space_manipulator.yaml --out fit/
  arm-dyn-id fit biped_bag/ --config config/biped.yaml --validate biped_bag2/ --out fit/
"""

from pathlib import Path

import numpy as np

from arm_dyn_id.cli import fit_floating
from arm_dyn_id.cli.arm import arm_setup, check_same_robot
from arm_dyn_id.cli.bags import read_all
from arm_dyn_id.cli.options import add_data_arguments, parse_methods
from arm_dyn_id.cli.output import check_out, metrics_text, write_json
from arm_dyn_id.cli.progress import Progress

from arm_dyn_id.errors import ConfigError, DataError, GapError, RankDeficientError

HELP = 'fit the gravity or full dynamic model to a rosbag2 bag (MCAP or sqlite3)'

#: samples of the raw time series kept in fit_data.npz for the report's plots (at most
#: this many rows per array, so the file stays a few MB; written uncompressed: 3.7 MB
#: against 3.0 MB for a 1-minute bag, in 0.01 s against 0.35 s, and read 3x faster)
PLOT_SAMPLES = 10000


class FitRefused(Exception):
    """The fit ran but the data cannot support it (exit code 3)."""


def add_arguments(parser):
    add_data_arguments(parser, several=True)
    parser.add_argument('--out', type=Path, required=True, metavar='DIR',
                        help='output folder (model.yaml, identified.urdf, validation.json, '
                        'report.html)')
    parser.add_argument('--holdout', type=float, default=0.2, metavar='FRACTION',
                        help='fraction of forward/backward pairs held out for validation and '
                        'not fitted (default 0.2; 0 fits every pair, as the identifier node '
                        'does)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the hold-out choice')
    parser.add_argument('--dynamics', choices=('auto', 'gravity', 'full'), default='auto',
                        help='the model to fit: gravity G(q), full dynamics (inertia, '
                        'Coriolis, gravity, friction), or chosen from the data (default auto; '
                        'the choice is printed)')
    parser.add_argument('--methods',
                        help='estimators to run, comma separated; the one best on held-out '
                        'data is kept (gravity: wls, joint_by_joint, threshold, irls, pso; '
                        'default wls,joint_by_joint; full: also consistent, default '
                        'wls,consistent)')
    parser.add_argument('--pair-offsets', choices=('auto', 'yes', 'no'), default='auto',
                        help='gravity from sweeps: fit each swept joint\'s constant in its '
                        'forward/backward averages (Coulomb friction stronger one way, or an '
                        'effort offset) beside the gravity (yes); or not, and warn when '
                        'fitting it would move the model by 5 %% or more (auto, default); or '
                        'neither (no)')
    parser.add_argument('--cutoff', type=float, metavar='HZ',
                        help='full dynamics: low-pass cut-off for q and τ (Hz; default chosen '
                        'from the data and stated in the model file)')
    parser.add_argument('--plan', type=Path, metavar='PLAN_YAML',
                        help='full dynamics: the Fourier excitation plan the bag recorded '
                        '(arm-dyn-id design --out): its highest harmonic sets the cut-off '
                        'instead of the recording\'s band (recorder bags carry it)')
    parser.add_argument('--effort-delay', type=float, metavar='SECONDS',
                        help='the effort\'s lag behind the angles (s; negative: the angles\' '
                        'behind the effort), a driver\'s latency or a filter on the current: '
                        'the effort is moved back by it before the fit (a full fit reads the '
                        'lag and says it from 4 ms)')
    parser.add_argument('--friction', metavar='SPEC',
                        help='full dynamics: friction model, "auto" (default, or the config\'s '
                        '"friction"): the smooth sign\'s width eps, then the terms, chosen '
                        'by the held-out score on time blocks of this recording; or '
                        'comma-separated words: coulomb,viscous (smooth sign, eps 0.01 rad/s), '
                        'offset, stribeck, coulomb_directional, load_coulomb, sign (sharp '
                        'sign)')
    parser.add_argument('--armature', choices=('yes', 'no', 'auto'),
                        help='full dynamics: identify rotor inertias (default the config\'s '
                        '"armature", else auto: fitted with and without, kept when they '
                        'lower the held-out score by 10 %% or more)')
    parser.add_argument('--gravity', type=float,
                        help='gravity magnitude (m/s²) the bag was recorded at (default: the '
                        'config\'s, else 9.81)')
    parser.add_argument('--no-report', action='store_true', help='do not write report.html')
    parser.add_argument('--no-thresholds', action='store_true',
                        help='full dynamics: do not write contact_thresholds.yaml (contact '
                        'thresholds from the fit\'s own held-out residuals, used by the '
                        'identifier node by default)')
    fit_floating.add_arguments(parser)


def fit_bag(args, progress, say=print, painter=None):
    """Everything ``fit`` does except the report; returns the output paths.

    Checks the options and the output folder, resolves the arm from the options
    and the bags, reads them, chooses the model (``--dynamics``, the choice told
    to ``say`` in one line), hands the recording to
    :func:`arm_dyn_id.identification.pipeline.fit_gravity_recording` or
    :func:`~arm_dyn_id.identification.pipeline.fit_full_recording`, judges the
    result (the data gate, :func:`~arm_dyn_id.identification.pipeline.judge_gravity_fit` or
    :func:`~arm_dyn_id.identification.pipeline.judge_full_fit`) and writes
    model.yaml, identified.urdf, validation.json and fit_data.npz.

    Raises
    ------
    FitRefused
        The fit is implausible and ``--force`` was not given (nothing written).

    ``painter`` (:class:`~arm_dyn_id.validation.report.Painter`): told to draw the
    report's plots as soon as fit_data.npz is written, while the model, the URDF and
    validation.json are written.
    """
    from arm_dyn_id.data.bag_reader import read_stored_config
    from arm_dyn_id.identification.pipeline import (FALLBACK_ACCELERATING, DynamicsChoice,
                                                    choose_dynamics)
    from arm_dyn_id.model.robot import RobotModel
    if not 0 <= args.holdout < 1:
        raise ConfigError(f'--holdout {args.holdout} must be in [0, 1)')
    if getattr(args, 'friction', None) is not None:
        from arm_dyn_id.config import check_friction
        args.friction = check_friction(args.friction, '--friction')
    cutoff = getattr(args, 'cutoff', None)
    if cutoff is not None and not (np.isfinite(cutoff) and cutoff > 0):
        raise ConfigError(f'--cutoff {cutoff:g} must be a positive frequency (Hz)')
    args.plan = _read_plan(getattr(args, 'plan', None))
    dynamics = getattr(args, 'dynamics', 'auto')
    if args.methods is not None:
        parse_methods(args.methods, extra=('consistent',) if dynamics != 'gravity' else ())
    bags = [b.expanduser() for b in args.bags]
    out = check_out(args.out, bags)
    for bag in bags:
        if not bag.exists():
            raise DataError(f'bag {bag} does not exist')
    stored = [read_stored_config(bag) for bag in bags]
    stored_doc = next((s for s in stored if s), None)
    config, conversion = arm_setup(args, stored_doc)
    for bag, doc in zip(bags, stored):
        check_same_robot(bag, doc, config, force=args.force)
    urdf = config.urdf
    rec, read_s = read_all(args, conversion, progress, bags)
    rec = _delayed(rec, getattr(args, 'effort_delay', None), progress)
    robot = RobotModel.from_urdf(urdf, joints=rec.joints, gravity=config.gravity,
                                 gravity_direction=config.gravity_direction)
    if not np.allclose(config.gravity_direction, (0.0, 0.0, -1.0)):
        progress.phase(f'gravity {np.round(config.gravity_vector, 4).tolist()} m/s² in the '
                       'URDF\'s root frame')
    # the config names the arm; without one, the name the recorder stored
    robot_name = None if args.config else next(
        (s.get('robot_name') for s in stored if s and s.get('robot_name')), None)
    choice = choose_dynamics(rec.t, rec.q, rec.markers, stored_doc, dq=_measured_velocity(rec),
                             mode=dynamics, joints=rec.joints)
    say(f'dynamics: {choice.kind} ({choice.reason})')
    context = dict(bags=bags, out=out, config=config, rec=rec, robot=robot, urdf=urdf,
                   robot_name=robot_name, read_s=read_s, choice=choice,
                   gains=_gains(args, conversion, rec.joints),
                   measurement=_measurement(args, conversion, rec.joints), painter=painter)
    if choice.kind == 'gravity':
        try:
            return _fit_gravity(args, progress, **context)
        except (DataError, RankDeficientError) as exc:
            if dynamics != 'auto' or \
                    choice.motion.get('acceleration_fraction', 0.0) < FALLBACK_ACCELERATING:
                raise
            reason = ' '.join(str(exc).split())
            reason = reason if len(reason) <= 160 else reason[:157] + '...'
            choice = DynamicsChoice('full', f'the gravity fit cannot use this recording: '
                                    f'{reason}', 'fallback', choice.motion)
            context['choice'] = choice
            say(f'dynamics: full ({choice.reason})')
    return _fit_full(args, progress, **context)


#: s: the largest --effort-delay taken (a lag beyond is not a driver's)
MAX_EFFORT_DELAY = 0.5


def _delayed(rec, delay, progress):
    """The recording with its effort moved back by ``delay`` s (``--effort-delay``): the
    effort at t is the one recorded at t + delay (the last ``delay`` s keep the last)."""
    if delay is None or delay == 0:
        return rec
    if not (np.isfinite(delay) and abs(delay) <= MAX_EFFORT_DELAY):
        raise ConfigError(f'--effort-delay {delay:g} must be a lag in seconds within '
                          f'±{MAX_EFFORT_DELAY:g}')
    from dataclasses import replace

    def moved(x):
        return None if x is None else np.column_stack(
            [np.interp(rec.t + delay, rec.t, x[:, j]) for j in range(x.shape[1])])
    progress.phase(f'effort moved back by {1000 * delay:.3g} ms (--effort-delay): the '
                   'effort at each sample is the one recorded that much later')
    return replace(rec, tau=moved(rec.tau), current=moved(rec.current),
                   notes=tuple(rec.notes) + (f'effort moved back by {delay:g} s '
                                             '(--effort-delay)',))


def _gains(args, conversion, joints):
    """N·m per A of the recording's joints (None for --effort torque), for the gate."""
    if (getattr(args, 'effort', None) or 'current') == 'torque':
        return None
    gains = np.asarray(getattr(conversion, 'gains', ()), dtype=float)
    # the recording's joints are the configuration's, in its order
    return gains if gains.shape == (len(joints),) else None


def _measurement(args, conversion, joints):
    """The model file's ``measurement`` section: what the bags' effort was and the conversion
    this fit applied, in the model's joint order, so that nodes reading joint_states with
    the same effort serve the model from its file alone (model/files.py)."""
    if (getattr(args, 'effort', None) or 'current') == 'torque':
        return {'effort': 'torque'}
    return conversion.measurement(joints)


def _measured_velocity(rec):
    """The recording's measured velocities when it has usable ones, else None."""
    dq = getattr(rec, 'dq', None)
    if dq is not None and np.shape(dq) == np.shape(rec.q) and np.all(np.isfinite(dq)) \
            and np.any(dq != 0):
        return dq
    return None


def _common_summary(args, bags, config, rec, urdf, read_s, seconds, choice, verdict, paths):
    summary = {
        'bag': str(bags[0]), 'bags': [str(b) for b in bags], 'states_topic': rec.states_topic,
        'joints': list(rec.joints), 'joint_names_matched': dict(rec.name_map),
        'notes': list(rec.notes), 'effort': args.effort or 'current',
        'urdf': str(urdf), 'config': str(args.config) if args.config else None,
        'gravity': config.gravity, 'gravity_vector': config.gravity_vector.tolist(),
        'n_samples': rec.n_samples, 'duration_s': float(rec.t[-1] - rec.t[0]),
        'quality': rec.quality['loaded'], 'recorded_quality': rec.quality.get('recorded'),
        'dynamics': choice.to_dict(),
        'plausibility': {'ok': verdict.ok, 'reason': verdict.reason,
                         'cause': getattr(verdict, 'cause', None), **verdict.checks},
        'timings_s': {'read': read_s, 'fit': seconds},
        'outputs': {k: str(v) for k, v in paths.items()},
    }
    if rec.quality.get('bags'):
        summary['quality_per_bag'] = rec.quality['bags']
    return summary


def _save_model(model, out, verdict, progress):
    if verdict.ok:
        return {'model': model.save(out / 'model.yaml')}
    progress.phase(f'warning: the fit is implausible ({verdict.reason}); written '
                   'because of --force, marked rejected')
    return {'model': _save_rejected(model, out / 'model.yaml', verdict.reason)}


def _write_fit(args, progress, bags, out, config, rec, urdf, read_s, choice, fitted, model,
               verdict, measurement=None, save_plot_data=None, painter=None):
    """What a gravity and a full fit write alike: refuse (unless --force), then the plot
    data (``save_plot_data(path)``; ``painter`` starts drawing from it at once), the model
    (with the ``measurement`` section), the identified URDF and validation.json with the
    fit summary. Returns (paths, validation)."""
    if not verdict.ok and not args.force:
        raise FitRefused(f'fit refused, {verdict.reason} (nothing written; --force writes '
                         'the model marked rejected)')
    if measurement is not None:
        model.metadata['measurement'] = measurement
    out.mkdir(parents=True, exist_ok=True)
    data = save_plot_data(out / 'fit_data.npz') if save_plot_data is not None else None
    if data is not None and painter is not None:
        painter.start(out)
    paths = _save_model(model, out, verdict, progress)
    if data is not None:
        paths['data'] = data
    urdf_note = _write_urdf(model, urdf, out / 'identified.urdf')
    if urdf_note is None:
        paths['urdf'] = out / 'identified.urdf'
    else:
        progress.phase(f'identified URDF not written: {urdf_note}')
    summary = dict(_common_summary(args, bags, config, rec, urdf, read_s, fitted.seconds,
                                   choice, verdict, paths), **fitted.summary())
    summary['dynamics'] = choice.to_dict()
    # the report tells a model.yaml edited after the fit from the one these numbers score
    from arm_dyn_id.config import file_sha256
    summary['model_sha256'] = file_sha256(paths['model'])
    validation = dict(fitted.validation, fit_summary=summary)
    paths['validation'] = write_json(out / 'validation.json', validation)
    return paths, validation


def _fit_gravity(args, progress, bags, out, config, rec, robot, urdf, robot_name, read_s,
                 choice, gains=None, measurement=None, painter=None):
    from arm_dyn_id.identification.pipeline import fit_gravity_recording, judge_gravity_fit
    methods = parse_methods(args.methods or 'wls,joint_by_joint')
    fitted = fit_gravity_recording(
        rec, robot, config if args.config else None, methods=methods, holdout=args.holdout,
        seed=args.seed, segments=args.segments, robot_name=robot_name,
        pair_offsets=getattr(args, 'pair_offsets', 'auto'),
        provenance={'data': ', '.join(map(str, bags)), 'config': str(args.config or ''),
                    'effort': args.effort or 'current'},
        where=f'bag {rec.source}', phase=progress.phase)
    model, res, sel = fitted.model, fitted.result, fitted.selection
    progress.phase(f'fitted {model.base.count} base parameters with {res.method} in '
                   f'{fitted.seconds:.1f} s (condition number {res.condition_number:.3g}; '
                   f'chosen {sel.by.replace("_", "-")})')
    if getattr(args, 'pair_offsets', 'auto') == 'yes':
        progress.phase(_pair_offsets_said(model))
    # the data gate: every averaged pair against the URDF, then the held-out ones
    verdict = judge_gravity_fit(fitted, robot, rec.tau, effort=args.effort or 'current',
                                gains=gains)
    if verdict.ok:
        _say_unchecked(progress, _fit_warnings(progress, model, verdict), verdict, args)
    sweeps = [s for pair in fitted.held_out + fitted.training for s in pair]
    held_starts = {s.start for pair in fitted.held_out for s in pair}
    return _write_fit(args, progress, bags, out, config, rec, urdf, read_s, choice, fitted,
                      model, verdict, measurement, painter=painter,
                      save_plot_data=lambda path: _save_plot_data(
                          path, rec, model, sweeps, held_starts, fitted.cases))


def _pair_offsets_said(model):
    """What ``--pair-offsets yes`` did to a gravity fit, in one line."""
    done = (model.metadata.get('fit') or {}).get('pair_offsets')
    if not done:
        return ('--pair-offsets yes: not applied (quasi-static samples have no '
                'forward/backward pairs)')
    if not done.get('fitted'):
        return ('--pair-offsets yes: not applied (no joint is swept at two poses of the '
                'others or more: at one, its constant cannot be told from its gravity)')
    stride = done.get('stride', 1)
    return (f'--pair-offsets yes: each swept joint\'s constant in its forward/backward '
            f'averages fitted beside the gravity for {", ".join(done["fitted"])}'
            + (f' (on every {stride}th averaged sample)' if stride > 1 else ''))


def _fit_warnings(progress, model, verdict, joints=None):
    """Say the warnings of a fit the gate let through and keep them in its model's
    ``fit`` section (:func:`~arm_dyn_id.validation.plausibility.fit_notes`; ``joints``
    for a full fit's unchecked scales); returns the notes."""
    from arm_dyn_id.model.gate import FIT_WARNINGS
    from arm_dyn_id.validation.plausibility import fit_notes
    notes = fit_notes(verdict.checks, joints)
    model.metadata.setdefault('fit', {}).update(notes)
    for key in FIT_WARNINGS:
        if key in notes:
            progress.warn(notes[key])
    return notes


def _say_unchecked(progress, notes, verdict, args):
    """Say what the gate could not check
    (:func:`~arm_dyn_id.validation.plausibility.unchecked_note`)."""
    from arm_dyn_id.validation.plausibility import unchecked_note
    text = unchecked_note(notes, verdict.checks, args.effort or 'current')
    if text:
        progress.phase(text)


def _read_plan(path):
    """The ``--plan`` file as a Plan (None without one); one line when it is not a
    Fourier plan: only a Fourier plan's harmonics say where the motion's band ends."""
    if path is None:
        return None
    from arm_dyn_id.excitation.plans import Plan
    path = path.expanduser()
    if not path.is_file():
        raise ConfigError(f'--plan {path} does not exist')
    try:
        plan = Plan.from_yaml(path)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f'--plan {path} is not an excitation plan (arm-dyn-id design '
                          f'writes them): {exc}') from None
    if plan.top_harmonic_hz is None:
        raise ConfigError(f'--plan {path} is a {plan.kind} plan: only a Fourier plan\'s '
                          'harmonics set the cut-off (leave --plan out)')
    return plan


def _fit_full(args, progress, bags, out, config, rec, robot, urdf, robot_name, read_s,
              choice, gains=None, measurement=None, painter=None):
    from arm_dyn_id.identification.pipeline import (fit_full_recording, judge_full_fit,
                                                    plan_harmonic_hz)
    methods = parse_methods(args.methods, extra=('consistent',)) if args.methods else None
    if getattr(args, 'pair_offsets', 'auto') == 'yes':
        progress.phase('--pair-offsets yes: not applied (it is for gravity fits from sweeps; '
                       'a full fit\'s friction candidates hold an offset and a direction-'
                       'dependent Coulomb term, --friction)')
    harmonic = plan_harmonic_hz(rec.markers, args.plan)
    if harmonic is not None and getattr(args, 'cutoff', None) is None:
        where = '--plan' if args.plan is not None else 'the recorder\'s start marker'
        progress.phase(f'the excitation plan\'s highest harmonic is {harmonic:.3g} Hz '
                       f'({where}): it sets the cut-off')
    try:
        fitted = fit_full_recording(
            rec, robot, config if args.config else None, methods=methods, holdout=args.holdout,
            seed=args.seed, cutoff_hz=getattr(args, 'cutoff', None), harmonic_hz=harmonic,
            robot_name=robot_name,
            provenance={'data': ', '.join(map(str, bags)), 'config': str(args.config or ''),
                        'effort': args.effort or 'current'},
            phase=progress.phase, friction=getattr(args, 'friction', None),
            armature={None: None, 'yes': True, 'no': False, 'auto': 'auto'}[
                getattr(args, 'armature', None)])
    except GapError as error:
        if len(bags) > 1:
            # the bags are joined one after another: the gap is between two of them
            raise DataError(f'{error}. The full-dynamics fit takes one continuous recording, '
                            f'and the {len(bags)} bags are joined one after another: fit one '
                            'of them, and `arm-dyn-id validate` the model on the others') \
                from error
        raise
    model = fitted.model
    fit = model.metadata.get('fit') or {}
    progress.phase(f'fitted {len(model.parameter_names)} parameters ({model.base.count} '
                   f'rigid-body base parameters and friction) with {fit.get("method")} in '
                   f'{fitted.seconds:.1f} s (condition number '
                   f'{fit.get("condition_number", float("nan")):.3g}; physically consistent: '
                   f'{"yes" if model.consistent else "no"})')
    cutoff_warning = (model.metadata.get('preparation') or {}).get('cutoff_warning')
    if cutoff_warning:
        progress.warn(cutoff_warning)
    verdict = judge_full_fit(fitted, robot, rec.tau, effort=args.effort or 'current',
                             gains=gains)
    if verdict.ok:
        _say_unchecked(progress, _fit_warnings(progress, model, verdict, model.joint_names),
                       verdict, args)
    paths, validation = _write_fit(
        args, progress, bags, out, config, rec, urdf, read_s, choice, fitted, model, verdict,
        measurement, painter=painter,
        save_plot_data=lambda path: _save_full_plot_data(path, rec, fitted))
    if verdict.ok and not getattr(args, 'no_thresholds', False):
        _write_thresholds(progress, robot, model, rec, paths)
    return paths, validation


def _write_thresholds(progress, robot, model, rec, paths):
    """contact_thresholds.yaml beside the model, from the fit's own held-out residuals."""
    from arm_dyn_id.service import contact
    from arm_dyn_id.service.contact_from_fit import HELD_OUT_FRACTION, held_out_thresholds
    progress.phase(f'contact thresholds: the last {HELD_OUT_FRACTION:g} of the recording held '
                   'out, fitted without it (WLS), its residual calibrated')
    try:
        th, info = held_out_thresholds(robot, model, rec.t, rec.q, rec.tau,
                                       model_file=str(paths['model']))
    except ConfigError as exc:
        progress.phase(f'no contact thresholds written: {exc}')
        return
    paths['thresholds'] = th.save(contact.thresholds_file(paths['model']))
    progress.phase(f'contact thresholds (false-alarm target {info["false_alarm_target"]:.2g} '
                   f'per state bin, persistence {th.persistence:g} s): standstill '
                   f'{np.round(th.standstill, 3).tolist()} N·m; {paths["thresholds"]}')
    if th.calibration.get('note'):
        progress.phase(f'contact thresholds: {th.calibration["note"]}')


def _save_full_plot_data(path, rec, fitted):
    """The prepared samples, measured and predicted, for the report's plots."""
    data = fitted.prepared
    keep = slice(None, None, max(1, len(data.t) // PLOT_SAMPLES))
    arrays = {'dynamics': np.array('full'), 't': data.t[keep], 'q': data.q[keep],
              'tau': data.tau[keep], 'predicted': fitted.rigid[keep],
              'predicted_friction': fitted.predicted[keep], 'sweeps': np.zeros((0, 5)),
              'joints': np.array(rec.joints),
              'training_q': data.q[keep], 'training_tau': data.tau[keep],
              'training_predicted': fitted.predicted[keep]}
    np.savez(path, **arrays)     # not compressed: see PLOT_SAMPLES
    return path


def _save_rejected(model, path, reason):
    """The model file with ``rejected: <reason>`` after its schema lines."""
    import yaml
    doc = model.to_dict()
    doc = {k: doc[k] for k in ('schema', 'version') if k in doc} | {'rejected': reason} | \
        {k: v for k, v in doc.items() if k not in ('schema', 'version')}
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
    return path


def _write_urdf(model, urdf, path):
    """Write the identified URDF; returns None, or why it was not written."""
    try:
        from arm_dyn_id.model.export import identified_urdf
    except ImportError as exc:
        return f'arm_dyn_id.model.export is not available ({exc})'
    try:
        text = identified_urdf(model, urdf)
    except ValueError as exc:
        return str(exc)
    path.write_text(text)
    return None


def _save_plot_data(path, rec, model, sweeps, held_starts, cases):
    """Decimated raw series and the averaged pairs, for the report's plots."""
    step = max(1, rec.n_samples // PLOT_SAMPLES)
    idx = np.arange(0, rec.n_samples, step)
    q = rec.q[idx]
    pred = model.gravity_torques(q)
    from arm_dyn_id.data.segmentation import MOVING_SPEED, smoothed_velocity, sweep_window
    v = smoothed_velocity(rec.t, rec.q, sweep_window(rec.q), at=idx) \
        if rec.n_samples >= 3 else np.zeros_like(q)
    fc, fv = (np.nan_to_num(model.friction[k]) for k in ('coulomb', 'viscous'))
    moving = np.abs(v) > MOVING_SPEED
    pred_friction = pred + moving * (fc * np.sign(v) + fv * v)
    sw = np.array([[rec.t[s.start], rec.t[s.stop - 1], s.joint_index, s.direction,
                    s.start in held_starts] for s in sweeps], dtype=float).reshape(-1, 5)
    arrays = {'t': rec.t[idx], 'q': q, 'tau': rec.tau[idx], 'predicted': pred,
              'predicted_friction': pred_friction, 'sweeps': sw,
              'joints': np.array(rec.joints)}
    for case, (paired, predicted) in cases.items():
        keep = slice(None, None, max(1, paired.n_samples // PLOT_SAMPLES))
        paired = type(paired)(**{k: getattr(paired, k)[keep] for k in
                                 ('q', 'tau', 'friction', 'dq', 'moving_joint', 'pair_id')})
        predicted = predicted[keep]
        arrays[f'{case}_q'] = paired.q
        arrays[f'{case}_tau'] = paired.tau
        arrays[f'{case}_predicted'] = predicted
        arrays[f'{case}_joint'] = paired.moving_joint
        arrays[f'{case}_pair'] = paired.pair_id
    np.savez(path, **arrays)     # not compressed: see PLOT_SAMPLES
    return path


def run(args):
    floating = fit_floating.floating_config(args.config, args.bags)
    if floating is not None:
        return fit_floating.run_floating(args, floating)
    for option in ('method', 'validate'):
        if getattr(args, option, None) is not None:
            raise ConfigError(f'--{option} applies to floating-base robots (a --config with '
                              'floating_base); an arm fit takes --methods, and arm-dyn-id '
                              'validate scores a model on another bag')
    progress = Progress(quiet=args.quiet)
    if args.no_report:
        return _fit_and_report(args, progress, None)
    from arm_dyn_id.validation.report import Painter
    # started before the fit: the report's matplotlib import runs beside it
    with Painter() as painter:
        return _fit_and_report(args, progress, painter)


def _fit_and_report(args, progress, painter):
    """The arm fit, its metrics and the report (unless ``painter`` is None); exit code."""
    import sys
    try:
        paths, validation = fit_bag(args, progress, say=print, painter=painter)
    except FitRefused as exc:
        if getattr(args, 'debug', False):
            import traceback
            traceback.print_exception(exc, file=sys.stderr)
        print(f'arm-dyn-id fit: {exc}', file=sys.stderr)
        return 3
    print(metrics_text(validation))
    if painter is not None:
        from arm_dyn_id.validation.report import write_report
        progress.phase('writing the report')
        paths['report'] = write_report(args.out.expanduser(), painter=painter)
    for name, path in paths.items():
        print(f'{name}: {path}')
    return 0
