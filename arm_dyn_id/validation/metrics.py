"""Validation metrics per joint, measured as the papers measure them.

- RMSE and RMSE as % of the joint's maximum |torque| (seed 000 eq. 18, Tables 3-4);
- MAE against the noise amplitude (seed 000 eq. 20, Table 6);
- residual RMS and correlation ρ (seed 001 Table 4).

Always computed on data not used for fitting.
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.errors import DataError


@dataclass(frozen=True)
class JointMetrics:
    """Metrics of one joint (torques in N·m)."""

    joint: str
    max_torque: float
    rmse: float
    rmse_percent: float
    mae: float
    rho: float
    noise_amplitude: float = float('nan')
    n_samples: int = 0
    #: N·m, standard deviation of the reference torque: how much it varied (a joint held
    #: still varies by its noise only, and its ρ is then the noise's)
    torque_std: float = float('nan')

    def to_dict(self):
        return {k: (None if isinstance(v, float) and np.isnan(v) else v)
                for k, v in self.__dict__.items()}


def joint_metrics(reference, predicted, joints, noise_amplitude=None):
    """Per-joint metrics of predicted against reference torques.

    Parameters
    ----------
    reference : ndarray, (M, n)
        Measured or simulated torques (N·m); NaN rows are skipped.
    predicted : ndarray, (M, n)
        Model torques (N·m).
    joints : sequence of str, (n,)
    noise_amplitude : array_like, (n,), optional
        Noise amplitude per joint to report beside the MAE (seed 000 Table 6).

    Returns
    -------
    list of JointMetrics
    """
    reference = np.asarray(reference, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    if reference.shape != predicted.shape or reference.ndim != 2:
        raise DataError(f'reference {reference.shape} and prediction {predicted.shape} '
                        'must both be (samples, joints)')
    if reference.shape[1] != len(joints):
        raise DataError(f'{reference.shape[1]} torque columns for {len(joints)} joints')
    ok = np.all(np.isfinite(reference), axis=1) & np.all(np.isfinite(predicted), axis=1)
    if ok.sum() < 2:
        raise DataError('fewer than 2 finite samples to validate on')
    ref, pred = reference[ok], predicted[ok]
    err = pred - ref
    noise = (np.full(len(joints), np.nan) if noise_amplitude is None
             else np.asarray(noise_amplitude, dtype=float))
    result = []
    for j, name in enumerate(joints):
        max_torque = float(np.max(np.abs(ref[:, j])))
        rmse = float(np.sqrt(np.mean(err[:, j] ** 2)))
        sr, sp = np.std(ref[:, j]), np.std(pred[:, j])
        rho = float(np.corrcoef(ref[:, j], pred[:, j])[0, 1]) if sr > 0 and sp > 0 else np.nan
        result.append(JointMetrics(
            joint=name, max_torque=max_torque, rmse=rmse,
            rmse_percent=100.0 * rmse / max_torque if max_torque > 0 else np.nan,
            mae=float(np.mean(np.abs(err[:, j]))), rho=rho,
            noise_amplitude=float(noise[j]), n_samples=int(ok.sum()), torque_std=float(sr)))
    return result


def metrics_table(metrics, title=None, unit_scale=1.0, unit='N·m'):
    """Plain-text table like seed 000 Tables 3-4 (max torque, RMSE, RMSE %)."""
    lines = [title] if title else []
    w = max([10] + [len(str(m.joint)) for m in metrics])     # long joint names stay aligned
    lines.append(f'{"joint":<{w}} {"max |tau| (" + unit + ")":>16} {"RMSE (" + unit + ")":>14} '
                 f'{"RMSE %":>8} {"MAE (" + unit + ")":>13} {"rho":>7}')
    for m in metrics:
        lines.append(f'{m.joint:<{w}} {m.max_torque * unit_scale:>16.4f} '
                     f'{m.rmse * unit_scale:>14.5f} {m.rmse_percent:>8.3f} '
                     f'{m.mae * unit_scale:>13.5f} {m.rho:>7.4f}')
    mean_pct = np.nanmean([m.rmse_percent for m in metrics])
    lines.append(f'{"mean":<{w}} {"":>16} {"":>14} {mean_pct:>8.3f}')
    return '\n'.join(lines)
