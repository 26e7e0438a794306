"""A driver's published velocity against its angles (arm_dyn_id.data.velocity)."""

import numpy as np
import pytest

from arm_dyn_id.data.velocity import VelocityCheck, judge, sentence

JOINTS = ('a', 'b', 'c')


def motion(rate=200.0, seconds=20.0, seed=0):
    """t, q (rad, with 1e-4 rad of encoder noise) and the true q̇ of a smooth motion of
    joints a and b; c holds still."""
    rng = np.random.default_rng(seed)
    t = 100.0 + np.arange(int(rate * seconds)) / rate
    w = 2 * np.pi * np.array([0.13, 0.21])
    phase = rng.uniform(0, 2 * np.pi, 2)
    q = np.zeros((len(t), 3))
    dq = np.zeros_like(q)
    q[:, :2] = 0.6 * np.sin(w * t[:, None] + phase)
    dq[:, :2] = 0.6 * w * np.cos(w * t[:, None] + phase)
    return t, q + rng.normal(0, 1e-4, q.shape), dq


def test_a_right_velocity_passes_noisy_late_and_filtered():
    t, q, dq = motion()
    rng = np.random.default_rng(1)
    assert judge(JOINTS, t, q, dq) == []
    assert judge(JOINTS, t, q, dq + rng.normal(0, 0.02, dq.shape)) == []
    late = np.vstack([dq[:4], dq[:-4]])                # 20 ms late
    assert judge(JOINTS, t, q, late) == []
    assert judge(JOINTS, t, q, None) == [] and judge(JOINTS, t, q, dq * np.nan) == []


@pytest.mark.parametrize('fault, says', [
    (lambda v: v * 0.0, 'a, b: zero while the angle moves'),
    (lambda v: np.degrees(v), 'a, b: x57.3 the rate of the angle (degrees per second?)'),
    (lambda v: v * [1, -1, 1], 'b: of the opposite sign (x-1)'),
    (lambda v: v * [1, 1.5, 1], 'b: x1.5 the rate of the angle'),
    (lambda v: v[:, [1, 0, 2]], 'a, b: not following the angle'),
])
def test_a_wrong_velocity_is_named_per_joint_and_the_still_joint_is_not_judged(fault, says):
    t, q, dq = motion()
    bad = judge(JOINTS, t, q, fault(dq))
    assert bad and all(j != 'c' for j, _ in bad)
    text = sentence(bad)
    assert says in text and 'estimated from the angles' in text, text


def _update_all(check, t, q, v, rows):
    """The rows among ``rows`` whose velocity update() lets through."""
    return [k for k in rows
            if check.update(t[k], q[k], None if np.isnan(v[k]).any() else v[k]) is not None]


def test_the_stream_refuses_a_wrong_velocity_within_seconds_and_run_matches_update():
    """Sample by sample, a right velocity is used throughout and a wrong one until the
    first windows of motion show it wrong (within 2 s here). run() from any point gives
    the rows update() lets through, and the same note, with gaps, missing velocities and
    a wrap in the angles."""
    t, q, dq = motion(seed=3)
    t = t.copy()
    t[1500:] += 0.4                                       # a gap
    q = q.copy()
    q[2500:, 0] -= 2 * np.pi                              # a driver's wrap
    dq = dq.copy()
    dq[[10, 11, 700, 3000]] = np.nan                      # messages without velocity
    finite = ~np.isnan(dq).any(axis=1)
    for scale, right in ((1.0, True), (-1.0, False), (0.0, False)):
        v = dq * [scale, 1, 1]
        live = VelocityCheck(JOINTS)
        used = _update_all(live, t, q, v, range(len(t)))
        assert live.rejected != right
        if right:
            assert used == [k for k in range(len(t)) if finite[k]]
        else:
            assert used == [k for k in range(used[-1] + 1) if finite[k]] and \
                t[used[-1]] - t[0] < 2.0, used[-1]
        for split in (0, 1, 11, 400, 1501, len(t) - 1):
            again = VelocityCheck(JOINTS)
            got = _update_all(again, t, q, v, range(split))
            stop = again.run(t[split:], q[split:], v[split:])
            got += [split + k for k in range(stop) if finite[split + k]]
            assert got == used and again.note == live.note, (scale, split)
