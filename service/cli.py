"""The ``autograde`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Only the commands that load hidden parts or grade import the grader (and torch with it), in
# their handlers: ``--help`` and the service's commands start in a fraction of a second.
from assignments.spec import AssignmentError, list_assignments
from service.cli_authoring import add_authoring_commands
from service.cli_service import add_service_commands
from service.terminal import terminal_safe


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    prepare = getattr(args, "prepare", None)  # what a command needs ready first (admin: a service)
    if prepare is not None and (status := prepare(args)):
        return int(status)
    try:
        return int(args.handler(args))
    except AssignmentError as exc:
        print(terminal_safe(f"autograde: {exc}"), file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autograde", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    grade = commands.add_parser("grade", help="grade files locally and print the results")
    grade.add_argument("--assignment", required=True, metavar="SLUG")
    grade.add_argument("files", nargs="+", type=Path, metavar="FILE")
    grade.add_argument("--json", action="store_true", help="print only the results document")
    grade.add_argument("--backend", choices=["auto", "local", "docker"], default="auto",
                       help="sandbox: docker when an engine answers (auto), or local")
    grade.add_argument("--seed", type=int, help="reuse a recorded seed (regrades)")
    grade.set_defaults(handler=_grade)

    assignments = commands.add_parser("assignments", help="list and verify assignments")
    sub = assignments.add_subparsers(required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="the assignments this installation ships")
    listing.set_defaults(handler=_list)
    check = sub.add_parser("check", help="prove an assignment sound: mistake coverage table")
    check.add_argument("slug")
    check.add_argument("--seed", type=int, default=0)
    check.set_defaults(handler=_check)
    add_authoring_commands(sub)

    add_service_commands(commands)
    return parser


def _grade(args: argparse.Namespace) -> int:
    from assignments.loader import load_assignment
    from grader.pipeline import GradingPipeline
    from grader.report import render_report
    from sandbox import SandboxUnavailable, create_backend
    from sandbox.selection import choose_backend

    assignment = load_assignment(args.assignment)
    files: dict[str, bytes] = {}
    for path in args.files:
        try:
            files[path.name] = path.read_bytes()
        except OSError as exc:
            print(f"autograde: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 2
    name = args.backend if args.backend != "auto" else choose_backend(warn=sys.stderr)
    try:
        backend = create_backend(name, warm=False)
    except SandboxUnavailable as exc:
        print(f"autograde: the {name} sandbox cannot run here: {exc}", file=sys.stderr)
        return 3
    try:
        document = GradingPipeline(backend=backend).grade(assignment, files, seed=args.seed)
    except SandboxUnavailable as exc:
        print(f"autograde: the sandbox failed, nothing was graded: {exc}", file=sys.stderr)
        return 3
    finally:
        backend.close()
    if args.json:
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(terminal_safe(f"{assignment.title} — {', '.join(str(p) for p in args.files)}\n"))
        print(terminal_safe(render_report(document)))
    return 0


def _list(args: argparse.Namespace) -> int:
    from assignments.loader import load_assignment

    for slug in list_assignments():
        assignment = load_assignment(slug)
        print(f"{slug:<24} {assignment.title}  ({len(assignment.checks)} checks, "
              f"{assignment.max_score:g} points, {len(assignment.mistakes)} known mistakes)")
    return 0


def _check(args: argparse.Namespace) -> int:
    from assignments.loader import load_assignment
    from grader.authoring import coverage_report

    report = coverage_report(load_assignment(args.slug), seed=args.seed)
    print(report.render())
    return 0 if report.sound else 1


if __name__ == "__main__":
    sys.exit(main())
