"""The data an assignment package provides to the grader."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from sandbox import Limits


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


@dataclass(frozen=True)
class KnownMistake:
    """A mistake the reference can reproduce, tagged with its SPEC feedback code."""

    id: str
    """The variant's own name (several variants may share a code, e.g. two wrong scales)."""
    code: str
    """The SPEC §2 feedback code a student with this mistake receives."""
    description: str
    """What the variant does, for the instructor's coverage table."""
    searched: bool = True
    """Whether it changes forward values, so diagnosis searches for it by comparing outputs.
    Mistakes that only touch gradients, dtypes or inputs are recognised from those directly."""
    excludes: frozenset[str] = frozenset()
    """Mistake ids that cannot co-occur with this one (they change the same line)."""
    forms: tuple[str, ...] = ()
    """Switches for other ways of writing the same mistake whose outputs differ (a finite fill
    such as -1e9 instead of -inf, which only matters once the softmax axis is wrong). The
    variant reproduces a call when it does in any of its forms; forms are never codes. A form
    may differ from the plain variant only where that one raises or is NaN (it is tried only
    there)."""


@dataclass(frozen=True)
class ProbeCall:
    """One call of the probe plan: what the runner executes, and what the grader knows of it."""

    id: str
    spec: Mapping[str, Any]
    """The call as the runner reads it (targets, arguments by tensor key, backward)."""
    group: str
    """Scenario the call belongs to (plain, masked, causal, ...); diagnosis falls back to
    explaining groups one by one when no small set of mistakes explains every call."""
    describe: str
    """The input in a few words for feedback, e.g. ``"q (2, 5, 8) with a (5, 7) mask"``."""
    compare: str = "values"
    """``values``: outputs are compared number by number; ``reference-only``: the outputs are
    random by design, so a mistake variant can only be told apart by differing from the
    reference, not by its numbers."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Facts checks need (e.g. the causal prefix that a perturbation must not move)."""


@dataclass(frozen=True)
class ProbePlan:
    """The calls of one grading run, on inputs drawn from ``seed``."""

    seed: int
    entry: str
    calls: tuple[ProbeCall, ...]
    inputs: Mapping[str, torch.Tensor]
    forbidden: tuple[str, ...]
    call_timeout: float
    memory_bytes: int
    """Address space the runner allows itself before importing the submission."""

    def call(self, call_id: str) -> ProbeCall:
        for call in self.calls:
            if call.id == call_id:
                return call
        raise KeyError(call_id)

    def runner_json(self) -> bytes:
        """The plan as the sandboxed runner reads it: no descriptions, no groups, no answers."""
        document = {
            "entry": self.entry,
            "call_timeout": self.call_timeout,
            "memory_bytes": self.memory_bytes,
            "forbidden": list(self.forbidden),
            "calls": [dict(call.spec, id=call.id) for call in self.calls],
        }
        return json.dumps(document).encode()

    def inputs_safetensors(self) -> bytes:
        return save({key: value.contiguous() for key, value in self.inputs.items()})


Namespace = Mapping[str, Any]


@dataclass(frozen=True)
class Assignment:
    """A loaded assignment package."""

    slug: str
    title: str
    root: Path
    entry: str
    """The file the student submits."""
    required_names: tuple[str, ...]
    forbidden_apis: tuple[str, ...]
    limits: Limits
    checks: tuple[CheckSpec, ...]
    mistakes: tuple[KnownMistake, ...]
    version: str
    """Content hash of the package: a changed spec, reference or plan is a new version."""
    build_plan: Callable[[int], ProbePlan]
    """Draws the probe plan for a seed."""
    reference: Callable[[frozenset[str]], Namespace]
    """The reference's namespace with the given known mistakes switched on (empty: correct)."""

    @property
    def max_score(self) -> float:
        return sum(check.points for check in self.checks)

    def mistake(self, mistake_id: str) -> KnownMistake:
        for mistake in self.mistakes:
            if mistake.id == mistake_id:
                return mistake
        raise KeyError(mistake_id)

    @property
    def public_files(self) -> dict[str, Path]:
        """Files a student may download: the statement, starter code and public tests."""
        files = {"README.md": self.root / "README.md"}
        for folder in ("starter", "public_tests"):
            for path in sorted((self.root / folder).glob("*.py")):
                files[f"{folder}/{path.name}"] = path
        return files
