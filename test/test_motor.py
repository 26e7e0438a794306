"""Current -> torque conversion (seed 000 eq. 19): gains, reordering, bad inputs."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arm_dyn_id.errors import ConfigError, DataError, JointNameError
from arm_dyn_id.data.motor import CurrentToTorque

JOINTS = ('joint_1', 'joint_2', 'joint_3')


def make():
    return CurrentToTorque(JOINTS, [0.5, 0.2, 0.1], current_signs=[1, -1, 1],
                           current_offsets=[0.0, 0.1, -0.2], gear_ratios=[1, 1, 2],
                           efficiencies=[1, 1, 0.9])


def test_eq19_gain_sign_offset():
    conv = make()
    tau = conv.convert(JOINTS, [2.0, 1.1, 0.8])
    np.testing.assert_allclose(tau, [0.5 * 2.0, -0.2 * 1.0, 0.1 * 2 * 0.9 * 1.0])


def test_reorders_by_name_and_ignores_extra_joints():
    conv = make()
    names = ['gripper', 'joint_3', 'joint_1', 'joint_2']
    tau = conv.convert(names, [9.0, 0.8, 2.0, 1.1])
    np.testing.assert_allclose(tau, conv.convert(JOINTS, [2.0, 1.1, 0.8]))
    # the mapping is cached per distinct name list
    assert conv.index_for(names) is conv.index_for(tuple(names))


def test_missing_joint_is_named():
    with pytest.raises(JointNameError, match='joint_2'):
        make().convert(['joint_1', 'joint_3'], [1.0, 2.0])


def test_length_mismatch_is_a_data_error():
    with pytest.raises(DataError, match='3 joint names'):
        make().convert(JOINTS, [1.0, 2.0])


def test_nan_is_not_hidden():
    tau = make().convert(JOINTS, [np.nan, 1.0, 1.0])
    assert np.isnan(tau[0]) and np.all(np.isfinite(tau[1:]))


def test_bad_config_rejected():
    with pytest.raises(ConfigError, match='current_signs'):
        CurrentToTorque(JOINTS, [1, 1, 1], current_signs=[1, 0.5, 1])
    with pytest.raises(ConfigError, match='torque_constants'):
        CurrentToTorque(JOINTS, [1, -1, 1])
    with pytest.raises(ConfigError, match='one per joint'):
        CurrentToTorque(JOINTS, [1, 1])


def test_from_config_matches_armconfig_gains(tmp_path):
    from arm_dyn_id.config import ArmConfig
    urdf = tmp_path / 'a.urdf'
    urdf.write_text('<robot name="a"/>')
    cfg = ArmConfig.from_params({
        'urdf': str(urdf), 'joints': list(JOINTS), 'torque_constants': [0.5, 0.2, 0.1],
        'current_signs': [1, -1, 1], 'gear_ratios': [1, 1, 2], 'efficiencies': [1, 1, 0.9],
        'position_limits_lower': [-1] * 3, 'position_limits_upper': [1] * 3,
        'velocity_limits': [1] * 3, 'acceleration_limits': [1] * 3})
    conv = CurrentToTorque.from_config(cfg)
    np.testing.assert_allclose(conv.gains, cfg.joint_torque_gains)
    assert CurrentToTorque.from_dict(conv.to_dict()).gains.tolist() == conv.gains.tolist()


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(3)),
       st.lists(st.floats(-20, 20), min_size=3, max_size=3))
def test_convert_many_agrees_with_convert_for_any_order(perm, currents):
    conv = make()
    names = [JOINTS[i] for i in perm]
    values = [currents[i] for i in perm]
    one = conv.convert(names, values)
    many = conv.convert_many(np.array([currents, currents]))
    np.testing.assert_allclose(many[0], one, atol=1e-12)
    np.testing.assert_allclose(many[1], one, atol=1e-12)


def test_convert_many_shape_checked():
    with pytest.raises(DataError, match='expected'):
        make().convert_many(np.zeros((4, 2)))


class TestStampJoiner:
    """Currents from a separate topic paired with positions by stamp (issue 5)."""

    def test_pairs_in_either_arrival_order(self):
        from arm_dyn_id.data.motor import StampJoiner
        j = StampJoiner(tolerance=0.0004)
        assert j.add_position(0.000, 'p0') == []              # current not here yet
        assert j.add_current(0.000, 'c0') == [('p0', 'c0')]
        assert j.add_current(0.001, 'c1') == []               # position not here yet
        assert j.add_position(0.0011, 'p1') == [('p1', 'c1')]  # within tolerance
        assert (j.paired, j.unpaired) == (2, 0)

    def test_nearest_current_is_taken_and_lost_samples_are_counted(self):
        from arm_dyn_id.data.motor import StampJoiner
        j = StampJoiner(tolerance=0.0006)
        j.add_current(0.0000, 'c0')
        j.add_current(0.0010, 'c1')
        assert j.add_position(0.0009, 'p') == [('p', 'c1')]
        # a position whose current never comes is given up once newer currents arrive
        assert j.add_position(0.0050, 'lost') == []
        assert j.add_current(0.0070, 'c7') == []
        assert j.unpaired == 1
        assert j.add_position(0.0071, 'p7') == [('p7', 'c7')]

    def test_currents_that_arrive_ahead_of_their_positions_are_kept(self):
        # an executor can serve several messages of the current topic before the position
        # topic's queue: every position must still find its own current
        from arm_dyn_id.data.motor import StampJoiner
        j = StampJoiner(tolerance=0.0004)
        for k in range(5):
            assert j.add_current(k * 0.005, f'c{k}') == []
        pairs = [pair for k in range(5) for pair in j.add_position(k * 0.005, f'p{k}')]
        assert pairs == [(f'p{k}', f'c{k}') for k in range(5)]
        assert (j.paired, j.unpaired) == (5, 0)
        # and spent currents are let go once positions newer than them arrived
        assert len(j._currents) <= 1

    def test_waiting_positions_are_bounded(self):
        from arm_dyn_id.data.motor import StampJoiner
        j = StampJoiner(tolerance=0.0005, capacity=10)
        for k in range(25):
            j.add_position(k * 0.001, k)
        assert j.unpaired == 15
        with pytest.raises(ValueError, match='tolerance'):
            StampJoiner(tolerance=-1)
