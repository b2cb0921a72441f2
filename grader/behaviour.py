"""How an unexplained output departs from the reference's, in words that do not depend on the
seed: the tensors of a grading turned into the ``behaviour`` section ``grader.fingerprints``
reads. Pure.

Each word is a fact of the departure that a mistake keeps on most inputs: the relation to the
reference's output (a scale, a sign, a transpose), whether the sums and the largest entry along
the last two axes are kept and whether the values spread more or less along them, whether exact
zeros stay zero, the sign of the difference. Where the values move (which entries, by how much)
is left out: that changes with the seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch

from assignments import KnownMistake, ProbePlan
from grader.compare import tensors_close
from grader.fingerprints import NearMistake, behaviour_section, call_tokens, distance
from grader.outcomes import CallOutcome

Departures = dict[str, dict[str, list[str]]]
"""Per call, per output (``forward.output``), the words of its departure."""
NEAREST = 3
"""How many known mistakes the section names as the closest."""


def departure(got: torch.Tensor | None, want: torch.Tensor | None) -> list[str]:
    """The words (``kind=value``) for how ``got`` departs from ``want``: ``["same"]`` within
    tolerance."""
    if got is None or want is None:
        return ["same"] if got is None and want is None else ["missing"]
    if got.shape != want.shape:
        return ["shape"]
    if got.dtype == torch.bool or want.dtype == torch.bool:
        return ["same"] if tensors_close(got, want) else ["boolean"]
    if tensors_close(got, want):
        return ["same"]
    s, r = got.double(), want.double()
    if not bool(torch.isfinite(s).all()):
        return ["nonfinite"] if bool(torch.isfinite(r).all()) else ["nonfinite-where-reference"]
    words = ["differs", "relation=" + _relation(s, r)]
    if s.numel() and bool((s == 0).all()):
        words.append("zero")
    if bool((r == 0).any()):
        words.append("zeros=" + ("kept" if bool((s[r == 0] == 0).all()) else "filled"))
    moved = ~torch.isclose(s, r, atol=_atol(want), rtol=_atol(want))
    difference = (s - r)[moved]
    up = float((difference > 0).double().mean()) if difference.numel() else 0.5
    words.append("sign=" + ("up" if up > 0.9 else "down" if up < 0.1 else "mixed"))
    for axis in range(-min(s.dim(), 2), 0):
        if s.shape[axis] >= 2:
            words += _axis(s, r, axis)
    return words


def _atol(want: torch.Tensor) -> float:
    return 2e-4 if want.dtype != torch.float64 else 1e-6


def _relation(s: torch.Tensor, r: torch.Tensor) -> str:
    """A scale, a sign flip or a transpose of the reference's output, else ``other``."""
    norm = float((r * r).sum())
    if norm > 0:
        factor = float((s * r).sum()) / norm
        residual = float(((s - factor * r) ** 2).sum()) ** 0.5 / norm ** 0.5
        if residual < 1e-3 and factor != 0:
            if abs(factor + 1) < 1e-3:
                return "negated"
            step = round(2 * math.log2(abs(factor))) / 2
            return f"scaled{'-' if factor < 0 else '+'}{step:g}"
    if s.dim() >= 2 and s.shape[-1] == s.shape[-2] and torch.allclose(
            s, r.transpose(-1, -2), atol=1e-4, rtol=1e-4):
        return "transposed"
    return "other"


def _axis(s: torch.Tensor, r: torch.Tensor, axis: int) -> list[str]:
    """Along one axis: whether the sums (and along the last, the position of the largest
    entry) over it are kept, and whether the values spread more or less along it (a sharper
    or a flatter distribution, on most slices)."""
    sums = torch.isclose(s.sum(axis), r.sum(axis), atol=1e-3, rtol=1e-3).all()
    argmax = torch.equal(s.argmax(axis), r.argmax(axis))
    spread = float((s.std(axis) > r.std(axis)).double().mean())
    name = f"axis{axis}"
    words = [f"{name}.sum={'kept' if bool(sums) else 'moved'}",
             f"{name}.spread={'up' if spread > 0.5 else 'down'}"]
    # Along the last axis only: over the others, which entry is largest is the input's choice.
    return [*words, f"{name}.argmax={'kept' if argmax else 'moved'}"] if axis == -1 else words


def departures(calls: Sequence[str], student: Mapping[str, CallOutcome],
               expected: Mapping[str, CallOutcome]) -> Departures:
    """The words of every output of the given calls that both ran."""
    found: Departures = {}
    for call_id in calls:
        got, want = student.get(call_id), expected.get(call_id)
        if got is None or want is None or not got.usable or not want.usable:
            continue
        outputs: dict[str, list[str]] = {}
        for index, (a, b) in enumerate(zip(got.forwards, want.forwards, strict=False)):
            if a.raised is not None or b.raised is not None:
                outputs[f"{index}"] = ["raised" if a.raised is not None else "returned"]
                continue
            for position, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=False)):
                outputs[f"{index}.{position}"] = departure(x, y)
        found[call_id] = outputs
    return found


def behaviour(plan: ProbePlan, unexplained: Sequence[str], student: Mapping[str, CallOutcome],
              reference: Mapping[str, CallOutcome], mistakes: Sequence[KnownMistake],
              variant: Callable[[frozenset[str], str, bool], CallOutcome], *,
              failed_checks: Sequence[str], codes: Sequence[str]) -> dict[str, object]:
    """The ``behaviour`` section of a submission with unexplained calls: their departures, and
    the known mistakes whose variants depart most alike on the same calls."""
    calls = [call.id for call in plan.calls if call.id in unexplained]
    own = departures(calls, student, reference)
    tokens = call_tokens(own)
    near = []
    for mistake in mistakes:
        if not mistake.searched:
            continue
        theirs = departures(calls, {c: variant(frozenset({mistake.id}), c, False)
                                    for c in calls}, reference)
        near.append(NearMistake(mistake.id, mistake.code,
                                distance(tokens, call_tokens(theirs))))
    near.sort(key=lambda n: (n.distance, n.mistake))
    return behaviour_section(own, failed_checks=failed_checks, codes=codes,
                             nearest=near[:NEAREST])
