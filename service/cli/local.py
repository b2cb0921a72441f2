"""Commands that grade on this machine, without a service: ``grade`` and ``check``.

Only their handlers import the grading pipeline (and torch with it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from service.cli.authoring import add_authoring_commands
from service.cli.common import Commands, add_no_plots, add_parser, fail
from service.cli.terminal import terminal_safe

if TYPE_CHECKING:
    from assignments import Assignment

SANDBOX_FAILED = 3


def register(commands: Commands) -> None:
    grade = commands.add(
        "local", "grade", "grade a submission's files here, or a folder of submissions",
        description="Grade one submission's files and print the report; or, given a folder, "
                    "grade each .py file or notebook in it and each subfolder (its .py files "
                    "or notebook) as one submission, in parallel through one warm sandbox "
                    "pool, and print a summary table.")
    grade.add_argument("files", nargs="+", type=Path, metavar="FILE",
                       help="the submission's files, or one folder of submissions")
    grade.add_argument("--assignment", required=True, metavar="SLUG",
                       help="the assignment (`autograde assignments list` lists them)")
    grade.add_argument("--json", action="store_true", help="print only the results document")
    grade.add_argument("--backend", choices=["auto", "local", "docker"], default="auto",
                       help="the sandbox: docker when an engine answers (auto), or local")
    grade.add_argument("--seed", type=int, metavar="N",
                       help="grade with this seed, as a recorded grading did (default: a new "
                            "one each)")
    grade.add_argument("--jobs", type=int, metavar="N",
                       help="a folder: submissions graded at once (default: one per core)")
    grade.add_argument("--out", type=Path, metavar="DIR",
                       help="a folder: write each submission's results document there, with "
                            "summary.json")
    grade.add_argument("--fork-server", action="store_true",
                       help="a folder, docker sandbox: grade in the fork-server mode, several "
                            "times faster; each submission runs in a child of a long-lived "
                            "container (docs/operators/fork-server.md: what it shares)")
    add_no_plots(grade)
    grade.set_defaults(handler=_grade)

    actions = commands.assignment_actions
    listing = add_parser(actions, "list", "the assignments this installation ships")
    listing.set_defaults(handler=lambda args: list_local())
    check = add_parser(actions, "check",
                       "prove an assignment sound: the table of its mistakes' coverage")
    check.add_argument("slug", metavar="SLUG", help="the assignment")
    check.add_argument("--seed", type=int, default=0, metavar="N", help="the seed to check with")
    check.add_argument("--jobs", type=int, default=0, metavar="N",
                       help="variants graded in parallel processes (default: the machine's "
                       "cores)")
    check.add_argument("--explains", nargs="+", type=Path, default=[], metavar="FILE",
                       help="also grade these submissions (a group's representative, say) "
                            "in the sandbox: the check fails where one is still wrong-output")
    check.add_argument("--backend", choices=["auto", "local", "docker"], default="auto",
                       help="with --explains: the sandbox (docker when an engine answers)")
    check.set_defaults(handler=_check)
    export = add_parser(actions, "export",
                        "an assignment as a Gradescope autograder or a PrairieLearn grader",
                        description="Write an assignment's grader for another platform: a "
                                    "Gradescope autograder zip, or a PrairieLearn external "
                                    "grader (an image build context and its info.json "
                                    "fragment). Hidden parts go into the grader only "
                                    "(docs/students/platforms.md).")
    export.add_argument("slug", metavar="SLUG", help="the assignment")
    export.add_argument("--format", required=True, choices=["gradescope", "prairielearn"],
                        help="the platform")
    export.add_argument("--out", required=True, type=Path, metavar="PATH",
                        help="the zip to write (gradescope), or a new folder (prairielearn)")
    export.add_argument("--image", metavar="NAME",
                        help="prairielearn: the image name info.json gives (default: "
                             "autograde-SLUG)")
    export.set_defaults(handler=_export)
    groups = add_parser(actions, "groups",
                        "group a folder graded offline by what no known mistake explains")
    groups.add_argument("folder", type=Path, metavar="DIR",
                        help="the results documents `autograde grade DIR --out DIR` wrote")
    groups.add_argument("--near", type=float, default=None, metavar="D",
                        help="largest fingerprint distance grouped as one mistake, 0 to 1 "
                             "(default: the dashboard's)")
    groups.set_defaults(handler=_groups)
    add_authoring_commands(actions)
    commands.listed["local"].append(
        ("assignments ACTION",
         "list, check, new, mutants, export, groups: this installation's assignments"))


def _grade(args: argparse.Namespace) -> int:
    folders = [path for path in args.files if path.is_dir()]
    if folders:
        if len(args.files) > 1:
            return fail("a folder is graded alone: give one folder, or one submission's files")
        if args.jobs is not None and args.jobs < 1:
            return fail("--jobs is at least 1")
        from service.cli.batch import run

        return run(folder=folders[0], slug=args.assignment, backend_name=args.backend,
                   jobs=args.jobs, seed=args.seed, out=args.out, as_json=args.json,
                   fork_server=args.fork_server)
    if args.jobs is not None or args.out is not None or args.fork_server:
        return fail("--jobs, --out and --fork-server are for grading a folder")
    return _grade_one(args)


def _grade_one(args: argparse.Namespace) -> int:
    from assignments.spec import load_spec
    from sandbox import SandboxUnavailable, create_backend
    from sandbox.selection import choose_backend

    limits = load_spec(args.assignment).limits
    files: dict[str, bytes] = {}
    for path in args.files:
        try:
            files[path.name] = path.read_bytes()
        except OSError as exc:
            return fail(f"cannot read {path}: {exc.strerror}")
    name = args.backend if args.backend != "auto" else choose_backend(warn=sys.stderr)
    try:
        # Before torch and the assignment load here: the sandbox starts (its own torch
        # import) on the other core meanwhile.
        backend = create_backend(name, warm=False, limits=limits)
    except SandboxUnavailable as exc:
        print(f"autograde: the {name} sandbox cannot run here: {exc}", file=sys.stderr)
        return SANDBOX_FAILED
    try:
        from grader.loader import load_assignment
        from grader.pipeline import GradingPipeline
        from grader.report import render_report

        assignment = load_assignment(args.assignment)
        try:
            document = GradingPipeline(backend=backend).grade(assignment, files,
                                                              seed=args.seed)
        except SandboxUnavailable as exc:
            print(f"autograde: the sandbox failed, nothing was graded: {exc}", file=sys.stderr)
            return SANDBOX_FAILED
        # The report first: removing the container is the backend's last step, not the user's.
        if args.json:
            json.dump(document, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(terminal_safe(f"{assignment.title} — "
                                f"{', '.join(str(p) for p in args.files)}\n"))
            print(terminal_safe(render_report(document, plots=args.plots)))
        sys.stdout.flush()
        return 0
    finally:
        backend.close()


def _export(args: argparse.Namespace) -> int:
    from assignments.spec import AssignmentError
    from grader.exports import export_gradescope, export_prairielearn

    try:
        if args.format == "gradescope":
            if args.image is not None:
                return fail("--image is for --format prairielearn")
            path = export_gradescope(args.slug, args.out)
            print(f"wrote {path}: upload it as the assignment's autograder on Gradescope")
        else:
            path = export_prairielearn(args.slug, args.out, image=args.image)
            print(f"wrote {path}: build its image, then merge info.json into the question's")
    except (AssignmentError, FileExistsError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write {args.out}: {exc.strerror or exc}")
    return 0


def _groups(args: argparse.Namespace) -> int:
    """Group the unexplained submissions of a folder of results documents, largest first."""
    from grader.fingerprints import NEAR, Fingerprint, fingerprint_of, group

    near = NEAR if args.near is None else args.near
    if not 0 <= near <= 1:
        return fail("--near is a distance between 0 and 1")
    if not args.folder.is_dir():
        return fail(f"{args.folder} is not a folder of results documents")
    printed: list[tuple[str, Fingerprint]] = []
    for path in sorted(args.folder.glob("*.json")):
        if path.name == "summary.json":
            continue
        try:
            document = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            return fail(f"cannot read {path}: {exc}")
        found = fingerprint_of(document) if isinstance(document, dict) else None
        if found is not None:
            printed.append((path.stem, found))
    if not printed:
        print("No submission in this folder has outputs that no known mistake explains.")
        return 0
    for number, each in enumerate(group(printed, near=near), start=1):
        closest = ", ".join(f"{n.code} {n.distance:.2f}" for n in each.fingerprint.nearest)
        print(terminal_safe(
            f"group {number} ({each.fingerprint.key}): {each.size} submission(s), "
            f"{each.exact} exactly alike; representative {each.representative}; closest "
            f"known mistakes: {closest or 'none'}\n  " + ", ".join(each.members)))
    return 0


def list_local() -> int:
    """The assignments this installation ships (``autograde assignments list``)."""
    from assignments.spec import list_assignments
    from grader.loader import load_assignment

    for slug in list_assignments():
        assignment = load_assignment(slug)
        print(f"{slug:<24} {assignment.title}  ({len(assignment.checks)} checks, "
              f"{assignment.max_score:g} points, {len(assignment.mistakes)} known mistakes)")
    return 0


def _check(args: argparse.Namespace) -> int:
    from grader.authoring import coverage_report
    from grader.loader import load_assignment

    assignment = load_assignment(args.slug)
    report = coverage_report(assignment, seed=args.seed,
                             workers=args.jobs if args.jobs > 0 else os.cpu_count() or 1)
    print(report.render())
    if not args.explains:
        return 0 if report.sound else 1
    explained = _explains(assignment, args.explains, backend_name=args.backend, seed=args.seed)
    if explained is None:
        return SANDBOX_FAILED
    return 0 if report.sound and explained else 1


def _explains(assignment: Assignment, paths: list[Path], *, backend_name: str,
              seed: int) -> bool | None:
    """Grade each file as a submission and say which codes name it: True when no file is
    left with ``wrong-output``; None when the sandbox cannot run."""
    from grader.fingerprints import UNEXPLAINED_CODE
    from grader.pipeline import GradingPipeline
    from sandbox import SandboxUnavailable, create_backend
    from sandbox.selection import choose_backend

    name = backend_name if backend_name != "auto" else choose_backend(warn=sys.stderr)
    try:
        backend = create_backend(name, warm=True, limits=assignment.limits)
    except SandboxUnavailable as exc:
        print(f"autograde: the {name} sandbox cannot run here: {exc}", file=sys.stderr)
        return None
    print("\nThe submissions it must explain:")
    every = True
    try:
        pipeline = GradingPipeline(backend=backend)
        for path in paths:
            try:
                files = {assignment.entry: path.read_bytes()}
            except OSError as exc:
                print(f"  {path}: cannot read it ({exc.strerror})")
                every = False
                continue
            document = pipeline.grade(assignment, files, seed=seed)
            codes = [d["code"] for d in document["diagnoses"]]
            left = UNEXPLAINED_CODE in codes
            every = every and not left
            verdict = "STILL UNEXPLAINED" if left else "explained"
            print(terminal_safe(f"  {path}: {verdict}: {', '.join(codes) or 'no code'} "
                                f"({document['score']:g}/{document['max_score']:g})"))
    except SandboxUnavailable as exc:
        print(f"autograde: the sandbox failed: {exc}", file=sys.stderr)
        return None
    finally:
        backend.close()
    return every
