"""Mistake: F.softmax(scores, dim=1) on (B, H, T, S) scores normalises across heads."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, D = query.shape
        S = kv.shape[1]
        q = self.q_proj(query).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.h, self.d_k).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.h, self.d_k).transpose(1, 2)
        mask = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            mask = mask & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        if causal:
            mask = mask & torch.ones(T, S, dtype=torch.bool).tril()
        if not mask.any(-1).all():
            raise ValueError("fully masked query")
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = self.dropout(F.softmax(scores, dim=1))
        x = torch.matmul(p_attn, v).transpose(1, 2).contiguous().view(B, T, D)
        return self.out_proj(x)
