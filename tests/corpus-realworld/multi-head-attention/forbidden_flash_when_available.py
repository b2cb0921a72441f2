"""Mistake: the GPT-style flash flag, hasattr(F, 'scaled_dot_product_attention'), is true on
every recent torch, so the forbidden fused function does the attention."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("n_embd must be divisible by n_head")
        self.n_head = num_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        ctx = query if key_value is None else key_value
        B, T, C = query.size()
        S = ctx.size(1)
        q = self.q_proj(query).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = self.k_proj(ctx).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.v_proj(ctx).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)
        keep = torch.ones(B, 1, T, S, dtype=torch.bool)
        if attention_mask is not None:
            keep = keep & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.view(B, 1, 1, S)
        if causal:
            keep = keep & torch.tril(torch.ones(T, S, dtype=torch.bool))
        if not keep.any(dim=-1).all():
            raise ValueError("fully masked query row")
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=keep, dropout_p=self.dropout if self.training else 0.0)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att.masked_fill(~keep, float("-inf")), dim=-1)
            y = self.attn_dropout(att) @ v
        return self.out_proj(y.transpose(1, 2).contiguous().view(B, T, C))
