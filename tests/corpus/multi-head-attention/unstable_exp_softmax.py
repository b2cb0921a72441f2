"""Mistake: the weights are exp(scores) / exp(scores).sum(-1), no row maximum subtracted."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be a multiple of num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.p = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, D = query.shape
        S = kv.shape[1]
        q = self.q_proj(query).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.num_heads, self.head_dim).transpose(1, 2)

        mask = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            mask = mask & (attention_mask[:, None] if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        if causal:
            mask = mask & torch.tril(torch.ones(T, S, dtype=torch.bool))
        mask = mask.expand(B, self.num_heads, T, S)
        if not mask.any(-1).all():
            raise ValueError("a query cannot attend to any key")

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~mask, float("-inf"))
        # softmax by hand
        num = torch.exp(scores)
        attn = num / num.sum(dim=-1, keepdim=True)
        attn = F.dropout(attn, self.p, training=self.training)
        out = (attn @ v).transpose(1, 2).reshape(B, T, D)
        return self.out_proj(out)
