"""An assignment's declarative spec (``assignment.toml``), read without its hidden parts.

This is what the web and the command line need of an assignment: title, entry file, checks,
limits, the files a student may download and the package's version. It loads without torch;
``grader.loader`` adds the reference, its known mistakes and the probe plan for the
grader.
"""

from __future__ import annotations

import enum
import hashlib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assignments.codes import CatalogueError, Declared, read_codes
from sandbox.base import Limits

ASSIGNMENTS_ROOT = Path(__file__).resolve().parent
"""Where the shipped assignments live."""
SPEC_FILE = "assignment.toml"
ASSIGNMENTS_DIR_VARIABLE = "AUTOGRADE_ASSIGNMENTS_DIR"
"""Environment variable naming the folder (or folders, separated by ``os.pathsep``) of a
course's own assignments, searched after the shipped ones."""


class AssignmentError(Exception):
    """An assignment that does not exist or whose package is malformed."""


class Visibility(enum.Enum):
    """When a check's result is shown to the student (Gradescope's names)."""

    VISIBLE = "visible"
    HIDDEN = "hidden"
    AFTER_DUE_DATE = "after_due_date"
    AFTER_PUBLISHED = "after_published"


@dataclass(frozen=True)
class CheckSpec:
    """One graded check, as declared in ``assignment.toml``."""

    number: str
    """Stable number shown to students, e.g. ``"1.2"``."""
    name: str
    """What the check asserts, in the student's words."""
    kind: str
    """The check kind (see ``grader.checks``): how outcomes are judged."""
    calls: tuple[str, ...]
    """Ids of the probe calls the check looks at."""
    points: float
    visibility: Visibility = Visibility.VISIBLE
    code: str = ""
    """The lab code a failure of this check proves on the calls only it judges (``compare =
    "property"``), a crash there included; empty: the kind's own, if any."""


@dataclass(frozen=True)
class AssignmentSpec:
    """An assignment package as declared on disk, its hidden parts left unloaded."""

    slug: str
    title: str
    root: Path
    entry: str
    """The file the student submits."""
    required_names: tuple[str, ...]
    forbidden_apis: tuple[str, ...]
    limits: Limits
    checks: tuple[CheckSpec, ...]
    version: str
    """Content hash of the package: a changed spec, reference or plan is a new version."""
    training: Mapping[str, Any]
    """The ``[training]`` table: the tiny transformer the ``learns`` check trains with the
    student's code (layer, sizes, optimiser, steps); empty when the assignment has none."""
    codes: Mapping[str, Declared]
    """The feedback codes this package declares (``[codes.*]`` tables of the files named by
    ``codes_from``, then of ``assignment.toml``, which wins), by code (``assignments.codes``)."""

    @property
    def max_score(self) -> float:
        return sum(check.points for check in self.checks)

    @property
    def public_files(self) -> dict[str, Path]:
        """Files a student may download: the statement, starter code (and its notebook) and
        public tests."""
        files = {"README.md": self.root / "README.md"}
        for folder, pattern in (("starter", "*.py"), ("starter", "*.ipynb"),
                                ("public_tests", "*.py")):
            for path in sorted((self.root / folder).glob(pattern)):
                files[f"{folder}/{path.name}"] = path
        return files


def assignment_roots() -> list[Path]:
    """The folders searched for packages: the shipped one, then ``AUTOGRADE_ASSIGNMENTS_DIR``."""
    extra = os.environ.get(ASSIGNMENTS_DIR_VARIABLE, "")
    return [ASSIGNMENTS_ROOT, *(Path(part) for part in extra.split(os.pathsep) if part)]


def list_assignments(root: Path | None = None) -> list[str]:
    """Slugs of the packages under ``root`` (default: every folder of ``assignment_roots``)."""
    roots = [root] if root is not None else assignment_roots()
    return sorted({path.parent.name for folder in roots for path in folder.glob(f"*/{SPEC_FILE}")})


def package_path(slug: str, *, root: Path | None = None) -> Path:
    """The package folder of ``slug``: the first root holding it (a shipped slug wins)."""
    roots = [root] if root is not None else assignment_roots()
    for folder in roots:
        package = folder / slug
        if (package / SPEC_FILE).is_file() and slug == package.name:
            return package
    known = ", ".join(list_assignments(root)) or "none"
    raise AssignmentError(f"unknown assignment {slug!r} (known: {known})")


def load_spec(slug: str, *, root: Path | None = None) -> AssignmentSpec:
    """Read one package's spec; AssignmentError when it is unknown or malformed."""
    package = package_path(slug, root=root)
    spec_path = package / SPEC_FILE
    try:
        raw = tomllib.loads(spec_path.read_text(encoding="utf-8"))
        return _build(slug, package, raw)
    except CatalogueError as exc:
        raise AssignmentError(str(exc)) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise AssignmentError(f"{spec_path}: {exc}") from exc


def _build(slug: str, package: Path, raw: dict[str, Any]) -> AssignmentSpec:
    checks = tuple(_check(entry) for entry in raw["checks"])
    numbers = [check.number for check in checks]
    for number in numbers:
        if numbers.count(number) > 1:
            raise ValueError(f"check number {number} is used twice")
    shared = _shared_catalogues(package, raw.get("codes_from", []))
    codes: dict[str, Declared] = {}
    for path in shared:
        codes.update(read_codes(path))
    codes.update(read_codes(package / SPEC_FILE, raw))
    return AssignmentSpec(
        slug=slug,
        title=str(raw["title"]),
        root=package,
        entry=str(raw["entry"]),
        required_names=tuple(raw["required_names"]),
        forbidden_apis=tuple(str(name) for name in raw.get("forbidden_apis", [])),
        limits=Limits().replace(raw.get("limits", {})),
        checks=checks,
        version=_content_hash(package, shared),
        training=dict(raw.get("training", {})),
        codes=codes,
    )


def _shared_catalogues(package: Path, named: Any) -> list[Path]:
    """The files of ``codes_from``, relative to the package (a course's shared catalogue)."""
    if not isinstance(named, list) or not all(isinstance(name, str) for name in named):
        raise ValueError("codes_from must be a list of paths, e.g. [\"../course-codes.toml\"]")
    paths = [(package / name).resolve() for name in named]
    for name, path in zip(named, paths, strict=True):
        if not path.is_file():
            raise ValueError(f"codes_from names {name!r}, which is not a file ({path})")
    return paths


def _check(raw: dict[str, Any]) -> CheckSpec:
    return CheckSpec(
        number=str(raw["number"]),
        name=str(raw["name"]),
        kind=str(raw["kind"]),
        calls=tuple(raw["calls"]),
        points=float(raw["points"]),
        visibility=Visibility(raw.get("visibility", "visible")),
        code=str(raw.get("code", "")),
    )


def _content_hash(package: Path, shared: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    for path in shared:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
