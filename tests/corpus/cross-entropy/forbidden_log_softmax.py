"""Mistake: calls torch.nn.functional.log_softmax, which the lab forbids (values are right)."""

import torch
import torch.nn.functional as F


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    log_probs = F.log_softmax(logits, dim=1)
    keep = target != ignore_index
    nll = -log_probs.gather(1, torch.where(keep, target, 0).unsqueeze(1)).squeeze(1)
    loss = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=1)
    loss = torch.where(keep, loss, 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / keep.sum()
