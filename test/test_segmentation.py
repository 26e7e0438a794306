"""Automatic sweep detection (arm_dyn_id.data.segmentation) against known segment boundaries."""

import numpy as np
import pytest

from arm_dyn_id.identification.pairing import average_pairs, sweeps_from_markers
from arm_dyn_id.data.segmentation import detect_markers, detect_sweeps, markers_from_sweeps
from arm_dyn_id.errors import DataError
from test_cli_fit import JOINTS, reciprocating_data


@pytest.fixture(scope='module')
def data():
    return reciprocating_data(seed=3, rate=500.0, poses=2)


@pytest.mark.parametrize('encoder_noise', [0.0, 1e-5])
def test_boundaries_match(encoder_noise):
    d = reciprocating_data(seed=3, rate=500.0, poses=2, encoder_noise=encoder_noise)
    found = detect_sweeps(d['t'], d['q'])
    assert len(found) == len(d['sweeps'])
    for s, (j, direction, t0, t1) in zip(found, d['sweeps']):
        assert (s.joint_index, s.direction) == (j, direction)
        # within 60 ms of the true constant-speed span (the ramps end within 5 % of
        # the sweep speed, which counts as constant speed)
        assert abs(d['t'][s.start] - t0) <= 0.06
        assert abs(d['t'][s.stop - 1] - t1) <= 0.06
        assert s.speed == pytest.approx(0.1, rel=0.01)


def test_speed_relative_thresholds():
    """A slow sweep (1 °/s) and a fast one (10 °/s) are both found."""
    slow = reciprocating_data(seed=4, rate=500.0, poses=1, speed=np.deg2rad(1.0),
                              sweep_range=0.1)
    fast = reciprocating_data(seed=4, rate=500.0, poses=1, speed=np.deg2rad(10.0))
    for d in (slow, fast):
        assert len(detect_sweeps(d['t'], d['q'])) == len(d['sweeps'])


def test_markers_feed_pairing(data):
    markers = detect_markers(data['t'], data['q'], JOINTS)
    phases = {m['phase'] for m in markers}
    assert phases <= {'sweep', 'reversal', 'settle'}
    for m in markers:
        assert set(m) >= {'segment_id', 'joint', 'joint_index', 'direction', 'phase', 't'}
    sweeps = sweeps_from_markers(data['t'], markers)
    assert len(sweeps) == len(data['sweeps'])
    paired = average_pairs(data['t'], data['q'], data['tau'], sweeps)
    # friction cancels: the mean of the passes is gravity plus noise only
    err = paired.tau - _gravity_at(data, paired.q)
    assert np.sqrt(np.mean(err ** 2, axis=0)).max() < 0.03


def _gravity_at(data, q):
    from arm_dyn_id.model.robot import RobotModel
    from test_cli_fit import URDF
    robot = RobotModel.from_urdf(URDF, joints=JOINTS)
    return robot.gravity_regressor(q) @ robot.parameters('gravity')


def test_two_joints_moving_is_not_a_sweep():
    t = np.arange(0, 10, 0.002)
    q = np.zeros((t.size, 3))
    q[:, 0] = 0.05 * t
    q[:, 1] = 0.05 * t        # moves together with joint 0
    assert detect_sweeps(t, q) == []
    with pytest.raises(DataError, match='no constant-speed sweep'):
        detect_markers(t, q, ['a', 'b', 'c'])


def test_back_to_back_sweeps_get_reversal_markers(data):
    found = detect_sweeps(data['t'], data['q'])
    markers = markers_from_sweeps(data['t'], found, JOINTS)
    kinds = [m['phase'] for m in markers]
    assert kinds[:2] == ['sweep', 'reversal']
