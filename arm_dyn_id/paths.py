"""Where the package's data files (urdf/, config/, launch/) are found.

From a source checkout they sit beside the ``arm_dyn_id`` folder; after a pip or
colcon install they are under ``<prefix>/share/arm_dyn_id``.
"""

import os
import sys
from pathlib import Path

PACKAGE = 'arm_dyn_id'


def share_dir():
    """Return the folder holding ``urdf/``, ``config/`` and ``launch/``.

    Returns
    -------
    pathlib.Path
        The source checkout root when running from source, else the installed
        ``share/arm_dyn_id`` folder (ament prefix path, then ``sys.prefix``).
    """
    source_root = Path(__file__).resolve().parent.parent
    if (source_root / 'package.xml').is_file() and (source_root / 'urdf').is_dir():
        return source_root
    prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    prefixes.append(sys.prefix)
    for prefix in prefixes:
        candidate = Path(prefix) / 'share' / PACKAGE
        if (candidate / 'urdf').is_dir():
            return candidate
    return source_root


def resolve_data_file(name, kind, base_dir=None):
    """Find a data file given as a path or as a bare name of a shipped file.

    Parameters
    ----------
    name : str or path-like
        Absolute path, path relative to ``base_dir`` (or the working folder), the
        name of a file shipped in the package's ``kind`` folder, or a path inside the
        package (``urdf/humanoid_arm.urdf``).
    kind : str
        ``'urdf'``, ``'config'`` or ``'launch'``.
    base_dir : path-like, optional
        Folder relative paths are tried against first (the config file's folder).

    Returns
    -------
    pathlib.Path
        The first existing candidate, or ``Path(name)`` when none exists (so the
        caller's error names the path the user gave).
    """
    path = Path(os.path.expanduser(str(name)))
    if path.is_absolute():
        return path
    candidates = []
    if base_dir is not None:
        candidates += [Path(base_dir) / path, Path(base_dir).parent / kind / path]
    # a path with folders is never replaced by a shipped file that merely has its name
    candidates += [Path.cwd() / path, share_dir() / kind / path, share_dir() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return path
