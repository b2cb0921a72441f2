"""Mistake: subtracts each row's maximum from the caller's logits in place."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction)
    logits -= logits.max(dim=1, keepdim=True).values
    log_probs = logits - logits.exp().sum(dim=1, keepdim=True).log()
    keep = target != ignore_index
    nll = -log_probs.gather(1, torch.where(keep, target, 0).unsqueeze(1)).squeeze(1)
    loss = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=1)
    loss = torch.where(keep, loss, 0.0)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / keep.sum()
