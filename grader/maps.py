"""Attention maps for the feedback: the weights a diagnosis rests on, small enough to keep.

For a diagnosis whose evidence is in the attention weights (axis, masks, causal, padding,
scale) the results document keeps, beside its words, the grid of the probe call its message
cites: the student's weights and the expected ones, with the keys that must be blocked. The
``attention`` function returns its weights, so the student's grid is their own numbers, read
from the validated outcome. A module returns only its output: its grids are those of the
known-mistake variant that reproduced the student's outputs on that call, and of the
reference, one per head, both run here in the grader. Nothing from the sandbox is executed.

Format (``diagnoses[].attention_map``, ``version`` 1), bounded: the first batch (and first
head of the function's leading dims), at most ``MAX_SIDE`` queries and keys, ``MAX_HEADS``
heads, numbers rounded to 4 decimals, ``null`` for a value that is not finite::

    {"version": 1, "call": "masked-2d", "input": "q (2, 5, 8), ...", "tests": ["1.3", "1.4"],
     "source": "returned" | "reproduced", "rows": "queries", "columns": "keys",
     "caption": "what to see", "truncated": false,
     "panels": [{"head": null | 0, "student": [[...]], "expected": [[...]],
                 "blocked": [[false, true, ...]]}]}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from assignments import CheckSpec, ProbePlan
from assignments.model import Namespace
from grader.checks import CheckVerdict
from grader.feedback import Diagnosis
from grader.findings import Finding
from grader.in_process import run_call_in_process
from grader.outcomes import CallOutcome

MAP_VERSION = 1
MAX_SIDE = 16
MAX_HEADS = 4
WEIGHT_CODES = frozenset({
    "softmax-wrong-axis", "missing-scale", "wrong-scale", "mask-inverted", "mask-ignored",
    "mask-after-softmax", "mask-fill-zero", "causal-leak", "causal-off-by-one",
    "padding-ignored"})
_BLOCKED = ("Cells marked · are keys the query may not attend to: they must get exactly 0 "
            "weight. Outlined cells differ from the expected weights.")
CAPTIONS = {
    "softmax-wrong-axis": "Each row (one query) should sum to 1 over the keys. In your weights "
                          "the columns sum to 1 instead: compare the row sums in the table.",
    "missing-scale": "The same keys stand out, but your rows are more peaked than expected: "
                     "without the 1/sqrt(d) scale the largest score takes almost all the weight.",
    "wrong-scale": "The same keys stand out, but how peaked each row is differs from the "
                   "expected weights: the scale sets how sharp the softmax is.",
    "mask-inverted": "Your weights sit on the blocked cells (·) and leave the allowed ones "
                     "empty: the mask is read the wrong way round. " + _BLOCKED,
    "mask-ignored": "Blocked cells (·) still get weight, as if there were no mask. " + _BLOCKED,
    "mask-after-softmax": "Blocked cells are zero, but the rows no longer sum to 1 over the "
                          "allowed keys: the softmax ran before the mask. " + _BLOCKED,
    "mask-fill-zero": "Blocked cells (·) keep some weight: a score of 0 is not -inf. " + _BLOCKED,
    "causal-leak": "Above the diagonal every cell is a later key (·): a query must not see "
                   "it. Your weights put attention there. " + _BLOCKED,
    "causal-off-by-one": "The diagonal (each query's own position) must be allowed: your "
                         "weights leave it empty. " + _BLOCKED,
    "padding-ignored": "The last keys are padding (·): every query must give them 0 weight, "
                       "in every head. Yours still attend to them. " + _BLOCKED,
}


def with_attention_maps(
    diagnoses: Sequence[Diagnosis],
    findings: Sequence[Finding],
    plan: ProbePlan,
    student: Mapping[str, CallOutcome],
    reference: Mapping[str, CallOutcome],
    checks: Sequence[tuple[CheckSpec, CheckVerdict]],
    namespace: Callable[[frozenset[str]], Namespace],
) -> list[Diagnosis]:
    """The diagnoses, each weight-evidence one with the map of the call its message cites.

    ``namespace(mistakes)`` gives the reference with those known mistakes switched on.
    """
    out = []
    for diagnosis in diagnoses:
        picture = None
        if diagnosis.code in WEIGHT_CODES:
            picture = _map_for(diagnosis, findings, plan, student, reference, checks, namespace)
        out.append(dataclasses.replace(diagnosis, picture=picture) if picture else diagnosis)
    return out


def _map_for(diagnosis: Diagnosis, findings: Sequence[Finding], plan: ProbePlan,
             student: Mapping[str, CallOutcome], reference: Mapping[str, CallOutcome],
             checks: Sequence[tuple[CheckSpec, CheckVerdict]],
             namespace: Callable[[frozenset[str]], Namespace]) -> dict[str, Any] | None:
    calls = [c for f in findings if f.code == diagnosis.code for c in f.calls]
    cited = sorted(dict.fromkeys(calls), key=lambda c: plan.call(c).describe not in
                   diagnosis.message)
    for call_id in cited:
        tests = [check.number for check, _ in checks
                 if check.number in diagnosis.tests and call_id in check.calls]
        if not tests:
            continue
        panels, source = _returned_panels(plan, call_id, student, reference)
        if not panels:
            mistakes = frozenset(f.mistake for f in findings if call_id in f.calls and f.mistake)
            if mistakes:
                panels, source = _reproduced_panels(plan, call_id, namespace, mistakes)
        if panels:
            truncated = any(p.pop("truncated") for p in panels)
            return {"version": MAP_VERSION, "call": call_id, "input": plan.call(call_id).describe,
                    "tests": tests, "source": source, "rows": "queries", "columns": "keys",
                    "caption": CAPTIONS[diagnosis.code], "truncated": truncated,
                    "panels": panels}
    return None


def _returned_panels(plan: ProbePlan, call_id: str, student: Mapping[str, CallOutcome],
                     reference: Mapping[str, CallOutcome]) -> tuple[list[dict[str, Any]], str]:
    """The function's own weights (second returned tensor) against the reference's."""
    mask_key = plan.call(call_id).meta.get("mask")
    ours, theirs = student.get(call_id), reference.get(call_id)
    if not isinstance(mask_key, str) or ours is None or theirs is None:
        return [], ""
    if not (ours.usable and theirs.usable):
        return [], ""
    got, want = _second(ours), _second(theirs)
    if got is None or want is None or got.shape != want.shape or want.dim() < 2:
        return [], ""
    allowed = torch.broadcast_to(plan.inputs[mask_key], want.shape)
    return [_panel(None, _first(got), _first(want), _first(allowed))], "returned"


def _reproduced_panels(plan: ProbePlan, call_id: str,
                       namespace: Callable[[frozenset[str]], Namespace],
                       mistakes: frozenset[str]) -> tuple[list[dict[str, Any]], str]:
    """Per-head weights of the variant that reproduced the student's outputs, and the
    reference's, observed through the reference module's ``_weights_seen`` hook."""
    variant = _observed(namespace(mistakes), plan, call_id)
    expected = _observed(namespace(frozenset()), plan, call_id)
    if variant is None or expected is None or variant[0].shape != expected[0].shape:
        return [], ""
    got, want, allowed = variant[0], expected[0], expected[1]
    if want.dim() != 4:
        return [], ""
    allowed = (torch.ones_like(want, dtype=torch.bool) if allowed is None
               else torch.broadcast_to(allowed, want.shape))
    panels = [_panel(h, got[0, h], want[0, h], allowed[0, h])
              for h in range(min(MAX_HEADS, want.shape[1]))]
    if want.shape[1] > MAX_HEADS:
        panels[-1]["truncated"] = True
    return panels, "reproduced"


def _observed(space: Namespace, plan: ProbePlan, call_id: str
              ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The first forward's weights and mask as the module saw them, or None without a hook."""
    target = str(plan.call(call_id).spec.get("target", ""))
    cls = space.get(target)
    if not isinstance(cls, type) or not hasattr(cls, "_weights_seen"):
        return None
    seen: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    class Observed(cls):  # type: ignore[misc, valid-type]
        def _weights_seen(self, weights: torch.Tensor, allowed: torch.Tensor | None) -> None:
            seen.append((weights.detach().clone(),
                         None if allowed is None else allowed.detach().clone()))
            raise _Observed  # the rest of the call would only cost time (a training: all of it)

    run_call_in_process({**space, target: Observed}, plan, call_id, backward=False)
    return seen[0] if seen else None


class _Observed(Exception):
    """Ends a call run only to observe its first forward's weights, once they are seen."""


def _second(outcome: CallOutcome) -> torch.Tensor | None:
    outputs = outcome.forwards[0].outputs if outcome.forwards else ()
    weights = outputs[1] if len(outputs) == 2 else None
    return weights if weights is not None and weights.is_floating_point() else None


def _first(tensor: torch.Tensor) -> torch.Tensor:
    while tensor.dim() > 2:
        tensor = tensor[0]
    return tensor


def _panel(head: int | None, got: torch.Tensor, want: torch.Tensor,
           allowed: torch.Tensor) -> dict[str, Any]:
    truncated = got.shape[0] > MAX_SIDE or got.shape[1] > MAX_SIDE
    got, want = got[:MAX_SIDE, :MAX_SIDE], want[:MAX_SIDE, :MAX_SIDE]
    return {"head": head, "student": _numbers(got), "expected": _numbers(want),
            "blocked": [[not bool(a) for a in row] for row in allowed[:MAX_SIDE, :MAX_SIDE]],
            "truncated": truncated}


def _numbers(grid: torch.Tensor) -> list[list[float | None]]:
    values = grid.detach().to(torch.float64).tolist()
    return [[round(v, 4) if v == v and abs(v) != float("inf") else None for v in row]
            for row in values]

