"""arm_dyn_id: dynamic parameter identification for robot arms (ROS-free core).

The core takes and returns NumPy arrays, frozen dataclasses and result objects.
It never imports rclpy; the ROS nodes live in ``arm_dyn_id.nodes`` (``nodes/``).
"""

__version__ = '0.1.0'
