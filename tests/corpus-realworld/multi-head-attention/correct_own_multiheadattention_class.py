"""Correct: the student's own class named MultiheadAttention (a tutorial's name for it), with a
scaled_dot_product helper (-9e15 fill); the contract's class subclasses it."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    attn_logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
    attention = F.softmax(attn_logits, dim=-1)
    return torch.matmul(attention, v), attention


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError("Embedding dimension must be 0 modulo number of heads.")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.drop = nn.Dropout(dropout)

    def _heads(self, x):
        batch_size, seq_length, _ = x.size()
        return x.reshape(batch_size, seq_length, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, context=None, mask=None):
        context = x if context is None else context
        batch_size, seq_length, _ = x.size()
        q, k, v = self._heads(self.q_proj(x)), self._heads(self.k_proj(context)), \
            self._heads(self.v_proj(context))
        values, attention = scaled_dot_product(q, k, v, mask=mask)
        values = values.permute(0, 2, 1, 3).reshape(batch_size, seq_length, self.embed_dim)
        return self.out_proj(values)


class ManualMultiHeadAttention(MultiheadAttention):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        mask = torch.ones(query.shape[0], 1, query.shape[1], kv.shape[1], dtype=torch.bool)
        if attention_mask is not None:
            mask = mask & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                           else attention_mask)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        if causal:
            mask = mask & torch.tril(torch.ones(query.shape[1], kv.shape[1], dtype=torch.bool))
        if not mask.any(-1).all():
            raise ValueError("no key left to attend to")
        return super().forward(query, kv, mask=mask)
