"""Command line interface: ``arm-dyn-id <command> ...`` (also ``python -m arm_dyn_id``).

Each subcommand lives in its own module, imported only when that subcommand
runs, so ``arm-dyn-id --help`` stays fast and one command's heavy imports never
slow down another. A subcommand module ``arm_dyn_id/cli/<name>.py`` provides::

    HELP = 'one line shown by arm-dyn-id --help'   # optional

    def add_arguments(parser):       # parser: argparse.ArgumentParser
        parser.add_argument('bag')

    def run(args):                   # args: argparse.Namespace
        ...
        return 0                     # process exit code

To add a command, add one line to ``COMMANDS``; until its module exists, the
command answers "<name>: not implemented yet" and exits 2. Errors of the core
(``arm_dyn_id.errors``) and file errors are printed as one line and exit 1.
"""

import argparse
import importlib
import sys

from arm_dyn_id import __version__
from arm_dyn_id import errors

PROG = 'arm-dyn-id'

#: name -> (module, one-line help used until the module defines HELP)
COMMANDS = {
    'demo': ('arm_dyn_id.cli.demo', 'run the whole pipeline on a simulated arm'),
    'design': ('arm_dyn_id.cli.design', 'design excitation trajectories for an arm'),
    'fit': ('arm_dyn_id.cli.fit', 'fit the dynamic model to a recorded bag'),
    'report': ('arm_dyn_id.cli.report', 'write a report of a fit (tables, plots)'),
    'validate': ('arm_dyn_id.cli.validate', 'check a fitted model on held-out data'),
}

#: exit codes
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

_USER_ERRORS = (
    errors.URDFError, errors.JointNameError, errors.ConfigError,
    errors.RankDeficientError, errors.DataError, OSError,
)


def load_command(name):
    """Import the module of subcommand ``name``.

    Returns
    -------
    module or None
        None when the module does not exist yet; any other import error
        (a missing dependency inside the module) propagates.
    """
    module_name = COMMANDS[name][0]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def _not_implemented(args):
    print('{}: not implemented yet'.format(args.command), file=sys.stderr)
    return EXIT_USAGE


def _chosen_command(argv):
    """Return the first argument that names a subcommand, or None."""
    for arg in argv:
        if not arg.startswith('-'):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv=()):
    """Build the argument parser; only the chosen subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='Identify the dynamic parameters of a robot arm.')
    parser.add_argument('--version', action='version',
                        version='{} {}'.format(PROG, __version__))
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    chosen = _chosen_command(argv)
    for name, (_, summary) in COMMANDS.items():
        if name != chosen:
            sub.add_parser(name, help=summary)
            continue
        module = load_command(name)
        if module is None:
            cmd = sub.add_parser(name, help=summary, description=summary)
            cmd.add_argument('args', nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            cmd.set_defaults(func=_not_implemented)
            continue
        summary = getattr(module, 'HELP', summary)
        cmd = sub.add_parser(name, help=summary, description=module.__doc__ or summary,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(cmd)
        cmd.set_defaults(func=module.run)
    return parser


def main(argv=None):
    """Run the CLI and return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; ``sys.argv[1:]`` by default.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except _USER_ERRORS as exc:
        print('{} {}: error: {}'.format(PROG, args.command, exc), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return EXIT_OK if code is None else int(code)


if __name__ == '__main__':
    sys.exit(main())
