"""The cache keeps the keys before RoPE; at each call all the keys (cached and new) are rotated
at positions 0 .. S - 1 again. The outputs are right, the returned cache holds unrotated keys."""
import math
from typing import NamedTuple

import torch
from torch import Tensor, nn


class KVCache(NamedTuple):
    key: Tensor
    value: Tensor
    key_padding_mask: Tensor


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids):
        freqs = position_ids[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        if use_rope and self.head_dim % 2:
            raise ValueError("head_dim must be even for rotary embeddings")
        self.hidden_size = d_model
        self.attention_dropout = dropout
        self.use_rope = use_rope
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        if use_rope:
            self.rotary_emb = RotaryEmbedding(self.head_dim, base=rope_base)

    def _shape(self, x):
        bsz, seq_len, _ = x.size()
        return x.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None:
            if not use_cache:
                raise ValueError("cache passed but use_cache=False")
            if key_value is not None:
                raise ValueError("a cache is only for self-attention")
        if self.training and self.attention_dropout > 0 and (use_cache or cache is not None):
            raise ValueError("cannot cache with dropout in training mode")
        past_len = 0 if cache is None else cache.key.shape[-2]
        for offset in (query_position_offset, key_position_offset):
            if cache is not None and offset is not None and offset != past_len:
                raise ValueError("position offsets must continue the cache")
        q_start = past_len if query_position_offset is None else query_position_offset
        k_start = past_len if key_position_offset is None else key_position_offset

        bsz, q_len, _ = query.size()
        source = query if key_value is None else key_value
        kv_len = source.shape[1]
        query_states = self._shape(self.q_proj(query))
        key_states = self._shape(self.k_proj(source))
        value_states = self._shape(self.v_proj(source))

        q_ids = torch.arange(q_start, q_start + q_len, device=query.device)
        k_ids = torch.arange(k_start, k_start + kv_len, device=query.device)
        raw_keys = key_states
        if self.use_rope:
            cos, sin = self.rotary_emb(q_ids)
            query_states = apply_rotary_pos_emb(query_states, cos, sin)
            if cache is None:
                cos, sin = self.rotary_emb(k_ids)
                key_states = apply_rotary_pos_emb(key_states, cos, sin)

        if key_padding_mask is None:
            key_padding_mask = torch.ones(bsz, kv_len, dtype=torch.bool, device=query.device)
        if cache is not None:
            raw_keys = torch.cat([cache.key, raw_keys], dim=-2)
            value_states = torch.cat([cache.value, value_states], dim=-2)
            key_padding_mask = torch.cat([cache.key_padding_mask, key_padding_mask], dim=-1)
            k_ids = torch.cat([torch.arange(past_len, device=query.device), k_ids])
            key_states = raw_keys
            if self.use_rope:
                cos, sin = self.rotary_emb(k_ids)
                key_states = apply_rotary_pos_emb(raw_keys, cos, sin)

        keep = key_padding_mask[:, None, None, :]
        if attention_mask is not None:
            extra = attention_mask
            while extra.dim() < 4:
                extra = extra.unsqueeze(0) if extra.dim() == 2 else extra.unsqueeze(1)
            keep = keep & extra
        if causal:
            keep = keep & (k_ids[None, :] <= q_ids[:, None])
        keep = keep.expand(bsz, self.num_heads, q_len, key_states.shape[-2])
        if query_padding_mask is not None:
            keep = keep | ~query_padding_mask[:, None, :, None]
        if not keep.any(-1).all():
            raise ValueError("some query cannot attend to any key")

        attn_weights = query_states @ key_states.transpose(2, 3) / math.sqrt(self.head_dim)
        attn_weights = attn_weights.masked_fill(~keep, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
        attn_weights = attn_weights.to(query_states.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout,
                                             training=self.training)
        attn_output = (attn_weights @ value_states).transpose(1, 2).reshape(bsz, q_len, -1)
        attn_output = self.out_proj(attn_output)
        if query_padding_mask is not None:
            attn_output = attn_output.masked_fill(~query_padding_mask[..., None], 0.0)
        if use_cache:
            stored = raw_keys if self.use_rope else key_states
            return attn_output, KVCache(stored, value_states, key_padding_mask)
        return attn_output
