"""Mistake: heads never split; one attention over the full d_model width, scaled by sqrt(d_model)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        if key_value is None:
            key_value = query
        B, Tq, _ = query.shape
        Tk = key_value.shape[1]
        q = self.q_proj(query)
        k = self.k_proj(key_value)
        v = self.v_proj(key_value)

        allowed = torch.ones(B, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            if attention_mask.dim() == 4:
                attention_mask = attention_mask.squeeze(1)
            allowed = allowed & attention_mask
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, :]
        if causal:
            allowed = allowed & torch.tril(torch.ones(Tq, Tk, dtype=torch.bool))
        if not allowed.any(dim=-1).all():
            raise ValueError("a query position has no key it may attend to")

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = F.dropout(torch.softmax(scores, dim=-1), p=self.dropout, training=self.training)
        return self.out_proj(weights @ v)
