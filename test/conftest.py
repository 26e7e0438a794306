"""Generic test setup: keep ROS's per-user state out of the user's home, and keep
tests without the ``ros`` marker off ROS.

Node tests set their own ``ROS_DOMAIN_ID`` (CONVENTIONS.md 14); this only makes
sure nothing a test starts writes logs to ``~/.ros`` or talks beyond loopback.

``make test-fast`` deselects ``-m ros``, so a test that starts nodes or a DDS
participant must say so: a test without the marker that asks for the ``ros_env``
fixture fails at setup, and one that initialises an rclpy context (``rclpy.init``,
``RosHarness``) fails there. Importing rclpy is allowed (it starts no participant).
"""

import os
import tempfile

import pytest

# the per-test ROS environment fixture of the node tests (test/ros_utils.py)
from ros_utils import shm_files, cleanup_shm, ros_env  # noqa: F401

HUMANOID_URDF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             'urdf', 'humanoid_arm.urdf')


@pytest.fixture(scope='module')
def robot():
    """The humanoid arm of urdf/humanoid_arm.urdf, one per test module (a module may set
    its gravity); a module that needs another arm defines its own ``robot``."""
    from arm_dyn_id.model.robot import RobotModel
    return RobotModel.from_urdf(HUMANOID_URDF)


@pytest.fixture
def rotor_fit_fails(monkeypatch):
    """Make every base set with rotor inertias raise RankDeficientError('no solution
    (injected)') inside the full fit (a fault put in to test what a failed fit leaves);
    returns a function that makes every base set raise."""
    from arm_dyn_id.errors import RankDeficientError
    from arm_dyn_id.identification import full_dynamics
    rigid = full_dynamics.rigid_base_parameters

    def no_solution_with_rotors(robot, armature=False):
        if armature:
            raise RankDeficientError('no solution (injected)')
        return rigid(robot, armature=armature)

    def no_solution(robot, armature=False):
        raise RankDeficientError('none')

    monkeypatch.setattr(full_dynamics, 'rigid_base_parameters', no_solution_with_rotors)
    return lambda: monkeypatch.setattr(full_dynamics, 'rigid_base_parameters', no_solution)


_ROS_HOME = tempfile.TemporaryDirectory(prefix='arm_dyn_id_ros_home_')
_running = {'test': None, 'ros': True}     # the test being run, and whether it is marked ros


def _guard_rclpy_contexts():
    """Make ``rclpy.Context.init`` refuse to run inside a test without the ros marker."""
    try:
        from rclpy.context import Context
    except ImportError:     # no rclpy: nothing can start a participant in-process
        return
    init = Context.init
    if getattr(init, 'arm_dyn_id_guard', False):
        return

    def guarded_init(self, *args, **kwargs):
        if not _running['ros']:
            raise RuntimeError(
                f'{_running["test"]} initialises an rclpy context (a DDS participant) but '
                'is not marked @pytest.mark.ros; mark it so that make test-fast leaves it out')
        return init(self, *args, **kwargs)

    guarded_init.arm_dyn_id_guard = True
    Context.init = guarded_init


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _running['test'] = item.nodeid
    _running['ros'] = item.get_closest_marker('ros') is not None
    try:
        yield
    finally:
        _running['test'], _running['ros'] = None, True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if not _running['ros'] and 'ros_env' in item.fixturenames:
        pytest.fail(f'{item.nodeid} uses the ros_env fixture (node processes, a ROS domain) '
                    'but is not marked @pytest.mark.ros', pytrace=False)


_SHM_AT_START = set()
#: The longest test files (minutes each): collected first, so that under ``make test``'s two
#: workers (a file per worker) they start at once instead of ending the run alone.
LONG_FIRST = ('test_demo.py', 'test_shutdown.py', 'test_packaging.py', 'test_replay.py')


def pytest_collection_modifyitems(session, config, items):
    rank = {name: k for k, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FIRST)))


def pytest_configure(config):
    if not hasattr(config, 'workerinput'):      # the controller (or a run without -n)
        _SHM_AT_START.update(shm_files())
    os.environ['ROS_HOME'] = _ROS_HOME.name
    os.environ['ROS_LOG_DIR'] = os.path.join(_ROS_HOME.name, 'log')
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    _guard_rclpy_contexts()


def pytest_sessionfinish(session, exitstatus):
    # with pytest-xdist the node tests leave Fast DDS shm files of killed nodes to the
    # controller (test/ros_utils.py); every worker has finished when its session ends
    if not hasattr(session.config, 'workerinput') and os.environ.get('PYTEST_XDIST_WORKER') \
            is None:
        cleanup_shm(_SHM_AT_START)


def pytest_unconfigure(config):
    _ROS_HOME.cleanup()
