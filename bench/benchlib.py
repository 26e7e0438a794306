"""What every benchmark script shares: one JSON line per result on stdout, and the
tables (Markdown + JSON, with the machine, the command and the git commit) written
to ``docs/results/<bench>.md`` / ``.json`` so that ``docs/benchmarks.md`` can point
at them.

Use::

    parser = argparse.ArgumentParser(...)
    benchlib.add_arguments(parser)
    args = parser.parse_args()
    report = benchlib.Report('recorder_rate', args, title='Recorder throughput')
    report.add('throughput', {'rate_hz': 1000, 'delivered_fraction': 1.0})
    report.save()        # prints where the tables went

Rows are dicts; a table's columns are the union of its rows' keys, in first-seen
order (``Report.columns`` fixes them). Lists are written comma-separated.
"""

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

from arm_dyn_id.data.bag_writer import json_default

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / 'docs' / 'results'
#: the real UR10e recordings (../shared/real-data/ur10e): read when present, never copied
#: into the repository, nor anything made from them
UR10E = (REPO.parent / 'shared' / 'real-data' / 'ur10e').resolve()


def add_arguments(parser):
    """Add ``--results DIR`` and ``--no-save`` to a benchmark's argument parser."""
    parser.add_argument('--results', type=Path, default=RESULTS,
                        help=f'folder for the tables (default {RESULTS.relative_to(REPO)})')
    parser.add_argument('--no-save', action='store_true',
                        help='print the JSON lines only; write no tables or plots')
    return parser


def _cpu_model():
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def _git_commit():
    try:
        out = subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=REPO,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine():
    """Facts about this machine and software that a reader needs to compare numbers."""
    import numpy
    facts = {'cpu': _cpu_model(), 'cores': os.cpu_count(), 'python': platform.python_version(),
             'numpy': numpy.__version__, 'platform': platform.platform()}
    try:
        facts['memory_gib'] = round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
                                    / 2 ** 30, 1)
    except (ValueError, OSError):
        pass
    try:
        import pinocchio
        facts['pinocchio'] = pinocchio.__version__
    except ImportError:
        pass
    return facts


def _cell(value):
    if isinstance(value, float):
        return f'{value:.6g}'
    if isinstance(value, (list, tuple)):
        return ', '.join(_cell(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value).replace('|', '\\|')


def markdown_table(rows, columns=None):
    """A Markdown table of dict rows (columns: given, else the union of keys in order)."""
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
    lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    for row in rows:
        lines.append('| ' + ' | '.join(_cell(row.get(c, '')) for c in columns) + ' |')
    return '\n'.join(lines)


class Report:
    """Collects a benchmark's rows, prints each as a JSON line, writes the tables.

    Parameters
    ----------
    name : str
        File stem of the tables (``docs/results/<name>.md``).
    args : argparse.Namespace, optional
        Parsed arguments (for ``--results`` / ``--no-save``, and recorded as given).
    title : str, optional
        Heading of the Markdown file.
    """

    def __init__(self, name, args=None, title=None):
        self.name = name
        self.title = title or name
        self.args = args
        self.folder = Path(getattr(args, 'results', RESULTS))
        self.save_enabled = not getattr(args, 'no_save', False)
        self.tables = {}
        self._columns = {}
        self.notes = []
        self.command = 'python ' + ' '.join(
            [os.path.relpath(sys.argv[0], REPO) if sys.argv else name] + sys.argv[1:])
        self.started = time.strftime('%Y-%m-%d %H:%M:%S %Z')
        self.load_start = os.getloadavg()
        self._t0 = time.monotonic()

    def add(self, table, row):
        """Record one row of ``table`` and print it as a JSON line; returns the row."""
        row = dict(row)
        self.tables.setdefault(table, []).append(row)
        print(json.dumps({'bench': self.name, 'table': table, **row}, default=json_default),
              flush=True)
        return row

    def columns(self, table, columns):
        """Fix the column order (and subset) of ``table`` in the Markdown output."""
        self._columns[table] = list(columns)

    def note(self, text):
        """A sentence written under the tables (method, caveat, the paper's figure)."""
        self.notes.append(text)

    def plot_path(self, filename):
        """Where a plot belongs: ``docs/<filename>`` beside benchmarks.md, or the
        ``--results`` folder when one is given; None with ``--no-save``."""
        if not self.save_enabled:
            return None
        if self.folder.resolve() != RESULTS.resolve():
            self.folder.mkdir(parents=True, exist_ok=True)
            return self.folder / filename
        return REPO / 'docs' / filename

    def save(self):
        """Write ``<name>.md`` and ``<name>.json`` into the results folder."""
        if not self.save_enabled:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        meta = {'bench': self.name, 'command': self.command, 'started': self.started,
                'seconds': round(time.monotonic() - self._t0, 1), 'commit': _git_commit(),
                'machine': machine(),
                'load_average_1min': [round(self.load_start[0], 2),
                                      round(os.getloadavg()[0], 2)]}
        doc = {**meta, 'notes': self.notes, 'tables': self.tables}
        (self.folder / f'{self.name}.json').write_text(
            json.dumps(doc, indent=1, default=json_default) + '\n')
        m = meta['machine']
        lines = [f'# {self.title}', '',
                 f'Produced by `{self.command}` (commit {meta["commit"]}) on {meta["started"]}, '
                 f'{meta["seconds"]} s.', '',
                 f'Machine: {m["cpu"]}, {m["cores"]} cores, '
                 f'{m.get("memory_gib", "?")} GiB; Python {m["python"]}, numpy {m["numpy"]}'
                 + (f', pinocchio {m["pinocchio"]}' if 'pinocchio' in m else '')
                 + f'. 1-min load average {meta["load_average_1min"][0]} at the start, '
                 f'{meta["load_average_1min"][1]} at the end.', '']
        for table, rows in self.tables.items():
            lines += [f'## {table}', '', markdown_table(rows, self._columns.get(table)), '']
        if self.notes:
            lines += ['## Notes', ''] + [f'- {n}' for n in self.notes] + ['']
        path = self.folder / f'{self.name}.md'
        path.write_text('\n'.join(lines))
        print(f'tables written to {os.path.relpath(path)} and {self.name}.json',
              file=sys.stderr)
        return path


class Spinner:
    """Spin an rclpy ``executor`` in slices in a daemon thread until :meth:`stop`."""

    def __init__(self, executor, context, period=0.1):
        self._running = True

        def spin():
            while self._running and context.ok():
                executor.spin_once(timeout_sec=period)
        self._thread = threading.Thread(target=spin, daemon=True, name='bench-spin')
        self._thread.start()

    def stop(self, timeout=2.0):
        self._running = False
        self._thread.join(timeout)


def ur10e_bag(names, out, rows=None, options=(), data=UR10E):
    """A rosbag2 bag at ``out`` of the real UR10e recordings ``names``, made by the data's
    own ``to_bag.py`` (several names: joined one after another with 1 s gaps).

    ``rows``: None, one ``'a:b'`` or one per name; ``options``: more ``to_bag.py``
    options (``--effort torque``, ``--torque-constants ...``). ``out`` must lie outside
    the repository. Returns ``out``; RuntimeError with to_bag's message when it fails.
    """
    names = [names] if isinstance(names, str) else list(names)
    out = Path(out)
    if REPO in out.resolve().parents:
        raise RuntimeError(f'{out}: bags of the real data are made outside the repository')
    argv = [sys.executable, str(data / 'to_bag.py'),
            *[str(data / 'data' / f'{name}.csv.gz') for name in names], str(out),
            *[str(o) for o in options]]
    for r in ([rows] if isinstance(rows, str) else rows or ()):
        argv += ['--rows', r]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f'to_bag {names}: {done.stderr.strip()}')
    return out


def ur10e_csv(name, data=UR10E):
    """One real UR10e recording as its ``to_bag.py`` reads it (its ``load_csv``: a dict of
    arrays, ``t``, ``i`` ... as that script documents)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location('ur10e_to_bag', data / 'to_bag.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_csv(data / 'data' / f'{name}.csv.gz')


def run_cli(argv, tree=None):
    """``python -m arm_dyn_id ARGV`` of this repository's venv, or of the checkout ``tree``
    (``git archive REV | tar -x -C TREE``) for a before / after; CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree else None
    return subprocess.run([str(REPO / '.venv' / 'bin' / 'python'), '-m', 'arm_dyn_id',
                           *[str(a) for a in argv]], capture_output=True, text=True,
                          cwd=tree or REPO, env=env)


def gated_fit(bag, out, options, tree=None):
    """``arm-dyn-id fit BAG --out OUT OPTIONS --force``: (exit code without --force, what
    was fitted or the gate's cause, the gate's evidence dict, the refusal's text). --force
    writes a refused model marked rejected, so the gate is read from its validation.json;
    an input error (exit 2) gives the last line of stderr as the cause."""
    done = run_cli(['fit', bag, '--out', out, '--no-report', '--quiet', '--force', *options],
                   tree)
    out = Path(out)
    if done.returncode == 2 or not (out / 'validation.json').is_file():
        return done.returncode, done.stderr.strip().splitlines()[-1][:80], {}, ''
    doc = json.loads((out / 'validation.json').read_text())['fit_summary']
    gate = doc.get('plausibility') or {}
    kind = (doc.get('dynamics') or {}).get('kind', '?')
    code = 0 if gate.get('ok', True) else 3
    what = kind if code == 0 else f'{kind}: {gate.get("cause")}'
    if code == 0 and gate.get('effort_scale_suspects'):
        # written, with the fit's warning (plausibility.effort_scale_warning)
        what += f' (warned: {", ".join(gate["effort_scale_suspects"])} reads high)'
    if code == 0 and gate.get('effort_scale_decisive'):
        # the same warning: a scale that explains much of the record, either way
        what += f' (warned: {", ".join(gate["effort_scale_decisive"])} reads off)'
    if code == 0 and gate.get('pair_offset_warning'):
        # a gravity fit from sweeps that moves with the pair offsets freed
        what += ' (warned: pair offsets)'
    if code == 0 and gate.get('pair_scale_warning'):
        # a gravity fit from sweeps whose joints' efforts disagree
        what += ' (warned: effort scale)'
    tilt = gate.get('gravity_tilt') or {}
    refused_for_tilt = code != 0 and 'gravity tilted' in (gate.get('reason') or '')
    if gate.get('gravity_tilt_warning') or refused_for_tilt:
        what += f' (tilt {tilt.get("degrees", 0):.1f}°)'
    return code, what, gate, gate.get('reason') or ''


def ur10e_arguments(doc, argv=None, more=None):
    """The options of a real-UR10e bench: ``--tree`` (another checkout's code, for a before /
    after) and what ``more(parser)`` adds. None (after saying so) when the data is absent:
    the bench skips."""
    import argparse
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument('--tree', type=Path, help='run this checkout\'s arm_dyn_id instead')
    if more is not None:
        more(parser)
    args = parser.parse_args(argv)
    if not UR10E.is_dir():
        print(f'skipped: {UR10E} does not exist (real UR10e data not present)')
        return None
    return args
