"""arm_dyn_id/process_exit.py and ``arm_dyn_id.cli.run``: a finished command ends without
the interpreter's teardown (0.3-0.8 s of freeing modules), its output flushed and its exit
handlers run; with another thread still working it exits normally, after that thread."""

import os
import subprocess
import sys
import textwrap

from arm_dyn_id.process_exit import COVERAGE_VARIABLES


def run_script(code, tmp_path, env=None):
    script = tmp_path / 'script.py'
    script.write_text(textwrap.dedent(code))
    # coverage's variables only as the test gives them (not inherited from a measured run)
    env = {**{k: v for k, v in os.environ.items() if k not in COVERAGE_VARIABLES},
           **(env or {})}
    return subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env)


# an object freed by the teardown says so; an exit handler leaves a file
PRELUDE = '''
    import atexit, pathlib, sys, threading, time
    out = pathlib.Path(sys.argv[1])

    class Freed:
        def __del__(self):
            sys.stderr.write('freed by the teardown\\n')
    KEPT = Freed()
    atexit.register(lambda: (out / 'exit_handler_ran').write_text('yes'))
    sys.stdout.write('buffered, no newline')
'''


def test_end_process_skips_the_teardown_but_flushes_and_runs_the_exit_handlers(tmp_path):
    proc = run_script(PRELUDE + '''
    from arm_dyn_id.process_exit import end_process
    end_process(3)
    sys.stderr.write('not reached\\n')
    ''', tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == 'buffered, no newline'
    assert (tmp_path / 'exit_handler_ran').read_text() == 'yes'
    assert 'freed by the teardown' not in proc.stderr
    assert 'not reached' not in proc.stderr


def test_the_command_exits_normally_while_another_thread_works(tmp_path):
    proc = run_script(PRELUDE + '''
    import arm_dyn_id.cli as cli

    def work():
        time.sleep(0.2)
        (out / 'thread_done').write_text('yes')
    cli.main = lambda: (threading.Thread(target=work).start(), 5)[1]
    cli.run()
    ''', tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert (tmp_path / 'thread_done').read_text() == 'yes'
    assert 'freed by the teardown' in proc.stderr       # the normal exit


def test_the_command_alone_skips_the_teardown_and_coverage_keeps_it(tmp_path):
    body = PRELUDE + '''
    import arm_dyn_id.cli as cli
    cli.main = lambda: 4
    cli.run()
    '''
    proc = run_script(body, tmp_path)
    assert proc.returncode == 4 and proc.stdout == 'buffered, no newline', proc.stderr
    assert 'freed by the teardown' not in proc.stderr
    # measured by coverage.py: the normal exit, which saves its data
    proc = run_script(body, tmp_path, env={'COVERAGE_PROCESS_START': str(tmp_path / 'none')})
    assert proc.returncode == 4, proc.stderr
    assert 'freed by the teardown' in proc.stderr
