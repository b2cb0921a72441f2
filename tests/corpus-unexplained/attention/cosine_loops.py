"""Cosine attention in loops over the flattened batch, with unit vectors made by division."""
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
    outs, all_weights = [], []
    for n in range(qs.shape[0]):
        qu = qs[n] / qs[n].norm(dim=-1, keepdim=True)
        ku = ks[n] / ks[n].norm(dim=-1, keepdim=True)
        rows = []
        for t in range(T):
            if not mask[n, t].any():
                raise ValueError(f"query {t} cannot attend to any key")
            s = (ku @ qu[t]) / math.sqrt(D)
            rows.append(torch.softmax(s.masked_fill(~mask[n, t], float("-inf")), dim=0))
        w = torch.stack(rows)
        all_weights.append(w)
        outs.append(w @ vs[n])
    return (torch.stack(outs).reshape(*lead, T, Dv),
            torch.stack(all_weights).reshape(*lead, T, S))
