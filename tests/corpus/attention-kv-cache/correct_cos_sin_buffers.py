"""Correct: cos/sin tables precomputed in __init__ (buffers, grown when a call reaches past them), additive -inf bias, heads in the batch."""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class KVCache(NamedTuple):
    key: torch.Tensor
    value: torch.Tensor
    key_padding_mask: torch.Tensor


MAX_POSITIONS = 1024  # grown on demand


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        head_dim = d_model // num_heads
        if use_rope and head_dim % 2 != 0:
            raise ValueError("use_rope requires an even head_dim")
        self.num_heads, self.head_dim, self.d_model = num_heads, head_dim, d_model
        self.p = dropout
        self.use_rope = use_rope
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        if use_rope:
            half = head_dim // 2
            freq = rope_base ** (-torch.arange(half, dtype=torch.float64) * 2 / head_dim)
            angle = torch.arange(MAX_POSITIONS, dtype=torch.float64)[:, None] * freq
            self.register_buffer("freq", freq, persistent=False)
            self.register_buffer("cos_table", angle.cos(), persistent=False)
            self.register_buffer("sin_table", angle.sin(), persistent=False)

    def apply_rope(self, x, offset):
        n = x.shape[2]
        if offset + n > self.cos_table.shape[0]:  # grow the tables for far positions
            angle = torch.arange(2 * (offset + n), dtype=torch.float64)[:, None] * self.freq
            self.cos_table, self.sin_table = angle.cos(), angle.sin()
        cos = self.cos_table[offset:offset + n].to(x.dtype)
        sin = self.sin_table[offset:offset + n].to(x.dtype)
        a, b = x.chunk(2, dim=-1)
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    def split(self, x):
        B, T, _ = x.shape
        return x.reshape(B, T, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and use_cache is False:
            raise ValueError("cache requires use_cache=True")
        if cache is not None and key_value is not None:
            raise ValueError("no cache in cross-attention")
        if (use_cache or cache is not None) and self.training and self.p > 0:
            raise ValueError("turn dropout off (or call eval()) to use the cache")
        L = cache.key.shape[-2] if cache is not None else 0
        if cache is not None and query_position_offset not in (None, L):
            raise ValueError("bad query_position_offset")
        if cache is not None and key_position_offset not in (None, L):
            raise ValueError("bad key_position_offset")
        q_off = L if query_position_offset is None else query_position_offset
        k_off = L if key_position_offset is None else key_position_offset

        B, Tq, _ = query.shape
        src = query if key_value is None else key_value
        Tk = src.shape[1]
        q, k, v = self.split(self.q_proj(query)), self.split(self.k_proj(src)), \
            self.split(self.v_proj(src))
        if self.use_rope:
            q = self.apply_rope(q, q_off)
            k = self.apply_rope(k, k_off)
        new_pad = torch.ones(B, Tk, dtype=torch.bool) if key_padding_mask is None \
            else key_padding_mask.clone()
        if cache is not None:
            k = torch.cat([cache.key, k], dim=-2)
            v = torch.cat([cache.value, v], dim=-2)
            pad = torch.cat([cache.key_padding_mask, new_pad], dim=-1)
        else:
            pad = new_pad
        S = k.shape[-2]

        mask = pad[:, None, None, :].expand(B, self.num_heads, Tq, S)
        if attention_mask is not None:
            am = attention_mask
            if am.dim() == 2:
                am = am[None, None]
            elif am.dim() == 3:
                am = am[:, None]
            mask = mask & am
        if causal:
            positions_k = torch.cat([torch.arange(L), torch.arange(Tk) + k_off])
            positions_q = torch.arange(Tq) + q_off
            mask = mask & (positions_k[None, :] <= positions_q[:, None])
        if query_padding_mask is not None:
            mask = mask | ~query_padding_mask[:, None, :, None]
        if not mask.any(-1).all():
            raise ValueError("fully masked query")

        bias = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
        qh = q.reshape(B * self.num_heads, Tq, self.head_dim)
        kh = k.reshape(B * self.num_heads, S, self.head_dim)
        vh = v.reshape(B * self.num_heads, S, self.head_dim)
        scores = torch.bmm(qh, kh.transpose(1, 2)) / math.sqrt(self.head_dim)
        scores = scores + bias.reshape(B * self.num_heads, Tq, S)
        attn = F.dropout(F.softmax(scores, dim=-1), self.p, self.training)
        out = torch.bmm(attn, vh).reshape(B, self.num_heads, Tq, self.head_dim)
        out = self.out_proj(out.permute(0, 2, 1, 3).reshape(B, Tq, self.d_model))
        if query_padding_mask is not None:
            out = out.masked_fill(~query_padding_mask[:, :, None], 0.0)
        if use_cache:
            return out, KVCache(k, v, pad)
        return out
