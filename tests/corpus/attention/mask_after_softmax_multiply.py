"""Mistake: softmax over every key first, then weights multiplied by the mask (no renormalising)."""
import math

import torch


def attention(q, k, v, allowed):
    if (~allowed).all(dim=-1).any():
        raise ValueError("query row without any allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    weights = weights * allowed
    return weights @ v, weights
