"""Hidden: the reference ``ManualMultiHeadAttention`` and its known-mistake variants, by id.

Variants compose: ``namespace({"missing-out-proj", "causal-leak"})`` behaves like a student who
made both mistakes, which is how pairs are recognised.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from assignments.model import KnownMistake

_SPLITS = frozenset({"reshape-without-transpose", "heads-not-split"})
_SCALES = frozenset({"missing-scale", "wrong-scale-d-model", "wrong-scale-head-dim",
                     "wrong-scale-inverse", "wrong-scale-num-heads"})
_PADDING = frozenset({"padding-ignored", "padding-inverted", "padding-after-softmax",
                      "input-mutated"})
_CAUSAL = frozenset({"causal-leak", "causal-upper-triangle", "causal-off-by-one"})
_MASKS = frozenset({"mask-inverted", "mask-ignored"})
# Ways of applying every mask (attention, padding, causal) wrongly: one at a time.
_FILLS = frozenset({"mask-fill-zero", "mask-after-softmax", "mask-after-softmax-neginf"})
_AXES = frozenset({"softmax-wrong-axis", "softmax-heads-axis"})
# Ways of getting train-mode dropout wrong (and dropout-in-eval): one dropout line, one way.
_DROPOUTS = frozenset({"dropout-in-eval", "dropout-on-output", "dropout-unscaled",
                       "dropout-missing"})
# A form, not a mistake: blocked scores filled with -1e9 instead of -inf. Identical with the
# softmax over the keys; over another axis a fully blocked slice is uniform instead of NaN,
# and so is a row a strict causal triangle empties (a row check that looks for -inf does not
# see it).
FINITE_FILL = "fill-finite"
# A form of the strict triangle: a huge finite bias added to the scores (a Hugging Face style
# causal mask of torch.finfo(dtype).min), so a row it empties is even over the keys the other
# masks allow.
TRIANGLE_ADDED = "triangle-added"


def _others(group: frozenset[str], own: str) -> frozenset[str]:
    return group - {own}


MISTAKES: list[KnownMistake] = [
    KnownMistake("softmax-wrong-axis", "softmax-wrong-axis",
                 "the query axis (dim=-2, or dim=2 of the (B, H, T, S) scores) instead of the "
                 "key axis (dim=-1)", excludes=_others(_AXES, "softmax-wrong-axis"),
                 forms=(FINITE_FILL,)),
    KnownMistake("softmax-heads-axis", "softmax-wrong-axis",
                 "dim=1, the heads axis of the (B, H, T, S) scores: each (query, key) pair is "
                 "normalised across heads", excludes=_others(_AXES, "softmax-heads-axis"),
                 forms=(FINITE_FILL,)),
    KnownMistake("missing-scale", "missing-scale", "scores not divided by sqrt(head_dim)",
                 excludes=_others(_SCALES, "missing-scale") | {"heads-not-split"}),
    KnownMistake("wrong-scale-d-model", "wrong-scale", "scores are divided by sqrt(d_model)",
                 excludes=_others(_SCALES, "wrong-scale-d-model") | {"heads-not-split"}),
    KnownMistake("wrong-scale-head-dim", "wrong-scale",
                 "scores are divided by head_dim instead of sqrt(head_dim) (the scale applied "
                 "twice, or without its square root)",
                 excludes=_others(_SCALES, "wrong-scale-head-dim") | {"heads-not-split"}),
    KnownMistake("wrong-scale-inverse", "wrong-scale",
                 "scores are multiplied by sqrt(head_dim) instead of divided by it (divided by a "
                 "scale already defined as head_dim ** -0.5)",
                 excludes=_others(_SCALES, "wrong-scale-inverse") | {"heads-not-split"}),
    KnownMistake("wrong-scale-num-heads", "wrong-scale",
                 "scores are divided by sqrt(num_heads) instead of sqrt(head_dim)",
                 excludes=_others(_SCALES, "wrong-scale-num-heads") | {"heads-not-split"}),
    KnownMistake("mask-fill-zero", "mask-fill-zero", "blocked scores set to 0, not -inf",
                 excludes=_others(_FILLS, "mask-fill-zero")),
    KnownMistake("mask-after-softmax", "mask-after-softmax",
                 "softmax over all keys, then the weights multiplied by the mask",
                 excludes=_others(_FILLS, "mask-after-softmax")),
    KnownMistake("mask-after-softmax-neginf", "mask-after-softmax",
                 "softmax over all keys, then the weights of blocked keys filled with -inf "
                 "(the outputs become -inf or NaN)",
                 excludes=_others(_FILLS, "mask-after-softmax-neginf")),
    KnownMistake("mask-inverted", "mask-inverted", "attention_mask read with True = blocked",
                 excludes=_others(_MASKS, "mask-inverted")),
    KnownMistake("mask-ignored", "mask-ignored", "attention_mask never applied",
                 excludes=_others(_MASKS, "mask-ignored")),
    KnownMistake("all-masked-row", "all-masked-row",
                 "no ValueError for a query without allowed keys (NaN instead)"),
    KnownMistake("reshape-without-transpose", "reshape-without-transpose",
                 "(B, T, D) reshaped straight to (B, H, T, Dh)",
                 excludes=_others(_SPLITS, "reshape-without-transpose")),
    KnownMistake("merge-without-transpose", "merge-without-transpose",
                 "(B, H, T, Dh) reshaped straight to (B, T, D)",
                 excludes=frozenset({"heads-not-split"})),
    KnownMistake("heads-not-split", "heads-not-split",
                 "one attention over the full width, scaled by sqrt(d_model)",
                 excludes=_others(_SPLITS, "heads-not-split") | _SCALES
                 | {"merge-without-transpose"}),
    KnownMistake("causal-leak", "causal-leak", "causal=True ignored",
                 excludes=_others(_CAUSAL, "causal-leak")),
    KnownMistake("causal-upper-triangle", "causal-leak",
                 "upper triangle kept: query i sees keys i and later",
                 excludes=_others(_CAUSAL, "causal-upper-triangle")),
    KnownMistake("causal-off-by-one", "causal-off-by-one",
                 "strict triangle: a query cannot see its own position",
                 excludes=_others(_CAUSAL, "causal-off-by-one"),
                 forms=(FINITE_FILL, TRIANGLE_ADDED)),
    KnownMistake("padding-ignored", "padding-ignored", "key_padding_mask never applied",
                 excludes=_others(_PADDING, "padding-ignored")),
    KnownMistake("padding-inverted", "mask-inverted",
                 "key_padding_mask read with True = padding (the nn.MultiheadAttention "
                 "convention), so the real tokens are the ones blocked",
                 excludes=_others(_PADDING, "padding-inverted")),
    KnownMistake("padding-after-softmax", "mask-after-softmax",
                 "softmax first, then the weights multiplied by key_padding_mask",
                 excludes=_others(_PADDING, "padding-after-softmax") | _FILLS),
    KnownMistake("missing-out-proj", "missing-out-proj", "out_proj not applied"),
    KnownMistake("projection-mixup", "projection-mixup", "k_proj used for the values"),
    KnownMistake("key-value-ignored", "key-value-ignored",
                 "keys and values projected from query in cross-attention"),
    KnownMistake("dropout-in-eval", "dropout-in-eval", "dropout applied in eval mode too",
                 excludes=_others(_DROPOUTS, "dropout-in-eval")),
    KnownMistake("missing-validation", "missing-validation",
                 "no ValueError when d_model % num_heads != 0"),
    KnownMistake("gradient-blocked", "gradient-blocked", "keys detached from the graph",
                 searched=False, excludes=frozenset({"projection-mixup"})),
    KnownMistake("input-mutated", "input-mutated",
                 "key_padding_mask inverted in place", searched=False,
                 excludes=_others(_PADDING, "input-mutated")),
    KnownMistake("dtype-changed", "dtype-changed", "output cast to float32", searched=False),
    # Train-mode dropout: the probe's outputs are random, so these are named by the dropout
    # check's verdict on the student's own outputs (train against eval), never searched.
    KnownMistake("dropout-on-output", "dropout-wrong",
                 "dropout applied to the module's output instead of the attention weights",
                 searched=False,
                 # Without out_proj, the probe's output entries are single attention weights:
                 # dropping them is dropping the weights, and nothing tells the two apart.
                 excludes=_others(_DROPOUTS, "dropout-on-output") | {"missing-out-proj"}),
    KnownMistake("dropout-unscaled", "dropout-wrong",
                 "attention weights zeroed with probability p but the kept ones not scaled by "
                 "1 / (1 - p)", searched=False, excludes=_others(_DROPOUTS, "dropout-unscaled")),
    KnownMistake("dropout-missing", "dropout-wrong",
                 "the dropout argument stored but never applied, in training too",
                 searched=False, excludes=_others(_DROPOUTS, "dropout-missing")),
    # Found only on large scores (a trained model's): exp overflows to inf, inf / inf is NaN.
    KnownMistake("unstable-softmax", "unstable-softmax",
                 "softmax written as exp(scores) / exp(scores).sum() without subtracting each "
                 "row's maximum first"),
]
# The projections in a plain list: the module registers none of them, so no probe can set its
# weights (nor could an optimiser train them). It hides every other mistake.
MISTAKES.append(KnownMistake(
    "parameters-not-registered", "parameters-not-registered",
    "the four projections kept in a plain Python list (never registered)", searched=False,
    excludes=frozenset(mistake.id for mistake in MISTAKES)))


class _Projection(nn.Module):
    """``nn.Linear`` without its random initialisation: every probe sets all of the reference's
    weights, so initialising them would only slow every variant a diagnosis runs."""

    def __init__(self, d_model: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d_model, d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class ManualMultiHeadAttention(nn.Module):
    """Multi-head attention built from four projections; every mask is True = may attend."""

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0, bias: bool = True,
                 mistakes: frozenset[str] = frozenset()) -> None:
        super().__init__()
        if d_model % num_heads != 0 and "missing-validation" not in mistakes:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.mistakes = mistakes
        self.d_model = d_model
        self.num_heads = 1 if "heads-not-split" in mistakes else num_heads
        self.head_dim = d_model // self.num_heads
        self.dropout = dropout
        projections = [_Projection(d_model, bias) for _ in range(4)]
        if "parameters-not-registered" in mistakes:
            self.projections = projections  # a plain list: nn.Module registers none of them
        else:
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = projections
        self._without_triangle: torch.Tensor | None = None
        """The masks of the last call but the causal triangle (``_finite_triangle``)."""

    def forward(self, query: torch.Tensor, key_value: torch.Tensor | None = None, *,
                attention_mask: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None,
                causal: bool = False) -> torch.Tensor:
        m = self.mistakes
        q_proj, k_proj, v_proj, out_proj = (
            self.projections if "parameters-not-registered" in m
            else (self.q_proj, self.k_proj, self.v_proj, self.out_proj))
        source = query if key_value is None or "key-value-ignored" in m else key_value
        batch, t_q, _ = query.shape
        t_k = source.shape[1]
        q = self._split(q_proj(query))
        k = self._split(k_proj(source))
        v = self._split((k_proj if "projection-mixup" in m else v_proj)(source))
        if "gradient-blocked" in m:
            k = k.detach()

        allowed = self._allowed(batch, t_q, t_k, query.device, attention_mask,
                                key_padding_mask, causal)
        scale = 1.0 / math.sqrt(self.head_dim)
        if "missing-scale" in m:
            scale = 1.0
        elif "wrong-scale-d-model" in m:
            scale = 1.0 / math.sqrt(self.d_model)
        elif "wrong-scale-head-dim" in m:
            scale = 1.0 / self.head_dim
        elif "wrong-scale-inverse" in m:
            scale = math.sqrt(self.head_dim)
        elif "wrong-scale-num-heads" in m:
            scale = 1.0 / math.sqrt(self.num_heads)
        scores = (q @ k.transpose(-2, -1)) * scale
        if allowed is not None:
            allowed = torch.broadcast_to(allowed, scores.shape)
            if m & {FINITE_FILL, TRIANGLE_ADDED} and "causal-off-by-one" in m and causal:
                allowed, scores = self._finite_triangle(allowed, scores)
            if "all-masked-row" not in m and not bool(allowed.any(dim=-1).all()):
                raise ValueError("a query has no key it may attend to")
            if "padding-after-softmax" in m:
                # The row check saw the padding; the scores do not (it comes after softmax).
                before = self._allowed(batch, t_q, t_k, query.device, attention_mask, None,
                                       causal)
                allowed = (torch.ones_like(allowed) if before is None
                           else torch.broadcast_to(before, scores.shape))
                if m & {FINITE_FILL, TRIANGLE_ADDED} and "causal-off-by-one" in m and causal:
                    allowed, scores = self._finite_triangle(allowed, scores)
            if "mask-fill-zero" in m:
                scores = scores.masked_fill(~allowed, 0.0)
            elif not m & {"mask-after-softmax", "mask-after-softmax-neginf"}:
                scores = scores.masked_fill(~allowed, -1e9 if FINITE_FILL in m else float("-inf"))
        axis = -2 if "softmax-wrong-axis" in m else 1 if "softmax-heads-axis" in m else -1
        if "unstable-softmax" in m:
            exps = scores.exp()  # no row maximum subtracted: overflows once scores pass ~88
            weights = exps / exps.sum(dim=axis, keepdim=True)
        else:
            weights = torch.softmax(scores, dim=axis)
        if allowed is not None and "mask-after-softmax" in m:
            weights = weights * allowed
        elif allowed is not None and "mask-after-softmax-neginf" in m:
            weights = weights.masked_fill(~allowed, float("-inf"))
        if key_padding_mask is not None and "padding-after-softmax" in m:
            weights = weights * key_padding_mask[:, None, None, :]
        self._weights_seen(weights, allowed)
        training = self.training or "dropout-in-eval" in m
        if "dropout-unscaled" in m and training:
            weights = weights * (torch.rand_like(weights) >= self.dropout)
        elif not m & {"dropout-on-output", "dropout-missing", "dropout-unscaled"}:
            weights = F.dropout(weights, p=self.dropout, training=training)
        heads = weights @ v
        if "merge-without-transpose" in m:
            merged = heads.reshape(batch, t_q, self.d_model)
        else:
            merged = heads.transpose(1, 2).reshape(batch, t_q, self.d_model)
        output = merged if "missing-out-proj" in m else out_proj(merged)
        if "dropout-on-output" in m:
            output = F.dropout(output, p=self.dropout, training=training)
        return output.float() if "dtype-changed" in m else output

    def _weights_seen(self, weights: torch.Tensor, allowed: torch.Tensor | None) -> None:
        """Called with each forward's (B, H, Tq, Tk) weights and mask, before dropout: the
        grader's attention maps override it to draw them; a no-op otherwise."""

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, t, _ = x.shape
        if "reshape-without-transpose" in self.mistakes:
            return x.reshape(batch, self.num_heads, t, self.head_dim)
        return x.reshape(batch, t, self.num_heads, self.head_dim).transpose(1, 2)

    def _allowed(self, batch: int, t_q: int, t_k: int, device: torch.device,
                 attention_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None,
                 causal: bool) -> torch.Tensor | None:
        """All applicable masks AND-ed, as (B|1, H|1, Tq, Tk); None when nothing is masked."""
        m = self.mistakes
        allowed: torch.Tensor | None = None

        def combine(mask: torch.Tensor) -> None:
            nonlocal allowed
            allowed = mask if allowed is None else allowed & mask

        if attention_mask is not None and "mask-ignored" not in m:
            mask = ~attention_mask if "mask-inverted" in m else attention_mask
            if mask.dim() == 2:
                mask = mask[None, None]
            elif mask.dim() == 3:
                mask = mask[:, None]
            combine(mask)
        if key_padding_mask is not None and "padding-ignored" not in m:
            if "padding-inverted" in m:
                combine(~key_padding_mask[:, None, None, :])
            elif "input-mutated" in m:
                blocked = key_padding_mask.logical_not_()
                combine(~blocked[:, None, None, :])
            else:
                combine(key_padding_mask[:, None, None, :])
        if causal and "causal-leak" not in m:
            ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
            if "causal-upper-triangle" in m:
                triangle = ones.triu()
            else:
                triangle = ones.tril(-1 if "causal-off-by-one" in m else 0)
            self._without_triangle = allowed
            combine(triangle[None, None])
        return allowed

    def _finite_triangle(self, allowed: torch.Tensor,
                         scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The strict triangle as a finite value: filled last, or with the other masks in one
        fill, a row it empties has that value on every key, so its softmax is even over all of
        them; added to the scores (``TRIANGLE_ADDED``), even over the keys the other masks
        allow. A row the other masks empty on their own still raises."""
        others = self._without_triangle
        others = (torch.ones_like(allowed) if others is None
                  else torch.broadcast_to(others, scores.shape))
        emptied = ~allowed.any(dim=-1, keepdim=True) & others.any(dim=-1, keepdim=True)
        spread = others if TRIANGLE_ADDED in self.mistakes else torch.ones_like(allowed)
        return (torch.where(emptied, spread, allowed),
                torch.where(emptied, torch.zeros_like(scores), scores))


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""

    class WithMistakes(ManualMultiHeadAttention):
        def __init__(self, d_model: int, num_heads: int, **kwargs: Any) -> None:
            super().__init__(d_model, num_heads, mistakes=mistakes, **kwargs)

    return {"ManualMultiHeadAttention": WithMistakes}
