"""What a command says while it works: progress bars, and the warning for a lossy bag.

On a terminal (a real pseudo-terminal here) a bar is one line redrawn with ``\\r``;
through a pipe the same figures come as plain lines. 100 % appears only at the end,
and the time left is sane from the first updates. Every command that reads a bag
(check, fit, validate) says in one line when it holds less than 99 % of the
samples its rate calls for.
"""

import io
import json
import os
from pathlib import Path
import pty
import re
import select
import subprocess
import sys

import numpy as np
import pytest

from arm_bags import Arm, write_arm_bag
from arm_dyn_id.cli.bags import describe_quality
from arm_dyn_id.cli.progress import Progress
from arm_dyn_id.data.bag_writer import write_bag
from arm_dyn_id.data.quality import delivered_fraction, loss_warning, stream_quality

ROOT = Path(__file__).resolve().parent.parent
HUMANOID = ROOT / 'urdf' / 'humanoid_arm.urdf'

#: a child process that drives a Progress the way a command does: a phase, a bar of
#: 40 updates with a phase line in the middle, a phase after it
DRIVER = '''
import sys
from arm_dyn_id.cli.progress import Progress
p = Progress(interval=float(sys.argv[1]))
p.phase('opening')
bar = p.bar('reading')
for i in range(1, 41):
    bar(i, 40)
    if i == 20:
        p.phase('a note while reading')
p.phase('read 40 chunks')
'''


def run_in_pty(argv, timeout=120.0, env=None, columns=None):
    """Run ``argv`` with stdout and stderr on a new pseudo-terminal; returns (code, text)."""
    master, slave = pty.openpty()
    if columns is not None:
        import fcntl
        import struct
        import termios
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                            cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                proc.kill()
                raise AssertionError(f'{argv} printed nothing for {timeout} s')
            try:
                data = os.read(master, 65536)
            except OSError:         # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        code = proc.wait(timeout=timeout)
    # the terminal turns \n into \r\n; keep the \r the program wrote
    return code, b''.join(chunks).decode().replace('\r\n', '\n')


def bar_percents(text):
    return [int(m) for m in re.findall(r'reading \[[# ]*\] +(\d+) %', text)]


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


# ---------------------------------------------------------------------------
# the bar itself

def test_bar_on_a_terminal_is_one_line_redrawn_in_place():
    code, text = run_in_pty([sys.executable, '-c', DRIVER, '5'])
    assert code == 0, text
    lines = text.split('\n')
    # the phase lines are whole lines; the bar is drawn with \r on its own line
    assert re.fullmatch(r'\[ +[\d.]+ s\] opening', lines[0]), lines[0]
    bar_line = next(line for line in lines if 'reading [' in line and '100 %' in line)
    draws = [d for d in bar_line.split('\r') if d.strip()]
    assert len(draws) >= 5, f'the bar was not redrawn in place: {bar_line!r}'
    assert all(d.startswith('reading [') for d in draws), draws
    # the note went above the bar, which was then drawn again
    assert any(re.search(r'\[ +[\d.]+ s\] a note while reading$', line) for line in lines)
    percents = bar_percents(text)
    assert percents == sorted(percents), percents
    assert percents.count(100) == 1 and percents[-1] == 100, percents
    first_draw = lines[1].split('\r')[1]
    assert first_draw.startswith('reading [') and first_draw.endswith('time left ...')
    assert lines[-2].endswith('read 40 chunks'), lines[-2:]


def test_bar_fits_a_narrow_terminal():
    """40 columns: the bar gets shorter so that percent and time stay on the line (a line
    longer than the terminal would wrap, and \r would redraw only its last part)."""
    driver = ('from arm_dyn_id.cli.progress import Progress\n'
              'bar = Progress().bar("design")\n'
              'for i in range(1, 11):\n'
              '    bar(i, 10, note="best objective 0.0163214")\n')
    code, text = run_in_pty([sys.executable, '-c', driver], columns=40)
    assert code == 0, text
    draws = [d for d in text.replace('\n', '\r').split('\r') if d]
    assert len(draws) == 10, draws
    assert all(len(d) <= 39 for d in draws), draws
    # percent and elapsed time are on every draw, however short the bar became
    assert all(re.match(r'design \[#* *\] +\d+ %  [\d.]+ s', d) for d in draws), draws
    assert draws[-1].startswith('design [') and ' 100 % ' in draws[-1]


def test_bar_through_a_pipe_is_plain_lines():
    done = subprocess.run([sys.executable, '-c', DRIVER, '0'], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '\r' not in done.stderr
    lines = done.stderr.splitlines()
    progress = [line for line in lines if line.startswith('reading')]
    assert len(progress) >= 5, lines
    percents = [int(re.match(r'reading +(\d+) %', line).group(1)) for line in progress]
    assert percents == sorted(percents) and percents[-1] == 100 and percents.count(100) == 1
    assert '[' not in ''.join(progress), 'a bar drawn into a pipe'
    assert lines[0].endswith('opening') and lines[-1].endswith('read 40 chunks')


def test_piped_lines_come_at_the_interval_not_per_update():
    clock, out = Clock(), io.StringIO()
    p = Progress(stream=out, tty=False, clock=clock, interval=5.0)
    bar = p.bar('fitting')
    for i in range(1, 101):
        clock.now += 0.2            # 20 s in all, an update every 0.2 s
        bar(i, 100)
    lines = out.getvalue().splitlines()
    # one line per 5 s of work and the end, not 100 lines
    assert 4 <= len(lines) <= 5, lines
    assert lines[-1].startswith('fitting 100 %')


def test_percent_is_never_rounded_up_to_100():
    out = io.StringIO()
    p = Progress(stream=out, tty=True, clock=Clock())
    bar = p.bar('reading')
    bar(9995, 10000)
    assert bar.percent == 99
    assert '100 %' not in out.getvalue()
    bar(10000, 10000)
    assert out.getvalue().count('100 %') == 1 and out.getvalue().endswith('\n')
    bar(10000, 10000)           # a second final call draws nothing more
    assert out.getvalue().count('100 %') == 1


def test_a_bar_left_short_ends_its_line_without_100():
    out = io.StringIO()
    p = Progress(stream=out, tty=True, clock=Clock())
    bar = p.bar('reading')
    bar(0.5)
    p.bar('fitting')(0.25)      # the next bar closes the first one where it stood
    text = out.getvalue()
    assert '100 %' not in text
    first, second = text.split('\n')
    assert first.startswith('\rreading [') and first.count('\r') == 1 and ' 50 %' in first
    assert second.startswith('\rfitting [') and ' 25 %' in second


def test_quiet_prints_no_progress_but_warnings():
    out = io.StringIO()
    p = Progress(stream=out, quiet=True, tty=True)
    p.phase('reading')
    assert p.bar('reading') is None
    p.warn('bag b holds only 90.0 % of the samples')
    assert out.getvalue() == 'warning: bag b holds only 90.0 % of the samples\n'


def test_time_left_is_sane_from_the_first_second():
    """10 s of setup before the first update (opening a bag, starting nodes), then 20 s of
    work at a steady rate: after one second of work the estimate is the 19 s left, not
    the (10 + 1) / 0.05 - 11 = 209 s an estimate from the command's start would say."""
    clock = Clock()
    p = Progress(stream=io.StringIO(), tty=True, clock=clock)
    bar = p.bar('identify')
    clock.now += 10.0
    bar(0.0)                     # the work starts
    assert bar.time_left() is None
    estimates = []
    for k in range(1, 11):       # updates every 0.1 s
        clock.now += 0.1
        bar(0.05 * 0.1 * k)
        estimates.append(bar.time_left())
    assert estimates[-1] == pytest.approx(19.0, rel=0.05)
    assert all(e == pytest.approx(20.0 - 0.1 * (k + 1), rel=0.05)
               for k, e in enumerate(estimates))


def test_time_left_follows_a_change_of_rate():
    """The rate of the last 10 s counts: halfway, the work slows to half speed; 15 s
    later the estimate is the new rate's, not the average since the start."""
    clock = Clock()
    p = Progress(stream=io.StringIO(), tty=True, clock=clock)
    bar = p.bar('sim')
    done = 0.0
    for _ in range(100):          # 10 s at 5 %/s
        clock.now += 0.1
        done += 0.005
        bar(done)
    for _ in range(150):          # 15 s at 2.5 %/s
        clock.now += 0.1
        done += 0.0025
        bar(done)
    assert bar.time_left() == pytest.approx((1.0 - done) / 0.025, rel=0.05)


# ---------------------------------------------------------------------------
# a real command on a terminal and through a pipe

@pytest.fixture(scope='module')
def user_bag(tmp_path_factory):
    """A plain 100 Hz bag (joint_states only) of the humanoid arm, and one with gaps."""
    tmp = tmp_path_factory.mktemp('bags')
    arm = Arm(HUMANOID)
    bag = write_arm_bag(tmp / 'complete', arm, seed=7, rate=100.0)
    # the same recording with 40 samples (0.4 s) lost every 400: 90 % delivered
    keep = (np.arange(len(bag.t)) % 400) >= 40
    current = bag.tau / bag.torque_constants
    gappy = write_bag(tmp / 'gappy', bag.t[keep], list(arm.joints), bag.q[keep],
                      current[keep])
    return bag, gappy


def test_check_on_a_terminal_draws_the_reading_bar(user_bag):
    bag, _ = user_bag
    code, text = run_in_pty([sys.executable, '-m', 'arm_dyn_id', 'check', str(bag.path),
                             '--urdf', str(HUMANOID), '--torque-constants', bag.k_text])
    assert code in (0, 3, 4), text
    assert '\rreading [' in text, text[:2000]
    percents = bar_percents(text)
    assert percents and percents[-1] == 100 and percents.count(100) == 1, percents
    assert re.search(r'\n\[ +[\d.]+ s\] read \d+ samples', text), text[:2000]
    assert 'warning:' not in text


def test_check_through_a_pipe_has_no_carriage_return(user_bag):
    bag, _ = user_bag
    done = subprocess.run([sys.executable, '-m', 'arm_dyn_id', 'check', str(bag.path),
                           '--urdf', str(HUMANOID), '--torque-constants', bag.k_text],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3, 4), done.stderr
    assert '\r' not in done.stdout + done.stderr
    assert re.search(r'^\[ +[\d.]+ s\] read \d+ samples', done.stderr, re.M), done.stderr


# ---------------------------------------------------------------------------
# the loss warning

def test_loss_warning_counts_what_was_lost():
    t = np.arange(0, 10.0, 0.001)                 # 1 kHz, 10 s
    assert loss_warning(stream_quality(t)) is None
    keep = np.ones(t.size, dtype=bool)
    keep[2000:6500] = False                        # one 4.5 s gap
    q = stream_quality(t[keep], expected_rate=1000.0, gap_threshold=0.002)
    assert delivered_fraction(q) == pytest.approx(0.55, abs=1e-3)
    line = loss_warning(q, what='bag b')
    assert line.startswith('bag b holds only 55.0 % of the samples expected at 1000 Hz')
    assert '~4500 missing in 1 gap, the longest 4.5 s' in line
    assert '\n' not in line
    assert '55.0 % delivered' in describe_quality(q)
    # 99.5 % is above the line
    keep = np.ones(t.size, dtype=bool)
    keep[5000:5050] = False
    assert loss_warning(stream_quality(t[keep])) is None


def test_delivered_fraction_of_added_counters():
    """Two bags' counters added up (fit of several bags): from the counters, not the first
    bag's fraction."""
    t = np.arange(0, 1.0, 0.001)
    full = stream_quality(t)
    half = stream_quality(t[::2], expected_rate=1000.0)
    total = dict(full)
    for key in ('accepted', 'nonfinite', 'drops'):
        total[key] = full[key] + half[key]
    assert delivered_fraction(total) == pytest.approx((1000 + 500) / 2000, abs=1e-3)


def test_several_bags_sum_their_delivered_fraction(user_bag):
    from arm_dyn_id.data.bag_reader import concatenate_recordings, read_bag
    from arm_dyn_id.data.motor import CurrentToTorque
    bag, gappy = user_bag
    conversion = CurrentToTorque(bag.joints, bag.torque_constants)
    recs = [read_bag(path, config=conversion) for path in (bag.path, gappy)]
    assert recs[0].quality['loaded']['delivered_fraction'] == 1.0
    both = concatenate_recordings(recs)
    q = both.quality['loaded']
    arrived = len(bag.t) + int(((np.arange(len(bag.t)) % 400) >= 40).sum())
    assert q['delivered_fraction'] == pytest.approx(arrived / (2 * len(bag.t)), abs=2e-3)
    assert q['delivered_fraction'] < 0.99


def _warnings(text):
    return [line for line in text.splitlines() if line.startswith('warning:')]


@pytest.mark.slow
def test_every_command_that_reads_a_bag_warns_of_losses(user_bag, tmp_path):
    """check, fit and validate each print one warning line for the bag with gaps (90 %
    delivered) and none for the complete one."""
    bag, gappy = user_bag
    arm_args = ['--urdf', str(HUMANOID), '--torque-constants', bag.k_text]

    def cli(*argv):
        done = subprocess.run([sys.executable, '-m', 'arm_dyn_id', *map(str, argv)],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        return done.returncode, done.stdout + done.stderr

    usage = cli('fit', '--help')[1]
    gravity = ['--dynamics', 'gravity'] if '--dynamics' in usage else []
    code, text = cli('fit', bag.path, *arm_args, '--out', tmp_path / 'fit', '--no-report',
                     *gravity)
    assert code == 0, text[-3000:]
    assert _warnings(text) == []
    model = tmp_path / 'fit' / 'model.yaml'

    runs = {
        'check': cli('check', gappy, *arm_args),
        'fit': cli('fit', gappy, *arm_args, '--out', tmp_path / 'fit2', '--no-report',
                   *gravity),
        'validate': cli('validate', model, gappy, *arm_args),
    }
    for command, (code, text) in runs.items():
        assert code in ((0, 3, 4) if command == 'check' else (0, 3)), f'{command}: {text}'
        found = _warnings(text)
        assert len(found) == 1, f'{command}: {found}\n{text[-2000:]}'
        assert re.match(rf'warning: bag {re.escape(str(gappy))} holds only 9\d\.\d % of the '
                        r'samples expected at 100 Hz', found[0]), found[0]
    summary = json.loads((tmp_path / 'fit2' / 'validation.json').read_text())['fit_summary']
    assert delivered_fraction(summary['quality']) < 0.99


def test_demo_progress_follows_the_simulated_time_of_the_diagnostics():
    """The demo's line: no NaN before the first simulated second, then the share of the
    plan and a finite time left, from the simulator's diagnostics stamps (the monitor
    does not follow /clock)."""
    pytest.importorskip('rclpy')
    import time
    from types import SimpleNamespace
    from arm_dyn_id.nodes.demo_pipeline import _progress_line
    monitor = SimpleNamespace(sim_now=0.0, markers=[], fit_status=None)
    first = _progress_line(monitor, 100.0, 0.0, time.monotonic() - 1.0)
    assert 'nan' not in first and '0.0 %' in first and '?' in first
    monitor.sim_now = 1000.0 + 25.0
    monitor.markers = [{'phase': 'sweep', 'joint': 'joint_3', 'direction': -1}]
    line = _progress_line(monitor, 100.0, 1000.0, time.monotonic() - 10.0)
    assert ' 25.0 %' in line and 'sweep joint_3 -' in line
    left = float(re.search(r'time left ~\s*(\d+) s', line).group(1))
    assert 25 <= left <= 35      # 75 s of plan at 2.5 simulated s per wall second
