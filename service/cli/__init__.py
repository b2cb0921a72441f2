"""The ``autograde`` command line: ``parser`` (the entry point and the commands by audience),
``remote`` and ``client`` (a student's commands on a service), ``local`` (grading here),
``admin``, ``database`` and ``lti`` (administering a service), ``processes`` (running one)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``autograde``: the parser is imported on call, so no module of the package imports
    another through this one."""
    from service.cli.parser import main as run

    return run(argv)
