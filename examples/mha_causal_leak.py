"""A student's multi-head attention whose causal mask lets queries see the future."""

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
        self.dropout = nn.Dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        source = query if key_value is None else key_value
        b, t_q, d = query.shape
        t_k = source.shape[1]
        q = self._heads(self.q_proj(query))
        k = self._heads(self.k_proj(source))
        v = self._heads(self.v_proj(source))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

        allowed = torch.ones(b, 1, t_q, t_k, dtype=torch.bool, device=query.device)
        if attention_mask is not None:
            if attention_mask.dim() == 2:
                attention_mask = attention_mask[None, None]
            elif attention_mask.dim() == 3:
                attention_mask = attention_mask[:, None]
            allowed = allowed & attention_mask
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            # The mistake: triu keeps the upper triangle, so query i sees keys i..end.
            allowed = allowed & torch.ones(t_q, t_k, dtype=torch.bool).triu()
        allowed = allowed.expand_as(scores)
        if not allowed.any(dim=-1).all():
            raise ValueError("a query has no key it may attend to")

        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = self.dropout(weights) @ v
        return self.out_proj(out.transpose(1, 2).reshape(b, t_q, d))
