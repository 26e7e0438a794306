"""The data wing: recorded joint data in and out, ROS-free.

- :mod:`.bag_format`: what every bag of the package agrees on: topic and type
  names, the recorder's bag layout, the type store, the JointState CDR layout;
- :mod:`.bag_reader`: the one reader of rosbag2 bags (MCAP and sqlite3):
  :func:`~.bag_reader.read_bag` into a :class:`~.bag_reader.Recording`;
- :mod:`.bag_writer`: the recorder's crash-safe bag writer
  (:class:`~.bag_writer.BagRecorder`) and synthetic test bags
  (:func:`~.bag_writer.write_bag`);
- :mod:`.recovery`: finishing bags whose writer died (scan the MCAP records,
  rebuild index and ``metadata.yaml``);
- :mod:`.joint_states`: one check of JointState messages against the configured
  joints, with named rejection reasons;
- :mod:`.motor`: motor current -> joint torque (seed 000 eq. 19);
- :mod:`.segmentation`: sweeps found in joint angles when a bag has no markers;
- :mod:`.quality`: stream-quality counters (gaps, drops, duplicates), live per
  sample and vectorised over a recorded stream.

Imports the model wing and the foundation only; within the wing, bag_format and
quality are imported by the bag modules, never the other way round.
"""
