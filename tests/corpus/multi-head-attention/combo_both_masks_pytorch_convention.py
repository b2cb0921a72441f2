"""Mistakes: both masks read the nn.MultiheadAttention way (True = blocked), the causal one right."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.num_heads, self.dropout = d_model, num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def _split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, -1).transpose(1, 2)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        q, k, v = self._split(self.q_proj(query)), self._split(self.k_proj(kv)), \
            self._split(self.v_proj(kv))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        blocked = torch.zeros(scores.shape, dtype=torch.bool)
        if attention_mask is not None:
            # True = masked out, as in nn.MultiheadAttention
            mask = attention_mask[:, None] if attention_mask.dim() == 3 else attention_mask
            blocked = blocked | mask
        if key_padding_mask is not None:
            blocked = blocked | key_padding_mask[:, None, None, :]  # True = padding
        if causal:
            Tq, Tk = scores.shape[-2:]
            blocked = blocked | torch.ones(Tq, Tk, dtype=torch.bool).triu(1)
        if blocked.all(dim=-1).any():
            raise ValueError("a query row has no key to attend to")
        weights = self.drop(scores.masked_fill(blocked, float("-inf")).softmax(dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(query.shape[0], query.shape[1], -1)
        return self.out_proj(out)
