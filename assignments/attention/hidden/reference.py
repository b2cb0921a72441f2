"""Hidden: the reference ``attention`` and its known-mistake variants, switched on by id.

Each variant reproduces one mistake the way students make it, so that the grader can name the
mistake by behaviour: a student whose outputs match a variant's on the same inputs made that
mistake. Variants compose, which is how pairs of mistakes are recognised.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from assignments.model import KnownMistake

_SCALES = frozenset({"missing-scale", "wrong-scale-d", "wrong-scale-length",
                     "wrong-scale-inverse"})
_MASKINGS = frozenset({"mask-ignored", "mask-fill-zero", "mask-after-softmax",
                       "mask-after-softmax-neginf"})
_AXES = frozenset({"softmax-wrong-axis", "softmax-dim-0", "softmax-dim-1", "softmax-dim-2"})
# A form, not a mistake: blocked scores filled with a large finite number (-1e9) instead of
# -inf. Identical when the softmax is over the keys; once it is over another axis, a slice with
# every entry blocked is uniform with a finite fill and NaN with -inf.
FINITE_FILL = "fill-finite"
# A form of the unstable softmax: the mask applied by multiplying exp(scores) instead of filling
# the scores. Identical while exp is finite; once it overflows, blocked keys are inf * 0 = NaN
# too instead of 0.
EXP_TIMES_MASK = "exp-times-mask"


def _excluding(group: frozenset[str], own: str) -> frozenset[str]:
    return group - {own}


MISTAKES: list[KnownMistake] = [
    KnownMistake("softmax-wrong-axis", "softmax-wrong-axis",
                 "the query axis (dim=-2) instead of the key axis (dim=-1)",
                 excludes=_excluding(_AXES, "softmax-wrong-axis"), forms=(FINITE_FILL,)),
    KnownMistake("softmax-dim-0", "softmax-wrong-axis",
                 "dim=0, the batch axis, instead of the key axis (dim=-1)",
                 excludes=_excluding(_AXES, "softmax-dim-0"), forms=(FINITE_FILL,)),
    # Absolute axes are right or wrong depending on how many leading dims the input has: the
    # probes give 3-D and 4-D inputs, and the message names the axis each one hit.
    KnownMistake("softmax-dim-2", "softmax-wrong-axis",
                 "dim=2, a fixed axis: it is the key axis of 3-D scores (B, T, S) but the query "
                 "axis of 4-D scores (B, H, T, S), so inputs with a heads dimension go wrong",
                 excludes=_excluding(_AXES, "softmax-dim-2"), forms=(FINITE_FILL,)),
    KnownMistake("softmax-dim-1", "softmax-wrong-axis",
                 "dim=1, a fixed axis: it is the query axis of 3-D scores (B, T, S) and the "
                 "heads axis of 4-D scores (B, H, T, S), never the key axis",
                 excludes=_excluding(_AXES, "softmax-dim-1"), forms=(FINITE_FILL,)),
    KnownMistake("missing-scale", "missing-scale", "scores not divided by sqrt(D)",
                 excludes=_excluding(_SCALES, "missing-scale")),
    KnownMistake("wrong-scale-d", "wrong-scale",
                 "scores are divided by D instead of sqrt(D) (the scale applied twice, or "
                 "without its square root)",
                 excludes=_excluding(_SCALES, "wrong-scale-d")),
    KnownMistake("wrong-scale-length", "wrong-scale",
                 "scores are divided by sqrt(number of keys) instead of sqrt(D)",
                 excludes=_excluding(_SCALES, "wrong-scale-length")),
    KnownMistake("wrong-scale-inverse", "wrong-scale",
                 "scores are multiplied by sqrt(D) instead of divided by it (divided by a "
                 "scale already defined as D ** -0.5)",
                 excludes=_excluding(_SCALES, "wrong-scale-inverse")),
    KnownMistake("mask-inverted", "mask-inverted", "True read as blocked",
                 excludes=frozenset({"mask-ignored"})),
    KnownMistake("mask-inverted-additive", "mask-inverted",
                 "True read as blocked through an additive bias (scores + allowed * -1e9), which "
                 "in float32 also swamps the scores it lands on",
                 excludes=_MASKINGS | {"mask-inverted"}),
    KnownMistake("mask-ignored", "mask-ignored", "the mask is never applied",
                 excludes=(_MASKINGS | {"mask-inverted"}) - {"mask-ignored"}),
    KnownMistake("mask-fill-zero", "mask-fill-zero", "blocked scores set to 0, not -inf",
                 excludes=_excluding(_MASKINGS, "mask-fill-zero")),
    KnownMistake("mask-after-softmax", "mask-after-softmax",
                 "softmax over all keys, then weights multiplied by the mask",
                 excludes=_excluding(_MASKINGS, "mask-after-softmax")),
    KnownMistake("mask-after-softmax-neginf", "mask-after-softmax",
                 "softmax over all keys, then the weights of blocked keys filled with -inf "
                 "(the outputs become -inf or NaN)",
                 excludes=_excluding(_MASKINGS, "mask-after-softmax-neginf")),
    KnownMistake("all-masked-row", "all-masked-row",
                 "no ValueError for a query row without allowed keys (NaN instead)"),
    KnownMistake("gradient-blocked", "gradient-blocked",
                 "weights detached from the graph", searched=False),
    KnownMistake("gradient-wrong", "gradient-wrong",
                 "a custom autograd Function whose backward forgets the softmax Jacobian",
                 searched=False, excludes=_AXES | {"gradient-blocked"}),
    KnownMistake("input-mutated", "input-mutated", "q scaled in place", searched=False,
                 excludes=_SCALES | {"input-mutated-no-grad"}),
    # The same mutation out of the graph (``with torch.no_grad(): q.div_(...)``): the gradients
    # then lack the scale, an effect of the mutation rather than a second mistake.
    KnownMistake("input-mutated-no-grad", "input-mutated", "q scaled in place under no_grad",
                 searched=False, excludes=_SCALES | {"input-mutated"}),
    KnownMistake("dtype-changed", "dtype-changed", "outputs cast to float32", searched=False),
    # Found only on large scores (a trained model's): exp overflows to inf, inf / inf is NaN.
    # With the inverted additive mask, every all-True row is exp(-1e9) = 0 everywhere and the
    # pair is NaN on almost every probe: nothing tells it apart, so it is not a pair we name.
    KnownMistake("unstable-softmax", "unstable-softmax",
                 "softmax written as exp(scores) / exp(scores).sum() without subtracting each "
                 "row's maximum first",
                 excludes=frozenset({"gradient-wrong", "mask-inverted-additive"}),
                 forms=(EXP_TIMES_MASK,)),
]


class _SoftmaxWithoutJacobian(torch.autograd.Function):
    """softmax forward; backward passes the upstream gradient through unchanged (wrong)."""

    @staticmethod
    def forward(ctx: Any, scores: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores, dim=-1)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    *,
    mistakes: frozenset[str] = frozenset(),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention; ``allowed`` True = the query may attend to the key."""
    d = q.shape[-1]
    mask = ~allowed if "mask-inverted" in mistakes else allowed
    scale = 1.0 / math.sqrt(d)
    if "missing-scale" in mistakes:
        scale = 1.0
    elif "wrong-scale-d" in mistakes:
        scale = 1.0 / d
    elif "wrong-scale-length" in mistakes:
        scale = 1.0 / math.sqrt(k.shape[-2])
    elif "wrong-scale-inverse" in mistakes:
        scale = math.sqrt(d)
    if "input-mutated" in mistakes:
        q = q.mul_(scale)
        scale = 1.0
    elif "input-mutated-no-grad" in mistakes:
        with torch.no_grad():
            q.mul_(scale)
        scale = 1.0
    scores = (q @ k.transpose(-2, -1)) * scale
    mask = torch.broadcast_to(mask, scores.shape)
    multiplied: torch.Tensor | None = None
    if "all-masked-row" not in mistakes and not bool(mask.any(dim=-1).all()):
        raise ValueError("a query row has no allowed key")
    if "mask-inverted-additive" in mistakes:
        scores = scores + mask.to(scores.dtype) * -1e9
    elif "mask-fill-zero" in mistakes:
        scores = scores.masked_fill(~mask, 0.0)
    elif not mistakes & {"mask-ignored", "mask-after-softmax", "mask-after-softmax-neginf",
                         "mask-inverted-additive"}:
        if EXP_TIMES_MASK in mistakes and "unstable-softmax" in mistakes:
            multiplied = mask  # applied to exp(scores) below
        else:
            scores = scores.masked_fill(~mask, -1e9 if FINITE_FILL in mistakes
                                        else float("-inf"))
    axis = -1
    if "softmax-wrong-axis" in mistakes:
        axis = -2
    elif "softmax-dim-0" in mistakes:
        axis = 0
    elif "softmax-dim-2" in mistakes:
        axis = 2
    elif "softmax-dim-1" in mistakes:
        axis = 1
    if "gradient-wrong" in mistakes:
        weights = _SoftmaxWithoutJacobian.apply(scores)  # type: ignore[no-untyped-call]
    elif "unstable-softmax" in mistakes:
        exps = scores.exp()  # no row maximum subtracted: overflows once scores pass ~88
        if multiplied is not None:
            exps = exps * multiplied
        weights = exps / exps.sum(dim=axis, keepdim=True)
    else:
        weights = torch.softmax(scores, dim=axis)
    if "mask-after-softmax" in mistakes:
        weights = weights * mask
    elif "mask-after-softmax-neginf" in mistakes:
        weights = weights.masked_fill(~mask, float("-inf"))
    if "gradient-blocked" in mistakes:
        weights = weights.detach()
    output = weights @ v
    if "dtype-changed" in mistakes:
        return output.float(), weights.float()
    return output, weights


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""
    return {"attention": functools.partial(attention, mistakes=mistakes)}
