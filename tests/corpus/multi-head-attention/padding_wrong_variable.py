"""Mistake: the padding mask is AND-ed into a misspelled variable that is never used."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("num_heads has to divide d_model")
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _mask(self, B, Tq, Tk, attention_mask, key_padding_mask, causal):
        mask = torch.ones(B, self.num_heads, Tq, Tk, dtype=torch.bool)
        if attention_mask is not None:
            if attention_mask.dim() == 2:
                mask = mask & attention_mask[None, None]
            elif attention_mask.dim() == 3:
                mask = mask & attention_mask[:, None]
            else:
                mask = mask & attention_mask
        if key_padding_mask is not None:
            maks = mask & key_padding_mask[:, None, None, :]  # noqa: F841
        if causal:
            mask = mask & torch.ones(Tq, Tk, dtype=torch.bool).tril()
        for b in range(B):
            for h in range(self.num_heads):
                for t in range(Tq):
                    if not mask[b, h, t].any():
                        raise ValueError(f"batch {b}, head {h}, query {t}: no key allowed")
        return mask

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        if key_value is None:
            key_value = query
        B, Tq, _ = query.shape
        Tk = key_value.shape[1]
        mask = self._mask(B, Tq, Tk, attention_mask, key_padding_mask, causal)
        Q, K, V = self.q_proj(query), self.k_proj(key_value), self.v_proj(key_value)
        dh = self.d_model // self.num_heads
        head_outputs = []
        for h in range(self.num_heads):
            cols = slice(h * dh, (h + 1) * dh)
            scores = Q[:, :, cols] @ K[:, :, cols].transpose(1, 2) / math.sqrt(dh)
            scores = scores.masked_fill(~mask[:, h], float("-inf"))
            w = F.dropout(torch.softmax(scores, dim=-1), self.dropout, training=self.training)
            head_outputs.append(w @ V[:, :, cols])
        return self.out_proj(torch.cat(head_outputs, dim=-1))
