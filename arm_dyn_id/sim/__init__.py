"""The simulation wing: a MuJoCo arm that stands in for a real one.

- :mod:`.arm`: the simulated arm (friction, current noise, gross errors);
- :mod:`.run`: running a plan on it without ROS.
"""
