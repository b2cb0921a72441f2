"""Correct: the "several heads in parallel" lecture style: per-head slices of the projections,
each head scaled by its own head_size ** -0.5, torch.cat of the heads, then the projection."""
import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads must divide d_model")
        self.num_heads = num_heads
        self.head_size = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def head(self, q, k, v, keep):
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(~keep, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        return wei @ v

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, T, _ = query.shape
        S = kv.shape[1]
        keep = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            keep = keep & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if causal:
            keep = keep & torch.tril(torch.ones(T, S, dtype=torch.bool))
        keep = keep.expand(B, self.num_heads, T, S)
        if not keep.any(-1).all():
            raise ValueError("a query sees no key")
        q, k, v = self.q_proj(query), self.k_proj(kv), self.v_proj(kv)
        hs = self.head_size
        out = torch.cat([self.head(q[..., h * hs:(h + 1) * hs], k[..., h * hs:(h + 1) * hs],
                                   v[..., h * hs:(h + 1) * hs], keep[:, h])
                         for h in range(self.num_heads)], dim=-1)
        return self.out_proj(out)
