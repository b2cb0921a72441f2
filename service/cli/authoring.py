"""The authoring subcommands of ``autograde assignments``: ``new`` and ``mutants``.

Torch is imported in the handlers only (``--help`` stays fast, the CLI import path torch-free).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.mutants import VERDICTS
from grader.mutation import OPERATORS
from service.cli.common import add_parser


def add_authoring_commands(sub: Any) -> None:
    """Add ``new`` and ``mutants`` to the ``assignments`` subparsers ``sub``."""
    new = add_parser(sub, "new", "scaffold a working assignment package to edit")
    new.add_argument("slug", metavar="SLUG", help="the new assignment's name (a-z, 0-9, -)")
    new.add_argument("--dir", type=Path, metavar="FOLDER",
                     help="where to write it (default: $AUTOGRADE_ASSIGNMENTS_DIR)")
    new.add_argument("--title", help="the assignment's title")
    new.set_defaults(handler=_new)

    mutants = add_parser(sub, "mutants",
                         "mutate the reference, grade each mutant: what the checks miss")
    mutants.add_argument("slug", metavar="SLUG", help="the assignment")
    mutants.add_argument("--limit", type=int, default=0, metavar="N",
                         help="grade at most N mutants (default: all)")
    mutants.add_argument("--jobs", type=int, default=0, metavar="N",
                         help="mutants graded in parallel (default: the machine's cores)")
    mutants.add_argument("--backend", choices=["local", "docker"], default="local",
                         help="the sandbox each mutant runs in")
    mutants.add_argument("--seed", type=int, default=0, metavar="N",
                         help="the grading seed")
    mutants.add_argument("--operators", type=_names(OPERATORS), metavar="NAME,...",
                         help="grade only the mutants of these operators, to leave out those "
                         f"that are noise for your lab (of: {', '.join(OPERATORS)})")
    mutants.add_argument("--only", type=_names(VERDICTS), metavar="VERDICT,...",
                         help="list only the mutants of these verdicts, in the text and the "
                         f"JSON; the counts stay whole (of: {', '.join(VERDICTS)}; "
                         "default: full-marks,wrong-output in the text, all in the JSON)")
    mutants.add_argument("--json", type=Path, metavar="FILE",
                         help="also write the full report as JSON ('-': print only JSON)")
    mutants.set_defaults(handler=_mutants)


def _names(allowed: tuple[str, ...]) -> Callable[[str], frozenset[str]]:
    """An argument type: comma-separated names, each one of ``allowed``."""
    def parse(text: str) -> frozenset[str]:
        names = frozenset(name.strip() for name in text.split(",") if name.strip())
        unknown = sorted(names - set(allowed))
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown: {', '.join(unknown) or '(none given)'}; of: {', '.join(allowed)}")
        return names
    return parse


def _new(args: argparse.Namespace) -> int:
    from assignments.scaffold import default_target, scaffold

    target = args.dir if args.dir is not None else default_target()
    package = scaffold(args.slug, target, title=args.title)
    print(f"wrote {package}")
    if args.dir is not None and str(target.resolve()) not in os.environ.get(
            "AUTOGRADE_ASSIGNMENTS_DIR", ""):
        print(f"add it to the search path: export AUTOGRADE_ASSIGNMENTS_DIR={target.resolve()}")
    print(f"then prove it sound: autograde assignments check {args.slug}")
    return 0


def _mutants(args: argparse.Namespace) -> int:
    from grader.loader import load_assignment
    from grader.mutants import mutation_report
    from grader.mutation import SpecialiseError
    from sandbox import SandboxUnavailable

    assignment = load_assignment(args.slug)
    jobs = args.jobs or os.cpu_count() or 1
    try:
        report = mutation_report(assignment, seed=args.seed, limit=args.limit or None,
                                 jobs=jobs, backend=args.backend, operators=args.operators)
    except SandboxUnavailable as exc:
        print(f"autograde: the {args.backend} sandbox cannot run here: {exc}", file=sys.stderr)
        return 3
    except (SpecialiseError, RuntimeError) as exc:
        print(f"autograde: {exc}", file=sys.stderr)
        return 2
    document = report.to_json() if args.only is None else report.to_json(args.only)
    if args.json is not None and str(args.json) == "-":
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(report.render() if args.only is None else report.render(args.only))
    if args.json is not None:
        print(f"\nfull report: {args.json}")
    return 0
