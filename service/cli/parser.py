"""The ``autograde`` parser and entry point: every command module's commands, by audience.

Each command module registers its commands with light imports only; a handler imports
what it needs (the grading pipeline and torch for local grading, the database for admin), so
``--help`` and the student's commands start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from service.cli import admin, local, processes, remote
from service.cli.common import Commands, HelpFormatter, fail


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograde", usage="autograde [-h] [--version] COMMAND ...",
        formatter_class=HelpFormatter,
        description="Grade PyTorch attention assignments: locally, or through a grading "
                    "service.")
    parser.add_argument("--version", action="version", version=f"autograde {version()}",
                        help="print the version and exit")
    commands = Commands(parser.add_subparsers(required=True, metavar="COMMAND", prog="autograde",
                                              help=argparse.SUPPRESS))
    remote.register(commands)
    local.register(commands)
    admin.register(commands)
    processes.register(commands)
    parser.epilog = commands.overview()
    return parser


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("autograde")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    from assignments.spec import AssignmentError

    args = build_parser().parse_args(argv)
    try:
        prepare = getattr(args, "prepare", None)  # what a command needs first (admin: a service)
        if prepare is not None and (status := prepare(args)):
            return int(status)
        return int(args.handler(args))
    except AssignmentError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as exc:  # the last guard: a bug is reported in one line, not a traceback
        if os.environ.get("AUTOGRADE_DEBUG"):
            raise
        return fail(f"unexpected error ({type(exc).__name__}): {exc} "
                    "(AUTOGRADE_DEBUG=1 shows the traceback)")


def entry_point() -> NoReturn:
    """The ``autograde`` console script: ``main``, then the process ends.

    A command that graded here has torch loaded, and the interpreter's teardown of it is a
    noticeable share of a one-off grading, paid after the report is out. Everything of ours is
    done by then (the sandbox removed in the command's own ``finally``), so such a process ends
    as soon as its output and logs are flushed; any other command ends as usual.
    """
    status = main()
    if "torch" not in sys.modules:
        sys.exit(status)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away (`| head`)
            stream.flush()
    os._exit(status)
