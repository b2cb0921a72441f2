"""Correct: split into small helpers; additive -inf bias tensor and exp/sum softmax."""
import math

import torch


def _check_rows(allowed):
    empty = ~allowed.any(dim=-1)
    if empty.any():
        raise ValueError("attention mask leaves a query with no key to attend to")


def _additive_bias(allowed, like):
    bias = torch.zeros(allowed.shape, dtype=like.dtype)
    return bias.masked_fill(allowed.logical_not(), -math.inf)


def _softmax(x):
    x = x - x.max(dim=-1, keepdim=True).values
    x = x.exp()
    return x / x.sum(dim=-1, keepdim=True)


def attention(q, k, v, allowed):
    _check_rows(allowed)
    scores = q.matmul(k.transpose(-2, -1)).div(math.sqrt(q.shape[-1]))
    weights = _softmax(scores + _additive_bias(allowed, scores))
    return weights.matmul(v), weights
