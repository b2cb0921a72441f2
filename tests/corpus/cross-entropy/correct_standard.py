"""Correct: shift by each row's maximum, log-sum-exp, gather the target, mask the ignored."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}")
    shifted = logits - logits.amax(dim=1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -log_probs.gather(1, safe.unsqueeze(1)).squeeze(1)
    smooth = -log_probs.mean(dim=1)
    loss = (1 - label_smoothing) * nll + label_smoothing * smooth
    loss = loss * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / keep.sum()
