"""Every node that loads a model loads it through the model gate (issue 22).

The same bad model set goes to each node (split between start and reload to keep the
suite cheap: a node start costs seconds):

- at start (one parametrised test that only waits for the process to end): exit 2,
  exactly one FATAL line naming the reason, no traceback, nothing served;
- at reload (one test per node, several bad files in one node lifetime): the previous
  model is still served, and the diagnostics say why the new one was refused.

The set: a model marked rejected, base values of -1e6, another arm's model, a
truncated and a binary file, a full model with a negative inertia, a URDF with
negative masses under ``nominal_urdf:=true``; floating models: rejected, a negative
mass, another robot's, truncated. Also: node parameters out of range (``queue_depth``,
``initial_capacity``), a serve_only node with nothing to serve, a model whose friction
is negative (a fit from single-speed sweeps) served with one warning, and any arm
served without a config (the model file names its URDF and joints).
"""

import os
import re
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from ros_utils import RosHarness, node_output, refusal_line, start_node, stop

pytest.importorskip('rclpy')
pytestmark = pytest.mark.ros

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

from arm_dyn_id.config import load_arm_config  # noqa: E402
from arm_dyn_id.model.base_parameters import gravity_base_parameters  # noqa: E402
from arm_dyn_id.model.dynamics import (  # noqa: E402
    DynamicsModel, nominal_standard_parameters, rigid_base_parameters)
from arm_dyn_id.model.gravity import GravityModel  # noqa: E402
from arm_dyn_id.model.robot import RobotModel  # noqa: E402
from arm_dyn_id.nodes.gravity_client import GravityClient  # noqa: E402
from arm_dyn_id.nodes.qos import LATCHED_QOS  # noqa: E402
from arm_dyn_id.service.compensation import GravityTorques  # noqa: E402

IDENTIFIER = 'arm_dyn_id.nodes.identifier_node'
COMPENSATION = 'arm_dyn_id.nodes.gravity_compensation_node'
FLOATING = 'arm_dyn_id.nodes.floating_model_node'
RECORDER = 'arm_dyn_id.nodes.recorder_node'
REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 60.0          # s: a cold node start on a busy 2-core machine
FAST = {'diagnostics_period': 0.1, 'model_poll_period': 0.1}
QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: what each refusal names (the gate's reason, in words)
NAMES = {
    'rejected': r'marked rejected.*accept_rejected:=true',
    'huge': r'implausible',
    'other_robot': r'another URDF|another robot|not the config joints',
    'truncated': r'truncated|not a complete|not valid YAML|no parameters for body',
    'binary': r'not a text file',
    'neg_inertia': r'negative inertia',
    'neg_mass': r'negative|must be positive',
    'version_two': r"version 'two'",
    'floating': r'floating-base model',
}
ALIASES = {'neg_mass_urdf': 'neg_mass', 'rejected_metrics': 'rejected'}


# --------------------------------------------------------------------- the model set
def _gravity_model(config_name, scale=1.0, friction=None):
    config = load_arm_config(config_name)
    robot = RobotModel.from_config(config)
    base = gravity_base_parameters(robot)
    beta = base.beta(robot.parameters('gravity')) * scale
    return GravityModel(robot, base, beta, friction=friction)


def bad_variants(good, folder):
    """Bad copies of the model file ``good`` in ``folder``: {name: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    text = good.read_text()
    doc = yaml.safe_load(text)
    out = {'rejected': folder / 'rejected.yaml', 'truncated': folder / 'truncated.yaml',
           'binary': folder / 'binary.yaml'}
    out['rejected'].write_text(text.replace('schema:', 'rejected: gravity 1000x the URDF '
                                            '(arm-dyn-id fit --force)\nschema:', 1))
    out['truncated'].write_text(text[:len(text) // 2])
    out['binary'].write_bytes(bytes(range(256)) * 8)
    out['version_two'] = folder / 'version_two.yaml'
    out['version_two'].write_text(yaml.safe_dump(dict(doc, version='two'), sort_keys=False))
    if 'base' in doc:           # an arm model: every base value -1e6
        huge = dict(doc, base=dict(doc['base'], values=[-1e6] * len(doc['base']['values'])))
        out['huge'] = folder / 'huge.yaml'
        out['huge'].write_text(yaml.safe_dump(huge, sort_keys=False))
    return out


@pytest.fixture(scope='module')
def arm_set(tmp_path_factory):
    """Humanoid and Stäubli gravity models, their bad variants, a humanoid full model with
    a negative inertia and a copy of the humanoid URDF with negative masses."""
    root = tmp_path_factory.mktemp('arm_models')
    # the humanoid's viscous friction is negative on two joints: what a gravity fit from
    # single-speed sweeps wrote before fits were constrained (served, with one warning)
    humanoid = _gravity_model('humanoid_arm.yaml', 1.02, friction={
        'coulomb': [0.05] * 6, 'viscous': [0.01, -0.02, 0.01, -0.003, 0.0, 0.001]})
    staubli = _gravity_model('staubli_tx60.yaml', 1.03)
    models = {'humanoid': humanoid, 'staubli': staubli}
    paths = {name: model.save(root / name / 'model.yaml') for name, model in models.items()}
    sets = {name: bad_variants(paths[name], root / f'{name}_bad') for name in models}
    sets['humanoid']['other_robot'] = paths['staubli']
    sets['staubli']['other_robot'] = paths['humanoid']
    robot = humanoid.robot
    base = rigid_base_parameters(robot, armature=False, n_samples=60)
    theta = nominal_standard_parameters(robot, armature=False)
    for k in range(robot.n_joints):     # Ixx, Iyy, Izz of every link: -30 times the URDF's
        theta[10 * k + np.array([4, 6, 9])] *= -30.0
    sets['humanoid']['neg_inertia'] = DynamicsModel(robot.copy(), base, base.beta(theta)).save(
        root / 'neg_inertia.yaml')
    urdf = (REPO / 'urdf' / 'humanoid_arm.urdf').read_text()
    negative = re.sub(r'<mass value="([0-9.eE+-]+)"', r'<mass value="-\1"', urdf)
    assert negative != urdf
    sets['humanoid']['neg_mass_urdf'] = root / 'negative_masses.urdf'
    sets['humanoid']['neg_mass_urdf'].write_text(negative)
    return {'models': models, 'paths': paths, 'bad': sets}


@pytest.fixture(scope='module')
def floating_set(tmp_path_factory):
    """Two space-robot fits, a biped fit (another robot) and the bad variants."""
    from test_floating_model_node import fitted
    root = tmp_path_factory.mktemp('floating_models')
    _, model, phi_a, good = fitted('space_manipulator.yaml', root, seed=5)
    _, _, phi_b, good_b = fitted('space_manipulator.yaml', root, seed=6)
    _, _, _, biped = fitted('biped.yaml', root, seed=7)
    bad = bad_variants(good, root / 'bad')
    doc = yaml.safe_load(good.read_text())
    doc['metrics'] = dict(doc.get('metrics') or {}, rejected='predicts the momentum 3x worse '
                          'than the URDF')
    bad['rejected_metrics'] = root / 'bad' / 'rejected_metrics.yaml'
    bad['rejected_metrics'].write_text(yaml.safe_dump(doc, sort_keys=False))
    doc = yaml.safe_load(good.read_text())
    doc['parameters'][doc['bodies'][1]]['m'] = -5.0
    bad['neg_mass'] = root / 'bad' / 'neg_mass.yaml'
    bad['neg_mass'].write_text(yaml.safe_dump(doc, sort_keys=False))
    bad['other_robot'] = biped
    return {'model': model, 'phi': (phi_a, phi_b), 'paths': (good, good_b), 'bad': bad}


# ---------------------------------------------------------------------- at start
START_CASES = [
    # (node, which bad file, extra parameters); the bad files not started here (truncated,
    # binary, other_robot of the floating node) are swapped in at reload below
    ('identifier', 'rejected', {}), ('identifier', 'huge', {}),
    ('identifier', 'other_robot', {}), ('identifier', 'neg_inertia', {}),
    ('identifier', 'floating', {}),
    ('compensation', 'rejected', {}), ('compensation', 'huge', {}),
    ('compensation', 'version_two', {}), ('compensation', 'other_robot', {}),
    ('compensation', 'neg_mass_urdf', {'nominal_urdf': True}),
    ('floating', 'rejected', {}), ('floating', 'rejected_metrics', {}),
    ('floating', 'neg_mass', {}),
]


def _start_params(node, bad, extra):
    if node == 'identifier':
        return IDENTIFIER, {'config_file': 'humanoid_arm.yaml', 'serve_only': True,
                            'model_file': str(bad)}
    if node == 'compensation':
        if extra.get('nominal_urdf'):
            return COMPENSATION, {'config_file': 'humanoid_arm.yaml', 'urdf': str(bad),
                                  **extra}
        return COMPENSATION, {'config_file': 'humanoid_arm.yaml', 'model_file': str(bad)}
    return FLOATING, {'config_file': 'space_manipulator.yaml', 'model_file': str(bad)}


@pytest.mark.parametrize('node, which, extra', START_CASES,
                         ids=[f'{n}-{w}' for n, w, _ in START_CASES])
def test_a_bad_model_at_start_is_one_fatal_line_and_exit_2(ros_env, arm_set, floating_set,
                                                           node, which, extra):
    bad = floating_set['bad'] if node == 'floating' else \
        dict(arm_set['bad']['humanoid'], floating=floating_set['paths'][0])
    key = ALIASES.get(which, which)
    target, params = _start_params(node, bad[which], extra)
    proc = start_node(target, params, ros_env, name=f'{node}_{which}')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert re.search(NAMES[key], fatal), fatal
    assert str(bad[which]) in fatal, fatal
    # nothing was served: no model was loaded before the refusal
    rest = node_output(proc).replace(fatal, '')
    assert not re.search(r'loaded |compensating with|serving only', rest), rest


PARAM_CASES = [
    (IDENTIFIER, {'config_file': 'humanoid_arm.yaml', 'queue_depth': -5}, 'queue_depth'),
    (IDENTIFIER, {'config_file': 'humanoid_arm.yaml', 'initial_capacity': -1},
     'initial_capacity'),
    (RECORDER, {'config_file': 'humanoid_arm.yaml', 'queue_depth': -5}, 'queue_depth'),
    # serve_only with nothing to serve does not run serving nothing
    (IDENTIFIER, {'serve_only': True}, 'nothing to serve'),
    (IDENTIFIER, {'serve_only': True, 'model_file': '/nonexistent/model.yaml'},
     'nothing to serve'),
]


@pytest.mark.parametrize('target, params, named', PARAM_CASES,
                         ids=['identifier-queue_depth', 'identifier-initial_capacity',
                              'recorder-queue_depth', 'serve_only-nothing',
                              'serve_only-missing'])
def test_bad_parameters_and_nothing_to_serve_are_one_fatal_line(ros_env, target, params,
                                                                named):
    proc = start_node(target, params, ros_env, name='bad_params')
    try:
        fatal = refusal_line(proc, TIMEOUT)
    finally:
        stop(proc)
    assert named in fatal, fatal


# ---------------------------------------------------------------------- at reload
class Watcher(RosHarness):
    """Diagnostics of one node (latest values), made before spinning."""

    def __init__(self, domain_id, status_prefix):
        super().__init__(domain_id, name='gate_watcher')
        self.prefix = status_prefix
        self.lock = threading.Lock()
        self.values = {}
        self.message = ''

    def __enter__(self):
        super().__enter__()
        self.node.create_subscription(DiagnosticArray, 'diagnostics', self._on_diag, 10)
        return self

    def _on_diag(self, msg):
        for status in msg.status:
            if status.name.startswith(self.prefix):
                with self.lock:
                    self.values = {kv.key: kv.value for kv in status.values}
                    self.message = status.message

    def diag(self, key):
        with self.lock:
            return self.values.get(key)

    def refused(self, pattern, source):
        """Wait until the diagnostics say ``source`` was refused for ``pattern``."""
        def said():
            error = self.diag('reload_error') or ''
            return source in error and re.search(pattern, error)
        self.wait_for(said, TIMEOUT, what=f'reload_error naming {source} ({pattern}); '
                      f'last: {self.diag("reload_error")!r}')
        assert 'still' in self.message or 'previous' in self.message, self.message


def _swap(path, source):
    """Replace ``path`` by a copy of ``source`` atomically (a new inode: the poll sees it)."""
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_bytes(Path(source).read_bytes())
    os.replace(tmp, path)


def test_identifier_serves_any_arm_without_config_and_keeps_it_on_bad_reloads(
        ros_env, tmp_path, arm_set):
    """serve_only without config_file: the model file names its URDF and joints (a Stäubli
    here). Bad files swapped in are refused, the Stäubli model stays served."""
    staubli = arm_set['models']['staubli']
    served = tmp_path / 'served' / 'model.yaml'
    served.parent.mkdir()
    _swap(served, arm_set['paths']['staubli'])
    proc = start_node(IDENTIFIER, {'serve_only': True, 'model_file': str(served), **FAST},
                      ros_env, name='identifier_reload')
    joints = list(staubli.joint_names)
    pose = np.array([0.3, -0.6, 1.1, 0.4, -0.7, 0.2])
    expected = staubli.gravity_torques(pose)
    with Watcher(ros_env.domain_id, 'identifier_node') as h:
        client = GravityClient(h.node)
        assert client.wait_for_server(TIMEOUT), node_output(proc)
        np.testing.assert_allclose(client.call(joints, pose, 30.0), expected, rtol=1e-9,
                                   atol=1e-9)
        bad = arm_set['bad']['staubli']
        for which in ('rejected', 'huge', 'other_robot', 'truncated', 'binary'):
            _swap(served, bad[which])
            h.refused(NAMES[which], str(served))
            np.testing.assert_allclose(client.call(joints, pose, 30.0), expected, rtol=1e-9,
                                       atol=1e-9)
        # a good file again is served, and the error is gone
        better = GravityModel(staubli.robot, staubli.base, staubli.beta * 1.1)
        better.save(served)
        h.wait_for(lambda: np.allclose(client.call(joints, pose, 30.0),
                                       better.gravity_torques(pose), rtol=1e-9, atol=1e-9),
                   TIMEOUT, poll=0.05, what='the good model served after the bad ones')
        h.wait_for(lambda: h.diag('reload_error') == '', TIMEOUT, what='reload_error cleared')
    assert stop(proc) == 0, node_output(proc)
    log = node_output(proc)
    assert log.count('model reload failed, still serving') == 5, log
    assert 'Traceback' not in log and '[FATAL]' not in log, log


class Commands(Watcher):
    """The compensation node's diagnostics and commands; publishes joint_states and models."""

    def __enter__(self):
        super().__enter__()
        self.commands = []
        self.node.create_subscription(Float64MultiArray, 'effort_controller/commands',
                                      self._on_command, QOS)
        self.states = self.node.create_publisher(JointState, 'joint_states', QOS)
        self.models = self.node.create_publisher(String, '/identifier_node/model', LATCHED_QOS)
        return self

    def _on_command(self, msg):
        with self.lock:
            self.commands.append(np.array(msg.data))
            del self.commands[:-20]

    def commanding(self, joints, pose, expected):
        """Publish the pose until the newest command equals ``expected``."""
        msg = JointState(name=list(joints), position=[float(x) for x in pose])

        def matches():
            self.states.publish(msg)
            with self.lock:
                return self.commands and np.allclose(self.commands[-1], expected, atol=1e-9)
        self.wait_for(matches, TIMEOUT, poll=0.02, what=f'commands {expected}')


def test_compensation_keeps_its_model_when_a_bad_one_arrives_on_the_topic(
        ros_env, arm_set):
    """model_topic: a good model (whose viscous friction is negative on two joints, as a
    gravity fit from single-speed sweeps wrote it) is served with one warning; the bad
    documents that follow are refused one by one, the good one stays in use."""
    humanoid = arm_set['models']['humanoid']
    joints = list(humanoid.joint_names)
    pose = np.array([0.3, 1.2, -0.4, 0.9, 0.3, 0.2])
    gravity = GravityTorques.from_model(humanoid)
    expected = np.clip(gravity.torques(pose), -gravity.effort_limits, gravity.effort_limits)
    proc = start_node(COMPENSATION, {
        'config_file': 'humanoid_arm.yaml', 'model_topic': '/identifier_node/model',
        'stale_timeout': 5.0, 'diagnostics_period': 0.1}, ros_env, name='comp_reload')
    topic = '/identifier_node/model'
    with Commands(ros_env.domain_id, 'gravity_compensation_node') as h:
        h.wait_for_subscribers(h.models, timeout=TIMEOUT)
        h.models.publish(String(data=humanoid.to_yaml()))
        h.commanding(joints, pose, expected)
        bad = arm_set['bad']['humanoid']
        for which in ('rejected', 'huge', 'other_robot', 'truncated', 'neg_inertia'):
            h.models.publish(String(data=Path(bad[which]).read_text()))
            h.refused(NAMES[which], topic)
            h.commanding(joints, pose, expected)
        h.models.publish(String(data='not yaml: [unclosed\n'))
        h.refused(NAMES['truncated'], topic)
        h.commanding(joints, pose, expected)
    assert stop(proc) == 0, node_output(proc)
    log = node_output(proc)
    friction = [line for line in log.splitlines() if 'friction is negative' in line]
    assert len(friction) == 1 and '[WARN]' in friction[0], log
    assert 'joint_2 viscous' in friction[0] and 'joint_4 viscous' in friction[0], log
    assert len([line for line in log.splitlines() if '[ERROR]' in line]) == 6, log
    assert 'still compensating with model from' in log, log
    assert 'Traceback' not in log and '[FATAL]' not in log, log


def test_floating_model_node_keeps_its_model_on_bad_reloads(ros_env, tmp_path, floating_set):
    model = floating_set['model']
    phi_a, phi_b = floating_set['phi']
    served = tmp_path / 'served' / 'model.yaml'
    served.parent.mkdir()
    _swap(served, floating_set['paths'][0])
    proc = start_node(FLOATING, {'config_file': 'space_manipulator.yaml',
                                 'model_file': str(served), **FAST}, ros_env,
                      name='floating_reload')
    from arm_dyn_id.service.floating import BASE_NAMES
    names = list(BASE_NAMES) + list(model.joint_names)
    position = np.r_[0.1, 0.2, 0.3, 0, 0, 0, 1, np.full(model.n, 0.2)]
    with Watcher(ros_env.domain_id, 'floating_model_node') as h:
        results = {}
        query = h.node.create_publisher(JointState, 'com_query', QOS)
        h.node.create_subscription(
            JointState, 'com_result',
            lambda m: results.__setitem__(m.header.frame_id, list(m.effort)), QOS)

        def com(expected, key=[0]):
            def answered():
                key[0] += 1
                msg = JointState(name=names, position=[float(x) for x in position])
                msg.header.frame_id = str(key[0])
                query.publish(msg)
                try:
                    h.wait_for(lambda: str(key[0]) in results, 5.0)
                except TimeoutError:
                    return False    # no answer yet (a busy machine): ask again, to TIMEOUT
                return np.allclose(results[str(key[0])], expected, atol=1e-12)
            h.wait_for_subscribers(query, timeout=TIMEOUT)
            h.wait_for(answered, TIMEOUT, poll=0.05, what=f'com {expected}')
        com(model.com(position[None], phi_a)[0])
        bad = floating_set['bad']
        for which in ('rejected', 'neg_mass', 'rejected_metrics', 'other_robot', 'truncated'):
            _swap(served, bad[which])
            h.refused(NAMES[ALIASES.get(which, which)], str(served))
            com(model.com(position[None], phi_a)[0])
        _swap(served, floating_set['paths'][1])
        com(model.com(position[None], phi_b)[0])
        h.wait_for(lambda: h.diag('reload_error') == '', TIMEOUT, what='reload_error cleared')
    assert stop(proc) == 0, node_output(proc)
    log = node_output(proc)
    assert log.count('model reload failed, still serving') == 5, log
    assert 'Traceback' not in log and '[FATAL]' not in log, log
