"""What the gravity and the full-dynamics model files share.

Both files (``model/gravity.py``, ``model/dynamics.py``) begin with the same header
(schema, version, dynamics, robot name, joints, URDF file and hash, gravity), hold the
base parameters in the same layout, carry their metadata sections and provenance the
same way, and are written atomically. Reading checks the header, finds the URDF (the
named file, or one of that name beside the model file) and reports a URDF whose hash
differs. One copy of each lives here.

Both also carry, when the fit knew it, the ``measurement`` section: what
``joint_states.effort`` held in the data the model was fitted from, and how it maps to
joint torque (seed 000 eq. 19), per joint in the order of ``joints``::

    measurement:
      effort: current            # or torque (then no other key)
      torque_constants: [...]    # k_e at the joint side (N·m/A), > 0
      current_signs: [...]       # +1 or -1
      current_offsets: [...]     # A
      gear_ratios: [...]         # > 0
      efficiencies: [...]        # > 0

so a node reading ``joint_states`` with currents serves the model from its file alone
(:func:`arm_dyn_id.data.motor.effort_reading`). Files without it still load.
"""

import datetime
from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id import __version__
from arm_dyn_id.config import file_sha256, read_yaml_mapping
from arm_dyn_id.errors import ConfigError, URDFError
from arm_dyn_id.model.robot import RobotModel


def floats(values):
    """Plain floats for YAML; NaN and inf become None (null)."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, dtype=float)]


def array(values, size=None):
    """The inverse of :func:`floats`: None becomes NaN; missing values ``size`` NaNs."""
    if values is None:
        return np.full(size or 0, np.nan)
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def header(schema, version, dynamics, robot, metadata, fit_gravity):
    """The first keys of a model file: what it is, for which arm, at which gravity."""
    g = robot.gravity_vector
    source = Path(robot.source)
    return {
        'schema': schema, 'version': version, 'dynamics': dynamics,
        'robot_name': metadata.get('robot_name') or source.stem,
        'joints': list(robot.joint_names),
        'urdf': {'file': str(robot.source),
                 'sha256': file_sha256(source) if source.is_file() else None},
        'gravity': {'magnitude': float(fit_gravity),
                    'direction': (g / np.linalg.norm(g)).tolist()},
    }


def base_section(base, values, std_errors, units):
    """The ``base`` section: the base parameters, how they combine the link parameters."""
    return {
        'kind': base.kind, 'friction': base.friction,
        'names': list(base.names), 'expressions': list(base.expressions()),
        'values': floats(values), 'std_errors': floats(std_errors), 'units': units,
        'parameter_names': list(base.parameter_names),
        'independent': base.independent.tolist(),
        'dependent': base.dependent.tolist(), 'K': base.K.tolist(),
    }


def add_metadata(doc, metadata, sections):
    """Copy the metadata ``sections`` into ``doc`` and date and sign its provenance."""
    for section in sections:
        if section in metadata:
            doc[section] = metadata[section]
    doc.setdefault('provenance', {})
    doc['provenance'].setdefault('created', datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec='seconds'))
    doc['provenance'].setdefault('software', f'arm_dyn_id {__version__}')
    return doc


#: What ``joint_states.effort`` may carry (the ``effort`` key of ``measurement``).
EFFORT_KINDS = ('current', 'torque')
#: The per-joint arrays of a ``measurement`` section of effort ``current``, with their
#: defaults (a missing array is its default for every joint).
MEASUREMENT_ARRAYS = {'torque_constants': None, 'current_signs': 1.0, 'current_offsets': 0.0,
                      'gear_ratios': 1.0, 'efficiencies': 1.0}


def measurement_problem(section, n_joints):
    """Why a ``measurement`` section cannot say how effort maps to torque, or None.

    Parameters
    ----------
    section : object
        The section as read from YAML.
    n_joints : int
        The model's number of joints.

    Returns
    -------
    str or None
        One sentence naming the key and the value (``measurement.torque_constants[2] =
        -1.0 must be > 0``).
    """
    if not isinstance(section, dict):
        return f'measurement is a {type(section).__name__}, not a mapping'
    effort = section.get('effort')
    if effort not in EFFORT_KINDS:
        return f'measurement.effort = {effort!r} must be one of {list(EFFORT_KINDS)}'
    if effort == 'torque':
        return None
    for key, default in MEASUREMENT_ARRAYS.items():
        values = section.get(key)
        if values is None:
            if default is None:
                return f'measurement.{key} is missing (effort current needs it)'
            continue
        if not isinstance(values, list):
            return f'measurement.{key} is a {type(values).__name__}, not a list'
        if len(values) != n_joints:
            return (f'measurement.{key} has {len(values)} values for {n_joints} joints '
                    '(one per joint, in the order of joints)')
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                return f'measurement.{key}[{i}] = {v!r} is not a finite number'
            if key == 'current_signs' and abs(v) != 1:
                return f'measurement.{key}[{i}] = {v!r} must be +1 or -1'
            if key in ('torque_constants', 'gear_ratios', 'efficiencies') and v <= 0:
                return f'measurement.{key}[{i}] = {v!r} must be > 0'
    unknown = sorted(set(section) - {'effort', *MEASUREMENT_ARRAYS})
    if unknown:
        return f'measurement has unknown keys {unknown}'
    return None


def read_measurement(doc, source):
    """The ``measurement`` section of a model file with the defaults filled in, or None
    when the file has none (written before it existed).

    Raises
    ------
    ConfigError
        The section is there but unusable (:func:`measurement_problem`), naming the file.
    """
    if doc.get('measurement') is None:
        return None
    section = doc['measurement']
    problem = measurement_problem(section, len(doc['joints']))
    if problem:
        raise ConfigError(f'{source}: {problem}')
    if section['effort'] == 'torque':
        return {'effort': 'torque'}
    n = len(doc['joints'])
    return {'effort': 'current', **{
        key: [float(v) for v in (section.get(key) or [default] * n)]
        for key, default in MEASUREMENT_ARRAYS.items()}}


def plain(value):
    """NumPy scalars and arrays in nested dicts / lists as plain Python for YAML;
    non-finite floats become None (YAML null)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def to_yaml(doc):
    return yaml.safe_dump(doc, sort_keys=False, width=100)


def save(doc, path):
    """Write ``doc`` as YAML at ``path``; atomic (temp file + rename). Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(to_yaml(doc))
    tmp.replace(path)
    return path


def read_model_file(path):
    """The YAML document of a model file, with errors that name the file."""
    return read_yaml_mapping(path, 'model file', 'is not an arm_dyn_id model file')


def check_header(doc, schema, version, source, what):
    """Refuse a document that is not a ``what`` model file this version can read."""
    if not isinstance(doc, dict) or doc.get('schema') != schema:
        raise ConfigError(f'{source} is not an arm_dyn_id {what} model file '
                          f'(schema {doc.get("schema") if isinstance(doc, dict) else None!r})')
    found = doc.get('version', 0)
    if isinstance(found, bool) or not isinstance(found, int):
        raise ConfigError(f'{source} has model file version {found!r}: not a whole number')
    if found > version:
        raise ConfigError(f'{source} has model file version {doc["version"]}; this '
                          f'arm_dyn_id reads up to version {version}: upgrade arm_dyn_id')


def urdf_path(doc, urdf, source):
    """The URDF of a model file: ``urdf`` if given, else the named one, else one beside it."""
    path = Path(urdf) if urdf else Path(doc['urdf']['file'])
    if not path.is_file() and not urdf:
        # a model moved with its URDF beside it
        beside = Path(source).parent / Path(doc['urdf']['file']).name
        path = beside if beside.is_file() else path
    if not path.is_file():
        raise URDFError(f'URDF file {path} named by {source} does not exist; '
                        'pass the arm\'s URDF explicitly')
    return path


def robot_of(doc, urdf, source):
    """(RobotModel, URDF path) of a model file, at the gravity it was fitted at."""
    path = urdf_path(doc, urdf, source)
    g = doc['gravity']
    robot = RobotModel.from_urdf(path, joints=doc['joints'], gravity=g['magnitude'],
                                 gravity_direction=g['direction'])
    return robot, path


def read_metadata(doc, path, sections):
    """The metadata sections of a file, its robot name, and a warning if the URDF differs."""
    warnings = []
    sha = doc['urdf'].get('sha256')
    if sha and file_sha256(path) != sha:
        warnings.append(f'URDF {path} differs from the one the model was fitted '
                        'with (sha256 mismatch): kinematics may not match')
    metadata = {k: doc[k] for k in sections if k in doc}
    metadata['robot_name'] = doc.get('robot_name')
    metadata['warnings'] = warnings
    return metadata
