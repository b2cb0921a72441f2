"""Mistake: blocked weights zeroed with masked_fill(..., 0.0) after softmax, never renormalised."""
import math

import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("no allowed key")
    attn = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    attn = attn.masked_fill(allowed == False, 0.0)  # noqa: E712
    return attn @ v, attn
