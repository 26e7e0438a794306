"""The effort's timing against the angles: a driver's latency, a filter on the current.

A driver may stamp the effort a few milliseconds after the angles it goes with, or
filter the current before publishing it (a first-order filter at f_c lags by about
1 / (2π f_c)). The rigid body's torque then arrives late: the fit takes the lag for
friction and inertia, and the model is off by more the faster the arm moves. A user's
trial wrote a UR5 and a Panda 3-5 % off the true gravity with a 20 ms lag on a
0.3 Hz Fourier excitation, and 3.4 % off with a 5 Hz current filter on the default
0.1 Hz one, with no word, or with a torque constant blamed.

:func:`effort_lag` reads the lag from the fit's own samples: the measured torque, moved
in time by each lag of :data:`LAGS`, fitted joint by joint by the URDF's inverse dynamics
at the angles (a scale, a constant, viscous friction and Coulomb shapes of several
widths, :data:`WIDTHS`); the lag that leaves the least of the loaded joints' torque
unexplained. Right simulated records read 0 ms; records
lagged 5, 10 or 20 ms read within 2 ms of it, angles lagging the effort read negative.
The fit says it (:func:`lag_message`) when the lag read is at least :data:`MIN_LAG` and
explains the torque :data:`GAIN` times better than as recorded, and :data:`MIN_DROP` of
it more; ``--effort-delay`` moves the effort back by it.
"""

import numpy as np

from arm_dyn_id.validation.angle_convention import loaded_joints

#: s: the lags tried, effort after the angles positive
LAGS = np.arange(-50, 51, 2) / 1000.0
#: s: the least lag said
MIN_LAG = 0.004
#: ... when, moved by it, the torque is this many times better explained than as recorded
GAIN = 1.2
#: ... and by at least this share of the loaded joints' torque (right records whose
#: friction rises slowly, shifted with direction, read 12-18 ms at 1.22-1.25x, but of
#: 0.1 % of the torque unexplained: 0.02 % less; a UR5's 20 Hz current filter, 3.7 %
#: off at 0.3 Hz, 0.09 % less)
MIN_DROP = 0.0005
#: samples of the fit's the lags are read on (spread over the recording)
ROWS = 1500
#: rad/s: the widths of the smooth Coulomb shapes fitted beside the URDF's torque (a
#: friction that rises over 0.1-0.4 rad/s, shifted with direction, is no lag: with the
#: narrowest alone, a Panda's read 28 ms)
WIDTHS = (0.01, 0.1, 0.3)


def _unexplained(moved, g, v):
    """Per loaded joint, the share of each lag's torque (``moved[j]``: (M, lags)) that the
    URDF's ``g`` (a scale), a constant, viscous friction in ``v`` and Coulomb shapes of
    :data:`WIDTHS` leave, least squares: (loaded joints, lags); and which joints are
    loaded (the URDF's torque varies by more than 5 % of the most loaded joint's)."""
    loaded = np.flatnonzero(loaded_joints(g))
    shares = []
    for j in loaded:
        X = np.column_stack([g[:, j], np.ones(len(g)), v[:, j]] +
                            [np.tanh(v[:, j] / w) for w in WIDTHS])
        basis = np.linalg.qr(X)[0]          # the same columns at every lag: one QR
        y = moved[j]
        left = y - basis @ (basis.T @ y)
        tss = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
        shares.append(np.where(tss > 0, (left ** 2).sum(axis=0) / np.maximum(tss, 1e-300),
                               1.0))
    return np.array(shares), loaded


def effort_lag(t, measured, nominal, velocity):
    """``(lag s, unexplained share at the lag, as recorded)``: the lag of :data:`LAGS` by
    which the ``measured`` torque (N, n), moved back in time, is best explained by the
    URDF's ``nominal`` torque (N, n) at the angles with friction fitted apart (``velocity``
    q̇, (N, n)); None when it cannot be read (too few samples, no loaded joint).

    ``t`` (N,) s, increasing: the samples' times; the measured torque is interpolated at
    ``t + lag`` (the samples within the largest lag of either end are not used)."""
    t = np.asarray(t, dtype=float)
    y, g = np.asarray(measured, dtype=float), np.asarray(nominal, dtype=float)
    v = np.asarray(velocity, dtype=float)
    edge = float(np.abs(LAGS).max())
    rows = np.flatnonzero(np.all(np.isfinite(g) & np.isfinite(v), axis=1) &
                          (t > t[0] + edge) & (t < t[-1] - edge))
    finite = np.all(np.isfinite(y), axis=1)
    if len(rows) < 50 or finite.sum() < 50:
        return None
    rows = rows[::max(1, len(rows) // ROWS)]
    at = (t[rows][:, None] + LAGS[None, :]).ravel()
    tf = t[finite]
    moved = [np.interp(at, tf, y[finite, j]).reshape(len(rows), len(LAGS))
             for j in range(y.shape[1])]
    share, loaded = _unexplained(moved, g[rows], v[rows])
    if not len(loaded):
        return None
    shares = share.mean(axis=0)
    best = int(np.argmin(shares))
    return float(LAGS[best]), float(shares[best]), float(shares[np.argmin(np.abs(LAGS))])


def lag_message(lag, best, recorded):
    """The fit's warning of a lag :func:`effort_lag` read, or None when it says nothing."""
    if lag is None or abs(lag) < MIN_LAG or not (recorded >= GAIN * best and
                                                 recorded - best >= MIN_DROP):
        return None
    ms = 1000.0 * lag
    which = (f'the effort lags the angles by about {ms:.0f} ms' if lag > 0 else
             f'the angles lag the effort by about {-ms:.0f} ms')
    return (f'{which}: moved by it, the URDF\'s torque leaves {100 * best:.2g} % of the '
            f'loaded joints\' torque unexplained, as recorded {100 * recorded:.2g} % (a '
            'driver\'s latency, a filter on the current: a first-order filter at f_c lags '
            'by 1/(2π f_c)). The fit takes a lag for friction and inertia, more the faster '
            f'the arm moves: fit again with --effort-delay {lag:.3f}')


__all__ = ['GAIN', 'LAGS', 'MIN_DROP', 'MIN_LAG', 'WIDTHS', 'effort_lag', 'lag_message']
