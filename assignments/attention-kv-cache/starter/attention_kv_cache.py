"""Multi-head attention with rotary embeddings and a KV cache (lab: implement multi-head attention).

Fill in `ManualMultiHeadAttention` and submit this file as `attention_kv_cache.py`. Keep the
`KVCache` definition. Do not call torch.nn.functional.scaled_dot_product_attention or
torch.nn.MultiheadAttention.
"""

from typing import NamedTuple

import torch  # noqa: F401 - you will need it
from torch import Tensor, nn


class KVCache(NamedTuple):
    """Keys and values of every token attended to so far, and which of them are real."""

    key: Tensor               # (B, H, S, Dh): after k_proj, the head split and RoPE
    value: Tensor             # (B, H, S, Dh): after v_proj and the head split
    key_padding_mask: Tensor  # (B, S) bool, True = a real key


class ManualMultiHeadAttention(nn.Module):
    """Multi-head attention; every boolean mask means True = may attend (or: a real token)."""

    def __init__(self, d_model: int, num_heads: int, *, dropout: float = 0.0,
                 bias: bool = True, use_rope: bool = False, rope_base: float = 10000.0) -> None:
        """Build the module.

        Must create q_proj, k_proj, v_proj and out_proj, each nn.Linear(d_model, d_model,
        bias=bias).

        Raises:
            ValueError: if d_model % num_heads != 0, or use_rope and head_dim is odd.
        """
        super().__init__()
        raise NotImplementedError("implement ManualMultiHeadAttention.__init__")

    def forward(self, query: Tensor, key_value: Tensor | None = None, *,
                attention_mask: Tensor | None = None,
                key_padding_mask: Tensor | None = None,
                query_padding_mask: Tensor | None = None,
                causal: bool = False, cache: KVCache | None = None, use_cache: bool = False,
                query_position_offset: int | None = None,
                key_position_offset: int | None = None) -> Tensor | tuple[Tensor, KVCache]:
        """Attend from query to key_value (or to query itself), after the cached keys.

        Args:
            query: (B, Tq, d_model).
            key_value: (B, Tk, d_model) for cross-attention, or None for self-attention.
            attention_mask: bool, (Tq, S), (B, Tq, S) or (B or 1, H or 1, Tq, S), S = cached
                + new keys; True = may attend.
            key_padding_mask: bool, (B, Tk) for this call's new keys; True = a real key.
            query_padding_mask: bool, (B, Tq); True = a real query. Padded queries output 0.
            causal: a query at position p attends only to keys at positions <= p.
            cache: a KVCache returned by an earlier call (self-attention only).
            use_cache: return (output, KVCache) with the cached and the new keys and values.
            query_position_offset, key_position_offset: the position of this call's first
                query and first new key (default: the cache length, 0 without a cache).

        RoPE (use_rope=True) rotates queries and keys, never values: feature i pairs with
        feature i + head_dim // 2, turned by position * rope_base ** (-2 i / head_dim).

        Returns:
            (B, Tq, d_model), or (output, KVCache) when use_cache is True.

        Raises:
            ValueError: a real query has no allowed key; a cache with use_cache=False or with
                key_value; use_cache or a cache in training mode with dropout > 0; an offset
                that does not continue the cache.
        """
        raise NotImplementedError("implement ManualMultiHeadAttention.forward")
