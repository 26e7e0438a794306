"""What a command writes: its output folder checked, strict JSON, metrics tables.

Argument parsing and printing only: the work is in the lower wings.
"""

import json
from pathlib import Path

import numpy as np

from arm_dyn_id.data.bag_writer import json_default
from arm_dyn_id.errors import ConfigError


def check_out(out, bags):
    """Refuse an output folder that cannot be written or lies inside an input bag.

    Returns
    -------
    pathlib.Path
        The folder, user-expanded (not created yet).
    """
    import os
    out = Path(out).expanduser()
    target = out.resolve()
    for bag in bags:
        b = Path(bag).expanduser().resolve()
        if target == b or b in target.parents:
            raise ConfigError(f'--out {out} is inside the input bag {bag}: choose a folder '
                              'outside it')
    if target.exists() and not target.is_dir():
        raise ConfigError(f'--out {out} is a file, not a folder')
    if (target / 'metadata.yaml').exists():
        raise ConfigError(f'--out {out} is a rosbag2 bag: choose another folder')
    parent = target
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f'--out {out}: cannot write in {parent}')
    return out


def write_json(path, doc):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_finite(doc), indent=1, default=json_default,
                               allow_nan=False) + '\n')
    return path


def _finite(obj):
    # strict JSON: NaN and inf become null
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    return obj


def metrics_text(validation):
    """Tables (seed 000 Tables 3-4 style) of every case of a validation dict."""
    from arm_dyn_id.validation.metrics import metrics_table
    parts = []
    for case, joints in validation.items():
        if case == 'fit_summary':
            continue
        parts.append(metrics_table([_Row(j, **v) for j, v in joints.items()], title=case))
    return '\n\n'.join(parts)


class _Row:
    def __init__(self, joint, **kw):
        self.joint = joint
        for k in ('max_torque', 'rmse', 'rmse_percent', 'mae', 'rho'):
            v = kw.get(k)
            setattr(self, k, float('nan') if v is None else v)
