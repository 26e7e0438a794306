"""Serve gravity torques from a saved model file (identifier_node with serve_only).

    ros2 launch arm_dyn_id serve.launch.py [model_file:=/path/model.yaml]

Without model_file it serves the identifier's latest fit,
$ROS_HOME/arm_dyn_id/<robot_name>/latest/model.yaml (docs/identifier.md).

The node reloads the file when it changes (polled every model_poll_period s) and
keeps serving the previous model if the new file is invalid.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    model_file = LaunchConfiguration('model_file')
    config = LaunchConfiguration('config')
    gravity = LaunchConfiguration('gravity')
    poll = LaunchConfiguration('model_poll_period')
    return LaunchDescription([
        DeclareLaunchArgument('model_file', default_value='',
                              description='model YAML to serve (gravity or full); empty: '
                              'the latest fit, <model_dir>/latest/model.yaml'),
        DeclareLaunchArgument(
            'config',
            default_value=PathJoinSubstitution(
                [FindPackageShare('arm_dyn_id'), 'config', 'humanoid_arm.yaml']),
            description='arm config YAML (joints, URDF, default gravity)'),
        DeclareLaunchArgument('gravity', default_value='9.81',
                              description='gravity magnitude served (m/s^2; Moon 1.63)'),
        DeclareLaunchArgument('model_poll_period', default_value='1.0',
                              description='model file change check period (s)'),
        Node(
            namespace='',
            package='arm_dyn_id',
            executable='identifier_node',
            name='identifier_node',
            output='screen',
            parameters=[{
                'config_file': config,
                'model_file': ParameterValue(model_file, value_type=str),
                'serve_only': True,
                'gravity': ParameterValue(gravity, value_type=float),
                'model_poll_period': ParameterValue(poll, value_type=float),
            }],
        ),
    ])
