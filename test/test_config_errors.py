"""Configuration errors at start-up, across processes (issue 9 b, issue 16 item 7).

Each node is started as a real process with one bad arm config, or one bad parameter
on the command line (``gravity:=earth``, ``payload_mass:=-1``), and must refuse it
with one FATAL line naming the parameter and the offending value, exit code 2
(nodes/executors.py ``run_node``, the same in every node) and no traceback. The
excitation node with no plan to run ends the same way instead of idling.
"""

import copy

import pytest
import yaml

from arm_dyn_id.paths import share_dir
from ros_utils import node_output, refusal_line, start_node

pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros, pytest.mark.slow]

JOINTS = [f'joint_{i}' for i in range(1, 7)]
GOOD = {
    'robot_name': 'humanoid_arm', 'urdf': str(share_dir() / 'urdf' / 'humanoid_arm.urdf'),
    'joints': JOINTS, 'gravity': 9.81, 'torque_constants': [1.5, 1.5, 0.8, 0.8, 0.2, 0.1],
    'position_limits_lower': [-1.0, -0.5, -1.6, -0.1, -1.6, -1.2],
    'position_limits_upper': [3.0, 2.8, 1.6, 2.6, 1.6, 1.2],
    'velocity_limits': [2.0, 2.0, 2.0, 2.0, 2.0, 0.5],
    'acceleration_limits': [5.0] * 6,
}
PER_JOINT = ('torque_constants', 'position_limits_lower', 'position_limits_upper',
             'velocity_limits', 'acceleration_limits')
MISSING_URDF = '/nonexistent/arm_dyn_id_test/no_such_arm.urdf'


def _set(**values):
    def edit(params, node_params):
        params.update(values)
    return edit


def _drop(key):
    def edit(params, node_params):
        del params[key]
    return edit


def _node_param(**values):
    def edit(params, node_params):
        node_params.update(values)
    return edit


# case -> (edit of the config, nodes it applies to, texts the message must contain)
CASES = {
    'urdf_missing': (_set(urdf=MISSING_URDF), ('recorder', 'identifier', 'excitation'),
                     ['parameter urdf', MISSING_URDF, 'does not exist']),
    'array_too_short': (_set(position_limits_upper=[3.0, 2.8, 1.6, 2.6, 1.6]),
                        ('recorder', 'identifier', 'excitation'),
                        ['parameter position_limits_upper', '5 values',
                         '[3.0, 2.8, 1.6, 2.6, 1.6]', 'one per joint (6)']),
    'joint_not_in_urdf': (_set(joints=JOINTS + ['joint_7'], **{
        key: GOOD[key] + GOOD[key][-1:] for key in PER_JOINT}),
        ('identifier', 'excitation'), ['parameter joints', "'joint_7'", 'humanoid_arm.urdf']),
    'torque_constants_missing': (_drop('torque_constants'), ('recorder',),
                                 ['parameter torque_constants is missing']),
    'torque_constants_zero': (_set(torque_constants=[1.5, 1.5, 0.0, 0.8, 0.2, 0.1]),
                              ('recorder',), ['parameter torque_constants[2] = 0.0', '> 0']),
    'torque_constants_negative': (_set(torque_constants=[1.5, 1.5, 0.8, 0.8, -0.2, 0.1]),
                                  ('recorder',), ['parameter torque_constants[4] = -0.2', '> 0']),
    'limits_inverted': (_set(position_limits_lower=[-1.0, -0.5, 1.6, -0.1, -1.6, -1.2],
                             position_limits_upper=[3.0, 2.8, -1.6, 2.6, 1.6, 1.2]),
                        ('recorder', 'identifier', 'excitation'),
                        ['joint_3', 'inverted', 'position_limits_lower[2] = 1.6',
                         'position_limits_upper[2] = -1.6']),
    'speed_above_velocity_limit': (_node_param(speed=1.0), ('excitation',),
                                   ['parameter speed = 1.0', 'joint_6',
                                    'velocity_limits[5] = 0.5']),
    # a word where numbers belong, inside the config file
    'torque_constants_word': (_set(torque_constants='fast'),
                              ('recorder', 'identifier', 'excitation', 'sim_arm'),
                              ["parameter torque_constants = 'fast'"]),
}
PARAMS = [pytest.param(node, case, id=f'{node}-{case}')
          for case, (_, nodes, _) in CASES.items() for node in nodes]


def _write_config(tmp_path, case):
    edit, _, needles = CASES[case]
    params, node_params = copy.deepcopy(GOOD), {}
    edit(params, node_params)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': params}}))
    return path, node_params, needles


def _assert_names(text, needles, output):
    missing = [n for n in needles if n not in text]
    assert not missing, f'{missing} not in the message {text!r}\n{output}'
    assert 'Traceback' not in output, output


def _assert_one_fatal(proc, needles):
    fatal = refusal_line(proc, 90)
    output = node_output(proc)
    _assert_names(fatal, needles, output)
    return output


@pytest.mark.parametrize('node, case', PARAMS)
def test_bad_config_refused_at_start_up(ros_env, tmp_path, node, case):
    config, node_params, needles = _write_config(tmp_path, case)
    params = {'config_file': str(config), **node_params}
    if node == 'recorder':
        params['output_dir'] = str(tmp_path / 'bags')
    if node == 'excitation':
        params['quick'] = True           # designs a plan at start-up (no plan_file)
    proc = start_node(f'arm_dyn_id.nodes.{node}_node', params, ros_env, name=node)
    _assert_one_fatal(proc, needles)
    assert not (tmp_path / 'bags').exists(), 'the recorder created its output folder'


# node -> (-p arguments, texts the FATAL line must contain)
COMMAND_LINE = {
    'sim_arm-gravity_word': ('sim_arm', ['gravity:=earth'], ['parameter gravity', 'earth']),
    'recorder-gravity_word': ('recorder', ['gravity:=earth'], ['parameter gravity', 'earth']),
    'identifier-gravity_word': ('identifier', ['gravity:=earth'],
                                ['parameter gravity', 'earth']),
    'sim_arm-payload_negative': ('sim_arm', ['payload_mass:=-1'],
                                 ['parameter payload_mass', '-1']),
    'identifier-payload_negative': ('identifier', ['payload_mass:=-1'],
                                    ['parameter payload_mass', '-1']),
    'sim_arm-rate_word': ('sim_arm', ['real_time_factor:=fast'],
                          ['parameter real_time_factor', 'fast']),
    'excitation-no_plan': ('excitation', ['plan_file:=/nonexistent/arm_dyn_id/plan.yaml'],
                           ['no plan to run', '/nonexistent/arm_dyn_id/plan.yaml']),
    'recorder-on_done_word': ('recorder', ['on_done:=later'], ['parameter on_done', 'later']),
}


@pytest.mark.parametrize('case', list(COMMAND_LINE))
def test_bad_parameter_on_the_command_line_is_one_fatal_line(ros_env, tmp_path, case):
    node, given, needles = COMMAND_LINE[case]
    ros_args = ['-p', 'config_file:=humanoid_arm.yaml', '-p', f'output_dir:={tmp_path}/bags']
    for item in given:
        ros_args += ['-p', item]
    proc = start_node(f'arm_dyn_id.nodes.{node}_node', None, ros_env, name=node,
                      ros_args=ros_args)
    _assert_one_fatal(proc, needles)


def test_a_whole_number_for_a_float_parameter_is_accepted(ros_env, tmp_path):
    """``real_time_factor:=2`` means 2.0 (rclpy alone refuses an INTEGER for a DOUBLE
    parameter); the node starts and reports the value."""
    from ros_utils import stop, wait_for
    proc = start_node('arm_dyn_id.nodes.sim_arm_node', None, ros_env, name='sim_arm',
                      ros_args=['-p', 'config_file:=humanoid_arm.yaml',
                                '-p', 'use_sim_time:=true', '-p', 'real_time_factor:=2'])
    text = 'sim time x2'
    wait_for(lambda: proc.poll() is not None or text in node_output(proc), 60,
             what='the node up')
    assert proc.poll() is None, node_output(proc)
    assert stop(proc) == 0, node_output(proc)
    assert '[FATAL]' not in node_output(proc)


HALF_BUILT = '''
import gc, os, sys, weakref
from rclpy.node import Node
from arm_dyn_id.errors import ConfigError
from arm_dyn_id.nodes import executors

built = []

class HalfBuilt(Node):
    node_name = 'half_built'

    def __init__(self):
        super().__init__('half_built', parameter_overrides=[])
        self.create_timer(0.01, lambda: None)
        built.append(weakref.ref(self))
        raise ConfigError('parameter speed = 100.0 refused')

def exit_process(code):
    gc.collect()        # without a reference, the half-built node would be freed here
    node = built[0]()
    print('alive' if node is not None else 'freed', code,
          'destroyed' if node is not None and not list(node.timers) else 'kept', flush=True)
    os._exit(code)

executors.exit_process = exit_process
if sys.argv[1] == 'exit':
    executors.run_node(HalfBuilt)
else:
    code = executors.run_node(HalfBuilt, exit=False)
    node = built[0]()
    # destroy_node destroys the node's timers (a context shut down leaves them listed)
    print('destroyed' if not list(node.timers) else 'not destroyed', code, flush=True)
'''


@pytest.mark.parametrize('mode', ['exit', 'return'])
def test_a_node_whose_constructor_raised_is_not_left_to_the_garbage_collector(
        ros_env, tmp_path, mode):
    """A refusal at start-up ends with exit code 2, never SIGSEGV: when the node ends the
    process, the half-built node stays referenced and undestroyed until ``os._exit`` (CI
    runs ended with SIGSEGV when its rclpy handles were collected in no set order, and
    when the context's shutdown destroyed it); when run_node returns, it destroys the
    half-built node itself."""
    import subprocess
    import sys
    script = tmp_path / 'half_built.py'
    script.write_text(HALF_BUILT)
    out = subprocess.run([sys.executable, str(script), mode], env=ros_env,
                         capture_output=True, text=True, timeout=120)
    lines = out.stdout.split()
    assert out.returncode in (0, 2), out.stdout + out.stderr
    assert '[FATAL]' in out.stderr and 'speed = 100.0' in out.stderr, out.stderr
    assert 'Traceback' not in out.stderr, out.stderr
    if mode == 'exit':
        assert lines[:3] == ['alive', '2', 'kept'], out.stdout
        assert out.returncode == 2
    else:
        assert lines[:2] == ['destroyed', '2'], out.stdout
