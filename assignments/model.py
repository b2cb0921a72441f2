"""The data an assignment package provides to the grader: the spec with its hidden parts."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import save

from assignments.probing import encode_call
from assignments.spec import AssignmentSpec, CheckSpec, Visibility


@dataclass(frozen=True)
class KnownMistake:
    """A mistake the reference can reproduce, tagged with its feedback code."""

    id: str
    """The variant's own name (several variants may share a code, e.g. two wrong scales)."""
    code: str
    """The feedback code a student with this mistake receives (docs/authors/contract.md,
    "Feedback codes")."""
    description: str
    """What the variant does, for the instructor's coverage table."""
    searched: bool = True
    """Whether it changes forward values, so diagnosis searches for it by comparing outputs.
    Mistakes that only touch gradients, dtypes or inputs are recognised from those directly."""
    excludes: frozenset[str] = frozenset()
    """Mistake ids that cannot co-occur with this one (they change the same line)."""
    crashes: bool = False
    """Whether the mistake makes the code raise where the reference returns (a concatenation
    along the wrong axis: torch refuses the shapes). A student's call that raises the same
    exception, with the same message, at the same step is then evidence of this mistake, not
    just consistent with it; the message carries the shapes, so another bug rarely matches."""
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
    """The call as the probe wrote it (target, arguments as Python values with ``tensor(key)``
    for an input, backward); ``runner_spec`` is what the runner reads."""
    group: str
    """Scenario the call belongs to (plain, masked, causal, ...); diagnosis falls back to
    explaining groups one by one when no small set of mistakes explains every call."""
    describe: str
    """The input in a few words for feedback, e.g. ``"q (2, 5, 8) with a (5, 7) mask"``."""
    compare: str = "values"
    """``values``: outputs are compared number by number; ``reference-only``: the outputs are
    random by design, so a mistake variant can only be told apart by differing from the
    reference, not by its numbers; ``property``: random by design and judged only by its check,
    against the student's own other calls (dropout in train mode): the mistake search never
    sees it, and a failed check of such a call names its mistake itself
    (``grader.diagnosis.PROPERTY_CHECKS``)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """Facts checks need (e.g. the causal prefix that a perturbation must not move)."""

    def runner_spec(self) -> dict[str, Any]:
        """The call as the executor reads it, in the sandbox and in the grader's process alike:
        its arguments encoded so that each arrives with the type the probe gave it."""
        return dict(encode_call(self.spec), id=self.id)


@dataclass(frozen=True)
class ProbePlan:
    """The calls of one grading run, on inputs drawn from ``seed``."""

    seed: int
    entry: str
    calls: tuple[ProbeCall, ...]
    inputs: Mapping[str, torch.Tensor]
    forbidden: tuple[str, ...]
    call_timeout: float
    """Each stage's budget in the runner (``Limits.call_seconds``)."""
    run_seconds: float
    """The whole run's budget in the runner (``Limits.run_seconds``)."""
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
            "run_seconds": self.run_seconds,
            "memory_bytes": self.memory_bytes,
            "forbidden": list(self.forbidden),
            "calls": [call.runner_spec() for call in self.calls],
        }
        return json.dumps(document, allow_nan=False).encode()

    def inputs_safetensors(self) -> bytes:
        return save({key: value.contiguous() for key, value in self.inputs.items()})


Namespace = Mapping[str, Any]


@dataclass(frozen=True)
class Assignment(AssignmentSpec):
    """A loaded assignment package: its spec, known mistakes, probe plan and reference."""

    mistakes: tuple[KnownMistake, ...]
    build_plan: Callable[[int], ProbePlan]
    """Draws the probe plan for a seed."""
    reference: Callable[[frozenset[str]], Namespace]
    """The reference's namespace with the given known mistakes switched on (empty: correct)."""

    def mistake(self, mistake_id: str) -> KnownMistake:
        for mistake in self.mistakes:
            if mistake.id == mistake_id:
                return mistake
        raise KeyError(mistake_id)


__all__ = ["Assignment", "CheckSpec", "KnownMistake", "Namespace", "ProbeCall", "ProbePlan",
           "Visibility"]
