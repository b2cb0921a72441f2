"""Wrong output: adds a residual connection (query + attention), which the contract does not ask for."""
import math

import torch
from torch import nn


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("some query row has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.h = num_heads
        self.d_head = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def heads(self, x):
        b, t, d = x.shape
        return x.reshape(b, t, self.h, self.d_head).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        src = query if key_value is None else key_value
        b, tq, d = query.shape
        tk = src.shape[1]
        allowed = torch.ones(b, self.h, tq, tk, dtype=torch.bool)
        if attention_mask is not None:
            am = attention_mask
            if am.dim() == 3:
                am = am[:, None, :, :]
            allowed = allowed & am
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.view(b, 1, 1, tk)
        if causal:
            allowed = allowed & torch.ones(tq, tk, dtype=torch.bool).tril()

        q = self.heads(self.q_proj(query))
        k = self.heads(self.k_proj(src))
        v = self.heads(self.v_proj(src))
        if self.training:
            if not allowed.any(dim=-1).all():
                raise ValueError("some query row has no allowed key")
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            weights = self.drop(torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1))
            out = weights @ v
        else:
            out, _ = attention(q, k, v, allowed)
        out = out.permute(0, 2, 1, 3).reshape(b, tq, d)
        return query + self.out_proj(out)
