"""Correct: the torch-internals style: boolean masks merged into one additive float mask
(0 / -inf) and the scores formed with baddbmm(mask, q * scale, k^T) in a (B*H, T, S) layout."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout_p = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        kv = query if key_value is None else key_value
        B, L, E = query.shape
        S = kv.shape[1]
        H, Dh = self.num_heads, self.head_dim

        allowed = torch.ones(B, H, L, S, dtype=torch.bool)
        if attention_mask is not None:
            allowed = allowed & (attention_mask.unsqueeze(1) if attention_mask.dim() == 3
                                 else attention_mask)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.view(B, 1, 1, S)
        if causal:
            allowed = allowed & torch.ones(L, S, dtype=torch.bool).tril()
        if (~allowed).all(dim=-1).any():
            raise ValueError("attn_mask blocks a whole row")
        attn_mask = torch.zeros(B * H, L, S, dtype=query.dtype)
        attn_mask.masked_fill_(~allowed.reshape(B * H, L, S), float("-inf"))

        q = self.q_proj(query).view(B, L, H, Dh).transpose(1, 2).reshape(B * H, L, Dh)
        k = self.k_proj(kv).view(B, S, H, Dh).transpose(1, 2).reshape(B * H, S, Dh)
        v = self.v_proj(kv).view(B, S, H, Dh).transpose(1, 2).reshape(B * H, S, Dh)
        q_scaled = q * math.sqrt(1.0 / float(Dh))
        attn_output_weights = torch.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        attn_output_weights = torch.softmax(attn_output_weights, dim=-1)
        if self.training and self.dropout_p > 0.0:
            attn_output_weights = torch.dropout(attn_output_weights, p=self.dropout_p, train=True)
        attn_output = torch.bmm(attn_output_weights, v)
        attn_output = attn_output.view(B, H, L, Dh).transpose(1, 2).reshape(B, L, E)
        return self.out_proj(attn_output)
