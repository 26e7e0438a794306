"""``arm-dyn-id payload MODEL BAG``: a payload identified with the arm model frozen.

Real physics: the humanoid arm simulated in MuJoCo (arm_dyn_id.sim: PID drive,
friction, current noise and quantisation, gross errors, encoder noise) runs
Fourier excitations; the bags hold what ``ros2 bag record /joint_states`` holds
(positions and motor currents, nothing else). The arm is identified without the
payload by ``arm-dyn-id fit``, then the payload from another trajectory with it.
"""

import json

import numpy as np
import pytest

from arm_dyn_id import cli
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.errors import DataError
from arm_dyn_id.excitation.plans import fourier_plan, fourier_series, rest_fourier_coefficients
from arm_dyn_id.identification.payload import (identify_payload_full, payload_full_regressor,
                                               payload_transform)
from arm_dyn_id.model.robot import Payload, RobotModel
from test_cli_full import JOINTS, URDF, fourier_data, one_error_line, run, write_plain_bag

PAYLOAD = Payload(mass=0.3, com=(0.0, 0.01, 0.05), frame='flange')
OMEGA = 2 * np.pi * 0.1
Q0 = np.array([1.0, 1.0, 0.0, 1.2, 0.0, 0.0])


def sim_fourier_bag(path, seed, payload=None, periods=2, amplitude=0.5):
    """Run a random Fourier plan on the MuJoCo arm; write joint_states as a driver does."""
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.sim.arm import SimArm, SimParams
    from arm_dyn_id.sim.run import run_plan
    config = load_arm_config('humanoid_arm.yaml')
    sim = SimArm(config, SimParams.from_config(config))
    rng = np.random.default_rng(seed)
    n, harmonics = config.n_joints, 4
    ell = np.arange(1, harmonics + 1)
    a, b = rest_fourier_coefficients(rng.standard_normal((n, harmonics)) / ell,
                                     rng.standard_normal((n, harmonics)) / ell)
    q, _, _ = fourier_series(np.linspace(0, 10, 2001), OMEGA, a, b, np.zeros(n))
    s = amplitude / np.max(np.abs(q), axis=0)
    plan = fourier_plan(config, a * s[:, None], b * s[:, None], Q0, OMEGA, periods=periods)
    if payload is not None:
        sim.attach_payload(payload.mass, payload.com)
    result = run_plan(sim, plan, decimate=5)            # 200 Hz of the 1 kHz physics
    write_bag(path, 1000.0 + result.t, JOINTS, result.q, result.current)
    return config


@pytest.fixture(scope='module')
def arm_fit(tmp_path_factory):
    """The arm without payload, identified by ``fit`` from a simulated Fourier bag."""
    import contextlib
    import io
    root = tmp_path_factory.mktemp('payload')
    config = sim_fourier_bag(root / 'arm_bag', seed=0)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli.main(['fit', str(root / 'arm_bag'), '--config', str(config.source),
                         '--out', str(root / 'fit'), '--methods', 'wls', '--no-report'])
    assert code == 0, err.getvalue()
    return root, config


@pytest.mark.slow
def test_payload_from_simulated_motion_within_5_percent(arm_fit, capsys):
    root, config = arm_fit
    sim_fourier_bag(root / 'payload_bag', seed=5, payload=PAYLOAD)
    code, out, err = run(capsys, 'payload', root / 'fit' / 'model.yaml', root / 'payload_bag',
                         '--config', config.source, '--json', root / 'payload.json')
    assert code == 0, err
    doc = json.loads((root / 'payload.json').read_text())
    assert abs(doc['mass'] - PAYLOAD.mass) < 0.05 * PAYLOAD.mass, doc
    np.testing.assert_allclose(doc['com'], PAYLOAD.com, atol=0.01)
    assert doc['mass_std_error'] > 0 and len(doc['com_std_error']) == 3
    assert 'inertia' in doc and doc['frame'] == 'flange'
    assert 'mass' in out and '±' in out
    assert 'they leave out the torque\'s scale' in out     # what ± does not cover
    # the load given at a link before the last joints: their torque departs from the arm
    # model, which a load there cannot do (was: a mass with a tight error, exit 0)
    code, _, err = run(capsys, 'payload', root / 'fit' / 'model.yaml', root / 'payload_bag',
                       '--config', config.source, '--frame', 'link_3')
    line = one_error_line(err)
    assert code == 3 and "'link_3' hangs before" in line and 'joint_' in line, line
    code, _, err = run(capsys, 'payload', root / 'fit' / 'model.yaml', root / 'payload_bag',
                       '--config', config.source, '--frame', 'torso')
    line = one_error_line(err)
    assert code == 2 and 'moved by no joint' in line and 'Traceback' not in err, line


@pytest.mark.slow
def test_no_payload_exits_3(arm_fit, capsys):
    root, config = arm_fit
    sim_fourier_bag(root / 'bare_bag', seed=6)
    code, _, err = run(capsys, 'payload', root / 'fit' / 'model.yaml', root / 'bare_bag',
                       '--config', config.source)
    assert code == 3
    assert 'no payload detected' in one_error_line(err)


def test_bad_inputs_are_one_line(tmp_path, capsys):
    bag = write_plain_bag(tmp_path / 'bag', fourier_data(seed=1, periods=1))
    code, _, err = run(capsys, 'payload', tmp_path / 'nope.yaml', bag, '--urdf', URDF,
                       '--effort', 'torque')
    assert code == 2 and 'nope.yaml' in one_error_line(err)
    (tmp_path / 'm.yaml').write_text('schema: something/else\n')
    code, _, err = run(capsys, 'payload', tmp_path / 'm.yaml', bag, '--urdf', URDF,
                       '--effort', 'torque')
    assert code == 2 and 'm.yaml' in one_error_line(err)


# -- the regressor and the estimator, exact data -----------------------------------------

def test_payload_regressor_with_inertia_equals_pinocchio():
    """τ(loaded) − τ(arm) = Y_payload(q, q̇, q̈) π for the ten payload parameters."""
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    inertia = np.array([[2e-3, 1e-4, 0.0], [1e-4, 3e-3, 2e-4], [0.0, 2e-4, 1e-3]])
    payload = Payload(mass=0.4, com=(0.01, -0.02, 0.05), inertia=inertia, frame='flange')
    loaded = robot.with_payload(payload)
    rng = np.random.default_rng(0)
    q, dq, ddq = (rng.uniform(-1.5, 1.5, (20, 6)) for _ in range(3))
    extra = np.array([loaded.inverse_dynamics(*s) - robot.inverse_dynamics(*s)
                      for s in zip(q, dq, ddq)])
    c = np.array(payload.com)
    sc = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    origin = inertia - payload.mass * sc @ sc          # about the frame's origin
    pi = np.concatenate([[payload.mass], payload.mass * c,
                         origin[[0, 0, 1, 0, 1, 2], [0, 1, 1, 2, 2, 2]]])
    np.testing.assert_allclose(payload_full_regressor(robot, q, dq, ddq) @ pi, extra,
                               atol=1e-12)
    # the transform is linear: the identity frame maps the parameters onto themselves
    np.testing.assert_allclose(payload_transform(np.eye(3), np.zeros(3)), np.eye(10),
                               atol=1e-15)


def test_inertia_identified_only_when_excited():
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    inertia = np.diag([3e-3, 2e-3, 1e-3])
    payload = Payload(mass=0.4, com=(0.0, 0.0, 0.04), inertia=inertia, frame='flange')
    loaded = robot.with_payload(payload)
    d = fourier_data(seed=2, periods=1, rate=50.0, payload=payload)
    arm = np.array([robot.inverse_dynamics(*s) for s in zip(d['q_true'], d['dq'], d['ddq'])])
    fit = identify_payload_full(robot, d['q_true'], d['dq'], d['ddq'], d['rigid'], arm)
    np.testing.assert_allclose(fit.payload.inertia, inertia, atol=1e-8)
    assert fit.inertia_std_errors is not None
    # static poses excite no inertia: a point mass, and asking for inertia is refused
    q = d['q_true'][::10]
    zeros = np.zeros_like(q)
    rigid = np.array([loaded.inverse_dynamics(s, z, z) for s, z in zip(q, zeros)])
    base = np.array([robot.inverse_dynamics(s, z, z) for s, z in zip(q, zeros)])
    fit = identify_payload_full(robot, q, zeros, zeros, rigid, base)
    assert fit.payload.inertia is None and 'not excited' in fit.note
    assert fit.payload.mass == pytest.approx(0.4, rel=1e-9)
    with pytest.raises(DataError, match='does not excite'):
        identify_payload_full(robot, q, zeros, zeros, rigid, base, inertia=True)


def sim_sweep_bag(path, payload=None, seed=0):
    """The quick reciprocating plan (slow sweeps, one joint at a time) on the MuJoCo arm."""
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.excitation.plans import reciprocating_plan, validation_plan
    from arm_dyn_id.sim.arm import SimArm, SimParams
    from arm_dyn_id.sim.run import run_plan
    config = load_arm_config('humanoid_arm.yaml')
    robot = RobotModel.from_config(config)
    sim = SimArm(config, SimParams.from_config(config))
    plan = (reciprocating_plan(robot, config, quick=True) if seed == 0 else
            validation_plan(robot, config, seed=seed, quick=True))
    if payload is not None:
        sim.attach_payload(payload.mass, payload.com)
    result = run_plan(sim, plan, decimate=5)
    write_bag(path, 1000.0 + result.t, JOINTS, result.q, result.current)
    return config


@pytest.mark.slow
def test_payload_with_a_gravity_model_from_slow_sweeps(tmp_path, capsys):
    """The gravity path: the arm fitted from slow sweeps, the payload from other sweeps
    (detected in the angles and averaged forward/backward)."""
    config = sim_sweep_bag(tmp_path / 'arm_bag')
    code, out, err = run(capsys, 'fit', tmp_path / 'arm_bag', '--config', config.source,
                         '--out', tmp_path / 'fit', '--no-report')
    assert code == 0, err
    assert 'dynamics: gravity' in out
    sim_sweep_bag(tmp_path / 'payload_bag', payload=PAYLOAD, seed=3)
    code, out, err = run(capsys, 'payload', tmp_path / 'fit' / 'model.yaml',
                         tmp_path / 'payload_bag', '--config', config.source, '--json',
                         tmp_path / 'p.json')
    assert code == 0, err
    doc = json.loads((tmp_path / 'p.json').read_text())
    assert abs(doc['mass'] - PAYLOAD.mass) < 0.05 * PAYLOAD.mass, doc
    assert doc['inertia'] is None and 'sweep pairs' in err
