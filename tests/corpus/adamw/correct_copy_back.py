"""Correct: each new value computed out of place, written back with p.copy_; state per index."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid AdamW hyperparameters")
        params = list(params)
        if params and not isinstance(params[0], dict):
            params = [{"params": params}]
        self.groups = []
        for group in params:
            self.groups.append({
                "params": list(group["params"]),
                "lr": group.get("lr", lr),
                "betas": group.get("betas", betas),
                "eps": group.get("eps", eps),
                "weight_decay": group.get("weight_decay", weight_decay),
            })
        self.moments = [[None] * len(g["params"]) for g in self.groups]
        self.counts = [[0] * len(g["params"]) for g in self.groups]

    def zero_grad(self):
        for g in self.groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        for gi, g in enumerate(self.groups):
            beta1, beta2 = g["betas"]
            for pi, p in enumerate(g["params"]):
                if p.grad is None:
                    continue
                if self.moments[gi][pi] is None:
                    self.moments[gi][pi] = (torch.zeros_like(p), torch.zeros_like(p))
                m, v = self.moments[gi][pi]
                m = beta1 * m + (1 - beta1) * p.grad
                v = beta2 * v + (1 - beta2) * p.grad ** 2
                self.moments[gi][pi] = (m, v)
                self.counts[gi][pi] += 1
                t = self.counts[gi][pi]
                new = p * (1 - g["lr"] * g["weight_decay"])
                new = new - g["lr"] * (m / (1 - beta1 ** t)) / (torch.sqrt(v / (1 - beta2 ** t)) + g["eps"])
                p.copy_(new)
