"""Mistake: label smoothing puts 1 - eps on the target and eps / (K - 1) on the others."""

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
    smoothed = hot * (1 - label_smoothing) + (1 - hot) * label_smoothing / (k - 1)
    loss = -(smoothed * log_probs).sum(dim=1) * keep
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / keep.sum()
