"""A storm of SIGINTs to a node's stop request: the first one asks to stop, every later
one is ignored, and none of them can hang or crash the process. (The request used to
be a threading.Event: a second signal whose handler ran inside the first handler's
Event.set waited forever for the Event's own lock, and once hung identifier_node in a
double-SIGINT run of test_shutdown.)"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip('rclpy')

ROOT = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent('''
    import sys, time
    from arm_dyn_id.nodes.executors import StopRequest
    stop = StopRequest().install()
    print('ready', flush=True)
    while not stop.is_set():
        time.sleep(0.001)
    end = time.monotonic() + 1.0     # Python keeps running while the storm goes on
    while time.monotonic() < end:
        stop.is_set()
    print('survived', int(stop.signal), flush=True)
''')


@pytest.mark.parametrize('attempt', range(3))
def test_a_storm_of_sigints_neither_hangs_nor_crashes(attempt):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
    proc = subprocess.Popen([sys.executable, '-c', CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == 'ready', proc.stderr.read()
        end = time.monotonic() + 0.6
        while time.monotonic() < end and proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert f'survived {int(signal.SIGINT)}' in out, err[-3000:]
