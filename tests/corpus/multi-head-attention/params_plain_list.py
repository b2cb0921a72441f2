"""Mistake: the four projections kept in a plain Python list, so the module never registers them."""
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
        # q, k, v and output projections
        self.projections = [nn.Linear(d_model, d_model, bias=bias) for _ in range(4)]
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        q_proj, k_proj, v_proj, out_proj = self.projections
        kv = query if key_value is None else key_value
        B, T, D = query.shape
        S = kv.shape[1]
        q = q_proj(query).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = k_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = v_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)

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
        return out_proj(out)
