"""The layout rules of ``arm_dyn_id/`` (issue 13, docs/architecture.md), read with ``ast``.

Nothing is imported: every ``.py`` file under ``arm_dyn_id/`` (``nodes/`` through its
symlink) is parsed, and its imports, relative ones included, are resolved to module
names. Three rules, each test listing every violation at once:

* a wing imports only itself and wings of strictly lower rank (``RANKS``); wings of
  equal rank do not import each other;
* nothing outside ``arm_dyn_id/nodes`` imports rclpy or a ROS message package, not
  even inside a function;
* no circle of module-level imports (an import inside a function or under
  ``if TYPE_CHECKING:`` runs later or never, so it closes no circle).

``test_the_checker_finds_each_kind_of_violation`` runs the same checker on a small
tree with one violation of each kind, so these tests cannot pass by finding nothing.
"""

import ast
from dataclasses import dataclass
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO / 'arm_dyn_id'

# Rank of each wing: a wing may import its own modules and wings of a lower rank.
# The foundation modules (arm_dyn_id/<name>.py) count as one wing of rank 0.
# __main__ is the entry point of `python -m arm_dyn_id`; it must import the CLI, so it
# ranks above it (nothing imports __main__).
FOUNDATION = 'foundation'
FOUNDATION_MODULES = ('__init__', 'config', 'errors', 'paths', 'optimisers', 'process_exit',
                      'blas_threads')
RANKS = {
    FOUNDATION: 0,
    'model': 1,
    'data': 2, 'excitation': 2, 'validation': 2,
    'identification': 3,
    'service': 4, 'sim': 4,
    'nodes': 5,
    'cli': 6,
    '__main__': 7,
}
ROS_WING = 'nodes'
ROS_PACKAGES = frozenset({
    'rclpy', 'rcl_interfaces', 'sensor_msgs', 'std_msgs', 'std_srvs', 'trajectory_msgs',
    'diagnostic_msgs', 'rosgraph_msgs', 'builtin_interfaces', 'geometry_msgs',
    'launch_ros', 'rosidl_runtime_py', 'rclpy_message_converter',
})
ROS_SUFFIXES = ('_msgs', '_srvs', '_interfaces')


@dataclass(frozen=True)
class Import:
    """One import statement's target, as found in a source file."""

    importer: str       # dotted module name of the file
    path: Path          # the file
    line: int
    target: str         # absolute dotted name imported
    module_level: bool  # runs when the importer is imported

    def where(self, root):
        return f'{self.path.relative_to(root.parent)}:{self.line}'


def find_modules(root):
    """``{dotted name: path}`` of every module under package directory ``root``."""
    modules = {}
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__' and not d.startswith('.'))
        parts = Path(folder).relative_to(root).parts
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            stem = name[:-3]
            dotted = (root.name,) + parts + (() if stem == '__init__' else (stem,))
            modules['.'.join(dotted)] = Path(folder) / name
    return modules


def _is_type_checking(test):
    return ((isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING')
            or (isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'))


def _walk(node, module_level=True):
    """Yield ``(node, module_level)`` for every node below ``node``."""
    for child in ast.iter_child_nodes(node):
        level = module_level
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            level = False
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            yield child.test, module_level
            for sub in child.body:
                yield sub, False
                yield from _walk(sub, False)
            for sub in child.orelse:
                yield sub, module_level
                yield from _walk(sub, module_level)
            continue
        yield child, level
        yield from _walk(child, level)


def _resolve_from(node, importer, is_package):
    """Absolute module name of ``from <module> import ...`` (relative levels resolved)."""
    if node.level == 0:
        return node.module
    base = importer.split('.')
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return '.'.join(base + ([node.module] if node.module else []))


def _dynamic_target(call):
    """The module named by ``importlib.import_module('x')`` / ``__import__('x')``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
    if name in ('import_module', '__import__') and call.args:
        arg = call.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def imports_of(path, importer, modules):
    """Every import in ``path`` (module ``importer``) as :class:`Import` objects."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == '__init__.py'
    found = []
    for node, module_level in _walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(node, importer, is_package)
            for alias in node.names:
                # `from pkg import sub` imports the module pkg.sub when there is one
                sub = f'{base}.{alias.name}'
                targets.append(sub if sub in modules else base)
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            targets = [target] if target else []
        for target in dict.fromkeys(targets):
            found.append(Import(importer, path, node.lineno, target, module_level))
    return found


def wing_of(module, package):
    """The wing of an ``arm_dyn_id`` module name, or None for another package."""
    parts = module.split('.')
    if parts[0] != package:
        return None
    if len(parts) == 1 or parts[1] in FOUNDATION_MODULES:
        return FOUNDATION
    return parts[1]


def _internal(target, modules):
    """The longest known module that ``target`` names or lies in (None if outside)."""
    parts = target.split('.')
    for n in range(len(parts), 0, -1):
        name = '.'.join(parts[:n])
        if name in modules:
            return name
    return None


class Architecture:
    """The modules and imports of one package directory, and the rules checked on them."""

    def __init__(self, root):
        self.root = Path(root)
        self.package = self.root.name
        self.modules = find_modules(self.root)
        self.imports = []
        self.unreadable = []
        for name, path in self.modules.items():
            try:
                self.imports += imports_of(path, name, self.modules)
            except SyntaxError as exc:
                self.unreadable.append(f'{path.relative_to(self.root.parent)}: {exc}')

    def layer_violations(self):
        """A wing importing a wing of the same or a higher rank, or an unranked wing."""
        out = list(self.unreadable)
        for name in self.modules:
            wing = wing_of(name, self.package)
            if wing not in RANKS:
                out.append(f'{self.modules[name].relative_to(self.root.parent)}: wing '
                           f'{wing!r} has no rank in test_architecture.RANKS')
        for imp in self.imports:
            src, dst = wing_of(imp.importer, self.package), wing_of(imp.target, self.package)
            if dst is None or src == dst or src not in RANKS:
                continue
            if dst not in RANKS:
                out.append(f'{imp.where(self.root)}: {imp.importer} imports {imp.target}, '
                           f'which is in no known wing')
            elif RANKS[dst] >= RANKS[src]:
                out.append(f'{imp.where(self.root)}: {imp.importer} ({src}, rank '
                           f'{RANKS[src]}) imports {imp.target} ({dst}, rank {RANKS[dst]})')
        return out

    def ros_violations(self):
        """An import of rclpy or a ROS message package outside the nodes wing."""
        out = []
        for imp in self.imports:
            top = imp.target.split('.')[0]
            if top not in ROS_PACKAGES and not top.endswith(ROS_SUFFIXES):
                continue
            if wing_of(imp.importer, self.package) != ROS_WING:
                out.append(f'{imp.where(self.root)}: {imp.importer} imports {imp.target}')
        return out

    def cycles(self):
        """Circles of module-level imports, each with the imports that close it."""
        edges = {}
        for imp in self.imports:
            dst = _internal(imp.target, self.modules) if imp.module_level else None
            if dst is not None and dst != imp.importer:
                edges.setdefault(imp.importer, {}).setdefault(dst, imp)
        out = []
        for component in _strongly_connected(self.modules, edges):
            if len(component) < 2:
                continue
            inside = set(component)
            links = [imp for src in sorted(component)
                     for dst, imp in sorted(edges.get(src, {}).items()) if dst in inside]
            out.append(f'circle of imports between {", ".join(sorted(component))}: '
                       + '; '.join(f'{imp.where(self.root)} {imp.importer} -> '
                                   f'{_internal(imp.target, self.modules)}' for imp in links))
        return out


def _strongly_connected(nodes, edges):
    """Tarjan's strongly connected components of the graph ``edges`` (iterative)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    result.append(component)
    return result


@pytest.fixture(scope='module')
def architecture():
    arch = Architecture(PACKAGE_DIR)
    # the nodes wing is reached through the symlink arm_dyn_id/nodes -> ../nodes
    assert 'arm_dyn_id.nodes' in arch.modules and 'arm_dyn_id.model' in arch.modules
    return arch


def _report(what, violations):
    return f'{len(violations)} {what}:\n  ' + '\n  '.join(violations)


def test_lower_wings_never_import_higher_ones(architecture):
    violations = architecture.layer_violations()
    assert not violations, _report('imports against the wing order', violations)


def test_nothing_outside_nodes_imports_ros(architecture):
    violations = architecture.ros_violations()
    assert not violations, _report('ROS imports outside arm_dyn_id/nodes', violations)


def test_no_circle_of_module_level_imports(architecture):
    violations = architecture.cycles()
    assert not violations, _report('circles of imports', violations)


SYNTHETIC = {
    '__init__.py': '',
    'errors.py': '',
    'config.py': 'from arm_dyn_id.errors import *\nfrom . import paths\n',
    'paths.py': '',
    'model/__init__.py': '',
    'model/robot.py': ('from arm_dyn_id.identification import fit  # up\n'
                       'from ..errors import *\n'),
    'data/__init__.py': '',
    'data/bag.py': 'from ..excitation import plans  # sibling\nfrom ..model import robot\n',
    'excitation/__init__.py': '',
    'excitation/plans.py': ('import numpy\nfrom . import design\n\n\n'
                            'def later():\n    import rclpy  # even here\n'),
    'excitation/design.py': ('from typing import TYPE_CHECKING\n'
                             'from arm_dyn_id.excitation.collision import Checker\n'
                             'if TYPE_CHECKING:\n'
                             '    from arm_dyn_id.excitation.plans import Plan\n'),
    'excitation/collision.py': 'from .plans import Plan  # closes a circle\n',
    'identification/__init__.py': '',
    'identification/fit.py': 'import numpy\n',
    'cli/__init__.py': 'import arm_dyn_id.nodes.talker\nimport arm_dyn_id.sim.run\n',
    'sim/__init__.py': '',
    'sim/run.py': ('import importlib\n\n\ndef go():\n'
                   '    importlib.import_module("std_msgs.msg")\n'),
    'gadgets/__init__.py': '',
}


def test_the_checker_finds_each_kind_of_violation(tmp_path):
    root = tmp_path / 'arm_dyn_id'
    for name, text in SYNTHETIC.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    # nodes through a symlink, as in the repository
    (tmp_path / 'nodes').mkdir()
    (tmp_path / 'nodes' / '__init__.py').write_text('')
    (tmp_path / 'nodes' / 'talker.py').write_text(
        'import rclpy\nfrom std_msgs.msg import String\nfrom arm_dyn_id.sim import run\n')
    (root / 'nodes').symlink_to('../nodes')

    arch = Architecture(root)
    assert 'arm_dyn_id.nodes.talker' in arch.modules
    layers = arch.layer_violations()
    assert len(layers) == 3, layers
    assert 'gadgets' in layers[0] and 'no rank' in layers[0]
    assert any('arm_dyn_id/model/robot.py:1' in v and 'arm_dyn_id.identification.fit' in v
               for v in layers), layers
    assert any('arm_dyn_id/data/bag.py:1' in v and 'arm_dyn_id.excitation.plans' in v
               for v in layers), layers

    ros = arch.ros_violations()
    assert sorted(v.split(':')[0] for v in ros) == [
        'arm_dyn_id/excitation/plans.py', 'arm_dyn_id/sim/run.py'], ros
    assert 'rclpy' in ' '.join(ros) and 'std_msgs.msg' in ' '.join(ros)

    circles = arch.cycles()
    assert len(circles) == 1, circles
    # plans -> design -> collision -> plans; design's TYPE_CHECKING import closes none
    assert ('between arm_dyn_id.excitation.collision, arm_dyn_id.excitation.design, '
            'arm_dyn_id.excitation.plans:') in circles[0]
    assert circles[0].count('->') == 3, circles

    # and a tree that keeps every rule is clean
    for name in ('model/robot.py', 'data/bag.py', 'excitation/plans.py', 'sim/run.py',
                 'excitation/collision.py'):
        (root / name).write_text('from arm_dyn_id.errors import *\n')
    (root / 'gadgets' / '__init__.py').unlink()
    (root / 'gadgets').rmdir()
    clean = Architecture(root)
    assert (clean.layer_violations(), clean.ros_violations(), clean.cycles()) == ([], [], [])


def test_architecture_doc_names_every_module():
    """docs/architecture.md is the map: a module it does not name is a room off the map."""
    text = (REPO / 'docs' / 'architecture.md').read_text()
    missing = [str(path.relative_to(PACKAGE_DIR)) for path in sorted(PACKAGE_DIR.rglob('*.py'))
               if path.name != '__init__.py' and path.name not in text]
    assert not missing, f'docs/architecture.md does not name {missing}'
