"""The identified gravity model: serve G(q) at any g, with payloads; save and load.

Base parameters β are mass moments (kg, kg·m); the regressor carries g. So a
model identified at 9.81 m/s² serves 1.63 m/s² by evaluating the regressor with
the other gravity (seed 000 §3: the identification on Earth is reused on the
Moon). A known payload adds ``base.beta(Δθ)`` to β, Δθ being its own mass
parameters in the flange body's frame — gravity is linear in the link parameters.

Model file (YAML, ``schema: arm_dyn_id/gravity_model``, ``version: 2``,
``dynamics: gravity``; version 1 files, without ``dynamics``, load the same)::

    schema, version, dynamics, robot_name, joints, urdf: {file, sha256},
    gravity: {magnitude, direction},        # at which the data was taken
    base: {names, expressions, values, std_errors, independent, dependent, K,
           parameter_names, kind, friction},
    friction: {coulomb, viscous, pair_offset},   # per joint, NaN when unknown
    measurement: {effort, torque_constants, current_signs, current_offsets,
                  gear_ratios, efficiencies},   # what joint_states.effort carried
    fit: {method, condition_number, n_samples, residual_rms, noise_std, seconds},
    selection: {by, method, reason, score, scores, folds},
    validation: {<case>: [per-joint metrics]},
    provenance: {created, data, config, software}

``selection`` says how the estimator was chosen: ``by: held_out`` (candidates
scored on forward/backward pairs they were not fitted on), ``in_sample`` (the
stated fallback when no pair could be held out, with the reason) or
``single_candidate``. Files written before it existed load with no selection.
``measurement`` (:mod:`.files`) says how the fitted data's effort maps to torque; files
without it load with ``measurement`` None.
"""

import numpy as np

from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.model import files
from arm_dyn_id.model.base_parameters import BaseParameters
from arm_dyn_id.model.robot import Payload

SCHEMA = 'arm_dyn_id/gravity_model'
VERSION = 2
#: Sections of the model file carried in :attr:`GravityModel.metadata`.
METADATA_SECTIONS = ('measurement', 'fit', 'selection', 'validation', 'provenance',
                     'gross_errors', 'rejected')


#: The friction a gravity fit reads from its pairs (N·m, N·m·s/rad, N·m per joint; NaN
#: when unknown): ``pair_offset`` is the constant a swept joint keeps in its
#: forward/backward averages (Coulomb friction stronger one way, or an effort offset),
#: fitted beside gravity where it stands out (identification.gravity.pair_offsets); none
#: of them is served as gravity.
FRICTION_KEYS = ('coulomb', 'viscous', 'pair_offset')


class GravityModel:
    """Identified gravity model of one arm.

    Parameters
    ----------
    robot : RobotModel
        Kinematics (the URDF); its inertial values are not used for serving.
    base : BaseParameters
    beta : ndarray, (r,)
        Identified base parameters.
    std_errors : ndarray, (r,), optional
    friction : dict, optional
        ``{'coulomb': (n,), 'viscous': (n,)}``.
    metadata : dict, optional
        Fit, validation and provenance sections of the model file.
    """

    dynamics = 'gravity'

    def __init__(self, robot, base, beta, std_errors=None, friction=None, metadata=None,
                 fit_gravity=None):
        beta = np.asarray(beta, dtype=float)
        if beta.shape != (base.count,):
            raise DataError(f'{beta.size} base parameter values for {base.count} parameters')
        self.robot = robot
        self.base = base
        self.beta = beta
        self.std_errors = (np.full(base.count, np.nan) if std_errors is None
                           else np.asarray(std_errors, dtype=float))
        n = robot.n_joints
        friction = friction or {}
        self.friction = {k: np.asarray(friction.get(k, np.full(n, np.nan)), dtype=float)
                         for k in FRICTION_KEYS}
        self.metadata = dict(metadata or {})
        self.fit_gravity = robot.gravity_magnitude if fit_gravity is None else fit_gravity
        self._payload_beta = np.zeros(base.count)
        self._payload_theta = np.zeros(4 * robot.n_bodies)   # its full mass parameters

    @property
    def joint_names(self):
        return self.robot.joint_names

    @property
    def selection(self):
        """How the estimator was chosen (``{by, method, reason, scores, ...}``), or None
        for a model file written before the selection was recorded."""
        return self.metadata.get('selection')

    @property
    def measurement(self):
        """What ``joint_states.effort`` carried in the fitted data and its conversion to
        torque (``{effort, torque_constants, ...}``, the section of :mod:`.files`),
        or None for a fit that did not record it."""
        return self.metadata.get('measurement')

    # serving ------------------------------------------------------------------
    def gravity_torques(self, q, gravity=None):
        """G(q) (N·m) of the identified model.

        Parameters
        ----------
        q : ndarray, (n,) or (N, n)
            rad, in the order of :attr:`joint_names`.
        gravity : float, optional
            Gravity magnitude (m/s²); default the robot's current one.

        Returns
        -------
        ndarray, (n,) or (N, n)
        """
        q = np.asarray(q, dtype=float)
        g = None
        if gravity is not None:
            direction = self.robot.gravity_vector / self.robot.gravity_magnitude
            g = float(gravity) * direction
        # Y_b β = Y θ with θ the base values on the independent columns, zeros
        # elsewhere: the batch path, with no base regressor copied out of Y
        if q.ndim == 1:
            return self.base.reduce(self.robot.gravity_regressor(q, gravity=g)) @ \
                (self.beta + self._payload_beta)
        return self.robot.gravity_torques_batch(q, self._theta(), gravity=g)

    def gravity_torques_along(self, q, vector):
        """G(q) (N, n) with gravity ``vector`` (m/s², (3,), in the URDF's root frame) in
        place of the fit's: the base values under another direction, the URDF's values on
        the parameters the fit's gravity leaves undetermined; linear in ``vector``.

        Under a direction other than the fit's, those parameters carry torque: with zeros
        on them, a UR5's shoulder_pan under a horizontal gravity missed most of its torque
        (a tilt of 4° read as 2°, its sweeps' pairs disagreeing)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        # the URDF's, and a payload's whole (set_payload), where the fit is blind
        urdf = self.robot.parameters('gravity') + self._payload_theta
        theta = urdf.copy()
        theta[self.base.independent] += self.beta + self._payload_beta - self.base.beta(urdf)
        return self.robot.gravity_torques_batch(q, theta,
                                                gravity=np.asarray(vector, dtype=float))

    def _theta(self):
        """The full mass-parameter vector that gives the base values (zeros elsewhere)."""
        theta = np.zeros(4 * self.robot.n_bodies)
        theta[self.base.independent] = self.beta + self._payload_beta
        return theta

    def set_gravity(self, magnitude):
        """Serve another gravity magnitude from now on (m/s²)."""
        self.robot.set_gravity(magnitude)
        return self

    def payload_beta(self, payload):
        """Δβ of a rigid payload at a frame (linear in its mass parameters)."""
        return self.base.beta(self._payload_delta(payload))

    def _payload_delta(self, payload):
        """Δθ (4·nb,) of a rigid payload at a frame: its full mass parameters."""
        loaded = self.robot.with_payload(payload)
        return loaded.parameters('gravity') - self.robot.parameters('gravity')

    def set_payload(self, payload):
        """Add a known payload analytically (None removes it)."""
        delta = np.zeros(4 * self.robot.n_bodies) if payload is None else \
            self._payload_delta(payload)
        self._payload_theta = delta
        self._payload_beta = self.base.beta(delta)
        return self

    # files ----------------------------------------------------------------------
    def to_dict(self):
        doc = files.header(SCHEMA, VERSION, 'gravity', self.robot, self.metadata,
                           self.fit_gravity)
        doc['base'] = files.base_section(self.base, self.beta, self.std_errors,
                                         'kg for m*, kg*m for first moments')
        doc['friction'] = {k: files.floats(v) for k, v in self.friction.items()}
        return files.add_metadata(doc, self.metadata, METADATA_SECTIONS)

    def to_yaml(self):
        return files.to_yaml(self.to_dict())

    def save(self, path):
        """Write the model file (YAML); the write is atomic (temp file + rename)."""
        return files.save(self.to_dict(), path)

    @classmethod
    def from_dict(cls, doc, urdf=None, source='<model>'):
        """Rebuild a model from its file contents.

        Parameters
        ----------
        urdf : path-like, optional
            URDF to use instead of the one named in the file (its hash is checked
            and a mismatch is reported in ``metadata['warnings']``).
        """
        files.check_header(doc, SCHEMA, VERSION, source, 'gravity')
        if doc.get('dynamics', 'gravity') != 'gravity':
            raise ConfigError(f'{source} holds a {doc["dynamics"]!r} model, not a gravity '
                              'model: read it with arm_dyn_id.model.load_model')
        robot, urdf_path = files.robot_of(doc, urdf, source)
        b = doc['base']
        base = BaseParameters.from_dict(b)
        metadata = files.read_metadata(doc, urdf_path, METADATA_SECTIONS)
        measurement = files.read_measurement(doc, source)
        if measurement is not None:
            metadata['measurement'] = measurement
        values = files.array(b['values'])
        errors = files.array(b.get('std_errors'), len(values))
        fr = doc.get('friction', {})
        friction = {k: files.array(fr.get(k) or None, len(doc['joints']))
                    for k in FRICTION_KEYS}
        return cls(robot, base, values, errors, friction, metadata,
                   fit_gravity=doc['gravity']['magnitude'])

    @classmethod
    def load(cls, path, urdf=None):
        """Read a model file written by :meth:`save`."""
        return cls.from_dict(files.read_model_file(path), urdf=urdf, source=str(path))


__all__ = ['GravityModel', 'Payload']
