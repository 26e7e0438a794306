"""One BLAS thread in the suite's own processes (the ``arm-dyn-id`` command, the nodes).

NumPy's OpenBLAS starts one thread per core, and between two products those threads
spin, waiting for the next one. The suite's products are small (a regressor of 60,000
rows by 56 columns is the largest), so the extra threads hardly share any work: they
mostly take a core from whatever else runs beside the process. That is the report's
painter next to ``arm-dyn-id fit``, or the other nodes next to the identifier. Measured
on the 2-core VM (docs/benchmarks.md, the full-dynamics fit of a 1-minute 1 kHz
recording): one thread writes the model sooner and with about 35 % less CPU time.

:func:`one_blas_thread` must run before NumPy is first imported, since OpenBLAS reads
its setting only when it loads. The command line (``arm_dyn_id/cli/__init__.py``) and
the nodes' package (``nodes/__init__.py``) call it first thing. The library itself
changes nothing: a program that imports ``arm_dyn_id`` keeps its own setting.
"""

import os

#: what OpenBLAS reads, in its order of precedence; a user's setting of any one is kept
THREAD_VARIABLES = ('OPENBLAS_NUM_THREADS', 'GOTO_NUM_THREADS', 'OMP_NUM_THREADS')


def one_blas_thread(environ=None):
    """Ask OpenBLAS for one thread, unless the user set a thread count.

    Parameters
    ----------
    environ : mutable mapping, optional
        The environment to change (default ``os.environ``, which child processes
        inherit).

    Returns
    -------
    bool
        True when the setting was made; False when one of :data:`THREAD_VARIABLES`
        was already set (kept as the user set it).
    """
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in THREAD_VARIABLES):
        return False
    environ['OPENBLAS_NUM_THREADS'] = '1'
    return True


__all__ = ['THREAD_VARIABLES', 'one_blas_thread']
