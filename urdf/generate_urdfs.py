#!/usr/bin/env python3
"""Generate the URDFs of the two seed arms from their modified DH tables.

``python3 urdf/generate_urdfs.py`` rewrites ``urdf/humanoid_arm.urdf`` and
``urdf/staubli_tx60.urdf`` next to this script; ``--check`` only compares and
exits with status 1 when a committed file differs from what this script makes.
Pure Python + NumPy on purpose, so it runs without pinocchio or ROS.

Every joint origin is the static part of the modified (Craig) DH transform,
``RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(offset_i) TransZ(d_i)``, with the joint
axis along z. ``RotZ(theta)`` commutes with ``TransZ(d)``, so the URDF chain is
the DH chain exactly and every link frame IS the DH frame of that link.
See docs/robots.md for where each number comes from.
"""

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_EPS = 1e-12


@dataclass(frozen=True)
class Shape:
    """A collision primitive, axis-aligned with its link frame.

    kind 'cylinder': size = (radius, length), axis along the link's z.
    kind 'box': size = (x, y, z) edge lengths. xyz: centre in the link frame (m).
    """

    kind: str
    size: tuple
    xyz: tuple


@dataclass(frozen=True)
class DHJoint:
    """One revolute joint: modified DH row (rad, m) and limits (rad, rad/s, N m)."""

    alpha: float
    a: float
    d: float
    offset: float
    lower: float
    upper: float
    velocity: float
    effort: float
    comment: str = ''


@dataclass(frozen=True)
class Body:
    """A moving link: mass (kg), centre of mass in the link/DH frame (m), shapes."""

    mass: float
    com: tuple
    shapes: tuple
    comment: str = ''


def rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def matrix_from_rpy(rpy):
    """URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll) (fixed axes x, y, z)."""
    r, p, y = rpy
    return rot_z(y) @ rot_y(p) @ rot_x(r)


def rpy_from_matrix(R):
    """Inverse of :func:`matrix_from_rpy`, exact also at pitch = +-90 deg.

    At gimbal lock only roll - yaw (pitch = +90) or roll + yaw (pitch = -90) is
    defined; yaw is set to 0 and the whole rotation goes into roll.
    """
    R = np.asarray(R, dtype=float)
    cp = math.hypot(R[0, 0], R[1, 0])
    if cp > 1e-9:
        roll = math.atan2(R[2, 1], R[2, 2])
        pitch = math.atan2(-R[2, 0], cp)
        yaw = math.atan2(R[1, 0], R[0, 0])
    elif R[2, 0] < 0.0:  # pitch = +90 deg: R = [[0, s, c], [0, c, -s], [-1, 0, 0]]
        roll, pitch, yaw = math.atan2(R[0, 1], R[1, 1]), math.pi / 2, 0.0
    else:  # pitch = -90 deg: R = [[0, -s, -c], [0, c, -s], [1, 0, 0]]
        roll, pitch, yaw = math.atan2(-R[0, 1], R[1, 1]), -math.pi / 2, 0.0
    rpy = (roll, pitch, yaw)
    if not np.allclose(matrix_from_rpy(rpy), R, atol=1e-12):
        raise ValueError(f'rpy conversion failed for {R.tolist()}')
    return rpy


def mdh_origin(alpha, a, d, offset):
    """(xyz, rpy) of RotX(alpha) TransX(a) RotZ(offset) TransZ(d)."""
    R = rot_x(alpha) @ rot_z(offset)
    p = rot_x(alpha) @ np.array([a, 0.0, 0.0]) + R @ np.array([0.0, 0.0, d])
    return tuple(p), rpy_from_matrix(R)


def fmt(x):
    """Shortest round-trip float text; -0 and 1e-17 noise become 0."""
    x = float(x)
    if abs(x) < _EPS:
        x = 0.0
    for k in range(-8, 9):  # snap multiples of pi/4 so the text is the exact double
        if abs(x - k * math.pi / 4) < _EPS:
            x = k * math.pi / 4
    return repr(x)


def vec(v):
    return ' '.join(fmt(x) for x in v)


def inertia_about_com(shape, mass):
    """Principal moments (kg m^2) of a uniform solid filling the collision shape."""
    if shape.kind == 'cylinder':
        r, h = shape.size
        ixx = mass * (3.0 * r * r + h * h) / 12.0
        return ixx, ixx, mass * r * r / 2.0
    x, y, z = shape.size
    return (mass * (y * y + z * z) / 12.0, mass * (x * x + z * z) / 12.0,
            mass * (x * x + y * y) / 12.0)


def shape_xml(shape, indent):
    pad = ' ' * indent
    if shape.kind == 'cylinder':
        geom = f'<cylinder radius="{fmt(shape.size[0])}" length="{fmt(shape.size[1])}"/>'
    else:
        geom = f'<box size="{vec(shape.size)}"/>'
    return (f'{pad}<collision>\n'
            f'{pad}  <origin xyz="{vec(shape.xyz)}" rpy="0 0 0"/>\n'
            f'{pad}  <geometry>{geom}</geometry>\n'
            f'{pad}</collision>\n')


def inertial_xml(mass, com, moments, indent):
    pad = ' ' * indent
    ixx, iyy, izz = (round(m, 9) for m in moments)
    return (f'{pad}<inertial>\n'
            f'{pad}  <origin xyz="{vec(com)}" rpy="0 0 0"/>\n'
            f'{pad}  <mass value="{fmt(mass)}"/>\n'
            f'{pad}  <inertia ixx="{fmt(ixx)}" ixy="0" ixz="0" iyy="{fmt(iyy)}" '
            f'iyz="0" izz="{fmt(izz)}"/>\n'
            f'{pad}</inertial>\n')


def link_xml(name, body=None, shapes=(), comment='', inertial=None):
    out = f'  <link name="{name}">\n'
    if comment:
        out += f'    <!-- {comment} -->\n'
    if body is not None:
        moments = inertia_about_com(body.shapes[0], body.mass)
        out += inertial_xml(body.mass, body.com, moments, 4)
        shapes = body.shapes
    elif inertial is not None:
        out += inertial_xml(*inertial, 4)
    for s in shapes:
        out += shape_xml(s, 4)
    return out + '  </link>\n'


def fixed_joint_xml(name, parent, child, xyz, rpy, comment=''):
    out = f'  <joint name="{name}" type="fixed">\n'
    if comment:
        out += f'    <!-- {comment} -->\n'
    return out + (f'    <parent link="{parent}"/>\n'
                  f'    <child link="{child}"/>\n'
                  f'    <origin xyz="{vec(xyz)}" rpy="{vec(rpy)}"/>\n'
                  f'  </joint>\n')


def revolute_xml(i, j):
    xyz, rpy = mdh_origin(j.alpha, j.a, j.d, j.offset)
    parent = 'base_link' if i == 1 else f'link_{i - 1}'
    out = f'  <joint name="joint_{i}" type="revolute">\n'
    out += (f'    <!-- modified DH: alpha_{i - 1} = {math.degrees(j.alpha):g} deg, '
            f'a_{i - 1} = {j.a:g} m, d_{i} = {j.d:g} m, '
            f'theta offset = {math.degrees(j.offset):g} deg -->\n')
    if j.comment:
        out += f'    <!-- {j.comment} -->\n'
    return out + (f'    <parent link="{parent}"/>\n'
                  f'    <child link="link_{i}"/>\n'
                  f'    <origin xyz="{vec(xyz)}" rpy="{vec(rpy)}"/>\n'
                  f'    <axis xyz="0 0 1"/>\n'
                  f'    <limit lower="{fmt(j.lower)}" upper="{fmt(j.upper)}" '
                  f'velocity="{fmt(j.velocity)}" effort="{fmt(j.effort)}"/>\n'
                  f'  </joint>\n')


def arm_xml(joints, bodies):
    out = ''
    for i, (j, b) in enumerate(zip(joints, bodies), start=1):
        out += revolute_xml(i, j)
        out += link_xml(f'link_{i}', body=b, comment=b.comment)
    out += fixed_joint_xml('joint_6_to_flange', 'link_6', 'flange', (0, 0, 0), (0, 0, 0),
                           'tool flange = DH frame 6; attach payloads here')
    out += '  <link name="flange"/>\n'
    return out


HEADER = ('<?xml version="1.0"?>\n'
          '<!-- GENERATED by urdf/generate_urdfs.py - edit that script, not this file. -->\n')

# --------------------------------------------------------------------------- humanoid

D2R = math.pi / 180.0
L1, L2 = 0.350, 0.250  # seed 000 Table 1 / Table 2: upper arm and forearm lengths (m)

# torso frame: x forward, y left, z up (REP 103), gravity along -z. Right arm.
# DH frame 0 = base_link: x0 = +z_torso (up), y0 = -x_torso (back),
# z0 = -y_torso (outward). Joint 1 axis is horizontal (shoulder pitch) and at
# q = 0 the whole arm hangs straight down (the DH chain at q = 0 points along -x0).
TORSO_TO_BASE_R = np.array([[0.0, -1.0, 0.0],
                            [0.0, 0.0, -1.0],
                            [1.0, 0.0, 0.0]])
TORSO_TO_BASE_XYZ = (0.0, -0.27, 0.20)  # shoulder centre, m (ASSUMPTION)
TORSO_BOX = Shape('box', (0.20, 0.32, 0.50), (0.0, 0.0, 0.0))  # ASSUMPTION

HUMANOID_JOINTS = (
    # limits are ASSUMPTIONS (the paper gives none): human-like ranges around
    # the hanging pose q = 0; signs follow the DH frames (see docs/robots.md).
    DHJoint(0.0, 0.0, 0.0, 0.0, -1.0, 3.0, 2.0, 20.0,
            'shoulder pitch (flexion +); axis horizontal, outward'),
    DHJoint(-90 * D2R, 0.0, 0.0, -90 * D2R, -0.5, 2.8, 2.0, 20.0,
            'shoulder roll (abduction +)'),
    DHJoint(-90 * D2R, 0.0, -L1, -90 * D2R, -1.6, 1.6, 2.0, 10.0,
            'upper-arm rotation; upper arm spans z3 in [0, l1] (frame 3 sits at the elbow)'),
    DHJoint(-90 * D2R, 0.0, 0.0, 0.0, -0.1, 2.6, 2.0, 10.0,
            'elbow (flexion +)'),
    DHJoint(90 * D2R, 0.0, -L2, 0.0, -1.6, 1.6, 2.0, 5.0,
            'forearm rotation; forearm spans z5 in [0, l2] (frame 5 sits at the wrist)'),
    DHJoint(-90 * D2R, 0.0, 0.0, 0.0, -1.2, 1.2, 2.0, 5.0,
            'wrist pitch'),
)

_PAPER = ('mass and centre of mass: seed 000 Table 2; inertia: ASSUMPTION, uniform solid '
          'filling the collision shape, about the CoM')
HUMANOID_BODIES = (
    Body(0.8, (0.0005, 0.0035, -0.070),
         (Shape('cylinder', (0.045, 0.08), (0.0, 0.0, -0.06)),), _PAPER),
    Body(0.7, (0.0015, 0.0040, 0.0050),
         (Shape('cylinder', (0.045, 0.09), (0.0, 0.0, 0.0)),), _PAPER),
    Body(0.5, (0.0055, 0.013, 0.150),
         (Shape('cylinder', (0.040, 0.23), (0.0, 0.0, 0.165)),), _PAPER),
    Body(0.3, (0.0075, -0.030, 0.0045),
         (Shape('cylinder', (0.040, 0.08), (0.0, 0.0, 0.0)),), _PAPER),
    Body(0.3, (0.0035, 0.011, 0.100),
         (Shape('cylinder', (0.035, 0.16), (0.0, 0.0, 0.125)),), _PAPER),
    Body(0.2, (0.0020, 0.0055, 0.0030),
         (Shape('cylinder', (0.030, 0.06), (0.0, 0.0, 0.0)),), _PAPER),
)

HUMANOID_MOUNT_COMMENT = """\
  <!-- MOUNTING. The root link `torso` is the humanoid's chest (x forward, y left,
       z up, gravity along -z). `base_link` is DH frame 0 of seed 000 Table 1,
       placed at the right shoulder centre and rotated so that
         x0 = +z_torso (up), y0 = -x_torso (back), z0 = -y_torso (outward).
       Joint 1's axis z0 is therefore HORIZONTAL (shoulder pitch) and at q = 0
       the arm hangs straight down. This matters for identification: with
       joint 1 vertical, gravity never produces a torque about joint 1 and
       link 1's m*c_x, m*c_y drop out, leaving 10 gravity base parameters; with
       this horizontal mounting the arm has the paper's 12 (seed 000 eq. 8),
       checked in test/test_urdf.py. rpy below = Ry(-90 deg) Rx(90 deg). -->
"""


def humanoid_urdf():
    base_rpy = rpy_from_matrix(TORSO_TO_BASE_R)
    out = HEADER + '<robot name="humanoid_arm">\n'
    out += ('  <!-- Right arm of the humanoid of seed 000 (modified DH, Table 1; masses and\n'
            '       centres of mass, Table 2). Link i frame = DH frame i. Inertias, joint\n'
            '       limits, collision shapes and the mounting pose are ASSUMPTIONS;\n'
            '       see docs/robots.md. -->\n')
    out += link_xml('torso', shapes=(TORSO_BOX,),
                    comment='torso box 0.20 x 0.32 x 0.50 m (ASSUMPTION), no inertia: fixed')
    out += HUMANOID_MOUNT_COMMENT
    out += fixed_joint_xml('torso_to_base', 'torso', 'base_link', TORSO_TO_BASE_XYZ, base_rpy)
    out += '  <link name="base_link"/>\n'
    out += arm_xml(HUMANOID_JOINTS, HUMANOID_BODIES)
    return out + '</robot>\n'


# ------------------------------------------------------------------------------ TX-60

PEDESTAL_HEIGHT = 0.375  # floor to shoulder (DH frame 0), m (ASSUMPTION, TX-60 class)
_ACC = 'acceleration limit 69.8 rad/s^2 (seed 001 Table 2; URDF has no field for it)'
TX60_JOINTS = (
    # seed 001 Table 1 read as modified DH; position limits Table 1, velocity
    # limits Table 2; effort limits are ASSUMPTIONS.
    DHJoint(0.0, 0.0, 0.0, 0.0, -2.6, 2.6, 5.23, 150.0, _ACC),
    DHJoint(-math.pi / 2, 0.0, 0.0, 0.0, -2.1, 2.1, 5.23, 150.0, _ACC),
    DHJoint(0.0, 0.290, 0.020, 0.0, -2.1, 2.1, 6.97, 80.0, _ACC),
    DHJoint(-math.pi / 2, 0.0, 0.310, 0.0, -1.74, 1.74, 8.72, 30.0, _ACC),
    DHJoint(math.pi / 2, 0.0, 0.0, 0.0, -1.74, 1.74, 10.46, 30.0, _ACC),
    DHJoint(-math.pi / 2, 0.0, 0.070, 0.0, -4.36, 4.36, 17.44, 15.0, _ACC),
)

_EST = ('ASSUMPTION (no published values): mass sized for a ~50 kg arm, CoM at the '
        'shape centre, inertia of a uniform solid filling the collision shape')
_TX60_SHAPES = (
    Shape('cylinder', (0.090, 0.18), (0.0, 0.0, -0.03)),    # shoulder turret
    Shape('box', (0.40, 0.10, 0.10), (0.145, 0.0, 0.0)),     # upper arm along x2
    Shape('cylinder', (0.060, 0.12), (0.0, 0.0, 0.02)),      # elbow housing, axis = joint 3
    Shape('cylinder', (0.045, 0.19), (0.0, 0.0, -0.145)),    # forearm along z4, ends at wrist
    Shape('cylinder', (0.040, 0.09), (0.0, 0.0, 0.0)),       # wrist, axis = joint 5
    Shape('cylinder', (0.035, 0.02), (0.0, 0.0, -0.01)),     # flange plate
)
_TX60_MASSES = (14.0, 10.0, 6.0, 4.0, 1.5, 0.5)
TX60_BODIES = tuple(Body(m, s.xyz, (s,), _EST) for m, s in zip(_TX60_MASSES, _TX60_SHAPES))
PEDESTAL_SHAPE = Shape('cylinder', (0.10, 0.25), (0.0, 0.0, 0.125))


def tx60_urdf():
    out = HEADER + '<robot name="staubli_tx60">\n'
    out += ('  <!-- Staubli TX-60 of seed 001: Table 1 read as MODIFIED DH (row i gives\n'
            '       alpha_{i-1}, a_{i-1}, d_i; read as standard DH joints 1 and 2 would\n'
            '       coincide), theta offsets 0. Position limits Table 1, velocity limits\n'
            '       Table 2, acceleration limit 69.8 rad/s^2 for every joint (Table 2).\n'
            '       Masses, CoMs, inertias, efforts, pedestal and collision shapes are\n'
            '       ASSUMPTIONS; see docs/robots.md. At q = 0 the upper arm is horizontal\n'
            '       and the forearm points straight down. -->\n')
    out += link_xml('pedestal', shapes=(PEDESTAL_SHAPE,),
                    comment='floor-mounted base housing (ASSUMPTION), fixed to the world')
    out += fixed_joint_xml('pedestal_to_base', 'pedestal', 'base_link',
                           (0.0, 0.0, PEDESTAL_HEIGHT), (0.0, 0.0, 0.0),
                           'DH frame 0 at shoulder height; joint 1 vertical')
    out += '  <link name="base_link"/>\n'
    out += arm_xml(TX60_JOINTS, TX60_BODIES)
    return out + '</robot>\n'


GENERATORS = {'humanoid_arm.urdf': humanoid_urdf, 'staubli_tx60.urdf': tx60_urdf}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='compare with the files on disk instead of writing them')
    args = parser.parse_args(argv)
    stale = []
    for name, make in GENERATORS.items():
        path = HERE / name
        text = make()
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        raise SystemExit(f'out of date: {", ".join(stale)}; run urdf/generate_urdfs.py')


if __name__ == '__main__':
    main()
