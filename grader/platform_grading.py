"""The grader of an exported bundle, run by Gradescope or PrairieLearn in their container.

It runs as root in the platform's container: it closes the hidden parts (the lab package) and
the platform's own files to other users, runs the student's code through the local sandbox as
an unprivileged user (``nobody``) with the assignment's limits, judges what came back here,
outside that process, and writes the platform's results file. Whatever happens, a results file
is written: a submission that cannot run gets its code and a zero, a failure of the grader
itself a result that says so (not gradable, on PrairieLearn).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import stat
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.platforms import (
    gradescope_failure,
    gradescope_results,
    prairielearn_failure,
    prairielearn_results,
)
from grader.source import MAX_FILE_BYTES, MAX_FILES

UNPRIVILEGED = 65534
"""The user (and group) the student's code runs as: ``nobody`` on Debian and Ubuntu."""

REQUIRED_MODULES = ("torch", "safetensors", "numpy")
OPTIONAL_MODULES = ("nbformat",)
"""Without nbformat, a notebook is refused with a message instead of graded."""


@dataclass(frozen=True)
class Platform:
    """Where one platform puts a job's files, and how its results are written."""

    submission: str
    results: str
    private: tuple[str, ...]
    """The platform's own files the student's code must not read."""
    results_of: Callable[[dict[str, Any]], dict[str, Any]]
    failure: Callable[[str], dict[str, Any]]


PLATFORMS = {
    "gradescope": Platform(
        submission="autograder/submission", results="autograder/results/results.json",
        private=("autograder/submission_metadata.json",),
        results_of=gradescope_results, failure=gradescope_failure),
    "prairielearn": Platform(
        submission="grade/student", results="grade/results/results.json",
        private=("grade/data", "grade/tests", "grade/serverFilesCourse"),
        results_of=prairielearn_results, failure=prairielearn_failure),
}


def main(argv: Sequence[str], *, bundle: Path) -> int:
    """Grade the platform's job (``gradescope`` or ``prairielearn``), or with
    ``--check-environment`` say whether this interpreter has what grading needs."""
    parser = argparse.ArgumentParser(prog="grade.py")
    parser.add_argument("platform", nargs="?", choices=sorted(PLATFORMS))
    parser.add_argument("--root", type=Path, default=Path("/"),
                        help="where the platform's folders are (a test harness's stand-in)")
    parser.add_argument("--check-environment", action="store_true")
    args = parser.parse_args(argv)
    if args.check_environment:
        return check_environment()
    if args.platform is None:
        parser.error("name the platform")
    settings = json.loads((bundle / "export.json").read_text(encoding="utf-8"))
    platform = PLATFORMS[args.platform]
    results_path = args.root / platform.results
    try:
        results = grade(platform, root=args.root, lab=bundle / "lab", slug=settings["slug"])
    except Exception as exc:  # the grader's own failure: said to the student, not a grade
        traceback.print_exc()
        # Its words may name the hidden files: they stay in the log, for course staff.
        results = platform.failure(f"The grader failed ({type(exc).__name__}); the grading "
                                   "log has the details.")
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    return 0


def grade(platform: Platform, *, root: Path, lab: Path, slug: str) -> dict[str, Any]:
    """The results of the job under ``root``, graded with the package ``slug`` in ``lab``."""
    privileged = os.geteuid() == 0
    if privileged:
        for path in (lab, *(root / name for name in platform.private)):
            if path.exists():
                os.chmod(path, 0o700 if path.is_dir() else 0o600)
        _let_others_reach(lab.parent / "code")
    files = read_submission(root / platform.submission)
    if not files:
        return platform.failure("No file was submitted.")
    if any(name.endswith(".ipynb") for name in files) and not _importable("nbformat"):
        return platform.failure("This grader cannot read notebooks (nbformat is not "
                                "installed in its image): submit the Python file instead.")

    from grader.loader import load_assignment
    from grader.pipeline import GradingPipeline
    from grader.report import render_report
    from sandbox.local import LocalBackend

    assignment = load_assignment(slug, root=lab)
    backend = LocalBackend(run_as=UNPRIVILEGED if privileged else None)
    seed = int(os.environ["AUTOGRADE_SEED"]) if "AUTOGRADE_SEED" in os.environ else None
    document = GradingPipeline(backend=backend).grade(assignment, files, seed=seed)
    print(render_report(document, plots=True))  # the platform's log, for course staff
    print(json.dumps({"autograde": document["autograde"],
                      "codes": sorted(d["code"] for d in document["diagnoses"])}))
    return platform.results_of(document)


def _let_others_reach(code: Path) -> None:
    """Let the unprivileged user pass through the folders above the grading code, which its
    runner is started from (passing only: listing them stays as the platform left it)."""
    for folder in code.resolve().parents:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)


def read_submission(folder: Path) -> dict[str, bytes]:
    """The submitted files by path under ``folder``, at most ``MAX_FILES`` + 1 of them and
    each cut just past the largest size the grader accepts (it then says which is too big)."""
    files: dict[str, bytes] = {}
    if not folder.is_dir():
        return files
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if not path.is_file() or path.is_symlink() or any(
                part.startswith(".") or part == "__MACOSX" for part in name.split("/")):
            continue
        with path.open("rb") as handle:
            files[name] = handle.read(MAX_FILE_BYTES + 1)
        if len(files) > MAX_FILES:
            break
    return files


def check_environment() -> int:
    """0 when this interpreter can grade (the required modules import), else 1."""
    missing = [name for name in REQUIRED_MODULES if not _importable(name)]
    for name in OPTIONAL_MODULES:
        if not _importable(name):
            print(f"note: {name} is missing; notebook submissions will be refused",
                  file=sys.stderr)
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None

