"""Recorded data of a floating-base robot (issue 17): the arrays on one time base.

:class:`FloatingData` is what a floating-base fit reads: the base pose and twist, the
joint motion and, for a robot standing on sole sensors, their normal forces, all
resampled onto the ``joint_states`` stamps. :func:`read_floating_bag` builds it from a
rosbag2 bag (MCAP or sqlite3) holding the topics named in the configuration's
``floating_base`` section; :func:`write_floating_bag` writes a simulated run as a bag
that holds only what a user's bag holds.
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class FloatingData:
    """Measured signals of one run, (N, ...) each on one time base.

    Attributes
    ----------
    t : ndarray (N,)
        Time, s.
    base_position : ndarray (N, 3)
        Base frame origin in the world, m.
    base_quaternion : ndarray (N, 4)
        Base attitude in the world, ``x y z w``.
    base_linear : ndarray (N, 3)
        Base linear velocity, world axes, m/s.
    base_angular : ndarray (N, 3)
        Base angular velocity, base axes, rad/s.
    q, dq : ndarray (N, n)
        Joint angles (rad) and rates (rad/s) in the configuration's joint order.
    tau : ndarray (N, n), optional
        Joint torques (N·m) when the recording has them.
    forces : ndarray (N, k), optional
        Normal force of each sole sensor, N.
    sensor_positions : ndarray (N, k, 3) or (k, 3), optional
        Sensor positions: in the world (N, k, 3) (simulation), or in the frames named by
        ``sensor_frames`` (k, 3) (a bag: the configured positions).
    sensor_frames : tuple of str, optional
        URDF frame of each sensor when ``sensor_positions`` are local.
    truth : dict
        Noise-free signals (simulation only), same keys and shapes.
    """

    t: np.ndarray
    base_position: np.ndarray
    base_quaternion: np.ndarray
    base_linear: np.ndarray
    base_angular: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray = None
    forces: np.ndarray = None
    sensor_positions: np.ndarray = None
    sensor_frames: tuple = None
    truth: dict = field(default_factory=dict)


def read_floating_bag(path, config, progress=None):
    """Read a floating-base robot's bag into :class:`FloatingData`.

    Parameters
    ----------
    path : str or Path
        The bag folder (rosbag2, MCAP or sqlite3 storage).
    config : ArmConfig
        With ``floating_base`` set: names the topics, the joints and the sole sensors.
    progress : callable, optional
        Called with a fraction in [0, 1] while reading.

    Returns
    -------
    FloatingData
        Every stream resampled onto the ``joint_states`` stamps within the common span.

    Raises
    ------
    DataError
        One line naming the topic and what is wrong with it.
    """
    raise NotImplementedError('read_floating_bag is being written (issue 17 item 4)')


def write_floating_bag(path, config, data, storage='mcap'):
    """Write ``data`` (e.g. a simulated run) as the bag a user's robot would record:
    ``joint_states``, the odometry and/or imu topic and one ``WrenchStamped`` per sole
    sensor, as named in ``config.floating_base``.

    Returns the bag path."""
    raise NotImplementedError('write_floating_bag is being written (issue 17 item 4)')
