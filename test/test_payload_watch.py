"""The payload watch (arm_dyn_id.service.payload_watch, issue 24 item 5): a 1 kg load picked up
and put down by the simulated Staubli TX-60 (MuJoCo) while it moves gives two events with the
right mass within 2 s (simulated time) of each change, applied and reverted when asked; a
brief push gives none; a fit whose standard error is too large applies nothing; and the
identifier node publishes the events on ~/payload_events and serves the payload."""

import json

import mujoco
import numpy as np
import pytest

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.model.robot import RobotModel
from arm_dyn_id.service.dynamics import ResidualStream, ServedDynamics, run_stream
from arm_dyn_id.service.payload_watch import (
    APPLIED, PICKED_UP, PUT_DOWN, REVERTED, PayloadWatch, WatchSettings, run_watch)
from arm_dyn_id.sim.arm import SimArm, SimParams, true_model

T_ON, T_OFF = 3.0, 7.0          # s, the load is held in [T_ON, T_OFF)
MASS, COM = 1.0, (0.0, 0.0, 0.05)
Q0 = np.array([0.0, 0.6, 1.2, 0.0, 0.5, 0.0])
AMP = np.array([0.8, 0.4, 0.4, 1.0, 0.6, 1.0])
HZ = np.array([0.13, 0.21, 0.17, 0.29, 0.23, 0.31])
THRESHOLDS = [3.0, 3.0, 1.5, 0.5, 0.5, 0.3]     # N·m, a push of 40 N flags contact


def simulate(t_on=T_ON, t_off=T_OFF, seconds=10.0, push=None):
    """The TX-60 in MuJoCo moving every joint (slow sinusoids, normal work) with a point
    mass ``MASS`` at ``COM`` in the flange frame in [t_on, t_off), and optionally a force
    ``push = (start, end, F)`` (N, world frame) on link_4.

    Returns the config, the true arm model without load (URDF inertias, the simulator's
    tanh friction) and per 1 ms sample t, q, dq (measured), joint torque k·(i − offset).
    """
    config = load_arm_config('staubli_tx60.yaml', node_name='sim_arm_node')
    values = dict(config.extra, initial_positions=Q0.tolist())
    params = SimParams.from_params(values, config.n_joints)
    arm = SimArm(config, params)
    robot = RobotModel.from_config(config)
    model = true_model(robot, params)
    w = 2 * np.pi * HZ
    n_steps = int(round(seconds / params.timestep))
    t = np.arange(n_steps) * params.timestep
    q, dq, current = (np.empty((n_steps, 6)) for _ in range(3))
    held = False
    for k in range(n_steps):
        on = t_on is not None and t_on <= t[k] < t_off
        if on != held:
            if on:
                arm.attach_payload(MASS, COM)
            else:
                arm.detach_payload()
            held = on
        if push is not None:
            body = mujoco.mj_name2id(arm.model, mujoco.mjtObj.mjOBJ_BODY, 'link_4')
            arm.data.xfrc_applied[body, :3] = push[2] if push[0] <= t[k] < push[1] else 0.0
        arm.step(Q0 + AMP * np.sin(w * t[k]), AMP * w * np.cos(w * t[k]),
                 -AMP * w * w * np.sin(w * t[k]))
        _, q[k], dq[k], current[k] = arm.measure()
    tau = config.joint_torque_gains * (current - config.current_offsets)
    return config, model, t, q, dq, tau


def follow(config, model, t, q, dq, tau, settings, thresholds=None):
    """What the node does, without ROS: the residual of the served model into the watch;
    an applied / reverted event rebuilds the served model with its payload. Returns the
    watch, its events and the payload mass served at every sample."""
    watch = PayloadWatch(model.robot, settings, 'flange', noise=config.torque_noise)
    served = None
    stream = ResidualStream(ServedDynamics(model), 25.0, thresholds)
    events, mass = [], np.zeros(len(t))
    for k in range(len(t)):
        _, v, _, r, contact = stream.step(t[k], q[k], dq[k], tau[k])
        for event in watch.update(t[k], q[k], v, r, contact, served):
            events.append(event)
            if event.kind in (APPLIED, REVERTED):
                served = event.payload
                stream = ResidualStream(ServedDynamics(model, payload=served), 25.0,
                                        thresholds)
        mass[k] = 0.0 if served is None else served.mass
    return watch, events, mass


@pytest.fixture(scope='module')
def pick_and_place():
    return simulate()


def test_pick_up_and_put_down_give_two_events_with_the_mass(pick_and_place):
    config, model, t, q, dq, tau = pick_and_place
    residual = run_stream(ResidualStream(ServedDynamics(model), 25.0), t, q, dq,
                          tau)['residual']
    said = []
    watch = PayloadWatch(model.robot, WatchSettings(), 'flange', noise=config.torque_noise,
                         say=said.append)
    events = run_watch(watch, t, q, dq, residual)
    assert [e.kind for e in events] == [PICKED_UP, PUT_DOWN], said
    up, down = events
    assert T_ON < up.t <= T_ON + 2.0 and T_OFF < down.t <= T_OFF + 2.0, said
    assert abs(up.mass - MASS) <= 0.1 * MASS, up
    assert abs(up.com[2] - COM[2]) < 0.015 and np.allclose(up.com[:2], 0.0, atol=0.01), up
    assert up.mass_std < 0.1 and up.payload.mass == pytest.approx(up.mass)
    assert down.payload is None and down.mass == 0.0
    body = up.to_dict()
    assert body['event'] == 'picked_up' and body['frame'] == 'flange'
    json.dumps(body)
    # every decision logged with its numbers
    logged = [d['decision'] for d in watch.decisions]
    assert 'candidate' in logged and logged.count(PICKED_UP) == 1
    assert any(f'{up.mass:.3g}' in line and 'picked_up:' in line for line in said), said


def test_applied_after_the_confirmation_and_reverted_when_put_down(pick_and_place):
    config, model, t, q, dq, tau = pick_and_place
    settings = WatchSettings(apply=True)
    watch, events, served = follow(config, model, t, q, dq, tau, settings)
    assert [e.kind for e in events] == [PICKED_UP, APPLIED, PUT_DOWN, REVERTED], \
        watch.decisions
    up, applied, down, reverted = events
    assert applied.t - up.t >= settings.confirm
    assert abs(applied.payload.mass - MASS) <= 0.1 * MASS
    # served with the load while held (the residual of the loaded model stayed usable:
    # the put-down was still seen), back to none within 2 s of putting it down
    # (an event's t is its fit's last sample: the watch decides one sample period later)
    assert np.all(served[(t > applied.t + 0.05) & (t < T_OFF)] == applied.payload.mass)
    assert reverted.t <= T_OFF + 2.0 and np.all(served[t > reverted.t + 0.05] == 0.0)
    assert reverted.payload is None and not watch.applied


@pytest.mark.parametrize('flags', [True, False], ids=['contact_flags', 'no_flags'])
def test_a_brief_push_is_not_a_payload(flags):
    config, model, t, q, dq, tau = simulate(t_on=None, seconds=6.0,
                                            push=(3.0, 3.45, np.array([0.0, 0.0, -40.0])))
    stream = ResidualStream(ServedDynamics(model), 25.0, THRESHOLDS)
    out = run_stream(stream, t, q, dq, tau)
    assert 0.3 < out['contact'].sum() * 1e-3 < 0.6      # the push is seen as a contact
    watch = PayloadWatch(model.robot, WatchSettings(apply=True), 'flange',
                         noise=config.torque_noise)
    events = run_watch(watch, t, q, dq, out['residual'],
                       out['contact'] if flags else None)
    assert events == [], watch.decisions
    # it did look like a load for a moment: a candidate, then refused with a reason
    assert 'candidate' in [d['decision'] for d in watch.decisions]


def test_nothing_is_applied_while_the_standard_error_is_too_large(pick_and_place):
    config, model, t, q, dq, tau = pick_and_place
    settings = WatchSettings(apply=True, max_mass_std=1e-4)
    watch, events, served = follow(config, model, t, q, dq, tau, settings)
    assert events == [] and not served.any()
    held = [d for d in watch.decisions if d['decision'] == 'held']
    assert held and all(d['mass_std'] > 1e-4 for d in held)


def test_settings_are_checked():
    with pytest.raises(ValueError, match='exit_mass 0.5 kg must be below enter_mass'):
        WatchSettings(enter_mass=0.3, exit_mass=0.5)
    with pytest.raises(ValueError, match='window = -1'):
        WatchSettings(window=-1.0)


# -- the node ------------------------------------------------------------------------
@pytest.mark.ros
def test_identifier_node_publishes_payload_events_and_serves_the_payload(
        ros_env, tmp_path, pick_and_place):
    pytest.importorskip('rclpy')
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from ros_utils import RosHarness, node_output, start_node, stop

    config, model, t, q, dq, tau = pick_and_place
    every = slice(None, None, 2)                # 500 Hz is enough and twice as quick
    t, q, dq, tau = t[every], q[every], dq[every], tau[every]
    path = model.save(tmp_path / 'full.yaml')
    proc = start_node('arm_dyn_id.nodes.identifier_node', {
        'serve_only': True, 'model_file': str(path), 'config_file': str(config.source),
        'joint_states_effort': 'torque', 'observer_gains': [25.0],
        'payload_watch': True, 'payload_watch_apply': True}, ros_env, name='identifier')
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    try:
        with RosHarness(ros_env.domain_id, name='payload_probe') as h:
            events, residuals, diags = [], [], []
            h.node.create_subscription(String, '/identifier_node/payload_events',
                                       lambda m: events.append(json.loads(m.data)), latched)
            h.node.create_subscription(JointState, 'external_torques',
                                       lambda m: residuals.append(m), qos)

            def on_diag(msg):
                diags.extend({kv.key: kv.value for kv in s.values} for s in msg.status
                             if s.name.startswith('identifier_node'))
            h.node.create_subscription(DiagnosticArray, 'diagnostics', on_diag, 10)
            states = h.node.create_publisher(JointState, 'joint_states', qos)
            h.wait_for(lambda: diags and diags[-1].get('dynamics') == 'full', 60.0,
                       what='the full model loaded')
            assert diags[-1]['payload_watch'] == 'no residual yet', diags[-1]
            h.wait_for_subscribers(states, timeout=20.0)
            names = list(model.joint_names)
            chunk = 250
            for lo in range(0, len(t), chunk):
                for k in range(lo, min(lo + chunk, len(t))):
                    msg = JointState()
                    ns = int(round((t[k] + 100.0) * 1e9))
                    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 10 ** 9)
                    msg.name = names
                    msg.position, msg.velocity, msg.effort = \
                        q[k].tolist(), dq[k].tolist(), tau[k].tolist()
                    states.publish(msg)
                sent = min(lo + chunk, len(t))
                # paced by what came back; the payload's rebuild pauses the stream briefly
                h.wait_for(lambda: len(residuals) >= sent, 60.0,
                           what=f'{sent} external_torques; {node_output(proc)[-2000:]}')
            h.wait_for(lambda: len(events) >= 4, 30.0, what=f'4 payload events: {events}')
            kinds = [e['event'] for e in events]
            assert kinds == ['picked_up', 'applied', 'put_down', 'reverted'], events
            up, applied, down, reverted = events
            assert T_ON < up['stamp'] - 100.0 <= T_ON + 2.0
            assert T_OFF < down['stamp'] - 100.0 <= T_OFF + 2.0
            assert abs(up['mass'] - MASS) <= 0.1 * MASS and up['frame'] == 'flange'
            assert abs(applied['served_mass'] - MASS) <= 0.1 * MASS
            assert reverted['served_mass'] == 0.0
            # the node served the load, then none again: its diagnostics say so at the end
            h.wait_for(lambda: diags and diags[-1].get('payload_mass') == '0.0'
                       and diags[-1].get('payload_watch') == 'empty 0 kg', 30.0,
                       what=f'payload reverted in diagnostics: {diags[-1:]}')
    finally:
        stop(proc)
    log = node_output(proc)
    assert 'payload watch t=' in log and 'picked_up candidate' in log, log[-3000:]
    assert f'payload watch applied: serving the payload {applied["served_mass"]:.4g} kg' \
        in log, log[-3000:]
    assert 'payload watch reverted: serving the payload 0 kg' in log, log[-3000:]
