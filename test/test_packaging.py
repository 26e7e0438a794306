"""Packaging checks: versions, package.xml, entry points, data files, colcon build.

These fail when the package stops installing the way ROS users and pip users
install it (docs/install.md).
"""

import importlib
import os
from pathlib import Path
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import arm_dyn_id

ROOT = Path(__file__).resolve().parent.parent
NODES = ('excitation_node', 'recorder_node', 'identifier_node', 'sim_arm_node')
EXECUTABLES = NODES + ('arm-dyn-id',)
REQUIRED_DEPENDS = {
    'rclpy', 'sensor_msgs', 'std_msgs', 'std_srvs', 'trajectory_msgs', 'diagnostic_msgs',
    'rosgraph_msgs', 'builtin_interfaces', 'launch', 'launch_ros', 'pinocchio',
    'python3-numpy', 'python3-scipy', 'python3-yaml', 'python3-matplotlib',
}
DATA_DIRS = {'launch': '*.py', 'config': '*.yaml', 'urdf': '*.urdf'}


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


@pytest.fixture(scope='module')
def setup_kwargs():
    return run_setup_py(ROOT)


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
    assert {'python3-mujoco-pip', 'python3-rosbags-pip'} <= runtime
    assert 'python3-pytest' in {e.text for e in manifest.iter('test_depend')}


def test_setup_py_matches_package_xml(setup_kwargs, manifest):
    assert setup_kwargs['name'] == manifest.findtext('name')
    assert setup_kwargs['license'] == manifest.findtext('license')


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
    assert scripts['arm-dyn-id'] == 'arm_dyn_id.cli:main'
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


def _colcon():
    try:
        import colcon_core  # noqa: F401
        import colcon_ros  # noqa: F401
    except ImportError:
        return None
    exe = Path(sys.executable).parent / 'colcon'
    return exe if exe.is_file() else shutil.which('colcon')


def _copy_source(dest):
    ignore = shutil.ignore_patterns('.git', '.venv', 'build', 'install', 'log', '__pycache__',
                                    '*.egg-info', '.pytest_cache', '.hypothesis', 'demo_output')
    shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
    # One file in each data folder, whether or not the project ships one yet.
    for folder, name in (('launch', 'x.launch.py'), ('config', 'x.yaml'), ('urdf', 'x.urdf')):
        (dest / folder).mkdir(exist_ok=True)
        (dest / folder / name).write_text('')


@pytest.mark.slow
@pytest.mark.parametrize('symlink', [False, True], ids=['install', 'symlink-install'])
def test_colcon_build_installs_what_ros2_run_needs(tmp_path, symlink):
    """colcon build [--symlink-install] puts every executable where ``ros2 run`` looks."""
    colcon = _colcon()
    if colcon is None:
        pytest.skip('colcon (colcon-core, colcon-ros) is not installed')
    ws = tmp_path / 'ws'
    _copy_source(ws / 'src' / 'arm_dyn_id')
    env = dict(os.environ, COLCON_HOME=str(tmp_path / 'colcon_home'))
    cmd = [str(colcon), 'build', '--base-paths', 'src']
    if symlink:
        cmd.append('--symlink-install')
    done = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
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

    # Run from the workspace's environment, away from the source checkout, as
    # `. install/setup.sh && ros2 run arm_dyn_id <exe>` would.
    script = ('. "{ws}/install/local_setup.sh" && "{lib}/arm-dyn-id" --version && '
              '"{py}" -c "import arm_dyn_id.nodes.identifier_node as m; print(m.__file__)"'
              ).format(ws=ws, lib=prefix / 'lib' / 'arm_dyn_id', py=sys.executable)
    env.pop('PYTHONPATH', None)
    done = subprocess.run(['sh', '-c', script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    version_line, module_file = done.stdout.split()[-3:-1], done.stdout.split()[-1]
    assert version_line == ['arm-dyn-id', arm_dyn_id.__version__]
    assert Path(module_file).resolve().is_relative_to(ws.resolve()), module_file
