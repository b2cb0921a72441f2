"""Mistake: a decoder-only (GPT-style) block dropped in as is: key_value is accepted and never
used, so cross-attention attends over the query sequence."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("n_embd % n_head != 0")
        self.n_head = num_heads
        self.n_embd = d_model
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        x = query
        B, T, C = x.size()
        q = self.q_proj(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        keep = torch.ones(T, T, dtype=torch.bool)
        if causal:
            keep = keep.tril()
        keep = keep.view(1, 1, T, T)
        if attention_mask is not None:
            keep = keep & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if not keep.any(-1).all():
            raise ValueError("fully masked query")
        att = att.masked_fill(~keep, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out_proj(y)
