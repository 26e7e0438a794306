"""Export an identified gravity model as a URDF with consistent link parameters.

The base parameters β fix only combinations of the link mass parameters
(seed 000 eq. 8): ``β = θ_b + K θ_d``. Among all θ that give the identified β,
:func:`identified_parameters` picks the one closest to the nominal URDF that is
physically consistent:

- every moving link's mass ``m_k ≥ m_min > 0`` (and ``≤ max_mass_ratio`` times
  its nominal mass);
- its centre of mass ``c_k = h_k / m_k`` lies in a box around the link (its
  collision shapes, else its visual shapes, else its inertia's equivalent box,
  enlarged by a margin). With ``h_k = m_k c_k`` the box constraint
  ``m_k lo_k ≤ h_k ≤ m_k hi_k`` is linear.

So the problem is a convex quadratic programme in (m_k, h_k): minimise the
scaled distance to the nominal values subject to linear equalities and
inequalities. An elastic linear programme first checks feasibility; when no
consistent set exists it names the link and constraint that block
(:class:`InconsistentParametersError`).

Only the links that are the child links of the model's joints are changed.
Everything the model merges into a moving body at nominal values (links on
fixed joints such as ``flange``, subtrees of locked joints) keeps its URDF
values, so the moving link carries the identified total minus their share.
The inertia about the centre of mass is kept as in the URDF: it stays a valid
inertia for any mass and any centre of mass, and gravity does not see it.

:func:`identified_urdf` writes the result by editing only the ``<mass>`` and
``<origin xyz>`` of those links' ``<inertial>`` elements in the URDF text;
every other byte of the file is kept.
"""

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import URDFError
from arm_dyn_id.model.robot import RobotModel

# Relative tolerance on constraint satisfaction of the final solution.
_FEASIBILITY_TOL = 1e-7


class InconsistentParametersError(ValueError):
    """No physically consistent link parameters reproduce the base parameters;
    the message names the link and the constraint that blocks."""


@dataclass(frozen=True)
class LinkBox:
    """Axis-aligned box (m, in the link frame) that must hold a link's CoM."""

    link: str
    lower: np.ndarray
    upper: np.ndarray
    source: str          # 'collision', 'visual', 'inertia' or 'joints'


# ---------------------------------------------------------------------------
# URDF reading
# ---------------------------------------------------------------------------
def _floats(text, count, default):
    if text is None:
        return np.array(default, dtype=float)
    values = np.array([float(v) for v in text.split()])
    if values.shape != (count,):
        raise URDFError(f'expected {count} numbers, got {text!r}')
    return values


def _rpy_matrix(rpy):
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _origin(element):
    origin = element.find('origin') if element is not None else None
    if origin is None:
        return np.zeros(3), np.zeros(3)
    return (_floats(origin.get('xyz'), 3, (0, 0, 0)), _floats(origin.get('rpy'), 3, (0, 0, 0)))


def _shape_corners(geometry):
    """Corners of the local bounding box of a URDF shape, (8, 3), or None (mesh)."""
    box = geometry.find('box')
    cyl = geometry.find('cylinder')
    sph = geometry.find('sphere')
    if box is not None:
        half = 0.5 * _floats(box.get('size'), 3, None)
    elif cyl is not None:
        r, length = float(cyl.get('radius')), float(cyl.get('length'))
        half = np.array([r, r, 0.5 * length])
    elif sph is not None:
        half = np.full(3, float(sph.get('radius')))
    else:
        return None
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    return signs * half


def _shapes_box(link, tag):
    points = []
    for element in link.findall(tag):
        geometry = element.find('geometry')
        corners = _shape_corners(geometry) if geometry is not None else None
        if corners is None:
            continue
        xyz, rpy = _origin(element)
        points.append(corners @ _rpy_matrix(rpy).T + xyz)
    if not points:
        return None
    points = np.vstack(points)
    return points.min(axis=0), points.max(axis=0)


def _inertia_box(link):
    """Box of the uniform cuboid with the link's inertia, centred on its CoM."""
    inertial = link.find('inertial')
    if inertial is None or inertial.find('inertia') is None:
        return None
    mass = float(inertial.find('mass').get('value'))
    el = inertial.find('inertia')

    def get(key):
        return float(el.get(key, 0))
    inertia = np.array([[get('ixx'), get('ixy'), get('ixz')],
                        [get('ixy'), get('iyy'), get('iyz')],
                        [get('ixz'), get('iyz'), get('izz')]])
    if mass <= 0:
        return None
    xyz, rpy = _origin(inertial)
    rot = _rpy_matrix(rpy)
    principal, axes = np.linalg.eigh(inertia)
    total = principal.sum()
    # cuboid: I_x = m (b² + c²) / 12, ...  ->  a² = 6 (I_y + I_z - I_x) / m
    sides = np.sqrt(np.clip(6.0 * (total - 2.0 * principal) / mass, 0.0, None))
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    corners = (signs * 0.5 * sides) @ (rot @ axes).T + xyz
    return corners.min(axis=0), corners.max(axis=0)


def _link_inertial(link):
    """(mass, com (3,)) of a link's ``<inertial>``, zeros when absent."""
    inertial = link.find('inertial')
    if inertial is None:
        return 0.0, np.zeros(3)
    mass_el = inertial.find('mass')
    mass = float(mass_el.get('value')) if mass_el is not None else 0.0
    return mass, _origin(inertial)[0]


def _parse(nominal_urdf):
    path = Path(nominal_urdf)
    if not path.is_file():
        raise URDFError(f'URDF file {path} does not exist')
    text = path.read_text()
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise URDFError(f'URDF file {path} is not valid XML: {exc}') from exc
    links = {link.get('name'): link for link in root.findall('link')}
    joints = {joint.get('name'): joint for joint in root.findall('joint')}
    return path, text, links, joints


def link_boxes(nominal_urdf, links=None, margin=0.1, min_margin=0.005):
    """Boxes that must contain each link's centre of mass.

    Parameters
    ----------
    nominal_urdf : path-like
    links : sequence of str, optional
        Default: every link of the URDF.
    margin : float
        Relative enlargement of each side (0.1 = 10 % of the box size per side).
    min_margin : float
        Minimum enlargement per side (m).

    Returns
    -------
    dict of str -> LinkBox
        The box always contains the link's nominal centre of mass.
    """
    path, _, xml_links, xml_joints = _parse(nominal_urdf)
    out = {}
    for name in (links if links is not None else xml_links):
        link = xml_links[name]
        found, source = _shapes_box(link, 'collision'), 'collision'
        if found is None:
            found, source = _shapes_box(link, 'visual'), 'visual'
        if found is None:
            found, source = _inertia_box(link), 'inertia'
        if found is None:
            # the link origin and the origins of its child joints
            pts = [np.zeros(3)] + [_origin(j)[0] for j in xml_joints.values()
                                   if j.find('parent') is not None
                                   and j.find('parent').get('link') == name]
            pts = np.array(pts)
            found, source = (pts.min(axis=0), pts.max(axis=0)), 'joints'
        lo, hi = found
        _, com = _link_inertial(link)
        lo, hi = np.minimum(lo, com), np.maximum(hi, com)
        pad = np.maximum(margin * (hi - lo), min_margin)
        out[name] = LinkBox(name, lo - pad, hi + pad, source)
    return out


# ---------------------------------------------------------------------------
# the convex problem
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExportedParameters:
    """Consistent link parameters reproducing identified base parameters.

    Attributes
    ----------
    theta : ndarray, (4·nb,)
        Gravity parameters (m, m·c) of every model body, as
        :meth:`RobotModel.parameters` orders them (includes merged fixed links).
    links : tuple of str, (nb,)
        The URDF link edited for each body.
    masses : ndarray, (nb,)
        Mass of each edited link (kg).
    coms : ndarray, (nb, 3)
        Centre of mass of each edited link in its frame (m).
    boxes : dict of str -> LinkBox
    """

    theta: np.ndarray
    links: tuple
    masses: np.ndarray
    coms: np.ndarray
    boxes: dict


def _setup(model, nominal_urdf, min_mass_ratio, min_mass, max_mass_ratio, margin):
    path, _, xml_links, xml_joints = _parse(nominal_urdf)
    g = model.robot.gravity_vector
    robot = RobotModel.from_urdf(path, joints=model.joint_names,
                                 gravity=float(np.linalg.norm(g)) or 9.81,
                                 gravity_direction=g if np.linalg.norm(g) > 0 else (0, 0, -1))
    if 4 * robot.n_bodies != len(model.base.parameter_names):
        raise URDFError(f'URDF {path} has {robot.n_bodies} moving bodies, the model was fitted '
                        f'with {len(model.base.parameter_names) // 4}: not the same arm')
    links = []
    for body in robot.body_names:
        joint = xml_joints.get(body)
        if joint is None or joint.find('child') is None:
            raise URDFError(f'joint {body!r} of the model is not a joint of {path}')
        links.append(joint.find('child').get('link'))
    nominal_body = robot.parameters('gravity').reshape(-1, 4)
    nominal_link = np.zeros_like(nominal_body)
    for k, name in enumerate(links):
        mass, com = _link_inertial(xml_links[name])
        nominal_link[k] = np.concatenate([[mass], mass * com])
    # what the model merges into each body at nominal values (fixed children, ...)
    fixed = nominal_body - nominal_link
    boxes = link_boxes(path, links, margin=margin)
    scale_m = np.where(nominal_link[:, 0] > 0, nominal_link[:, 0],
                       max(np.mean(nominal_link[:, 0]), 1e-3))
    lower_m = np.maximum(min_mass_ratio * nominal_link[:, 0], min_mass)
    upper_m = (np.full(len(links), np.inf) if max_mass_ratio is None
               else np.maximum(max_mass_ratio * scale_m, lower_m))
    return path, robot, links, nominal_link, fixed, boxes, scale_m, lower_m, upper_m


def _inequalities(boxes, links, lower_m, upper_m):
    """G x ≤ h over x = per link (m, hx, hy, hz), with a label per row."""
    nb = len(links)
    rows, rhs, labels = [], [], []
    for k, name in enumerate(links):
        def row(entries):
            r = np.zeros(4 * nb)
            for idx, val in entries:
                r[4 * k + idx] = val
            return r
        rows.append(row([(0, -1.0)]))
        rhs.append(-lower_m[k])
        labels.append((k, 'min_mass', None))
        if np.isfinite(upper_m[k]):
            rows.append(row([(0, 1.0)]))
            rhs.append(upper_m[k])
            labels.append((k, 'max_mass', None))
        box = boxes[name]
        for axis in range(3):
            # h ≤ m·hi  and  m·lo ≤ h
            rows.append(row([(1 + axis, 1.0), (0, -box.upper[axis])]))
            rhs.append(0.0)
            labels.append((k, 'com_upper', axis))
            rows.append(row([(1 + axis, -1.0), (0, box.lower[axis])]))
            rhs.append(0.0)
            labels.append((k, 'com_lower', axis))
    return np.array(rows), np.array(rhs), labels


def _explain(model, A, rhs_eq, G, h, labels, links, boxes, lower_m, upper_m, scale_m, length):
    """Elastic LP: the smallest scaled violations that make the problem feasible."""
    n_x, n_s = G.shape[1], G.shape[0]
    row_scale = np.array([scale_m[k] * (1.0 if kind.endswith('mass') else length[k])
                          for k, kind, _ in labels])
    # variables [x, s], minimise Σ s (scaled), G x - s·scale ≤ h, A x = β
    c = np.concatenate([np.zeros(n_x), np.ones(n_s)])
    A_ub = np.hstack([G, -np.diag(row_scale)])
    A_eq = np.hstack([A, np.zeros((A.shape[0], n_s))])
    import scipy.optimize   # here: the gravity server starts without it (0.45 s)
    res = scipy.optimize.linprog(c, A_ub=A_ub, b_ub=h, A_eq=A_eq, b_eq=rhs_eq,
                                 bounds=[(None, None)] * n_x + [(0, None)] * n_s,
                                 method='highs')
    if res.status != 0:
        return [f'the base parameter equations themselves have no solution ({res.message})']
    x, s = res.x[:n_x], res.x[n_x:]
    reasons = []
    axes = 'xyz'
    for i in np.argsort(-s):
        if s[i] <= 1e-9:
            break
        k, kind, axis = labels[i]
        name = links[k]
        m = x[4 * k]
        if kind == 'min_mass':
            reasons.append(f'{name} would need a mass of {m:.4g} kg, below the minimum '
                           f'{lower_m[k]:.4g} kg' + (' (a negative mass)' if m < 0 else ''))
        elif kind == 'max_mass':
            reasons.append(f'{name} would need a mass of {m:.4g} kg, above the maximum '
                           f'{upper_m[k]:.4g} kg')
        else:
            box = boxes[name]
            com = x[4 * k + 1 + axis] / m if m > 0 else np.nan
            reasons.append(f'the centre of mass of {name} would lie outside its box along '
                           f'{axes[axis]} ({com:.4g} m, box [{box.lower[axis]:.4g}, '
                           f'{box.upper[axis]:.4g}] m from its {box.source} shapes)')
    return reasons or ['the solver found no consistent set although the elastic check did not '
                       'locate a violated constraint']


def identified_parameters(model, nominal_urdf, min_mass_ratio=0.01, min_mass=1e-4,
                          max_mass_ratio=10.0, margin=0.1, details=False):
    """Physically consistent link parameters closest to the URDF reproducing β.

    Parameters
    ----------
    model : GravityModel
        Identified model (its ``base`` and ``beta``; a set payload is not exported).
    nominal_urdf : path-like
        The URDF the model was fitted with.
    min_mass_ratio, min_mass : float
        Each edited link's mass is at least ``max(min_mass_ratio·m_nominal, min_mass)`` kg.
    max_mass_ratio : float or None
        And at most this multiple of its nominal mass (None: unbounded).
    margin : float
        Relative enlargement of the CoM boxes (see :func:`link_boxes`).
    details : bool
        Return an :class:`ExportedParameters` instead of θ alone.

    Returns
    -------
    theta : ndarray, (4·nb,)
        Gravity parameters (m, m·cx, m·cy, m·cz per body, kg and kg·m) with
        ``model.base.beta(theta) == model.beta``.

    Raises
    ------
    InconsistentParametersError
        If no such set exists; the message names the blocking links and constraints.
    """
    import scipy.optimize   # here: the gravity server starts without it (0.45 s)
    (path, robot, links, nominal, fixed, boxes, scale_m, lower_m,
     upper_m) = _setup(model, nominal_urdf, min_mass_ratio, min_mass, max_mass_ratio, margin)
    base = model.base
    nb = len(links)
    p = 4 * nb
    # base.beta is linear: beta(θ) = B θ;  θ = x + fixed
    B = np.zeros((base.count, p))
    B[np.arange(base.count), base.independent] = 1.0
    B[:, base.dependent] += base.K
    rhs_eq = np.asarray(model.beta, dtype=float) - B @ fixed.ravel()
    G, h, labels = _inequalities(boxes, links, lower_m, upper_m)
    length = np.array([max(np.max(boxes[n].upper - boxes[n].lower), 1e-3) for n in links])

    # scaled variables: z = x / s, s = (m scale, m scale · box size, ...)
    s = (scale_m[:, None] * np.column_stack([np.ones(nb), length, length, length])).ravel()
    x0 = nominal.ravel()
    A_s, G_s = B * s, G * s
    # feasibility and diagnosis first: the QP solver's failure says little
    reasons = None
    lp = scipy.optimize.linprog(np.zeros(p), A_ub=G_s, b_ub=h, A_eq=A_s, b_eq=rhs_eq,
                                bounds=[(None, None)] * p, method='highs')
    if lp.status == 2:
        reasons = _explain(model, B, rhs_eq, G, h, labels, links, boxes, lower_m, upper_m,
                           scale_m, length)
    elif lp.status != 0:
        reasons = [f'the feasibility check failed: {lp.message}']
    if reasons:
        raise InconsistentParametersError(
            f'no physically consistent link parameters of {path} reproduce the identified '
            'gravity base parameters: ' + '; '.join(reasons))

    z_nom = x0 / s
    res = scipy.optimize.minimize(
        lambda z: 0.5 * float(np.sum((z - z_nom) ** 2)), lp.x,
        jac=lambda z: z - z_nom, method='SLSQP',
        constraints=[{'type': 'eq', 'fun': lambda z: A_s @ z - rhs_eq, 'jac': lambda z: A_s},
                     {'type': 'ineq', 'fun': lambda z: h - G_s @ z, 'jac': lambda z: -G_s}],
        options={'maxiter': 500, 'ftol': 1e-14})
    z = res.x if res.success else lp.x
    # the equalities hold to solver precision; make them exact (minimum-norm step)
    z = z + np.linalg.lstsq(A_s, rhs_eq - A_s @ z, rcond=None)[0]
    slack = G_s @ z - h
    tol = _FEASIBILITY_TOL * np.maximum(1.0, np.abs(G_s) @ np.abs(z))
    if np.any(slack > tol):
        z = lp.x + np.linalg.lstsq(A_s, rhs_eq - A_s @ lp.x, rcond=None)[0]
    x = (z * s).reshape(nb, 4)
    theta = (x + fixed).ravel()
    if not details:
        return theta
    masses = x[:, 0]
    coms = x[:, 1:] / masses[:, None]
    return ExportedParameters(theta=theta, links=tuple(links), masses=masses, coms=coms,
                              boxes=boxes)


# ---------------------------------------------------------------------------
# URDF writing
# ---------------------------------------------------------------------------
_COMMENT = re.compile(r'<!--.*?-->', re.S)


def _outside_comments(text, pattern, start=0, end=None):
    """First match of ``pattern`` in text[start:end] that is not inside a comment."""
    end = len(text) if end is None else end
    comments = [(m.start(), m.end()) for m in _COMMENT.finditer(text, start, end)]
    for match in pattern.finditer(text, start, end):
        if not any(a <= match.start() < b for a, b in comments):
            return match
    return None


def _num(value):
    return repr(float(value)) if value != 0 else '0'


def _edit_link(text, name, mass, com):
    """Text of the URDF with one link's inertial mass and CoM replaced."""
    link_open = re.compile(r'<link\s[^>]*name\s*=\s*["\']' + re.escape(name) + r'["\'][^>]*?(/?)>')
    m = _outside_comments(text, link_open)
    if m is None:
        raise URDFError(f'link {name!r} not found in the URDF text')
    xyz = ' '.join(_num(v) for v in com)
    if m.group(1) == '/':       # <link name="x"/>: give it a body
        indent = re.search(r'[ \t]*$', text[:m.start()]).group(0)
        block = (f'<link name="{name}">\n{indent}  <inertial>\n'
                 f'{indent}    <origin xyz="{xyz}" rpy="0 0 0"/>\n'
                 f'{indent}    <mass value="{_num(mass)}"/>\n'
                 f'{indent}    <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>\n'
                 f'{indent}  </inertial>\n{indent}</link>')
        return text[:m.start()] + block + text[m.end():]
    close = _outside_comments(text, re.compile(r'</link\s*>'), m.end())
    body_start, body_end = m.end(), close.start()
    inertial = _outside_comments(text, re.compile(r'<inertial\b[^>]*>(.*?)</inertial\s*>', re.S),
                                 body_start, body_end)
    if inertial is None:
        indent = '    '
        block = (f'\n{indent}<inertial>\n{indent}  <origin xyz="{xyz}" rpy="0 0 0"/>\n'
                 f'{indent}  <mass value="{_num(mass)}"/>\n'
                 f'{indent}  <inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>\n'
                 f'{indent}</inertial>')
        return text[:body_start] + block + text[body_start:]
    a, b = inertial.span(1)
    inner = text[a:b]
    mass_re = re.compile(r'(<mass\b[^>]*\bvalue\s*=\s*["\'])([^"\']*)(["\'])')
    if not mass_re.search(inner):
        raise URDFError(f'link {name!r} has an <inertial> without <mass value=...>')
    inner = mass_re.sub(lambda mm: mm.group(1) + _num(mass) + mm.group(3), inner, count=1)
    origin_re = re.compile(r'<origin\b[^>]*?/?>')
    origin = origin_re.search(inner)
    if origin is None:
        inner = f'\n      <origin xyz="{xyz}" rpy="0 0 0"/>' + inner
    else:
        tag = origin.group(0)
        xyz_re = re.compile(r'(\bxyz\s*=\s*["\'])([^"\']*)(["\'])')
        new_tag = (xyz_re.sub(lambda mm: mm.group(1) + xyz + mm.group(3), tag, count=1)
                   if xyz_re.search(tag) else tag.replace('<origin', f'<origin xyz="{xyz}"', 1))
        inner = inner[:origin.start()] + new_tag + inner[origin.end():]
    return text[:a] + inner + text[b:]


def identified_urdf(model, nominal_urdf_path, **options):
    """URDF text with the identified, physically consistent link parameters.

    Gravity model: only the mass and the ``<inertial><origin xyz>`` of the moving
    links change; their inertia about the CoM (and the inertial frame's rpy) are
    the URDF's. Full-dynamics model: whole inertias (:func:`identified_urdf_full`).

    Parameters
    ----------
    model : GravityModel or DynamicsModel
    nominal_urdf_path : path-like
    **options
        Passed to :func:`identified_parameters` (gravity models).

    Returns
    -------
    str

    Raises
    ------
    InconsistentParametersError
    """
    if getattr(model, 'dynamics', 'gravity') == 'full':
        return identified_urdf_full(model, nominal_urdf_path)
    found = identified_parameters(model, nominal_urdf_path, details=True, **options)
    text = Path(nominal_urdf_path).read_text()
    for name, mass, com in zip(found.links, found.masses, found.coms):
        text = _edit_link(text, name, mass, com)
    return text


# ---------------------------------------------------------------------------
# full inertias (the full-dynamics model)
# ---------------------------------------------------------------------------
def _link_inertia_params(link):
    """10 inertial parameters (pinocchio order, about the link frame origin) of a
    URDF link's ``<inertial>``, zeros when absent."""
    import pinocchio as pin
    inertial = link.find('inertial')
    if inertial is None:
        return np.zeros(10)
    mass_el = inertial.find('mass')
    mass = float(mass_el.get('value')) if mass_el is not None else 0.0
    xyz, rpy = _origin(inertial)
    el = inertial.find('inertia')

    def get(key):
        return float(el.get(key, 0)) if el is not None else 0.0
    inertia = np.array([[get('ixx'), get('ixy'), get('ixz')],
                        [get('ixy'), get('iyy'), get('iyz')],
                        [get('ixz'), get('iyz'), get('izz')]])
    rot = _rpy_matrix(rpy)
    body = pin.Inertia(mass, xyz, rot @ inertia @ rot.T)
    return np.asarray(body.toDynamicParameters(), dtype=float)


def link_shares(robot, nominal_urdf):
    """The URDF link each model body edits, and what the model merges into it.

    Parameters
    ----------
    robot : RobotModel
        Built from ``nominal_urdf``.
    nominal_urdf : path-like

    Returns
    -------
    links : tuple of str, (nb,)
        Child link of each body's joint.
    own : ndarray, (nb, 10)
        That link's own inertial parameters (joint frame).
    fixed : ndarray, (nb, 10)
        The rest of the body at nominal values (fixed children, locked subtrees).
    """
    path, _, xml_links, xml_joints = _parse(nominal_urdf)
    links, own = [], []
    for body in robot.body_names:
        joint = xml_joints.get(body)
        if joint is None or joint.find('child') is None:
            raise URDFError(f'joint {body!r} of the model is not a joint of {path}')
        name = joint.find('child').get('link')
        links.append(name)
        own.append(_link_inertia_params(xml_links[name]))
    own = np.array(own)
    fixed = robot.parameters('inertial').reshape(-1, 10) - own
    return tuple(links), own, fixed


def _num_attr(value):
    return repr(float(value))


def _edit_link_full(text, name, mass, com, inertia):
    """URDF text with one link's whole ``<inertial>`` replaced (rpy 0, inertia at the CoM)."""
    link_open = re.compile(r'<link\s[^>]*name\s*=\s*["\']' + re.escape(name) + r'["\'][^>]*?(/?)>')
    m = _outside_comments(text, link_open)
    if m is None:
        raise URDFError(f'link {name!r} not found in the URDF text')
    xyz = ' '.join(_num_attr(v) for v in com)
    keys = (('ixx', 0, 0), ('ixy', 0, 1), ('ixz', 0, 2), ('iyy', 1, 1), ('iyz', 1, 2),
            ('izz', 2, 2))
    attrs = ' '.join(f'{k}="{_num_attr(inertia[i, j])}"' for k, i, j in keys)
    indent = re.search(r'[ \t]*$', text[:m.start()]).group(0)
    block = (f'<inertial>\n{indent}    <origin xyz="{xyz}" rpy="0 0 0"/>\n'
             f'{indent}    <mass value="{_num_attr(mass)}"/>\n'
             f'{indent}    <inertia {attrs}/>\n{indent}  </inertial>')
    if m.group(1) == '/':
        new = f'<link name="{name}">\n{indent}  {block}\n{indent}</link>'
        return text[:m.start()] + new + text[m.end():]
    close = _outside_comments(text, re.compile(r'</link\s*>'), m.end())
    inertial = _outside_comments(text, re.compile(r'<inertial\b[^>]*>.*?</inertial\s*>', re.S),
                                 m.end(), close.start())
    if inertial is None:
        return text[:m.end()] + f'\n{indent}  ' + block + text[m.end():]
    return text[:inertial.start()] + block + text[inertial.end():]


def full_identified_parameters(model, nominal_urdf=None, solver='CLARABEL', rotors=False):
    """Consistent standard parameters θ (10 per body) of a full-dynamics model.

    The model's own ``standard`` θ when it has one (the consistent fit's);
    otherwise the θ closest to the URDF with ``B θ = β`` exactly and every
    link's pseudo-inertia PSD (an SDP; :class:`InconsistentParametersError`
    when none exists). With ``rotors``: ``(θ, Ia)``, Ia the rotor inertias of the same
    solution (kg·m², one per joint; empty for a model without them).
    """
    from arm_dyn_id.model.dynamics import base_matrix
    nb = model.robot.n_bodies
    if model.standard is not None and model.consistent:
        value = np.asarray(model.standard, dtype=float)
        return (value[:10 * nb], value[10 * nb:]) if rotors else value[:10 * nb]
    import cvxpy as cp
    urdf = nominal_urdf or model.robot.source
    robot = RobotModel.from_urdf(urdf, joints=model.joint_names)
    _, _, fixed = link_shares(robot, urdf)
    B = base_matrix(model.base)
    p = B.shape[1]
    nominal = robot.parameters('inertial')
    if p > 10 * nb:
        nominal = np.concatenate([nominal, np.zeros(p - 10 * nb)])
    scale = np.maximum(np.abs(nominal), 1e-3)
    theta = cp.Variable(p)
    cons = [B @ theta == model.beta]
    for k in range(nb):
        th = theta[10 * k:10 * k + 10] - fixed[k]
        P = cp.Variable((4, 4), PSD=True)
        half = 0.5 * (th[4] + th[6] + th[9])
        cons += [P[0, 0] == half - th[4], P[1, 1] == half - th[6], P[2, 2] == half - th[9],
                 P[0, 1] == -th[5], P[0, 2] == -th[7], P[1, 2] == -th[8],
                 P[0, 3] == th[1], P[1, 3] == th[2], P[2, 3] == th[3], P[3, 3] == th[0]]
    if p > 10 * nb:
        cons.append(theta[10 * nb:] >= 0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(1 / scale, theta - nominal))),
                      cons)
    import warnings
    with warnings.catch_warnings():
        # cvxpy warns "Solution may be inaccurate" on optimal_inaccurate: checked below
        warnings.simplefilter('ignore', UserWarning)
        prob.solve(solver=getattr(cp, solver))
    if theta.value is None or prob.status not in ('optimal', 'optimal_inaccurate'):
        raise InconsistentParametersError(
            f'no physically consistent link parameters of {urdf} reproduce the identified '
            f'base parameters (the SDP returned {prob.status}): fit with the consistent '
            'estimator')
    value = np.asarray(theta.value)
    miss = np.max(np.abs(B @ value - model.beta)) / max(np.max(np.abs(model.beta)), 1e-12)
    if miss > 1e-6:
        # an inaccurate solution is kept only when the URDF still reproduces the model
        raise InconsistentParametersError(
            f'the link parameters of {urdf} found for the identified base parameters miss '
            f'them by {miss:.1e} (relative; the SDP returned {prob.status}): fit with the '
            'consistent estimator')
    return (value[:10 * nb], value[10 * nb:]) if rotors else value[:10 * nb]


def identified_urdf_full(model, nominal_urdf_path):
    """URDF text with full identified inertias of every moving link.

    Each moving link gets mass, CoM and the inertia tensor about its CoM
    (``rpy 0``) from the consistent θ minus what the model merges into the body
    at nominal values, so pinocchio's ``rnea`` on the result equals the model's
    rigid-body torques, rotor inertias excepted: URDF cannot hold them, so a model with
    them says their values in a comment after ``<robot>`` (where the data cannot tell a
    rotor inertia from its link's inertia about the same axis, the split closest to the
    URDF), for a simulator's joint ``armature`` or pinocchio's ``model.armature``.
    """
    import pinocchio as pin
    theta, rotor = full_identified_parameters(model, nominal_urdf_path, rotors=True)
    robot = RobotModel.from_urdf(nominal_urdf_path, joints=model.joint_names)
    links, _, fixed = link_shares(robot, nominal_urdf_path)
    own = theta.reshape(-1, 10) - fixed
    text = Path(nominal_urdf_path).read_text()
    for name, params in zip(links, own):
        if params[0] <= 0:
            raise InconsistentParametersError(f'link {name} would get a mass of '
                                              f'{params[0]:.4g} kg')
        body = pin.Inertia.FromDynamicParameters(params)
        text = _edit_link_full(text, name, body.mass, np.asarray(body.lever),
                               np.asarray(body.inertia))
    if len(rotor):
        start = _outside_comments(text, re.compile(r'<robot\b[^>]*>'))
        values = ', '.join(f'{j} {_num(v)}' for j, v in zip(model.joint_names, rotor))
        note = (f'\n  <!-- arm_dyn_id: the identified rotor inertias (armature, kg*m^2), '
                f'which URDF cannot hold, are not in this file; the model\'s torques need '
                f'them (a simulator\'s joint armature, pinocchio\'s model.armature): '
                f'{values} -->')
        text = text[:start.end()] + note + text[start.end():]
    return text


__all__ = ['InconsistentParametersError', 'LinkBox', 'ExportedParameters', 'link_boxes',
           'identified_parameters', 'identified_urdf', 'link_shares',
           'full_identified_parameters', 'identified_urdf_full']
