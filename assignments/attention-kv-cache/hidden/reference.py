"""Hidden: the reference ``ManualMultiHeadAttention`` with rotary embeddings and a KV cache, and
its known-mistake variants, by id.

Variants compose: ``namespace({"rope-on-values", "query-padding-ignored"})`` behaves like a
student who made both mistakes, which is how pairs are recognised.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from assignments.model import KnownMistake

# The same lines: the cache handed on is either the old one or a rebuilt one.
_RETURNED = frozenset({"cache-not-updated", "cache-padding-lost"})
_AXES = frozenset({"cache-cat-heads-axis", "cache-cat-last-axis"})
# A concatenation on the wrong axis raises at the first call with a cache, so every mistake that
# shows only in calls with a cache is hidden behind it: such a pair shows one code.
_AFTER_THE_CACHE = frozenset({"rope-offset-not-continued", "cache-not-updated",
                              "causal-not-shifted", "cache-padding-lost", "rope-offset-twice",
                              "rope-angles-by-length", "cache-keys-unrotated",
                              "cache-keys-rotated-twice", "chunk-causal-leak",
                              "chunk-ignores-cache", "chunk-restarts-cache",
                              "cache-shared-buffer"})
# The positions of the rotation after a cache: each of these computes them its own way.
_POSITIONS = frozenset({"rope-offset-not-continued", "rope-offset-twice",
                        "rope-angles-by-length"})
# The keys a call attends to and hands on: each of these builds them its own way.
_KEYS = frozenset({"cache-keys-unrotated", "cache-keys-rotated-twice", "chunk-ignores-cache",
                   "chunk-restarts-cache", "cache-shared-buffer", "cache-not-updated"})
# The frequencies of the rotation.
_FREQUENCIES = frozenset({"rope-exponent-halved", "rope-base-ignored"})
# What becomes of a padded query's row: each of these treats it its own way.
_EMPTY_ROWS = frozenset({"query-padding-ignored", "padded-query-rejected", "padded-query-nan"})
# The causal triangle.
_TRIANGLE = frozenset({"causal-not-shifted", "causal-by-length", "chunk-causal-leak"})

MISTAKES: list[KnownMistake] = [
    KnownMistake("rope-on-values", "rope-on-values",
                 "the values are rotated like the keys"),
    KnownMistake("rope-offset-not-continued", "rope-offset-not-continued",
                 "with a cache, the new queries and keys are rotated as positions 0, 1, ... "
                 "(the cache length is not added; the causal mask is right)"),
    KnownMistake("rope-interleaved", "rope-wrong-pairing",
                 "neighbouring features (0, 1), (2, 3), ... (interleaved) instead of feature i "
                 "with feature i + head_dim/2 (the two halves)"),
    KnownMistake("cache-not-updated", "cache-missing-new-keys",
                 "is the cache that was passed in, unchanged (a first call without a cache "
                 "returns its own keys)", excludes=_RETURNED - {"cache-not-updated"}),
    KnownMistake("cache-cat-heads-axis", "cache-wrong-axis",
                 "the heads axis (dim=1) of the (B, H, S, Dh) cache", crashes=True,
                 excludes=_AXES - {"cache-cat-heads-axis"} | _AFTER_THE_CACHE),
    KnownMistake("cache-cat-last-axis", "cache-wrong-axis",
                 "the feature axis (dim=-1) of the (B, H, S, Dh) cache", crashes=True,
                 excludes=_AXES - {"cache-cat-last-axis"} | _AFTER_THE_CACHE),
    KnownMistake("causal-not-shifted", "cache-causal-not-shifted",
                 "causal triangle taken from the top-left corner of the (Tq, S) scores"),
    KnownMistake("cache-padding-lost", "cache-padding-lost",
                 "the key_padding_mask of the cached keys is dropped: they count as real "
                 "keys, in this call and in the returned cache",
                 excludes=_RETURNED - {"cache-padding-lost"}),
    KnownMistake("query-padding-ignored", "query-padding-ignored",
                 "query_padding_mask never applied"),
    KnownMistake("rope-before-head-split", "rope-before-head-split",
                 "queries and keys rotated as (B, T, d_model) before the head split: pairs "
                 "and frequencies span d_model instead of head_dim",
                 excludes=frozenset({"rope-interleaved"}) | _FREQUENCIES),
    KnownMistake("rope-exponent-halved", "rope-wrong-frequencies",
                 "pair i turns by position * rope_base ** (-i / head_dim) (the exponent's "
                 "factor 2 is missing)", excludes=_FREQUENCIES - {"rope-exponent-halved"}),
    KnownMistake("rope-base-ignored", "rope-wrong-frequencies",
                 "the frequencies use the base 10000 whatever rope_base says",
                 excludes=_FREQUENCIES - {"rope-base-ignored"}),
    KnownMistake("rope-offset-twice", "rope-positions-wrong",
                 "the cache length is added to offsets that already count it: after S cached "
                 "tokens the new ones are rotated as positions 2S, 2S + 1, ...",
                 excludes=_POSITIONS - {"rope-offset-twice"}),
    KnownMistake("rope-angles-by-length", "rope-positions-wrong",
                 "the angles are computed once per number of tokens and reused: a later call "
                 "with as many tokens is rotated at the positions of the first such call",
                 excludes=_POSITIONS - {"rope-angles-by-length"}),
    KnownMistake("cache-keys-unrotated", "cache-keys-rotation",
                 "stores the keys before their rotation and rotates every key again at each "
                 "call", excludes=_KEYS - {"cache-keys-unrotated"}),
    KnownMistake("cache-keys-rotated-twice", "cache-keys-rotation",
                 "rotates the cached keys again when it reads them back (they were stored "
                 "rotated already)", excludes=_KEYS - {"cache-keys-rotated-twice"}),
    KnownMistake("chunk-causal-leak", "causal-leak",
                 "with a cache, no causal mask: the new tokens of a chunk see each other's "
                 "future", excludes=_TRIANGLE - {"chunk-causal-leak"}),
    KnownMistake("chunk-ignores-cache", "cache-chunk-ignored",
                 "a call with a cache and several new tokens attends only to its own tokens",
                 excludes=_KEYS - {"chunk-ignores-cache"}),
    KnownMistake("chunk-restarts-cache", "cache-chunk-ignored",
                 "a call with a cache and several new tokens is taken for a prefill: it "
                 "attends only to its own tokens and returns a cache of them alone",
                 excludes=_KEYS - {"chunk-restarts-cache"}),
    KnownMistake("cache-shared-buffer", "cache-shared-state",
                 "the returned caches are views of one buffer of the module, written in "
                 "place by every call (or that keeps the keys itself and reads only the length "
                 "of the cache it is given)",
                 excludes=_KEYS - {"cache-shared-buffer"} | {"cache-padding-lost"}),
    KnownMistake("causal-by-length", "causal-ignores-offsets",
                 "causal triangle placed by the numbers of queries and keys (its bottom-right "
                 "corner), not by their positions", excludes=_TRIANGLE - {"causal-by-length"}),
    KnownMistake("padded-query-rejected", "query-padding-empty-row",
                 "raises ValueError", excludes=_EMPTY_ROWS - {"padded-query-rejected"}),
    KnownMistake("padded-query-nan", "query-padding-empty-row",
                 "returns NaN (the softmax of a row with no key, multiplied by the padding "
                 "mask)", excludes=_EMPTY_ROWS - {"padded-query-nan"}),
    KnownMistake("missing-validation", "missing-validation",
                 "no ValueError when d_model % num_heads != 0"),
    KnownMistake("odd-head-rope-accepted", "misuse-accepted",
                 "no ValueError for use_rope=True with an odd head_dim"),
    KnownMistake("cache-without-use-cache-accepted", "misuse-accepted",
                 "no ValueError for a cache passed with use_cache=False"),
    KnownMistake("cache-cross-attention-accepted", "misuse-accepted",
                 "no ValueError for a cache passed with key_value (cross-attention)"),
    KnownMistake("dropout-while-caching-accepted", "misuse-accepted",
                 "no ValueError for use_cache=True in training mode with dropout > 0"),
    KnownMistake("offset-not-continuing-accepted", "misuse-accepted",
                 "no ValueError for a position offset that is not the cache length"),
]


class KVCache(NamedTuple):
    """Keys and values of the tokens seen so far, per head, and which of them are real."""

    key: torch.Tensor
    """(B, H, S, Dh): keys after k_proj, the head split and the rotation."""
    value: torch.Tensor
    """(B, H, S, Dh): values after v_proj and the head split (never rotated)."""
    key_padding_mask: torch.Tensor
    """(B, S) bool, True = a real key."""


class _Projection(nn.Module):
    """``nn.Linear`` without its random initialisation: every probe sets all the weights."""

    def __init__(self, d_model: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d_model, d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class ManualMultiHeadAttention(nn.Module):
    """Multi-head attention with optional rotary embeddings and a KV cache; True = may attend."""

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0, bias: bool = True,
                 use_rope: bool = False, rope_base: float = 10000.0,
                 mistakes: frozenset[str] = frozenset()) -> None:
        super().__init__()
        if d_model % num_heads != 0 and "missing-validation" not in mistakes:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        head_dim = d_model // num_heads
        if use_rope and head_dim % 2 and "odd-head-rope-accepted" not in mistakes:
            raise ValueError(f"rotary embeddings need an even head_dim, not {head_dim}")
        self.mistakes = mistakes
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.dropout = dropout
        self.use_rope = use_rope
        self.rope_base = rope_base
        self.q_proj = _Projection(d_model, bias)
        self.k_proj = _Projection(d_model, bias)
        self.v_proj = _Projection(d_model, bias)
        self.out_proj = _Projection(d_model, bias)
        # State only some known mistakes keep between calls.
        self._first_start: dict[int, int] = {}
        self._buffer: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def forward(self, query: torch.Tensor, key_value: torch.Tensor | None = None, *,
                attention_mask: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None,
                query_padding_mask: torch.Tensor | None = None,
                causal: bool = False, cache: KVCache | None = None, use_cache: bool = False,
                query_position_offset: int | None = None,
                key_position_offset: int | None = None,
                ) -> torch.Tensor | tuple[torch.Tensor, KVCache]:
        m = self.mistakes
        if cache is not None and not use_cache and "cache-without-use-cache-accepted" not in m:
            raise ValueError("a cache was passed with use_cache=False")
        if cache is not None and key_value is not None and \
                "cache-cross-attention-accepted" not in m:
            raise ValueError("a cache cannot be used with key_value (cross-attention)")
        if self.training and self.dropout > 0 and (use_cache or cache is not None) and \
                "dropout-while-caching-accepted" not in m:
            raise ValueError("dropout while caching in training mode")
        past = 0 if cache is None else cache.key.shape[2]
        if cache is not None and "offset-not-continuing-accepted" not in m:
            for offset in (query_position_offset, key_position_offset):
                if offset is not None and offset != past:
                    raise ValueError(f"position offset {offset} does not continue a cache of "
                                     f"{past} tokens")
        q_offset = past if query_position_offset is None else query_position_offset
        k_offset = past if key_position_offset is None else key_position_offset

        source = query if key_value is None else key_value
        batch, t_q, _ = query.shape
        t_k = source.shape[1]
        rope_q, rope_k = self._rope_positions(m, past, q_offset, k_offset, t_q, t_k,
                                              query_position_offset, key_position_offset)
        q, k, v = self.q_proj(query), self.k_proj(source), self.v_proj(source)
        if self.use_rope and "rope-before-head-split" in m:
            q, k = self._rotate(q, rope_q), self._rotate(k, rope_k)
        q, k, v = self._split(q), self._split(k), self._split(v)
        unrotated = k
        if self.use_rope and "rope-before-head-split" not in m:
            q = self._rotate(q, rope_q)
            k = self._rotate(k, rope_k)
        if self.use_rope and "rope-on-values" in m:
            v = self._rotate(v, rope_k)

        new_padding = (torch.ones(batch, t_k, dtype=torch.bool, device=query.device)
                       if key_padding_mask is None else key_padding_mask)
        # What this call attends to (keys, values, padding, the positions of the keys) and
        # the cache it hands on.
        if "cache-shared-buffer" in m and use_cache:
            keys, values, padding = self._write_buffer(past, k, v, new_padding)
        elif cache is None:
            keys, values, padding = k, v, new_padding
        else:
            cached_padding = cache.key_padding_mask
            if "cache-padding-lost" in m:
                cached_padding = torch.ones_like(cached_padding)
            axis = 1 if "cache-cat-heads-axis" in m else -1 if "cache-cat-last-axis" in m else 2
            cached_keys = cache.key
            if "cache-keys-rotated-twice" in m and self.use_rope:
                cached_keys = self._rotate(cached_keys, 0)
            keys = torch.cat([cached_keys, k], dim=axis)
            values = torch.cat([cache.value, v], dim=axis)
            padding = torch.cat([cached_padding, new_padding], dim=1)
        key_positions = torch.cat([torch.arange(keys.shape[2] - t_k, device=query.device),
                                   k_offset + torch.arange(t_k, device=query.device)])
        handed_on = KVCache(keys, values, padding)
        if "cache-keys-unrotated" in m and self.use_rope:
            stored = unrotated if cache is None else torch.cat([cache.key, unrotated], dim=2)
            handed_on = KVCache(stored, values, padding)
            if cache is not None:
                keys = self._rotate(stored, 0)
        if m & {"chunk-ignores-cache", "chunk-restarts-cache"} and cache is not None \
                and t_q > 1:
            keys, values, padding = k, v, new_padding
            key_positions = key_positions[-t_k:]
            if "chunk-restarts-cache" in m:
                handed_on = KVCache(k, v, new_padding)
        t_all = keys.shape[2]

        allowed = padding[:, None, None, :]
        if attention_mask is not None:
            mask = attention_mask
            if mask.dim() == 2:
                mask = mask[None, None]
            elif mask.dim() == 3:
                mask = mask[:, None]
            allowed = allowed & mask
        if causal and not ("chunk-causal-leak" in m and cache is not None):
            if "causal-not-shifted" in m:
                triangle = torch.ones(t_q, t_all, dtype=torch.bool, device=query.device).tril()
            elif "causal-by-length" in m:
                triangle = torch.ones(t_q, t_all, dtype=torch.bool,
                                      device=query.device).tril(t_all - t_q)
            else:
                query_positions = q_offset + torch.arange(t_q, device=query.device)
                triangle = key_positions[None, :] <= query_positions[:, None]
            allowed = allowed & triangle[None, None]
        scores = (q @ keys.transpose(-2, -1)) / math.sqrt(self.head_dim)
        allowed = torch.broadcast_to(allowed, scores.shape)
        real_query = None
        if "padded-query-rejected" in m and not bool(allowed.any(dim=-1).all()):
            raise ValueError("a query has no key it may attend to")
        if query_padding_mask is not None and "query-padding-ignored" not in m:
            real_query = query_padding_mask[:, None, :, None]
        checked = allowed if real_query is None else allowed | ~real_query
        if not bool(checked.any(dim=-1).all()):
            raise ValueError("a query has no key it may attend to")
        if "padded-query-nan" not in m:
            allowed = checked  # a padded query's row is zeroed below, never empty
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        weights = F.dropout(weights, p=self.dropout, training=self.training)
        heads = weights @ values
        output: torch.Tensor = self.out_proj(heads.transpose(1, 2).reshape(batch, t_q,
                                                                          self.d_model))
        if real_query is not None and "padded-query-nan" in m:
            output = output * real_query[:, 0]
        elif real_query is not None:
            output = output.masked_fill(~real_query[:, 0], 0.0)
        if not use_cache:
            return output
        if cache is not None and "cache-not-updated" in m:
            return output, cache
        return output, handed_on

    def _rope_positions(self, m: frozenset[str], past: int, q_offset: int, k_offset: int,
                        t_q: int, t_k: int, query_position_offset: int | None,
                        key_position_offset: int | None) -> tuple[int, int]:
        """The first positions the queries and the keys are rotated at."""
        if "rope-offset-not-continued" in m:
            return (0 if query_position_offset is None else query_position_offset,
                    0 if key_position_offset is None else key_position_offset)
        if "rope-offset-twice" in m:
            return past + q_offset, past + k_offset
        if "rope-angles-by-length" in m:
            return (self._first_start.setdefault(t_q, q_offset),
                    self._first_start.setdefault(t_k, k_offset))
        return q_offset, k_offset

    def _write_buffer(self, past: int, k: torch.Tensor, v: torch.Tensor,
                      padding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The shared-buffer mistake: this call's keys written in place after the first
        ``past`` slots of the module's one buffer, which every returned cache views."""
        end = past + k.shape[2]
        if self._buffer is None or self._buffer[0].shape[0] != k.shape[0]:
            size = (*k.shape[:2], 0, k.shape[3])
            self._buffer = (k.new_zeros(size), v.new_zeros(size), padding.new_ones(k.shape[0], 0))
        if self._buffer[0].shape[2] < end:
            grow = end - self._buffer[0].shape[2]
            old_keys, old_values, old_mask = self._buffer
            self._buffer = (torch.cat([old_keys, k.new_zeros(*k.shape[:2], grow, k.shape[3])], 2),
                            torch.cat([old_values, v.new_zeros(*v.shape[:2], grow, v.shape[3])],
                                      2),
                            torch.cat([old_mask, padding.new_ones(k.shape[0], grow)], 1))
        keys, values, mask = self._buffer
        keys[:, :, past:end] = k.detach()
        values[:, :, past:end] = v.detach()
        mask[:, past:end] = padding
        return keys[:, :, :end], values[:, :, :end], mask[:, :end]

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, t, _ = x.shape
        return x.reshape(batch, t, self.num_heads, self.head_dim).transpose(1, 2)

    def _rotate(self, x: torch.Tensor, offset: int) -> torch.Tensor:
        """Rotary embedding of (..., T, W) at positions offset, offset + 1, ...: feature i and
        feature i + W/2 form a pair, turned by position * rope_base ** (-2i / W)."""
        width = x.shape[-1]
        half = width // 2
        base = 10000.0 if "rope-base-ignored" in self.mistakes else self.rope_base
        step = 1 if "rope-exponent-halved" in self.mistakes else 2
        frequencies = base ** (-torch.arange(half, dtype=torch.float64) * step / width)
        positions = offset + torch.arange(x.shape[-2], dtype=torch.float64)
        angles = positions[:, None] * frequencies[None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        if "rope-interleaved" in self.mistakes:
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos],
                               dim=-1).flatten(-2)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


def namespace(mistakes: frozenset[str]) -> dict[str, Any]:
    """What a submission with exactly these mistakes would export."""

    class WithMistakes(ManualMultiHeadAttention):
        def __init__(self, d_model: int, num_heads: int, **kwargs: Any) -> None:
            super().__init__(d_model, num_heads, mistakes=mistakes, **kwargs)

    return {"ManualMultiHeadAttention": WithMistakes, "KVCache": KVCache}
