"""Runtime error: the divisibility check uses // instead of %, so every constructor call raises."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model // num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
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
        if key_value is None:
            key_value = query
        B, Tq, _ = query.shape
        Tk = key_value.shape[1]
        q = self.q_proj(query).view(B, Tq, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(key_value).view(B, Tk, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(key_value).view(B, Tk, self.num_heads, self.head_dim).transpose(1, 2)

        keep = torch.ones(1, 1, Tq, Tk, dtype=torch.bool, device=query.device)
        if attention_mask is not None:
            if attention_mask.dim() == 3:
                attention_mask = attention_mask[:, None]
            keep = keep & attention_mask
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if causal:
            keep = keep & torch.ones(Tq, Tk, dtype=torch.bool, device=query.device).tril()
        if not keep.any(dim=-1).all():
            raise ValueError("some query position has no key it is allowed to attend to")

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~keep, float("-inf"))
        weights = self.dropout(scores.softmax(dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(B, Tq, self.d_model)
        return self.out_proj(out)
