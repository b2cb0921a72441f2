"""Mistake: .mean() over the (N, K) products of targets and log-probabilities."""

import torch
import torch.nn.functional as F


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    k = logits.shape[1]
    shifted = logits - logits.amax(dim=1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    keep = target != ignore_index
    hot = F.one_hot(torch.where(keep, target, 0), k).movedim(-1, 1).to(logits.dtype)
    smoothed = hot * (1 - label_smoothing) + label_smoothing / k
    products = -(smoothed * log_probs) * keep.unsqueeze(1)
    if reduction == "none":
        return products.sum(dim=1)
    if reduction == "sum":
        return products.sum()
    return products.sum() / (keep.sum() * k)
