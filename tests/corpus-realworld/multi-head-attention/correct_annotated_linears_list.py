"""Correct: the annotated-Transformer MultiHeadedAttention: a list of the four linears zipped with
(query, key, value), view(n, -1, h, d_k).transpose(1, 2), mask.unsqueeze(1), -1e9, a standalone
attention() with a dropout module, transpose(1, 2).contiguous().view(...) and linears[-1]."""
import math

import torch
from torch import nn


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be a multiple of num_heads")
        self.d_k = d_model // num_heads
        self.h = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.linears = nn.ModuleList([self.q_proj, self.k_proj, self.v_proj, self.out_proj])
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        key = value = query if key_value is None else key_value
        nbatches, tq, tk = query.size(0), query.size(1), key.size(1)
        mask = torch.ones(nbatches, tq, tk, dtype=torch.bool, device=query.device)
        if attention_mask is not None:
            mask = mask.unsqueeze(1) & attention_mask if attention_mask.dim() == 4 \
                else mask & attention_mask
        if key_padding_mask is not None:
            mask = mask & (key_padding_mask[:, None, None, :] if mask.dim() == 4
                           else key_padding_mask[:, None, :])
        if causal:
            mask = mask & torch.ones(tq, tk, dtype=torch.bool, device=query.device).tril()
        if mask.dim() == 3:
            mask = mask.unsqueeze(1)
        if not mask.any(-1).all():
            raise ValueError("a query has nothing to attend to")

        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)
