"""Write DIR/report.html (self-contained, plots embedded) and its PNGs from a fit's folder.

DIR is the --out folder of `arm-dyn-id fit` (model.yaml, validation.json,
fit_data.npz). `fit` writes the report itself unless --no-report is given.

model.yaml goes through the model gate (arm_dyn_id.model.gate): a corrupt,
truncated, future-version or non-finite file is one error line (exit 2) and
nothing is written. A fit written marked rejected (`fit --force`), or one the gate
finds implausible or of another URDF, is rendered with the reason in a red banner
under the title, and the title says (REJECTED).

example:
  arm-dyn-id report fit/
"""

from pathlib import Path

HELP = 'write report.html (tables, plots) of a fit folder'


def add_arguments(parser):
    parser.add_argument('dir', type=Path, help='output folder of arm-dyn-id fit')
    parser.add_argument('--title', help='page title')


def run(args):
    from arm_dyn_id.validation.report import write_report
    path = write_report(args.dir.expanduser(), title=args.title)
    print(f'report: {path}')
    return 0
