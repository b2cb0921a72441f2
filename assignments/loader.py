"""Loading assignment packages from disk: the TOML spec and the hidden Python parts."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from assignments.model import Assignment, CheckSpec, ProbePlan, Visibility
from sandbox import Limits

ASSIGNMENTS_ROOT = Path(__file__).resolve().parent
SPEC_FILE = "assignment.toml"


class AssignmentError(Exception):
    """An assignment that does not exist or whose package is malformed."""


def list_assignments(root: Path = ASSIGNMENTS_ROOT) -> list[str]:
    """Slugs of the packages under ``root``."""
    return sorted(path.parent.name for path in root.glob(f"*/{SPEC_FILE}"))


def load_assignment(slug: str, *, root: Path = ASSIGNMENTS_ROOT) -> Assignment:
    """Load one package; AssignmentError when it is unknown or malformed."""
    package = root / slug
    spec_path = package / SPEC_FILE
    if not spec_path.is_file() or slug != package.name:
        known = ", ".join(list_assignments(root)) or "none"
        raise AssignmentError(f"unknown assignment {slug!r} (known: {known})")
    try:
        spec = tomllib.loads(spec_path.read_text(encoding="utf-8"))
        return _build(slug, package, spec)
    except (KeyError, TypeError, ValueError) as exc:
        raise AssignmentError(f"{spec_path}: {exc}") from exc


def _build(slug: str, package: Path, spec: dict[str, Any]) -> Assignment:
    reference = _load_hidden(package, "reference")
    probes = _load_hidden(package, "probes")
    entry = str(spec["entry"])
    forbidden = tuple(str(name) for name in spec.get("forbidden_apis", []))
    limits = Limits().replace(spec.get("limits", {}))
    checks = tuple(_check(raw) for raw in spec["checks"])
    mistakes = tuple(reference.MISTAKES)

    def build_plan(seed: int) -> ProbePlan:
        calls, inputs = probes.build_calls(seed)
        return ProbePlan(
            seed=seed,
            entry=entry,
            calls=tuple(calls),
            inputs=inputs,
            forbidden=forbidden,
            call_timeout=limits.call_seconds,
            memory_bytes=limits.memory_bytes,
        )

    assignment = Assignment(
        slug=slug,
        title=str(spec["title"]),
        root=package,
        entry=entry,
        required_names=tuple(spec["required_names"]),
        forbidden_apis=forbidden,
        limits=limits,
        checks=checks,
        mistakes=mistakes,
        version=_content_hash(package),
        build_plan=build_plan,
        reference=reference.namespace,
    )
    _validate(assignment)
    return assignment


def _check(raw: dict[str, Any]) -> CheckSpec:
    return CheckSpec(
        number=str(raw["number"]),
        name=str(raw["name"]),
        kind=str(raw["kind"]),
        calls=tuple(raw["calls"]),
        points=float(raw["points"]),
        visibility=Visibility(raw.get("visibility", "visible")),
    )


def _validate(assignment: Assignment) -> None:
    plan = assignment.build_plan(0)
    known_calls = {call.id for call in plan.calls}
    numbers: set[str] = set()
    for check in assignment.checks:
        unknown = set(check.calls) - known_calls
        if unknown:
            raise ValueError(f"check {check.number} names unknown calls {sorted(unknown)}")
        if check.number in numbers:
            raise ValueError(f"check number {check.number} is used twice")
        numbers.add(check.number)
    ids = [mistake.id for mistake in assignment.mistakes]
    if len(ids) != len(set(ids)):
        raise ValueError("known-mistake ids must be unique")


def _load_hidden(package: Path, name: str) -> ModuleType:
    """Import one of the package's hidden modules from its file (our own, trusted code)."""
    path = package / "hidden" / f"{name}.py"
    module_name = f"assignments._hidden.{package.name.replace('-', '_')}.{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"missing hidden module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _content_hash(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
