"""Correct: textbook masked_softmax helper (-1e6 fill) on scores flattened to 3-D for bmm."""
import math

import torch
from torch import nn


def masked_softmax(X, keep):
    X = X.masked_fill(~keep, -1e6)
    return nn.functional.softmax(X, dim=-1)


def attention(q, k, v, allowed):
    *lead, T, D = q.shape
    S = k.shape[-2]
    keep = allowed.expand(*lead, T, S)
    if not keep.any(-1).all():
        raise ValueError("masked_softmax: a row with nothing to attend to")
    queries = q.reshape(-1, T, D)
    keys = k.reshape(-1, S, D)
    values = v.reshape(-1, S, v.shape[-1])
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(D)
    weights = masked_softmax(scores, keep.reshape(-1, T, S))
    out = torch.bmm(weights, values)
    return out.reshape(*lead, T, v.shape[-1]), weights.reshape(*lead, T, S)
