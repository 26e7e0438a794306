"""A publish that rclpy refuses on a 1 kHz path is counted and logged, not raised
(the demo's recorder died of a Fast DDS 'cannot publish data' under load)."""

import pytest

pytest.importorskip('rclpy')
pytestmark = pytest.mark.ros


def test_refused_publish_is_counted_not_raised(ros_env):
    import rclpy
    from std_msgs.msg import String

    from arm_dyn_id.nodes.executors import try_publish
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_env.domain_id)
    try:
        node = rclpy.create_node('try_publish_test', context=context)
        pub = node.create_publisher(String, 'chatter', 10)
        assert try_publish(node, pub, String(data='one'))
        pub.destroy()       # a publisher rclpy can no longer write to: publish raises
        with pytest.raises(RuntimeError):
            pub.publish(String(data='raw'))
        assert not try_publish(node, pub, String(data='two'))
        assert not try_publish(node, pub, String(data='three'))
        assert sum(node.publish_failures.values()) == 2
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_shutting_down_waits_for_the_context_to_say_so(ros_env):
    import threading

    import rclpy

    from arm_dyn_id.nodes.executors import shutting_down
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_env.domain_id)
    try:
        assert not shutting_down(context, wait=0.05)       # running: a real error
        # the signal handler shuts the context down a moment after a take failed
        timer = threading.Timer(0.1, lambda: rclpy.try_shutdown(context=context))
        timer.start()
        assert shutting_down(context, wait=5.0)
        timer.join()
    finally:
        rclpy.try_shutdown(context=context)
