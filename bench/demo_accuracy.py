"""Accuracy of the demo experiment (seed 000 §3, Tables 3-4) with and without noise.

The same plans as ``arm-dyn-id demo`` run on the simulated arm without ROS
(arm_dyn_id.sim.run): identify at 9.81 m/s² from the reciprocating plan, then
validate at 1.63 m/s² on the held-out validation plan without and with a 0.3 kg
payload, against the simulator's rigid-body torque on the quasi-static phases.
Noise models: the config's default (current noise, quantisation, gross errors,
encoder noise; friction on) and noise-free (friction on, every sensor error 0).

Seeded: the simulator's noise comes from the config's ``sim_arm_node`` seed (0 in
config/humanoid_arm.yaml), the held-out validation plan's poses from seed 1 (its
default); the identification plan is deterministic.

Prints one JSON line per noise model and case; the table goes to
docs/results/demo_accuracy.md / .json (not with ``--no-save``).

    .venv/bin/python bench/demo_accuracy.py [--quick] [--config humanoid_arm.yaml]
"""

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from arm_dyn_id.cli.demo import MOON, PAYLOAD_MASS, validate_on_sim  # noqa: E402
from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.excitation.plans import reciprocating_plan, validation_plan  # noqa: E402
from arm_dyn_id.identification.gravity import identify_gravity  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.sim.arm import SimArm, SimParams  # noqa: E402
from arm_dyn_id.sim.run import run_plan  # noqa: E402

NOISE_FIELDS = ('current_noise', 'current_quantisation', 'encoder_noise',
                'gross_error_amplitude')


def noise_free(params):
    zero = {k: np.zeros_like(np.asarray(getattr(params, k), dtype=float)) for k in NOISE_FIELDS}
    return replace(params, gross_error_rate=0.0, **zero)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config', default='humanoid_arm.yaml')
    parser.add_argument('--quick', action='store_true')
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('demo_accuracy', args,
                             title='Demo accuracy with and without noise (seed 000 Tables 3-4, '
                                   'without ROS)')
    config = load_arm_config(args.config)
    base_params = SimParams.from_config(config)
    robot = RobotModel.from_config(config)
    plan = reciprocating_plan(robot, config, quick=args.quick)
    vplan = validation_plan(robot, config, quick=args.quick)
    for label, params in (('default noise', base_params), ('noise-free', noise_free(base_params))):
        t0 = time.perf_counter()
        sim = SimArm(config, params)
        run = run_plan(sim, plan)
        fit = identify_gravity(robot, run.t, run.q, run.tau_measured, run.markers,
                               noise=config.torque_noise)
        for case, payload in (('moon', None),
                              ('moon_payload', (PAYLOAD_MASS, (0.0, 0.0, 0.05)))):
            _, _, _, metrics = validate_on_sim(fit.model, config, params, vplan, MOON, payload)
            line = {'noise': label, 'case': case, 'quick': args.quick,
                    'plan_seconds': plan.duration, 'method': fit.result.method,
                    'rmse_percent': [round(m.rmse_percent, 4) for m in metrics],
                    'max_torque_nmm': [round(1000 * m.max_torque, 3) for m in metrics],
                    'rmse_nmm': [round(1000 * m.rmse, 5) for m in metrics],
                    'mean_rmse_percent': round(float(np.mean([m.rmse_percent
                                                              for m in metrics])), 4),
                    'seconds': round(time.perf_counter() - t0, 1)}
            report.add('accuracy', line)
    report.note(f'Identified at 9.81 m/s² from the reciprocating plan ({plan.duration:.0f} s), '
                f'validated at {MOON} m/s² on the held-out validation plan, without (moon) and '
                f'with (moon_payload) a {PAYLOAD_MASS} kg payload 5 cm along the flange axis; '
                'rmse_percent per joint 1-6 is the RMSE against the simulator\'s rigid-body '
                'torque on the quasi-static phases as % of the joint\'s largest torque. '
                'seconds: wall time from the start of that noise model\'s simulation to the '
                'end of this case\'s validation.')
    report.note('default noise: the config\'s sim_arm_node noise model (current noise, '
                'quantisation, gross errors, encoder noise, friction); noise-free: every '
                'sensor error 0, friction kept.')
    report.save()


if __name__ == '__main__':
    main()
