"""THE model gate: every command and node that loads a model file loads it here.

A model file is admitted only when it passes, in this order (the first failure is
refused in one line naming the file, the reason and, when there is one, the opt-in):

1. ``unreadable``: the file exists, is a file, is UTF-8 text, is YAML and a mapping;
   the URDF it needs can be found and loaded;
2. ``schema`` / ``version``: a known schema (gravity, full-dynamics or floating-base
   model) with the sections it needs; ``version`` an integer this release reads;
3. ``kind``: the kind the caller can use (``gravity``, ``full``, ``floating``);
4. ``non_finite``: every base value (and full models' friction values, floating
   models' link parameters, the gravity it was fitted at) is a finite number;
   ``measurement``: an arm model's ``measurement`` section, when it has one (how the
   fitted data's ``joint_states.effort`` maps to torque: effort ``current`` or
   ``torque``; per-joint arrays of the length of ``joints``, finite, torque constants,
   gear ratios and efficiencies > 0, signs ±1);
5. ``rejected``: the ``rejected`` mark that ``arm-dyn-id fit --force`` writes;
   opt-in ``allow_rejected`` (``--force``, ``accept_rejected:=true``);
6. ``other_robot``: the joints the caller names are the model's, in its order, and
   the URDF (the one given, however it was given, else the one the file names) is
   the one the model was fitted with: the same sha256, or the same content (same
   joints, placements, axes, limits and inertias, e.g. only whitespace or comments
   changed); opt-in ``allow_other_urdf`` for a URDF that differs (a warning is kept);
7. ``implausible``: the physics of the values.

   - arm models: the model's gravity torques at :data:`N_CONFIGURATIONS` seeded
     random configurations within the joint limits against the nominal URDF's, as
     the fit judges them (:mod:`arm_dyn_id.validation.plausibility`, with the same
     :data:`SCALE_LIMIT`): the RMS ratio over the joints that carry gravity
     within [1 / SCALE_LIMIT, SCALE_LIMIT], and no joint that carries most of the
     gravity predicted with the opposite sign (ρ < :data:`MIN_SIGN_RHO`). Skipped
     when the URDF carries no mass;
   - full models: the mass matrix M(q) of the identified parameters at 8 of those
     configurations (a negative inertia predicts negative kinetic energy). A file
     marked ``consistent: true`` must have M(q) positive definite and link parameters
     whose pseudo-inertias are positive semi-definite. A file marked ``consistent:
     false`` (least squares, no physical constraint: the clear mark that it is not
     consistent) is admitted with that stated in ``model.metadata['gate']['notes']``
     (and where M(q) is not positive definite), unless a joint that carries much of
     the arm's inertia has a mean inertia M_ii below 1 / SCALE_LIMIT of the URDF's
     (negative, or far too small); see :func:`_plausible_full`;
   - floating models: positive masses that add up to the weighed ``total_mass`` (the
     fits are constrained to it); pseudo-inertias that are not positive semi-definite
     are noted (a momentum fit does not constrain them).

   A rejected model admitted with ``allow_rejected`` is not judged again: the user
   chose to use it (its implausibility is kept as a warning).

:func:`admit_urdf` refuses a nominal URDF with a negative mass or an inertia that is
not positive definite (for nodes told to serve the URDF itself).

The admitted model carries what was checked in ``model.metadata['gate']`` (arm
models) or ``model.gate`` (every kind): ``{file, kind, schema, version, checks,
notes, warnings}``.

Imports only :mod:`arm_dyn_id.model` and the foundation.
"""

from pathlib import Path

import numpy as np
import yaml

from arm_dyn_id.config import file_sha256
from arm_dyn_id.errors import ConfigError, DataError, JointNameError, URDFError

#: Identified / nominal gravity torque ratio beyond which (or below 1 / it) a model is
#: implausible; the same value as the fit's own check (validation/plausibility.py, which
#: ranks above model/ and cannot be imported here; test_model_gate keeps them equal).
SCALE_LIMIT = 5.0
#: A joint carrying at least this share of the largest joint's nominal gravity (RMS) must
#: not be predicted against the URDF's sign: correlation below :data:`MIN_SIGN_RHO`.
SIGN_LOAD_SHARE = 0.2
MIN_SIGN_RHO = -0.5
#: Seeded configurations at which a model is compared with its URDF.
N_CONFIGURATIONS = 24
SEED = 0

REASONS = ('unreadable', 'schema', 'version', 'kind', 'non_finite', 'measurement',
           'implausible', 'rejected', 'other_robot')
KINDS = ('gravity', 'full', 'floating')
#: Warnings a fit writes into the model's ``fit`` section as it lets it through
#: (``validation.plausibility.written_warnings``); admitting the model repeats them.
FIT_WARNINGS = ('missing_load', 'effort_scale_warning', 'gravity_tilt_warning',
                'narrow_motion_warning', 'pair_offset_warning', 'effort_lag_warning')
_FORCE_REJECTED = '--force/accept_rejected:=true uses it anyway'
_FORCE_URDF = '--force/accept_other_urdf:=true uses it anyway'


class ModelRefused(ConfigError):
    """A model file the gate refuses; the message is one line naming the file and why.

    Attributes
    ----------
    reason : str
        One of :data:`REASONS`.
    path : str
        The model file (or the source a parsed document came from).
    """

    def __init__(self, message, reason, path=None):
        super().__init__(' '.join(str(message).split()))
        self.reason = reason
        self.path = None if path is None else str(path)


def _schemas():
    from arm_dyn_id.model import dynamics, floating, gravity
    return {gravity.SCHEMA: ('gravity', gravity.VERSION),
            dynamics.SCHEMA: ('full', dynamics.VERSION),
            floating.FLOATING_SCHEMA: ('floating', floating.FLOATING_VERSION)}


#: the same safe YAML subset either way; the C one parses a model file ten times faster
_SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


def read_doc(path, what='model'):
    """The YAML mapping of a model file, or :class:`ModelRefused` ``unreadable``.

    Parameters
    ----------
    path : path-like
    what : str
        How messages name the file (``model``, ``model file``).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelRefused(f'{what} {path} does not exist', 'unreadable', path)
    if not path.is_file():
        raise ModelRefused(f'{what} {path} is not a file (a folder? give its model.yaml)',
                           'unreadable', path)
    try:
        text = path.read_bytes().decode('utf-8')
    except UnicodeDecodeError:
        raise ModelRefused(f'{what} {path} is not a text file (binary or corrupt): not an '
                           'arm_dyn_id model file', 'unreadable', path) from None
    except OSError as exc:
        raise ModelRefused(f'{what} {path} cannot be read: {exc.strerror or exc}',
                           'unreadable', path) from None
    if '\x00' in text:
        raise ModelRefused(f'{what} {path} is not a text file (binary or corrupt): not an '
                           'arm_dyn_id model file', 'unreadable', path)
    try:
        # libyaml's safe loader where PyYAML has it: a fit's model file took 0.23 s to
        # parse in Python, a tenth of the report's time (docs/benchmarks.md)
        doc = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = f' at line {mark.line + 1}' if mark is not None else ''
        problem = getattr(exc, 'problem', None) or type(exc).__name__
        raise ModelRefused(f'{what} {path} is not valid YAML ({problem}{where}): truncated '
                           'or corrupt', 'unreadable', path) from None
    except (ValueError, RecursionError) as exc:
        raise ModelRefused(f'{what} {path} is not valid YAML ({type(exc).__name__})',
                           'unreadable', path) from None
    if not isinstance(doc, dict):
        raise ModelRefused(f'{what} {path} is not an arm_dyn_id model file (its YAML is a '
                           f'{type(doc).__name__}, not a mapping)', 'unreadable', path)
    return doc


def admit_model(path, *, urdf=None, joints=None, kinds=('gravity', 'full'),
                allow_rejected=False, allow_other_urdf=False, what='model'):
    """Load a model file through the gate.

    Parameters
    ----------
    path : path-like
        The model file (``model.yaml`` of a fit, a floating model file).
    urdf : path-like, optional
        The URDF of the robot it is meant for (``--urdf``, a config's ``urdf``, a node's
        parameter); default the one the file names (or one of that name beside it).
        For floating models, also a folder holding it.
    joints : sequence of str, optional
        The joints of the robot it is meant for, in order (arm models).
    kinds : sequence of str
        The kinds the caller can use: ``'gravity'``, ``'full'``, ``'floating'``.
    allow_rejected : bool
        Admit a model marked ``rejected`` (or implausible), with a warning.
    allow_other_urdf : bool
        Admit a model fitted with another URDF, with a warning.
    what : str
        How messages name the file.

    Returns
    -------
    GravityModel or DynamicsModel or FloatingIdentification
        With ``.gate`` (and arm models ``.metadata['gate']``): what was checked.

    Raises
    ------
    ModelRefused
        One line naming the file and the reason (:attr:`ModelRefused.reason`).
    """
    doc = read_doc(path, what)
    return admit_doc(doc, source=str(Path(path).expanduser()), urdf=urdf, joints=joints,
                     kinds=kinds, allow_rejected=allow_rejected,
                     allow_other_urdf=allow_other_urdf, what=what)


def admit_doc(doc, *, source, urdf=None, joints=None, kinds=('gravity', 'full'),
              allow_rejected=False, allow_other_urdf=False, what='model'):
    """:func:`admit_model` of a document already parsed (a model received on a topic).

    Parameters
    ----------
    doc : object
        The parsed YAML (anything: it is checked).
    source : str
        Where it came from, for messages (a file, a topic); the URDF named by the file
        is also looked for beside it.
    """
    src = f'{what} {source}'
    kind = check_doc(doc, source=source, kinds=kinds, what=what)
    checks = ['readable', f'schema {doc["schema"]} version {doc.get("version", 1)}',
              f'kind {kind}', 'finite values']
    if isinstance(doc.get('measurement'), dict):
        checks.append(f'measurement: effort {doc["measurement"]["effort"]}')
    warnings, notes = [], []
    # arm fits mark it at the top; a floating fit in its metrics (cli/fit_floating.py)
    rejected = doc.get('rejected') or (
        (doc.get('metrics') or {}).get('rejected') if kind == 'floating' and
        isinstance(doc.get('metrics'), dict) else None)
    if rejected:
        if not allow_rejected:
            raise ModelRefused(f'{src} is marked rejected ({_short(rejected)}); '
                               f'{_FORCE_REJECTED}', 'rejected', source)
        warnings.append(f'model marked rejected ({_short(rejected)}), used anyway')
    else:
        checks.append('not rejected')
    if kind == 'floating':
        model = _load_floating(doc, source, urdf, src)
    else:
        model = _load_arm(doc, kind, source, urdf, joints, src)
    urdf_path = Path(model.robot.source if kind != 'floating' else model.model().source)
    robot_checks, robot_warnings = _check_urdf(doc, urdf_path, urdf, source, src,
                                               allow_other_urdf, joints)
    checks += robot_checks
    warnings += robot_warnings
    try:
        if kind == 'floating':
            notes += _plausible_floating(model, src)
        else:
            notes += _plausible_arm(model, doc, kind, src)
        checks.append('physically plausible')
    except ModelRefused as exc:
        exc.path = exc.path or str(source)
        if exc.reason != 'implausible' or not rejected:
            raise
        warnings.append(str(exc))
    # what the fit said as it wrote the model (a load the URDF lacks, a joint's effort
    # reading high against the others'): every consumer says it again
    said = doc.get('fit') if isinstance(doc.get('fit'), dict) else {}
    warnings += [f'fitted with a warning: {said[key]}' for key in FIT_WARNINGS
                 if isinstance(said.get(key), str)]
    gate = {'file': str(source), 'kind': kind, 'schema': doc['schema'],
            'version': int(doc.get('version', 1)), 'checks': checks, 'notes': notes,
            'warnings': warnings}
    model.gate = gate
    if kind != 'floating':
        # the URDF warning of files.read_metadata is replaced by the gate's verdict
        model.metadata['warnings'] = list(warnings)
        model.metadata['gate'] = gate
    else:
        model.warnings = list(warnings)
    return model


def check_doc(doc, *, source, kinds=KINDS, what='model'):
    """The checks of a parsed document that need no URDF: a mapping of a known schema
    and version, of one of ``kinds``, complete, with finite values (gate steps 1-4).

    Parameters
    ----------
    doc : object
    source : str
        Where it came from, for messages.
    kinds : sequence of str
    what : str

    Returns
    -------
    str
        Its kind: ``'gravity'``, ``'full'`` or ``'floating'``.

    Raises
    ------
    ModelRefused
    """
    src = f'{what} {source}'
    if not isinstance(doc, dict):
        raise ModelRefused(f'{src} is not an arm_dyn_id model file (not a mapping)',
                           'unreadable', source)
    kinds = tuple(kinds)
    if not kinds or any(k not in KINDS for k in kinds):
        raise ValueError(f'kinds {kinds} must be among {KINDS}')
    kind = _check_schema(doc, src, source)
    _check_kind(kind, kinds, src, source)
    _check_structure(doc, kind, src, source)
    _check_finite(doc, kind, src, source)
    if kind != 'floating':
        _check_measurement(doc, src, source)
    return kind


def admit_urdf(path, *, what='URDF'):
    """A nominal URDF fit to serve: it loads, and every link's mass and inertia are physical.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModelRefused
        ``unreadable`` (missing, not loadable) or ``implausible`` (a negative mass, an
        inertia that is not positive semi-definite or breaks the triangle inequality).
    """
    from arm_dyn_id.model.robot import load_urdf_model
    path = Path(path).expanduser()
    try:
        pin_model = load_urdf_model(path)
    except URDFError as exc:
        raise ModelRefused(str(exc), 'unreadable', path) from None
    for j in range(1, pin_model.njoints):
        inertia = pin_model.inertias[j]
        problem = inertia_problem(float(inertia.mass), np.array(inertia.inertia))
        if problem:
            raise ModelRefused(f'{what} {path}: the link of joint {pin_model.names[j]!r} has '
                               f'{problem}: not a physical robot', 'implausible', path)
    return path


# -------------------------------------------------------------------------- checks
def _short(text, limit=160):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _check_schema(doc, src, source):
    """The kind of the document, after its schema and version."""
    schemas = _schemas()
    schema = doc.get('schema')
    if schema not in schemas:
        raise ModelRefused(f'{src} is not an arm_dyn_id model file (schema {schema!r}; '
                           f'known: {", ".join(schemas)})', 'schema', source)
    kind, newest = schemas[schema]
    version = doc.get('version', 1 if kind != 'floating' else None)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ModelRefused(f'{src} has version {version!r}: not a whole number (a model file '
                           'version is 1, 2, ...)', 'version', source)
    if version < 1:
        raise ModelRefused(f'{src} has version {version}: versions start at 1', 'version',
                           source)
    if version > newest:
        raise ModelRefused(f'{src} has {schema} version {version}; this arm_dyn_id reads up '
                           f'to version {newest}: upgrade arm_dyn_id', 'version', source)
    dynamics = doc.get('dynamics', 'gravity' if kind == 'gravity' else None)
    if kind != 'floating' and dynamics != kind:
        raise ModelRefused(f'{src} has schema {schema} but dynamics {dynamics!r} (expected '
                           f'{kind!r})', 'schema', source)
    return kind


def _describe(kind):
    return {'gravity': 'an arm gravity model', 'full': 'an arm full-dynamics model',
            'floating': 'a floating-base model'}[kind]


def _check_kind(kind, kinds, src, source):
    if kind in kinds:
        return
    wanted = ' or '.join(_describe(k) for k in kinds)
    hint = ''
    if kind == 'floating':
        hint = ' (floating-base models are served by floating_model_node)'
    elif 'floating' in kinds:
        hint = ' (arm models are used by the arm commands and nodes)'
    raise ModelRefused(f'{src} is {_describe(kind)}; this needs {wanted}{hint}', 'kind',
                       source)


def _need(doc, key, types, src, source, where=''):
    value = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(value, types):
        name = f'{where}{key}'
        got = 'missing' if value is None else f'a {type(value).__name__}'
        raise ModelRefused(f'{src} is not a complete model file: {name} is {got}', 'schema',
                           source)
    return value


def _check_structure(doc, kind, src, source):
    """The sections the loaders read, with the right types (else ``schema``)."""
    urdf = _need(doc, 'urdf', dict, src, source)
    _need(urdf, 'file', str, src, source, 'urdf.')
    if kind == 'floating':
        _need(doc, 'bodies', list, src, source)
        _need(doc, 'parameters', dict, src, source)
        return
    joints = _need(doc, 'joints', list, src, source)
    if not joints or not all(isinstance(j, str) for j in joints):
        raise ModelRefused(f'{src}: joints must be a list of joint names', 'schema', source)
    gravity = _need(doc, 'gravity', dict, src, source)
    direction = gravity.get('direction')
    if not isinstance(direction, list) or len(direction) != 3:
        raise ModelRefused(f'{src}: gravity.direction must be 3 numbers', 'schema', source)
    base = _need(doc, 'base', dict, src, source)
    for key in ('values', 'names', 'parameter_names', 'independent', 'dependent', 'K'):
        _need(base, key, list, src, source, 'base.')
    count, dependent = len(base['names']), len(base['dependent'])
    for key, size in (('values', count), ('independent', count), ('K', count)):
        if len(base[key]) != size:
            raise ModelRefused(f'{src}: base.{key} has {len(base[key])} entries for {count} '
                               'base parameters (truncated or edited?)', 'schema', source)
    if not all(isinstance(row, list) and len(row) == dependent for row in base['K']):
        raise ModelRefused(f'{src}: base.K is not a {count} x {dependent} matrix (truncated or '
                           'edited?)', 'schema', source)
    if kind == 'full':
        friction = _need(doc, 'friction', dict, src, source)
        _need(friction, 'values', list, src, source, 'friction.')


def _not_finite(values):
    """Index of the first value that is not a finite number, or None."""
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            return i
    return None


def _check_finite(doc, kind, src, source):
    if kind == 'floating':
        for body in doc['bodies']:
            params = doc['parameters'].get(body)
            if not isinstance(params, dict):
                raise ModelRefused(f'{src}: no parameters for body {body!r}', 'schema', source)
            bad = _not_finite(list(params.values()))
            if bad is not None:
                name = list(params)[bad]
                raise ModelRefused(f'{src}: {name} of body {body!r} is '
                                   f'{list(params.values())[bad]!r}, not a finite number',
                                   'non_finite', source)
        bad = _not_finite([doc.get('total_mass')])
        if bad is not None:
            raise ModelRefused(f'{src}: total_mass is {doc.get("total_mass")!r}, not a finite '
                               'number', 'non_finite', source)
        return
    g = doc['gravity']
    if _not_finite([g.get('magnitude')] + list(g['direction'])) is not None:
        raise ModelRefused(f'{src}: gravity {g.get("magnitude")!r} along {g["direction"]} is '
                           'not finite', 'non_finite', source)
    sections = [('base', doc['base']['values'], doc['base']['names'])]
    if kind == 'full':
        fr = doc['friction']
        sections.append(('friction', fr['values'], fr.get('names') or []))
    for section, values, names in sections:
        bad = _not_finite(values)
        if bad is not None:
            name = names[bad] if bad < len(names) else f'#{bad}'
            count = sum(_not_finite([v]) is not None for v in values)
            raise ModelRefused(f'{src}: {section} value {name} is {values[bad]!r} ({count} of '
                               f'{len(values)} {section} values not finite numbers): '
                               'not a usable model', 'non_finite', source)


def _check_measurement(doc, src, source):
    """The ``measurement`` section, when there is one: how the fitted data's effort maps to
    torque, which nodes apply to joint_states (else ``measurement``)."""
    from arm_dyn_id.model.files import measurement_problem
    if doc.get('measurement') is None:
        return
    problem = measurement_problem(doc['measurement'], len(doc['joints']))
    if problem:
        raise ModelRefused(f'{src}: {problem}: its joint_states effort cannot be converted '
                           'to torque (fix or delete the measurement section)', 'measurement',
                           source)


def _load_arm(doc, kind, source, urdf, joints, src):
    from arm_dyn_id.model.dynamics import DynamicsModel
    from arm_dyn_id.model.gravity import GravityModel
    if joints is not None and tuple(joints) != tuple(doc['joints']):
        same = set(joints) == set(doc['joints'])
        raise ModelRefused(f'{src} is of joints {list(doc["joints"])}, the robot given has '
                           f'{list(joints)}' + (' (the same joints in another order)'
                                                if same else '') + ': a model of another robot',
                           'other_robot', source)
    cls = GravityModel if kind == 'gravity' else DynamicsModel
    try:
        return cls.from_dict(doc, urdf=urdf, source=source)
    except URDFError as exc:
        raise ModelRefused(f'{src}: {exc}', 'unreadable', source) from None
    except JointNameError as exc:
        raise ModelRefused(f'{src}: its joints are not those of the URDF ({exc}): a model of '
                           'another robot', 'other_robot', source) from None
    except ModelRefused:
        raise
    except (ConfigError, DataError, KeyError, TypeError, ValueError, IndexError,
            AttributeError) as exc:
        text = str(exc) if isinstance(exc, (ConfigError, DataError)) else \
            f'{type(exc).__name__} {exc}'
        raise ModelRefused(f'{src} has contents this release cannot read ({_short(text)}): '
                           'truncated or edited?', 'schema', source) from None


def _load_floating(doc, source, urdf, src):
    from arm_dyn_id.model.floating import FloatingIdentification
    try:
        model = FloatingIdentification.from_dict(doc, source=source, urdf_dir=urdf)
    except DataError as exc:
        text = str(exc)
        reason = 'implausible' if 'must be positive' in text else 'schema'
        raise ModelRefused(f'{what_of(src, text)}', reason, source) from None
    try:
        model.model()
    except URDFError as exc:
        raise ModelRefused(f'{src}: {exc}', 'unreadable', source) from None
    except DataError as exc:
        raise ModelRefused(f'{src}: {exc}: a model of another robot', 'other_robot',
                           source) from None
    return model


def what_of(src, text):
    """``text`` of a loader's error, prefixed by the gate's name for the file unless it has it."""
    return text if text.split(':')[0] in src else f'{src}: {text}'


def _check_urdf(doc, path, given, source, src, allow, joints):
    """Whether the URDF used is the one the model was fitted with; (checks, warnings)."""
    checks = [f'joints {list(joints)}'] if joints is not None else []
    sha = doc['urdf'].get('sha256')
    if not sha:
        return checks + ['URDF: the file stores no sha256 (not compared)'], []
    actual = file_sha256(path)
    if actual == sha:
        return checks + [f'URDF {path} sha256 {sha[:12]}'], []
    fitted = _fitted_urdf(doc, source, sha)
    if fitted is not None and _same_content(fitted, path):
        return checks + [f'URDF {path}: same joints, placements, limits and inertias as '
                         f'{fitted} (the model\'s; the bytes differ)'], []
    named = doc['urdf']['file']
    how = 'given' if given is not None else 'found'
    message = (f'{src} was fitted with another URDF than the {path} {how} (sha256 '
               f'{sha[:12]}... of {named} vs {actual[:12]}...)')
    if not allow:
        raise ModelRefused(f'{message}: a model of another robot; give the URDF it was '
                           f'fitted with, or {_FORCE_URDF}', 'other_robot', source)
    return checks, [f'{message}: used anyway, kinematics may not match']


def _fitted_urdf(doc, source, sha):
    """The URDF the model was fitted with, when it is still on disk (by its hash)."""
    named = Path(doc['urdf']['file'])
    for candidate in (named, Path(source).parent / named.name):
        try:
            if candidate.is_file() and file_sha256(candidate) == sha:
                return candidate
        except OSError:
            continue
    return None


def _same_content(a, b, rtol=1e-9):
    """Whether two URDFs describe the same tree: joint names, types, placements, limits,
    inertias (formatting, comments, visuals and collisions may differ)."""
    from arm_dyn_id.model.robot import load_urdf_model
    try:
        ma, mb = load_urdf_model(a), load_urdf_model(b)
    except URDFError:
        return False
    if list(ma.names) != list(mb.names) or list(ma.parents) != list(mb.parents):
        return False
    for j in range(1, ma.njoints):
        if ma.joints[j].shortname() != mb.joints[j].shortname():
            return False
        pairs = [(ma.jointPlacements[j].homogeneous, mb.jointPlacements[j].homogeneous),
                 (ma.inertias[j].toDynamicParameters(), mb.inertias[j].toDynamicParameters())]
        if not all(np.allclose(x, y, rtol=rtol, atol=1e-12) for x, y in pairs):
            return False
    limits = ('lowerPositionLimit', 'upperPositionLimit', 'velocityLimit', 'effortLimit')
    return all(np.allclose(getattr(ma, k), getattr(mb, k), rtol=rtol, atol=1e-12)
               for k in limits)


# ---------------------------------------------------------------------- plausibility
def configurations(robot, count=N_CONFIGURATIONS, seed=SEED):
    """Seeded random configurations within the URDF's joint limits (rad), (count, n);
    [-π, π] for a joint without finite limits."""
    rng = np.random.default_rng(seed)
    lower, upper = np.full(robot.n_joints, -np.pi), np.full(robot.n_joints, np.pi)
    for k in range(robot.n_joints):
        if robot._nq_joint[k] == 1:
            lo = robot.model.lowerPositionLimit[robot._idx_q[k]]
            hi = robot.model.upperPositionLimit[robot._idx_q[k]]
            if np.isfinite(lo) and np.isfinite(hi) and lo < hi:
                lower[k], upper[k] = max(lo, -np.pi), min(hi, np.pi)
    return rng.uniform(lower, upper, size=(count, robot.n_joints))


def _plausible_arm(model, doc, kind, src):
    """Notes of a plausible arm model, or ModelRefused ``implausible``."""
    notes = []
    robot = model.robot
    Q = configurations(robot)
    nominal = robot.gravity_torques(Q)
    identified = model.gravity_torques(Q)
    if not np.all(np.isfinite(identified)):
        raise ModelRefused(f'{src} predicts non-finite gravity torques', 'implausible')
    amp = np.sqrt((nominal ** 2).mean(axis=0))
    if amp.max() <= 0:
        notes.append(f'the URDF {robot.source} carries no mass: the gravity scale is not '
                     'compared')
    else:
        from arm_dyn_id.model.robot import carries_gravity
        carry = carries_gravity(amp)
        scale = float(np.sqrt((identified[:, carry] ** 2).sum() / (nominal[:, carry] ** 2).sum()))
        if not SCALE_LIMIT ** -1 <= scale <= SCALE_LIMIT:
            worst = int(np.argmax(np.abs(np.log(np.maximum(
                np.sqrt((identified ** 2).mean(axis=0)), 1e-300) / np.maximum(amp, 1e-300)))
                * carry))
            raise ModelRefused(
                f'{src} is implausible: its gravity torques are {scale:.3g}x those of the '
                f'URDF\'s masses (limit {SCALE_LIMIT:g}x; worst {robot.joint_names[worst]}) '
                f'at {len(Q)} configurations within the joint limits', 'implausible')
        notes.append(f'gravity torques {scale:.2f}x the URDF\'s')
        for i in np.flatnonzero(amp >= SIGN_LOAD_SHARE * amp.max()):
            rho = _rho(identified[:, i], nominal[:, i])
            if rho < MIN_SIGN_RHO:
                raise ModelRefused(
                    f'{src} is implausible: its gravity torque of {robot.joint_names[i]} runs '
                    f'against the URDF\'s (correlation {rho:.2f}): a flipped sign', 'implausible')
    if kind == 'full':
        notes += _plausible_full(model, doc, Q, src)
    return notes


def physics(model, src='the fitted model'):
    """Step 7 (``implausible``) of a fitted arm model before it is written: the notes, or
    :class:`ModelRefused` with the reason every command and node would refuse its file
    for. The fits run it last, so that no model leaves them that the gate refuses."""
    from arm_dyn_id.model.dynamics import DynamicsModel
    full = isinstance(model, DynamicsModel)
    return _plausible_arm(model, {'consistent': bool(full and model.consistent)},
                          'full' if full else 'gravity', src)


def _rho(a, b):
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den > 0 else 1.0


def _mass_matrices(model, q):
    """(identified, nominal) joint-space inertia M(q) (kg·m²), (n, n) each, symmetric."""
    import pinocchio as pin
    robot = model.robot
    n = robot.n_joints
    zero = np.zeros(n)
    bias = model.rigid_body_torques(q, zero, zero)
    M = np.column_stack([model.rigid_body_torques(q, zero, e) - bias for e in np.eye(n)])
    nominal = pin.crba(robot.model, robot.data, robot._pin_q(q))
    nominal = np.triu(nominal) + np.triu(nominal, 1).T
    return 0.5 * (M + M.T), nominal[np.ix_(robot._idx_v, robot._idx_v)]


def _plausible_full(model, doc, Q, src):
    """Notes of a plausible full model, else ModelRefused ``implausible``.

    A model marked ``consistent: true`` must have M(q) positive definite at the
    configurations. A least-squares model (``consistent: false``) may not: its weakly
    excited directions (the wrist, and the arm far from where it moved) can have a
    negative eigenvalue as large as the URDF's largest inertia in a good fit (seen: a
    simulated arm whose payload is then found within 5 %). So it is judged like gravity:
    the joints that carry at least :data:`SIGN_LOAD_SHARE` of the URDF's largest inertia
    M_ii must have an inertia at least 1 / :data:`SCALE_LIMIT` of the URDF's (mean over
    the configurations; no upper bound: rotor inertias reflected through the gears are
    not in a URDF); where M(q) is not positive definite is noted.
    """
    notes = []
    consistent = doc.get('consistent') is True
    checked = Q[:8]
    diag, nominal_diag, negative = [], [], []
    for q in checked:
        M, nominal = _mass_matrices(model, q)
        eig = np.linalg.eigvalsh(M)
        top = max(float(np.linalg.eigvalsh(nominal)[-1]), 1e-12)
        if not np.all(np.isfinite(eig)):
            raise ModelRefused(f'{src} is implausible: its mass matrix is not finite',
                               'implausible')
        if consistent and eig[0] < -1e-6 * max(top, abs(eig[-1])):
            raise ModelRefused(
                f'{src} is marked consistent but its mass matrix is not positive definite '
                f'(eigenvalue {eig[0]:.3g} kg·m² at q = {np.round(q, 2).tolist()} rad)',
                'implausible')
        if eig[0] < 0:
            negative.append(eig[0] / top)
        diag.append(np.diag(M))
        nominal_diag.append(np.diag(nominal))
    diag, nominal_diag = np.mean(diag, axis=0), np.mean(nominal_diag, axis=0)
    names = model.robot.joint_names
    for i in np.flatnonzero(nominal_diag >= SIGN_LOAD_SHARE * nominal_diag.max()):
        if diag[i] < nominal_diag[i] / SCALE_LIMIT:
            raise ModelRefused(
                f'{src} is implausible: the inertia of {names[i]} is {diag[i]:.3g} kg·m² '
                f'(mean of M_ii at {len(checked)} configurations within the joint limits), '
                f'the URDF\'s {nominal_diag[i]:.3g} kg·m²: ' +
                ('a negative inertia' if diag[i] < 0 else
                 f'less than 1/{SCALE_LIMIT:g} of it'), 'implausible')
    notes.append(f'joint inertias of the loaded joints at least 1/{SCALE_LIMIT:g} of the '
                 'URDF\'s')
    if consistent:
        standard = model.standard
        if standard is None:
            raise ModelRefused(f'{src} is marked consistent but holds no standard '
                               'link parameters', 'schema')
        for k in range(model.robot.n_bodies):
            problem = _pseudo_problem(standard[10 * k:10 * k + 10])
            if problem:
                raise ModelRefused(f'{src} is marked consistent but body {k + 1} has '
                                   f'{problem}', 'implausible')
        notes.append('physically consistent link parameters (marked and checked); mass '
                     f'matrix positive definite at {len(checked)} configurations')
    else:
        notes.append('not physically consistent (marked consistent: false: least squares, no '
                     'physical constraint)' + (
                         f'; mass matrix not positive definite at {len(negative)} of '
                         f'{len(checked)} configurations (down to {min(negative):.2g}x the '
                         'URDF\'s largest inertia)' if negative else ''))
    return notes


def _pseudo_problem(theta, tol=1e-9):
    """Why 10 link parameters (m, mc, I about the joint origin) are not physical, or None."""
    m, h = theta[0], np.asarray(theta[1:4])
    ixx, ixy, iyy, ixz, iyz, izz = theta[4:10]
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if not np.all(np.isfinite(theta)):
        return 'parameters that are not finite'
    if m < -tol:
        return f'a negative mass ({m:.4g} kg)'
    # pseudo-inertia [[Σ, h], [hᵀ, m]] with Σ = tr(I)/2·1 − I
    sigma = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    pseudo = np.block([[sigma, h[:, None]], [h[None, :], np.array([[m]])]])
    eig = np.linalg.eigvalsh(pseudo)
    scale = max(np.abs(eig).max(), 1e-12)
    if eig[0] < -1e-6 * scale:
        return f'a pseudo-inertia that is not positive semi-definite (eigenvalue {eig[0]:.3g})'
    return None


def inertia_problem(mass, inertia, tol=1e-9, massless_inertia=True):
    """Why a link's mass and inertia about its centre of mass are not physical, or None.

    Parameters
    ----------
    mass : float
        kg.
    inertia : array_like, (3, 3)
        About the centre of mass (kg·m²).
    massless_inertia : bool
        Whether an inertia without mass is a problem (a served body's must not be; a
        URDF link's is only odd).
    """
    inertia = np.asarray(inertia, dtype=float)
    if not (np.isfinite(mass) and np.all(np.isfinite(inertia))):
        return 'a mass or inertia that is not finite'
    if mass < 0:
        return f'a negative mass ({mass:.6g} kg)'
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    scale = max(np.abs(eig).max(), 1e-12)
    if eig[0] < -tol * scale:
        return f'an inertia that is not positive semi-definite (eigenvalue {eig[0]:.3g} kg·m²)'
    a, b, c = eig
    if a + b < c * (1 - 1e-6) - tol:
        return 'an inertia that breaks the triangle inequality (principal moments ' \
            f'{a:.3g}, {b:.3g}, {c:.3g} kg·m²)'
    if massless_inertia and mass == 0 and eig[-1] > tol:
        return 'inertia without mass'
    return None


def _plausible_floating(model, src):
    """Notes of a plausible floating model (positive masses: the loader refuses others),
    else ModelRefused: its masses must add up to the weighed total mass the fits are
    constrained to. Link parameters that are not physically consistent (a momentum fit
    is not constrained so) are noted."""
    masses = model.phi[::10]
    total = float(masses.sum())
    if not np.isclose(total, model.total_mass, rtol=1e-3):
        raise ModelRefused(f'{src} is implausible: its link masses add up to {total:.6g} kg, '
                           f'its total_mass is {model.total_mass:.6g} kg', 'implausible')
    notes = [f'link masses add up to the total mass ({model.total_mass:.6g} kg)']
    odd = [body for k, body in enumerate(model.bodies)
           if _pseudo_problem(model.phi[10 * k:10 * k + 10])]
    notes.append('link parameters physically consistent (pseudo-inertias PSD)' if not odd else
                 f'link parameters not physically consistent for {odd} (pseudo-inertias not '
                 'positive semi-definite; the fit does not constrain them)')
    return notes


__all__ = ['ModelRefused', 'admit_model', 'admit_doc', 'admit_urdf', 'check_doc', 'read_doc',
           'configurations', 'SCALE_LIMIT', 'REASONS', 'KINDS', 'FIT_WARNINGS']
