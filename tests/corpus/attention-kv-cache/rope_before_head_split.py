"""RoPE applied to the projected (B, T, d_model) queries and keys before they are split into
heads: the pairs and the frequencies span d_model, not one head's features."""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class KVCache(NamedTuple):
    key: Tensor
    value: Tensor
    key_padding_mask: Tensor


def rope(x, start, base):
    # x: (B, T, C)
    T, C = x.shape[1], x.shape[2]
    half = C // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32) * 2 / C)
    ang = torch.arange(start, start + T, dtype=torch.float32)[:, None] * freq
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        if use_rope and (d_model // num_heads) % 2 != 0:
            raise ValueError("odd head_dim with rope")
        self.n_head, self.n_embd = num_heads, d_model
        self.hd = d_model // num_heads
        self.p = dropout
        self.use_rope, self.base = use_rope, rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and (not use_cache or key_value is not None):
            raise ValueError("a cache needs use_cache=True and self-attention")
        if (use_cache or cache is not None) and self.training and self.p > 0:
            raise ValueError("dropout while caching")
        S0 = cache.key.size(2) if cache is not None else 0
        if cache is not None and any(o is not None and o != S0
                                     for o in (query_position_offset, key_position_offset)):
            raise ValueError("offsets must equal the cache length")
        qo = S0 if query_position_offset is None else query_position_offset
        ko = S0 if key_position_offset is None else key_position_offset
        x = query
        kv = query if key_value is None else key_value
        B, T, C = x.size()
        Tk = kv.size(1)
        q, k, v = self.q_proj(x), self.k_proj(kv), self.v_proj(kv)
        if self.use_rope:
            q, k = rope(q, qo, self.base), rope(k, ko, self.base)
        q = q.view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = k.view(B, Tk, self.n_head, self.hd).transpose(1, 2)
        v = v.view(B, Tk, self.n_head, self.hd).transpose(1, 2)
        pad = (torch.ones(B, Tk, dtype=torch.bool) if key_padding_mask is None
               else key_padding_mask)
        kpos = torch.arange(ko, ko + Tk)
        if cache is not None:
            k = torch.cat((cache.key, k), dim=2)
            v = torch.cat((cache.value, v), dim=2)
            pad = torch.cat((cache.key_padding_mask, pad), dim=1)
            kpos = torch.cat((torch.arange(S0), kpos))
        ok = pad.view(B, 1, 1, -1).expand(B, self.n_head, T, k.size(2))
        if attention_mask is not None:
            am = attention_mask
            if am.dim() == 2:
                am = am.view(1, 1, *am.shape)
            elif am.dim() == 3:
                am = am.unsqueeze(1)
            ok = ok & am
        if causal:
            ok = ok & (kpos.view(1, -1) <= torch.arange(qo, qo + T).view(-1, 1))
        if query_padding_mask is not None:
            ok = ok | ~query_padding_mask.view(B, 1, T, 1)
        if not bool(ok.any(-1).all()):
            raise ValueError("query with nothing to attend to")
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(~ok, float("-inf")), dim=-1)
        att = F.dropout(att, self.p, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        y = self.out_proj(y)
        if query_padding_mask is not None:
            y = y * query_padding_mask.unsqueeze(-1)
        return (y, KVCache(k, v, pad)) if use_cache else y
