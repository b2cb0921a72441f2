"""Correct: keepdim-free max, the smoothing term as a separate mean, float mask weights."""

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in ["none", "mean", "sum"]:
        raise ValueError(reduction)
    row_max = logits.max(dim=1).values.unsqueeze(1)
    log_norm = row_max + (logits - row_max).exp().sum(1, keepdim=True).log()
    log_p = logits - log_norm
    weight = (target != ignore_index).to(logits.dtype)
    picked = torch.gather(log_p, 1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    nll = -picked * weight
    uniform = -log_p.mean(1) * weight
    eps = label_smoothing
    loss = (1 - eps) * nll + eps * uniform
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / weight.sum()
