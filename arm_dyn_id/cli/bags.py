"""Reading the bags of a command, saying what was read, kept and dropped.

Argument parsing and printing only: the work is in the lower wings.
"""

import time

from arm_dyn_id.cli.options import parse_joint_map


def read(args, conversion, progress, bag=None):
    """Read one bag (``bag``, default ``args.bag``), reporting what was read.

    Returns
    -------
    rec : Recording
    seconds : float
    """
    from arm_dyn_id.data.bag_reader import read_bag
    bag = args.bag if bag is None else bag
    progress.phase(f'reading {bag}')
    t0 = time.perf_counter()
    rec = read_bag(bag, config=conversion, states_topic=args.states_topic,
                   recover=args.recover, progress=progress.bar('reading'),
                   joint_map=parse_joint_map(getattr(args, 'joint_map', None)))
    seconds = time.perf_counter() - t0
    for note in rec.notes:
        progress.phase(note)
    progress.phase(f'read {rec.n_samples} samples of {len(rec.joints)} joints from '
                   f'{rec.states_topic} in {seconds:.1f} s '
                   f'({describe_quality(rec.quality["loaded"])})')
    from arm_dyn_id.data.quality import loss_warning
    lossy = loss_warning(rec.quality['loaded'], what=f'bag {bag}')
    if lossy:
        progress.warn(lossy)
    return rec, seconds


def read_all(args, conversion, progress, bags):
    """Read every bag and place them one after another (:func:`concatenate_recordings`).

    Returns
    -------
    rec : Recording
    seconds : float
    """
    from arm_dyn_id.data.bag_reader import concatenate_recordings
    recs, seconds = [], 0.0
    for bag in bags:
        rec, s = read(args, conversion, progress, bag)
        recs.append(rec)
        seconds += s
    if len(recs) > 1:
        progress.phase(f'{len(recs)} bags read one after another: {sum(r.n_samples for r in recs)}'
                       ' samples')
    return concatenate_recordings(recs), seconds


def describe_quality(q):
    """One line of what reading kept and dropped, with every discarded message counted.

    The delivered share of the expected samples comes first when it is below
    :data:`arm_dyn_id.data.quality.MIN_DELIVERED` (see :func:`loss_warning` for the
    warning line that goes with it).
    """
    from arm_dyn_id.data.quality import MIN_DELIVERED, delivered_fraction, rate_text
    dropped = q['duplicates'] + q['out_of_order'] + q['nonfinite'] + \
        sum((q.get('rejected') or {}).values())
    parts = [f'{q["rate_hz"]:.1f} Hz']
    fraction = delivered_fraction(q)
    if fraction < MIN_DELIVERED:
        parts[0] += (f' of {rate_text(q["expected_rate_hz"])} expected, {100 * fraction:.1f} % '
                     'delivered')
    if q['gaps']:
        parts.append(f'{q["gaps"]} gaps (longest {q["max_gap_s"]:.3g} s, ~{q["drops"]} '
                     'samples missing; not interpolated)')
    else:
        parts.append('no gaps')
    if dropped:
        what = [f'{q[k]} {label}' for k, label in (
            ('duplicates', 'repeated stamps'), ('out_of_order', 'backward stamps'),
            ('nonfinite', 'NaN or inf')) if q[k]]
        what += [f'{v} {k.replace("_", " ")}' for k, v in (q.get('rejected') or {}).items()
                 if v]
        parts.append(f'dropped {dropped} of {q["messages"]} messages ({", ".join(what)})')
    else:
        parts.append(f'nothing dropped of {q["messages"]} messages')
    return ', '.join(parts)
