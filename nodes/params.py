"""One way for every node to declare its parameters and merge them with the arm config.

Precedence, the same in every node, highest first:

1. a value given to the node (``-p name:=value`` or a ``--params-file``);
2. the arm config file named by ``config_file``: its ``<node_name>:`` section,
   then its ``/**`` section;
3. the built-in default.

A value given to the node wins even when it equals the built-in default: the file
value only becomes the *default* that a declaration falls back on, so rclpy's own
override mechanism decides. Node parameters are declared with
:func:`declare_parameters` from :class:`Param` specs; the arm fields that a node
accepts as individual parameters (``joints``, ``urdf``, ``torque_constants``, ...)
are declared with :func:`declare_arm_parameters` and merged into the frozen
:class:`~arm_dyn_id.config.ArmConfig` by :func:`arm_config`.
"""

from dataclasses import dataclass

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter

from arm_dyn_id.config import ArmConfig, load_arm_config
from arm_dyn_id.errors import ConfigError

#: ArmConfig fields a node may accept as individual parameters, with their descriptions.
ARM_FIELDS = {
    'robot_name': 'robot name',
    'urdf': 'URDF path or shipped name; overrides the config file',
    'joints': 'joint names: the order of every per-joint array; overrides the config file',
    'gravity': 'gravity magnitude during recording (m/s^2)',
    'torque_constants': 'torque constant k_e per joint at the joint side (N·m/A)',
    'current_signs': 'sign (+1 or -1) per joint applied to the current',
    'current_offsets': 'current offset per joint subtracted before scaling (A)',
    'gear_ratios': 'gear ratio per joint, separate factor of k_e (1)',
    'efficiencies': 'gear efficiency per joint, separate factor of k_e (1)',
    'position_limits_lower': 'lower joint limits (rad)',
    'position_limits_upper': 'upper joint limits (rad)',
    'velocity_limits': 'joint velocity limits (rad/s)',
    'acceleration_limits': 'joint acceleration limits (rad/s^2)',
    'torque_noise': 'expected torque noise sigma per joint (N·m)',
}
_STRING_FIELDS = ('robot_name', 'urdf')
#: Ranges of parameters that several nodes declare, used when a declaration gives none: a
#: QoS depth below 1 reached rclpy as a raw RCLError (``queue_depth:=-5``).
COMMON_RANGES = {'queue_depth': (1, 100000)}


def descriptor(description, read_only=False, low=None, high=None, dynamic=False):
    """A ParameterDescriptor; ``low``/``high`` give a range (float, or int for int bounds)."""
    d = ParameterDescriptor(description=description, read_only=read_only,
                            dynamic_typing=dynamic)
    if low is not None:
        if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
            d.integer_range = [IntegerRange(from_value=low, to_value=high, step=1)]
        else:
            d.floating_point_range = [FloatingPointRange(from_value=float(low),
                                                         to_value=float(high))]
    return d


@dataclass(frozen=True)
class Param:
    """One node parameter: name, built-in default, description (with its SI unit).

    ``default`` None declares a dynamically typed parameter that may stay unset.
    """

    name: str
    default: object
    description: str
    read_only: bool = False
    low: float = None
    high: float = None
    dynamic: bool = False


def plain(value):
    """ROS parameter value -> plain Python (array.array and tuples -> list)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return list(value)


def _coerce(name, value, default, source):
    """A config-file value in the type of the built-in default (YAML 1 for 1.0)."""
    if default is None or value is None:
        return plain(value)
    kind = type(default)
    try:
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind is float and not isinstance(value, bool):
            return float(value)
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is str and isinstance(value, str):
            return value
        if kind in (list, tuple) and isinstance(value, (list, tuple)):
            items = list(value)
            if default and isinstance(default[0], float):
                return [float(v) for v in items]
            return items
    except (TypeError, ValueError):
        pass
    raise ConfigError(f'parameter {name} = {value!r} in {source} must be a '
                      f'{kind.__name__} like its default {default!r}')


def _integer_given_for_float(node, name):
    """A whole number given for a float parameter (``real_time_factor:=2``) as a float.

    rclpy refuses an INTEGER value for a DOUBLE parameter; a user typing ``2`` for
    2.0 means the same number, so the override is turned into a double before the
    declaration. (Launch files type their arguments with ParameterValue.)
    """
    overrides = getattr(node, '_parameter_overrides', None)
    given = overrides.get(name) if isinstance(overrides, dict) else None
    if given is not None and given.type_ == Parameter.Type.INTEGER:
        overrides[name] = Parameter(name, Parameter.Type.DOUBLE, float(given.value))
    elif given is not None and given.type_ == Parameter.Type.INTEGER_ARRAY:
        overrides[name] = Parameter(name, Parameter.Type.DOUBLE_ARRAY,
                                    [float(v) for v in given.value])


def declare_parameters(node, params, config=None):
    """Declare ``params`` on ``node``; their defaults come from the config file if it has them.

    Parameters
    ----------
    node : rclpy.node.Node
    params : iterable of Param
    config : ArmConfig or None
        The arm config; its node section and ``/**`` keys that are not arm fields
        (``config.extra``) replace the built-in defaults.

    Returns
    -------
    dict
        Parameter name -> value (plain Python), after command-line overrides.

    Raises
    ------
    ConfigError
        A config-file value of the wrong type, naming the parameter and the file.
    """
    extra = dict(config.extra or {}) if config is not None else {}
    source = config.source if config is not None else None
    values = {}
    for spec in params:
        default = spec.default
        if spec.name in extra:
            default = _coerce(spec.name, extra[spec.name], spec.default, source)
        if isinstance(default, float) or (isinstance(default, (list, tuple)) and default
                                          and isinstance(default[0], float)):
            _integer_given_for_float(node, spec.name)
        low, high = spec.low, spec.high
        if low is None and spec.name in COMMON_RANGES:
            low, high = COMMON_RANGES[spec.name]
        param = node.declare_parameter(spec.name, default, descriptor(
            spec.description, read_only=spec.read_only, low=low, high=high,
            dynamic=spec.dynamic or spec.default is None))
        values[spec.name] = plain(param.value)
    return values


def declare_arm_parameters(node, fields=(), config_file='', required=True):
    """Declare ``config_file`` and the arm ``fields`` a node accepts one by one.

    The fields start unset: only a value given to the node overrides the file's.
    """
    text = 'arm config YAML (ROS parameter file, path or shipped name)'
    if fields:
        text += '; the parameters ' + ', '.join(fields) + ' given to the node override it'
    if not required:
        text += '; optional'
    node.declare_parameter('config_file', config_file, descriptor(text, read_only=True))
    for name in fields:
        if name in _STRING_FIELDS:
            kind = Parameter.Type.STRING
        elif name == 'joints':
            kind = Parameter.Type.STRING_ARRAY
        else:
            # numbers: int or double arrays alike
            node.declare_parameter(name, None, descriptor(
                ARM_FIELDS[name] + ', in the order of joints', read_only=True, dynamic=True))
            continue
        node.declare_parameter(name, kind, descriptor(ARM_FIELDS[name], read_only=True))


def given_arm_parameters(node, fields):
    """The arm fields given to the node (unset and empty ones left out)."""
    given = {}
    for name in fields:
        try:
            value = node.get_parameter(name).value
        except ParameterUninitializedException:
            continue
        if value is None or (name in ('joints', 'urdf') and not value):
            continue
        given[name] = plain(value)
    return given


def arm_config(node, node_name, fields=(), required=True):
    """The frozen ArmConfig of ``node``: ``config_file`` merged with the given fields.

    Parameters
    ----------
    node : rclpy.node.Node
        With :func:`declare_arm_parameters` called.
    node_name : str
        Section of the config file merged over ``/**`` (lands in ``extra``).
    fields : sequence of str
        Arm fields declared as parameters; those given override the file.
    required : bool
        If False, no ``config_file`` and no field given -> None.

    Raises
    ------
    ConfigError
        Naming the parameter and the value (from :meth:`ArmConfig.from_params`).
    """
    path = node.get_parameter('config_file').value
    overrides = given_arm_parameters(node, fields)
    if path:
        return load_arm_config(path, node_name=node_name, overrides=overrides)
    if not overrides and not required:
        return None
    if not overrides:
        raise ConfigError('parameter config_file is empty: give the arm config YAML')
    return ArmConfig.from_params(overrides)
