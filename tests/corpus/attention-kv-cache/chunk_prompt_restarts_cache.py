"""Any call with several tokens is taken for a prompt (the generate-loop pattern): it starts a
fresh cache, attending to its own tokens and returning only them; one-token calls use the cache."""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class KVCache(NamedTuple):
    key: Tensor
    value: Tensor
    key_padding_mask: Tensor


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        if use_rope and self.head_dim % 2 == 1:
            raise ValueError("RoPE needs an even head dimension")
        self.d_model = d_model
        self.dropout = dropout
        self.use_rope = use_rope
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def _rope(self, x, start):
        T = x.shape[2]
        inv_freq = 1.0 / (self.rope_base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64)
                                             / self.head_dim))
        pos = torch.arange(start, start + T, dtype=torch.float64)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and not use_cache:
            raise ValueError("cache given but use_cache is False")
        if cache is not None and key_value is not None:
            raise ValueError("the cache only works for self-attention")
        if self.training and self.dropout > 0 and (use_cache or cache is not None):
            raise ValueError("no dropout while caching")
        past = 0 if cache is None else cache.key.shape[2]
        if cache is not None:
            if query_position_offset is not None and query_position_offset != past:
                raise ValueError("query_position_offset must continue the cache")
            if key_position_offset is not None and key_position_offset != past:
                raise ValueError("key_position_offset must continue the cache")
        q_start = past if query_position_offset is None else query_position_offset
        k_start = past if key_position_offset is None else key_position_offset

        kv_in = query if key_value is None else key_value
        B, Tq, _ = query.shape
        Tk = kv_in.shape[1]
        q = self._heads(self.q_proj(query))
        k = self._heads(self.k_proj(kv_in))
        v = self._heads(self.v_proj(kv_in))
        if self.use_rope:
            q = self._rope(q, q_start)
            k = self._rope(k, k_start)

        if key_padding_mask is None:
            key_padding_mask = torch.ones(B, Tk, dtype=torch.bool, device=query.device)
        prefill = cache is None or Tq > 1
        if prefill:
            past = 0  # a prompt: start a fresh cache
        else:
            k = torch.cat([cache.key, k], dim=2)
            v = torch.cat([cache.value, v], dim=2)
            key_padding_mask = torch.cat([cache.key_padding_mask, key_padding_mask], dim=1)
        S = k.shape[2]

        allowed = key_padding_mask[:, None, None, :]
        if attention_mask is not None:
            if attention_mask.dim() == 2:
                allowed = allowed & attention_mask[None, None]
            elif attention_mask.dim() == 3:
                allowed = allowed & attention_mask[:, None]
            else:
                allowed = allowed & attention_mask
        if causal:
            key_pos = torch.cat([torch.arange(past), torch.arange(k_start, k_start + Tk)])
            query_pos = torch.arange(q_start, q_start + Tq)
            allowed = allowed & (key_pos[None, :] <= query_pos[:, None])
        allowed = allowed.expand(B, self.num_heads, Tq, S)
        if query_padding_mask is not None:
            allowed = allowed | ~query_padding_mask[:, None, :, None]
        if not allowed.any(dim=-1).all():
            raise ValueError("a query has nothing to attend to")

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = F.dropout(torch.softmax(scores, dim=-1), p=self.dropout, training=self.training)
        out = (weights @ v).transpose(1, 2).reshape(B, Tq, self.d_model)
        out = self.out_proj(out)
        if query_padding_mask is not None:
            out = out * query_padding_mask[..., None].to(out.dtype)
        if use_cache:
            return out, KVCache(k, v, key_padding_mask)
        return out
