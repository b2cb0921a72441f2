"""Mistake: mask.unsqueeze(1) copied from a multi-head module, where it added the head axis;
here it breaks broadcasting of a (T, S) or (B, T, S) mask (a shape error), and a (B, 1, T, S)
mask makes masked_fill broadcast the scores to 5-D, so the result has the wrong shape."""
import math

import torch


def attention(query, key, value, mask):
    if not mask.any(-1).all():
        raise ValueError("a query with no allowed key")
    mask = mask.unsqueeze(1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn
