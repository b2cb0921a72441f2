"""Mistake: 'heads' view is (B, 1, T, D), so there is a single head of width d_model."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("cannot split d_model evenly into heads")
        self.d_model, self.n_heads = d_model, num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        key_value = query if key_value is None else key_value
        B, Tq, D = query.shape
        Tk = key_value.size(1)

        q = self.q_proj(query).view(B, 1, Tq, D)
        k = self.k_proj(key_value).view(B, 1, Tk, D)
        v = self.v_proj(key_value).view(B, 1, Tk, D)

        allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.unsqueeze(1).unsqueeze(2)
        if causal:
            allowed = allowed & torch.tril(torch.ones(Tq, Tk, dtype=torch.bool))
        if (~allowed).all(dim=-1).any():
            raise ValueError("found a query row with no allowed key")

        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = (weights @ v).view(B, Tq, D)
        return self.out_proj(out)
