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
``gravity`` for arms mounted tilted, on a wall or on a ceiling. A robot without a
fixed base (a space manipulator, a biped) adds a ``floating_base`` mapping
(:class:`FloatingBaseConfig`, docs/floating_base.md).
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
            'acceleration_limits', 'torque_noise', 'floating_base', 'friction', 'armature')
#: Words of the ``friction`` key and of ``--friction`` (comma-separated), besides ``auto``
#: (:func:`arm_dyn_id.model.dynamics.parse_friction` builds the model from them).
FRICTION_WORDS = ('coulomb', 'viscous', 'offset', 'stribeck', 'coulomb_directional',
                  'load_coulomb', 'sign')


def check_friction(spec, where='parameter friction'):
    """``spec`` normalised (``'auto'`` or ``'coulomb,viscous,...'``); ConfigError naming
    the unknown word otherwise."""
    if not isinstance(spec, str):
        raise ConfigError(f'{where} = {spec!r} must be auto or comma-separated words of '
                          f'{list(FRICTION_WORDS)}')
    words = [w.strip().lower() for w in spec.replace('+', ',').split(',') if w.strip()]
    if words == ['auto']:
        return 'auto'
    unknown = [w for w in words if w not in FRICTION_WORDS]
    if unknown or not words:
        raise ConfigError(f'{where} = {spec!r}: {unknown[0] if unknown else "empty"!r} is not '
                          f"one of {['auto'] + list(FRICTION_WORDS)}")
    return ','.join(words)


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


def check_keys(params, source=None, allowed=ARM_KEYS + EXTRA_KEYS, prefix='', listed=ARM_KEYS):
    """Refuse shared keys no command reads (a typo otherwise goes unnoticed).

    ``prefix`` names the section in the message (``floating_base.``); ``listed`` are the
    keys the message lists when no close match is found.

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
                f'; known keys: {", ".join(listed)}'
            raise ConfigError(f'unknown parameter {prefix}{key}{where}{hint}')


def file_sha256(path):
    """Hex SHA-256 of a file's bytes (URDF provenance in models and bags)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


FLOATING_METHODS = ('momentum', 'zmp')
#: Keys of the ``floating_base`` mapping.
FLOATING_KEYS = ('method', 'total_mass', 'base_frame', 'odometry_topic', 'imu_topic',
                 'momentum', 'stance_foot', 'stance_foot_pose', 'sole_sensors')
SOLE_SENSOR_KEYS = ('topic', 'frame', 'position')


@dataclass(frozen=True)
class SoleSensor:
    """One normal-force sensor under a foot: its ``geometry_msgs/WrenchStamped`` topic
    (``wrench.force.z`` is the force, N), the URDF frame it is fixed to, and its position
    in that frame (3,), m."""

    topic: str
    frame: str
    position: tuple


@dataclass(frozen=True)
class FloatingBaseConfig:
    """The ``floating_base`` section of an arm config: a robot whose root link floats.

    Attributes
    ----------
    method : str
        ``momentum`` (seed 002: conserved momentum, no external force) or ``zmp``
        (seed 003: the ZMP measured by sole sensors).
    total_mass : float
        Weighed total mass (kg), the fits' constraint.
    base_frame : str
        The URDF's root link, the body whose pose and twist the base topics give.
    odometry_topic : str
        ``nav_msgs/Odometry`` of ``base_frame`` in the world (twist in the child frame's
        axes, REP 105); '' for none.
    imu_topic : str
        ``sensor_msgs/Imu`` on the base (attitude and rate), read when there is no
        odometry; '' for none.
    momentum : ndarray, (6,)
        The conserved momentum: linear (N·s), then angular about the world origin
        (N·m·s); zeros for a robot released at rest.
    stance_foot : str or None
        URDF frame of the foot that stands still (zmp).
    stance_foot_pose : ndarray, (7,) or None
        Its pose in the world: x y z (m), qx qy qz qw.
    sole_sensors : tuple of SoleSensor
        The normal-force sensors (zmp), in the column order of the recorded forces.
    """

    method: str
    total_mass: float
    base_frame: str
    odometry_topic: str = ''
    imu_topic: str = ''
    momentum: np.ndarray = field(default_factory=lambda: np.zeros(6), compare=False)
    stance_foot: str = None
    stance_foot_pose: np.ndarray = field(default=None, compare=False)
    sole_sensors: tuple = ()

    @property
    def topics(self):
        """Every topic the section names (odometry, imu, sole sensors), in that order."""
        return tuple(t for t in (self.odometry_topic, self.imu_topic) if t) + \
            tuple(s.topic for s in self.sole_sensors)

    def to_dict(self):
        """The section as plain YAML-ready values (what a bag stores)."""
        doc = {'method': self.method, 'total_mass': self.total_mass,
               'base_frame': self.base_frame, 'odometry_topic': self.odometry_topic,
               'imu_topic': self.imu_topic,
               'momentum': [float(v) for v in self.momentum]}
        if self.stance_foot is not None:
            doc['stance_foot'] = self.stance_foot
        if self.stance_foot_pose is not None:
            doc['stance_foot_pose'] = [float(v) for v in self.stance_foot_pose]
        if self.sole_sensors:
            doc['sole_sensors'] = [{'topic': s.topic, 'frame': s.frame,
                                    'position': list(s.position)} for s in self.sole_sensors]
        return doc


def _urdf_frames(path):
    """(links, joints, root links) of a URDF, names only (no pinocchio at rank 0)."""
    try:
        root = ElementTree.parse(str(path)).getroot()
    except (ElementTree.ParseError, OSError) as exc:
        raise ConfigError(f'URDF {path} could not be parsed: {exc}') from exc
    links = [e.get('name') for e in root.iter('link')]
    joints = [e.get('name') for e in root.iter('joint')]
    children = {c.get('link') for j in root.iter('joint') for c in j.iter('child')}
    return links, joints, [name for name in links if name not in children]


def _numbers(key, value, size):
    if not isinstance(value, (list, tuple)) or len(value) != size:
        raise ConfigError(f'parameter {key} = {value!r} must be a list of {size} numbers')
    arr = np.array([_number(f'{key}[{i}]', v) for i, v in enumerate(value)])
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f'parameter {key} = {arr.tolist()} contains NaN or inf')
    return arr


def _topic(key, value):
    if not isinstance(value, str):
        raise ConfigError(f'parameter {key} = {value!r} must be a topic name (a string; '
                          "'' for none)")
    if value.startswith('~') or ' ' in value:
        raise ConfigError(f'parameter {key} = {value!r} must be a topic name like '
                          "base_odometry (relative, no spaces, no '~')")
    return value


def floating_base_from_params(value, urdf):
    """Validate the ``floating_base`` mapping against the URDF.

    Parameters
    ----------
    value : dict
        The YAML mapping (see :class:`FloatingBaseConfig`).
    urdf : pathlib.Path
        The robot's URDF: frames and the root link are checked against it.

    Returns
    -------
    FloatingBaseConfig

    Raises
    ------
    ConfigError
        One line naming the key (``floating_base.<key>``) and the value.
    """
    if not isinstance(value, dict):
        raise ConfigError(f'parameter floating_base = {value!r} must be a mapping (method, '
                          'total_mass, base_frame, ...; see docs/floating_base.md)')
    check_keys(value, allowed=FLOATING_KEYS, prefix='floating_base.', listed=FLOATING_KEYS)
    links, joints, roots = _urdf_frames(urdf)
    frames = set(links) | set(joints)

    def frame(key, name):
        if not isinstance(name, str) or not name:
            raise ConfigError(f'parameter {key} = {name!r} must be a URDF frame name')
        if name not in frames:
            close = difflib.get_close_matches(name, links, n=1)
            hint = f' (did you mean {close[0]}?)' if close else f' (links: {links})'
            raise ConfigError(f'parameter {key} = {name!r} is not a frame of {urdf}{hint}')
        return name

    method = value.get('method')
    if method not in FLOATING_METHODS:
        raise ConfigError(f'parameter floating_base.method = {method!r} must be one of '
                          f'{", ".join(FLOATING_METHODS)}')
    if 'total_mass' not in value:
        raise ConfigError('parameter floating_base.total_mass is missing: give the weighed '
                          'total mass of the robot (kg)')
    total_mass = _number('floating_base.total_mass', value['total_mass'])
    if not np.isfinite(total_mass) or total_mass <= 0:
        raise ConfigError(f'parameter floating_base.total_mass = {total_mass} must be > 0 (kg)')
    base_frame = value.get('base_frame', roots[0] if len(roots) == 1 else None)
    if base_frame is None:
        raise ConfigError(f'parameter floating_base.base_frame is missing: give the URDF '
                          f'root link (roots of {urdf}: {roots})')
    if base_frame not in roots:
        raise ConfigError(f'parameter floating_base.base_frame = {base_frame!r} must be the '
                          f'root link of {urdf} ({", ".join(roots) or "none"}): the base '
                          'topics give the pose and twist of that link')
    odometry = _topic('floating_base.odometry_topic', value.get('odometry_topic', ''))
    imu = _topic('floating_base.imu_topic', value.get('imu_topic', ''))
    momentum = _numbers('floating_base.momentum', value.get('momentum', [0.0] * 6), 6)
    momentum.setflags(write=False)
    stance_foot = pose = None
    if 'stance_foot' in value:
        stance_foot = frame('floating_base.stance_foot', value['stance_foot'])
    if 'stance_foot_pose' in value:
        pose = _numbers('floating_base.stance_foot_pose', value['stance_foot_pose'], 7)
        norm = float(np.linalg.norm(pose[3:]))
        if abs(norm - 1.0) > 1e-6:
            raise ConfigError(f'parameter floating_base.stance_foot_pose = {pose.tolist()}: '
                              f'its quaternion (qx qy qz qw) has norm {norm:.6g}, not 1')
        pose.setflags(write=False)
    sensors = value.get('sole_sensors', [])
    if not isinstance(sensors, (list, tuple)):
        raise ConfigError(f'parameter floating_base.sole_sensors = {sensors!r} must be a list '
                          'of {topic, frame, position} mappings')
    sole = []
    for i, s in enumerate(sensors):
        key = f'floating_base.sole_sensors[{i}]'
        if not isinstance(s, dict):
            raise ConfigError(f'parameter {key} = {s!r} must be a mapping {{topic, frame, '
                              'position}}')
        for k in s:
            if k not in SOLE_SENSOR_KEYS:
                raise ConfigError(f'unknown parameter {key}.{k} (known: '
                                  f'{", ".join(SOLE_SENSOR_KEYS)})')
        for k in SOLE_SENSOR_KEYS:
            if k not in s:
                raise ConfigError(f'parameter {key}.{k} is missing')
        topic = _topic(f'{key}.topic', s['topic'])
        if not topic:
            raise ConfigError(f'parameter {key}.topic is empty: give the sensor\'s '
                              'WrenchStamped topic')
        if topic in [t.topic for t in sole] or topic in (odometry, imu):
            raise ConfigError(f'parameter {key}.topic = {topic!r} is named twice')
        position = _numbers(f'{key}.position', s['position'], 3)
        sole.append(SoleSensor(topic, frame(f'{key}.frame', s['frame']),
                               tuple(float(v) for v in position)))
    if odometry and odometry == imu:
        raise ConfigError(f'parameters floating_base.odometry_topic and imu_topic are both '
                          f'{odometry!r}: one topic has one type')
    if method == 'momentum' and not odometry:
        raise ConfigError('parameter floating_base.odometry_topic is empty: the momentum '
                          'method needs the base pose and twist (nav_msgs/Odometry)')
    if method == 'zmp':
        if stance_foot is None:
            raise ConfigError('parameter floating_base.stance_foot is missing: the zmp method '
                              'needs the URDF frame of the foot that stands still')
        if pose is None:
            raise ConfigError('parameter floating_base.stance_foot_pose is missing: the zmp '
                              'method needs that foot\'s pose in the world (x y z qx qy qz qw)')
        if not sole:
            raise ConfigError('parameter floating_base.sole_sensors is missing or empty: the '
                              'zmp method needs the sole sensors (topic, frame, position)')
    return FloatingBaseConfig(method=method, total_mass=total_mass, base_frame=base_frame,
                              odometry_topic=odometry, imu_topic=imu, momentum=momentum,
                              stance_foot=stance_foot, stance_foot_pose=pose,
                              sole_sensors=tuple(sole))


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
        Expected torque noise σ per joint (N·m), used for weighting (0.01 when the
        file does not give it: see :attr:`fit_noise`).
    torque_noise_given : bool
        Whether the file gave ``torque_noise``.
    source : pathlib.Path or None
        The file this came from.
    floating_base : FloatingBaseConfig or None
        The ``floating_base`` section; None for an arm on a fixed base.
    friction : str
        Friction of the full-dynamics fit: ``'auto'`` (default; chosen on held-out
        time blocks of the training recording) or words of :data:`FRICTION_WORDS`.
    armature : bool or 'auto'
        Identify rotor inertias in the full-dynamics fit: True, False or ``'auto'``
        (default: fitted with and without, kept for a clear held-out gain).
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
    floating_base: FloatingBaseConfig = field(default=None, compare=False)
    friction: str = 'auto'
    armature: object = 'auto'
    torque_noise_given: bool = field(default=True, compare=False)

    @property
    def n_joints(self):
        return len(self.joints)

    @property
    def fit_noise(self):
        """The σ per joint the fits weigh by (1/σ²): ``torque_noise`` when the file gives
        it, else None, and the fit estimates each joint's from the data, as it does with
        no config at all (equal weights would let the heavy proximal joints swamp the
        light wrists: a real UR10e's noise runs from 0.84 N·m at its base to 0.18 at its
        last wrist)."""
        return self.torque_noise if self.torque_noise_given else None

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
            False when effort is already a torque: missing constants become 1
            (always for a ``floating_base`` robot: its effort is joint torque).
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
        floating = None
        if params.get('floating_base') is not None:
            floating = floating_base_from_params(params['floating_base'], urdf)
            need_torque_constants = False
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
        armature = params.get('armature', 'auto')
        if armature not in (True, False, 'auto'):
            raise ConfigError(f"parameter armature = {armature!r} must be true, false or 'auto'")
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
            torque_noise_given=params.get('torque_noise') is not None,
            source=Path(source) if source else None,
            extra={k: v for k, v in params.items() if k not in ARM_KEYS},
            gravity_direction=direction,
            floating_base=floating,
            friction=check_friction(params.get('friction', 'auto')),
            armature=armature,
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
