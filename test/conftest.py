"""Generic test setup: keep ROS's per-user state out of the user's home.

Node tests set their own ``ROS_DOMAIN_ID`` (CONVENTIONS.md 14); this only makes
sure nothing a test starts writes logs to ``~/.ros`` or talks beyond loopback.
"""

import os
import tempfile

# the per-test ROS environment fixture of the node tests (test/ros_utils.py)
from ros_utils import ros_env  # noqa: F401

_ROS_HOME = tempfile.TemporaryDirectory(prefix='arm_dyn_id_ros_home_')


def pytest_configure(config):
    os.environ['ROS_HOME'] = _ROS_HOME.name
    os.environ['ROS_LOG_DIR'] = os.path.join(_ROS_HOME.name, 'log')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')


def pytest_unconfigure(config):
    _ROS_HOME.cleanup()
