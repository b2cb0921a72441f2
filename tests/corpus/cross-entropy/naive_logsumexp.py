"""Mistake: log(sum(exp(logits))) without subtracting the maximum: inf on large logits."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    lse = torch.log(torch.exp(logits).sum(dim=1, keepdim=True))
    log_probs = logits - lse
    keep = target != ignore_index
    idx = torch.where(keep, target, 0).unsqueeze(1)
    nll = -log_probs.gather(1, idx).squeeze(1)
    if label_smoothing > 0:
        nll = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=1)
    nll = torch.where(keep, nll, torch.zeros_like(nll))
    if reduction == "none":
        return nll
    if reduction == "sum":
        return nll.sum()
    return nll.sum() / keep.sum()
