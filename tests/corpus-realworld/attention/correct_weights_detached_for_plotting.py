"""Correct: the weights are returned detached (kept for plotting), the output keeps its graph."""
import math

import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("a query has no allowed key")
    scores = q.matmul(k.transpose(-2, -1)).div(math.sqrt(q.size(-1)))
    p_attn = scores.masked_fill(allowed.logical_not(), float("-inf")).softmax(-1)
    output = p_attn.matmul(v)
    return output, p_attn.detach()
