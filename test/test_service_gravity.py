"""Gravity queries against a served model (arm_dyn_id.service.gravity), no Node:
the validation every query gets, with the rejection names of data.joint_states."""

import math

import numpy as np
import pytest

from arm_dyn_id.data.joint_states import (
    DUPLICATE_JOINTS, LENGTH_MISMATCH, MISSING_JOINTS, NON_FINITE, UNKNOWN_JOINTS, Rejection)
from arm_dyn_id.model.base_parameters import gravity_base_parameters
from arm_dyn_id.model.gravity import GravityModel
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.paths import share_dir
from arm_dyn_id.service.gravity import NO_MODEL, ServedModel, answer_query


@pytest.fixture(scope='module')
def served():
    robot = RobotModel.from_urdf(share_dir() / 'urdf' / 'humanoid_arm.urdf')
    base = gravity_base_parameters(robot)
    model = GravityModel(robot, base, base.beta(robot.parameters('gravity')))
    return ServedModel(model)


def test_a_query_in_any_order_is_answered_in_model_order(served):
    joints = served.joints
    q = np.linspace(-0.5, 0.5, len(joints))
    q_ans, tau = served.query(joints[::-1], q[::-1])
    np.testing.assert_allclose(q_ans, q)
    np.testing.assert_allclose(tau, served.model.gravity_torques(q), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize('edit, reason, words', [
    (lambda j, q: (j + ['gripper'], np.append(q, 0.0)), UNKNOWN_JOINTS, ["'gripper'"]),
    (lambda j, q: (j[:-1], q[:-1]), MISSING_JOINTS, ['missing']),
    (lambda j, q: (j, q[:-1]), LENGTH_MISMATCH, ['names but']),
    (lambda j, q: (j[:-1] + j[:1], q), DUPLICATE_JOINTS, ['twice']),
    (lambda j, q: (j, np.where(np.arange(len(q)) == 2, math.nan, q)), NON_FINITE,
     ['NaN or inf']),
])
def test_bad_queries_are_refused_with_a_named_reason(served, edit, reason, words):
    names, q = edit(list(served.joints), np.zeros(len(served.joints)))
    answer = answer_query(served, names, q)
    assert isinstance(answer, Rejection) and answer.reason == reason, answer
    for word in words:
        assert word in answer.detail


def test_no_model_is_a_rejection_that_says_what_to_do():
    answer = answer_query(None, ['joint_1'], [0.0])
    assert answer.reason == NO_MODEL and '~/fit' in answer.detail


def test_the_stream_ignores_extra_joints_queries_do_not(served):
    names = list(served.joints) + ['gripper']
    q = np.append(np.zeros(len(served.joints)), 0.3)
    q_ans, _ = served.stream(names, q)
    np.testing.assert_array_equal(q_ans, np.zeros(len(served.joints)))
    assert served.query(names, q).reason == UNKNOWN_JOINTS
