"""Mistake: custom autograd softmax whose backward drops the -y*sum(g*y) term."""
import math

import torch


class Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_tensors
        return grad_out * y


def attention(q, k, v, allowed):
    if not allowed.any(-1).all():
        raise ValueError("a query row has no allowed key")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = Softmax.apply(scores)
    return weights @ v, weights
