"""The demo pipeline with one node per process, for ROS users.

    ros2 launch arm_dyn_id sim_identify.launch.py
    ros2 service call /excitation_node/start std_srvs/srv/Trigger

The simulated arm (MuJoCo) publishes /clock; every node runs on sim time. The
identifier fits when the excitation reports ``done`` and then serves gravity
torques on ``gravity_torques`` and ``gravity_query``/``gravity_result``.
``arm-dyn-id demo`` runs the same nodes and then validates at lunar gravity.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    config = PathJoinSubstitution(
        [FindPackageShare('arm_dyn_id'), 'config', LaunchConfiguration('config')])
    common = {
        'config_file': config,
        'use_sim_time': True,
    }

    def node(executable, extra=None):
        return Node(package='arm_dyn_id', executable=executable, name=executable,
                    namespace='',
                    output='screen', parameters=[dict(common, **(extra or {}))])

    return LaunchDescription([
        DeclareLaunchArgument('config', default_value='humanoid_arm.yaml',
                              description='arm YAML in the package config/ folder '
                                          '(needs a sim_arm_node section)'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='simulated seconds per wall second; 0 = as fast '
                                          'as possible'),
        DeclareLaunchArgument('plan_file', default_value='',
                              description='plan from `arm-dyn-id design`; empty: the '
                                          'excitation node designs one at start-up'),
        DeclareLaunchArgument('output_dir', default_value='recordings',
                              description='where the recorder writes its bags'),
        DeclareLaunchArgument('model_file', default_value='identified_model.yaml',
                              description='where ~/save writes the model'),
        node('sim_arm_node', {'real_time_factor': ParameterValue(
            LaunchConfiguration('real_time_factor'), value_type=float)}),
        node('recorder_node', {'record_on_start': True,
                               'output_dir': LaunchConfiguration('output_dir')}),
        node('identifier_node', {'fit_on_done': True,
                                 'model_file': LaunchConfiguration('model_file')}),
        node('excitation_node', {'plan_file': LaunchConfiguration('plan_file')}),
    ])
