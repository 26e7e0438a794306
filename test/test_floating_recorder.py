"""The recorder node with a floating-base config (issue 17 item 4), across processes: it
records the odometry and sole-sensor topics beside joint_states (no effort) into the same
bag with their standard types and the floating_base section in the stored config;
read_floating_bag reads that bag; a malformed odometry message (NaN quaternion) is
recorded as received without a crash, and the reader refuses it in one line."""

import math
import time

import numpy as np
import pytest
import yaml

from arm_dyn_id.data.bag_reader import bag_info, read_stored_config
from arm_dyn_id.data.floating import read_floating_bag
from arm_dyn_id.config import load_arm_config
from arm_dyn_id.errors import DataError
from arm_dyn_id.paths import resolve_data_file
from ros_utils import RosHarness, node_output, refusal_line, start_node, stop, wait_for

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

NODE = 'arm_dyn_id.nodes.recorder_node'
QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
RATE = 50.0          # Hz, every stream
SAMPLES = 60
SENSORS = [{'topic': 'foot_r/sole_0', 'frame': 'foot_r', 'position': [0.09, 0.05, -0.06]},
           {'topic': 'foot_r/sole_1', 'frame': 'foot_r', 'position': [0.09, -0.05, -0.06]}]


def write_config(tmp_path, **changes):
    """config/biped.yaml with odometry and two sole sensors (what this test publishes)."""
    src = resolve_data_file('biped.yaml', 'config')
    doc = yaml.safe_load(src.read_text())
    params = doc['/**']['ros__parameters']
    params['urdf'] = str(resolve_data_file(params['urdf'], 'urdf', src.parent))
    params['floating_base'].update(odometry_topic='base_odometry', imu_topic='',
                                   sole_sensors=SENSORS)
    params['floating_base'].update(changes)
    path = tmp_path / 'biped_odom.yaml'
    path.write_text(yaml.safe_dump({'/**': doc['/**']}))
    return path


def stamp(msg, t):
    msg.header.stamp.sec = int(t)
    msg.header.stamp.nanosec = int(round((t - int(t)) * 1e9)) % 1_000_000_000


def messages(joints, k, t, bad=False):
    """One sample of every stream at stamp ``t``: joints at 0.01 k rad, the base turning
    about z by 0.01 k rad and moving 0.05 m/s along its own x axis, forces 100 + k, 50 - k."""
    js = JointState(name=list(joints), position=[0.01 * k] * len(joints),
                    velocity=[0.5] * len(joints))
    stamp(js, t)
    odom = Odometry(child_frame_id='torso')
    odom.header.frame_id = 'world'
    stamp(odom, t)
    odom.pose.pose.position.x = 0.001 * k
    odom.pose.pose.position.z = 0.5
    yaw = 0.01 * k
    odom.pose.pose.orientation.z = math.nan if bad else math.sin(yaw / 2)
    odom.pose.pose.orientation.w = math.cos(yaw / 2)
    odom.twist.twist.linear.x = 0.05
    odom.twist.twist.angular.z = 0.5
    wrenches = []
    for i, force in enumerate((100.0 + k, 50.0 - k)):
        w = WrenchStamped()
        w.header.frame_id = 'foot_r'
        stamp(w, t)
        w.wrench.force.z = force
        wrenches.append(w)
    return js, odom, wrenches


def publish(pubs, joints, first, count, t0, bad_at=None):
    """``count`` samples paced at RATE (stamps t0 + k / RATE)."""
    start = time.monotonic()
    for k in range(first, first + count):
        delay = start + (k - first) / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)      # paces the publishers at RATE
        js, odom, wrenches = messages(joints, k, t0 + k / RATE, bad=k == bad_at)
        pubs[0].publish(js)
        pubs[1].publish(odom)
        for pub, w in zip(pubs[2:], wrenches):
            pub.publish(w)


def closed_bags(tmp_path, count):
    return wait_for(lambda: len(list((tmp_path / 'bags').glob('*/metadata.yaml'))) >= count
                    and sorted(p.parent for p in (tmp_path / 'bags').glob('*/metadata.yaml')),
                    60, what=f'{count} closed bag(s)')


def test_recorder_records_the_floating_topics_and_survives_a_malformed_one(
        ros_env, tmp_path):
    config_path = write_config(tmp_path)
    config = load_arm_config(config_path, need_limits=False)
    proc = start_node(NODE, {'config_file': str(config_path),
                             'output_dir': str(tmp_path / 'bags'), 'record_on_start': True,
                             'expected_rate': RATE, 'gap_threshold': 0.1},
                      ros_env, name='recorder')
    t0 = float(int(time.time()))
    with RosHarness(ros_env.domain_id) as ros:
        pubs = [ros.node.create_publisher(JointState, 'joint_states', QOS),
                ros.node.create_publisher(Odometry, 'base_odometry', QOS)]
        pubs += [ros.node.create_publisher(WrenchStamped, s['topic'], QOS) for s in SENSORS]
        for pub in pubs:
            try:
                ros.wait_for_subscribers(pub, timeout=30)
            except TimeoutError:
                raise AssertionError(node_output(proc))
        wait_for(lambda: list((tmp_path / 'bags').glob('*/*.mcap')), 30,
                 what='the recorder\'s bag')
        publish(pubs, config.joints, 0, SAMPLES, t0)
        # stop once the last sample of every stream reached the node: the torso moves,
        # so wait on the recorder's count of joint_states samples in its diagnostics
        from diagnostic_msgs.msg import DiagnosticArray
        diags = []
        ros.node.create_subscription(DiagnosticArray, 'diagnostics', diags.append, 10)

        def received(n):
            return any(kv.key == 'messages' and int(kv.value) >= n
                       for d in diags for kv in d.status[0].values)
        ros.wait_for(lambda: received(SAMPLES), 30, what='all joint_states at the recorder')
        assert ros.trigger('/recorder_node/stop_recording').success
        (bag,) = closed_bags(tmp_path, 1)
        # a second bag with a NaN quaternion in one odometry message
        assert ros.trigger('/recorder_node/start_recording').success
        publish(pubs, config.joints, SAMPLES, 20, t0, bad_at=SAMPLES + 10)
        ros.wait_for(lambda: received(SAMPLES + 20), 30, what='the second run at the recorder')
        done = ros.trigger('/recorder_node/stop_recording')
        assert done.success, done.message            # the node is alive and answering
        bags = closed_bags(tmp_path, 2)
    assert stop(proc) == 0, node_output(proc)
    topics = bag_info(bag)['topics']
    assert topics['/base_odometry']['type'] == 'nav_msgs/msg/Odometry'
    for s in SENSORS:
        assert topics['/' + s['topic']]['type'] == 'geometry_msgs/msg/WrenchStamped'
    assert topics['/joint_states']['count'] >= SAMPLES - 3
    stored = read_stored_config(bag)
    assert stored['floating_base']['method'] == 'zmp'
    assert stored['topics']['odometry'] == '/base_odometry'
    assert stored['topics']['sole_sensor_1'] == '/foot_r/sole_1'
    assert 'rejected' not in node_output(proc)      # no effort is fine for a floating robot

    data = read_floating_bag(bag, config)
    assert len(data.t) >= SAMPLES - 5
    k = np.round((data.t - t0) * RATE).astype(int)
    np.testing.assert_allclose(data.q, 0.01 * k[:, None] * np.ones((1, 12)), atol=1e-12)
    np.testing.assert_allclose(data.base_position[:, 0], 0.001 * k, atol=1e-9)
    yaw = 0.01 * k
    # the twist was given in the torso's axes: in the world it turns with the yaw
    np.testing.assert_allclose(data.base_linear[:, :2],
                               0.05 * np.stack([np.cos(yaw), np.sin(yaw)], 1), atol=1e-9)
    np.testing.assert_allclose(data.base_angular[:, 2], 0.5, atol=1e-12)
    np.testing.assert_allclose(data.forces, np.stack([100.0 + k, 50.0 - k], 1), atol=1e-9)
    assert data.sensor_frames == ('foot_r', 'foot_r')

    second = [b for b in bags if b != bag][0]
    assert bag_info(second)['topics']['/base_odometry']['count'] >= 15   # recorded as is
    with pytest.raises(DataError, match=r'/base_odometry pose or twist is NaN or inf in 1 '
                       r'message\(s\)'):
        read_floating_bag(second, config)


def test_a_bad_floating_base_section_ends_the_recorder_with_one_line(ros_env, tmp_path):
    sensors = [dict(SENSORS[0], frame='sole_plate')]
    path = write_config(tmp_path, sole_sensors=sensors)
    proc = start_node(NODE, {'config_file': str(path), 'output_dir': str(tmp_path / 'bags')},
                      ros_env, name='recorder')
    fatal = refusal_line(proc, 90)
    assert "floating_base.sole_sensors[0].frame = 'sole_plate' is not a frame" in fatal
