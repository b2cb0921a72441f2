"""Mistake: blocked weights zeroed with torch.where after the softmax, rows not renormalised."""
import torch
import torch.nn.functional as F


def attention(q, k, v, allowed):
    scale = 1.0 / (q.shape[-1] ** 0.5)
    attn = torch.einsum("...id,...jd->...ij", q, k) * scale
    attn = F.softmax(attn, dim=-1)
    if not torch.any(allowed, dim=-1).all():
        raise ValueError("cannot attend: every key is masked for some query")
    attn = torch.where(allowed, attn, torch.zeros_like(attn))
    out = torch.einsum("...ij,...jd->...id", attn, v)
    return out, attn
