"""Mistake: the projection layers are created inside forward, fresh (and random) on every call."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.bias = bias
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        d, h = self.d_model, self.num_heads
        q_proj = nn.Linear(d, d, bias=self.bias)
        k_proj = nn.Linear(d, d, bias=self.bias)
        v_proj = nn.Linear(d, d, bias=self.bias)
        out_proj = nn.Linear(d, d, bias=self.bias)
        kv = query if key_value is None else key_value
        B, T, _ = query.shape
        S = kv.shape[1]
        q = q_proj(query).view(B, T, h, d // h).transpose(1, 2)
        k = k_proj(kv).view(B, S, h, d // h).transpose(1, 2)
        v = v_proj(kv).view(B, S, h, d // h).transpose(1, 2)
        mask = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            mask = mask & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        if causal:
            mask = mask & torch.ones(T, S, dtype=torch.bool).tril()
        if not mask.any(dim=-1).all():
            raise ValueError("a query row has nothing to attend to")
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
        weights = self.attn_dropout(torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1))
        return out_proj((weights @ v).transpose(1, 2).reshape(B, T, d))
