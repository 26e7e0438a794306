"""The identification pipeline on the simulated arm, one node per process.

    ros2 launch arm_dyn_id sim_identify.launch.py quick:=true
    ros2 service call /excitation_node/start std_srvs/srv/Trigger

The simulated arm (MuJoCo) publishes /clock; every node runs on sim time. The
excitation node designs its plan at start-up (``quick:=true``: the short plan,
about 2.5 min of simulated motion instead of about 20) unless ``plan_file`` names one.
The recorder closes its bag when the excitation reports ``done``; the identifier
fits then and serves gravity torques on ``gravity_torques`` and
``gravity_query``/``gravity_result``. The simulator waits for the recorder
(``lockstep:=true``, the default) so that no sample is lost when the machine cannot
keep up: it then runs slower than ``real_time_factor`` and says so in its diagnostics.
``arm-dyn-id demo`` runs the same nodes and then validates at lunar gravity.
Every argument is typed; ``--show-args`` lists them with their descriptions.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

BOOL = ['true', 'false']
#: name -> (default, description, type, choices)
ARGUMENTS = {
    'quick': ('false', 'design the short plan (about 2.5 min of motion) when no plan_file '
              'is given', bool, BOOL),
    'real_time_factor': ('1.0', 'simulated seconds per wall second, a number (2 or 2.0); '
                         '0 = as fast as the recorder keeps up', float, None),
    'clock_rate': ('100.0', '/clock rate of the simulator (Hz), a divisor of 1000: each '
                   '/clock message wakes every node on sim time (1000: 1 ms timers, a '
                   'slower run)', float, None),
    'lockstep': ('true', 'the simulator never runs more than lockstep_window ahead of the '
                 'recorder (no silent loss on a busy machine)', bool, BOOL),
    'plan_file': ('', 'plan from `arm-dyn-id design`; empty: the excitation node designs '
                  'one at start-up', str, None),
    'output_dir': ('recordings', 'where the recorder writes its bags', str, None),
    'on_done': ('stop', 'recorder at the excitation\'s done: stop, rotate (new bag) or '
                'continue', str, ['stop', 'rotate', 'continue']),
    'model_file': ('identified_model.yaml', 'where the identifier writes the model', str,
                   None),
}


def generate_launch_description():
    config = PathJoinSubstitution(
        [FindPackageShare('arm_dyn_id'), 'config', LaunchConfiguration('config')])
    arg = {name: ParameterValue(LaunchConfiguration(name), value_type=kind)
           for name, (_, _, kind, _) in ARGUMENTS.items()}
    common = {'config_file': config, 'use_sim_time': True}

    def node(executable, extra=None, condition=None):
        # namespace='': launch_ros writes the dict under /<node>, so it wins over the
        # node's own section of the config file (docs/launch_verification.md)
        return Node(package='arm_dyn_id', executable=executable, name=executable,
                    namespace='', output='screen', condition=condition,
                    parameters=[config, dict(common, **(extra or {}))])

    arguments = [DeclareLaunchArgument(
        'config', default_value='humanoid_arm.yaml',
        description='arm YAML in the package config/ folder (needs a sim_arm_node section)')]
    arguments += [DeclareLaunchArgument(name, default_value=default, description=text,
                                        **({'choices': choices} if choices else {}))
                  for name, (default, text, _, choices) in ARGUMENTS.items()]
    lockstep = LaunchConfiguration('lockstep')
    return LaunchDescription(arguments + [
        node('sim_arm_node', {'real_time_factor': arg['real_time_factor'],
                              'clock_rate': arg['clock_rate'],
                              'lockstep_topic': 'joint_torques'},
             condition=IfCondition(lockstep)),
        node('sim_arm_node', {'real_time_factor': arg['real_time_factor'],
                              'clock_rate': arg['clock_rate'],
                              'lockstep_topic': ''},
             condition=UnlessCondition(lockstep)),
        node('recorder_node', {'record_on_start': True, 'output_dir': arg['output_dir'],
                               'on_done': arg['on_done']}),
        node('identifier_node', {'fit_on_done': True, 'model_file': arg['model_file']}),
        node('excitation_node', {'plan_file': arg['plan_file'], 'quick': arg['quick']}),
    ])
