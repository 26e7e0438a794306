"""The robot model wing: what the arm is, independent of any data.

- :mod:`.robot`: :class:`RobotModel` from a URDF (pinocchio), its gravity and
  full-dynamics regressors, payloads;
- :mod:`.base_parameters`: base (minimal) parameter sets by pivoted QR, the
  regressor's condition number;
- :mod:`.gravity`: the identified gravity model (serve G(q) at any g, save/load);
- :mod:`.dynamics`: the identified full-dynamics model (inverse dynamics with
  friction, gravity, save/load);
- :mod:`.export`: physically consistent link parameters and the identified URDF;
- :mod:`.floating`: free-floating robots (seeds 002, 003) and their identified model
  file (:class:`~.floating.FloatingIdentification`).

:func:`load_model` reads any of the model files (by its ``schema`` and ``dynamics`` keys);
:func:`arm_dyn_id.model.gate.admit_model` reads one through THE model gate (every command
and node that loads a model uses it: refused in one line when it is unreadable, of another
kind, version or robot, non-finite, implausible or marked rejected).

Imports only the foundation (``arm_dyn_id.config``, ``errors``, ``paths``).
"""


def load_model(path, urdf=None):
    """Read a model file: a :class:`~.gravity.GravityModel` or a
    :class:`~.dynamics.DynamicsModel`, by the file's ``dynamics`` key
    (``gravity`` when absent: version-1 files), or a floating-base robot's
    :class:`~.floating.FloatingIdentification` (schema ``arm_dyn_id/floating_model``;
    ``urdf`` is then a folder holding its URDF, or the URDF itself).

    Parameters
    ----------
    path : path-like
    urdf : path-like, optional
        URDF to use instead of the one the file names.

    Raises
    ------
    ConfigError
        Missing file, not YAML, not a model file, unknown ``dynamics``.
    URDFError
        The URDF cannot be found.
    DataError
        A floating model file with bad contents.
    """
    from arm_dyn_id.errors import ConfigError
    from arm_dyn_id.model.dynamics import DynamicsModel
    from arm_dyn_id.model.files import read_model_file
    from arm_dyn_id.model.gravity import GravityModel
    doc = read_model_file(path)
    if doc.get('schema') == 'arm_dyn_id/floating_model':
        from arm_dyn_id.model.floating import FloatingIdentification
        return FloatingIdentification.from_dict(doc, source=str(path), urdf_dir=urdf)
    kind = doc.get('dynamics', 'gravity')
    if kind == 'gravity':
        return GravityModel.from_dict(doc, urdf=urdf, source=str(path))
    if kind == 'full':
        return DynamicsModel.from_dict(doc, urdf=urdf, source=str(path))
    raise ConfigError(f'model file {path} has dynamics {kind!r}; expected gravity or full')


__all__ = ['load_model']
