"""Serve gravity torques from a saved model file (identifier_node with serve_only).

    ros2 launch arm_dyn_id serve.launch.py model_file:=/path/<fit folder>/model.yaml
    ros2 launch arm_dyn_id serve.launch.py config:=/path/arm.yaml    # that arm's latest fit

The model file names its URDF and joints, so a model of any arm is served without
``config``. With ``config`` and no ``model_file`` it serves that arm's latest fit,
$ROS_HOME/arm_dyn_id/<robot_name>/latest/model.yaml (docs/identifier.md); the model must
then be of the config's URDF and joints.

Every model passes the model gate: a file that is refused at start (rejected,
implausible, another arm's, corrupt, missing) ends the node with one FATAL line (exit
2); at a reload (the file is polled every model_poll_period s) the previous model stays
served and the diagnostics say why. accept_rejected:=true serves a model marked rejected.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    model_file = LaunchConfiguration('model_file')
    config = LaunchConfiguration('config')
    gravity = LaunchConfiguration('gravity')
    poll = LaunchConfiguration('model_poll_period')
    accept_rejected = LaunchConfiguration('accept_rejected')
    return LaunchDescription([
        DeclareLaunchArgument('model_file', default_value='',
                              description='model YAML to serve (gravity or full, any arm: '
                              'it names its URDF and joints); empty: the latest fit of the '
                              'config\'s robot, <model_dir>/latest/model.yaml'),
        DeclareLaunchArgument(
            'config', default_value='',
            description='arm config YAML (path or shipped name, e.g. humanoid_arm.yaml); '
            'optional: the model must then be of its URDF and joints'),
        DeclareLaunchArgument('gravity', default_value='0.0',
                              description='gravity magnitude served (m/s^2; Moon 1.63); 0: '
                              'the gravity the model was fitted at'),
        DeclareLaunchArgument('accept_rejected', default_value='false',
                              description='serve a model marked rejected (arm-dyn-id fit '
                              '--force wrote it although the data could not support it)'),
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
                'accept_rejected': ParameterValue(accept_rejected, value_type=bool),
                'gravity': ParameterValue(gravity, value_type=float),
                'model_poll_period': ParameterValue(poll, value_type=float),
            }],
        ),
    ])
