"""Mistake: nn.Dropout applied to the module's output instead of the attention weights."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.n_heads = num_heads
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_k).transpose(1, 2)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        if key_value is None:
            key_value = query
        b, tq, d = query.shape
        tk = key_value.shape[1]
        keep = torch.ones(b, 1, tq, tk, dtype=torch.bool)
        if attention_mask is not None:
            if attention_mask.dim() == 3:
                attention_mask = attention_mask.unsqueeze(1)
            keep = keep & attention_mask
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if causal:
            keep = keep & torch.tril(torch.ones(tq, tk, dtype=torch.bool))
        if not keep.any(dim=-1).all():
            raise ValueError("every key is masked for some query")

        q, k, v = (self._heads(p(x)) for p, x in ((self.q_proj, query), (self.k_proj, key_value),
                                                  (self.v_proj, key_value)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        attn = scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).contiguous().view(b, tq, d)
        # regularise the result
        return self.dropout(self.out_proj(out))
