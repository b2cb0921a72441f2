"""Mistake: eps inside the square root, sqrt(v_hat + eps), as in RMSprop-style write-ups."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid hyperparameters")
        params = list(params)
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        for group in params:
            merged = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
            merged.update(group)
            merged["params"] = list(merged["params"])
            self.param_groups.append(merged)
        self.state = {}

    def zero_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if id(p) not in self.state:
                    self.state[id(p)] = [0, torch.zeros_like(p), torch.zeros_like(p)]
                entry = self.state[id(p)]
                entry[0] += 1
                t, m, v = entry
                m.mul_(beta1).add_(p.grad * (1 - beta1))
                v.mul_(beta2).add_(p.grad * p.grad * (1 - beta2))
                m_hat = m / (1 - beta1 ** t)
                v_hat = v / (1 - beta2 ** t)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.sub_(group["lr"] * m_hat / torch.sqrt(v_hat + group["eps"]))
