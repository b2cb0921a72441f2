"""Mistake: a single-head attention module with a num_heads argument it never uses: one
attention over the full width, scaled by sqrt(d_model)."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model = d_model
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        Q, K, V = self.q_proj(query), self.k_proj(kv), self.v_proj(kv)
        T, S = Q.shape[1], K.shape[1]
        allowed = torch.ones(T, S, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & attention_mask
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, :]
        if causal:
            allowed = allowed & torch.ones(T, S, dtype=torch.bool).tril()
        if not allowed.any(-1).all():
            raise ValueError("no allowed key")
        scores = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(self.d_model)
        scores = scores.masked_fill(~allowed, float("-inf"))
        attn = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj(torch.bmm(attn, V))
