"""Two mistakes: causal tril from the top-left corner, and the cached padding dropped."""
import math
from typing import NamedTuple

import torch
from torch import nn


class KVCache(NamedTuple):
    key: torch.Tensor
    value: torch.Tensor
    key_padding_mask: torch.Tensor


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("bad num_heads")
        self.d_model, self.num_heads = d_model, num_heads
        self.head_dim = d_model // num_heads
        if use_rope and self.head_dim % 2 == 1:
            raise ValueError("odd head_dim with rope")
        self.use_rope, self.rope_base = use_rope, rope_base
        self.dropout = nn.Dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def rope(self, x, start):
        # x: (B, T, Dh) of one head
        half = self.head_dim // 2
        out = x.clone()
        for i in range(half):
            freq = self.rope_base ** (-2 * i / self.head_dim)
            angle = (torch.arange(x.shape[1], dtype=torch.float64) + start) * freq
            c, s = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
            a, b = x[:, :, i], x[:, :, i + half]
            out[:, :, i] = a * c - b * s
            out[:, :, i + half] = a * s + b * c
        return out

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and not use_cache:
            raise ValueError("use_cache must be True when a cache is passed")
        if cache is not None and key_value is not None:
            raise ValueError("cache with cross attention")
        if self.training and self.dropout.p > 0 and (cache is not None or use_cache):
            raise ValueError("dropout during caching")
        cached = 0 if cache is None else cache.key.shape[2]
        if cache is not None and (query_position_offset not in (None, cached)
                                  or key_position_offset not in (None, cached)):
            raise ValueError("offsets must equal the cache length")
        qoff = cached if query_position_offset is None else query_position_offset
        koff = cached if key_position_offset is None else key_position_offset
        kv = query if key_value is None else key_value
        B, Tq, _ = query.shape
        Tk = kv.shape[1]
        Q, K, V = self.q_proj(query), self.k_proj(kv), self.v_proj(kv)

        new_pad = key_padding_mask if key_padding_mask is not None else \
            torch.ones(B, Tk, dtype=torch.bool)
        pad = new_pad if cache is None else torch.cat([torch.ones_like(cache.key_padding_mask), new_pad], 1)
        S = cached + Tk
        allowed = pad[:, None, :].expand(B, Tq, S)
        if causal:
            allowed = allowed & torch.tril(torch.ones(Tq, S, dtype=torch.bool))
        if query_padding_mask is not None:
            allowed = allowed | ~query_padding_mask[:, :, None]

        heads, keys, values = [], [], []
        for h in range(self.num_heads):
            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)
            q, k, v = Q[..., cols], K[..., cols], V[..., cols]
            if self.use_rope:
                q, k = self.rope(q, qoff), self.rope(k, koff)
            if cache is not None:
                k = torch.cat([cache.key[:, h], k], dim=1)
                v = torch.cat([cache.value[:, h], v], dim=1)
            keys.append(k)
            values.append(v)
            ok = allowed
            if attention_mask is not None:
                am = attention_mask
                if am.dim() == 4:
                    am = am[:, h if am.shape[1] > 1 else 0]
                ok = ok & am
            if not ok.any(-1).all():
                raise ValueError("no allowed key for some query")
            scores = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(~ok, float("-inf"))
            e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
            w = self.dropout(e / e.sum(dim=-1, keepdim=True))
            heads.append(w @ v)
        out = self.out_proj(torch.cat(heads, dim=-1))
        if query_padding_mask is not None:
            out = out * query_padding_mask.unsqueeze(-1)
        if use_cache:
            return out, KVCache(torch.stack(keys, 1), torch.stack(values, 1), pad)
        return out
