"""Identify a real arm: excitation + recorder + identifier.

    ros2 launch arm_dyn_id identify.launch.py config:=/path/to/my_arm.yaml \\
        controller:=joint_trajectory_controller
    ros2 service call /excitation_node/start std_srvs/srv/Trigger

``config`` is a path or the name of a file in the package's config/ folder; every
node reads its own section of it (``excitation_node:``, ``recorder_node:``,
``identifier_node:``) besides the shared ``/**`` keys. Every argument is typed
(``--show-args`` lists them with their descriptions). The arm's driver must publish
``joint_states`` (motor current in ``effort``) and run a position controller named
``controller`` (``<controller>/joint_trajectory`` or ``<controller>/commands``).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    config = LaunchConfiguration('config')
    common = {'config_file': config,
              'use_sim_time': ParameterValue(LaunchConfiguration('use_sim_time'),
                                             value_type=bool)}

    def text(name):
        # typed: a value that looks like a number (a plan file '2026') stays a string
        return ParameterValue(LaunchConfiguration(name), value_type=str)

    def node(executable, extra=None):
        # the config file as a parameter file sets each node's own section; the
        # dict after it overrides it with the launch arguments. namespace='' makes
        # launch_ros write that dict under the node's name: under '/**' the node's
        # own section in the config file would win over it.
        return Node(package='arm_dyn_id', executable=executable, name=executable,
                    namespace='',
                    output='screen', parameters=[config, dict(common, **(extra or {}))])

    return LaunchDescription([
        DeclareLaunchArgument(
            'config',
            default_value=PathJoinSubstitution(
                [FindPackageShare('arm_dyn_id'), 'config', 'humanoid_arm.yaml']),
            description='arm YAML (path); the shipped ones are humanoid_arm.yaml and '
                        'staubli_tx60.yaml in share/arm_dyn_id/config'),
        DeclareLaunchArgument('controller', default_value='arm_controller',
                              description='position controller namespace of the arm'),
        DeclareLaunchArgument('output', default_value='trajectory',
                              choices=['trajectory', 'commands'],
                              description='trajectory (JointTrajectory) or commands '
                                          '(streamed Float64MultiArray)'),
        DeclareLaunchArgument('plan_file', default_value='',
                              description='plan from `arm-dyn-id design`; empty: designed '
                                          'at start-up from the config'),
        DeclareLaunchArgument('output_dir', default_value='recordings',
                              description='where the recorder writes its bags'),
        DeclareLaunchArgument('use_sim_time', default_value='false', choices=['true', 'false'],
                              description='true when the arm is simulated with /clock'),
        DeclareLaunchArgument('on_done', default_value='stop',
                              choices=['stop', 'rotate', 'continue'],
                              description='recorder when the excitation reports done: stop '
                                          '(close the bag), rotate (close it, open a new '
                                          'one) or continue'),
        node('excitation_node', {'controller': text('controller'), 'output': text('output'),
                                 'plan_file': text('plan_file')}),
        node('recorder_node', {'output_dir': text('output_dir'), 'on_done': text('on_done')}),
        node('identifier_node'),
    ])
