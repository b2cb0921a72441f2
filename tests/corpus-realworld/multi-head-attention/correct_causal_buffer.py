"""Correct: a registered lower-triangular buffer sliced to the sequence length for causal=True
(the GPT manual path: masked_fill(self.bias[:, :, :T, :T] == 0, -inf))."""
import math

import torch
import torch.nn.functional as F
from torch import nn

BLOCK_SIZE = 64


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.n_head = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE))
                             .view(1, 1, BLOCK_SIZE, BLOCK_SIZE))

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        x = query
        kv = x if key_value is None else key_value
        B, T, C = x.size()
        S = kv.size(1)
        hs = C // self.n_head
        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, self.n_head, hs).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, self.n_head, hs).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        blocked = torch.zeros(B, 1, T, S, dtype=torch.bool)
        if causal:
            blocked = blocked | (self.tril[:, :, :T, :S] == 0)
        if attention_mask is not None:
            blocked = blocked | ~(attention_mask[:, None] if attention_mask.dim() == 3
                                  else attention_mask)
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        if blocked.all(dim=-1).any():
            raise ValueError("no visible key for some query")
        att = att.masked_fill(blocked, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out_proj(y)
