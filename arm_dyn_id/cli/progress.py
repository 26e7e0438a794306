"""What a command says while it works: phase lines and progress bars (stderr).

Argument parsing and printing only: the work is in the lower wings.
"""

import sys
import time


class Progress:
    """What a command says while it works: phase lines and progress bars.

    On a terminal a bar is one line redrawn in place (``\\r``):
    ``reading [#########               ]  38 %  2.0 s, ~3.3 s left``; piped or
    redirected, the same figures come as plain lines, one every ``interval``
    seconds, so a log holds no carriage returns. A phase line printed while a
    bar is drawn goes above it. 100 % is shown only when the work is done
    (``done >= total`` or :meth:`_Bar.finish`), never rounded up.

    The time left is the work left over the rate of the bar's recent updates
    (the last ``_Bar.window`` seconds, from its first update on): what happened
    before the bar's first update (opening a file, starting processes) does not
    distort it, and it is there from the second update on.

    Parameters
    ----------
    stream : file, optional
        Default ``sys.stderr``.
    quiet : bool
        No output at all.
    tty : bool, optional
        Draw bars in place; default: whether ``stream`` is a terminal.
    clock : callable, optional
        Monotonic seconds (default :func:`time.monotonic`).
    interval : float
        Seconds between two plain progress lines when not on a terminal.
    """

    def __init__(self, stream=None, quiet=False, tty=None, clock=None, interval=5.0):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, 'isatty', lambda: False)()) if tty is None \
            else bool(tty)
        self.clock = clock or time.monotonic
        self.interval = float(interval)
        self._t0 = self.clock()
        self._bar = None        # the open bar, if any

    def phase(self, text):
        """One line: ``[   12.3 s] text`` (seconds since the command started)."""
        if self.quiet:
            return
        bar = self._bar if self.tty else None
        if bar is not None:
            bar._erase()
        print(f'[{self.clock() - self._t0:7.1f} s] {text}', file=self.stream, flush=True)
        if bar is not None:
            bar._draw()

    def warn(self, text):
        """``warning: text`` on a line of its own, also when quiet."""
        bar = self._bar if self.tty and not self.quiet else None
        if bar is not None:
            bar._erase()
        print(f'warning: {text}', file=self.stream, flush=True)
        if bar is not None:
            bar._draw()

    def bar(self, label, width=24):
        """A progress bar, called as ``bar(done, total)`` or ``bar(fraction)``.

        Returns None when quiet. A bar ends when ``done`` reaches ``total``, on
        ``bar.finish()`` (the work is done) or ``bar.close()`` (it stopped
        short), or when the next bar starts.
        """
        if self.quiet:
            return None
        if self._bar is not None:
            self._bar.close()
        self._bar = _Bar(self, label, width)
        return self._bar


def _columns(stream):
    """The terminal's width (80 when it cannot be told)."""
    import os
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80


def _duration(seconds):
    """``4.2 s``, ``42 s``, ``3 min 05 s``, ``2 h 10 min``."""
    if seconds < 59.5:
        return f'{seconds:.1f} s' if seconds < 9.95 else f'{seconds:.0f} s'
    seconds = round(seconds)
    if seconds < 3600:
        return f'{seconds // 60} min {seconds % 60:02d} s'
    return f'{seconds // 3600} h {seconds % 3600 // 60:02d} min'


class _Bar:
    """One progress bar of :class:`Progress` (see there)."""

    #: seconds of recent updates the rate is measured over
    window = 10.0
    #: a terminal bar is redrawn at most this often (s) unless its percent changed
    redraw = 0.25

    def __init__(self, progress, label, width):
        self._p, self.label, self.width = progress, label, width
        self.t0 = progress.clock()
        self.done, self.total = 0.0, 1.0
        self.closed = False
        self._history = []          # (time, done) of the updates, the last `window` s
        self._last = (self.t0, -1)  # (time, percent) of the last line drawn or printed
        self._shown = ''            # the terminal line as drawn
        self._printed = False       # a plain progress line was printed
        self.note = ''              # shown after the figures (what is being done)

    def __call__(self, done, total=1.0, note=None):
        """Update: ``done`` of ``total`` (any unit); ``note`` is shown after the figures."""
        if self.closed:
            return
        now = self._p.clock()
        self.done, self.total = float(done), float(total)
        if note is not None:
            self.note = str(note)
        history = self._history
        history.append((now, self.done))
        while len(history) > 2 and now - history[1][0] >= self.window:
            history.pop(0)
        if self.total <= 0 or self.done >= self.total:
            self.finish()
            return
        since, shown = self._last
        percent = self.percent
        if self._p.tty:
            if percent != shown or now - since >= self.redraw:
                self._emit(now)
        elif now - since >= self._p.interval and percent != shown:
            self._emit(now)

    @property
    def percent(self):
        """Whole percent done, rounded down: 100 only when done >= total."""
        if self.total <= 0 or self.done >= self.total:
            return 100
        return min(99, max(0, int(100.0 * self.done / self.total)))

    def time_left(self):
        """Seconds left at the rate of the recent updates; None before two updates."""
        if len(self._history) < 2:
            return None
        (t_a, d_a), (t_b, d_b) = self._history[0], self._history[-1]
        if t_b <= t_a or d_b <= d_a:
            return None
        return max(0.0, (self.total - self.done) * (t_b - t_a) / (d_b - d_a))

    def text(self, now, bar=True, width=None):
        """``label [####    ]  41 %  2.0 s, ~2.9 s left`` (no bar: a plain line)."""
        parts = [self.label]
        if bar:
            width = self.width if width is None else width
            fill = width * self.percent // 100
            parts.append(f'[{"#" * fill}{" " * (width - fill)}]')
        parts.append(f'{self.percent:3d} %  {_duration(now - self.t0)}')
        if self.percent < 100:
            left = self.time_left()
            parts[-1] += ', time left ...' if left is None else f', ~{_duration(left)} left'
            if self.note:
                parts.append(f'  {self.note}')
        return ' '.join(parts)

    def _emit(self, now):
        self._last = (now, self.percent)
        if self._p.tty:
            room = max(_columns(self._p.stream) - 1, 20)
            line = self.text(now)
            if len(line) > room:     # a narrow terminal: a shorter bar, then cut the end
                line = self.text(now, width=max(self.width - (len(line) - room), 8))
            self._shown = line[:room]
            self._draw()
        else:
            self._printed = True
            print(self.text(now, bar=False), file=self._p.stream, flush=True)

    def _draw(self):
        if self._shown:
            self._p.stream.write('\r' + self._shown)
            self._p.stream.flush()

    def _erase(self):
        if self._shown:
            self._p.stream.write('\r' + ' ' * len(self._shown) + '\r')
            self._p.stream.flush()

    def finish(self):
        """The work is done: 100 % (on a terminal, or piped after progress lines).

        A bar that never had an update stays silent.
        """
        if self.closed:
            return
        self.done = max(self.done, self.total)
        if self._history and (self._p.tty or self._printed):
            self._emit(self._p.clock())
        self.close()

    def close(self):
        """End the bar where it stands; a terminal line is left on a line of its own."""
        if self.closed:
            return
        self.closed = True
        if self._p._bar is self:
            self._p._bar = None
        if self._p.tty and self._shown:
            self._p.stream.write('\n')
            self._p.stream.flush()
