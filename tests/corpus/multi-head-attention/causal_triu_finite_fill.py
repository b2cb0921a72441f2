"""Mistake: the blocked future is triu(0), which also blocks the diagonal, filled with -1e9 on an
additive bias: query 0 gets -1e9 on every key (an even spread), and the row check looking for
-inf never fires."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be a multiple of num_heads")
        self.d_model, self.num_heads, self.p = d_model, num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _fused(self, x, projections):
        weight = torch.cat([p.weight for p in projections], dim=0)
        bias = None
        if projections[0].bias is not None:
            bias = torch.cat([p.bias for p in projections], dim=0)
        B, T, _ = x.shape
        n = len(projections)
        y = F.linear(x, weight, bias)  # (B, T, n * D)
        y = y.reshape(B, T, n, self.num_heads, self.d_model // self.num_heads)
        return y.permute(2, 0, 3, 1, 4)  # (n, B, H, T, Dh)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        if key_value is None:
            q, k, v = self._fused(query, [self.q_proj, self.k_proj, self.v_proj])
        else:
            (q,) = self._fused(query, [self.q_proj])
            k, v = self._fused(key_value, [self.k_proj, self.v_proj])
        B, H, Tq, Dh = q.shape
        Tk = k.shape[2]

        bias = torch.zeros(B, H, Tq, Tk, dtype=q.dtype)
        if attention_mask is not None:
            am = attention_mask.unsqueeze(1) if attention_mask.dim() == 3 else attention_mask
            bias = bias.masked_fill(~am, float("-inf"))
        if key_padding_mask is not None:
            bias = bias.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        if causal:
            future = torch.ones(Tq, Tk, dtype=torch.bool).triu()
            bias = bias.masked_fill(future, -1e9)
        if torch.isinf(bias).all(dim=-1).any():
            raise ValueError("fully masked query row")

        attn = torch.softmax(q @ k.transpose(-1, -2) * Dh ** -0.5 + bias, dim=-1)
        attn = F.dropout(attn, self.p, self.training)
        out = (attn @ v).permute(0, 2, 1, 3).reshape(B, Tq, H * Dh)
        return self.out_proj(out)
