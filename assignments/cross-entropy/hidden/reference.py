"""Hidden: the reference ``cross_entropy`` and its known-mistake variants, switched on by id.

Each variant reproduces one mistake the way students write it, so that the grader can name the
mistake by behaviour: a submission whose outputs match a variant's on the same inputs made that
mistake. Variants compose, which is how pairs of mistakes are recognised.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from assignments.model import KnownMistake

_SHIFTS = frozenset({"no-max-shift", "global-max-shift"})
_AXES = frozenset({"class-axis-last", "class-axis-0"})
_IGNORING = frozenset({"ignore-index-unmasked", "ignore-index-hardcoded"})
_SMOOTHINGS = frozenset({"smoothing-k-minus-1", "smoothing-target-left-out",
                         "smoothing-ignored"})
_MEANS = frozenset({"mean-over-all", "mean-over-classes"})
# A form of reading the targets without masking the ignored ones: fancy indexing
# (log_probs[rows, target]) instead of gather. On a target of -100 both raise, with the same
# message but IndexError instead of RuntimeError.
INDEXING = "pick-by-indexing"


# A form of every mistake that makes log-probabilities infinite: the smoothing term left out
# when label_smoothing is 0 (the variants add 0 * it, which is NaN once it is infinite). Where
# the variant is NaN, the form's loss is inf.
UNSMOOTHED = "smoothing-skipped-when-zero"


def _excluding(group: frozenset[str], own: str) -> frozenset[str]:
    return group - {own}


MISTAKES: list[KnownMistake] = [
    # Found only on extreme logits (a confident model's): exp overflows to inf past about 88
    # in float32, or underflows to 0 below about -104.
    KnownMistake("no-max-shift", "unstable-logsumexp",
                 "log(exp(logits).sum()) computed without subtracting each row's maximum "
                 "first, so exp overflows to inf on large logits",
                 excludes=_excluding(_SHIFTS, "no-max-shift"), forms=(UNSMOOTHED,)),
    KnownMistake("global-max-shift", "unstable-logsumexp",
                 "the single largest logit of the whole batch subtracted instead of each "
                 "row's own maximum, so a row far below it underflows to exp(...) = 0 "
                 "and log(0) = -inf",
                 excludes=_excluding(_SHIFTS, "global-max-shift"), forms=(UNSMOOTHED,)),
    KnownMistake("log-of-softmax", "log-of-softmax",
                 "log(softmax(logits)): the probability of a class far below the row's "
                 "maximum underflows to 0 and its log is -inf", forms=(UNSMOOTHED,)),
    KnownMistake("class-axis-last", "wrong-class-axis",
                 "the last axis (dim=-1): the class axis of (N, K) logits, but the extra "
                 "axis d of (N, K, d) logits",
                 excludes=_excluding(_AXES, "class-axis-last")),
    KnownMistake("class-axis-0", "wrong-class-axis",
                 "dim=0, the batch axis, instead of the class axis (dim=1)",
                 excludes=_excluding(_AXES, "class-axis-0")),
    KnownMistake("ignore-index-unmasked", "ignored-targets-counted",
                 "targets equal to ignore_index are scored like any other class (on the "
                 "default ignore_index=-100 the lookup of class -100 fails)",
                 excludes=_excluding(_IGNORING, "ignore-index-unmasked") | _MEANS
                 | {"smoothing-on-ignored"},
                 crashes=True, forms=(INDEXING,)),
    KnownMistake("ignore-index-hardcoded", "ignored-targets-counted",
                 "targets equal to -100 are masked whatever ignore_index says, so the "
                 "targets equal to the ignore_index given are scored like any other class",
                 excludes=_excluding(_IGNORING, "ignore-index-hardcoded") | _MEANS
                 | {"smoothing-on-ignored"}),
    KnownMistake("smoothing-on-ignored", "ignored-targets-counted",
                 "the ignored targets' negative log-likelihood is masked, but their label "
                 "smoothing term is not",
                 excludes=_IGNORING | {"smoothing-ignored"}),
    KnownMistake("mean-over-all", "mean-counts-ignored",
                 "the sum of the kept losses divided by the number of all targets, "
                 "ignored ones included",
                 excludes=_excluding(_MEANS, "mean-over-all") | _IGNORING),
    KnownMistake("mean-over-classes", "mean-over-classes",
                 "the mean taken over every entry of the (targets x classes) products, so "
                 "the sum is divided by K times the number of targets",
                 excludes=_excluding(_MEANS, "mean-over-classes") | _IGNORING),
    KnownMistake("smoothing-k-minus-1", "smoothing-wrong-count",
                 "1 - ε on the target and ε / (K - 1) on each of the other K - 1 classes, "
                 "instead of ε / K on every class (the target's included)",
                 excludes=_excluding(_SMOOTHINGS, "smoothing-k-minus-1")),
    KnownMistake("smoothing-target-left-out", "smoothing-wrong-count",
                 "1 - ε on the target and ε / K on each other class only, so the smoothed "
                 "targets sum to 1 - ε / K instead of 1",
                 excludes=_excluding(_SMOOTHINGS, "smoothing-target-left-out")),
    KnownMistake("smoothing-ignored", "smoothing-ignored",
                 "label_smoothing is never applied",
                 excludes=_excluding(_SMOOTHINGS, "smoothing-ignored")
                 | {"smoothing-on-ignored"}),
    # With a wrong mean, an ignored reduction shows that mean on the "sum" and "none" calls,
    # where the wrong mean alone changes nothing: the search's pair pruning assumes a mistake
    # acts where it acts alone, so it would not try those pairs. Not named as pairs.
    KnownMistake("reduction-ignored", "reduction-ignored",
                 "the mean is returned whatever reduction asks for",
                 excludes=frozenset({"reduction-unchecked"}) | _MEANS),
    KnownMistake("one-hot-reshaped", "one-hot-wrong",
                 "built as (N, d, K) from (N, d) targets and reshaped to (N, K, d) instead "
                 "of having their class axis moved (permute), which scrambles classes and "
                 "positions",
                 excludes=_AXES),
    KnownMistake("reduction-unchecked", "misuse-accepted",
                 "an unknown reduction falls through to 'none' instead of raising "
                 "ValueError"),
    KnownMistake("input-mutated", "input-mutated",
                 "each row's maximum subtracted from logits in place", searched=False,
                 excludes=_SHIFTS),
    KnownMistake("dtype-changed", "dtype-changed",
                 "computed in float64 for stability and returned as float64",
                 searched=False),
]

REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    mistakes: frozenset[str] = frozenset(),
) -> torch.Tensor:
    """Softmax cross-entropy of class logits (N, K) or (N, K, d) against class indices (N,)
    or (N, d), as ``torch.nn.functional.cross_entropy`` computes it."""
    if reduction not in REDUCTIONS and "reduction-unchecked" not in mistakes:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
    if "reduction-ignored" in mistakes:
        reduction = "mean"
    dtype = logits.dtype
    if "dtype-changed" in mistakes:
        logits = logits.double()
    axis = 1
    if "class-axis-last" in mistakes:
        axis = -1
    elif "class-axis-0" in mistakes:
        axis = 0
    classes = logits.shape[1]

    if "no-max-shift" in mistakes:
        shifted = logits
    elif "global-max-shift" in mistakes:
        shifted = logits - logits.max()
    elif "input-mutated" in mistakes:
        shifted = logits.sub_(logits.max(dim=axis, keepdim=True).values)
    else:
        shifted = logits - logits.amax(dim=axis, keepdim=True)
    exps = shifted.exp()
    if "log-of-softmax" in mistakes:
        log_probs = (exps / exps.sum(dim=axis, keepdim=True)).log()
    else:
        log_probs = shifted - exps.sum(dim=axis, keepdim=True).log()

    keep = target != ignore_index
    if "ignore-index-unmasked" in mistakes:
        keep = torch.ones_like(keep)
    elif "ignore-index-hardcoded" in mistakes:
        keep = target != -100
    picked_target = torch.where(keep, target, 0)
    if "ignore-index-unmasked" in mistakes:
        picked_target = target
    if "one-hot-reshaped" in mistakes:
        one_hot = F.one_hot(picked_target, classes).to(log_probs.dtype)
        nll = -(one_hot.reshape(log_probs.shape) * log_probs).sum(dim=1)
    elif INDEXING in mistakes and log_probs.dim() == 2:
        nll = -log_probs[torch.arange(log_probs.shape[0]), picked_target]
    else:
        nll = -log_probs.gather(1, picked_target.unsqueeze(1)).squeeze(1)

    smoothing = label_smoothing
    if "smoothing-ignored" in mistakes:
        smoothing = 0.0
    uniform = -log_probs.sum(dim=1) / classes
    if UNSMOOTHED in mistakes and not smoothing:
        losses = nll
    elif "smoothing-k-minus-1" in mistakes:
        losses = (1 - smoothing) * nll + smoothing * (uniform * classes - nll) / (classes - 1)
    elif "smoothing-target-left-out" in mistakes:
        losses = (1 - smoothing) * nll + smoothing * (uniform - nll / classes)
    else:
        losses = (1 - smoothing) * nll + smoothing * uniform
    if "smoothing-on-ignored" in mistakes:
        losses = torch.where(keep, losses, smoothing * uniform)
    else:
        losses = torch.where(keep, losses, torch.zeros_like(losses))

    if reduction == "none":
        result = losses
    elif reduction == "sum":
        result = losses.sum()
    else:
        count = keep.sum()
        if "mean-over-all" in mistakes:
            count = torch.tensor(keep.numel())
        elif "mean-over-classes" in mistakes:
            count = count * classes
        result = losses.sum() / count
    if "dtype-changed" in mistakes:
        return result
    return result.to(dtype)


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""
    return {"cross_entropy": functools.partial(cross_entropy, mistakes=mistakes)}
