"""The private ROS domain of a run (nodes/ros_domain.py): a domain one process claims is
never claimed by another, nodes that inherit the claim keep it after their parent is
killed, and the demo runs on a claimed domain, never on the caller's ``ROS_DOMAIN_ID``
(a CI run's demo once shared a random domain with a test's nodes: each run drove the
other's arm)."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from arm_dyn_id.nodes.ros_domain import DOMAIN_RANGE, claim_domain, lock_dir


def _locked_elsewhere(domain):
    """True when the lock of ``domain`` is held by some process (this one included)."""
    code = textwrap.dedent(f'''
        import fcntl, sys
        handle = open({str(lock_dir() / f"{domain}.lock")!r}, 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(3)
        sys.exit(0)
    ''')
    rc = subprocess.run([sys.executable, '-c', code], timeout=60).returncode
    assert rc in (0, 3), rc
    return rc == 3


def test_a_claimed_domain_is_held_until_released():
    claim = claim_domain()
    try:
        assert claim.domain_id in DOMAIN_RANGE and claim.domain_id != 0
        assert _locked_elsewhere(claim.domain_id)
        # a second claim of this process takes another domain
        with claim_domain() as other:
            assert other.domain_id != claim.domain_id
    finally:
        claim.release()
    assert not _locked_elsewhere(claim.domain_id)


def test_nodes_that_inherit_the_claim_hold_it_after_their_parent_is_killed(tmp_path):
    """A demo killed with SIGKILL leaves its nodes running on the domain: the domain must
    stay claimed while they live, and be free once they end."""
    parent = textwrap.dedent('''
        import subprocess, sys, time
        from arm_dyn_id.nodes.ros_domain import claim_domain
        claim = claim_domain()
        # the "node": lives until its stdin (the test's pipe) closes
        child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],
                                 stdin=sys.stdin, pass_fds=[claim.fileno()],
                                 start_new_session=True)
        print(claim.domain_id, flush=True)
        time.sleep(600)
    ''')
    proc = subprocess.Popen([sys.executable, '-c', parent], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        domain = int(proc.stdout.readline().split()[0])
        assert _locked_elsewhere(domain)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        # the parent is gone; the node still holds the domain
        assert _locked_elsewhere(domain)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()      # the node reads end of file and exits
    _wait_free(domain)


def _wait_free(domain, timeout=60.0):
    """Wait until the node has exited and closed the lock (it is not our child: polled)."""
    deadline = time.monotonic() + timeout
    while _locked_elsewhere(domain):
        if time.monotonic() > deadline:
            pytest.fail(f'domain {domain} still claimed {timeout} s after its node was told '
                        'to exit')
        time.sleep(0.05)


def test_the_demo_runs_on_its_claimed_domain_not_the_callers(monkeypatch, tmp_path):
    from arm_dyn_id.nodes.demo_pipeline import demo_environment
    monkeypatch.setenv('ROS_DOMAIN_ID', '0')        # a real arm's graph
    with claim_domain() as claim:
        env = demo_environment(tmp_path, claim.domain_id)
    assert env['ROS_DOMAIN_ID'] == str(claim.domain_id) != '0'
    assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'


def test_flock_is_per_open_file():
    """What the claim relies on: two opens of one lock file in one process exclude each
    other (a process's second claim cannot take its own first domain)."""
    with claim_domain() as claim:
        handle = open(lock_dir() / f'{claim.domain_id}.lock', 'w')
        try:
            with pytest.raises(OSError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            handle.close()
