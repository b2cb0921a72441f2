"""Mistake: a BERT-style self-attention returns context_layer; the output projection lived in a
separate "SelfOutput" module that was not ported, so out_proj is never applied."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("hidden size is not a multiple of the number of attention heads")
        self.num_attention_heads = num_heads
        self.attention_head_size = d_model // num_heads
        self.all_head_size = d_model
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        hidden = query
        encoder_hidden = query if key_value is None else key_value
        b, t, s = query.shape[0], query.shape[1], encoder_hidden.shape[1]
        keep = torch.ones(b, 1, t, s, dtype=torch.bool)
        if attention_mask is not None:
            keep = keep & (attention_mask[:, None] if attention_mask.dim() == 3 else attention_mask)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if causal:
            keep = keep & torch.ones(t, s, dtype=torch.bool).tril()
        if not keep.any(-1).all():
            raise ValueError("every key is masked for some query")
        query_layer = self.transpose_for_scores(self.q_proj(hidden))
        key_layer = self.transpose_for_scores(self.k_proj(encoder_hidden))
        value_layer = self.transpose_for_scores(self.v_proj(encoder_hidden))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores.masked_fill(~keep, torch.finfo(attention_scores.dtype).min)
        attention_probs = self.dropout(nn.functional.softmax(attention_scores, dim=-1))
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))
        return context_layer
