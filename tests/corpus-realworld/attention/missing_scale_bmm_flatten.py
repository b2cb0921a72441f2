"""Mistake: raw bmm logits on flattened batches, never divided by sqrt(d)."""
import torch


def attention(q, k, v, allowed):
    T, D = q.shape[-2:]
    S = k.shape[-2]
    lead = q.shape[:-2]
    mask = allowed.expand(*lead, T, S).reshape(-1, T, S)
    if not mask.any(-1).all():
        raise ValueError("a row with nothing allowed")
    logits = torch.bmm(q.reshape(-1, T, D), k.reshape(-1, S, D).transpose(1, 2))
    logits = logits.masked_fill(~mask, float("-inf"))
    attn = torch.softmax(logits, dim=2)
    out = torch.bmm(attn, v.reshape(-1, S, v.shape[-1]))
    return out.reshape(*lead, T, -1), attn.reshape(*lead, T, S)
