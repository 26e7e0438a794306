"""Install script for arm_dyn_id (ament_python, also plain pip).

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

NODES = ('excitation_node', 'recorder_node', 'identifier_node', 'sim_arm_node')


def files(pattern):
    """Return the regular files matching ``pattern`` (an empty list is fine)."""
    return sorted(path for path in glob(pattern) if os.path.isfile(path))


setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(include=[package_name, package_name + '.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', files('launch/*.py')),
        ('share/' + package_name + '/config', files('config/*.yaml')),
        ('share/' + package_name + '/urdf', files('urdf/*.urdf')),
    ],
    install_requires=['setuptools'],
    python_requires='>=3.10',
    zip_safe=False,
    maintainer='arm_dyn_id maintainers',
    maintainer_email='arm_dyn_id@users.noreply.github.com',
    description='Dynamic parameter identification for robot arms, as ROS 2 nodes and a CLI.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            '{0} = {1}.nodes.{0}:main'.format(node, package_name) for node in NODES
        ] + [
            'arm-dyn-id = arm_dyn_id.cli:main',
        ],
    },
)
