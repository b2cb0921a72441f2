"""Correct: the smoothed target distribution built from one_hot, moved to the class axis."""

import torch
import torch.nn.functional as F


def _log_softmax(x):
    m = x.max(dim=1, keepdim=True).values
    z = x - m
    return z - torch.log(torch.sum(torch.exp(z), dim=1, keepdim=True))


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction not in {"mean", "sum", "none"}:
        raise ValueError("reduction must be 'mean', 'sum' or 'none'")
    num_classes = logits.shape[1]
    valid = target != ignore_index
    classes = target.masked_fill(~valid, 0)
    one_hot = F.one_hot(classes, num_classes).to(logits.dtype)
    one_hot = torch.movedim(one_hot, -1, 1)
    q = one_hot * (1.0 - label_smoothing) + label_smoothing / num_classes
    per_item = -(q * _log_softmax(logits)).sum(dim=1)
    per_item = torch.where(valid, per_item, torch.zeros_like(per_item))
    if reduction == "sum":
        return per_item.sum()
    if reduction == "mean":
        return per_item.sum() / valid.sum()
    return per_item
