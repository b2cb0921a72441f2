"""Mistake: a Hugging Face style additive causal mask, full((T, S), finfo.min).triu(diagonal=0),
which also blocks the diagonal; being finite, it leaves query 0 an even spread instead of an
error."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
        self.embed_dim = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = nn.Dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _shape(self, x):
        bsz, seq, _ = x.shape
        return x.view(bsz, seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        bsz, tgt_len, _ = query.shape
        src_len = kv.shape[1]
        q = self._shape(self.q_proj(query))
        k = self._shape(self.k_proj(kv))
        v = self._shape(self.v_proj(kv))

        keep = torch.ones(bsz, 1, tgt_len, src_len, dtype=torch.bool)
        if attention_mask is not None:
            am = attention_mask
            if am.dim() == 2:
                am = am[None, None]
            elif am.dim() == 3:
                am = am[:, None]
            keep = keep & am
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if not keep.any(dim=-1).all():
            raise ValueError("a query has no key to attend to")

        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~keep, float("-inf"))
        if causal:
            min_value = torch.finfo(scores.dtype).min
            causal_mask = torch.full((tgt_len, src_len), min_value, dtype=scores.dtype)
            scores = scores + causal_mask.triu(diagonal=0)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.matmul(probs, v).transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(out)
