"""Gravity compensation for ros2_control (effort_controllers/JointGroupEffortController).

    ros2 launch arm_dyn_id gravity_compensation.launch.py model_file:=/path/model.yaml
    ros2 launch arm_dyn_id gravity_compensation.launch.py \\
        model_topic:=/identifier_node/model controller:=effort_controller
    ros2 launch arm_dyn_id gravity_compensation.launch.py nominal_urdf:=true \\
        gravity_vector:='[9.81, 0.0, 0.0]' payload_mass:=0.5

Publishes ``<controller>/commands`` (std_msgs/Float64MultiArray, in the order of the
config's ``joints``); see docs/compensation.md. Every argument is typed, so
``payload_mass:=1`` or ``stale_timeout:=1`` reach the node as doubles.
"""

from typing import List

import yaml

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

#: name -> (default, description, type)
ARGUMENTS = {
    'model_file': ('', 'model YAML to serve (path); empty: model_topic or nominal_urdf', str),
    'model_topic': ('', 'model YAML topic of an identifier, e.g. /identifier_node/model', str),
    'nominal_urdf': ('false', 'compensate with the URDF\'s nominal parameters', bool),
    'controller': ('effort_controller', 'controller receiving <controller>/commands', str),
    'output': ('effort', 'effort (N·m) or current (A, divided by k_e)', str),
    'payload_mass': ('0.0', 'payload at payload_frame (kg)', float),
    'payload_frame': ('flange', 'URDF frame of the payload', str),
    'friction_compensation': ('0.0', 'fraction of the friction fed forward, 0..1', float),
    'friction_breakaway_velocity': ('0.05', 'Coulomb feed-forward tanh velocity (rad/s)',
                                    float),
    'stale_timeout': ('0.1', 'zeros after this long without joint_states (s)', float),
    'accept_rejected': ('false', 'serve a model marked rejected (fit --force) anyway', bool),
    'accept_other_urdf': ('false', 'serve a model fitted with another URDF anyway', bool),
    'use_sim_time': ('false', 'use /clock (simulated arm in sim time)', bool),
}
#: Array arguments passed only when given (the config file's value otherwise).
OPTIONAL_ARRAYS = {
    'gravity_vector': 'gravity [gx, gy, gz] in the URDF root frame (m/s^2), e.g. '
                      '"[0.0, 0.0, 9.81]" for a ceiling mount; empty: the config\'s',
    'payload_com': 'payload centre of mass "[x, y, z]" in payload_frame (m); empty: 0',
}


def _floats(name, text):
    """'[0, 0, 9.81]' -> [0.0, 0.0, 9.81] (launch itself refuses lists mixing 0 and 9.81)."""
    try:
        values = yaml.safe_load(text)
        if not isinstance(values, list) or len(values) != 3:
            raise ValueError
        return [float(v) for v in values]
    except (ValueError, TypeError, yaml.YAMLError):
        raise ValueError(f'launch argument {name}:={text!r} must be three numbers, e.g. '
                         '[0.0, 0.0, -9.81]') from None


def _node(context):
    parameters = {'config_file': LaunchConfiguration('config')}
    for name, (_, _, kind) in ARGUMENTS.items():
        value = LaunchConfiguration(name)
        parameters[name] = ParameterValue(value, value_type=kind)
    for name in OPTIONAL_ARRAYS:
        text = LaunchConfiguration(name).perform(context).strip()
        if text:
            parameters[name] = ParameterValue(_floats(name, text), value_type=List[float])
    return [Node(
        namespace='',
        package='arm_dyn_id',
        executable='gravity_compensation_node',
        name='gravity_compensation_node',
        output='screen',
        parameters=[parameters],
    )]


def generate_launch_description():
    arguments = [DeclareLaunchArgument(
        'config',
        default_value=PathJoinSubstitution(
            [FindPackageShare('arm_dyn_id'), 'config', 'humanoid_arm.yaml']),
        description='arm config YAML (joints, URDF, torque constants, gravity)')]
    arguments += [DeclareLaunchArgument(name, default_value=default, description=text)
                  for name, (default, text, _) in ARGUMENTS.items()]
    arguments += [DeclareLaunchArgument(name, default_value='', description=text)
                  for name, text in OPTIONAL_ARRAYS.items()]
    return LaunchDescription(arguments + [OpaqueFunction(function=_node)])
