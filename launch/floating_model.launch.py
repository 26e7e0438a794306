"""Serve an identified floating-base model (floating_model_node).

    ros2 launch arm_dyn_id floating_model.launch.py config:=space_manipulator.yaml
    ros2 launch arm_dyn_id floating_model.launch.py config:=biped.yaml \\
        model_file:=/path/fit/model.yaml

The config must have a ``floating_base`` section (docs/floating_base.md). Without
model_file the node serves the latest fit, $ROS_HOME/arm_dyn_id/<robot_name>/latest/model.yaml,
or the nominal URDF (with a warning) until one appears. Queries on com_query /
momentum_query, streams com / momentum (docs/interfaces.md). Every argument is typed,
so ``max_base_age:=1`` reaches the node as a double.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

#: name -> (default, description, type)
ARGUMENTS = {
    'model_file': ('', 'floating model YAML to serve; empty: the latest fit in model_dir, '
                   'else the nominal URDF', str),
    'model_dir': ('', 'absolute folder of the fits; empty: $ROS_HOME/arm_dyn_id/<robot>', str),
    'model_poll_period': ('1.0', 'model file change check period (s)', float),
    'max_base_age': ('0.5', 'largest joint_states-to-odometry stamp difference paired (s)',
                     float),
    'world_frame': ('world', 'frame_id of the com and momentum streams', str),
    'accept_rejected': ('false', 'serve a model marked rejected (fit --force) anyway', bool),
    'accept_other_urdf': ('false', 'serve a model fitted with another URDF anyway', bool),
    'use_sim_time': ('false', 'use /clock', bool),
}


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(
            'config',
            default_value=PathJoinSubstitution(
                [FindPackageShare('arm_dyn_id'), 'config', 'space_manipulator.yaml']),
            description='robot config YAML with a floating_base section (path or shipped '
            'name: space_manipulator.yaml, biped.yaml)'),
    ] + [DeclareLaunchArgument(name, default_value=default, description=text,
                               **({'choices': ['true', 'false']} if kind is bool else {}))
         for name, (default, text, kind) in ARGUMENTS.items()]
    parameters = {'config_file': LaunchConfiguration('config')}
    parameters.update({name: ParameterValue(LaunchConfiguration(name), value_type=kind)
                       for name, (_, _, kind) in ARGUMENTS.items()})
    return LaunchDescription(arguments + [
        Node(
            package='arm_dyn_id',
            executable='floating_model_node',
            name='floating_model_node',
            output='screen',
            parameters=[parameters],
        ),
    ])
