"""Two mistakes: softmax as exp / sum without the row maximum, and dropout on the output."""
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
        self.hd = d_model // num_heads
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
        q = self.q_proj(query).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.h, self.hd).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.h, self.hd).transpose(1, 2)
        allowed = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask[:, None] if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(T, S, dtype=torch.bool).tril()
        if not allowed.any(-1).all():
            raise ValueError("a query row has no allowed key")
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        e = scores.masked_fill(~allowed, float("-inf")).exp()
        attn = e / e.sum(-1, keepdim=True)
        out = (attn @ v).transpose(1, 2).reshape(B, T, D)
        return F.dropout(self.out_proj(out), self.p, self.training)
