"""Correct: fairseq-style: time-first tensors, q *= scaling on the projection, (bsz * heads) bmm
layout via contiguous().view().transpose(0, 1), key_padding_mask applied through a 4-D view."""
import torch
import torch.nn.functional as F
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        if self.head_dim * num_heads != d_model:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.dropout_p = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        query = query.transpose(0, 1)  # fairseq works time-first: (T, B, C)
        key = query if key_value is None else key_value.transpose(0, 1)
        tgt_len, bsz, embed_dim = query.size()
        src_len = key.size(0)

        q = self.q_proj(query)
        k = self.k_proj(key)
        v = self.v_proj(key)
        q *= self.scaling
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(src_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(src_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)

        blocked = torch.zeros(bsz, self.num_heads, tgt_len, src_len, dtype=torch.bool)
        if attention_mask is not None:
            allowed = attention_mask.unsqueeze(1) if attention_mask.dim() == 3 else attention_mask
            blocked = blocked | ~allowed
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool)
        if causal:
            blocked = blocked | torch.triu(torch.ones(tgt_len, src_len, dtype=torch.bool), 1)
        if blocked.all(-1).any():
            raise ValueError("key_padding_mask / attn_mask leave a query without keys")

        attn_weights = torch.bmm(q, k.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights.masked_fill(blocked, float("-inf"))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_probs = F.dropout(attn_weights, p=self.dropout_p, training=self.training)
        attn = torch.bmm(attn_probs, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        attn = self.out_proj(attn)
        return attn.transpose(0, 1)
