"""Correct: an einops-minded student without einops: reshape/permute helpers named after the
patterns 'b n (h d) -> b h n d' and back, attention mask converted to an additive float bias."""
import math

import torch
from torch import nn


def split_heads(t, h):  # 'b n (h d) -> b h n d'
    b, n, hd = t.shape
    return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)


def merge_heads(t):  # 'b h n d -> b n (h d)'
    b, h, n, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(b, n, h * d)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"{d_model} is not divisible by {num_heads}")
        self.h = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(kv), self.h)
        v = split_heads(self.v_proj(kv), self.h)
        n, m = q.shape[2], k.shape[2]
        ok = torch.ones(1, 1, n, m, dtype=torch.bool)
        if attention_mask is not None:
            ok = ok & (attention_mask[:, None] if attention_mask.dim() == 3 else attention_mask)
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        if causal:
            ok = ok & torch.ones(n, m, dtype=torch.bool).tril()
        if not ok.any(-1).all():
            raise ValueError("query with no allowed key")
        bias = torch.zeros(ok.shape, dtype=q.dtype).masked_fill(~ok, float("-inf"))
        sim = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
        attn = self.drop(sim.softmax(dim=-1))
        return self.out_proj(merge_heads(attn @ v))
