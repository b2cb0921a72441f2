"""Rotary embedding as a complex product on the whole (B, T, d_model) projection, before the
head split (the pairing of two halves is right, but over d_model, not per head)."""
import math
from typing import NamedTuple

import torch
from torch import Tensor, nn


class KVCache(NamedTuple):
    key: Tensor
    value: Tensor
    key_padding_mask: Tensor


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("bad num_heads")
        head_dim = d_model // num_heads
        if use_rope and head_dim % 2:
            raise ValueError("rope needs an even head_dim")
        self.h, self.dh, self.d = num_heads, head_dim, d_model
        self.dropout = nn.Dropout(dropout)
        self.drop_p = dropout
        self.use_rope, self.rope_base = use_rope, rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _freqs_cis(self, start, n):
        dim = self.d
        freqs = 1.0 / (self.rope_base ** (torch.arange(0, dim, 2)[: dim // 2].double() / dim))
        t = torch.arange(start, start + n, dtype=torch.float64)
        return torch.polar(torch.ones(n, dim // 2, dtype=torch.float64), torch.outer(t, freqs))

    def _rotate(self, x, start):
        half = x.shape[-1] // 2
        z = torch.complex(x[..., :half].double(), x[..., half:].double())
        z = z * self._freqs_cis(start, x.shape[1])
        return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and not use_cache:
            raise ValueError("use_cache must be True when a cache is given")
        if cache is not None and key_value is not None:
            raise ValueError("no cache for cross-attention")
        if self.training and self.drop_p > 0 and (use_cache or cache is not None):
            raise ValueError("no caching with dropout in training")
        n_past = 0 if cache is None else cache.key.shape[2]
        if cache is not None and {query_position_offset, key_position_offset} - {None, n_past}:
            raise ValueError("offsets must continue the cache")
        q_start = n_past if query_position_offset is None else query_position_offset
        k_start = n_past if key_position_offset is None else key_position_offset
        src = query if key_value is None else key_value
        bsz, tq, _ = query.shape
        tk = src.shape[1]
        q, k, v = self.q_proj(query), self.k_proj(src), self.v_proj(src)
        if self.use_rope:
            q = self._rotate(q, q_start)
            k = self._rotate(k, k_start)
        q = q.reshape(bsz, tq, self.h, self.dh).permute(0, 2, 1, 3)
        k = k.reshape(bsz, tk, self.h, self.dh).permute(0, 2, 1, 3)
        v = v.reshape(bsz, tk, self.h, self.dh).permute(0, 2, 1, 3)
        real = key_padding_mask if key_padding_mask is not None else \
            torch.ones(bsz, tk, dtype=torch.bool)
        key_pos = torch.arange(k_start, k_start + tk)
        if cache is not None:
            k = torch.cat([cache.key, k], 2)
            v = torch.cat([cache.value, v], 2)
            real = torch.cat([cache.key_padding_mask, real], 1)
            key_pos = torch.cat([torch.arange(n_past), key_pos])
        allowed = real[:, None, None, :].expand(bsz, self.h, tq, k.shape[2])
        if attention_mask is not None:
            m = attention_mask
            m = m[None, None] if m.dim() == 2 else (m[:, None] if m.dim() == 3 else m)
            allowed = allowed & m
        if causal:
            allowed = allowed & (key_pos[None, :] <= torch.arange(q_start, q_start + tq)[:, None])
        if query_padding_mask is not None:
            allowed = allowed | ~query_padding_mask[:, None, :, None]
        if not allowed.any(-1).all():
            raise ValueError("a query row is fully masked")
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dh)
        w = self.dropout(torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1))
        out = torch.einsum("bhqk,bhkd->bhqd", w, v).permute(0, 2, 1, 3).reshape(bsz, tq, self.d)
        out = self.out_proj(out)
        if query_padding_mask is not None:
            out = torch.where(query_padding_mask[..., None], out, torch.zeros_like(out))
        if use_cache:
            return out, KVCache(k, v, real)
        return out
