"""Accuracy of the demo experiment (seed 000 §3, Tables 3-4) with and without noise.

The same plans as ``arm-dyn-id demo`` run on the simulated arm without ROS
(arm_dyn_id.sim_run): identify at 9.81 m/s² from the reciprocating plan, then
validate at 1.63 m/s² on the held-out validation plan without and with a 0.3 kg
payload, against the simulator's rigid-body torque on the quasi-static phases.
Noise models: the config's default (current noise, quantisation, gross errors,
encoder noise; friction on) and noise-free (friction on, every sensor error 0).

Prints one JSON line per noise model and case, then a Markdown table.

    .venv/bin/python bench/demo_accuracy.py [--quick] [--config humanoid_arm.yaml]
"""

import argparse
import json
import time
from dataclasses import replace

import numpy as np

from arm_dyn_id.cli_demo import MOON, PAYLOAD_MASS, validate_on_sim
from arm_dyn_id.config import load_arm_config, read_parameter_file
from arm_dyn_id.excitation import reciprocating_plan, validation_plan
from arm_dyn_id.identification import identify_gravity
from arm_dyn_id.model import RobotModel
from arm_dyn_id.sim import SimArm, SimParams
from arm_dyn_id.sim_run import run_plan

NOISE_FIELDS = ('current_noise', 'current_quantisation', 'encoder_noise',
                'gross_error_amplitude')


def noise_free(params):
    zero = {k: np.zeros_like(np.asarray(getattr(params, k), dtype=float)) for k in NOISE_FIELDS}
    return replace(params, gross_error_rate=0.0, **zero)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config', default='humanoid_arm.yaml')
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    config = load_arm_config(args.config)
    base_params = SimParams.from_params(read_parameter_file(config.source, 'sim_arm_node'),
                                        config.n_joints)
    robot = RobotModel.from_config(config)
    plan = reciprocating_plan(robot, config, quick=args.quick)
    vplan = validation_plan(robot, config, quick=args.quick)
    rows = []
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
            print(json.dumps(line), flush=True)
            rows.append(line)
    print()
    print('| noise | case | ' + ' | '.join(f'J{j + 1} RMSE %' for j in range(config.n_joints))
          + ' | mean |')
    print('|---|---|' + '---|' * (config.n_joints + 1))
    for r in rows:
        print(f'| {r["noise"]} | {r["case"]} | '
              + ' | '.join(f'{v:.2f}' for v in r['rmse_percent'])
              + f' | {r["mean_rmse_percent"]:.2f} |')


if __name__ == '__main__':
    main()
