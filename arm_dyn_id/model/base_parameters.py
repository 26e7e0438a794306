"""Base (minimal) parameter sets found numerically for any URDF.

The regressor Y (stacked over many random samples) has dependent columns: some
link parameters never influence the torques and others only in fixed
combinations. A QR decomposition with column pivoting, ``Y P = Q R``, splits the
columns into ``r`` independent ones (``θ_b``) and the rest (``θ_d``); with
``R = [[R11, R12], [0, 0]]`` the base parameters are

    β = θ_b + K θ_d,   K = R11⁻¹ R12,

and ``Y θ = Y_b β`` for every θ, with ``Y_b`` the independent columns (seed 000
eq. 8 for gravity; seed 001 §1.2 for the full model).
"""

from dataclasses import dataclass

import numpy as np

from arm_dyn_id.model.robot import RobotModel

# Relative threshold on |R_ii| / |R_00| below which a column is dependent.
RANK_TOLERANCE = 1e-8


@dataclass(frozen=True)
class BaseParameters:
    """A base parameter set of one model and one regressor kind.

    Attributes
    ----------
    kind : str
        ``'gravity'`` (4 per body) or ``'inertial'`` (10 per body, + friction).
    friction : bool
        Whether Coulomb and viscous friction columns are included.
    parameter_names : tuple of str
        Names of all link parameters θ, (p,).
    independent : ndarray of int, (r,)
        Columns of Y that form ``Y_b``.
    dependent : ndarray of int, (p - r,)
    K : ndarray, (r, p - r)
        ``β = θ[independent] + K @ θ[dependent]``.
    """

    kind: str
    friction: bool
    parameter_names: tuple
    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray

    @property
    def count(self):
        return len(self.independent)

    @property
    def armature(self):
        """Whether θ ends with rotor inertias (``Ia1..Ian``, an inertial set's option)."""
        return any(name.startswith('Ia') for name in self.parameter_names)

    def beta(self, theta):
        """Base parameters β of a full parameter vector θ, (p,) -> (r,)."""
        theta = np.asarray(theta, dtype=float)
        return theta[self.independent] + self.K @ theta[self.dependent]

    def reduce(self, regressor):
        """Base regressor: the independent columns of Y (..., p) -> (..., r)."""
        return np.asarray(regressor)[..., self.independent]

    @property
    def names(self):
        """Short name of each base parameter: its leading link parameter."""
        return tuple(self.parameter_names[i] for i in self.independent)

    def expressions(self, digits=4):
        """Human-readable combination each base parameter stands for.

        Example: ``'my2 + mz3 - 0.35*m4 - 0.35*m5'`` (seed 000 eq. 8 style;
        masses in kg, first moments in kg·m, lengths in m).
        """
        result = []
        for row, col in enumerate(self.independent):
            text = self.parameter_names[col]
            for coef, dep in zip(self.K[row], self.dependent):
                if abs(coef) < 10 ** -(digits + 2):
                    continue
                sign = '-' if coef < 0 else '+'
                mag = abs(coef)
                term = self.parameter_names[dep] if abs(mag - 1) < 10 ** -digits else \
                    f'{mag:.{digits}g}*{self.parameter_names[dep]}'
                text += f' {sign} {term}'
            result.append(text)
        return tuple(result)

    def unidentifiable(self):
        """Link parameters that influence no torque at all (zero columns)."""
        zero = np.all(np.abs(self.K) < 1e-12, axis=0)
        return tuple(self.parameter_names[d] for d, z in zip(self.dependent, zero) if z)

    def to_dict(self):
        return {
            'kind': self.kind, 'friction': self.friction,
            'parameter_names': list(self.parameter_names),
            'independent': self.independent.tolist(), 'dependent': self.dependent.tolist(),
            'K': self.K.tolist(),
        }

    @classmethod
    def from_dict(cls, data):
        return cls(kind=data['kind'], friction=bool(data['friction']),
                   parameter_names=tuple(data['parameter_names']),
                   independent=np.asarray(data['independent'], dtype=int),
                   dependent=np.asarray(data['dependent'], dtype=int),
                   K=np.asarray(data['K'], dtype=float).reshape(
                       len(data['independent']), len(data['dependent'])))


def column_scales(regressor):
    """RMS of each column of a stacked regressor (2-D), zero columns -> 1."""
    scale = np.sqrt(np.mean(np.asarray(regressor) ** 2, axis=0))
    scale[scale == 0] = 1.0
    return scale


def condition_number(Y):
    """2-norm condition number of a stacked regressor (M, p) from the eigenvalues of
    YᵀY (p × p): far cheaper than an SVD of the tall matrix, exact enough below 1e7."""
    Y = np.asarray(Y, dtype=float).reshape(-1, np.shape(Y)[-1])
    lam = np.linalg.eigvalsh(Y.T @ Y)
    # an eigenvalue within rounding of zero (p·eps of the largest) is a rank defect:
    # beyond cond ≈ 1/sqrt(p·eps) ≈ 3e7 this estimate means nothing anyway
    if lam[-1] <= 0 or lam[0] <= lam[-1] * lam.size * np.finfo(float).eps:
        return np.inf
    return float(np.sqrt(lam[-1] / lam[0]))


def base_from_regressor(regressor, parameter_names, kind, friction=False,
                        tolerance=RANK_TOLERANCE):
    """Base parameters from a stacked regressor by pivoted QR.

    Parameters
    ----------
    regressor : ndarray, (M, p)
        Regressor rows stacked over many samples (M >> p).
    parameter_names : sequence of str, (p,)
    kind : str
    friction : bool
    tolerance : float
        Relative rank threshold on the diagonal of R.

    Returns
    -------
    BaseParameters
    """
    import scipy.linalg   # here: serving a saved model needs no QR (0.3 s of import)
    Y = np.asarray(regressor, dtype=float)
    _, R, perm = scipy.linalg.qr(Y, mode='economic', pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > tolerance * diag[0])) if diag.size and diag[0] > 0 else 0
    independent = perm[:rank]
    dependent = perm[rank:]
    K = scipy.linalg.solve_triangular(R[:rank, :rank], R[:rank, rank:])
    K[np.abs(K) < 1e-12] = 0.0
    # Keep the order of the parameter vector for the independent set (readable),
    # permuting K's rows alongside.
    order = np.argsort(independent)
    order_d = np.argsort(dependent)
    return BaseParameters(kind=kind, friction=friction,
                          parameter_names=tuple(parameter_names),
                          independent=independent[order], dependent=dependent[order_d],
                          K=K[order][:, order_d])


def random_configurations(robot, n_samples, rng):
    """Uniform joint angles in [-π, π], (n_samples, n)."""
    return rng.uniform(-np.pi, np.pi, size=(n_samples, robot.n_joints))


def gravity_base_parameters(robot: RobotModel, n_samples=200, seed=0):
    """Gravity base parameter set of a model (seed 000 eqs. 7-8).

    The direction of gravity matters (a vertical joint 1 sees no gravity);
    the magnitude does not.
    """
    rng = np.random.default_rng(seed)
    Y = robot.gravity_regressor(random_configurations(robot, n_samples, rng))
    return base_from_regressor(Y.reshape(-1, Y.shape[-1]), robot.parameter_names('gravity'),
                               'gravity')


def inertial_base_parameters(robot: RobotModel, friction=True, n_samples=200, seed=0):
    """Base parameter set of the full dynamics (seed 001 §1.2), optionally with
    Coulomb and viscous friction per joint."""
    rng = np.random.default_rng(seed)
    q = random_configurations(robot, n_samples, rng)
    dq = rng.uniform(-2.0, 2.0, size=q.shape)
    ddq = rng.uniform(-5.0, 5.0, size=q.shape)
    Y = robot.full_regressor(q, dq, ddq, friction=friction)
    names = robot.parameter_names('inertial', friction=friction)
    return base_from_regressor(Y.reshape(-1, Y.shape[-1]), names, 'inertial', friction)
