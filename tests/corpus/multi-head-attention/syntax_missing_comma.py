"""Syntax error: missing comma between two keyword-only parameters of forward."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("cannot split d_model evenly into heads")
        self.d_model, self.n_heads = d_model, num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(p=dropout)

    def _to_heads(self, x):
        B, T, D = x.shape
        H = self.n_heads
        return x.view(B, T, H, D // H).transpose(1, 2).reshape(B * H, T, D // H)

    def forward(self, query, key_value=None, *, attention_mask=None key_padding_mask=None,
                causal=False):
        key_value = query if key_value is None else key_value
        B, Tq, D = query.shape
        Tk = key_value.size(1)
        H = self.n_heads

        allowed = torch.ones(B, H, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.unsqueeze(1).unsqueeze(2)
        if causal:
            allowed = allowed & torch.tril(torch.ones(Tq, Tk, dtype=torch.bool))
        if (~allowed).all(dim=-1).any():
            raise ValueError("found a query row with no allowed key")
        additive = torch.zeros(allowed.shape, dtype=query.dtype).masked_fill(~allowed, -math.inf)

        q = self._to_heads(self.q_proj(query))
        k = self._to_heads(self.k_proj(key_value))
        v = self._to_heads(self.v_proj(key_value))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D // H)
        scores = scores + additive.reshape(B * H, Tq, Tk)
        scores = scores - scores.max(dim=-1, keepdim=True).values
        e = scores.exp()
        weights = self.dropout(e / e.sum(dim=-1, keepdim=True))
        out = torch.bmm(weights, v)
        out = out.view(B, H, Tq, D // H).transpose(1, 2).reshape(B, Tq, D)
        return self.out_proj(out)
