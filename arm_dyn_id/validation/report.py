"""A readable report of one fit: one self-contained HTML file plus its PNG plots.

:func:`write_report` reads what ``arm-dyn-id fit`` wrote into a folder
(``model.yaml``, ``validation.json``, ``fit_data.npz``) and writes

- ``torque_time.png``: measured torque against the model's prediction per joint
  over time (G(q) plus the identified friction), held-out sweeps shaded;
- ``residuals.png``: histograms of the held-out residuals per joint (forward/backward
  averaged, so friction cancels, seed 000 eq. 5);
- ``pairs.png``: averaged measured torque against predicted torque per joint;
- ``trajectory.png``: joint angles over time (degrees, for people) with the sweeps;
- ``report.html``: the tables (per-joint metrics, base parameters with standard
  errors and their expressions, condition numbers, data quality) and the plots
  embedded as base64, so the one file can be mailed or archived.

A floating-base fit's folder (model.yaml of schema ``arm_dyn_id/floating_model``) gets
``held_out.png`` (the held-out momentum or ZMP: measured, identified, nominal URDF) and
a page of its metrics and parameters (:func:`write_floating_report`).

matplotlib runs with the Agg backend; nothing here needs a display or ROS.
"""

import base64
import datetime
import html
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np

from arm_dyn_id.errors import DataError

#: the floating-base model file (arm_dyn_id.model.floating; not imported: no pinocchio here)
FLOATING_SCHEMA = 'arm_dyn_id/floating_model'

CSS = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
code { font-size: 0.9em; } img { max-width: 100%; } .note { color: #666; font-size: 0.9em; }
.bad { color: #b00; }
.banner { border: 2px solid #b00; background: #fdecea; color: #800; padding: 0.4em 1em;
          margin: 1em 0; font-weight: bold; }
"""

METRIC_COLUMNS = (('max_torque', 'max |τ| (N·m)', '{:.4f}'), ('rmse', 'RMSE (N·m)', '{:.5f}'),
                  ('rmse_percent', 'RMSE %', '{:.2f}'), ('mae', 'MAE (N·m)', '{:.5f}'),
                  ('rho', 'ρ', '{:.4f}'), ('noise_std', 'noise σ (N·m)', '{:.5f}'),
                  ('n_samples', 'samples', '{:d}'))


def _fmt(fmt, value):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return '–'
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return html.escape(str(value))


def _table(header, rows, left=1):
    """HTML table; the first ``left`` columns are left-aligned text."""
    cls = ['l' if i < left else '' for i in range(len(header))]
    out = ['<table><tr>' + ''.join(f'<th class="{c}">{html.escape(h)}</th>'
                                   for c, h in zip(cls, header)) + '</tr>']
    for row in rows:
        out.append('<tr>' + ''.join(f'<td class="{c}">{v}</td>' for c, v in zip(cls, row))
                   + '</tr>')
    out.append('</table>')
    return '\n'.join(out)


#: keys of a per-joint metrics dict; a validation entry is a case when its values have them
_METRIC_KEYS = {'rmse', 'rmse_percent', 'mae', 'rho'}


def _is_case(value):
    return isinstance(value, dict) and bool(value) and all(
        isinstance(m, dict) and _METRIC_KEYS & set(m) for m in value.values())


def validation_cases(validation):
    """``{case: {joint: metrics}}`` of any validation file the suite writes.

    ``arm-dyn-id fit`` and ``validate`` write the cases at the top level beside
    ``fit_summary``; ``arm-dyn-id demo`` writes them under ``cases`` beside facts
    of the run (robot, gravities, noise model). Entries that are not per-joint
    metrics are not cases.
    """
    cases = {k: v for k, v in validation.items() if _is_case(v)}
    nested = validation.get('cases')
    if isinstance(nested, dict):
        cases.update({k: v for k, v in nested.items() if _is_case(v)})
    return cases


def _run_facts(validation):
    """Plain top-level facts of a validation file (the demo's robot, gravities, ...)."""
    return [(k.replace('_', ' '), v) for k, v in validation.items()
            if k not in ('fit_summary', 'cases') and isinstance(v, (str, int, float, bool))]


def _metrics_html(case):
    rows = [[html.escape(j)] + [_fmt(f, m.get(k)) for k, _, f in METRIC_COLUMNS]
            for j, m in case.items()]
    pct = [m.get('rmse_percent') for m in case.values() if m.get('rmse_percent') is not None]
    if pct:
        rows.append(['<b>mean</b>', '', '', f'<b>{np.mean(pct):.2f}</b>', '', '', '', ''])
    return _table(['joint'] + [h for _, h, _ in METRIC_COLUMNS], rows)


# ---------------------------------------------------------------------------
# plots

def _shade(ax, sweeps, t0, joint=None):
    for a, b, j, _, held in sweeps:
        if joint is not None and int(j) != joint:
            continue
        ax.axvspan(a - t0, b - t0, color='tab:orange' if held else 'tab:green',
                   alpha=0.15 if held else 0.07, lw=0)


def _figure(figsize):
    """A figure drawn by Agg, without pyplot: pyplot's import (0.2-0.3 s) and its figure
    manager are for interactive use; the PNG is the same byte for byte. Axes titles are
    placed with ``y=1.0`` (no ticks on top): matplotlib then skips measuring every axes'
    extent to lift them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _margins(fig, left, right, top, bottom, wspace=0.0, hspace=0.0, cols=1, rows=1):
    """Fixed margins and gaps in inches (what ``tight_layout`` would measure: the labels'
    room), set without measuring every tick label's extent: ``tight_layout`` took more
    than half of a report's drawing time."""
    w, h = fig.get_size_inches()
    axes_w = (w - left - right - wspace * (cols - 1)) / cols
    axes_h = (h - top - bottom - hspace * (rows - 1)) / rows
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h,
                        bottom=bottom / h, wspace=wspace / axes_w, hspace=hspace / axes_h)


def _few_ticks(axes):
    """At most 4 y and 6 x ticks per axes: each tick is a handful of artists (its marks,
    grid line and labels), and making them was the largest part of drawing the report once
    the layout was fixed (a third of it with up to 5 y and 7 x ticks)."""
    from matplotlib.ticker import MaxNLocator
    for ax in axes:
        ax.yaxis.set_major_locator(MaxNLocator(3))
        ax.xaxis.set_major_locator(MaxNLocator(5))


def _save(fig, path):
    """The PNG at 90 dpi, compressed at zlib level 1: 20-30 ms less per plot than the
    default level 6, for files about 10 % larger."""
    fig.savefig(path, dpi=90, pil_kwargs={'compress_level': 1})


def _figure_rows(n):
    fig = _figure((11, 1.7 * n + 0.8))
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)
    _few_ticks(axes[:, 0])
    # two-line y labels and tick labels on the left, a title on top, time at the bottom
    _margins(fig, left=0.95, right=0.15, top=0.35, bottom=0.5, hspace=0.12, rows=n)
    return fig, axes[:, 0]


def _plot_measured_predicted(data, path, labels, title):
    """Measured, model-with-friction and model-without torque per joint over time, sweeps
    shaded; ``labels`` name the three lines, ``title`` heads the figure."""
    joints = [str(j) for j in data['joints']]
    t = data['t']
    t0 = t[0]
    fig, axes = _figure_rows(len(joints))
    for j, ax in enumerate(axes):
        _shade(ax, data['sweeps'], t0)
        ax.plot(t - t0, data['tau'][:, j], color='0.55', lw=0.6, label=labels[0])
        ax.plot(t - t0, data['predicted_friction'][:, j], color='tab:blue', lw=0.9,
                label=labels[1])
        ax.plot(t - t0, data['predicted'][:, j], color='tab:red', lw=0.7, ls='--',
                label=labels[2])
        ax.set_ylabel(f'{joints[j]}\nN·m', fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(loc='upper right', fontsize=7, ncol=3)
    axes[0].set_title(title, fontsize=10, y=1.0)
    axes[-1].set_xlabel('time (s)')
    _save(fig, path)


def plot_torque_time(data, path):
    _plot_measured_predicted(
        data, path, ('measured', 'model: G(q) + friction', 'model: G(q)'),
        'Joint torque: measured and predicted (orange bands: held-out sweeps, '
        'green: fitted sweeps)')


def plot_full_torque(data, path):
    """Measured against predicted torque per joint over time (full dynamics), held-out
    stretches shaded."""
    _plot_measured_predicted(
        data, path, ('measured (filtered)', 'model: inverse dynamics + friction',
                     'model: rigid body only'),
        'Joint torque: measured (filtered like the fit) and predicted by the full model')


def plot_trajectory(data, path):
    joints = [str(j) for j in data['joints']]
    t = data['t']
    t0 = t[0]
    fig, axes = _figure_rows(len(joints))
    for j, ax in enumerate(axes):
        _shade(ax, data['sweeps'], t0, joint=j)
        ax.plot(t - t0, np.rad2deg(data['q'][:, j]), color='tab:blue', lw=0.8)
        ax.set_ylabel(f'{joints[j]}\ndeg', fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title('Joint angles (bands: sweeps of that joint; orange = held out)',
                      fontsize=10, y=1.0)
    axes[-1].set_xlabel('time (s)')
    _save(fig, path)


def _what(data):
    if str(data.get('dynamics', 'gravity')) == 'full':
        return 'samples (filtered, full dynamics)'
    return 'pairs (forward/backward averaged)'


def _case(data):
    return 'held_out' if 'held_out_tau' in data else 'training'


def _grid(n):
    cols = 3 if n > 4 else n
    rows = int(np.ceil(n / cols))
    fig = _figure((3.6 * cols, 2.8 * rows + 0.3))
    axes = fig.subplots(rows, cols, squeeze=False)
    _few_ticks(axes.ravel())
    # each axes: a title above, tick labels and an x label below, a y label on the left
    _margins(fig, left=0.7, right=0.15, top=0.6, bottom=0.5, wspace=0.75, hspace=0.85,
             cols=cols, rows=rows)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:n]


def plot_residuals(data, path):
    case = _case(data)
    joints = [str(j) for j in data['joints']]
    res = data[f'{case}_predicted'] - data[f'{case}_tau']
    fig, axes = _grid(len(joints))
    for j, ax in enumerate(axes):
        r = res[:, j] * 1e3
        # one outline artist, not 50 bar patches (a third of this plot's time)
        counts, edges = np.histogram(r[np.isfinite(r)], bins=50)
        ax.stairs(counts, edges, fill=True, color='tab:blue', alpha=0.8)
        ax.axvline(0, color='k', lw=0.6)
        ax.set_title(f'{joints[j]}: mean {np.nanmean(r):.2f}, σ {np.nanstd(r):.2f} mN·m',
                     fontsize=9, y=1.0)
        ax.set_xlabel('predicted − measured (mN·m)', fontsize=8)
        ax.tick_params(labelsize=8)
    fig.suptitle(f'Residuals on the {case.replace("_", "-")} {_what(data)}', fontsize=10)
    _save(fig, path)


def plot_pairs(data, path):
    case = _case(data)
    joints = [str(j) for j in data['joints']]
    meas, pred = data[f'{case}_tau'], data[f'{case}_predicted']
    step = max(1, meas.shape[0] // 4000)
    fig, axes = _grid(len(joints))
    for j, ax in enumerate(axes):
        ax.plot(meas[::step, j], pred[::step, j], '.', ms=2, color='tab:blue', alpha=0.5)
        lo = float(np.nanmin([meas[:, j].min(), pred[:, j].min()]))
        hi = float(np.nanmax([meas[:, j].max(), pred[:, j].max()]))
        ax.plot([lo, hi], [lo, hi], color='k', lw=0.6)
        ax.set_title(joints[j], fontsize=9, y=1.0)
        ax.set_xlabel('measured (N·m)', fontsize=8)
        ax.set_ylabel('predicted (N·m)', fontsize=8)
        ax.tick_params(labelsize=8)
    fig.suptitle(f'Torque on the {case.replace("_", "-")} {_what(data)}: predicted '
                 'against measured', fontsize=10)
    _save(fig, path)


# ---------------------------------------------------------------------------
# html

def _params_html(model):
    b = model.get('base')
    if not isinstance(b, dict) or not b.get('names') or not b.get('values'):
        return '<p class="note">The model file lists no base parameters.</p>'
    names, exprs = b['names'], b.get('expressions') or b['names']
    values, errs = b['values'], b.get('std_errors') or [None] * len(names)
    rows = []
    for name, expr, v, e in zip(names, exprs, values, errs):
        rel = None if v in (None, 0) or e is None else 100 * abs(e / v)
        cls = ' class="bad"' if rel is not None and rel > 10 else ''
        rows.append([html.escape(name), f'<code>{html.escape(expr)}</code>',
                     _fmt('{:.6g}', v), _fmt('{:.3g}', e),
                     f'<span{cls}>{_fmt("{:.2f}", rel)}</span>'])
    return _table(['β', 'expression (kg, kg·m)', 'value', 'std. error', 'rel. error %'], rows,
                  left=2)


def _quality_html(summary):
    q = summary.get('quality') or {}
    keys = (('messages', 'messages', '{:d}'), ('accepted', 'usable samples', '{:d}'),
            ('duration_s', 'duration (s)', '{:.1f}'), ('rate_hz', 'rate (Hz)', '{:.2f}'),
            ('expected_rate_hz', 'expected rate (Hz)', '{:.1f}'), ('gaps', 'gaps', '{:d}'),
            ('max_gap_s', 'longest step (s)', '{:.4f}'), ('drops', 'dropped samples', '{:d}'),
            ('delivered_fraction', 'delivered fraction', '{:.5f}'),
            ('duplicates', 'duplicate stamps', '{:d}'),
            ('out_of_order', 'out-of-order stamps', '{:d}'),
            ('nonfinite', 'NaN / inf samples', '{:d}'))
    rows = [[label, _fmt(f, q.get(k))] for k, label, f in keys]
    rejected = q.get('rejected') or {}
    rows.append(['rejected messages', html.escape(', '.join(f'{k}: {v}' for k, v in
                                                            rejected.items()) or '0')])
    rec = summary.get('recorded_quality')
    note = '' if not rec else ('<p class="note">The recorder\'s own summary is stored in the '
                               'bag as well (recovered: '
                               f'{html.escape(str(rec.get("recovered")))}).</p>')
    return _table(['', 'value'], rows) + note


def _img(path):
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def _segments_fact(summary):
    seg = summary.get('segments')
    if not isinstance(seg, dict):
        return None
    if seg.get('source') == 'time_blocks':
        return f'the whole record, filtered, in {seg.get("blocks")} contiguous time blocks'
    if seg.get('source') == 'quasi_static':
        return (f'{seg.get("holds", 0)} static holds and {seg.get("slow_bins", 0)} bins of slow '
                'motion (quasi-static samples)')
    if 'pairs' in seg:
        return f'{seg["pairs"]} forward/backward pairs from {seg.get("source")}'
    return ', '.join(f'{k}: {v}' for k, v in seg.items())


def _holdout_fact(summary):
    hold = summary.get('holdout')
    if not isinstance(hold, dict):
        return None
    if 'blocks' in hold:
        return f'{hold["blocks"]} time blocks, each held out in turn; {hold.get("note", "")}'
    if 'held_out_pairs' in hold:
        what = f'{hold["held_out_pairs"]} pairs held out'
    elif 'held_out_samples' in hold:
        what = f'{hold["held_out_samples"]} samples held out'
    else:
        what = 'held out'
    return (f'{what} (fraction {hold.get("fraction")}, seed {hold.get("seed")}); '
            f'{hold.get("note", "")}')


def render_html(model, validation, images, title=None, warnings=()):
    """The report page as a string (images: {name: png path}, embedded); a rejected
    model (or ``warnings``) gets a banner under the title."""
    summary = validation.get('fit_summary') or {}
    fit = model.get('fit') or {}
    full = model.get('dynamics') == 'full'
    unit = 'samples' if full or (summary.get('segments') or {}).get('source') == \
        'quasi_static' else 'pairs'
    kind = 'Dynamic model' if full else 'Gravity model'
    title = title or f'{kind} of {model.get("robot_name") or "the arm"}'
    if model.get('rejected'):
        title = f'{title} (REJECTED)'
    e = html.escape
    parts = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
             f'<title>{e(title)}</title><style>{CSS}</style></head><body>',
             f'<h1>{e(title)}</h1>', _banner(model, warnings)]
    dyn = summary.get('dynamics') if isinstance(summary.get('dynamics'), dict) else {}
    facts = [
        ('model', 'full dynamics (inertia, Coriolis, gravity, friction)' if full
         else 'gravity G(q)'),
        ('chosen because', dyn.get('reason')),
        ('bag', summary.get('bag')), ('joint-state topic', summary.get('states_topic')),
        ('URDF', (model.get('urdf') or {}).get('file')),
        ('gravity (m/s²)', (model.get('gravity') or {}).get('magnitude')),
        ('samples', summary.get('n_samples')),
        ('duration (s)', None if summary.get('duration_s') is None
         else f'{summary["duration_s"]:.1f}'),
        ('segments', _segments_fact(summary)),
        ('hold-out', _holdout_fact(summary)),
        ('method', fit.get('method')),
        ('created', (model.get('provenance') or {}).get('created')),
    ] + _run_facts(validation)
    parts.append(_table(['', ''], [[e(k), e(str(v))] for k, v in facts if v is not None]))
    parts.append('<h2>Validation per joint</h2>')
    if full:
        parts.append('<p class="note">Measured torque against the model\'s inverse dynamics '
                     'with friction at the filtered positions, velocities and accelerations. '
                     'RMSE % is relative to the largest |τ| of the joint; ρ is the '
                     'correlation of measured and predicted torque.</p>')
    else:
        parts.append('<p class="note">Torques are forward/backward averaged (friction '
                     'cancels, seed 000 eq. 5). RMSE % is relative to the largest |τ| of the '
                     'joint (seed 000 eq. 18); ρ is the correlation of measured and predicted '
                     'torque; noise σ is estimated from sample-to-sample differences of the '
                     'raw torque.</p>')
    cases = validation_cases(validation)
    if not cases:
        parts.append('<p class="note">The validation file holds no per-joint metrics.</p>')
    for case, metrics in cases.items():
        label = {'held_out': f'Held-out {unit} (not used by the fit)',
                 'training': f'Training {unit} (in-sample)'}.get(case, case)
        parts.append(f'<h3>{e(label)}</h3>')
        parts.append(_metrics_html(metrics))
    for name, caption in (('torque_time', 'Torque over time'),
                          ('residuals', 'Residuals'), ('pairs', 'Predicted against measured')):
        if name in images:
            parts.append(f'<h2>{e(caption)}</h2>{_img(images[name])}')
    others = [name for name in images if name not in REPORT_PLOTS]
    if others:
        parts.append('<h2>Other plots of the folder</h2>')
        parts.extend(f'<h3>{e(name)}</h3>{_img(images[name])}' for name in others)
    parts.append('<h2>Base parameters</h2>')
    inertia = ', xx/xy/.../zz: inertia about the joint frame\'s origin' if full else ''
    parts.append('<p class="note">Each base parameter is the combination of link parameters '
                 f'(m: mass, mx/my/mz: first moments m·c in the joint frame{inertia}) that '
                 'the torques can identify; standard errors from the weighted covariance. '
                 'Relative errors above 10 % are red.</p>')
    parts.append(_params_html(model))
    fr = model.get('friction') or {}
    if fr:
        joints = model.get('joints') or []
        rows = [[e(j), _fmt('{:.4g}', c), _fmt('{:.4g}', v)]
                for j, c, v in zip(joints, fr.get('coulomb', []), fr.get('viscous', []))]
        parts.append('<h3>Friction (fitted with the rigid body)</h3>' if full else
                     '<h3>Friction (half difference of the passes)</h3>')
        parts.append(_table(['joint', 'Coulomb (N·m)', 'viscous (N·m·s/rad)'], rows))
    parts.append('<h2>Conditioning and estimators</h2>')
    rows = [['condition number of the scaled base regressor',
             _fmt('{:.4g}', fit.get('condition_number'))],
            ['samples fitted (averaged)', _fmt('{:d}', fit.get('n_samples'))],
            ['fit time (s)', _fmt('{:.3f}', fit.get('seconds'))]]
    parts.append(_table(['', ''], rows))
    cands = fit.get('candidates') or {}
    if cands:
        joints = model.get('joints') or []
        rows = []
        for method, c in cands.items():
            if isinstance(c, str):
                rows.append([e(method), f'<span class="bad">{e(c)}</span>'] +
                            [''] * (len(joints) - 1))
            else:
                rows.append([e(method) + (' (chosen)' if method == fit.get('method') else '')]
                            + [_fmt('{:.5f}', r) for r in c.get('residual_rms', [])])
        parts.append('<p>Residual RMS per joint (N·m) of each estimator on the fitted pairs:'
                     '</p>')
        parts.append(_table(['method'] + [e(j) for j in joints], rows))
    parts.append('<h2>Data quality</h2>')
    parts.append(_quality_html(summary))
    if 'trajectory' in images:
        parts.append(f'<h2>Trajectory</h2>{_img(images["trajectory"])}')
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
    parts.append(f'<p class="note">Written {e(stamp)} by arm_dyn_id '
                 f'({e(str((model.get("provenance") or {}).get("software", "")))}).</p>')
    parts.append('</body></html>\n')
    return '\n'.join(parts)


#: the plots write_report draws (any other PNG of the folder is embedded as it is)
REPORT_PLOTS = ('torque_time', 'residuals', 'pairs', 'trajectory')


def _plot_data(folder):
    """The arrays of ``folder/fit_data.npz`` (None without it)."""
    data_file = Path(folder) / 'fit_data.npz'
    if not data_file.is_file():
        return None
    with np.load(data_file) as npz:
        return dict(npz)


def _plot_jobs(folder, data):
    """``[(plot function, png path)]`` of the report's plots of a fit folder."""
    full = str(data.get('dynamics', 'gravity')) == 'full'
    plots = (('torque_time', plot_full_torque if full else plot_torque_time),
             ('residuals', plot_residuals), ('pairs', plot_pairs),
             ('trajectory', plot_trajectory))
    return [(fn, Path(folder) / f'{name}.png') for name, fn in plots]


def write_report(folder, title=None, painter=None):
    """Render ``folder/report.html`` and its PNGs from an output folder of the suite.

    Works on every folder the suite writes: ``arm-dyn-id fit`` (gravity or full
    dynamics; the plots need its ``fit_data.npz``) and ``arm-dyn-id demo`` (its
    cases under ``cases``, its own ``validation_*.png`` embedded as they are).

    Parameters
    ----------
    folder : path-like
        Holds ``model.yaml`` and ``validation.json`` (and ``fit_data.npz`` for plots).
    title : str, optional
        The page's heading (default: the kind of model and the robot's name).
    painter : Painter, optional
        Started before the fit: its child draws the plots (with matplotlib imported
        while the fit ran); the plots are drawn here when it cannot.

    Returns
    -------
    pathlib.Path
        The HTML file.

    Raises
    ------
    DataError
        If the folder lacks ``model.yaml`` or ``validation.json``, or
        ``validation.json`` cannot be read.
    arm_dyn_id.model.gate.ModelRefused
        If ``model.yaml`` is refused by the model gate (unreadable, unknown schema or
        version, incomplete, not finite; see :func:`gated_model`). Nothing is written.
    """
    folder = Path(folder)
    for name in ('model.yaml', 'validation.json'):
        if not (folder / name).is_file():
            raise DataError(f'{folder} has no {name}: run arm-dyn-id fit BAG --out {folder} '
                            'first')
    model, warnings = gated_model(folder / 'model.yaml')
    try:
        validation = json.loads((folder / 'validation.json').read_bytes().decode('utf-8'))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f'{folder / "validation.json"} is not valid JSON: '
                        f'{type(exc).__name__}') from exc
    if not isinstance(validation, dict):
        raise DataError(f'{folder}: validation.json must hold a mapping')
    edited = edited_since_fit(folder, validation)
    if edited:
        warnings = [edited] + list(warnings)
    if model.get('schema') == FLOATING_SCHEMA:
        return write_floating_report(folder, model, validation, title, warnings)
    images = {}
    data = _plot_data(folder)
    if data is not None:
        jobs = _plot_jobs(folder, data)
        if painter is None or not painter.draw(folder):
            draw_plots(jobs, data)
        images = {path.stem: path for _, path in jobs}
    for png in sorted(folder.glob('*.png')):
        if png.stem not in REPORT_PLOTS:
            images[png.stem] = png
    out = folder / 'report.html'
    out.write_text(render_html(model, validation, images, title, warnings))
    return out


def _can_fork():
    """Whether a forked child may draw plots: Linux (fork is its native way), one Python
    thread (a lock another thread held at the fork would stay held in the child) and
    more than one CPU to run on."""
    return (sys.platform.startswith('linux') and threading.active_count() == 1
            and len(os.sched_getaffinity(0)) > 1)


def draw_plots(jobs, data):
    """Draw ``jobs``, a list of ``(plot function, png path)``, of the ``fit_data.npz``
    arrays ``data``.

    Every other plot is drawn by a forked child while this process draws the rest
    (when :func:`_can_fork`): each figure is single-threaded Python and Agg, so two
    cores draw the report's four in about half the time, into the same files. The plots
    the child did not draw (it failed, or could not fork) are drawn here, so an error
    is raised here as it would be without the child.
    """
    theirs, pid = [], None
    if len(jobs) > 1 and _can_fork():
        # imported before the fork, so that the child does not import them again
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
        theirs, jobs = jobs[1::2], jobs[0::2]
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fn, path in theirs:
                    fn(data, path)
                code = 0
            finally:
                os._exit(code)      # no atexit handlers, no buffers flushed twice
    try:
        for fn, path in jobs:
            fn(data, path)
    finally:
        if pid is not None:
            _, status = os.waitpid(pid, 0)
    if pid is not None and os.waitstatus_to_exitcode(status) != 0:
        for fn, path in theirs:
            fn(data, path)


#: how much lower the painter's priority is while the fit runs (nice levels)
PAINTER_NICENESS = 10


class Painter:
    """A forked child that imports matplotlib while the fit runs, then draws the plots.

    ``arm-dyn-id fit`` starts one before fitting: the import (about 0.5 s) runs on the
    second core beside the fit instead of after it, at a lower priority
    (:data:`PAINTER_NICENESS`) so that on a busy machine it does not delay the model.
    The child waits for :meth:`draw` (or exits at :meth:`close`), then draws the
    folder's plots with :func:`draw_plots` (itself forking, so two processes draw).
    Without fork (not Linux, another Python thread, one CPU) it does nothing and the
    plots are drawn where :func:`write_report` runs. Use it as a context manager, so
    that the child is told to exit and is waited for whatever happens.
    """

    def __init__(self):
        self._pid = self._go = None
        self.started = None         # the folder the child was told to draw
        if not _can_fork():
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(write)
            os._exit(_paint(read))      # no atexit handlers, no buffers flushed twice
        os.close(read)
        self._pid, self._go = pid, write

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self, folder):
        """Have the child start drawing ``folder``'s plots (its fit_data.npz is written)
        while this process goes on; :meth:`draw` then waits for them. Once only."""
        if self.started is not None:
            return
        self.started = Path(folder).resolve()
        if self._go is None:
            return
        try:
            os.write(self._go, os.fsencode(str(self.started)))
        except OSError:         # the child is gone: draw() says so
            pass
        os.close(self._go)
        self._go = None

    def draw(self, folder):
        """Have the child draw ``folder``'s plots (unless :meth:`start` already did) and
        wait; True when it drew all of them."""
        self.start(folder)
        if self.started != Path(folder).resolve():
            return False        # it drew another folder
        return self.close() == 0

    def close(self):
        """Tell the child to finish (it exits if it was not asked to draw) and wait for it;
        returns its exit code (None without a child)."""
        if self._go is not None:
            os.close(self._go)
            self._go = None
        if self._pid is None:
            return None
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        return os.waitstatus_to_exitcode(status)


def _paint(fd):
    """The painter child: import matplotlib, wait for a folder, draw its plots; the
    exit code (0 drawn or not asked, 1 failed)."""
    try:
        # the import waits behind the fit on a busy machine: the model comes first
        priority = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, min(priority + PAINTER_NICENESS, 19))
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
        with os.fdopen(fd, 'rb') as pipe:
            folder = pipe.read()
        if not folder:
            return 0
        try:        # the fit is done: draw at its priority (where the system allows it)
            os.setpriority(os.PRIO_PROCESS, 0, priority)
        except OSError:
            pass
        folder = Path(os.fsdecode(folder))
        data = _plot_data(folder)
        draw_plots(_plot_jobs(folder, data), data)
        return 0
    except BaseException:       # the parent draws the plots again, and raises
        return 1


def edited_since_fit(folder, validation):
    """The banner line when ``folder/model.yaml`` is not the file its fit wrote (the
    SHA-256 ``fit_summary.model_sha256`` of validation.json), else None (the same file,
    or a folder written before the fingerprint was kept: nothing to compare)."""
    from arm_dyn_id.config import file_sha256
    summary = validation.get('fit_summary')
    written = summary.get('model_sha256') if isinstance(summary, dict) else None
    if not isinstance(written, str) or file_sha256(Path(folder) / 'model.yaml') == written:
        return None
    return ('model.yaml was changed after this fit: the tables and plots below score the '
            'model the fit wrote, not this file. Score this one with arm-dyn-id validate '
            f'{Path(folder) / "model.yaml"} BAG, or fit again.')


def gated_model(path):
    """The model file of a fit folder through the model gate, and the page's warnings.

    A file that is unreadable, of an unknown schema or version, incomplete or not finite
    is refused (:class:`~arm_dyn_id.model.gate.ModelRefused`, one line); a rejected or
    implausible one is rendered, with the reason in a banner at the top of the page.

    Returns
    -------
    doc : dict
        The parsed model file.
    warnings : list of str
        What the banner says besides the ``rejected`` mark.
    """
    from arm_dyn_id.model.gate import KINDS, ModelRefused, admit_doc, check_doc, read_doc
    doc = read_doc(path)
    check_doc(doc, source=str(path))
    try:
        gated = admit_doc(doc, source=str(path), kinds=KINDS, allow_rejected=True,
                          allow_other_urdf=True)
    except ModelRefused as exc:
        if exc.reason == 'implausible':
            return doc, [str(exc)]
        return doc, [f'not checked against its URDF: {exc}']
    return doc, [w for w in gated.gate['warnings'] if not w.startswith('model marked rejected')]


def _banner(model, warnings=()):
    """The warning banner at the top of a page: a rejected fit says so first, and why."""
    items = []
    if model.get('rejected'):
        items.append(f'REJECTED: this fit was refused by its checks ({model["rejected"]}); it '
                     'was written only because of --force: do not use it as the arm\'s model.')
    items += list(warnings)
    if not items:
        return ''
    return '<div class="banner">' + ''.join(f'<p>{html.escape(str(x))}</p>'
                                            for x in items) + '</div>'


# ---------------------------------------------------------------------------
# floating-base robots (issue 17)

def plot_floating_held_out(data, path):
    """Held-out momentum (6 rows) or ZMP (x, y) over time: measured (the configured
    momentum, or the sole sensors' ZMP), identified model, nominal URDF."""
    labels = [str(x) for x in data['labels']]
    zmp = str(data['kind']) == 'zmp'
    scale, unit = (1000.0, 'mm') if zmp else (1.0, '')
    fig, axes = _figure_rows(len(labels))
    t = data['t']
    for j, ax in enumerate(axes):
        ax.plot(t, scale * data['measured'][:, j], color='0.45', lw=0.8,
                label='sole sensors' if zmp else 'conserved (configured)')
        ax.plot(t, scale * data['identified'][:, j], color='tab:blue', lw=0.9,
                label='identified')
        ax.plot(t, scale * data['nominal'][:, j], color='tab:red', lw=0.7, ls='--',
                label='nominal URDF')
        unit_j = unit or ('N·s' if j < 3 else 'N·m·s')
        ax.set_ylabel(f'{labels[j]}\n{unit_j}', fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(loc='upper right', fontsize=7, ncol=3)
    axes[0].set_title('held-out ZMP' if zmp else 'held-out momentum (world origin)',
                      fontsize=10, y=1.0)
    axes[-1].set_xlabel('time (s)')
    _save(fig, path)


def write_floating_report(folder, model, validation, title=None, warnings=()):
    """``report.html`` (and ``held_out.png`` when ``fit_data.npz`` is there) of a
    floating-base fit's folder; ``warnings`` in a banner. Returns the HTML path."""
    folder = Path(folder)
    e = html.escape
    images = {}
    data_file = folder / 'fit_data.npz'
    if data_file.is_file():
        with np.load(data_file) as npz:
            data = dict(npz)
        if str(data.get('dynamics')) == 'floating':
            images['held_out'] = folder / 'held_out.png'
            plot_floating_held_out(data, images['held_out'])
    metrics = validation.get('floating') or model.get('metrics') or {}
    summary = validation.get('fit_summary') or {}
    title = title or f'Floating-base model of {model.get("robot_name") or "the robot"}'
    if model.get('rejected'):
        title = f'{title} (REJECTED)'
    parts = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
             f'<title>{e(title)}</title><style>{CSS}</style></head><body>',
             f'<h1>{e(title)}</h1>', _banner(model, warnings)]
    prov = model.get('provenance') or {}
    facts = [('method', model.get('method')), ('estimator', model.get('estimator')),
             ('bag', prov.get('bag')), ('validation bag', prov.get('validate')),
             ('URDF (nominal)', (model.get('urdf') or {}).get('file')),
             ('total mass (kg)', model.get('total_mass')),
             ('samples fitted', summary.get('samples_fitted')),
             ('held out', metrics.get('held_out')),
             ('rejected', metrics.get('rejected')), ('created', prov.get('created'))]
    parts.append(_table(['', ''], [[e(k), e(str(v))] for k, v in facts if v is not None]))
    parts.append('<h2>Held-out validation</h2>')
    rows = [[e(k.replace('_', ' ')), _fmt('{:.5g}', v)] for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for key in ('momentum_rms', 'nominal_momentum_rms', 'zmp_rms_mm_per_axis'):
        if isinstance(metrics.get(key), dict):
            rows += [[e(f'{key.replace("_", " ")} {a}'), _fmt('{:.5g}', v)]
                     for a, v in metrics[key].items()]
    parts.append(_table(['', 'value'], rows))
    if 'held_out' in images:
        parts.append(_img(images['held_out']))
    parts.append('<h2>Unknowns</h2>')
    unexcited = model.get('unexcited') or []
    parts.append('<p class="note">Unknowns the motion did not excite keep the nominal '
                 'URDF\'s value (marked <span class="bad">not excited</span>): '
                 f'{e(", ".join(unexcited)) or "none"}.</p>')
    names = summary.get('unknowns') or []
    rows = [[e(n), _fmt('{:.5g}', nom), _fmt('{:.5g}', val),
             'yes' if ok else '<span class="bad">not excited</span>']
            for n, nom, val, ok in zip(names, summary.get('nominal_values') or [],
                                       summary.get('values') or [],
                                       summary.get('identified') or [])]
    if rows:
        parts.append(_table(['unknown', 'nominal', 'identified', 'excited'], rows))
    parts.append('<h2>Link parameters</h2>')
    rows = []
    for body, p in (model.get('parameters') or {}).items():
        m = p.get('m') or float('nan')
        com = [(p.get(k) or 0.0) / m for k in ('mx', 'my', 'mz')]
        rows.append([e(body), _fmt('{:.5g}', p.get('m'))] + [_fmt('{:.4f}', c) for c in com])
    parts.append(_table(['body', 'mass (kg)', 'CoM x (m)', 'CoM y (m)', 'CoM z (m)'], rows))
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')
    parts.append(f'<p class="note">Written {e(stamp)} by arm_dyn_id '
                 f'({e(str(prov.get("software", "")))}).</p>')
    parts.append('</body></html>\n')
    out = folder / 'report.html'
    out.write_text('\n'.join(parts))
    return out
