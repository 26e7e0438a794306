"""``arm-dyn-id demo``: the experiment of seed 000 §3 on a simulated arm.

1. Identify the humanoid arm at Earth gravity: ``sim_arm_node``,
   ``excitation_node`` (reciprocating plan at 3 °/s), ``recorder_node`` and
   ``identifier_node`` run as separate processes in sim time.
2. Validate at lunar gravity on a different (held-out) trajectory, without and
   with a 0.3 kg payload, on the simulated arm: measured against predicted
   torque per joint, like seed 000 Tables 3-4.

Writes into ``--out``: ``model.yaml``, ``identified.urdf``, ``validation.json``,
``plan.yaml``, ``validation_plan.yaml``, plots, the bag, the nodes' logs.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

HELP = 'run the whole pipeline on a simulated arm (seed 000 experiment)'

MOON = 1.63
PAYLOAD_MASS = 0.3


def add_arguments(parser):
    parser.add_argument('--out', default='demo_output',
                        help='output folder (default: %(default)s)')
    parser.add_argument('--quick', action='store_true',
                        help='short trajectories (under 2 minutes in all on 2 cores), as the '
                             'tests use')
    parser.add_argument('--config', default='humanoid_arm.yaml',
                        help='arm config with a sim_arm_node section (default: %(default)s)')
    parser.add_argument('--speed', type=float, default=4.0,
                        help='simulated seconds per wall-clock second (default: %(default)s)')
    parser.add_argument('--payload-com', default='0.0,0.0,0.05',
                        help='payload centre of mass in the flange frame, m (default: '
                             '%(default)s)')


_LINE = {'open': False}


def _say(text):
    """Progress on stderr: a progress line (``... %``) updates in place on a terminal,
    plain lines when piped (logs, CI)."""
    progress = text.startswith('[identify]') and ' % ' in text
    if progress and sys.stderr.isatty():
        print('\r' + text + '\033[K', end='', file=sys.stderr, flush=True)
        _LINE['open'] = True
        return
    if _LINE['open']:
        print(file=sys.stderr)
        _LINE['open'] = False
    print(text, file=sys.stderr, flush=True)


def simulate_case(config, sim_params, plan, gravity, payload=None, progress=None):
    """Run ``plan`` on the simulated arm at ``gravity`` (with ``payload`` = (mass kg,
    com (3,) m in the flange frame) attached): the measurement side of a validation case,
    which needs no model. Returns the :class:`~arm_dyn_id.sim.run.SimRun`."""
    from arm_dyn_id.sim.arm import SimArm
    from arm_dyn_id.sim.run import run_plan

    sim = SimArm(config, sim_params)
    sim.set_gravity(gravity)
    if payload is not None:
        mass, com = payload
        sim.attach_payload(mass, com)
    return run_plan(sim, plan, progress=progress)


def compare_case(model, config, run, gravity, payload=None):
    """The model's gravity torques along ``run`` against the simulated rigid-body torque,
    on the quasi-static samples. Returns (predicted (N, n), mask (N,), metrics)."""
    from arm_dyn_id.model.robot import Payload
    from arm_dyn_id.identification.pairing import QUASI_STATIC_PHASES, phase_mask
    from arm_dyn_id.validation.metrics import joint_metrics

    model.set_payload(None)
    if payload is not None:
        mass, com = payload
        model.set_payload(Payload(mass=mass, com=tuple(com), frame='flange'))
    try:
        predicted = model.gravity_torques(run.q, gravity=gravity)
    finally:
        model.set_payload(None)
    mask = phase_mask(run.t, run.markers, QUASI_STATIC_PHASES)
    metrics = joint_metrics(run.tau_rigid_body[mask], predicted[mask], config.joints,
                            noise_amplitude=None)
    return predicted, mask, metrics


def validate_on_sim(model, config, sim_params, plan, gravity, payload=None, progress=None):
    """Run ``plan`` on the simulated arm at ``gravity`` and compare with the model.

    Returns
    -------
    run : SimRun
    predicted : ndarray, (N, n)
    mask : ndarray of bool, (N,)
        The quasi-static samples the metrics are computed on.
    metrics : list of JointMetrics
    """
    run = simulate_case(config, sim_params, plan, gravity, payload, progress)
    return (run,) + compare_case(model, config, run, gravity, payload)


# the held-out simulations in worker processes -----------------------------------------
_WORKER = {}


def _init_worker(progress):
    _WORKER['progress'] = progress


def _simulate_in_worker(slot, config_source, plan_path, gravity, payload):
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.excitation.plans import Plan
    from arm_dyn_id.sim.arm import SimParams

    config = load_arm_config(config_source)
    progress = _WORKER['progress']

    def report(fraction):
        progress[slot] = fraction
    run = simulate_case(config, SimParams.from_config(config), Plan.from_yaml(plan_path),
                        gravity, payload, report)
    progress[slot] = 1.0
    return run


class HeldOutRuns:
    """The validation cases simulated side by side, one process each, instead of one
    after the other (the quick demo: 2 x 12 s of one core each).

    Started once the recording is closed and the arm stopped, beside the identifier's
    fit: started before the identification at the lowest priority (they need no model),
    they slowed the lock-stepped nodes down by more than they saved (the quick demo 171 s
    against 163 s). ``cases``: name -> payload or
    None; ``config``: the arm config (its source is re-read by the workers, with the
    same simulation parameters)."""

    def __init__(self, config, plan_path, gravity, cases):
        import multiprocessing

        ctx = multiprocessing.get_context('spawn')     # the CLI process may hold DDS threads
        self.names = list(cases)
        self._progress = ctx.Array('d', len(self.names), lock=False)
        self._pool = ctx.Pool(len(self.names), initializer=_init_worker,
                              initargs=(self._progress,))
        self._results = {name: self._pool.apply_async(
            _simulate_in_worker, (k, config.source, str(plan_path), gravity, payload))
            for k, (name, payload) in enumerate(cases.items())}

    def progress_line(self):
        return ', '.join(f'{name} {100 * self._progress[k]:3.0f} %'
                         for k, name in enumerate(self.names))

    def results(self, log, every=5.0):
        """Wait for every case (a progress line every ``every`` s); name -> SimRun. A
        worker's exception is raised here."""
        for result in self._results.values():
            while True:
                result.wait(every)
                if result.ready():
                    break
                log(f'[validate] simulating the held-out plan: {self.progress_line()}')
        return {name: result.get() for name, result in self._results.items()}

    def close(self):
        """End the workers (at once: on an error nobody waits for their cases)."""
        self._pool.terminate()
        self._pool.join()


def plot_case(path, title, run, predicted, mask, joints):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(joints), 1, figsize=(10, 1.8 * len(joints)), sharex=True)
    t = run.t
    measured = np.where(mask[:, None], run.tau_rigid_body, np.nan) * 1000
    pred = np.where(mask[:, None], predicted, np.nan) * 1000
    step = max(len(t) // 4000, 1)
    for j, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(t[::step], measured[::step, j], lw=1.6, label='simulated')
        ax.plot(t[::step], pred[::step, j], lw=0.9, ls='--', label='identified model')
        ax.set_ylabel(f'{joints[j]}\n(N·mm)', fontsize=8)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(loc='upper right', fontsize=8)
    np.atleast_1d(axes)[-1].set_xlabel('time (s)')
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(args):
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.errors import ConfigError
    from arm_dyn_id.excitation.plans import reciprocating_plan, validation_plan
    from arm_dyn_id.model.robot import RobotModel
    from arm_dyn_id.sim.arm import SimParams

    wall_start = time.monotonic()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = load_arm_config(args.config)
    sim_params = SimParams.from_config(config)
    if config.gravity != 9.81 and abs(config.gravity - 9.81) > 1e-9:
        raise ConfigError(f'the demo identifies at Earth gravity; {config.source} says '
                          f'gravity = {config.gravity}')
    try:
        payload_com = [float(x) for x in args.payload_com.split(',')]
    except ValueError:
        payload_com = []
    if len(payload_com) != 3:
        raise ConfigError(f'--payload-com {args.payload_com!r} needs three numbers x,y,z (m)')
    robot = RobotModel.from_config(config)

    _say(f'[design] identification and validation plans for {config.robot_name} '
         f'({"quick" if args.quick else "full"})')
    plan = reciprocating_plan(robot, config, quick=args.quick)
    vplan = validation_plan(robot, config, quick=args.quick)
    plan.to_yaml(out / 'plan.yaml')
    vplan.to_yaml(out / 'validation_plan.yaml')
    _say(f'[design] identification {plan.duration:.0f} s, validation {vplan.duration:.0f} s of '
         f'motion; condition number {plan.info.get("condition_number", float("nan")):.1f}')

    cases = {
        'moon': None,
        f'moon_payload_{PAYLOAD_MASS:g}kg': (PAYLOAD_MASS, payload_com),
    }
    from arm_dyn_id.nodes.demo_pipeline import run_identification
    held = {}

    def start_validation():
        held['runs'] = HeldOutRuns(config, out / 'validation_plan.yaml', MOON, cases)
    try:
        # the validation simulations start once the recording is closed, beside the fit
        model_text, info = run_identification(
            config.source, out / 'plan.yaml', plan.duration, out, real_time_factor=args.speed,
            log=_say, on_recorded=start_validation)
        return _validate(args, config, sim_params, cases, held['runs'], out, wall_start,
                         model_text, info)
    finally:
        if 'runs' in held:
            held['runs'].close()


def _validate(args, config, sim_params, cases, held_out, out, wall_start, model_text, info):
    from arm_dyn_id.model.gravity import GravityModel
    from arm_dyn_id.validation.metrics import metrics_table

    (out / 'model.yaml').write_text(model_text)
    import yaml
    model = GravityModel.from_dict(yaml.safe_load(model_text), urdf=config.urdf,
                                   source=str(out / 'model.yaml'))
    fit_time = info.get('fit_seconds')
    _say(f'[identify] model fitted ({model.metadata.get("fit", {}).get("method")}): '
         f'excitation {info.get("excitation_seconds", float("nan")):.0f} s, fit '
         + (f'{fit_time:.0f} s' if fit_time is not None else 'on request')
         + f' after it, {info["wall_seconds"]:.0f} s wall in all; {out / "model.yaml"}')

    report = {'robot': config.robot_name, 'identification_gravity': config.gravity,
              'validation_gravity': MOON, 'quick': bool(args.quick),
              'validated_on': 'quasi-static phases (settle, sweep, reversal) of the '
                              'held-out validation plan; reference: simulated drive torque '
                              'minus friction (rigid-body torque)',
              'noise_model': {k: np.asarray(getattr(sim_params, k)).tolist() for k in (
                  'current_noise', 'current_quantisation', 'gross_error_rate',
                  'gross_error_amplitude', 'encoder_noise', 'friction_coulomb',
                  'friction_viscous')},
              'recording': {'bag': info.get('recording'), 'quality': info.get('quality')},
              'cases': {}}
    tables = []
    _say(f'[validate] held-out plan at g = {MOON} m/s²: {", ".join(cases)}')
    runs = held_out.results(_say)
    for name, payload in cases.items():
        run_ = runs[name]
        predicted, mask, metrics = compare_case(model, config, run_, MOON, payload)
        report['cases'][name] = {m.joint: {k: getattr(m, k) for k in (
            'max_torque', 'rmse', 'rmse_percent', 'mae', 'rho')} for m in metrics}
        title = (f'{name}: identified at {config.gravity} m/s², validated at {MOON} m/s²'
                 + (f', payload {payload[0]} kg' if payload else ''))
        tables.append(metrics_table(metrics, title=title, unit_scale=1000, unit='N·mm'))
        plot_case(out / f'validation_{name}.png', title, run_, predicted, mask, config.joints)

    try:
        from arm_dyn_id.model.export import identified_urdf
        (out / 'identified.urdf').write_text(identified_urdf(model, config.urdf))
        report['identified_urdf'] = 'identified.urdf'
    except ValueError as exc:
        report['identified_urdf'] = f'not written: {exc}'
        _say(f'[export] no identified URDF: {exc}')
    report['wall_seconds'] = time.monotonic() - wall_start
    (out / 'validation.json').write_text(json.dumps(report, indent=2))
    print('\n\n'.join(tables))
    print(f'\nmodel: {out / "model.yaml"}\nvalidation: {out / "validation.json"}\n'
          f'plots: {out}/validation_*.png\n'
          f'took {report["wall_seconds"]:.0f} s')
    return 0
