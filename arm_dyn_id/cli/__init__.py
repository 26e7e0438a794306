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
command answers "<name>: not implemented yet" and exits 2.

Exit codes: 0 done; 2 a usage or input error (a bad option, file, bag, config
value: errors of the core, ``arm_dyn_id.errors``, and file errors), printed as
one line that names the thing; 3 the data cannot support the result (a fit
refused as implausible, see ``arm-dyn-id fit --force``; a payload the data does
not show; ``validate``'s verdict FAIL; a joint ``check`` cannot test); 4 ``check``
found a joint that disagrees with the URDF; 1 an unexpected
failure (a bug), also one line. The global ``--debug`` option (anywhere on the
command line) prints the traceback as well.
"""

import argparse
import importlib
import sys

from arm_dyn_id import __version__
from arm_dyn_id import errors
from arm_dyn_id.blas_threads import short_blas_spin
from arm_dyn_id.process_exit import end_process

PROG = 'arm-dyn-id'

#: name -> (module, one-line help used until the module defines HELP)
COMMANDS = {
    'calibrate': ('arm_dyn_id.cli.calibrate', 'torque constants from twin runs with a known load'),
    'check': ('arm_dyn_id.cli.check', 'pre-flight check of a bag against the nominal URDF'),
    'demo': ('arm_dyn_id.cli.demo', 'run the whole pipeline on a simulated arm'),
    'design': ('arm_dyn_id.cli.design', 'design excitation trajectories for an arm'),
    'fit': ('arm_dyn_id.cli.fit', 'fit the dynamic model to a recorded bag'),
    'payload': ('arm_dyn_id.cli.payload', 'identify a payload with the arm model frozen'),
    'report': ('arm_dyn_id.cli.report', 'write a report of a fit (tables, plots)'),
    'residual': ('arm_dyn_id.cli.residual', 'residual and contact flag of a model on bags'),
    'validate': ('arm_dyn_id.cli.validate', 'check a fitted model on held-out data'),
}

#: options whose value is a list of numbers, written K1,K2,... or K1 K2 ... (spaces)
NUMBER_LISTS = ('--torque-constants', '--gravity-vector')

#: exit codes: done, unexpected failure, bad usage or input, result refused by its checks
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3

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


def _is_number(text):
    """Whether ``text`` is a number, or numbers joined by commas (``1.5,``, ``1,2``)."""
    parts = [p for p in text.split(',') if p]
    try:
        [float(p) for p in parts]
    except ValueError:
        return False
    return bool(parts)


def join_number_lists(argv):
    """``--torque-constants 1.5 1.5 2`` -> ``--torque-constants 1.5,1.5,2``.

    The numbers that follow a list option (:data:`NUMBER_LISTS`) are joined with
    commas, so a list may be written with spaces, with commas, or both; the first
    token that is not a number (a bag folder, another option) ends the list.
    """
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        out.append(arg)
        i += 1
        if arg in NUMBER_LISTS:
            values = []
            while i < len(argv) and _is_number(argv[i]) and not argv[i].startswith('--'):
                values.append(argv[i].strip(','))
                i += 1
            if values:
                out.append(','.join(values))
    return out


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
    parser.add_argument('--debug', action='store_true',
                        help='print the traceback of an error (anywhere on the command line)')
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


def run():
    """The ``arm-dyn-id`` command (console script, ``python -m arm_dyn_id``): :func:`main`,
    then the process ends without the interpreter's teardown (0.3-0.8 s of freeing
    modules once the work is written; :mod:`arm_dyn_id.process_exit`) when only its main
    thread is left; otherwise a normal exit joins the other threads. OpenBLAS, loaded
    with NumPy by the subcommand, lets its idle threads sleep at once
    (:mod:`arm_dyn_id.blas_threads`)."""
    import threading
    short_blas_spin()
    code = main()
    if threading.active_count() == 1:
        code = end_process(code)
    sys.exit(code)


def main(argv=None):
    """Run the CLI and return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; ``sys.argv[1:]`` by default.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = '--debug' in argv
    argv = join_number_lists([a for a in argv if a != '--debug'])
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    args.debug = debug
    try:
        code = args.func(args)
    except _USER_ERRORS as exc:
        _report(args, exc, debug)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:      # a bug: one line, the traceback with --debug
        _report(args, exc, debug, unexpected=True)
        return EXIT_ERROR
    return EXIT_OK if code is None else int(code)


def _report(args, exc, debug, unexpected=False):
    if debug:
        import traceback
        traceback.print_exception(exc, file=sys.stderr)
    text = ' '.join(str(exc).split()) or type(exc).__name__
    if unexpected:
        text = '{}: {} (unexpected; run with --debug for the traceback)'.format(
            type(exc).__name__, text)
    print('{} {}: error: {}'.format(PROG, args.command, text), file=sys.stderr)


if __name__ == '__main__':
    sys.exit(main())
