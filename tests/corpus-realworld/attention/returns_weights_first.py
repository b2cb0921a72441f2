"""Mistake: returns (weights, output), the order some libraries use, instead of (output, weights)."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("fully masked query")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    attn = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return attn, attn @ v
