"""Mistake: softmax done in NumPy and converted back, cutting the autograd graph."""
import math

import numpy as np
import torch


def np_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("fully masked row")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, -np.inf)
    weights = torch.from_numpy(np_softmax(scores.detach().numpy()))
    return weights @ v, weights
