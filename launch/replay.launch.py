"""Replay a recorded bag into the identifier (live counterpart of ``arm-dyn-id fit``).

Start this, then play the bag with its clock in a second terminal::

    ros2 launch arm_dyn_id replay.launch.py config:=my_arm.yaml model_file:=/tmp/model.yaml
    ros2 bag play BAG --clock             # BAG: the bag folder (MCAP or sqlite3)

and, when the bag has finished, fit (unless ``fit_on_done`` fits at the plan's
``done`` marker)::

    ros2 service call /identifier_node/fit std_srvs/srv/Trigger

Every node runs with ``use_sim_time``, so header stamps and marker times keep the
bag's clock. What the bag holds decides what runs:

- a recorder bag (``/joint_torques`` and ``/excitation_segments`` recorded):
  the identifier alone (``raw_currents:=false``, the default);
- a plain ``ros2 bag record`` bag with the current in ``joint_states.effort``:
  ``raw_currents:=true`` also starts the recorder, which converts currents to
  ``joint_torques`` (seed 000 eq. 19) and writes a new recording.

Node-specific settings (``methods``, payload...) go in the config file's
``identifier_node: ros__parameters:`` section. The model equals
``arm-dyn-id fit BAG --config CFG --holdout 0`` on the same bag (same samples,
markers, noise weights and estimators; test/test_replay.py checks it).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description():
    config = LaunchConfiguration('config')
    model_file = LaunchConfiguration('model_file')
    fit_on_done = LaunchConfiguration('fit_on_done')
    raw_currents = LaunchConfiguration('raw_currents')
    output_dir = LaunchConfiguration('output_dir')
    sim_time = {'use_sim_time': True}
    # typed: a value that looks like a number stays a string
    model_file = ParameterValue(model_file, value_type=str)
    output_dir = ParameterValue(output_dir, value_type=str)

    return LaunchDescription([
        DeclareLaunchArgument(
            'config',
            default_value=PathJoinSubstitution(
                [FindPackageShare('arm_dyn_id'), 'config', 'humanoid_arm.yaml']),
            description='arm config YAML (joints, torque constants, urdf)'),
        DeclareLaunchArgument(
            'model_file', default_value='identified_model.yaml',
            description='where the identifier writes the model (YAML)'),
        DeclareLaunchArgument(
            'fit_on_done', default_value='true', choices=['true', 'false'],
            description='fit when the excitation_segments "done" marker arrives'),
        DeclareLaunchArgument(
            'raw_currents', default_value='false', choices=['true', 'false'],
            description='the bag holds only joint_states with currents: start the recorder '
                        'to publish joint_torques'),
        DeclareLaunchArgument(
            'output_dir', default_value='recordings',
            description='recorder output folder (raw_currents:=true only)'),

        Node(
            namespace='',
            package='arm_dyn_id',
            executable='recorder_node',
            name='recorder_node',
            output='screen',
            condition=IfCondition(raw_currents),
            parameters=[config, sim_time, {
                'config_file': config,
                'output_dir': output_dir,
                'record_on_start': True,
            }],
        ),
        Node(
            namespace='',
            package='arm_dyn_id',
            executable='identifier_node',
            name='identifier_node',
            output='screen',
            parameters=[config, sim_time, {
                'config_file': config,
                'model_file': model_file,
                'fit_on_done': ParameterValue(fit_on_done, value_type=bool),
            }],
        ),
    ])
