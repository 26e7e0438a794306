"""Write DIR/report.html (self-contained, plots embedded) and its PNGs from a fit's folder.

DIR is the --out folder of `arm-dyn-id fit` (model.yaml, validation.json,
fit_data.npz). `fit` writes the report itself unless --no-report is given.

model.yaml goes through the model gate (arm_dyn_id.model.gate): a corrupt,
truncated, future-version or non-finite file is one error line (exit 2) and
nothing is written. A fit written marked rejected (`fit --force`), or one the gate
finds implausible or of another URDF, is rendered with the reason in a red banner
under the title, and the title says (REJECTED). A model.yaml changed after its fit
(its SHA-256 is not the one the fit kept in validation.json) is rendered with a banner,
and a warning on stderr, saying the tables and plots score the fitted model, not it.

example:
  arm-dyn-id report fit/
"""

from pathlib import Path

HELP = 'write report.html (tables, plots) of a fit folder'


def add_arguments(parser):
    parser.add_argument('dir', type=Path, help='output folder of arm-dyn-id fit')
    parser.add_argument('--title', help='page title')


def run(args):
    import json
    import sys
    from arm_dyn_id.validation.report import edited_since_fit, write_report
    folder = args.dir.expanduser()
    path = write_report(folder, title=args.title)
    edited = edited_since_fit(folder, json.loads((folder / 'validation.json').read_text()))
    if edited:
        print(f'warning: {edited}', file=sys.stderr)
    print(f'report: {path}')
    return 0
