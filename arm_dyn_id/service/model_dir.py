"""Where the identifier node writes every fit: ``<model_dir>/<YYYYmmdd-HHMMSS>/`` and ``latest``.

Each fit gets a folder of its own holding what ``arm-dyn-id fit --out`` writes
(``model.yaml``, ``identified.urdf`` when a consistent one exists, ``validation.json``,
``report.html``), so ``arm-dyn-id report`` and ``validate`` work on it. ``latest``
is a relative symbolic link to the newest folder, replaced atomically (a new link
renamed over the old one), so a reader following ``latest/model.yaml`` sees either
the old model or the new one, never a missing or half-written file: the model file
itself is written before the link moves.
"""

import datetime
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from arm_dyn_id.data.bag_writer import json_default
from arm_dyn_id.errors import ConfigError

LATEST = 'latest'


def default_model_dir(robot_name, environ=None):
    """``$ROS_HOME/arm_dyn_id/<robot>`` (``~/.ros`` when ROS_HOME is unset), absolute."""
    environ = os.environ if environ is None else environ
    home = environ.get('ROS_HOME') or os.path.join(os.path.expanduser('~'), '.ros')
    return Path(home).expanduser().absolute() / 'arm_dyn_id' / (robot_name or 'robot')


def resolve_model_dir(value, robot_name, environ=None):
    """The model directory from the ``model_dir`` parameter ('' = the default).

    Raises
    ------
    ConfigError
        A relative path (it would depend on the directory the node was started in).
    """
    if not value:
        return default_model_dir(robot_name, environ)
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ConfigError(f'model_dir = {value!r} must be an absolute path (or ~/...), not '
                          'relative to the directory the node happens to start in')
    return path


def latest_model_file(root):
    """``<root>/latest/model.yaml``: what a serving node reads by default."""
    return Path(root) / LATEST / 'model.yaml'


def new_fit_folder(root, now=None):
    """Create and return ``<root>/<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``... if taken)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.datetime.now()).strftime('%Y%m%d-%H%M%S')
    for k in range(1, 1000):
        folder = root / (stamp if k == 1 else f'{stamp}-{k}')
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise OSError(f'{root}: no free folder name for {stamp}')


def point_latest(root, folder):
    """Make ``<root>/latest`` point at ``folder`` (relative link), atomically."""
    root = Path(root)
    link = root / LATEST
    tmp = root / f'.{LATEST}.{os.getpid()}.tmp'
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    os.symlink(Path(folder).name, tmp)
    os.replace(tmp, link)
    return link


def write_fit(root, model, urdf_text=None, validation=None, report=True, now=None):
    """Write one fit's folder and move ``latest`` to it.

    Parameters
    ----------
    root : path-like
        The model directory.
    model : GravityModel or DynamicsModel
        Has ``save(path)``.
    urdf_text : str, optional
        The identified URDF.
    validation : dict, optional
        Written as ``validation.json`` (the report needs it).
    report : bool
        Render ``report.html`` (:func:`arm_dyn_id.validation.report.write_report`).

    Returns
    -------
    dict
        ``folder`` and the paths written (``model``, ``urdf``, ``validation``,
        ``report``), plus ``report_error`` when the report could not be rendered
        (the model is written and linked anyway).
    """
    folder = new_fit_folder(root, now)
    paths = {'folder': folder, 'model': model.save(folder / 'model.yaml')}
    if urdf_text is not None:
        (folder / 'identified.urdf').write_text(urdf_text)
        paths['urdf'] = folder / 'identified.urdf'
    if validation is not None:
        # as `fit` does: the report tells a model.yaml edited later from this one
        from arm_dyn_id.config import file_sha256
        summary = dict(validation.get('fit_summary') or {},
                       model_sha256=file_sha256(paths['model']))
        validation = dict(validation, fit_summary=summary)
        (folder / 'validation.json').write_text(json.dumps(validation, indent=1,
                                                           default=json_default))
        paths['validation'] = folder / 'validation.json'
    if report and validation is not None:
        from arm_dyn_id.validation.report import write_report
        try:
            paths['report'] = write_report(folder)
        except Exception as exc:        # the model matters more than its report
            paths['report_error'] = f'{type(exc).__name__}: {exc}'
    point_latest(root, folder)
    return paths


def render_report(folder, failed=None):
    """``arm-dyn-id report <folder>`` in a child process at low priority, not waited for.

    matplotlib would hold the caller's GIL for seconds (the identifier's 1 kHz callbacks
    starve). The child has a session of its own, so a node stopped right after a fit
    still leaves the report complete; a daemon thread reaps it and calls
    ``failed(folder, why)`` when it could not start or did not succeed.
    """
    command = [sys.executable, '-m', 'arm_dyn_id', 'report', str(folder)]
    try:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True,
                                 preexec_fn=lambda: os.nice(10))
    except OSError as exc:
        if failed is not None:
            failed(folder, str(exc))
        return None

    def reap():
        _, err = child.communicate()
        if child.returncode != 0 and failed is not None:
            failed(folder, (err.strip().splitlines() or
                            [f'exit code {child.returncode}'])[-1])
    threading.Thread(target=reap, daemon=True, name='report').start()
    return child


__all__ = ['default_model_dir', 'resolve_model_dir', 'latest_model_file', 'new_fit_folder',
           'point_latest', 'write_fit', 'render_report', 'LATEST']
