"""Packaging checks: metadata, dependencies, entry points, data files, wheel, colcon.

These fail when the package stops installing the way ROS users and pip users
install it (docs/install.md): pip reads pyproject.toml (PEP 621) and setup.py,
colcon runs setup.py; both must give the same package.
"""

import ast
import importlib
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import arm_dyn_id

ROOT = Path(__file__).resolve().parent.parent
#: every nodes/<name>_node.py is an executable of the same name
NODES = tuple(sorted(p.stem for p in (ROOT / 'nodes').glob('*_node.py')))
EXECUTABLES = NODES + ('arm-dyn-id',)
REQUIRED_DEPENDS = {
    'rclpy', 'sensor_msgs', 'std_msgs', 'std_srvs', 'trajectory_msgs', 'diagnostic_msgs',
    'rosgraph_msgs', 'builtin_interfaces', 'launch', 'launch_ros', 'pinocchio',
    'python3-numpy', 'python3-scipy', 'python3-yaml', 'python3-matplotlib',
}
DATA_DIRS = {'launch': '*.py', 'config': '*.yaml', 'urdf': '*.urdf'}

#: what a third-party import is installed by (PyPI name); a new import must be added
#: here and to pyproject.toml, in the dependencies or in the extra of its wing. A few
#: modules come with a declared dependency (coal with pin, lz4 and zstandard with
#: mcap, backports.zstd with rosbags; compression.zstd is the stdlib's from 3.14).
DISTRIBUTION = {
    'numpy': 'numpy', 'scipy': 'scipy', 'pinocchio': 'pin', 'yaml': 'pyyaml',
    'rosbags': 'rosbags', 'mcap': 'mcap', 'matplotlib': 'matplotlib', 'mujoco': 'mujoco',
    'cvxpy': 'cvxpy', 'clarabel': 'clarabel', 'scs': 'scs',
    'coal': 'pin', 'lz4': 'mcap', 'zstandard': 'mcap', 'backports': 'rosbags',
    'compression': 'rosbags',
    'rclpy': 'ros-rclpy', 'sensor_msgs': 'ros-sensor-msgs', 'std_msgs': 'ros-std-msgs',
    'std_srvs': 'ros-std-srvs', 'trajectory_msgs': 'ros-trajectory-msgs',
    'geometry_msgs': 'ros-geometry-msgs', 'nav_msgs': 'ros-nav-msgs',
    'diagnostic_msgs': 'ros-diagnostic-msgs', 'rosgraph_msgs': 'ros-rosgraph-msgs',
    'ament_index_python': 'ros-ament-index-python', 'rcl_interfaces': 'ros-rcl-interfaces',
    'builtin_interfaces': 'ros-builtin-interfaces',
}
#: which extras a part of the source may use besides the core dependencies
EXTRAS_OF = {'nodes': ('ros', 'sim'), 'arm_dyn_id/sim': ('sim',),
             'arm_dyn_id/cli/demo.py': ('ros', 'sim')}

#: pyproject [project] keys -> the setup() keywords that would set the same field
SETUP_KEYWORDS = {
    'name': ('name',), 'version': ('version',), 'description': ('description',),
    'readme': ('long_description', 'long_description_content_type'),
    'requires-python': ('python_requires',), 'license': ('license', 'license_files'),
    'authors': ('author', 'author_email'), 'maintainers': ('maintainer', 'maintainer_email'),
    'keywords': ('keywords',), 'classifiers': ('classifiers',), 'urls': ('project_urls',),
    'dependencies': ('install_requires',), 'optional-dependencies': ('extras_require',),
    'scripts': ('entry_points',), 'gui-scripts': ('entry_points',),
    'entry-points': ('entry_points',),
}


def run_setup_py(source_dir):
    """Return the keyword arguments setup.py in ``source_dir`` passes to setup()."""
    import runpy
    import setuptools

    captured = {}
    cwd, real_setup = os.getcwd(), setuptools.setup
    setuptools.setup = captured.update
    try:
        os.chdir(source_dir)
        runpy.run_path(str(Path(source_dir) / 'setup.py'), run_name='__main__')
    finally:
        setuptools.setup = real_setup
        os.chdir(cwd)
    return captured


def read_pyproject():
    try:
        import tomllib
    except ImportError:         # Python 3.10
        tomllib = pytest.importorskip('tomli')
    return tomllib.loads((ROOT / 'pyproject.toml').read_text())


def requirement_names(requirements):
    from packaging.requirements import Requirement
    return {canonical(Requirement(r).name): Requirement(r) for r in requirements}


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


@pytest.fixture(scope='module')
def setup_kwargs():
    return run_setup_py(ROOT)


@pytest.fixture(scope='module')
def project():
    return read_pyproject()['project']


@pytest.fixture(scope='module')
def manifest():
    return ET.parse(ROOT / 'package.xml').getroot()


def console_scripts(kwargs):
    scripts = {}
    for line in kwargs['entry_points']['console_scripts']:
        name, target = (part.strip() for part in line.split('='))
        scripts[name] = target
    return scripts


def test_one_version_everywhere(setup_kwargs, manifest):
    assert manifest.findtext('version') == setup_kwargs['version'] == arm_dyn_id.__version__


def test_package_xml_is_format_3_ament_python(manifest):
    assert manifest.tag == 'package'
    assert manifest.get('format') == '3'
    assert manifest.findtext('name') == 'arm_dyn_id'
    assert manifest.findtext('license') == 'Apache-2.0'
    assert manifest.findtext('export/build_type') == 'ament_python'


def test_package_xml_lists_required_depends(manifest):
    runtime = {e.text for tag in ('depend', 'exec_depend') for e in manifest.iter(tag)}
    missing = REQUIRED_DEPENDS - runtime
    assert not missing, 'package.xml lacks depends: {}'.format(sorted(missing))
    # rosdep keys that resolve to pip installs (no Debian/Ubuntu package exists).
    assert {'python3-mujoco-pip', 'python3-rosbags-pip', 'python3-cvxpy-pip'} <= runtime
    assert 'python3-pytest' in {e.text for e in manifest.iter('test_depend')}


def test_metadata_matches_package_xml(project, setup_kwargs, manifest):
    assert project['name'] == manifest.findtext('name')
    assert setup_kwargs['license'] == manifest.findtext('license')
    # a string: colcon reads setup()'s arguments back with ast.literal_eval
    assert setup_kwargs['python_requires'] == '>=3.10'


def test_pyproject_and_setup_py_set_each_field_once(project, setup_kwargs):
    """A field in [project] is not passed to setup() too, and every dynamic one is.

    setuptools would silently prefer one of the two (or refuse the build in a later
    release); colcon runs setup.py alone, pip builds from both.
    """
    dynamic = set(project.get('dynamic', ()))
    for key in project:
        if key == 'dynamic':
            continue
        assert key not in dynamic, f'{key} is both set and dynamic in pyproject.toml'
        twice = [kw for kw in SETUP_KEYWORDS[key] if kw in setup_kwargs]
        assert not twice, f'[project] {key} is also passed to setup() as {twice}'
    for key in dynamic:
        assert any(kw in setup_kwargs for kw in SETUP_KEYWORDS[key]), \
            f'pyproject.toml marks {key} dynamic but setup.py does not set it'


def test_extras_and_dependencies(project):
    core = requirement_names(project['dependencies'])
    extras = project['optional-dependencies']
    assert {'ros', 'sim'} <= set(extras)
    assert not any(name.startswith('ros-') for name in core), 'the core needs no ROS'
    assert 'mujoco' not in core, 'the simulated arm is an extra, not a core dependency'
    assert 'ros-rclpy' in requirement_names(extras['ros'])
    assert 'mujoco' in requirement_names(extras['sim'])


def _third_party_imports(path):
    """Top-level names of the modules ``path`` imports, outside the stdlib and this package."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition('.')[0]
            if top not in sys.stdlib_module_names and top != 'arm_dyn_id':
                found.add(top)
    return found


def test_dependencies_cover_every_import(project):
    """Each third-party import of the package is declared: core code in the
    dependencies, the nodes and the simulated arm in their extras."""
    core = set(requirement_names(project['dependencies']))
    extras = {name: set(requirement_names(reqs))
              for name, reqs in project['optional-dependencies'].items()}
    sources = [p for p in (ROOT / 'arm_dyn_id').rglob('*.py')
               if 'nodes' not in p.relative_to(ROOT / 'arm_dyn_id').parts]
    sources += sorted((ROOT / 'nodes').glob('*.py'))
    problems = []
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        allowed = set(core)
        for prefix, names in EXTRAS_OF.items():
            if rel == prefix or rel.startswith(prefix + '/'):
                for extra in names:
                    allowed |= extras[extra]
        for top in sorted(_third_party_imports(path)):
            dist = DISTRIBUTION.get(top)
            if dist is None:
                problems.append(f'{rel} imports {top}: add it to pyproject.toml and to '
                                'DISTRIBUTION here')
            elif canonical(dist) not in allowed:
                problems.append(f'{rel} imports {top} ({dist}), which pyproject.toml does '
                                'not declare for it')
    assert not problems, '\n'.join(problems)


def test_requirements_pins_satisfy_pyproject(project):
    """requirements.txt (what `make` installs and the tests run with) pins every
    dependency and extra exactly, inside the ranges pyproject.toml declares."""
    from packaging.requirements import Requirement
    pins = {}
    for line in (ROOT / 'requirements.txt').read_text().splitlines():
        line = line.partition('#')[0].strip()
        if line:
            req = Requirement(line)
            pins[canonical(req.name)] = req
    declared = list(project['dependencies'])
    for name, reqs in project['optional-dependencies'].items():
        declared += [r for r in reqs if canonical(Requirement(r).name) != 'arm-dyn-id']
    for text in declared:
        req = Requirement(text)
        pin = pins.get(canonical(req.name))
        assert pin is not None, f'{req.name} is not pinned in requirements.txt'
        (spec,) = pin.specifier
        assert spec.operator == '==', f'requirements.txt: pin {pin} exactly'
        assert req.specifier.contains(spec.version, prereleases=True), \
            f'requirements.txt pins {pin}, outside pyproject.toml\'s {req}'
        assert req.extras <= pin.extras, f'requirements.txt: {pin} lacks extras {req.extras}'


def test_nodes_are_a_subpackage_of_arm_dyn_id(setup_kwargs):
    assert {'arm_dyn_id', 'arm_dyn_id.nodes'} <= set(setup_kwargs['packages'])
    # arm_dyn_id/nodes is a symlink to the top-level nodes/ folder (docs/install.md).
    assert (ROOT / 'arm_dyn_id' / 'nodes').resolve() == (ROOT / 'nodes').resolve()
    import arm_dyn_id.nodes
    assert Path(arm_dyn_id.nodes.__file__).resolve() == (ROOT / 'nodes' / '__init__.py')


def test_console_scripts_import_and_are_callable(setup_kwargs):
    scripts = console_scripts(setup_kwargs)
    assert set(scripts) == set(EXECUTABLES)
    for node in NODES:
        assert scripts[node] == 'arm_dyn_id.nodes.{}:main'.format(node)
    assert scripts['arm-dyn-id'] == 'arm_dyn_id.cli:run'
    for name, target in scripts.items():
        module_name, _, func = target.partition(':')
        module = importlib.import_module(module_name)
        assert callable(getattr(module, func)), name


def test_version_from_the_command_line():
    done = subprocess.run([sys.executable, '-m', 'arm_dyn_id', '--version'], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'arm-dyn-id {}'.format(arm_dyn_id.__version__)


def test_ament_index_marker_and_package_xml_installed(setup_kwargs):
    data = dict(setup_kwargs['data_files'])
    assert data['share/ament_index/resource_index/packages'] == ['resource/arm_dyn_id']
    assert (ROOT / 'resource' / 'arm_dyn_id').is_file()
    assert data['share/arm_dyn_id'] == ['package.xml']


def test_data_files_cover_launch_config_urdf(setup_kwargs):
    data = dict(setup_kwargs['data_files'])
    for folder, pattern in DATA_DIRS.items():
        shipped = sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).glob(pattern))
        assert sorted(data['share/arm_dyn_id/' + folder]) == shipped


def test_data_files_pick_up_new_files_and_allow_empty_dirs(tmp_path):
    """Files added later are installed without editing setup.py; empty dirs are fine."""
    shutil.copy(ROOT / 'setup.py', tmp_path)
    (tmp_path / 'launch').mkdir()
    (tmp_path / 'launch' / 'new.launch.py').write_text('')
    (tmp_path / 'config').mkdir()
    (tmp_path / 'config' / 'new_arm.yaml').write_text('')
    data = dict(run_setup_py(tmp_path)['data_files'])
    assert data['share/arm_dyn_id/launch'] == ['launch/new.launch.py']
    assert data['share/arm_dyn_id/config'] == ['config/new_arm.yaml']
    assert data['share/arm_dyn_id/urdf'] == []


def _copy_source(dest, dummies=True):
    ignore = shutil.ignore_patterns('.git', '.venv', 'build', 'install', 'log', '__pycache__',
                                    '*.egg-info', '.pytest_cache', '.hypothesis', 'demo_output',
                                    'dist')
    shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
    if dummies:
        # One file in each data folder, whether or not the project ships one yet.
        for folder, name in (('launch', 'x.launch.py'), ('config', 'x.yaml'),
                             ('urdf', 'x.urdf')):
            (dest / folder).mkdir(exist_ok=True)
            (dest / folder / name).write_text('')


def _clean_env(**extra):
    """The environment of a command run as a user would: not from this checkout."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK='1', **extra)
    for key in ('PYTHONPATH', 'VIRTUAL_ENV', 'PYTHONHOME'):
        env.pop(key, None)
    return env


#: pip's words for "the package index could not be reached" (then the test skips)
OFFLINE = re.compile(r'NewConnectionError|Temporary failure in name resolution|'
                     r'Network is unreachable|Max retries exceeded|ConnectTimeout|'
                     r'Failed to establish a new connection|Could not fetch URL')


def _pip(python, *args, cwd, env, timeout=600):
    """``python -m pip args``; skips the test when the failure is an unreachable index."""
    done = subprocess.run([str(python), '-m', 'pip', *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 and OFFLINE.search(done.stdout + done.stderr):
        pytest.skip('the package index is not reachable: '
                    + (done.stdout + done.stderr).strip().splitlines()[-1])
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def _constraints(path):
    """requirements.txt as a pip constraints file (no extras, no comments).

    The fresh environment gets the versions the tests run with, which pip finds
    among the wheels it already has (local index, find-links, cache) before the
    network.
    """
    lines = []
    for line in (ROOT / 'requirements.txt').read_text().splitlines():
        line = re.sub(r'\[[^]]*\]', '', line.partition('#')[0]).strip()
        if line:
            lines.append(line)
    path.write_text('\n'.join(lines) + '\n')
    return path


def _build_wheel(src, dist, env):
    try:
        import build  # noqa: F401
        cmd = [sys.executable, '-m', 'build', '--wheel', '--outdir', str(dist), str(src)]
    except ImportError:
        cmd = [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '-w', str(dist), str(src)]
    done = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and OFFLINE.search(done.stdout + done.stderr):
        pytest.skip('the package index is not reachable to build the wheel')
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (wheel,) = dist.glob('arm_dyn_id-*.whl')
    return wheel


def _fresh_venv(path, env):
    subprocess.run([sys.executable, '-m', 'venv', str(path)], check=True, env=env,
                   timeout=300)
    cfg = (path / 'pyvenv.cfg').read_text()
    assert 'include-system-site-packages = false' in cfg
    return path / 'bin' / 'python'


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_fits_a_bag_without_ros(tmp_path):
    """pip install of the wheel (core dependencies only) gives a working `arm-dyn-id fit`;
    then the editable install `make` does puts every command on PATH.

    The wheel is built from a copy of the source, installed into a new venv that
    sees no other site-packages, with requirements.txt's versions as constraints
    (pip finds them in its local index and cache first); rclpy and mujoco are not
    importable there. The bag is what ``ros2 bag record /joint_states`` writes on a
    user's arm (no markers, no recorder config), and the URDF is the one the wheel
    installed.
    """
    from arm_bags import Arm, write_arm_bag

    env = _clean_env()
    src = tmp_path / 'src'
    _copy_source(src, dummies=False)
    wheel = _build_wheel(src, tmp_path / 'dist', env)
    python = _fresh_venv(tmp_path / 'venv', env)
    # --no-compile: no .pyc for all of scipy, matplotlib, ... up front (pip's CPU 32 s -> 13 s)
    _pip(python, 'install', '--no-compile', '--only-binary=:all:', '-c',
         str(_constraints(tmp_path / 'c.txt')), str(wheel), cwd=tmp_path, env=env)

    venv = tmp_path / 'venv'
    probe = subprocess.run(
        [str(python), '-c', 'import arm_dyn_id, importlib.util as u; print(arm_dyn_id.__file__);'
         ' print(u.find_spec("rclpy") is None, u.find_spec("mujoco") is None)'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    module_file, no_ros = probe.stdout.split('\n')[:2]
    assert Path(module_file).resolve().is_relative_to(venv.resolve()), module_file
    assert no_ros == 'True True', 'the core install pulled in rclpy or mujoco'

    urdf = venv / 'share' / 'arm_dyn_id' / 'urdf' / 'humanoid_arm.urdf'
    assert urdf.is_file(), 'the wheel did not install the URDFs under share/arm_dyn_id'
    arm = Arm(urdf)
    bag = write_arm_bag(tmp_path / 'bag', arm, seed=5, rate=100.0)
    exe = venv / 'bin' / 'arm-dyn-id'
    usage = subprocess.run([str(exe), 'fit', '--help'], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0, usage.stderr
    # the gravity model: what this bag (slow sweeps) is for; the full-dynamics fit of
    # the same bag takes minutes and is tested elsewhere
    choice = ['--dynamics', 'gravity'] if '--dynamics' in usage.stdout else []
    out = tmp_path / 'fit'
    done = subprocess.run(
        [str(exe), 'fit', str(bag.path), '--urdf', str(urdf), '--torque-constants',
         bag.k_text, '--out', str(out), *choice],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for name in ('model.yaml', 'identified.urdf', 'validation.json', 'report.html'):
        assert (out / name).is_file(), name
    import json
    held_out = json.loads((out / 'validation.json').read_text())['held_out']
    worst = max(m['rmse_percent'] for m in held_out.values())
    assert worst < 5.0, f'held-out RMSE up to {worst:.2f} % of max torque'

    # What `make` does next (pip install --no-deps --use-pep517 -e .): the editable
    # install replaces the wheel; every executable in the venv's bin/, none in
    # lib/arm_dyn_id/ (setup.cfg's directories, for colcon), the code from the source.
    _pip(python, 'install', '--no-deps', '--use-pep517', '-e', str(src), cwd=tmp_path, env=env)
    for exe in EXECUTABLES:
        path = venv / 'bin' / exe
        assert path.is_file() and os.access(path, os.X_OK), path
    assert not (venv / 'lib' / 'arm_dyn_id').exists()
    done = subprocess.run([str(python), '-c', 'import arm_dyn_id; print(arm_dyn_id.__file__)'],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().is_relative_to(src.resolve())


def _colcon():
    try:
        import colcon_core  # noqa: F401
        import colcon_ros  # noqa: F401
    except ImportError:
        return None
    exe = Path(sys.executable).parent / 'colcon'
    return exe if exe.is_file() else shutil.which('colcon')


#: what ``ros2 run arm_dyn_id X`` does, from ros2run: the package's prefix from the
#: ament index, then the executables in <prefix>/lib/arm_dyn_id/
ROS2_RUN_LOOKUP = '''
import os, sys
from ament_index_python.packages import get_package_prefix
lib = os.path.join(get_package_prefix('arm_dyn_id'), 'lib', 'arm_dyn_id')
print(lib)
print(' '.join(sorted(f for f in os.listdir(lib) if os.access(os.path.join(lib, f), os.X_OK))))
'''


@pytest.mark.slow
@pytest.mark.parametrize('symlink', [False, True], ids=['install', 'symlink-install'])
def test_colcon_build_installs_what_ros2_run_needs(tmp_path, symlink):
    """colcon build [--symlink-install] writes install/setup.bash; sourced in bash, the
    ament index finds every executable where ``ros2 run`` looks, and they run."""
    colcon = _colcon()
    if colcon is None:
        pytest.skip('colcon (colcon-core, colcon-ros) is not installed')
    try:
        import colcon_bash  # noqa: F401
    except ImportError:
        pytest.fail('colcon-bash is not installed (requirements.txt pins it): colcon build '
                    'would write no install/setup.bash')
    bash = shutil.which('bash')
    if bash is None:
        pytest.skip('no bash on PATH')
    ws = tmp_path / 'ws'
    _copy_source(ws / 'src' / 'arm_dyn_id')
    env = _clean_env(COLCON_HOME=str(tmp_path / 'colcon_home'))
    # colcon and the ament index (ros-ament-index-python) come from this venv, as they
    # would from /opt/ros/<distro>
    env['PATH'] = str(Path(sys.executable).parent) + os.pathsep + env.get('PATH', '')
    env.pop('AMENT_PREFIX_PATH', None)
    cmd = [str(colcon), 'build', '--base-paths', 'src']
    if symlink:
        cmd.append('--symlink-install')
    done = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    logs = sorted((ws / 'log').glob('latest_build/arm_dyn_id/stderr.log'))
    assert done.returncode == 0, done.stdout + done.stderr + ''.join(
        p.read_text() for p in logs)

    prefix = ws / 'install' / 'arm_dyn_id'
    for exe in EXECUTABLES:
        path = prefix / 'lib' / 'arm_dyn_id' / exe
        assert path.is_file() and os.access(path, os.X_OK), path
    share = prefix / 'share' / 'arm_dyn_id'
    assert (share / 'package.xml').is_file()
    for folder, name in (('launch', 'x.launch.py'), ('config', 'x.yaml'), ('urdf', 'x.urdf')):
        assert (share / folder / name).is_file(), folder
    assert (prefix / 'share' / 'ament_index' / 'resource_index' / 'packages'
            / 'arm_dyn_id').is_file()
    assert (ws / 'install' / 'setup.bash').is_file(), 'colcon wrote no install/setup.bash'

    # As a ROS user: `source install/setup.bash`, then what `ros2 run arm_dyn_id X` does,
    # away from the source checkout.
    script = ('set -e; source "{ws}/install/setup.bash"; '
              'out=$("{py}" -c "$LOOKUP"); lib=$(echo "$out" | head -1); '
              'echo "$out"; "$lib/arm-dyn-id" --version; "$lib/arm-dyn-id" fit --help | head -1; '
              '"{py}" -c "import arm_dyn_id.nodes.identifier_node as m; print(m.__file__)"'
              ).format(ws=ws, py=sys.executable)
    done = subprocess.run([bash, '-c', script], cwd=tmp_path,
                          env=dict(env, LOOKUP=ROS2_RUN_LOOKUP), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    lib, executables, version, usage, module_file = lines[-5:]
    assert Path(lib).resolve() == (prefix / 'lib' / 'arm_dyn_id').resolve()
    assert set(EXECUTABLES) <= set(executables.split())
    assert version == 'arm-dyn-id {}'.format(arm_dyn_id.__version__)
    assert usage.startswith('usage: arm-dyn-id fit')
    assert Path(module_file).resolve().is_relative_to(ws.resolve()), module_file
