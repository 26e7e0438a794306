"""The physically consistent fit: LMIs hold where plain least squares breaks them."""

import numpy as np
import pinocchio as pin
import pytest

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import fourier_series, rest_fourier_coefficients
from arm_dyn_id.identification.consistent import (is_consistent, link_min_eigenvalues,
                                                  pseudo_inertia)
from arm_dyn_id.identification.full_dynamics import fit_full, predict_model
from arm_dyn_id.model.export import InconsistentParametersError, full_identified_parameters

COULOMB, VISCOUS = 1.0, 0.2


def simulate(robot, amplitude, seconds, noise, seed, rate=100.0, base_hz=0.2):
    """A Fourier motion (5 harmonics of ``base_hz``) simulated exactly with pinocchio."""
    rng = np.random.default_rng(seed)
    n = robot.n_joints
    a = rng.standard_normal((n, 5)) / np.arange(1, 6)
    b = rng.standard_normal((n, 5)) / np.arange(1, 6)
    a, b = rest_fourier_coefficients(a, b)
    t = np.arange(int(seconds * rate)) / rate
    q, dq, ddq = fourier_series(t, 2 * np.pi * base_hz, a, b, np.zeros(n))
    scale = amplitude / np.max(np.abs(q), axis=0)
    q, dq, ddq = q * scale, dq * scale, ddq * scale
    tau = np.array([pin.rnea(robot.model, robot.data, *s) for s in zip(q, dq, ddq)])
    tau += COULOMB * np.tanh(dq / 0.01) + VISCOUS * dq
    return t, q, dq, ddq, tau, tau + noise * rng.standard_normal(tau.shape)


def test_pseudo_inertia_is_psd_exactly_for_real_bodies():
    box = pin.Inertia.FromBox(2.0, 0.1, 0.2, 0.3)
    box = pin.SE3(np.eye(3), np.array([0.1, 0.0, 0.2])).act(box)
    assert np.linalg.eigvalsh(pseudo_inertia(box.toDynamicParameters()))[0] > 0
    # triangle inequality broken (Ixx > Iyy + Izz about the CoM): no mass distribution has it
    bad = pin.Inertia(1.0, np.zeros(3), np.diag([1.0, 0.2, 0.2])).toDynamicParameters()
    assert np.linalg.eigvalsh(pseudo_inertia(bad))[0] < 0
    assert not is_consistent(bad, 1)
    assert is_consistent(box.toDynamicParameters(), 1)


def test_clarabel_gets_each_links_pseudo_inertia_as_its_triangle():
    """The problem goes to Clarabel without cvxpy: each link's LMI is the PSD-triangle
    cone on ``_PSD_MAP θ`` (upper triangle column by column, off-diagonal x √2). Unpacked,
    that vector is the pseudo-inertia, for bodies of every shape and place."""
    from arm_dyn_id.identification.consistent import _PSD_MAP
    rows, cols = np.triu_indices(4)
    order = np.lexsort((rows, cols))              # column by column
    rows, cols = rows[order], cols[order]
    for seed in range(20):
        np.random.seed(seed)
        theta = pin.Inertia.Random().toDynamicParameters()
        vec = _PSD_MAP @ theta
        J = np.zeros((4, 4))
        J[rows, cols] = vec / np.where(rows == cols, 1.0, np.sqrt(2.0))
        J = J + np.triu(J, 1).T
        np.testing.assert_allclose(J, pseudo_inertia(theta), atol=1e-12)


def test_poor_excitation_least_squares_is_inconsistent_the_consistent_fit_is_not(robot):
    # small, short motion with heavy noise: enough rank, poor conditioning
    t, q, _, _, _, tau = simulate(robot, amplitude=0.2, seconds=5.0, noise=1.0, seed=0)
    wls, _ = fit_full(robot, t, q, tau, methods=('wls',), harmonic_hz=1.0)
    assert not wls.consistent
    # no rigid bodies reproduce the least-squares base parameters at all
    with pytest.raises(InconsistentParametersError, match='no physically consistent'):
        full_identified_parameters(wls)
    # its friction is still physically signed: fits never write a negative coefficient
    # (issue 22 item 6; least squares alone gave some here)
    assert np.min(wls.phi) >= 0

    model, validation = fit_full(robot, t, q, tau, methods=('consistent',), harmonic_hz=1.0)
    assert model.consistent and model.standard is not None
    eig = link_min_eigenvalues(model.standard, robot.n_bodies)
    assert np.all(eig >= -1e-8), eig
    assert np.all(model.phi >= -1e-9)
    # the model's base parameters are those of its consistent link parameters
    np.testing.assert_allclose(model.base.beta(model.standard), model.beta, atol=1e-9)
    assert set(validation['held_out']) == set(robot.joint_names)
    info = model.metadata['fit']['consistent_fit']
    assert info['nominal_weight'] > 0 and info['solver'] == 'CLARABEL'


def test_rich_data_consistent_fit_predicts_like_least_squares(robot):
    t, q, _, _, _, tau = simulate(robot, amplitude=1.0, seconds=20.0, noise=0.2, seed=1)
    _, qv, dqv, ddqv, clean, _ = simulate(robot, amplitude=1.0, seconds=10.0, noise=0.0,
                                          seed=2)
    errors = {}
    for method in ('wls', 'consistent'):
        model, _ = fit_full(robot, t, q, tau, methods=(method,), harmonic_hz=1.0)
        errors[method] = np.sqrt(np.mean((predict_model(model, qv, dqv, ddqv) - clean) ** 2))
    assert errors['consistent'] < 0.2, errors            # below the noise
    assert errors['consistent'] < 1.5 * errors['wls'] + 0.02, errors


@pytest.mark.slow
def test_scs_agrees_with_clarabel(robot):
    t, q, _, _, _, tau = simulate(robot, amplitude=0.5, seconds=8.0, noise=0.3, seed=3)
    models = {s: fit_full(robot, t, q, tau, methods=('consistent',), harmonic_hz=1.0,
                          solver=s)[0] for s in ('CLARABEL', 'SCS')}
    a, b = models['CLARABEL'], models['SCS']
    _, qv, dqv, ddqv, _, _ = simulate(robot, amplitude=0.5, seconds=4.0, noise=0.0, seed=4)
    ta, tb = a.torques(qv, dqv, ddqv), b.torques(qv, dqv, ddqv)
    assert np.sqrt(np.mean((ta - tb) ** 2)) < 0.02 * np.sqrt(np.mean(ta ** 2))
    with pytest.raises(ConfigError, match='solver'):
        fit_full(robot, t, q, tau, methods=('consistent',), solver='MOSEK_PLEASE')


def test_consistent_standard_errors_follow_each_joints_residual_like_least_squares(robot):
    """Weights that are wrong for one joint (its noise given 100x too small) must not set
    every parameter's variance: the consistent fit's standard errors take each joint's
    residual variance as least squares' do (they agree within 10 % on rich data, where
    its constraints are inactive). With one variance pooled over the joints they were up
    to 5.6x least squares' here."""
    t, q, _, _, _, tau = simulate(robot, amplitude=1.0, seconds=20.0, noise=0.2, seed=1)
    noise = np.full(robot.n_joints, 0.2)
    noise[0] = 0.002
    errors = {}
    for method in ('wls', 'consistent'):
        model, _ = fit_full(robot, t, q, tau, methods=(method,), harmonic_hz=1.0,
                            noise=noise)
        errors[method] = np.asarray(model.std_errors)
    np.testing.assert_allclose(errors['consistent'], errors['wls'], rtol=0.1)
