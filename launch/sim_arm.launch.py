"""Start the simulated arm alone.

    ros2 launch arm_dyn_id sim_arm.launch.py
    ros2 launch arm_dyn_id sim_arm.launch.py use_sim_time:=true real_time_factor:=2

``config`` is a file name in the package's config/ folder (it needs a
``sim_arm_node:`` section). Every argument is typed: ``real_time_factor:=2`` reaches
the node as the double 2.0. ``ros2 launch arm_dyn_id sim_arm.launch.py --show-args``
lists them with their descriptions. See docs/simulation.md.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

#: name -> (default, description, type, choices)
ARGUMENTS = {
    'use_sim_time': ('false', 'true: the node publishes /clock and stamps with simulated '
                     'time; false: it steps in real time on the wall clock', bool,
                     ['true', 'false']),
    'real_time_factor': ('1.0', 'sim time only: simulated seconds per wall second; 0 = as '
                         'fast as possible (a number, e.g. 2 or 0.5)', float, None),
    'publish_rate': ('1000.0', 'joint_states rate (Hz), a divisor of the 1 kHz step rate',
                     float, None),
    'clock_rate': ('1000.0', 'sim time only: /clock rate (Hz), a divisor of the 1 kHz step '
                   'rate (each message wakes every node on sim time)', float, None),
    'lockstep_topic': ('', 'sim time only: topic whose stamps the simulator waits for '
                       '(joint_torques: never run ahead of the recorder); empty: off', str,
                       None),
}


def generate_launch_description():
    config = PathJoinSubstitution(
        [FindPackageShare('arm_dyn_id'), 'config', LaunchConfiguration('config')])
    parameters = {'config_file': config}
    for name, (_, _, kind, _) in ARGUMENTS.items():
        parameters[name] = ParameterValue(LaunchConfiguration(name), value_type=kind)
    arguments = [DeclareLaunchArgument(
        'config', default_value='humanoid_arm.yaml',
        description='arm YAML in the package config/ folder (with a sim_arm_node section)')]
    arguments += [DeclareLaunchArgument(name, default_value=default, description=text,
                                        **({'choices': choices} if choices else {}))
                  for name, (default, text, _, choices) in ARGUMENTS.items()]
    return LaunchDescription(arguments + [
        Node(
            namespace='',      # launch_ros writes the dict under /sim_arm_node: it wins
            package='arm_dyn_id',
            executable='sim_arm_node',
            name='sim_arm_node',
            output='screen',
            parameters=[config, parameters],
        ),
    ])
