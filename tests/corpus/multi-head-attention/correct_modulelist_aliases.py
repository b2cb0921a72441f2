"""Correct: the projections built in an nn.ModuleList and also named as attributes."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.projections = nn.ModuleList(nn.Linear(d_model, d_model, bias=bias)
                                         for _ in range(4))
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = self.projections
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, D = query.shape
        S = kv.shape[1]
        q = self.q_proj(query).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)

        allowed = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask[:, None] if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.tril(torch.ones(T, S, dtype=torch.bool))
        if not allowed.any(-1).all():
            raise ValueError("a query has no key it may attend to")

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = (self.dropout(weights) @ v).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(out)
