"""GravityClient over real DDS against a server that loses the first copy of every query:
the blocking call sends the query again and gets its answer (issue 6/9)."""

import numpy as np
import pytest

from ros_utils import RosHarness

pytest.importorskip('rclpy')
pytestmark = pytest.mark.ros

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from arm_dyn_id.nodes.gravity_client import GravityClient, GravityQueryError  # noqa: E402

JOINTS = ['joint_1', 'joint_2']
QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class LossyServer:
    """Answers G(q) = 2 q, but only from the second time it sees a query id on."""

    def __init__(self, harness):
        self.seen = {}
        self.node = harness.node
        self.pub = self.node.create_publisher(JointState, 'gravity_result', QOS)
        self.node.create_subscription(JointState, 'gravity_query', self._on_query, QOS)

    def _on_query(self, msg):
        key = msg.header.frame_id
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] < 2:
            return          # this copy is "lost"
        reply = JointState()
        reply.header = msg.header
        reply.name = list(msg.name)
        reply.effort = [2.0 * x for x in msg.position]
        self.pub.publish(reply)


def test_a_lost_query_is_sent_again_and_answered(ros_env):
    with RosHarness(ros_env.domain_id, name='lossy_server') as server_side, \
            RosHarness(ros_env.domain_id, name='client') as client_side:
        server = LossyServer(server_side)
        client = GravityClient(client_side.node)
        assert client.wait_for_server(20.0)
        got = client.call(JOINTS, [0.1, -0.3], timeout=5.0, resend_period=0.05)
        np.testing.assert_allclose(got, [0.2, -0.6])
        assert client.resends >= 1
        assert max(server.seen.values()) >= 2
        # without the resend the same loss is a timeout, said as such
        with pytest.raises(GravityQueryError, match='no gravity_result within'):
            client.call(JOINTS, [0.1, -0.3], timeout=0.5, resend_period=None)
