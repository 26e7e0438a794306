"""Floating-base configuration and recorded data (issue 17 item 4): the ``floating_base``
section of the shipped configs and its one-line errors; bags written from the MuJoCo
space robot and biped (sim/floating.py) read back onto the joint_states stamps, MCAP and
sqlite3; malformed odometry / imu / sole-sensor data refused one problem at a time."""

import dataclasses
import shutil

import numpy as np
import pytest

from arm_dyn_id.config import (ArmConfig, FloatingBaseConfig, load_arm_config,
                               read_parameter_file)
from arm_dyn_id.data.bag_format import typestore
from arm_dyn_id.data.floating import (FloatingData, ODOMETRY, read_floating_bag,
                                      write_floating_bag)
from arm_dyn_id.errors import ConfigError, DataError
from arm_dyn_id.model.floating import FloatingModel
from arm_dyn_id.paths import resolve_data_file
from arm_dyn_id.sim import floating as simfloat

START = 1.7e9        # stamp of t = 0 in the written bags (s)


def _params(name):
    path = resolve_data_file(name, 'config')
    return read_parameter_file(path), path.parent


def _with(name, **changes):
    """The shipped config ``name`` with floating_base keys changed (None: removed)."""
    params, base = _params(name)
    fb = dict(params['floating_base'])
    for key, value in changes.items():
        if value is None:
            fb.pop(key, None)
        else:
            fb[key] = value
    params['floating_base'] = fb
    return ArmConfig.from_params(params, base_dir=base, need_limits=False)


# ----------------------------------------------------------------- configuration -----
def test_shipped_floating_configs_load_for_fit_and_for_nodes():
    space = load_arm_config('space_manipulator.yaml')          # nodes: limits needed
    fb = space.floating_base
    assert isinstance(fb, FloatingBaseConfig)
    assert (fb.method, fb.base_frame, fb.odometry_topic) == \
        ('momentum', 'satellite', 'base_odometry')
    # the weighed mass is the URDF's (seed 002 Table 2)
    assert fb.total_mass == pytest.approx(FloatingModel(space.urdf).total_mass, abs=1e-9)
    np.testing.assert_array_equal(fb.momentum, np.zeros(6))
    biped = load_arm_config('biped.yaml', need_limits=False, strict=True)   # fit
    fb = biped.floating_base
    assert (fb.method, fb.stance_foot, fb.imu_topic, fb.odometry_topic) == \
        ('zmp', 'foot_r', 'imu', '')
    assert fb.total_mass == pytest.approx(FloatingModel(biped.urdf).total_mass, abs=1e-9)
    assert [s.frame for s in fb.sole_sensors] == ['foot_l'] * 4 + ['foot_r'] * 4
    assert fb.topics == ('imu',) + tuple(f'foot_{f}/sole_{k}' for f in 'lr' for k in range(4))
    # effort of a floating robot is joint torque: no torque constants needed
    np.testing.assert_array_equal(biped.torque_constants, np.ones(12))
    assert load_arm_config('humanoid_arm.yaml').floating_base is None


@pytest.mark.parametrize('name, changes, words', [
    ('space_manipulator.yaml', {'method': 'newton'},
     ['floating_base.method', "'newton'", 'momentum, zmp']),
    ('space_manipulator.yaml', {'total_mass': 0},
     ['floating_base.total_mass = 0.0', '> 0']),
    ('space_manipulator.yaml', {'total_mass': None}, ['floating_base.total_mass is missing']),
    ('space_manipulator.yaml', {'momentum': [0.0, 0.0, 0.0]},
     ['floating_base.momentum', '6 numbers']),
    ('space_manipulator.yaml', {'odometry_topic': ''},
     ['floating_base.odometry_topic is empty', 'momentum']),
    ('space_manipulator.yaml', {'base_frame': 'link_1'},
     ['floating_base.base_frame', "'link_1'", 'root link', 'satellite']),
    ('space_manipulator.yaml', {'total_mas': 3.0},
     ['unknown parameter floating_base.total_mas', 'did you mean total_mass']),
    ('biped.yaml', {'stance_foot': None}, ['floating_base.stance_foot is missing', 'zmp']),
    ('biped.yaml', {'stance_foot': 'foot_x'},
     ['floating_base.stance_foot', "'foot_x'", 'not a frame']),
    ('biped.yaml', {'stance_foot_pose': [0.0, 0.0, 0.07, 0.0, 0.0, 0.0, 2.0]},
     ['floating_base.stance_foot_pose', 'norm 2']),
    ('biped.yaml', {'sole_sensors': None}, ['floating_base.sole_sensors', 'zmp']),
    ('biped.yaml', {'sole_sensors': [{'topic': 'sole', 'frame': 'sole_plate',
                                      'position': [0.0, 0.0, 0.0]}]},
     ['floating_base.sole_sensors[0].frame', "'sole_plate'", 'not a frame']),
    ('biped.yaml', {'sole_sensors': [{'topic': 'sole', 'frame': 'foot_r',
                                      'position': [0.0, 0.0]}]},
     ['floating_base.sole_sensors[0].position', '3 numbers']),
    ('biped.yaml', {'sole_sensors': [{'topic': 'sole', 'frame': 'foot_r'}]},
     ['floating_base.sole_sensors[0].position is missing']),
])
def test_floating_base_errors_are_one_line_naming_the_key(name, changes, words):
    with pytest.raises(ConfigError) as info:
        _with(name, **changes)
    text = str(info.value)
    assert '\n' not in text
    for word in words:
        assert word in text


# ------------------------------------------------------------------------ bags -----
@pytest.fixture(scope='module')
def space():
    config = load_arm_config('space_manipulator.yaml', need_limits=False)
    sim = simfloat.space_robot(config.urdf)
    t, q = simfloat.multi_joint_plan(duration=4.0, amplitude=0.5, rate=100.0,
                                     rng=np.random.default_rng(3))
    return config, sim.run(t, q, 0.02, noise=simfloat.Noise(), rng=np.random.default_rng(1))


@pytest.fixture(scope='module')
def biped_run():
    config = load_arm_config('biped.yaml', need_limits=False)
    sim = simfloat.biped(config.urdf)
    t, q, info = simfloat.biped_plan(sim.model_pin, duration=6.0, rate=25.0,
                                     rng=np.random.default_rng(0))
    c = info['configurations'][0]
    return config, sim.run(t, q, 0.02, noise=simfloat.Noise(), rng=np.random.default_rng(2),
                           base_position=c[:3], base_quaternion_xyzw=c[3:7])


def _bag(tmp_path, config, rec, name='bag', **kw):
    path = tmp_path / name
    shutil.rmtree(path, ignore_errors=True)
    return write_floating_bag(path, config, rec, start=START, **kw)


def test_the_sim_recording_is_the_data_class():
    assert simfloat.FloatingRecording is FloatingData        # moved, not copied


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_space_robot_bag_reads_back_the_simulated_arrays(tmp_path, space, storage):
    config, rec = space
    data = read_floating_bag(_bag(tmp_path, config, rec, storage=storage), config)
    np.testing.assert_allclose(data.t - START, rec.t, atol=1e-6)
    for key in ('q', 'dq', 'tau', 'base_position', 'base_linear', 'base_angular'):
        np.testing.assert_allclose(getattr(data, key), getattr(rec, key), atol=1e-12,
                                   err_msg=key)
    np.testing.assert_allclose(data.base_quaternion, rec.base_quaternion, atol=1e-12)
    assert data.forces is None and data.sensor_positions is None


def test_odometry_twist_is_in_the_base_axes_and_read_in_world_axes(tmp_path, space):
    """REP 105: the bag's twist.linear is R^T v; the reader gives v (world) back."""
    config, rec = space
    path = _bag(tmp_path, config, rec)
    from rosbags.rosbag2 import Reader
    store = typestore()
    with Reader(path) as reader:
        conn = [c for c in reader.connections if c.topic == '/base_odometry'][0]
        raw = next(reader.messages([conn]))[2]
    m = store.deserialize_cdr(raw, ODOMETRY)
    assert m.child_frame_id == 'satellite'
    x, y, z, w = rec.base_quaternion[0]
    import pinocchio as pin
    R = pin.Quaternion(w, x, y, z).toRotationMatrix()
    local = np.array([m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z])
    np.testing.assert_allclose(local, R.T @ rec.base_linear[0], atol=1e-15)
    k = len(rec.t) // 2          # the base has turned by then
    assert np.linalg.norm(rec.base_linear[k]) > 0
    data = read_floating_bag(path, config)
    np.testing.assert_allclose(data.base_linear[k], rec.base_linear[k], atol=1e-12)


def test_streams_are_resampled_onto_joint_states_within_the_common_span(tmp_path, space):
    config, rec = space
    delay = 0.007                 # odometry stamped 7 ms after the joints
    data = read_floating_bag(_bag(tmp_path, config, rec, delays={'odometry': delay}), config)
    t = rec.t
    assert data.t[0] - START == pytest.approx(t[1], abs=1e-6)   # before the first odometry
    assert len(data.t) == len(t) - 1
    ts = t + delay
    for j in range(3):
        np.testing.assert_allclose(data.base_position[:, j],
                                   np.interp(data.t - START, ts, rec.base_position[:, j]),
                                   atol=1e-9)
    # the attitude is interpolated too: within the motion of 7 ms
    np.testing.assert_allclose(data.base_quaternion, rec.base_quaternion[1:], atol=1e-3)
    assert np.abs(data.base_quaternion - rec.base_quaternion[1:]).max() > 1e-9


def test_biped_bag_with_imu_and_sole_sensors(tmp_path, biped_run):
    config, rec = biped_run
    data = read_floating_bag(_bag(tmp_path, config, rec, storage='sqlite3'), config)
    np.testing.assert_allclose(data.t - START, rec.t, atol=1e-6)
    np.testing.assert_allclose(data.q, rec.q, atol=1e-12)
    np.testing.assert_allclose(data.forces, rec.forces, atol=1e-9)
    np.testing.assert_allclose(data.base_quaternion, rec.base_quaternion, atol=1e-12)
    np.testing.assert_allclose(data.base_angular, rec.base_angular, atol=1e-12)
    assert data.base_position is None and data.base_linear is None   # an imu gives neither
    assert data.sensor_frames == tuple(s.frame for s in config.floating_base.sole_sensors)
    # the configured sensor positions, moved by the true kinematics, are the simulated
    # sensors' world positions (config/biped.yaml matches the URDF's sole spheres)
    model = FloatingModel(config.urdf)
    truth = rec.truth
    for k in (0, len(rec.t) // 2, len(rec.t) - 1):
        Q = model.configuration(truth['base_position'][k], truth['base_quaternion'][k],
                                truth['q'][k])[0]
        world = [model.frame_pose(Q, f) * np.asarray(p)
                 for f, p in zip(data.sensor_frames, data.sensor_positions)]
        np.testing.assert_allclose(world, truth['sensor_positions'][k], atol=1e-5)   # 10 µm


def _broken(rec, **changes):
    return dataclasses.replace(rec, **changes)


def test_missing_topic_is_named_with_the_bags_topics(tmp_path, space):
    config, rec = space
    path = _bag(tmp_path, config, rec)
    other = _with('space_manipulator.yaml', odometry_topic='satellite/odom')
    with pytest.raises(DataError, match=r'no topic satellite/odom .*odometry_topic.*'
                       r"its topics: \['/base_odometry', '/joint_states'\]"):
        read_floating_bag(path, other)


def test_nan_in_odometry_is_refused(tmp_path, space):
    config, rec = space
    p = rec.base_position.copy()
    p[5, 1] = np.nan
    with pytest.raises(DataError, match=r'/base_odometry pose or twist is NaN or inf in 1 '
                       r'message\(s\), first at stamp .* \(message 5\)'):
        read_floating_bag(_bag(tmp_path, config, _broken(rec, base_position=p)), config)


def test_non_unit_quaternion_is_refused(tmp_path, space):
    config, rec = space
    quat = rec.base_quaternion.copy()
    quat[7] *= 1.1
    with pytest.raises(DataError, match=r'/base_odometry orientation is not a unit '
                       r'quaternion in 1 message\(s\).*norm 1\.1'):
        read_floating_bag(_bag(tmp_path, config, _broken(rec, base_quaternion=quat)), config)


def test_sole_sensor_with_another_frame_is_refused(tmp_path, biped_run):
    config, rec = biped_run
    sensors = list(config.floating_base.sole_sensors)
    sensors[5] = dataclasses.replace(sensors[5], frame='ankle_r')
    wrong = dataclasses.replace(config, floating_base=dataclasses.replace(
        config.floating_base, sole_sensors=tuple(sensors)))
    path = _bag(tmp_path, wrong, rec)
    with pytest.raises(DataError, match=r"/foot_r/sole_1 has frame_id 'ankle_r', but "
                       r"floating_base.sole_sensors gives frame 'foot_r'"):
        read_floating_bag(path, config)


def test_nan_force_is_refused(tmp_path, biped_run):
    config, rec = biped_run
    forces = rec.forces.copy()
    forces[3, 2] = np.inf
    with pytest.raises(DataError, match=r'/foot_l/sole_2 force is NaN or inf'):
        read_floating_bag(_bag(tmp_path, config, _broken(rec, forces=forces)), config)


def test_no_time_overlap_is_refused(tmp_path, space):
    config, rec = space
    path = _bag(tmp_path, config, rec, delays={'odometry': 100.0})
    with pytest.raises(DataError, match=r'/joint_states \[.*\] s and /base_odometry \[.*\] '
                       r'have no common time span'):
        read_floating_bag(path, config)


def test_a_fixed_base_config_is_refused(tmp_path, space):
    config, rec = space
    path = _bag(tmp_path, config, rec)
    with pytest.raises(ConfigError, match='has no floating_base section'):
        read_floating_bag(path, load_arm_config('humanoid_arm.yaml'))


def test_joint_names_are_matched_like_the_arm_path(tmp_path, space):
    """The driver's order, an extra joint and a namespace prefix: read in config order."""
    config, rec = space
    order = [5, 2, 0, 4, 1, 3]
    names = tuple(f'sat/{config.joints[j]}' for j in order) + ('gripper',)
    extra = np.full((len(rec.t), 1), 0.3)
    driver = _broken(rec, q=np.hstack([rec.q[:, order], extra]),
                     dq=np.hstack([rec.dq[:, order], extra]),
                     tau=np.hstack([rec.tau[:, order], extra]))
    path = _bag(tmp_path, dataclasses.replace(config, joints=names), driver)
    data = read_floating_bag(path, config)
    for key in ('q', 'dq', 'tau'):
        np.testing.assert_allclose(getattr(data, key), getattr(rec, key), atol=1e-12)


def test_missing_joint_is_named(tmp_path, space):
    config, rec = space
    names = config.joints[:5] + ('wrist',)
    path = _bag(tmp_path, dataclasses.replace(config, joints=names), rec)
    with pytest.raises(DataError, match=r"/joint_states does not name every configured "
                       r"joint once .*'wrist'.*'joint_6'"):
        read_floating_bag(path, config)


def test_without_velocities_dq_is_differentiated_and_tau_is_none(tmp_path, space):
    config, rec = space
    data = read_floating_bag(_bag(tmp_path, config, _broken(rec, dq=None, tau=None)), config)
    assert data.tau is None
    # (stamps near 1.7e9 s carry 0.24 µs of float64 rounding: 1e-5 of a 20 ms step)
    np.testing.assert_allclose(data.dq, np.gradient(rec.q, rec.t, axis=0), rtol=1e-4,
                               atol=1e-6)
    # and it is the motion's rate: the central difference of 20 ms samples
    inner = slice(5, -5)
    assert np.abs(data.dq[inner] - rec.truth['dq'][inner]).max() < \
        0.05 * np.abs(rec.truth['dq']).max()


def test_numpy_decoding_equals_rosbags_deserialisation(tmp_path, space, biped_run):
    """Odometry, Imu and WrenchStamped read as float columns = field by field (rosbags)."""
    from rosbags.rosbag2 import Reader
    from arm_dyn_id.data import floating
    store = typestore()
    for config, rec in (space, biped_run):
        path = _bag(tmp_path, config, rec, name=config.robot_name)
        with Reader(path) as reader:
            for conn in reader.connections:
                if conn.msgtype not in floating._COLUMNS:
                    continue
                log, stamp, frames, values = floating._fixed_messages(reader, conn,
                                                                      conn.msgtype)
                msgs = [store.deserialize_cdr(raw, conn.msgtype)
                        for _, _, raw in reader.messages([conn])]
                assert len(msgs) == len(rec.t)
                np.testing.assert_array_equal(
                    values, [floating._slow_columns(m, conn.msgtype) for m in msgs])
                np.testing.assert_array_equal(
                    stamp, [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                            for m in msgs])
                assert frames == [m.header.frame_id for m in msgs]


def test_a_namespaced_topic_is_found_by_its_relative_name(tmp_path, space):
    config, rec = space
    path = _bag(tmp_path, _with('space_manipulator.yaml', odometry_topic='sat1/base_odometry'),
                rec)
    data = read_floating_bag(path, config)           # odometry_topic: base_odometry
    np.testing.assert_allclose(data.base_position, rec.base_position, atol=1e-12)


def test_an_imu_without_orientation_is_refused(tmp_path, biped_run):
    """orientation_covariance[0] = -1 (REP 145: no orientation estimate)."""
    from rosbags.rosbag2 import Reader, Writer
    config, rec = biped_run
    src = _bag(tmp_path, config, rec)
    store = typestore()
    dst = tmp_path / 'no_orientation'
    with Reader(src) as reader, Writer(dst, version=8) as writer:
        conns = {c.topic: writer.add_connection(c.topic, c.msgtype, typestore=store)
                 for c in reader.connections}
        for conn, log_time, raw in reader.messages():
            if conn.topic == '/imu':
                msg = store.deserialize_cdr(raw, conn.msgtype)
                msg.orientation_covariance = np.r_[-1.0, np.zeros(8)]
                raw = bytes(store.serialize_cdr(msg, conn.msgtype))
            writer.write(conns[conn.topic], log_time, raw)
    with pytest.raises(DataError, match=r'/imu gives no orientation '
                       r'\(orientation_covariance\[0\] = -1\)'):
        read_floating_bag(dst, config)
