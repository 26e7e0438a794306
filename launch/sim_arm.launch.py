"""Start the simulated arm alone.

    ros2 launch arm_dyn_id sim_arm.launch.py config:=humanoid_arm.yaml use_sim_time:=true
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    config = PathJoinSubstitution(
        [FindPackageShare('arm_dyn_id'), 'config', LaunchConfiguration('config')])
    return LaunchDescription([
        DeclareLaunchArgument('config', default_value='humanoid_arm.yaml',
                              description='arm YAML in the package config/ folder'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='publish /clock and stamp with simulated time'),
        DeclareLaunchArgument('real_time_factor', default_value='1.0',
                              description='sim time only: speed-up; 0 = as fast as possible'),
        Node(
            namespace='',
            package='arm_dyn_id',
            executable='sim_arm_node',
            name='sim_arm_node',
            output='screen',
            parameters=[
                config,
                {'config_file': config,
                 'use_sim_time': LaunchConfiguration('use_sim_time'),
                 'real_time_factor': LaunchConfiguration('real_time_factor')},
            ],
        ),
    ])
