"""``autograde grade DIR``: grade a folder of submissions through one warm sandbox pool.

Each ``.py`` file in the folder is one submission, and so is each subfolder (its ``.py``
files; hidden names and ``__pycache__`` are left out). They are graded in parallel, up to
``--jobs`` at once, by one pipeline on one sandbox backend: with Docker its warm pool is sized
to the jobs, so a container is ready, torch imported, when a grading needs one. An entry that
cannot be read or holds no Python file is reported in the summary, never fatal, and so is one
whose grading failed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.notebook import NOTEBOOK_SUFFIX

if TYPE_CHECKING:
    from assignments import Assignment
    from grader.pipeline import GradingPipeline

SKIPPED_NAMES = ("__pycache__",)
SUBMITTED_SUFFIXES = (".py", NOTEBOOK_SUFFIX)
"""What a file of a submission may be: Python, or one Jupyter notebook (its code cells)."""


@dataclass(frozen=True)
class Entry:
    """One submission of the folder, or why it is not one."""

    name: str
    """The file's or subfolder's name in the folder."""
    files: dict[str, bytes] = field(default_factory=dict)
    problem: str | None = None


@dataclass
class Outcome:
    entry: Entry
    document: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def graded(self) -> bool:
        return self.document is not None

    def row(self) -> dict[str, Any]:
        """This submission's line of the summary, as JSON."""
        if self.document is None:
            return {"submission": self.entry.name, "graded": False, "error": self.error}
        return {"submission": self.entry.name, "graded": True,
                "score": self.document["score"], "max_score": self.document["max_score"],
                "codes": [d["code"] for d in self.document["diagnoses"]],
                "seconds": round(self.seconds, 3)}


def collect(folder: Path) -> list[Entry]:
    """The folder's entries, by name."""
    entries = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name.startswith(".") or path.name in SKIPPED_NAMES:
            continue
        if path.is_dir():
            entries.append(_folder_entry(path))
        elif path.is_file() and path.suffix in SUBMITTED_SUFFIXES:
            entries.append(_read(path.name, [path]))
        else:
            entries.append(Entry(path.name, problem="neither a .py file, a notebook nor a folder"))
    return entries


def _folder_entry(folder: Path) -> Entry:
    try:
        sources = sorted(p for p in folder.iterdir() if p.suffix in SUBMITTED_SUFFIXES
                         and p.is_file() and not p.name.startswith("."))
    except OSError as exc:
        return Entry(folder.name, problem=f"cannot list it: {exc.strerror}")
    if not sources:
        return Entry(folder.name, problem="the folder holds no .py file or notebook")
    return _read(folder.name, sources)


def _read(name: str, paths: list[Path]) -> Entry:
    files = {}
    for path in paths:
        try:
            files[path.name] = path.read_bytes()
        except OSError as exc:
            return Entry(name, problem=f"cannot read {path.name}: {exc.strerror}")
    return Entry(name, files)


def grade_all(pipeline: GradingPipeline, assignment: Assignment, entries: list[Entry], *,
              jobs: int, seed: int | None,
              done: Callable[[Outcome], None] = lambda outcome: None) -> list[Outcome]:
    """Grade every gradable entry, ``jobs`` at once; each outcome in the entries' order."""
    from sandbox import SandboxUnavailable

    def grade(entry: Entry) -> Outcome:
        started = time.perf_counter()
        try:
            document = pipeline.grade(assignment, entry.files, seed=seed, label=entry.name)
        except SandboxUnavailable as exc:
            return Outcome(entry, error=f"the sandbox failed: {exc}")
        except Exception as exc:  # one bad grading is reported, the others go on
            return Outcome(entry, error=f"grading failed ({type(exc).__name__}: {exc})")
        return Outcome(entry, document, seconds=time.perf_counter() - started)

    outcomes: dict[str, Outcome] = {}
    for entry in entries:
        if entry.problem is not None:
            outcomes[entry.name] = Outcome(entry, error=entry.problem)
            done(outcomes[entry.name])
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade") as pool:
        futures = [pool.submit(grade, entry) for entry in entries if entry.problem is None]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[outcome.entry.name] = outcome
            done(outcome)
    return [outcomes[entry.name] for entry in entries]


def document_names(outcomes: list[Outcome]) -> Iterator[tuple[Outcome, str]]:
    """The file name of each graded submission's document in ``--out``: the entry's name
    without ``.py`` or ``.ipynb``, unless two entries would then share it."""
    stems = [_stem(o.entry.name) for o in outcomes]
    for outcome, stem in zip(outcomes, stems, strict=True):
        if outcome.graded:
            yield outcome, (stem if stems.count(stem) == 1 else outcome.entry.name) + ".json"


def _stem(name: str) -> str:
    for suffix in SUBMITTED_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def write_documents(out: Path, outcomes: list[Outcome]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for outcome, name in document_names(outcomes):
        (out / name).write_text(json.dumps(outcome.document, indent=2) + "\n", encoding="utf-8")
    (out / "summary.json").write_text(json.dumps([o.row() for o in outcomes], indent=2) + "\n",
                                      encoding="utf-8")


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def run(*, folder: Path, slug: str, backend_name: str, jobs: int | None, seed: int | None,
        out: Path | None, as_json: bool, fork_server: bool = False) -> int:
    """The ``grade DIR`` command: grade, show progress and the summary, write ``--out``."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from grader.loader import load_assignment
    from grader.pipeline import GradingPipeline
    from sandbox import SandboxUnavailable, create_backend
    from sandbox.selection import choose_backend
    from service.cli.common import fail

    if out is not None and out.exists() and not out.is_dir():
        return fail(f"--out {out} is a file, not a folder")
    try:
        entries = collect(folder)
    except OSError as exc:
        return fail(f"cannot list {folder}: {exc.strerror}")
    if not entries:
        return fail(f"nothing to grade in {folder}: no .py file and no subfolder")
    assignment = load_assignment(slug)
    gradable = sum(entry.problem is None for entry in entries)
    jobs = max(1, min(jobs or default_jobs(), gradable or 1))
    name = backend_name if backend_name != "auto" else choose_backend(warn=sys.stderr)
    if fork_server:
        if name != "docker":
            return fail(f"--fork-server is a mode of the docker sandbox, not of the {name} one")
        os.environ["AUTOGRADE_DOCKER_MODE"] = "fork-server"
    # One warm pool for the whole folder, one container per grading at once.
    os.environ.setdefault("AUTOGRADE_DOCKER_POOL_SIZE", str(jobs))
    sandbox = f"{name} sandbox"
    if name == "docker" and os.environ.get("AUTOGRADE_DOCKER_MODE") == "fork-server":
        sandbox += "'s fork-server mode"
    try:
        backend = create_backend(name, warm=True)
    except SandboxUnavailable as exc:
        print(f"autograde: the {name} sandbox cannot run here: {exc}", file=sys.stderr)
        return 3
    errors = Console(stderr=True)
    started = time.perf_counter()
    try:
        with Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("{task.description}"), console=errors,
                      transient=not errors.is_terminal) as progress:
            task = progress.add_task("", total=len(entries))

            def done(outcome: Outcome) -> None:
                progress.update(task, advance=1, description=_safe(outcome.entry.name))

            outcomes = grade_all(GradingPipeline(backend=backend), assignment, entries,
                                 jobs=jobs, seed=seed, done=done)
    finally:
        backend.close()
    elapsed = time.perf_counter() - started
    if out is not None:
        write_documents(out, outcomes)
    if as_json:
        json.dump([o.row() for o in outcomes], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _summary(Console(), outcomes, assignment_title=assignment.title, elapsed=elapsed,
                 jobs=jobs, sandbox=sandbox, out=out)
    return 0 if all(o.graded for o in outcomes) else 1


def _safe(text: str) -> Any:
    """A name from the folder as plain text: no terminal controls, no rich markup."""
    from rich.text import Text

    from service.cli.terminal import terminal_safe

    return Text(terminal_safe(text))


def _summary(console: Any, outcomes: list[Outcome], *, assignment_title: str, elapsed: float,
             jobs: int, sandbox: str, out: Path | None) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=_safe(f"{assignment_title}: {len(outcomes)} submission(s)"))
    table.add_column("submission")
    table.add_column("score", justify="right")
    table.add_column("mistakes found")
    table.add_column("seconds", justify="right")
    for outcome in outcomes:
        row = outcome.row()
        if outcome.graded:
            table.add_row(_safe(row["submission"]), f"{row['score']:g} / {row['max_score']:g}",
                          _safe(", ".join(row["codes"]) or "none"), f"{row['seconds']:.2f}")
        else:
            table.add_row(_safe(row["submission"]), "—",
                          Text(f"not graded: {row['error']}", style="red"), "")
    console.print(table)
    graded = [o for o in outcomes if o.graded]
    line = (f"Graded {len(graded)} of {len(outcomes)} in {elapsed:.1f} s "
            f"({elapsed / max(1, len(graded)):.2f} s each), {jobs} at once on the {sandbox}")
    if len(graded) < len(outcomes):
        line += f"; {len(outcomes) - len(graded)} not graded"
    if out is not None:
        line += f"; results documents in {out}"
    console.print(_safe(line + "."))
