"""Mistake: hand-made dropout mask on the weights, the kept weights not divided by 1 - p."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"{num_heads} heads do not divide d_model={d_model}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.p = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        src = query if key_value is None else key_value
        B, T, D = query.shape
        S = src.shape[1]
        H, Dh = self.num_heads, self.head_dim
        q = self.q_proj(query).reshape(B, T, H, Dh).permute(0, 2, 1, 3)
        k = self.k_proj(src).reshape(B, S, H, Dh).permute(0, 2, 1, 3)
        v = self.v_proj(src).reshape(B, S, H, Dh).permute(0, 2, 1, 3)

        ok = torch.ones(B, H, T, S, dtype=torch.bool)
        if attention_mask is not None:
            ok = ok & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3 else attention_mask)
        if key_padding_mask is not None:
            ok = ok & key_padding_mask.view(B, 1, 1, S)
        if causal:
            ok = ok & torch.ones(T, S, dtype=torch.bool).tril()
        if (~ok).all(dim=-1).any():
            raise ValueError("a query row has no key left")

        scores = (q @ k.transpose(2, 3)) / math.sqrt(Dh)
        weights = torch.softmax(scores.masked_fill(~ok, -math.inf), dim=-1)
        if self.training and self.p > 0:
            drop_mask = (torch.rand_like(weights) > self.p).to(weights.dtype)
            weights = weights * drop_mask
        out = (weights @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return self.out_proj(out)
