"""Loading assignment packages for the grader: the spec with its hidden Python parts."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

from assignments.model import Assignment, ProbePlan
from assignments.spec import SPEC_FILE, AssignmentError, AssignmentSpec, load_spec
from assignments.training_task import training_call
from grader.checks import check_kinds
from grader.feedback import CATALOGUE


def load_assignment(slug: str, *, root: Path | None = None) -> Assignment:
    """Load one package with its reference, known mistakes and probe plan; AssignmentError
    when it is unknown or malformed."""
    spec = load_spec(slug, root=root)
    try:
        return _build(spec)
    except (KeyError, TypeError, ValueError) as exc:
        raise AssignmentError(f"{spec.root / SPEC_FILE}: {exc}") from exc


def _build(spec: AssignmentSpec) -> Assignment:
    reference = _load_hidden(spec.root, "reference")
    probes = _load_hidden(spec.root, "probes")
    limits = spec.limits

    def build_plan(seed: int) -> ProbePlan:
        calls, inputs = probes.build_calls(seed)
        if spec.training:
            call, tensors = training_call(spec.training, seed, reference.namespace(frozenset()))
            calls, inputs = [*calls, call], {**inputs, **tensors}
        return ProbePlan(
            seed=seed,
            entry=spec.entry,
            calls=tuple(calls),
            inputs=inputs,
            forbidden=spec.forbidden_apis,
            call_timeout=limits.call_seconds,
            run_seconds=limits.run_seconds,
            memory_bytes=limits.memory_bytes,
        )

    fields = {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}
    assignment = Assignment(**fields, mistakes=tuple(reference.MISTAKES), build_plan=build_plan,
                            reference=reference.namespace)
    _validate(assignment)
    return assignment


def _validate(assignment: Assignment) -> None:
    known_calls = {call.id for call in assignment.build_plan(0).calls}
    for check in assignment.checks:
        unknown = set(check.calls) - known_calls
        if unknown:
            raise ValueError(f"check {check.number} names unknown calls {sorted(unknown)}")
    ids = [mistake.id for mistake in assignment.mistakes]
    if len(ids) != len(set(ids)):
        raise ValueError("known-mistake ids must be unique")
    for mistake in assignment.mistakes:
        if mistake.code not in CATALOGUE:
            raise ValueError(f"known mistake {mistake.id!r} has code {mistake.code!r}, which is "
                             "not a feedback code (grader/feedback.py CATALOGUE)")
    kinds = check_kinds()
    for check in assignment.checks:
        if check.kind not in kinds:
            raise ValueError(f"check {check.number} has unknown kind {check.kind!r} "
                             f"(known: {', '.join(sorted(kinds))})")


def _load_hidden(package: Path, name: str) -> ModuleType:
    """Import one of the package's hidden modules from its file (our own, trusted code)."""
    path = package / "hidden" / f"{name}.py"
    module_name = f"assignments._hidden.{package.name.replace('-', '_')}.{name}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"missing hidden module {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
