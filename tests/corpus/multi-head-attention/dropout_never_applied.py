"""Mistake: the dropout probability is stored in __init__ but forward never uses it."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout = dropout  # TODO
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, _ = query.shape
        S = kv.shape[1]
        hd = self.d_model // self.num_heads
        q = self.q_proj(query).unflatten(-1, (self.num_heads, hd)).transpose(1, 2)
        k = self.k_proj(kv).unflatten(-1, (self.num_heads, hd)).transpose(1, 2)
        v = self.v_proj(kv).unflatten(-1, (self.num_heads, hd)).transpose(1, 2)

        bias = torch.zeros(B, 1, T, S)
        blocked = torch.zeros(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            am = attention_mask if attention_mask.dim() != 3 else attention_mask[:, None]
            blocked = blocked | ~am
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        if causal:
            blocked = blocked | torch.ones(T, S, dtype=torch.bool).triu(1)
        if blocked.all(dim=-1).any():
            raise ValueError("fully masked query row")
        bias = bias.masked_fill(blocked, float("-inf"))

        scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(hd) + bias
        weights = torch.softmax(scores, dim=-1)
        out = torch.einsum("bhts,bhsd->bhtd", weights, v)
        return self.out_proj(out.transpose(1, 2).flatten(2))
