"""Install script for arm_dyn_id (ament_python / colcon; pip reads pyproject.toml too).

pyproject.toml holds the package metadata and the dependencies (PEP 621) for pip;
this file supplies what it marks dynamic (the version, the license, the Python
versions, the console scripts) and what setuptools keeps outside [project]
(packages, data_files), so that ``colcon build``, which runs this file, and
``pip install``, which builds a wheel from both, install the same package. A
field set in [project] must not be passed here as well (setuptools would ignore
or refuse it; docs/install.md says which field lives where).

The node code sits in the top-level ``nodes/`` folder and is imported as
``arm_dyn_id.nodes`` through the symlink ``arm_dyn_id/nodes -> ../nodes``. A
``package_dir`` mapping would be simpler to read but fails under
``colcon build --symlink-install`` and legacy ``setup.py develop``, which only
know the package folders found under the source root (docs/install.md).
"""

from glob import glob
import os

from setuptools import find_packages, setup

package_name = 'arm_dyn_id'

NODES = ('excitation_node', 'recorder_node', 'identifier_node', 'sim_arm_node',
         'gravity_compensation_node', 'floating_model_node')


def files(pattern):
    """Return the regular files matching ``pattern`` (an empty list is fine)."""
    return sorted(path for path in glob(pattern) if os.path.isfile(path))


setup(
    # name, description, dependencies, extras: pyproject.toml [project]
    version='0.1.0',
    license='Apache-2.0',
    python_requires='>=3.10',
    packages=find_packages(include=[package_name, package_name + '.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', files('launch/*.py')),
        ('share/' + package_name + '/config', files('config/*.yaml')),
        ('share/' + package_name + '/urdf', files('urdf/*.urdf')),
    ],
    zip_safe=False,
    entry_points={
        'console_scripts': [
            '{0} = {1}.nodes.{0}:main'.format(node, package_name) for node in NODES
        ] + [
            'arm-dyn-id = arm_dyn_id.cli:run',
        ],
    },
)
