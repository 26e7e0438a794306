"""The data wing: recorded joint data in and out, ROS-free.

- :mod:`.bag_reader`: one reader of rosbag2 bags (MCAP and sqlite3) into a
  :class:`~arm_dyn_id.data.recording.Recording`;
- :mod:`.recording`: the bag writer with crash recovery;
- :mod:`.motor`: motor current -> joint torque (seed 000 eq. 19);
- :mod:`.segmentation`: sweeps found in joint angles when a bag has no markers;
- :mod:`.quality`: stream-quality counters (gaps, drops, duplicates).

Imports the model wing and the foundation only.
"""
