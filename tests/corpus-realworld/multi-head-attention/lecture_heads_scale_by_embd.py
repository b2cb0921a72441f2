"""Mistake: the lecture-style per-head loop with wei = q @ k^T * C ** -0.5 where C is the
embedding width (d_model), not the head size."""
import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("n_embd must split evenly into heads")
        self.num_heads = num_heads
        self.head_size = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        x = query
        ctx = x if key_value is None else key_value
        B, T, C = x.shape
        S = ctx.shape[1]
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
            raise ValueError("a query cannot see any key")
        q_all, k_all, v_all = self.q_proj(x), self.k_proj(ctx), self.v_proj(ctx)
        heads = []
        for h in range(self.num_heads):
            cols = slice(h * self.head_size, (h + 1) * self.head_size)
            q, k, v = q_all[..., cols], k_all[..., cols], v_all[..., cols]
            wei = q @ k.transpose(-2, -1) * C ** -0.5
            wei = wei.masked_fill(~keep[:, h], float("-inf"))
            wei = self.dropout(F.softmax(wei, dim=-1))
            heads.append(wei @ v)
        return self.out_proj(torch.cat(heads, dim=-1))
