"""Mistake: masks the targets equal to -100, whatever ignore_index is."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    shifted = logits - logits.amax(dim=1, keepdim=True)
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    valid = target != -100
    nll = -log_probs.gather(1, torch.where(valid, target, 0).unsqueeze(1)).squeeze(1)
    loss = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=1)
    loss = torch.where(valid, loss, 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / valid.sum()
