"""Ignores everything and returns q."""
import torch


def attention(q, k, v, allowed):
    w = torch.ones(q.shape[:-1] + k.shape[-2:-1], dtype=q.dtype) / k.shape[-2]
    return q, w
