"""Stream quality counters for high-rate sampled topics (1 kHz joint states).

:class:`StreamQuality` looks at one stamp per sample, in arrival order, in O(1)
time and memory, and counts what makes data unfit for identification: gaps,
dropped samples inferred from the stamp spacing, duplicates, stamps going
backwards, non-finite values and rejected messages. :func:`stream_quality`
counts a whole recorded stream by the same rules, vectorised, and says which
samples are usable. :func:`loss_warning` is the one line every reader of a
recording gives when less than :data:`MIN_DELIVERED` of the expected samples
arrived.
"""

import numpy as np

#: share of the expected samples below which a recording is reported as lossy
MIN_DELIVERED = 0.99


class StreamQuality:
    """Running counters of one sampled stream.

    Parameters
    ----------
    expected_rate : float
        Nominal sample rate (Hz); drops are inferred at period ``1 / expected_rate``.
    gap_threshold : float
        A stamp step longer than this (s) counts as a gap (default 2 ms).

    Notes
    -----
    A step of ``dt`` seconds counts ``round(dt * expected_rate) - 1`` drops when
    it exceeds 1.5 periods. A step of zero is a duplicate, a negative step is
    out of order; neither moves the reference stamp forward. Drops counted well beyond
    the samples the span between the first and last stamps lacks at the expected rate
    are reported as that span's count (:func:`span_drops`): stamps that jitter around
    their period make long steps and short ones, and nothing is missing.
    """

    def __init__(self, expected_rate=1000.0, gap_threshold=0.002):
        if not expected_rate > 0:
            raise ValueError(f'expected_rate = {expected_rate} Hz must be > 0')
        if not gap_threshold > 0:
            raise ValueError(f'gap_threshold = {gap_threshold} s must be > 0')
        self.expected_rate = float(expected_rate)
        self.gap_threshold = float(gap_threshold)
        self._period = 1.0 / self.expected_rate
        self.reset()

    def reset(self):
        """Forget everything counted so far."""
        self.count = 0
        self.accepted = 0
        self.first_stamp = None
        self.last_stamp = None
        self.gaps = 0
        self.max_gap = 0.0
        self.drops = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.nonfinite = 0
        self.rejected = {}

    def update(self, stamp, values=None):
        """Count one sample.

        Parameters
        ----------
        stamp : float
            Sample time (s), from ``header.stamp``.
        values : array_like, optional
            The sample's values; any NaN or inf makes it non-finite.

        Returns
        -------
        bool
            True when the sample is usable: finite, not a duplicate and not out
            of order.
        """
        self.count += 1
        ok = True
        if values is not None and not np.isfinite(values).all():
            self.nonfinite += 1
            ok = False
        last = self.last_stamp
        if last is None:
            self.first_stamp = stamp
            self.last_stamp = stamp
        else:
            dt = stamp - last
            if dt > 0.0:
                if dt > self.gap_threshold:
                    self.gaps += 1
                if dt > self.max_gap:
                    self.max_gap = dt
                if dt > 1.5 * self._period:
                    self.drops += int(round(dt * self.expected_rate)) - 1
                self.last_stamp = stamp
            elif dt == 0.0:
                self.duplicates += 1
                ok = False
            else:
                self.out_of_order += 1
                ok = False
        if ok:
            self.accepted += 1
        return ok

    def reject(self, reason):
        """Count a message that could not be used at all (wrong lengths, no effort...)."""
        self.count += 1
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    @property
    def n_rejected(self):
        return sum(self.rejected.values())

    def summary(self):
        """Counters as a plain dict (JSON-ready).

        Returns
        -------
        dict
            ``messages`` (all counted), ``accepted``, ``duration_s``, ``rate_hz``,
            ``expected_rate_hz``, ``gaps`` (steps over ``gap_threshold_s``),
            ``max_gap_s``, ``drops``, ``delivered_fraction`` (accepted over
            accepted + drops), ``duplicates``, ``out_of_order``, ``nonfinite``,
            ``rejected`` (reason -> count), ``first_stamp``, ``last_stamp``.
        """
        stamped = self.count - self.n_rejected
        duration = 0.0 if self.first_stamp is None else self.last_stamp - self.first_stamp
        rate = (stamped - 1 - self.duplicates - self.out_of_order) / duration \
            if duration > 0 else 0.0
        drops = span_drops(self.drops, duration, self.expected_rate,
                           stamped - self.duplicates - self.out_of_order)
        expected = self.accepted + self.nonfinite + drops
        return {
            'messages': self.count,
            'accepted': self.accepted,
            'duration_s': duration,
            'rate_hz': rate,
            'expected_rate_hz': self.expected_rate,
            'gap_threshold_s': self.gap_threshold,
            'gaps': self.gaps,
            'max_gap_s': self.max_gap,
            'drops': drops,
            'delivered_fraction': (self.accepted + self.nonfinite) / expected if expected else 1.0,
            'duplicates': self.duplicates,
            'out_of_order': self.out_of_order,
            'nonfinite': self.nonfinite,
            'rejected': dict(self.rejected),
            'first_stamp': self.first_stamp,
            'last_stamp': self.last_stamp,
        }


#: Drops counted from long steps beyond what the span lacks by more than this share of
#: the samples (and 2) are the stamps' jitter, not losses (:func:`span_drops`); within it,
#: the span's count is the rate's error (a rate read 0.05 % low from the median step
#: lacks 5 samples of 10,000).
SPAN_SLACK = 0.005


def span_drops(counted, duration, rate, slots):
    """The drops to report: those ``counted`` from long steps, unless they exceed the
    samples a span of ``duration`` s at ``rate`` Hz lacks beyond the ``slots`` stamps that
    moved forward (the first one included) by more than :data:`SPAN_SLACK`: stamps that
    jitter about their period make long steps and short ones, and nothing is missing.
    Then the span's count."""
    if duration <= 0 or slots <= 0:
        return int(counted)
    lacking = max(0, round(duration * rate) + 1 - slots)
    return int(counted if counted <= lacking + max(2.0, SPAN_SLACK * slots) else lacking)


def stream_quality(stamps, values=None, expected_rate=1000.0, gap_threshold=0.002,
                   return_usable=False):
    """Counters of a whole recorded stream, vectorised (same rules as :class:`StreamQuality`).

    :class:`StreamQuality` moves its reference stamp only forward, so the
    reference of sample i is the running maximum of the stamps before it; every
    counter follows from the steps to it, with no Python loop over samples
    (a 1-hour 1 kHz bag has 3.6M of them).

    Parameters
    ----------
    stamps : array_like, (N,)
        Sample times (s) in arrival order.
    values : array_like, (N, n), or a sequence of such arrays, optional
        Sample values checked for NaN and inf (several arrays: a sample is
        finite when its row is finite in every one; no stacked copy is made).
    expected_rate, gap_threshold : float
        As for :class:`StreamQuality` (Hz, s).
    return_usable : bool
        Also return which samples :meth:`StreamQuality.update` would accept.

    Returns
    -------
    summary : dict
        As :meth:`StreamQuality.summary` (``rejected`` is empty: every sample
        here has a stamp).
    usable : ndarray of bool, (N,)
        Only with ``return_usable``: finite, neither a duplicate nor out of order.
    """
    counter = StreamQuality(expected_rate, gap_threshold)   # validates the arguments
    rate, period = counter.expected_rate, counter._period
    t = np.asarray(stamps, dtype=float).reshape(-1)
    n = t.shape[0]
    finite = np.ones(n, dtype=bool)
    if values is not None and n:
        for block in (values if isinstance(values, (list, tuple)) else (values,)):
            finite &= np.isfinite(np.asarray(block, dtype=float).reshape(n, -1)).all(axis=1)
    usable = finite.copy()
    gaps = drops = duplicates = out_of_order = 0
    max_gap = 0.0
    if n > 1:
        dt = t[1:] - np.maximum.accumulate(t)[:-1]
        forward = dt > 0
        gaps = int(np.count_nonzero(dt > counter.gap_threshold))
        max_gap = float(dt[forward].max()) if forward.any() else 0.0
        # same rounding as round() in StreamQuality.update: half to even
        late = dt[dt > 1.5 * period]
        drops = int(np.sum(np.round(late * rate).astype(np.int64) - 1))
        duplicates = int(np.count_nonzero(dt == 0))
        out_of_order = int(np.count_nonzero(dt < 0))
        usable[1:] &= forward
    accepted = int(np.count_nonzero(usable))
    nonfinite = n - int(np.count_nonzero(finite))
    first = float(t[0]) if n else None
    last = float(t.max()) if n else None
    duration = last - first if n else 0.0
    drops = span_drops(drops, duration, rate, n - duplicates - out_of_order)
    expected = accepted + nonfinite + drops
    summary = {
        'messages': n,
        'accepted': accepted,
        'duration_s': duration,
        'rate_hz': (n - 1 - duplicates - out_of_order) / duration if duration > 0 else 0.0,
        'expected_rate_hz': rate,
        'gap_threshold_s': counter.gap_threshold,
        'gaps': gaps,
        'max_gap_s': max_gap,
        'drops': drops,
        'delivered_fraction': (accepted + nonfinite) / expected if expected else 1.0,
        'duplicates': duplicates,
        'out_of_order': out_of_order,
        'nonfinite': nonfinite,
        'rejected': {},
        'first_stamp': first,
        'last_stamp': last,
    }
    return (summary, usable) if return_usable else summary


def delivered_fraction(summary):
    """Share of the expected samples a stream delivered, from its counters.

    ``(accepted + nonfinite) / (accepted + nonfinite + drops)``: the samples that
    arrived with a new stamp over those the expected rate called for between the
    first and the last stamp. Computed from the counters, so it holds for
    summaries added together (several bags) as well.

    Parameters
    ----------
    summary : dict
        As :meth:`StreamQuality.summary` or :func:`stream_quality`.

    Returns
    -------
    float
        In [0, 1]; 1.0 for an empty stream.
    """
    arrived = summary.get('accepted', 0) + summary.get('nonfinite', 0)
    expected = arrived + summary.get('drops', 0)
    return arrived / expected if expected else 1.0


def rate_text(rate):
    """A rate as people say it: ``1000``, ``100`` (for 99.95), ``2.5``."""
    return f'{rate:.0f}' if rate >= 10 else f'{rate:.2g}'


def loss_warning(summary, minimum=MIN_DELIVERED, what='the recording'):
    """One line saying how much of a stream was lost, or None when little was.

    Parameters
    ----------
    summary : dict
        Stream counters (:func:`stream_quality`); ``expected_rate_hz`` is the
        rate the stream should have had (the recorder's nominal rate, else the
        median step's).
    minimum : float
        Delivered fraction below which the line is returned (default 0.99).
    what : str
        What the stream is, to start the line (``'bag my_bag/'``).

    Returns
    -------
    str or None
    """
    fraction = delivered_fraction(summary)
    if not fraction < minimum:
        return None
    rate = summary.get('expected_rate_hz') or 0.0
    gaps = summary.get('gaps', 0)
    duration = summary.get('duration_s') or 0.0
    received = (summary.get('accepted', 0) + summary.get('nonfinite', 0)) / duration \
        if duration > 0 else 0.0
    drops = summary.get('drops', 0)
    return (f'{what} holds only {100 * fraction:.1f} % of the samples expected at '
            f'{rate_text(rate)} Hz ({rate_text(received)} samples/s; ~{drops} missing in '
            f'{gaps} gap{"" if gaps == 1 else "s"}, the longest '
            f'{summary.get("max_gap_s", 0.0):.3g} s): the recording did not keep up, and the '
            'results rest on what arrived')


def despike(values, threshold=8.0, min_scale=1e-9, max_fraction=0.005):
    """Find and replace isolated gross errors (single-sample spikes) per column.

    A Hampel filter over three samples: a sample is a gross error when it lies
    further than ``threshold`` noise standard deviations from the median of
    itself and its two neighbours (σ from the MAD of the second difference), so
    a smooth signal with noise σ flags nothing below ``threshold``·σ. Steps (the
    friction reversal of a sweep) and trends pass: the running median follows them.
    Flagged samples are replaced by the running median and counted, so nothing
    changes silently.
    This removes the gross errors that seed 001 eqs. 14-15 reject inside the
    estimator before forward/backward averaging, where one spike would shift a
    whole averaged pair. Bursts of two or more samples are not caught here.

    Parameters
    ----------
    values : ndarray, (N, n)
        Samples in time order (e.g. joint torques, N·m); NaN is left alone.
    threshold : float
        Robust standard deviations beyond which a sample is a gross error.
    min_scale : float
        Floor of the robust scale (a constant column flags nothing).
    max_fraction : float
        Gross errors are rare: a column with more outliers than this fraction of
        its samples is heavy-tailed (friction breakaway at reversals, fast motion
        at 100 Hz on a real arm), not corrupted, and is left as it is.

    Returns
    -------
    cleaned : ndarray, (N, n)
        ``values`` with the gross errors replaced by the running median (``values``
        itself, not a copy, when nothing is flagged).
    flagged : ndarray of bool, (N, n)
        Where the gross errors were.
    """
    values = np.asarray(values, dtype=float)
    flagged = np.zeros(values.shape, dtype=bool)
    if values.ndim != 2 or values.shape[0] < 3:
        return values, flagged
    n_rows = values.shape[0]
    # noise σ per column from the second difference x_i - (x_i-1 + x_i+1)/2 (σ·√1.5 for
    # white noise; the deviation from a median of three is zero a third of the time,
    # so its own MAD would understate σ), on at most ~200k evenly spaced triples
    mid = np.arange(1, n_rows - 1, max(1, (n_rows - 2) // 200_000))
    second = values[mid] - 0.5 * (values[mid - 1] + values[mid + 1])
    limit = np.full(values.shape[1], np.inf)
    for j in range(values.shape[1]):
        r = second[np.isfinite(second[:, j]), j]
        if r.size:
            sigma = 1.4826 * float(np.median(np.abs(r - np.median(r)))) / np.sqrt(1.5)
            limit[j] = threshold * max(sigma, min_scale)
    # blocks of rows keep the temporaries small (an hour at 1 kHz is 3.6M rows)
    block = 1 << 16
    for lo in range(1, n_rows - 1, block):
        hi = min(lo + block, n_rows - 1)
        a, b, c = values[lo - 1:hi - 1], values[lo:hi], values[lo + 1:hi + 1]
        # median of three without sorting: max(min(a, b), min(max(a, b), c))
        median = np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
        flagged[lo:hi] = np.abs(b - median) > limit      # NaN compares False
    flagged[:, flagged.sum(axis=0) > max_fraction * n_rows] = False
    if not flagged.any():
        return values, flagged
    cleaned = values.copy()
    rows, cols = np.nonzero(flagged)
    trio = np.stack([values[rows - 1, cols], values[rows, cols], values[rows + 1, cols]])
    cleaned[rows, cols] = np.median(trio, axis=0)
    return cleaned, flagged
