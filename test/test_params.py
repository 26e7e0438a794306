"""One parameter merge for every node (nodes/params.py): a value given to the node wins
over the config file even when it equals the built-in default; the file wins over the
default. In-process rclpy nodes (a participant, so marked ros), nothing spun."""

import pytest
import yaml

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.paths import share_dir

rclpy = pytest.importorskip('rclpy')
pytestmark = [pytest.mark.ros]

from rclpy.parameter import Parameter  # noqa: E402

from arm_dyn_id.nodes.params import (  # noqa: E402
    Param, arm_config, declare_arm_parameters, declare_parameters)

JOINTS = [f'joint_{i}' for i in range(1, 7)]
ARM = {'robot_name': 'humanoid_arm', 'urdf': str(share_dir() / 'urdf' / 'humanoid_arm.urdf'),
       'joints': JOINTS, 'gravity': 9.81, 'torque_constants': [1.5, 1.5, 0.8, 0.8, 0.2, 0.1],
       'position_limits_lower': [-1.0, -0.5, -1.6, -0.1, -1.6, -1.2],
       'position_limits_upper': [3.0, 2.8, 1.6, 2.6, 1.6, 1.2],
       'velocity_limits': [2.0] * 6, 'acceleration_limits': [5.0] * 6}
SPECS = [Param('speed', 0.05, 'sweep speed (rad/s)'),
         Param('command_rate', 100.0, 'command rate (Hz)'),
         Param('quick', False, 'short plan'),
         Param('plan_kind', 'reciprocating', 'plan kind')]


@pytest.fixture
def context():
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump({
        '/**': {'ros__parameters': ARM},
        'test_node': {'ros__parameters': {'speed': 0.2, 'command_rate': 50, 'quick': True,
                                          'torque_noise': [0.02] * 6}}}))
    return path


def _node(context, **given):
    overrides = [Parameter(name, value=value) for name, value in given.items()]
    return rclpy.create_node('test_node', context=context, parameter_overrides=overrides,
                             start_parameter_services=False)


def test_given_value_wins_even_at_its_default_and_the_file_beats_the_default(
        context, config_file):
    # speed is given at exactly its built-in default: it must not read as "unset"
    node = _node(context, config_file=str(config_file), speed=0.05)
    try:
        declare_arm_parameters(node)
        config = arm_config(node, 'test_node')
        values = declare_parameters(node, SPECS, config)
        assert values['speed'] == 0.05                  # given to the node
        assert node.get_parameter('speed').value == 0.05
        assert values['command_rate'] == 50.0           # file (int in YAML -> float)
        assert isinstance(values['command_rate'], float)
        assert values['quick'] is True                  # file
        assert values['plan_kind'] == 'reciprocating'   # built-in default
        assert config.torque_noise.tolist() == [0.02] * 6   # node section of the file
    finally:
        node.destroy_node()


def test_arm_fields_given_to_the_node_override_the_file(context, config_file):
    lower = [-0.9, -0.5, -1.6, -0.1, -1.6, -1.2]
    node = _node(context, config_file=str(config_file), position_limits_lower=lower,
                 robot_name='renamed')
    try:
        fields = ('robot_name', 'joints', 'position_limits_lower')
        declare_arm_parameters(node, fields)
        config = arm_config(node, 'test_node', fields)
        assert config.robot_name == 'renamed'
        assert config.position_limits_lower.tolist() == lower
        assert list(config.joints) == JOINTS              # not given: from the file
    finally:
        node.destroy_node()


def test_without_a_config_file(context):
    node = _node(context)
    try:
        declare_arm_parameters(node, ('joints', 'urdf'), required=False)
        assert arm_config(node, 'test_node', ('joints', 'urdf'), required=False) is None
        with pytest.raises(ConfigError, match='config_file'):
            arm_config(node, 'test_node', ('joints', 'urdf'))
        # no file: built-in defaults
        assert declare_parameters(node, SPECS, None)['speed'] == 0.05
    finally:
        node.destroy_node()


def test_a_file_value_of_the_wrong_type_names_parameter_and_file(context, tmp_path):
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump({'/**': {'ros__parameters': ARM},
                                    'test_node': {'ros__parameters': {'quick': 'yes'}}}))
    node = _node(context, config_file=str(path))
    try:
        declare_arm_parameters(node)
        config = arm_config(node, 'test_node')
        with pytest.raises(ConfigError, match=r'parameter quick = .yes. in .*arm\.yaml'):
            declare_parameters(node, SPECS, config)
    finally:
        node.destroy_node()


def test_a_whole_number_given_for_a_float_parameter_is_a_float(context):
    """``-p command_rate:=50`` arrives as INTEGER; rclpy alone would refuse it for a
    DOUBLE parameter. Lists of whole numbers for float lists likewise."""
    node = _node(context, command_rate=50, gains=[1, 2])
    try:
        values = declare_parameters(node, SPECS + [Param('gains', [0.5, 0.5], 'gains (1)')])
        assert values['command_rate'] == 50.0 and isinstance(values['command_rate'], float)
        assert values['gains'] == [1.0, 2.0]
        assert node.get_parameter('command_rate').type_ == Parameter.Type.DOUBLE
    finally:
        node.destroy_node()


def test_a_word_for_a_number_is_refused_naming_the_parameter(context):
    from rclpy.exceptions import InvalidParameterTypeException
    from arm_dyn_id.nodes.executors import parameter_error
    node = _node(context, command_rate='fast')
    try:
        with pytest.raises(InvalidParameterTypeException) as info:
            declare_parameters(node, SPECS)
        line = parameter_error(info.value)
        assert line.startswith('parameter command_rate: ') and "'fast'" in line, line
        assert '\n' not in line
    finally:
        node.destroy_node()
