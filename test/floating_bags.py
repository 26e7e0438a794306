"""Bags of the two floating-base robots with known truth, as a user's robot records them.

Test support for test_floating_fit.py and test_cli_floating.py. The MuJoCo sims
(:mod:`arm_dyn_id.sim.floating`) run the TRUE robots of urdf/; the configuration the
fit gets names a NOMINAL URDF written beside it (the true one with the papers' prior
parameters: seed 002 Table 1 for the space robot, CAD values off by 5-15 % for the
biped), so a fit that returns the nominal parameters is measurably wrong. The bags are
written by :func:`arm_dyn_id.data.floating.write_floating_bag` (joint_states, odometry
or imu, one WrenchStamped per sole sensor) from config/space_manipulator.yaml and
config/biped.yaml.
"""

import re
import sys
from pathlib import Path

import numpy as np

from arm_dyn_id.config import load_arm_config
from arm_dyn_id.data.floating import write_floating_bag
from arm_dyn_id.identification.momentum import principal_parametrisation
from arm_dyn_id.identification.zmp import LinkTypes
from arm_dyn_id.model.floating import FloatingModel
from arm_dyn_id.sim.floating import Noise, biped, biped_plan, multi_joint_plan, space_robot

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / 'urdf'))
from generate_floating_urdfs import SPACE_NOMINAL, SPACE_TRUE  # noqa: E402

SPACE_URDF = REPO / 'urdf' / 'space_manipulator.urdf'
BIPED_URDF = REPO / 'urdf' / 'biped.urdf'
#: the space robot's unknowns (mass, principal moments per body): truth and prior
SPACE_THETA_TRUE = np.array(SPACE_TRUE).ravel()
SPACE_THETA_NOMINAL = np.array(SPACE_NOMINAL).ravel()
#: the biped's CAD values as factors of the truth (lc torso/thigh/shank/foot, m ...)
BIPED_CAD = np.array([1.1, 0.9, 1.1, 1.15, 0.95, 1.05, 1.05, 1.1])
#: noise of the biped's measurements (bench/floating_base.py's)
BIPED_NOISE = Noise(joint_angle=1e-4, force=0.5, torque=0.05)


def nominal_config(folder, name, urdf_text, edit=None):
    """config/<name>.yaml with its URDF replaced by ``urdf_text`` (written into
    ``folder``); ``edit(text) -> text`` changes the YAML further. Returns (path, config)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f'{name}_nominal.urdf').write_text(urdf_text)
    text = (REPO / 'config' / f'{name}.yaml').read_text()
    text = re.sub(r'urdf: \S+', f'urdf: {name}_nominal.urdf', text, count=1)
    if edit is not None:
        text = edit(text)
    path = folder / f'{name}.yaml'
    path.write_text(text)
    return path, load_arm_config(path)


def space_run(seed=3, duration=16.0, noise=None):
    """The space robot released at rest, all joints moving (FloatingRecording)."""
    sim = space_robot(SPACE_URDF)
    t, q = multi_joint_plan(duration=duration, amplitude=1.0, rng=np.random.default_rng(seed))
    return sim.run(t, q, 0.05, noise=Noise() if noise is None else noise,
                   rng=np.random.default_rng(seed + 1))


def space_nominal_urdf():
    model = FloatingModel(SPACE_URDF)
    return model.identified_urdf(principal_parametrisation(model).phi(SPACE_THETA_NOMINAL))


def biped_truth():
    """The biped's seed 003 unknowns (lc, m per link type) of the true URDF."""
    return LinkTypes(FloatingModel(BIPED_URDF)).nominal.copy()


def biped_nominal_urdf():
    model = FloatingModel(BIPED_URDF)
    types = LinkTypes(model)
    return model.identified_urdf(types.phi(types.nominal * BIPED_CAD))


def biped_run(seed=1, duration=20.0, single_support=True):
    """The biped shifting its weight onto the right foot (seed 003 §3)."""
    model = FloatingModel(BIPED_URDF)
    sim = biped(BIPED_URDF)
    t, q, info = biped_plan(model, duration=duration, rng=np.random.default_rng(seed),
                            single_support=single_support)
    c0 = info['configurations'][0]
    return sim.run(t, q, 0.02, noise=BIPED_NOISE, rng=np.random.default_rng(seed + 100),
                   base_position=c0[:3], base_quaternion_xyzw=c0[3:7])


def space_bag(folder, **run):
    """(config path, config, bag) of the space robot in ``folder``."""
    path, config = nominal_config(folder, 'space_manipulator', space_nominal_urdf())
    return path, config, write_floating_bag(Path(folder) / 'space_bag', config,
                                            space_run(**run))


def biped_bag(folder, name='biped_bag', **run):
    """(config path, config, bag) of the biped in ``folder``."""
    path, config = nominal_config(folder, 'biped', biped_nominal_urdf())
    return path, config, write_floating_bag(Path(folder) / name, config, biped_run(**run))
