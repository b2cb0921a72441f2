"""Correct: the annotated-Transformer habit, masked_fill(mask == 0, -1e9) then .softmax(dim=-1).

-1e9 underflows to exactly 0 weight; the row check is the glue the course contract asks for.
"""
import math

import torch


def attention(query, key, value, mask):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if (mask == 0).all(dim=-1).any():
        raise ValueError("a query has no key it may attend to")
    scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn
