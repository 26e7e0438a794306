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
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.errors import ConfigError
from arm_dyn_id.paths import resolve_data_file

SHARED_SECTION = '/**'


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
    if not path.is_file():
        raise ConfigError(f'config file {path} does not exist')
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f'config file {path} is not valid YAML: {exc}') from exc
    if not isinstance(data, dict):
        raise ConfigError(f'config file {path} must map node names to ros__parameters')
    params = {}
    for section in (SHARED_SECTION, node_name):
        if section is None or section not in data:
            continue
        body = data[section] or {}
        if not isinstance(body, dict) or not isinstance(body.get('ros__parameters', {}), dict):
            raise ConfigError(f'{path}: section {section!r} needs a ros__parameters mapping')
        params.update(body.get('ros__parameters') or {})
    return params


def _per_joint(params, key, n, default=None, positive=False, nonzero=False):
    value = params.get(key, default)
    if value is None:
        raise ConfigError(f'parameter {key} is missing: give one value per joint ({n})')
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
    torque_constants : ndarray, (n,)
        k_e at the joint side (N·m/A), gear ratio included unless ``gear_ratios``
        is given separately.
    current_signs, current_offsets : ndarray, (n,)
        tau = sign * k_e * ratio * efficiency * (I - offset); offsets in A.
    gear_ratios, efficiencies : ndarray, (n,)
        Optional separate factors (default 1).
    position_limits_lower, position_limits_upper : ndarray, (n,)
        rad.
    velocity_limits, acceleration_limits : ndarray, (n,)
        rad/s and rad/s².
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

    @property
    def n_joints(self):
        return len(self.joints)

    @property
    def joint_torque_gains(self):
        """Effective N·m per A at the joint, sign included, (n,)."""
        return self.current_signs * self.torque_constants * self.gear_ratios * self.efficiencies

    def urdf_sha256(self):
        return file_sha256(self.urdf)

    @classmethod
    def from_params(cls, params, base_dir=None, source=None):
        """Validate a flat parameter dict (see :func:`read_parameter_file`).

        Raises
        ------
        ConfigError
            Naming the parameter and the offending value.
        """
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
        urdf = resolve_data_file(urdf_name, 'urdf', base_dir)
        if not urdf.is_file():
            raise ConfigError(f'parameter urdf = {urdf_name!r}: file {urdf} does not exist')
        gravity = float(params.get('gravity', 9.81))
        if not np.isfinite(gravity) or gravity <= 0:
            raise ConfigError(f'parameter gravity = {gravity} must be a positive magnitude (m/s²)')
        lower = _per_joint(params, 'position_limits_lower', n)
        upper = _per_joint(params, 'position_limits_upper', n)
        inverted = np.flatnonzero(lower >= upper)
        if inverted.size:
            i = int(inverted[0])
            raise ConfigError(
                f'position limits of {joints[i]} are inverted or empty: '
                f'position_limits_lower[{i}] = {lower[i]} >= '
                f'position_limits_upper[{i}] = {upper[i]}')
        signs = _per_joint(params, 'current_signs', n, default=1.0, nonzero=True)
        if np.any(np.abs(signs) != 1):
            bad = int(np.argmax(np.abs(signs) != 1))
            raise ConfigError(f'parameter current_signs[{bad}] = {signs[bad]} must be +1 or -1')
        known = {'robot_name', 'urdf', 'joints', 'gravity', 'torque_constants', 'current_signs',
                 'current_offsets', 'gear_ratios', 'efficiencies', 'position_limits_lower',
                 'position_limits_upper', 'velocity_limits', 'acceleration_limits',
                 'torque_noise'}
        return cls(
            robot_name=str(params.get('robot_name', Path(str(urdf_name)).stem)),
            urdf=urdf,
            joints=tuple(joints),
            gravity=gravity,
            torque_constants=_per_joint(params, 'torque_constants', n, positive=True),
            current_signs=signs,
            current_offsets=_per_joint(params, 'current_offsets', n, default=0.0),
            gear_ratios=_per_joint(params, 'gear_ratios', n, default=1.0, positive=True),
            efficiencies=_per_joint(params, 'efficiencies', n, default=1.0, positive=True),
            position_limits_lower=lower,
            position_limits_upper=upper,
            velocity_limits=_per_joint(params, 'velocity_limits', n, positive=True),
            acceleration_limits=_per_joint(params, 'acceleration_limits', n, positive=True),
            torque_noise=_per_joint(params, 'torque_noise', n, default=0.01, positive=True),
            source=Path(source) if source else None,
            extra={k: v for k, v in params.items() if k not in known},
        )


def load_arm_config(path, node_name=None, overrides=None):
    """Read and validate an arm config file.

    Parameters
    ----------
    path : path-like
        YAML parameter file, or the name of one shipped in ``config/``.
    node_name : str, optional
        Node section to merge over ``/**`` (its keys land in ``extra``).
    overrides : dict, optional
        Values that replace the file's (command-line options).

    Returns
    -------
    ArmConfig
    """
    resolved = resolve_data_file(path, 'config')
    params = read_parameter_file(resolved, node_name)
    params.update(overrides or {})
    return ArmConfig.from_params(params, base_dir=resolved.parent, source=resolved)
