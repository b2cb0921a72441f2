"""Correct: explicit Python loops over the flattened batch and over query rows."""
import math

import torch


def attention(q, k, v, allowed):
    T, D = q.shape[-2], q.shape[-1]
    S, Dv = k.shape[-2], v.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], allowed.shape[:-2])
    qs = q.expand(*lead, T, D).reshape(-1, T, D)
    ks = k.expand(*lead, S, D).reshape(-1, S, D)
    vs = v.expand(*lead, S, Dv).reshape(-1, S, Dv)
    mask = allowed.expand(*lead, T, S).reshape(-1, T, S)

    outputs = []
    all_weights = []
    for n in range(qs.shape[0]):
        rows_out = []
        rows_w = []
        for t in range(T):
            keep = mask[n, t]
            if not keep.any():
                raise ValueError(f"query {t} cannot attend to any key")
            s = (ks[n] @ qs[n, t]) / math.sqrt(D)
            s = s.masked_fill(~keep, float("-inf"))
            w = torch.softmax(s, dim=0)
            rows_w.append(w)
            rows_out.append(w @ vs[n])
        outputs.append(torch.stack(rows_out))
        all_weights.append(torch.stack(rows_w))
    out = torch.stack(outputs).reshape(*lead, T, Dv)
    weights = torch.stack(all_weights).reshape(*lead, T, S)
    return out, weights
