"""Whether the velocity a driver publishes is the rate of its angles.

The fits never use ``JointState.velocity`` (they differentiate the angles), but the
residual and contact detection do when the messages carry it, and a driver's velocity
can be wrong while its angles are right: all zeros, in degrees per second, of the
opposite sign on one joint, or the commanded rather than the measured one. Each gave
false contact episodes with no word.

The check compares, per joint, the displacement the velocity integrates to with the
one the angles show, over windows of :data:`WINDOW` s (robust to encoder noise and to
a velocity filtered or late by a few samples): their gain (least squares over the
windows) and correlation. A joint is judged once its angles have travelled
:data:`MIN_PATH` rad (summed over the windows); it disagrees when the gain is outside
:data:`GAIN_RANGE` or the correlation below :data:`MIN_CORRELATION`.
:func:`judge` does it over a recording; :class:`VelocityCheck` over a live stream, one
sample at a time, with the same sums.
"""

import numpy as np

from arm_dyn_id.data import angles

#: s, the windows over which displacements are compared
WINDOW = 0.5
#: rad: the angles' travel (sum of |displacement| over windows) a joint needs to be judged
MIN_PATH = 0.2
#: the velocity's displacement against the angles' that a right velocity gives
GAIN_RANGE = (0.8, 1.25)
MIN_CORRELATION = 0.9


def _verdict(joints, sums):
    """(joint, what is wrong) of the joints that disagree (empty: none), from the window
    sums ``(vq, qq, vv, path)``, each (n,)."""
    vq, qq, vv, path = sums
    bad = []
    for j, name in enumerate(joints):
        if path[j] < MIN_PATH or qq[j] <= 0:
            continue
        gain = vq[j] / qq[j]
        rho = vq[j] / np.sqrt(qq[j] * vv[j]) if vv[j] > 0 else 0.0
        if GAIN_RANGE[0] <= gain <= GAIN_RANGE[1] and rho >= MIN_CORRELATION:
            continue
        if vv[j] <= 1e-6 * qq[j]:
            what = 'zero while the angle moves'
        elif rho <= -MIN_CORRELATION:
            what = f'of the opposite sign (x{gain:.3g})'
        elif rho >= MIN_CORRELATION:
            what = f'x{gain:.3g} the rate of the angle' + (
                ' (degrees per second?)' if 45 < gain < 70 else '')
        else:
            what = f'not following the angle (correlation {rho:.2f})'
        bad.append((name, what))
    return bad


def sentence(bad):
    """The user's sentence for the joints :func:`judge` names (None when none)."""
    if not bad:
        return None
    by_what = {}
    for name, what in bad:
        by_what.setdefault(what, []).append(name)
    parts = [f'{", ".join(names)}: {what}' for what, names in by_what.items()]
    return ("the messages' velocity is not the rate of their angles (" + '; '.join(parts) +
            f'; their displacements over {WINDOW:g} s windows compared): it is not used, '
            'velocities are estimated from the angles')


def _steps(t, q, dq, max_gap, t0):
    """Per step between samples, those kept: the index of its end sample, its window
    (counted from ``t0``), the angles' and the velocity's displacement; steps across a
    gap or without a finite velocity are left out."""
    dt = np.diff(t)
    dq_q = angles.step(q[1:], q[:-1])
    dq_v = (dq[1:] + dq[:-1]) * (0.5 * dt[:, None])
    window = np.floor((t[1:] - t0) / WINDOW).astype(np.int64)
    ok = (dt > 0) & (dt <= max_gap) & np.isfinite(dq_v).all(axis=1)
    ends = np.flatnonzero(ok) + 1
    if ok.all():
        return ends, window, dq_q, dq_v
    return ends, window[ok], dq_q[ok], dq_v[ok]


def window_sums(t, q, dq, max_gap=0.05):
    """Per joint, over the windows: Σ Dv·Dq, Σ Dq², Σ Dv² and Σ |Dq| (4, n), Dq and Dv
    each window's displacement of the angles and of the integrated velocity; None when
    no step has a finite velocity. :func:`judge` reads its gain (Σ Dv·Dq / Σ Dq²) and
    correlation from them.

    Parameters
    ----------
    t : ndarray, (N,)
        s, increasing.
    q, dq : ndarray, (N, n)
        rad (continuous or wrapped within one turn), rad/s (NaN where absent).
    max_gap : float
        s: longer steps are no displacement of either.
    """
    if dq is None or len(t) < 2 or not np.isfinite(dq).any():
        return None
    t, q, dq = (np.asarray(a, dtype=float) for a in (t, q, dq))
    _, window, dq_q, dq_v = _steps(t, q, dq, max(max_gap, 0.0), t[0])
    if not len(window):
        return None
    starts = np.flatnonzero(np.diff(window, prepend=window[0] - 1))   # windows: runs
    Dq, Dv = np.add.reduceat(dq_q, starts, axis=0), np.add.reduceat(dq_v, starts, axis=0)
    return np.array([(Dv * Dq).sum(0), (Dq * Dq).sum(0), (Dv * Dv).sum(0), np.abs(Dq).sum(0)])


def judge(joints, t, q, dq, max_gap=0.05):
    """The joints whose published velocity disagrees with their angles, (joint, what)
    pairs (empty when every judged joint agrees or when ``dq`` is None / all NaN);
    arguments as :func:`window_sums`."""
    sums = window_sums(t, q, dq, max_gap)
    return [] if sums is None else _verdict(joints, sums)


class VelocityCheck:
    """:func:`judge` over a live stream: windows closed as samples arrive.

    Samples without a finite velocity are passed over. A step from the last sample
    with one, no longer than ``max_gap``, adds to the window of its end; the window
    closes at the first step of a later one, and the joints are judged on every window
    closed so far. The messages' velocity is used until a joint is found to disagree
    (:attr:`rejected`, said in :attr:`note`), from the sample that closed that window on
    (a wrong velocity has by then moved the residual for the few windows of motion the
    check needs: the whole recording is judged before it is used offline,
    :func:`judge`). Estimating it from the angles until the check has seen enough was
    tried and not kept: on a right arm that holds a pose, never judged, the pushes were
    flagged up to 52 ms later (the real UR10e). :meth:`update` returns the velocity to use (None:
    estimate it); :meth:`run` does the same over many samples at once, with the same
    result.
    """

    def __init__(self, joints, max_gap=0.05):
        self.joints = tuple(joints)
        self.max_gap = float(max_gap)
        n = len(self.joints)
        self._sums = np.zeros((4, n))
        self._open = np.zeros((2, n))
        self._window = None
        self._t0 = self._last = None
        self.note = None

    @property
    def rejected(self):
        return self.note is not None

    def update(self, t, q, dq):
        """One sample (t s, q (n,) rad, dq (n,) rad/s or None): the velocity to use, or
        None (estimate it from q)."""
        if self.rejected or dq is None or not np.isfinite(dq).all():
            return None             # (a sample without a finite velocity: estimated)
        if self._last is None:
            self._t0 = t
        else:
            t_prev, q_prev, dq_prev = self._last
            dt = t - t_prev
            if 0 < dt <= self.max_gap:
                window = int(np.floor((t - self._t0) / WINDOW))
                if window != self._window:
                    self._close()
                    self._window = window
                self._open[0] += angles.step(q, q_prev)
                self._open[1] += 0.5 * (dq + dq_prev) * dt
        self._last = (t, q, dq)
        return None if self.rejected else dq

    def _close(self):
        if self._window is None:
            return
        Dq, Dv = self._open
        self._sums += (Dv * Dq, Dq * Dq, Dv * Dv, np.abs(Dq))
        self._open = np.zeros_like(self._open)
        self.note = sentence(_verdict(self.joints, self._sums))

    def run(self, t, q, dq):
        """:meth:`update` over samples (N,), (N, n), (N, n) or None: the first row whose
        velocity is not used (N when none is refused), the state left as update leaves
        it."""
        N = len(t)
        if self.rejected:
            return 0
        if dq is None or N == 0:
            return N
        rows = np.flatnonzero(np.isfinite(dq).all(axis=1))
        if not len(rows):
            return N
        tt = np.asarray(t, dtype=float)[rows]
        qq, vv = np.asarray(q, dtype=float)[rows], np.asarray(dq, dtype=float)[rows]
        if self._last is None:
            self._t0 = float(tt[0])
        else:       # the step from the sample seen last
            tt = np.concatenate([[self._last[0]], tt])
            qq = np.concatenate([self._last[1][None], qq])
            vv = np.concatenate([self._last[2][None], vv])
            rows = np.concatenate([[-1], rows])
        self._last = (float(tt[-1]), qq[-1], vv[-1])
        ends, window, Dq, Dv = _steps(tt, qq, vv, self.max_gap, self._t0)
        if not len(ends):
            return N
        before = -1 if self._window is None else self._window
        new = np.flatnonzero(window != np.concatenate([[before], window[:-1]]))
        bounds = np.unique(np.concatenate([[0], new, [len(ends)]]))
        for a, b in zip(bounds[:-1], bounds[1:]):
            if window[a] != (before if a == 0 else window[a - 1]):
                self._close()
                if self.rejected:
                    return int(rows[ends[a]])       # the sample that closed it
                self._window = int(window[a])
            self._open[0] += Dq[a:b].sum(axis=0)
            self._open[1] += Dv[a:b].sum(axis=0)
        return N
