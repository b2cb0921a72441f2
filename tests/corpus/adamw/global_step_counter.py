"""Mistake: one step counter self.t for the whole optimiser, incremented once per step()."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError("invalid hyperparameters")
        params = list(params)
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for g in groups:
            self.param_groups.append({
                "params": list(g["params"]), "lr": g.get("lr", lr), "betas": g.get("betas", betas),
                "eps": g.get("eps", eps), "weight_decay": g.get("weight_decay", weight_decay)})
        self.t = 0
        self.m = {}
        self.v = {}

    def zero_grad(self):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        self.t += 1
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                key = id(p)
                if key not in self.m:
                    self.m[key] = torch.zeros_like(p)
                    self.v[key] = torch.zeros_like(p)
                self.m[key].mul_(b1).add_((1 - b1) * p.grad)
                self.v[key].mul_(b2).add_((1 - b2) * p.grad ** 2)
                m_hat = self.m[key] / (1 - b1 ** self.t)
                v_hat = self.v[key] / (1 - b2 ** self.t)
                p.mul_(1 - g["lr"] * g["weight_decay"])
                p.add_(-g["lr"] * m_hat / (v_hat.sqrt() + g["eps"]))
