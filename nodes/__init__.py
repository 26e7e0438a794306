"""Thin rclpy nodes of arm_dyn_id, importable as ``arm_dyn_id.nodes``.

Each module has a ``main()`` declared as a console script in setup.py, installed
to ``<prefix>/lib/arm_dyn_id/`` by colcon (``ros2 run arm_dyn_id <name>``) and to
the venv's ``bin/`` by pip. This package must not import rclpy itself, so that
the core and the CLI work without ROS.

In the nodes OpenBLAS's idle threads sleep at once instead of spinning
(:mod:`arm_dyn_id.blas_threads`): set here, before a node's module imports NumPy, unless
the user set OPENBLAS_THREAD_TIMEOUT.
"""

from arm_dyn_id.blas_threads import short_blas_spin

short_blas_spin()
