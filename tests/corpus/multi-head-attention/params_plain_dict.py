"""Mistake: the projections live in a plain dict keyed by name: not submodules, never trained."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.h = num_heads
        self.dk = d_model // num_heads
        self.p = dropout
        self.layers = {name: nn.Linear(d_model, d_model, bias=bias)
                       for name in ("q_proj", "k_proj", "v_proj", "out_proj")}

    def split(self, x):
        b, t, _ = x.shape
        return x.reshape(b, t, self.h, self.dk).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        src = query if key_value is None else key_value
        b, tq, d = query.shape
        tk = src.shape[1]
        allowed = torch.ones(b, self.h, tq, tk, dtype=torch.bool)
        if attention_mask is not None:
            m = attention_mask
            if m.dim() == 3:
                m = m.unsqueeze(1)
            allowed = allowed & m
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        if causal:
            allowed = allowed & torch.ones(tq, tk, dtype=torch.bool).tril()
        if (allowed.sum(-1) == 0).any():
            raise ValueError("query row with no allowed key")
        q = self.split(self.layers["q_proj"](query))
        k = self.split(self.layers["k_proj"](src))
        v = self.split(self.layers["v_proj"](src))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dk)
        weights = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        weights = F.dropout(weights, self.p, training=self.training)
        out = (weights @ v).permute(0, 2, 1, 3).reshape(b, tq, d)
        return self.layers["out_proj"](out)
