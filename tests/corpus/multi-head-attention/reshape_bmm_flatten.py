"""Mistake: (B, T, D) reshaped straight to (B*H, T, Dh) for bmm, without moving heads first."""
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

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
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

        q = self.q_proj(query).reshape(B * H, Tq, D // H)
        k = self.k_proj(key_value).reshape(B * H, Tk, D // H)
        v = self.v_proj(key_value).reshape(B * H, Tk, D // H)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D // H)
        scores = scores.masked_fill(~allowed.reshape(B * H, Tq, Tk), float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.bmm(weights, v).view(B, H, Tq, D // H).transpose(1, 2).reshape(B, Tq, D)
        return self.out_proj(out)
