"""Mistake: the ignored targets are masked, but the mean divides by every target."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    shifted = logits - logits.amax(dim=1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    mask = target != ignore_index
    nll = -log_probs.gather(1, torch.where(mask, target, 0).unsqueeze(1)).squeeze(1)
    loss = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=1)
    loss = loss * mask
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean()
