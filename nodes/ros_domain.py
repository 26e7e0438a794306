"""A private ROS domain for the node processes one run starts.

The demo (and every test that starts nodes) runs its own sim, excitation, recorder and
identifier nodes. On a shared ROS domain they would answer another run's service calls
and read another run's joint states: one CI run's demo called ``/excitation_node/start``
and was told 'already running' by a test's node, whose arm then followed the demo's
simulator and stopped on its tracking error. A domain picked at random (1 in 101) is
not enough when a dozen runs overlap.

:func:`claim_domain` takes a ``ROS_DOMAIN_ID`` in 1..101 that no other arm_dyn_id run on
this machine holds, through an exclusive ``flock`` on
``<tmp>/arm_dyn_id_domains/<id>.lock``. The lock belongs to the open file of the claiming
process; it is released by :meth:`DomainClaim.release` or when that process and every
process it passed the file to (:meth:`DomainClaim.fileno`, the demo's nodes) have ended,
however they end. Domain 0, the default of every ROS install, is never claimed: the demo
never joins the graph of a real arm.
"""

import fcntl
import itertools
import os
import tempfile
from pathlib import Path

#: Domains claimed: 0 is everybody's default, and Fast DDS on Linux allows up to 232.
DOMAIN_RANGE = range(1, 102)
_counter = itertools.count()


def lock_dir():
    """The folder of the lock files (one per claimed domain)."""
    return Path(tempfile.gettempdir()) / 'arm_dyn_id_domains'


class DomainClaim:
    """A claimed domain id; ``release()`` (or the end of a ``with`` block) frees it."""

    def __init__(self, domain_id, handle):
        self.domain_id = domain_id
        self._handle = handle

    def fileno(self):
        """The lock file's descriptor: a process that inherits it (``pass_fds``) holds the
        claim with this one until both have closed it."""
        return self._handle.fileno()

    def release(self):
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def claim_domain():
    """Claim a free ``ROS_DOMAIN_ID`` in :data:`DOMAIN_RANGE`.

    Raises
    ------
    RuntimeError
        When every domain in the range is held by another run.
    """
    folder = lock_dir()
    folder.mkdir(exist_ok=True)
    # different processes start at different ids, so that they rarely try the same one
    start = (os.getpid() * 7 + next(_counter)) % len(DOMAIN_RANGE)
    for k in range(len(DOMAIN_RANGE)):
        domain = DOMAIN_RANGE[(start + k) % len(DOMAIN_RANGE)]
        handle = open(folder / f'{domain}.lock', 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return DomainClaim(domain, handle)
    raise RuntimeError(f'every ROS domain id {DOMAIN_RANGE.start}..{DOMAIN_RANGE.stop - 1} '
                       f'is held by another arm_dyn_id run (locks in {folder})')
