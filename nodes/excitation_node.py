"""Excitation node: drives the arm through excitation trajectories.

Placeholder until it is implemented.
"""

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


class ExcitationNode(Node):
    """Placeholder node: says it is not implemented and does nothing else."""

    def __init__(self):
        super().__init__('excitation_node')
        self.get_logger().info('excitation_node: not implemented yet')


def main(args=None):
    """Run the node; returns 0 (the process exit code)."""
    rclpy.init(args=args)
    node = None
    try:
        node = ExcitationNode()
        rclpy.spin_once(node, timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
