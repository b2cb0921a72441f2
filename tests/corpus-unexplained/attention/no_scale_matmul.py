"""Mistake: raw dot products, never divided by sqrt(D)."""
import torch


def attention(q, k, v, allowed):
    if not allowed.any(dim=-1).all():
        raise ValueError("all keys blocked for some query")
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(-1)
    return weights @ v, weights
