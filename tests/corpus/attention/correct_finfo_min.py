"""Correct: blocked scores filled with the dtype's most negative finite value."""
import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    head_dim = q.size(-1)
    attn = torch.matmul(q, k.mT) * (1.0 / head_dim ** 0.5)
    mask = allowed.expand_as(attn) if allowed.dim() <= attn.dim() else allowed
    has_key = mask.sum(dim=-1) > 0
    if not bool(has_key.all()):
        raise ValueError("found a query row where every key is masked out")
    attn = attn.masked_fill(mask == 0, torch.finfo(attn.dtype).min)
    attn = F.softmax(attn, dim=-1)
    out = torch.matmul(attn, v)
    return out, attn
