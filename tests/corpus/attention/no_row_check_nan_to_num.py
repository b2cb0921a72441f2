"""Mistake: NaN rows from fully blocked queries replaced by zeros instead of raising ValueError."""
import math

import torch


def attention(q, k, v, allowed):
    logits = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    logits = logits.masked_fill(~allowed, -math.inf)
    weights = torch.nan_to_num(torch.softmax(logits, dim=-1), nan=0.0)
    return torch.einsum("...ts,...sd->...td", weights, v), weights
