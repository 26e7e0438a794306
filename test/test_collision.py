"""Clearance checker on the URDF collision shapes."""

import numpy as np
import pytest

from arm_dyn_id.excitation.collision import (
    ClearanceChecker, CollisionError, parse_environment_boxes)
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.excitation.plans import make_sweeps, reciprocating_plan
from arm_dyn_id.paths import share_dir

from test_excitation import make_config

URDF = share_dir() / 'urdf' / 'humanoid_arm.urdf'
JOINTS = [f'joint_{i}' for i in range(1, 7)]


def test_free_at_zero_and_pairs_exclude_adjacent():
    checker = ClearanceChecker(URDF, JOINTS)
    assert len(checker.pair_names) == 15
    assert ('link_1_0', 'link_2_0') not in checker.pair_names
    assert checker.clearance(np.zeros((1, 6)))[0] > 0.005


def test_pose_that_makes_links_collide_is_rejected():
    checker = ClearanceChecker(URDF, JOINTS)
    folded = np.array([0.3, 0.3, 0.5, 2.5, 0.5, -0.6])    # elbow fully flexed
    assert checker.clearance(folded[None])[0] < checker.min_clearance
    with pytest.raises(CollisionError, match='link_'):
        checker.check(folded[None])
    cfg = make_config()
    with pytest.raises(CollisionError):
        reciprocating_plan(None, cfg, poses=[(3, folded)], sweep_range=0.3, checker=checker)


def test_environment_box_is_seen():
    checker = ClearanceChecker(URDF, JOINTS)
    # the hand at q = 0 hangs below the shoulder: put a box where it is
    free = checker.clearance(np.zeros((1, 6)))[0]
    import pinocchio as pin
    model = checker.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    hand = data.oMf[model.getFrameId('flange')].translation
    boxed = ClearanceChecker(URDF, JOINTS, [*hand, 0.05, 0.05, 0.05], min_clearance=0.01)
    assert boxed.clearance(np.zeros((1, 6)))[0] < 0 < free
    assert any('environment_box_0' in p for p in boxed.pair_names)


def test_bad_boxes_and_ignored_pairs():
    with pytest.raises(ConfigError, match='six per box'):
        parse_environment_boxes([1, 2, 3])
    with pytest.raises(ConfigError, match='> 0'):
        parse_environment_boxes([0, 0, 0, 1, 0, 1])
    checker = ClearanceChecker(URDF, JOINTS, ignored_pairs=['link_3', 'link_5'])
    assert ('link_3_0', 'link_5_0') not in checker.pair_names
    with pytest.raises(ConfigError, match='no_such_link'):
        ClearanceChecker(URDF, JOINTS, ignored_pairs=['link_3', 'no_such_link'])


def test_make_sweeps_stays_inside_limits():
    cfg = make_config()
    sw = make_sweeps(cfg, [(5, np.full(6, 10.0))], 1.0)[0]
    assert sw.upper <= cfg.position_limits_upper[5] and sw.lower >= cfg.position_limits_lower[5]
