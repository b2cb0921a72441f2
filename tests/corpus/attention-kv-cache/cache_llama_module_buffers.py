"""The module keeps its own cache_k / cache_v buffers (as in the LLaMA reference) and writes
each call's keys at start_pos; the cache it is given only tells it start_pos, so an older cache
or another sequence continues from whatever the module holds."""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class KVCache(NamedTuple):
    key: Tensor
    value: Tensor
    key_padding_mask: Tensor


def precompute_freqs_cis(dim, start, end, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(start, end, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(x, freqs_cis):
    # x: (B, T, H, Dh); pairs are (i, i + Dh/2)
    half = x.shape[-1] // 2
    xc = torch.complex(x[..., :half].float(), x[..., half:].float())
    out = xc * freqs_cis[None, :, None, :]
    return torch.cat([out.real, out.imag], dim=-1).type_as(x)


class ManualMultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, *, dropout=0.0, bias=True, use_rope=False,
                 rope_base=10000.0, max_batch_size=8, max_seq_len=512):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be a multiple of num_heads")
        self.n_heads = num_heads
        self.head_dim = d_model // num_heads
        if use_rope and self.head_dim % 2:
            raise ValueError("odd head_dim")
        self.dim = d_model
        self.dropout = dropout
        self.use_rope = use_rope
        self.theta = rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.cache_k = torch.zeros(max_batch_size, max_seq_len, num_heads, self.head_dim)
        self.cache_v = torch.zeros(max_batch_size, max_seq_len, num_heads, self.head_dim)
        self.cache_mask = torch.ones(max_batch_size, max_seq_len, dtype=torch.bool)

    def forward(self, query, key_value=None, *, attention_mask=None, key_padding_mask=None,
                query_padding_mask=None, causal=False, cache=None, use_cache=False,
                query_position_offset=None, key_position_offset=None):
        if cache is not None and not use_cache:
            raise ValueError("cache requires use_cache=True")
        if cache is not None and key_value is not None:
            raise ValueError("cache with key_value")
        if self.training and self.dropout > 0 and (use_cache or cache is not None):
            raise ValueError("dropout while caching")
        start_pos = 0 if cache is None else cache.key.shape[2]
        for off in (query_position_offset, key_position_offset):
            if cache is not None and off is not None and off != start_pos:
                raise ValueError("offset does not continue the cache")
        q_off = start_pos if query_position_offset is None else query_position_offset
        k_off = start_pos if key_position_offset is None else key_position_offset
        src = query if key_value is None else key_value
        bsz, seqlen, _ = query.shape
        kvlen = src.shape[1]
        xq = self.q_proj(query).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.k_proj(src).view(bsz, kvlen, self.n_heads, self.head_dim)
        xv = self.v_proj(src).view(bsz, kvlen, self.n_heads, self.head_dim)
        if self.use_rope:
            xq = apply_rotary_emb(xq, precompute_freqs_cis(self.head_dim, q_off, q_off + seqlen,
                                                           self.theta))
            xk = apply_rotary_emb(xk, precompute_freqs_cis(self.head_dim, k_off, k_off + kvlen,
                                                           self.theta))
        pad = torch.ones(bsz, kvlen, dtype=torch.bool) if key_padding_mask is None \
            else key_padding_mask
        if use_cache:
            self.cache_k = self.cache_k.to(xk)
            self.cache_v = self.cache_v.to(xv)
            with torch.no_grad():
                self.cache_k[:bsz, start_pos:start_pos + kvlen] = xk
                self.cache_v[:bsz, start_pos:start_pos + kvlen] = xv
                self.cache_mask[:bsz, start_pos:start_pos + kvlen] = pad
            keys = self.cache_k[:bsz, :start_pos + kvlen].clone()
            values = self.cache_v[:bsz, :start_pos + kvlen].clone()
            pad = self.cache_mask[:bsz, :start_pos + kvlen].clone()
        else:
            keys, values = xk, xv
        keys, values, xq = keys.transpose(1, 2), values.transpose(1, 2), xq.transpose(1, 2)
        key_pos = torch.cat([torch.arange(start_pos), torch.arange(k_off, k_off + kvlen)])
        mask = pad[:, None, None, :].expand(bsz, self.n_heads, seqlen, keys.shape[2])
        if attention_mask is not None:
            am = attention_mask
            mask = mask & (am if am.dim() == 4 else am.unsqueeze(1) if am.dim() == 3 else am)
        if causal:
            mask = mask & (key_pos[None, :] <= torch.arange(q_off, q_off + seqlen)[:, None])
        if query_padding_mask is not None:
            mask = mask | ~query_padding_mask[:, None, :, None]
        if not mask.any(dim=-1).all():
            raise ValueError("empty attention row")
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = F.softmax(scores.masked_fill(~mask, float("-inf")).float(), dim=-1).type_as(xq)
        scores = F.dropout(scores, p=self.dropout, training=self.training)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        output = self.out_proj(output)
        if query_padding_mask is not None:
            output = output * query_padding_mask[..., None].to(output.dtype)
        if use_cache:
            return output, KVCache(keys, values, pad)
        return output
