"""The one JointState check (arm_dyn_id.data.joint_states): index mapping and the
named rejections every node and the CLI share. No ROS."""

import math

import numpy as np
import pytest

from arm_dyn_id.data.joint_states import (
    DUPLICATE_JOINTS, EMPTY_ARRAY, LENGTH_MISMATCH, MISSING_JOINTS, NON_FINITE, REASONS,
    UNKNOWN_JOINTS, JointSample, JointStateCheck, Rejection)

JOINTS = ('j1', 'j2', 'j3')


def test_any_order_and_extra_joints_map_into_the_configured_order():
    check = JointStateCheck(JOINTS)
    sample = check.check(['x', 'j3', 'j1', 'j2'], position=[9.0, 3.0, 1.0, 2.0],
                         velocity=[0.0, 0.3, 0.1, 0.2], effort=[])
    assert isinstance(sample, JointSample)
    np.testing.assert_array_equal(sample.index, [2, 3, 1])
    np.testing.assert_array_equal(sample.position, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(sample.velocity, [0.1, 0.2, 0.3])
    assert sample.effort is None          # optional and empty


def test_the_mapping_is_computed_once_per_name_list():
    check = JointStateCheck(JOINTS)
    first = check.index(['j2', 'j1', 'j3'])
    assert check.index(('j2', 'j1', 'j3')) is first
    assert not first.flags.writeable


@pytest.mark.parametrize('kwargs, reason, words', [
    (dict(names=['j1', 'j2', 'j3'], position=[], effort=[1, 2, 3]), EMPTY_ARRAY,
     ['position']),
    (dict(names=['j1', 'j2', 'j3'], position=[1, 2]), LENGTH_MISMATCH,
     ['3 names but 2 positions']),
    (dict(names=['j1', 'j2', 'j2'], position=[1, 2, 3]), DUPLICATE_JOINTS, ["'j2'"]),
    (dict(names=['j1', 'j3'], position=[1, 2]), MISSING_JOINTS, ["'j2'"]),
    (dict(names=['j1', 'j2', 'j3'], position=[1, math.nan, 3]), NON_FINITE,
     ['position of j2', 'NaN or inf']),
])
def test_rejections_are_named(kwargs, reason, words):
    result = JointStateCheck(JOINTS).check(**kwargs)
    assert isinstance(result, Rejection) and result.reason == reason
    assert reason in REASONS
    for word in words:
        assert word in result.detail


def test_required_arrays_and_finite_checks_are_chosen_by_the_caller():
    check = JointStateCheck(JOINTS)
    names = ['j1', 'j2', 'j3']
    # a recorder without a current topic needs effort; a NaN current is not rejected
    # here (its stream quality counts it)
    missing = check.check(names, position=[1, 2, 3], require=('effort', 'position'))
    assert missing.reason == EMPTY_ARRAY and 'effort' in missing.detail
    kept = check.check(names, position=[1, 2, 3], effort=[math.nan, 0, 0],
                       require=('effort', 'position'), finite=())
    assert math.isnan(kept.effort[0])
    bad = check.check(names, position=[1, 2, 3], effort=[0, math.inf, 0],
                      require=('position', 'effort'), finite=('position', 'effort'))
    assert bad.reason == NON_FINITE and 'effort of j2' in bad.detail
    # a NaN on a joint that is not configured does not matter
    assert isinstance(check.check(names + ['x'], position=[1, 2, 3, math.nan]), JointSample)


def test_strict_check_refuses_unknown_joints():
    check = JointStateCheck(JOINTS, strict=True)
    result = check.check(['j1', 'j2', 'j3', 'gripper'], position=[0, 0, 0, 0])
    assert result.reason == UNKNOWN_JOINTS and "'gripper'" in result.detail
    assert isinstance(check.check(['j3', 'j2', 'j1'], position=[0, 0, 0]), JointSample)


def test_commands_by_name_and_by_position():
    check = JointStateCheck(JOINTS)
    assert check.place(['j3', 'j1']) == [2, 0]
    assert check.place(['j1', 'j9']).reason == UNKNOWN_JOINTS
    assert check.place(['j1', 'j1']).reason == DUPLICATE_JOINTS
    np.testing.assert_array_equal(check.check_values([1, 2, 3]), [1.0, 2.0, 3.0])
    assert check.check_values([1, 2]).reason == LENGTH_MISMATCH
    assert check.check_values([1, math.inf, 3]).reason == NON_FINITE
