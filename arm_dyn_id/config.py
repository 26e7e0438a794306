"""Arm configuration: one YAML file per arm, read once, validated, frozen.

The file is a ROS 2 parameter file. Keys every node shares live under ``/**``;
node-specific keys under ``<node_name>: ros__parameters:``. All values are SI
(radians, N·m, A); per-joint arrays follow the order of ``joints``.

Example::

    /**:
      ros__parameters:
        robot_name: humanoid_arm
        urdf: humanoid_arm.urdf
        joints: [joint_1, joint_2, joint_3, joint_4, joint_5, joint_6]
        gravity: 9.81
        torque_constants: [0.5, 0.5, 0.3, 0.2, 0.1, 0.05]
        position_limits_lower: [...]
        position_limits_upper: [...]
        velocity_limits: [...]
        acceleration_limits: [...]

Only what a command uses is required: an offline fit needs ``urdf`` (and
``torque_constants`` when effort is a motor current); position and velocity
limits missing from the file are read from the URDF's ``<limit>`` tags, and
acceleration limits are needed only by commands that move the arm.
``gravity_vector`` ([gx, gy, gz], m/s², in the URDF's root frame) replaces
``gravity`` for arms mounted tilted, on a wall or on a ceiling.
"""

import difflib
import hashlib
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.paths import resolve_data_file

SHARED_SECTION = '/**'

#: Keys of the shared section that :class:`ArmConfig` reads.
ARM_KEYS = ('robot_name', 'urdf', 'joints', 'gravity', 'gravity_vector', 'torque_constants',
            'current_signs', 'current_offsets', 'gear_ratios', 'efficiencies',
            'position_limits_lower', 'position_limits_upper', 'velocity_limits',
            'acceleration_limits', 'torque_noise')
#: Other shared keys that commands read from :attr:`ArmConfig.extra` (design, collision).
EXTRA_KEYS = ('ee_linear_speed_limit', 'ee_angular_speed_limit', 'environment_boxes',
              'min_clearance', 'collision_ignored_pairs')
LIMIT_KEYS = ('position_limits_lower', 'position_limits_upper', 'velocity_limits',
              'acceleration_limits')


def read_yaml_mapping(path, what, not_mapping):
    """The YAML mapping in ``path``; ConfigError naming ``what`` and the file otherwise.

    ``not_mapping`` ends the message for a file that is YAML but not a mapping.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f'{what} {path} does not exist')
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f'{what} {path} is not valid YAML: {exc}') from exc
    if not isinstance(data, dict):
        raise ConfigError(f'{what} {path} {not_mapping}')
    return data


def read_parameter_file(path, node_name=None):
    """Read a ROS 2 parameter YAML file into one flat dict.

    Parameters
    ----------
    path : path-like
        The YAML file.
    node_name : str, optional
        Node section merged over the shared ``/**`` section.

    Returns
    -------
    dict
        Parameter name -> value.

    Raises
    ------
    ConfigError
        If the file is missing, not YAML, or not a parameter file.
    """
    path = Path(path)
    data = read_yaml_mapping(path, 'config file',
                             'must map node names to ros__parameters')
    if SHARED_SECTION not in data and node_name not in data:
        flat = [k for k in data if k in ARM_KEYS]
        hint = (f' (it has {flat[0]!r} at the top level: indent the keys under '
                f'"/**:" and "ros__parameters:")' if flat else
                f' (its top-level keys: {sorted(map(str, data))[:6]})')
        raise ConfigError(f'config file {path} has no "/**: ros__parameters:" section{hint}')
    params = {}
    for section in (SHARED_SECTION, node_name):
        if section is None or section not in data:
            continue
        body = data[section] or {}
        if not isinstance(body, dict) or not isinstance(body.get('ros__parameters', {}), dict):
            raise ConfigError(f'{path}: section {section!r} needs a ros__parameters mapping')
        params.update(body.get('ros__parameters') or {})
    return params


def _number(key, value):
    """A float from a YAML value, or a ConfigError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f'parameter {key} = {value!r} must be a number')
    return float(value)


def _per_joint(params, key, n, default=None, positive=False, nonzero=False):
    value = params.get(key, default)
    if value is None:
        raise ConfigError(f'parameter {key} is missing: give one value per joint ({n})')
    if key in params and not isinstance(value, (list, tuple, np.ndarray)):
        raise ConfigError(f'parameter {key} = {value!r} must be a list of one number per '
                          f'joint ({n})')
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating,
                                                         np.integer)):
                raise ConfigError(f'parameter {key}[{i}] = {v!r} must be a number')
    arr = np.atleast_1d(np.asarray(value, dtype=float))
    if arr.size == 1 and n > 1 and np.ndim(value) == 0:
        arr = np.full(n, float(arr[0]))
    if arr.shape != (n,):
        raise ConfigError(f'parameter {key} has {arr.size} values {arr.tolist()}, '
                          f'expected one per joint ({n})')
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f'parameter {key} = {arr.tolist()} contains NaN or inf')
    if positive and np.any(arr <= 0):
        bad = int(np.argmax(arr <= 0))
        raise ConfigError(f'parameter {key}[{bad}] = {arr[bad]} must be > 0')
    if nonzero and np.any(arr == 0):
        bad = int(np.argmax(arr == 0))
        raise ConfigError(f'parameter {key}[{bad}] = {arr[bad]} must not be zero')
    arr.setflags(write=False)
    return arr


def urdf_limits(path, joints):
    """Position and velocity limits of ``joints`` from a URDF's ``<limit>`` tags.

    Parameters
    ----------
    path : path-like
        URDF file.
    joints : sequence of str, (n,)

    Returns
    -------
    dict
        ``position_limits_lower``, ``position_limits_upper`` (rad) and
        ``velocity_limits`` (rad/s), each a list of n floats, only for the
        kinds every joint gives (a continuous joint has no position limits).
    """
    try:
        root = ElementTree.parse(str(path)).getroot()
    except (ElementTree.ParseError, OSError):
        return {}
    tags = {}
    for joint in root.iter('joint'):
        limit = joint.find('limit')
        kind = joint.get('type', '')
        tags[joint.get('name')] = (kind, {} if limit is None else limit.attrib)
    found = {}
    for key, attr in (('position_limits_lower', 'lower'), ('position_limits_upper', 'upper'),
                      ('velocity_limits', 'velocity')):
        values = []
        for j in joints:
            kind, limit = tags.get(j, ('', {}))
            try:
                v = float(limit[attr])
            except (KeyError, ValueError):
                break
            if attr != 'velocity' and kind == 'continuous':
                break
            values.append(v)
        if len(values) == len(joints):
            found[key] = values
    lo, hi = found.get('position_limits_lower'), found.get('position_limits_upper')
    if lo is None or hi is None or any(a >= b for a, b in zip(lo, hi)):
        found.pop('position_limits_lower', None)
        found.pop('position_limits_upper', None)
    if any(v <= 0 for v in found.get('velocity_limits', [1.0])):
        found.pop('velocity_limits')
    return found


def gravity_from_params(params):
    """Gravity magnitude (m/s²) and unit direction (3,) from ``gravity`` / ``gravity_vector``.

    Raises
    ------
    ConfigError
        A gravity that is not a positive number, a vector that is not three
        finite numbers, or both keys disagreeing on the magnitude.
    """
    vector = params.get('gravity_vector')
    magnitude = params.get('gravity')
    if magnitude is not None:
        magnitude = _number('gravity', magnitude)
        if not np.isfinite(magnitude) or magnitude <= 0:
            raise ConfigError(f'parameter gravity = {magnitude} must be a positive magnitude '
                              '(m/s²)')
    if vector is None:
        return (9.81 if magnitude is None else magnitude), np.array([0.0, 0.0, -1.0])
    if not isinstance(vector, (list, tuple)) or len(vector) != 3:
        raise ConfigError(f'parameter gravity_vector = {vector!r} must be a list of three '
                          'numbers [gx, gy, gz] (m/s², URDF root frame)')
    g = np.array([_number(f'gravity_vector[{i}]', v) for i, v in enumerate(vector)])
    norm = float(np.linalg.norm(g))
    if not np.isfinite(norm) or norm <= 0:
        raise ConfigError(f'parameter gravity_vector = {g.tolist()} must be finite and '
                          'non-zero (m/s²)')
    if magnitude is not None and abs(magnitude - norm) > 1e-6 * norm:
        raise ConfigError(f'parameter gravity = {magnitude} disagrees with gravity_vector '
                          f'{g.tolist()} (|g| = {norm:g}): give one of them')
    return norm, g / norm


def check_keys(params, source=None, allowed=ARM_KEYS + EXTRA_KEYS):
    """Refuse shared keys no command reads (a typo otherwise goes unnoticed).

    Raises
    ------
    ConfigError
        Naming the first unknown key and the closest known one.
    """
    where = f' in {source}' if source else ''
    for key in params:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f' (did you mean {close[0]}?)' if close else \
                f'; known keys: {", ".join(ARM_KEYS)}'
            raise ConfigError(f'unknown parameter {key}{where}{hint}')


def file_sha256(path):
    """Hex SHA-256 of a file's bytes (URDF provenance in models and bags)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class ArmConfig:
    """What every node and the offline tools share about one arm.

    Attributes
    ----------
    robot_name : str
    urdf : pathlib.Path
        Resolved URDF path.
    joints : tuple of str
        Joint order of every per-joint array, (n,).
    gravity : float
        Gravity magnitude (m/s²) at which data is recorded.
    gravity_direction : ndarray, (3,)
        Unit vector of gravity in the URDF's root frame (default (0, 0, -1);
        from ``gravity_vector`` for a tilted, wall or ceiling mount).
    torque_constants : ndarray, (n,)
        k_e at the joint side (N·m/A), gear ratio included unless ``gear_ratios``
        is given separately.
    current_signs, current_offsets : ndarray, (n,)
        tau = sign * k_e * ratio * efficiency * (I - offset); offsets in A.
    gear_ratios, efficiencies : ndarray, (n,)
        Optional separate factors (default 1).
    position_limits_lower, position_limits_upper : ndarray, (n,) or None
        rad; from the URDF when the file has none; None when neither gives them
        and the caller did not require them (offline fits).
    velocity_limits, acceleration_limits : ndarray, (n,) or None
        rad/s and rad/s², likewise (a URDF has no acceleration limits).
    torque_noise : ndarray, (n,)
        Expected torque noise σ per joint (N·m), used for weighting.
    source : pathlib.Path or None
        The file this came from.
    """

    robot_name: str
    urdf: Path
    joints: tuple
    gravity: float
    torque_constants: np.ndarray
    current_signs: np.ndarray
    current_offsets: np.ndarray
    gear_ratios: np.ndarray
    efficiencies: np.ndarray
    position_limits_lower: np.ndarray
    position_limits_upper: np.ndarray
    velocity_limits: np.ndarray
    acceleration_limits: np.ndarray
    torque_noise: np.ndarray
    source: Path = None
    extra: dict = field(default_factory=dict, compare=False)
    gravity_direction: np.ndarray = field(
        default_factory=lambda: np.array([0.0, 0.0, -1.0]), compare=False)

    @property
    def n_joints(self):
        return len(self.joints)

    @property
    def joint_torque_gains(self):
        """Effective N·m per A at the joint, sign included, (n,)."""
        return self.current_signs * self.torque_constants * self.gear_ratios * self.efficiencies

    def urdf_sha256(self):
        return file_sha256(self.urdf)

    @property
    def gravity_vector(self):
        """Gravity (m/s²) in the URDF's root frame, (3,)."""
        return self.gravity * np.asarray(self.gravity_direction, dtype=float)

    def require_limits(self, keys=LIMIT_KEYS, what='this command'):
        """Raise unless the limits ``keys`` are known (commands that move the arm).

        Raises
        ------
        ConfigError
            Naming the first missing key.
        """
        for key in keys:
            if getattr(self, key) is None:
                raise ConfigError(f'parameter {key} is missing: {what} needs it (one value '
                                  f'per joint, {self.n_joints}); the URDF gives none')

    @classmethod
    def from_params(cls, params, base_dir=None, source=None, need_limits=True,
                    need_torque_constants=True, strict=False):
        """Validate a flat parameter dict (see :func:`read_parameter_file`).

        Parameters
        ----------
        params : dict
        base_dir : path-like, optional
            Folder a relative ``urdf`` is resolved against.
        source : path-like, optional
            The file the parameters came from (for messages).
        need_limits : bool
            Refuse a config whose limits neither the file nor the URDF give
            (commands that move the arm); False leaves them None.
        need_torque_constants : bool
            False when effort is already a torque: missing constants become 1.
        strict : bool
            Refuse keys that no command reads (see :func:`check_keys`).

        Raises
        ------
        ConfigError
            Naming the parameter and the offending value.
        """
        if strict:
            check_keys(params, source)
        joints = params.get('joints')
        if not joints or not isinstance(joints, (list, tuple)) or \
                not all(isinstance(j, str) and j for j in joints):
            raise ConfigError(f'parameter joints = {joints!r} must be a non-empty list of names')
        if len(set(joints)) != len(joints):
            raise ConfigError(f'parameter joints = {list(joints)} repeats a name')
        n = len(joints)
        urdf_name = params.get('urdf')
        if not urdf_name:
            raise ConfigError('parameter urdf is missing: give a URDF path or a shipped name')
        if not isinstance(urdf_name, (str, Path)):
            raise ConfigError(f'parameter urdf = {urdf_name!r} must be a file path')
        urdf = resolve_data_file(urdf_name, 'urdf', base_dir)
        if not urdf.is_file():
            raise ConfigError(f'parameter urdf = {urdf_name!r}: file {urdf} does not exist')
        gravity, direction = gravity_from_params(params)
        from_urdf = {k: v for k, v in urdf_limits(urdf, joints).items() if k not in params}
        params = dict(from_urdf, **params)
        limits = {}
        for key in LIMIT_KEYS:
            if key in params or need_limits:
                limits[key] = _per_joint(params, key, n,
                                         positive=key in ('velocity_limits',
                                                          'acceleration_limits'))
            else:
                limits[key] = None
        lower, upper = limits['position_limits_lower'], limits['position_limits_upper']
        if (lower is None) != (upper is None):
            raise ConfigError('parameters position_limits_lower and position_limits_upper '
                              'go together: give both or neither')
        inverted = np.flatnonzero(lower >= upper) if lower is not None else ()
        if len(inverted):
            i = int(inverted[0])
            raise ConfigError(
                f'position limits of {joints[i]} are inverted or empty: '
                f'position_limits_lower[{i}] = {lower[i]} >= '
                f'position_limits_upper[{i}] = {upper[i]}')
        signs = _per_joint(params, 'current_signs', n, default=1.0, nonzero=True)
        if np.any(np.abs(signs) != 1):
            bad = int(np.argmax(np.abs(signs) != 1))
            raise ConfigError(f'parameter current_signs[{bad}] = {signs[bad]} must be +1 or -1')
        robot_name = params.get('robot_name', Path(str(urdf_name)).stem)
        if not isinstance(robot_name, str) or not robot_name:
            raise ConfigError(f'parameter robot_name = {robot_name!r} must be a non-empty '
                              'string')
        return cls(
            robot_name=robot_name,
            urdf=urdf,
            joints=tuple(joints),
            gravity=gravity,
            torque_constants=_per_joint(params, 'torque_constants', n,
                                        default=None if need_torque_constants else 1.0,
                                        positive=True),
            current_signs=signs,
            current_offsets=_per_joint(params, 'current_offsets', n, default=0.0),
            gear_ratios=_per_joint(params, 'gear_ratios', n, default=1.0, positive=True),
            efficiencies=_per_joint(params, 'efficiencies', n, default=1.0, positive=True),
            position_limits_lower=lower,
            position_limits_upper=upper,
            velocity_limits=limits['velocity_limits'],
            acceleration_limits=limits['acceleration_limits'],
            torque_noise=_per_joint(params, 'torque_noise', n, default=0.01, positive=True),
            source=Path(source) if source else None,
            extra={k: v for k, v in params.items() if k not in ARM_KEYS},
            gravity_direction=direction,
        )


def load_arm_config(path, node_name=None, overrides=None, **options):
    """Read and validate an arm config file.

    Parameters
    ----------
    path : path-like
        YAML parameter file, or the name of one shipped in ``config/``.
    node_name : str, optional
        Node section to merge over ``/**`` (its keys land in ``extra``).
    overrides : dict, optional
        Values that replace the file's (command-line options).
    **options
        ``need_limits``, ``need_torque_constants``, ``strict`` of
        :meth:`ArmConfig.from_params`.

    Returns
    -------
    ArmConfig
    """
    resolved = resolve_data_file(path, 'config')
    params = read_parameter_file(resolved, node_name)
    params.update(overrides or {})
    return ArmConfig.from_params(params, base_dir=resolved.parent, source=resolved, **options)
