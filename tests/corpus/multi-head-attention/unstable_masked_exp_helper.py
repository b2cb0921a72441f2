"""Mistake: a masked-softmax helper that zeroes exp(scores) of blocked keys; no max subtracted."""
import math

import torch
from torch import nn


def masked_softmax(scores, allowed):
    weights = torch.exp(scores) * allowed
    return weights / weights.sum(dim=-1, keepdim=True)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads has to divide d_model")
        self.h = num_heads
        self.dk = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_drop = nn.Dropout(dropout)

    def split(self, x):
        b, t, _ = x.shape
        return x.reshape(b, t, self.h, self.dk).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        src = query if key_value is None else key_value
        b, tq, d = query.shape
        tk = src.shape[1]
        allowed = torch.ones(b, self.h, tq, tk, dtype=torch.bool)
        if attention_mask is not None:
            m = attention_mask
            while m.dim() < 4:
                m = m.unsqueeze(0) if m.dim() == 2 else m.unsqueeze(1)
            allowed = allowed & m
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(tq, tk, dtype=torch.bool).tril()
        if (allowed.sum(-1) == 0).any():
            raise ValueError("query row with no allowed key")

        q, k, v = self.split(self.q_proj(query)), self.split(self.k_proj(src)), self.split(
            self.v_proj(src))
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.dk)
        weights = self.attn_drop(masked_softmax(scores, allowed.to(scores.dtype)))
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(b, tq, d))
