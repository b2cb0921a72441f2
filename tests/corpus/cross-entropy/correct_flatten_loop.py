"""Correct: (N, K, d) flattened to rows of K, then a plain Python loop over the rows."""

import math

import torch


def cross_entropy(logits, target, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    if reduction != "mean" and reduction != "sum" and reduction != "none":
        raise ValueError("bad reduction: " + str(reduction))
    k = logits.shape[1]
    rows = logits.movedim(1, -1).reshape(-1, k)
    flat_target = target.reshape(-1)
    losses = []
    kept = 0
    for i in range(rows.shape[0]):
        t = int(flat_target[i])
        if t == ignore_index:
            losses.append(rows[i].sum() * 0.0)
            continue
        kept += 1
        row = rows[i]
        biggest = row.max()
        lse = biggest + torch.log(torch.exp(row - biggest).sum())
        log_p = row - lse
        losses.append(-(1 - label_smoothing) * log_p[t] - label_smoothing * log_p.sum() / k)
    loss = torch.stack(losses).reshape(target.shape)
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / kept if kept else total * math.nan
