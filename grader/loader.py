"""Loading assignment packages for the grader: the spec with its hidden Python parts."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from types import ModuleType

from assignments.codes import line_of_string
from assignments.model import Assignment, ProbePlan
from assignments.spec import SPEC_FILE, AssignmentError, AssignmentSpec, load_spec
from assignments.training_task import training_call
from grader.checks import check_kinds
from grader.diagnosis import DEFINING_CHECKS, PROPERTY_CHECKS
from grader.feedback import NEUTRAL, catalogue_of
from grader.learning import TRAINING_CODES


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
    _validate_codes(assignment)
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
    kinds = check_kinds()
    for check in assignment.checks:
        if check.kind not in kinds:
            raise ValueError(f"check {check.number} has unknown kind {check.kind!r} "
                             f"(known: {', '.join(sorted(kinds))})")


def _validate_codes(assignment: Assignment) -> None:
    """Every code the assignment can give has words: a known mistake's code, and the code a
    failed check of some kinds or a training task gives, is lab-neutral or declared. Errors
    name the file and line to fix."""
    neutral = ", ".join(sorted(NEUTRAL))
    kinds = check_kinds()
    for code, declared in assignment.codes.items():
        if declared.text is None and code not in NEUTRAL:
            raise AssignmentError(
                f"{declared.where}: [codes.{code}] has only a hint, but {code!r} is not a "
                f"lab-neutral code: give it a title and a message too (lab-neutral: {neutral})")
        if declared.text is not None and code in NEUTRAL:
            raise AssignmentError(
                f"{declared.where}: {code!r} is a lab-neutral code, whose title and message "
                "are the grader's: keep only its hint to tell it in this lab's words")
        if declared.text is not None and declared.text.evidence not in ("", *kinds):
            raise AssignmentError(
                f"{declared.where}: [codes.{code}] evidence {declared.text.evidence!r} is not a "
                f"check kind (known: {', '.join(sorted(kinds))})")
    catalogue = catalogue_of(assignment)
    undeclared = "which is neither lab-neutral nor declared: add a [codes.{code}] table with " \
        "title, message and hint to assignment.toml or to a catalogue it names in codes_from"
    reference = assignment.root / "hidden" / "reference.py"
    for mistake in assignment.mistakes:
        if mistake.code not in catalogue:
            line = line_of_string(reference, mistake.code)
            raise AssignmentError(
                f"{reference}:{line}: known mistake {mistake.id!r} has the code "
                f"{mistake.code!r}, " + undeclared.format(code=mistake.code))
    spec_file = assignment.root / SPEC_FILE
    emitted = {**DEFINING_CHECKS, **PROPERTY_CHECKS}
    for check in assignment.checks:
        given = check.code or emitted.get(check.kind)
        if given is not None and given not in catalogue:
            line = line_of_string(spec_file, check.number)
            raise AssignmentError(
                f"{spec_file}:{line}: check {check.number} of kind {check.kind!r} gives the code "
                f"{given!r} when it fails, " + undeclared.format(code=given))
    for code in TRAINING_CODES if assignment.training else ():
        if code not in catalogue:
            raise AssignmentError(
                f"{spec_file}:{line_of_string(spec_file, 'training')}: the [training] task gives "
                f"the code {code!r} to a model that learns from the future, "
                + undeclared.format(code=code))


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
