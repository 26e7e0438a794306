#!/usr/bin/env python3
"""Generate the URDFs of the two floating-base robots (seeds 002 and 003).

``python3 urdf/generate_floating_urdfs.py`` rewrites ``urdf/space_manipulator.urdf``
and ``urdf/biped.urdf`` next to this script; ``--check`` only compares and exits with
status 1 when a committed file differs. Pure Python on purpose (no pinocchio, no ROS).
Where every number comes from is in docs/robots.md; the numbers the identification
benchmarks need as "nominal" (the papers' prior) are here too (:data:`SPACE_NOMINAL`).

Both URDFs have no fixed base: the root link (``satellite``, ``torso``) is the body that
a free-flyer joint carries (pinocchio ``JointModelFreeFlyer``, MuJoCo ``freejoint``).
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------- seed 002 -----------
# Tables 1 (nominal) and 2 (true) of seed 002: mass (kg), Ixx, Iyy, Izz (kg m^2) of the
# satellite (body 0) and links 1-6. Products of inertia are zero, as in the paper.
SEED002_TABLE1 = [(613.30, 272.21, 406.32, 222.12), (9.98, 0.06, 0.20, 0.07),
                  (7.49, 0.03, 0.29, 0.67), (10.09, 0.11, 0.13, 0.04),
                  (6.69, 0.54, 0.47, 0.11), (10.07, 0.13, 0.10, 0.04),
                  (11.92, 0.11, 0.10, 0.04)]
SEED002_TABLE2 = [(593.34, 290.66, 432.25, 245.34), (8.14, 0.04, 0.40, 0.06),
                  (7.49, 0.03, 0.29, 0.67), (12.34, 0.15, 0.28, 0.02),
                  (8.39, 0.58, 0.32, 0.17), (9.23, 0.08, 0.15, 0.06),
                  (10.28, 0.17, 0.13, 0.05)]


def _physical(moments, margin=0.9):
    """Principal moments with the largest cut to ``margin`` x the sum of the other two
    when it breaks the triangle inequality (several rows of Table 2 do; MuJoCo refuses
    such bodies and no rigid body has them)."""
    m = list(moments)
    k = max(range(3), key=lambda i: m[i])
    others = sum(m) - m[k]
    if m[k] > others:
        m[k] = round(margin * others, 4)
    return tuple(m)


SPACE_TRUE = [(row[0],) + _physical(row[1:]) for row in SEED002_TABLE2]
# nominal = true x (Table 1 / Table 2) entry by entry: the paper's error pattern
SPACE_NOMINAL = [tuple(round(t * a / b, 4) for t, a, b in zip(true, n1, n2))
                 for true, n1, n2 in zip(SPACE_TRUE, SEED002_TABLE1, SEED002_TABLE2)]
# joints: (parent origin xyz, axis, link length along z); the arm stands straight up
# from the satellite's top face at q = 0 (seed 002 Fig. 3: "arm extended at zero")
SPACE_JOINTS = [((0.5, 0.0, 0.8), 'z', 0.30), ((0.0, 0.0, 0.30), 'y', 0.80),
                ((0.0, 0.0, 0.80), 'y', 0.80), ((0.0, 0.0, 0.80), 'z', 0.20),
                ((0.0, 0.0, 0.20), 'y', 0.20), ((0.0, 0.0, 0.20), 'z', 0.15)]
SATELLITE_SIZE = 1.6   # cube edge (m)

# ---------------------------------------------------------------- seed 003 -----------
# GoRoBoT-II legs (seed 003 Fig. 3 b): the text we have lost Table 1's numbers (the table
# is an image), so the lengths and masses below are ASSUMED values of a robot of that
# class (see docs/robots.md). Identified parameters: m0..m3 (torso, thigh, shank, foot)
# and lc0..lc3 (centre of mass along each link's length direction).
BIPED = {
    'hip_width': 0.16,        # between the two hip joint centres (m)
    'thigh': 0.25,            # hip pitch -> knee (m)
    'shank': 0.25,            # knee -> ankle pitch (m)
    'ankle_height': 0.07,     # ankle roll axis -> sole (m)
    'foot': (0.20, 0.12),     # sole length x width (m)
    'torso_size': (0.12, 0.20, 0.30),
    'm': (8.0, 2.5, 1.8, 1.0),          # torso, thigh, shank, foot (kg)
    'lc': (0.12, 0.11, 0.10, 0.045),    # torso up from the hip line; thigh, shank down
                                        # from hip / knee; foot down from the ankle (m)
    'small_mass': 0.3,        # hip-yaw, hip-roll and ankle-pitch links (known, kg)
    'sensor_radius': 0.01,    # the four sole contact spheres (m)
}


def _fmt(v):
    return ' '.join(f'{x:.6g}' for x in v)


def _inertial(mass, com, moments):
    ixx, iyy, izz = moments
    return (f'    <inertial>\n      <origin xyz="{_fmt(com)}" rpy="0 0 0"/>\n'
            f'      <mass value="{mass:.6g}"/>\n'
            f'      <inertia ixx="{ixx:.6g}" ixy="0" ixz="0" iyy="{iyy:.6g}" iyz="0" '
            f'izz="{izz:.6g}"/>\n    </inertial>\n')


def _box_moments(mass, size):
    x, y, z = size
    return (mass * (y * y + z * z) / 12, mass * (x * x + z * z) / 12,
            mass * (x * x + y * y) / 12)


def _joint(name, parent, child, xyz, axis, effort=200.0, velocity=2.0, limit=3.14159):
    vec = {'x': '1 0 0', 'y': '0 1 0', 'z': '0 0 1'}[axis]
    return (f'  <joint name="{name}" type="revolute">\n    <parent link="{parent}"/>\n'
            f'    <child link="{child}"/>\n    <origin xyz="{_fmt(xyz)}" rpy="0 0 0"/>\n'
            f'    <axis xyz="{vec}"/>\n    <limit lower="{-limit:.6g}" upper="{limit:.6g}" '
            f'effort="{effort:.6g}" velocity="{velocity:.6g}"/>\n  </joint>\n')


def space_manipulator():
    out = ['<?xml version="1.0"?>\n',
           '<!-- Generated by urdf/generate_floating_urdfs.py; do not edit. Seed 002: a\n'
           '     6-joint arm on a free-floating satellite (true parameters, Table 2). -->\n',
           '<robot name="space_manipulator">\n']
    m, ixx, iyy, izz = SPACE_TRUE[0]
    s = SATELLITE_SIZE
    out.append('  <link name="satellite">\n' + _inertial(m, (0, 0, 0), (ixx, iyy, izz))
               + f'    <collision>\n      <geometry><box size="{s} {s} {s}"/></geometry>\n'
               '    </collision>\n  </link>\n')
    parent = 'satellite'
    for i, ((xyz, axis, length), row) in enumerate(zip(SPACE_JOINTS, SPACE_TRUE[1:]), 1):
        m, ixx, iyy, izz = row
        out.append(f'  <link name="link_{i}">\n'
                   + _inertial(m, (0, 0, length / 2), (ixx, iyy, izz)) + '  </link>\n')
        out.append(_joint(f'joint_{i}', parent, f'link_{i}', xyz, axis))
        parent = f'link_{i}'
    out.append('</robot>\n')
    return ''.join(out)


def biped():
    b = BIPED
    m0, m1, m2, m3 = b['m']
    lc0, lc1, lc2, lc3 = b['lc']
    small = b['small_mass']
    out = ['<?xml version="1.0"?>\n',
           '<!-- Generated by urdf/generate_floating_urdfs.py; do not edit. Seed 003: a\n'
           '     12-joint biped with a torso (GoRoBoT-II legs, assumed dimensions). -->\n',
           '<robot name="biped">\n']
    out.append('  <link name="torso">\n'
               + _inertial(m0, (0, 0, lc0), _box_moments(m0, b['torso_size'])) + '  </link>\n')
    small_moments = _box_moments(small, (0.05, 0.05, 0.05))
    lx, ly = b['foot']
    h, r = b['ankle_height'], b['sensor_radius']
    for side, sign in (('l', 1.0), ('r', -1.0)):
        hip = (0.0, sign * b['hip_width'] / 2, 0.0)
        chain = [
            ('hip_yaw', 'z', hip, f'hip_yaw_{side}', small, (0, 0, 0), small_moments),
            ('hip_roll', 'x', (0, 0, 0), f'hip_roll_{side}', small, (0, 0, 0), small_moments),
            ('hip_pitch', 'y', (0, 0, 0), f'thigh_{side}', m1, (0, 0, -lc1),
             _box_moments(m1, (0.06, 0.06, b['thigh']))),
            ('knee', 'y', (0, 0, -b['thigh']), f'shank_{side}', m2, (0, 0, -lc2),
             _box_moments(m2, (0.05, 0.05, b['shank']))),
            ('ankle_pitch', 'y', (0, 0, -b['shank']), f'ankle_{side}', small, (0, 0, 0),
             small_moments),
            ('ankle_roll', 'x', (0, 0, 0), f'foot_{side}', m3, (0, 0, -lc3),
             _box_moments(m3, (lx, ly, 0.03))),
        ]
        parent = 'torso'
        for joint, axis, xyz, link, mass, com, moments in chain:
            body = f'  <link name="{link}">\n' + _inertial(mass, com, moments)
            if link.startswith('foot'):
                # the four pressure sensors at the sole's corners (seed 003 Fig. 3 c)
                for cx in (lx / 2 - r, -(lx / 2 - r)):
                    for cy in (ly / 2 - r, -(ly / 2 - r)):
                        body += (f'    <collision>\n      <origin xyz="{_fmt((cx, cy, r - h))}"'
                                 f' rpy="0 0 0"/>\n      <geometry><sphere radius="{r:.6g}"/>'
                                 '</geometry>\n    </collision>\n')
            out.append(body + '  </link>\n')
            out.append(_joint(f'{joint}_{side}', parent, link, xyz, axis, effort=150.0))
            parent = link
    out.append('</robot>\n')
    return ''.join(out)


FILES = {'space_manipulator.urdf': space_manipulator, 'biped.urdf': biped}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true', help='compare only; exit 1 on a diff')
    args = parser.parse_args(argv)
    bad = 0
    for name, make in FILES.items():
        path = HERE / name
        text = make()
        if args.check:
            if not path.is_file() or path.read_text() != text:
                print(f'{path} differs from the generator', file=sys.stderr)
                bad = 1
        else:
            path.write_text(text)
    return bad


if __name__ == '__main__':
    sys.exit(main())
