"""Mistake: attention_mask.logical_not_() turns the caller's mask into a 'blocked' mask in
place (fairseq convention inside, course convention outside); the values are right."""
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
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, _ = query.shape
        S = kv.shape[1]
        q = self.q_proj(query).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        blocked = torch.zeros(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            attention_mask.logical_not_()
            blocked = blocked | (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        if causal:
            blocked = blocked | torch.ones(T, S, dtype=torch.bool).triu(1)
        if blocked.all(-1).any():
            raise ValueError("a query has no key to attend to")
        allowed = ~blocked
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))
        out = weights @ v
        out = out.transpose(1, 2).contiguous().view(B, T, self.d_model)
        return self.out_proj(out)
