"""OpenBLAS's idle threads sleep at once in the suite's own processes (the ``arm-dyn-id``
command, the nodes).

NumPy's OpenBLAS runs a thread per core. After each product its threads spin for the
next one, 2^28 cycles by default (about 0.1 s here), before they sleep. The suite's
products are mostly small and come one after another from Python, so those threads spin
most of the time and take a core from whatever runs beside the process: the report's
painter next to ``arm-dyn-id fit``, the other nodes next to the identifier. With
``OPENBLAS_THREAD_TIMEOUT=4`` (2^4 cycles, OpenBLAS's shortest) they sleep as soon as
a product ends and still share the large ones. Measured on the 2-core VM
(docs/benchmarks.md, "Fit of a 1-minute 1 kHz Fourier recording"): the 1-minute fit
with its report used 3.6 s of CPU instead of 5.5 s (medians of 8). On a 10-minute fit,
where the products are larger, the short spin, the default spin and one thread wrote the
model within the runs' noise of each other (medians 9.9-10.7 s over two sets of runs);
the short spin keeps OpenBLAS's threads for such products.

:func:`short_blas_spin` must run before NumPy is first imported, since OpenBLAS reads
its environment only when it loads. The command line (``arm_dyn_id/cli/__init__.py``)
and the nodes' package (``nodes/__init__.py``) call it first thing. Importing
``arm_dyn_id.nodes`` therefore sets it in the process's environment, which its children
inherit (a bench that compares two trees removes it: ``bench/bag_read.py``); the rest
of the library changes nothing.
"""

import os

#: what OpenBLAS reads: 2^n cycles a thread spins after a product (4-30; default 28)
SPIN_VARIABLE = 'OPENBLAS_THREAD_TIMEOUT'
#: OpenBLAS's shortest spin: its threads sleep as soon as a product ends
SHORT_SPIN = '4'


def short_blas_spin(environ=None):
    """Have OpenBLAS's idle threads sleep at once, unless the user set the spin.

    Parameters
    ----------
    environ : mutable mapping, optional
        The environment to change (default ``os.environ``, which child processes
        inherit).

    Returns
    -------
    bool
        True when the setting was made; False when :data:`SPIN_VARIABLE` was already set
        (kept as the user set it).
    """
    environ = os.environ if environ is None else environ
    if environ.get(SPIN_VARIABLE):
        return False
    environ[SPIN_VARIABLE] = SHORT_SPIN
    return True


__all__ = ['SHORT_SPIN', 'SPIN_VARIABLE', 'short_blas_spin']
