"""Ending a finished process without the interpreter's teardown.

Once a command or a node has done its work, Python's finalisation frees every module and
object one by one: with NumPy, pinocchio, SciPy, cvxpy, matplotlib (and MuJoCo, rclpy in
the nodes) loaded that took 0.3-0.8 s of a command's wall time (`arm-dyn-id fit`: a
tenth of it, after the report was written) and 85 % of a node's exit time. Nothing of
the work is in what is freed; :func:`end_process` flushes the standard streams and ends
the process at once.
"""

import atexit
import os
import sys


#: the environment variables by which coverage.py measures a process it did not start
COVERAGE_VARIABLES = ('COVERAGE_PROCESS_START', 'COVERAGE_PROCESS_CONFIG')


def under_coverage():
    """Whether coverage.py measures this process (its data is saved by the normal exit)."""
    return any(os.environ.get(name) for name in COVERAGE_VARIABLES)


def end_process(code, exit_handlers=True):
    """End the process now with exit status ``code``, without Python's finalisation.

    Parameters
    ----------
    code : int
        The exit status.
    exit_handlers : bool
        Run the ``atexit`` handlers first (multiprocessing's pools, temporary folders,
        logging's flush), as a normal exit would. The nodes skip them: their context is
        shut down already and the handlers of the ROS libraries are not needed.

    Returns
    -------
    int
        ``code``, only under coverage (the normal exit is kept so that its data is
        saved); otherwise it does not return. Threads still running end with the
        process: a command calls it when only its main thread is left.
    """
    if under_coverage():
        return code
    if exit_handlers:
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)
