"""Correct: a university tutorial's scaled_dot_product(q, k, v, mask) with a -9e15 fill."""
import math

import torch.nn.functional as F
import torch


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    attn_logits = torch.matmul(q, k.transpose(-2, -1))
    attn_logits = attn_logits / math.sqrt(d_k)
    if mask is not None:
        attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
    attention = F.softmax(attn_logits, dim=-1)
    values = torch.matmul(attention, v)
    return values, attention


def attention(q, k, v, allowed):
    full = torch.broadcast_to(allowed, q.shape[:-1] + k.shape[-2:-1])
    if not full.any(-1).all():
        raise ValueError("every query needs one allowed key")
    return scaled_dot_product(q, k, v, mask=allowed)
