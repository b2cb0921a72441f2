"""Mistake: the new value is assigned through p.data = ..., which gives each parameter new
memory instead of updating it in place (the values are right)."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid hyperparameters")
        params = list(params)
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        base = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.param_groups = [dict(base, **g) for g in params]
        for g in self.param_groups:
            g["params"] = list(g["params"])
        self.state = {}

    def zero_grad(self):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def step(self):
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                s = self.state.setdefault(p, {"t": 0, "m": torch.zeros_like(p.data),
                                              "v": torch.zeros_like(p.data)})
                s["t"] += 1
                grad = p.grad.data
                s["m"] = b1 * s["m"] + (1 - b1) * grad
                s["v"] = b2 * s["v"] + (1 - b2) * grad ** 2
                m_hat = s["m"] / (1 - b1 ** s["t"])
                v_hat = s["v"] / (1 - b2 ** s["t"])
                decayed = p.data * (1 - g["lr"] * g["weight_decay"])
                p.data = decayed - g["lr"] * m_hat / (v_hat.sqrt() + g["eps"])
