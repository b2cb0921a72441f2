"""Mistake: q *= scaling in place (fine on a projection's output, here it is the caller's q)."""
import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("no allowed key in some row")
    scaling = q.size(-1) ** -0.5
    q *= scaling
    attn_weights = torch.matmul(q, k.transpose(-2, -1))
    attn_weights = attn_weights.masked_fill(~allowed, float("-inf"))
    attn_probs = torch.softmax(attn_weights, dim=-1)
    return torch.matmul(attn_probs, v), attn_probs
