"""Clearance between the arm's links, and between links and environment boxes.

The collision constraint of seed 000 eq. 12: ``d(V_a, V_b, t) > ε`` for every pair of
non-adjacent links and ``d(V_a, V_env, t) > ε`` for every link and environment box, at
every sample of a trajectory. Distances come from pinocchio + coal on the URDF's
collision shapes.

The pinocchio model used here is built from the whole URDF (RobotModel locks joints
that are not configured and reorders the rest), so joint angles are mapped by joint
name; joints of the URDF that are not configured stay at zero, as in RobotModel.

Environment boxes come from the config key ``environment_boxes``: a flat list of
doubles (a ROS parameter cannot be nested), six per box: centre x, y, z and size
x, y, z (m), axis-aligned in the URDF's root frame. ``min_clearance`` (m) is ε.
``collision_ignored_pairs`` lists link names two by two (flat, as an SRDF's disabled
collisions) for pairs whose collision shapes overlap by construction.
"""

import numpy as np
import pinocchio as pin

from arm_dyn_id.errors import ConfigError, JointNameError
from arm_dyn_id.model.robot import load_urdf_model

#: default ε (m) when the config gives no ``min_clearance``
DEFAULT_MIN_CLEARANCE = 0.01


class CollisionError(ConfigError):
    """A configuration brings two links (or a link and an environment box) closer than ε."""


def parse_environment_boxes(values):
    """Flat ``[cx, cy, cz, sx, sy, sz, ...]`` (m) -> array (k, 6).

    Raises
    ------
    ConfigError
        If the length is not a multiple of 6, a value is not finite or a size is not > 0.
    """
    if values is None:
        return np.zeros((0, 6))
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size % 6:
        raise ConfigError(f'parameter environment_boxes has {arr.size} values; give six per box '
                          '(centre x, y, z, size x, y, z in m)')
    arr = arr.reshape(-1, 6)
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f'parameter environment_boxes = {arr.tolist()} contains NaN or inf')
    bad = np.argwhere(arr[:, 3:] <= 0)
    if bad.size:
        k = int(bad[0, 0])
        raise ConfigError(f'parameter environment_boxes: box {k} has size {arr[k, 3:].tolist()}; '
                          'sizes must be > 0 m')
    return arr


class ClearanceChecker:
    """Minimum distances on the URDF collision shapes.

    Parameters
    ----------
    urdf : path-like
    joints : sequence of str
        Order of the joint angles passed to the methods.
    environment_boxes : array_like, (k, 6) or flat (6k,), optional
        Centre and size (m) of axis-aligned boxes in the root frame.
    min_clearance : float
        ε (m): a configuration is feasible when every checked distance exceeds it.
    """

    def __init__(self, urdf, joints, environment_boxes=None, min_clearance=DEFAULT_MIN_CLEARANCE,
                 ignored_pairs=()):
        import coal
        self.min_clearance = float(min_clearance)
        if not np.isfinite(self.min_clearance) or self.min_clearance < 0:
            raise ConfigError(f'parameter min_clearance = {min_clearance} must be >= 0 m')
        self.model = load_urdf_model(urdf)
        self.joints = tuple(joints)
        names = list(self.model.names)
        missing = [j for j in self.joints if j not in names]
        if missing:
            raise JointNameError(
                f'joint {missing[0]!r} is not in {urdf} (its joints: {names[1:]})')
        self._idx_q = np.array([self.model.joints[self.model.getJointId(j)].idx_q
                                for j in self.joints])
        self.geom = pin.buildGeomFromUrdf(self.model, str(urdf), pin.GeometryType.COLLISION)
        n_robot = len(self.geom.geometryObjects)
        self.boxes = parse_environment_boxes(environment_boxes)
        for k, (cx, cy, cz, sx, sy, sz) in enumerate(self.boxes):
            obj = pin.GeometryObject(f'environment_box_{k}', 0, 0,
                                     pin.SE3(np.eye(3), np.array([cx, cy, cz])),
                                     coal.Box(sx, sy, sz))
            self.geom.addGeometryObject(obj)
        parents = self.model.parents
        objs = self.geom.geometryObjects
        ignored = list(ignored_pairs or ())
        if len(ignored) % 2:
            raise ConfigError(f'parameter collision_ignored_pairs = {ignored} must list link '
                              'names two by two')
        link_of = [self.model.frames[o.parentFrame].name for o in objs]
        skip = {frozenset(ignored[k:k + 2]) for k in range(0, len(ignored), 2)}
        unknown = [x for x in ignored if x not in link_of]
        if unknown:
            raise ConfigError(f'parameter collision_ignored_pairs names {unknown[0]!r}, which has '
                              f'no collision shape in {urdf} (links: {sorted(set(link_of))})')
        for a in range(len(objs)):
            for b in range(a + 1, len(objs)):
                ja, jb = objs[a].parentJoint, objs[b].parentJoint
                if a >= n_robot or b >= n_robot:
                    # environment box against every moving link
                    if (ja if b >= n_robot else jb) == 0 or (a >= n_robot and b >= n_robot):
                        continue
                elif ja == jb or parents[ja] == jb or parents[jb] == ja:
                    continue    # same or adjacent links always touch at the joint
                elif frozenset((link_of[a], link_of[b])) in skip:
                    continue
                self.geom.addCollisionPair(pin.CollisionPair(a, b))
        self._pair_names = [(objs[p.first].name, objs[p.second].name)
                            for p in self.geom.collisionPairs]
        self.data = self.model.createData()
        self.gdata = pin.GeometryData(self.geom)

    @classmethod
    def from_config(cls, config):
        """From an ArmConfig: ``environment_boxes``, ``min_clearance`` and
        ``collision_ignored_pairs`` from ``extra``."""
        extra = config.extra or {}
        return cls(config.urdf, config.joints, extra.get('environment_boxes'),
                   extra.get('min_clearance', DEFAULT_MIN_CLEARANCE),
                   extra.get('collision_ignored_pairs', ()))

    @property
    def pair_names(self):
        """Names of the checked geometry pairs, in the order of :meth:`distances`."""
        return list(self._pair_names)

    def _pin_q(self, q):
        out = pin.neutral(self.model)
        out[self._idx_q] = q
        return out

    def distances(self, q):
        """Distance (m) of every checked pair at one configuration q (n,) -> (pairs,)."""
        q = np.asarray(q, dtype=float)
        if q.shape != (len(self.joints),):
            raise ValueError(f'q has shape {q.shape}, expected ({len(self.joints)},)')
        pin.computeDistances(self.model, self.data, self.geom, self.gdata, self._pin_q(q))
        return np.array([r.min_distance for r in self.gdata.distanceResults])

    def clearance(self, qs):
        """Minimum distance over pairs for each configuration, (N, n) -> (N,) m."""
        qs = np.atleast_2d(np.asarray(qs, dtype=float))
        if not self._pair_names:
            return np.full(qs.shape[0], np.inf)
        return np.array([self.distances(q).min() for q in qs])

    def closest(self, q):
        """(distance, (name_a, name_b)) of the closest pair at q."""
        d = self.distances(q)
        if d.size == 0:
            return np.inf, (None, None)
        k = int(np.argmin(d))
        return float(d[k]), self._pair_names[k]

    def check(self, qs, times=None, what='configuration'):
        """Raise :class:`CollisionError` at the first q closer than ε; return the minimum.

        Parameters
        ----------
        qs : ndarray, (N, n)
        times : ndarray, (N,), optional
            Sample times (s), only for the message.
        what : str
            What the samples are (for the message).

        Returns
        -------
        float
            Minimum clearance (m) over all samples.
        """
        qs = np.atleast_2d(np.asarray(qs, dtype=float))
        lowest = np.inf
        for k, q in enumerate(qs):
            d, pair = self.closest(q)
            lowest = min(lowest, d)
            if d <= self.min_clearance:
                when = f' at t = {times[k]:.3f} s' if times is not None else ''
                raise CollisionError(
                    f'{what}{when} q = {np.round(q, 4).tolist()} rad brings {pair[0]} and '
                    f'{pair[1]} within {d:.4f} m (min_clearance {self.min_clearance} m)')
        return float(lowest)
