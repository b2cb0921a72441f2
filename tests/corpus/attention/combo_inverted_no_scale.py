"""Two mistakes: mask read as True = blocked, and the scores are never scaled."""
import torch


def attention(q, k, v, allowed):
    padding = allowed
    if padding.all(dim=-1).any():
        raise ValueError("everything is padding for some query")
    scores = torch.matmul(q, k.transpose(-2, -1))
    scores = scores.masked_fill(padding, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v), probs
