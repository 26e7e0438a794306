"""GravityClient over real DDS against a server that loses the first copy of every query:
the blocking call sends the query again and gets its answer (issue 6/9). The client
snippet of docs/identifier.md, run as written against a serving identifier_node, ends
with exit code 0 (issue 22: it aborted, "terminate called without an active exception")."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ros_utils import RosHarness, node_output, start_node, stop

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


DOCS = Path(__file__).resolve().parent.parent / 'docs' / 'identifier.md'


def docs_snippet():
    """The python block of docs/identifier.md that creates a GravityClient, as written."""
    blocks = re.findall(r'```python\n(.*?)```', DOCS.read_text(), flags=re.S)
    found = [b for b in blocks if 'GravityClient(node)' in b and 'rclpy.init()' in b]
    assert len(found) == 1, 'docs/identifier.md: the GravityClient snippet'
    return found[0]


def gravity_model(folder, scale):
    """The humanoid arm's URDF gravity model with every base parameter times ``scale``,
    saved in ``folder``: (model, path)."""
    from arm_dyn_id.config import load_arm_config
    from arm_dyn_id.model.base_parameters import gravity_base_parameters
    from arm_dyn_id.model.gravity import GravityModel
    from arm_dyn_id.model.robot import RobotModel
    robot = RobotModel.from_config(load_arm_config('humanoid_arm.yaml'))
    base = gravity_base_parameters(robot)
    model = GravityModel(robot, base, base.beta(robot.parameters('gravity')) * scale)
    return model, model.save(folder / 'model.yaml')


def test_the_documented_client_snippet_runs_and_exits_0(ros_env, tmp_path):
    model, path = gravity_model(tmp_path, 1.05)
    server = start_node('arm_dyn_id.nodes.identifier_node',
                        {'serve_only': True, 'model_file': str(path)}, ros_env,
                        name='identifier')
    script = tmp_path / 'snippet.py'
    script.write_text(docs_snippet())
    try:
        with RosHarness(ros_env.domain_id) as h:     # the server is up before the snippet
            assert GravityClient(h.node).wait_for_server(60.0), node_output(server)
        run = subprocess.run([sys.executable, str(script)], env=dict(ros_env),
                             cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    finally:
        code = stop(server)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert 'terminate called' not in output and 'Traceback' not in output, output
    printed = re.search(r'G\(q\) = (\[.*\])', run.stdout)
    assert printed, output
    np.testing.assert_allclose(json.loads(printed.group(1)),
                               model.gravity_torques([0.0, 0.5, 0.0, 1.0, 0.0, 0.0]),
                               rtol=1e-9, atol=1e-12)
    assert code == 0, node_output(server)


def test_remapped_query_topics_are_answered_there_only(ros_env, tmp_path):
    """identifier_node's query topics follow the remaps it is given, global or aimed at
    the node by name (a consumer in a namespace of its own)."""
    model, path = gravity_model(tmp_path, 0.95)
    server = start_node('arm_dyn_id.nodes.identifier_node',
                        {'serve_only': True, 'model_file': str(path)}, ros_env,
                        name='identifier', ros_args=['-r', 'gravity_query:=arm/gq', '-r',
                                                     'identifier_node:gravity_result:=arm/gr'])
    try:
        with RosHarness(ros_env.domain_id) as h:
            client = GravityClient(h.node, query_topic='arm/gq', result_topic='arm/gr')
            assert client.wait_for_server(60.0), node_output(server)
            q = [0.1, 0.5, -0.2, 1.0, 0.3, 0.0]
            got = client.call(list(model.joint_names), q, timeout=60.0)
            np.testing.assert_allclose(got, model.gravity_torques(q), rtol=1e-9, atol=1e-12)
            # nothing answers on the names the remaps moved away from
            plain = GravityClient(h.node)
            assert not plain.wait_for_server(1.0)
    finally:
        code = stop(server)
    assert code == 0, node_output(server)
