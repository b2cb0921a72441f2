"""Correct: BERT-style self-attention: transpose_for_scores with view + permute, an extended
additive mask (1 - mask) * finfo(dtype).min, nn.Softmax(dim=-1), permute back and out_proj."""
import math

import torch
from torch import nn


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(
                f"The hidden size ({d_model}) is not a multiple of the number of attention "
                f"heads ({num_heads})")
        self.num_attention_heads = num_heads
        self.attention_head_size = d_model // num_heads
        self.all_head_size = d_model
        self.q_proj = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.k_proj = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.v_proj = nn.Linear(d_model, self.all_head_size, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=-1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def get_extended_attention_mask(self, keep, dtype):
        return (1.0 - keep.to(dtype)) * torch.finfo(dtype).min

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                causal=False):
        hidden_states = query
        encoder_hidden_states = query if key_value is None else key_value
        bsz, tgt, src = query.shape[0], query.shape[1], encoder_hidden_states.shape[1]
        keep = torch.ones(bsz, 1, tgt, src, dtype=torch.bool, device=query.device)
        if attention_mask is not None:
            keep = keep & (attention_mask[:, None] if attention_mask.dim() == 3 else attention_mask)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        if causal:
            keep = keep & torch.ones(tgt, src, dtype=torch.bool, device=query.device).tril()
        if not keep.any(-1).all():
            raise ValueError("attention mask blocks every key for some query")

        query_layer = self.transpose_for_scores(self.q_proj(hidden_states))
        key_layer = self.transpose_for_scores(self.k_proj(encoder_hidden_states))
        value_layer = self.transpose_for_scores(self.v_proj(encoder_hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + self.get_extended_attention_mask(
            keep, attention_scores.dtype)
        attention_probs = self.dropout(self.softmax(attention_scores))
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return self.out_proj(context_layer)
