"""No check that the offsets continue the cache."""
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
            raise ValueError(f"{d_model} is not a multiple of {num_heads}")
        self.h = num_heads
        self.dh = d_model // num_heads
        if use_rope and self.dh % 2:
            raise ValueError(f"head_dim {self.dh} is odd")
        self.use_rope = use_rope
        self.base = rope_base
        self.drop = nn.Dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def rotate(self, x, first_position):
        half = self.dh // 2
        theta = self.base ** (-2.0 * torch.arange(half, dtype=torch.float64) / self.dh)
        positions = torch.arange(x.shape[-2], dtype=torch.float64) + first_position
        turn = torch.polar(torch.ones(len(positions), half, dtype=torch.float64),
                           positions[:, None] * theta[None, :])
        z = torch.complex(x[..., :half].double(), x[..., half:].double()) * turn
        return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None:
            if not use_cache:
                raise ValueError("pass use_cache=True together with cache")
            if key_value is not None:
                raise ValueError("cache and key_value cannot be combined")
            n_cached = cache.key.size(2)
        else:
            n_cached = 0
        if self.training and self.drop.p > 0 and (use_cache or cache is not None):
            raise ValueError("dropout is not allowed while caching in training mode")
        qo = n_cached if query_position_offset is None else query_position_offset
        ko = n_cached if key_position_offset is None else key_position_offset

        src = query if key_value is None else key_value
        b, tq, d = query.shape
        tk = src.shape[1]
        q = self.q_proj(query).unflatten(-1, (self.h, self.dh)).permute(0, 2, 1, 3)
        k = self.k_proj(src).unflatten(-1, (self.h, self.dh)).permute(0, 2, 1, 3)
        v = self.v_proj(src).unflatten(-1, (self.h, self.dh)).permute(0, 2, 1, 3)
        if self.use_rope:
            q, k = self.rotate(q, qo), self.rotate(k, ko)

        pad = key_padding_mask if key_padding_mask is not None else \
            torch.ones(b, tk, dtype=torch.bool)
        if cache is not None:
            k = torch.cat((cache.key, k), 2)
            v = torch.cat((cache.value, v), 2)
            pad = torch.cat((cache.key_padding_mask, pad), 1)

        ok = pad.view(b, 1, 1, -1)
        if attention_mask is not None:
            m = attention_mask
            while m.dim() < 4:
                m = m.unsqueeze(0) if m.dim() == 2 else m.unsqueeze(1)
            ok = ok & m
        if causal:
            kpos = torch.cat((torch.arange(n_cached), ko + torch.arange(tk)))
            qpos = qo + torch.arange(tq)
            ok = ok & (qpos.view(-1, 1) >= kpos.view(1, -1))
        ok = ok.expand(b, self.h, tq, k.size(2))
        if query_padding_mask is not None:
            ok = ok | (~query_padding_mask).view(b, 1, tq, 1)
        if not bool(ok.any(-1).all()):
            raise ValueError("some query row is fully masked")

        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dh)
        w = self.drop(s.masked_fill(~ok, -math.inf).softmax(-1))
        o = torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(b, tq, d)
        o = self.out_proj(o)
        if query_padding_mask is not None:
            o = torch.where(query_padding_mask.unsqueeze(-1), o, torch.zeros_like(o))
        return (o, KVCache(k, v, pad)) if use_cache else o
