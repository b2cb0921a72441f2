"""Mistake: weight decay as Adam's L2 penalty, added to the gradient before the moments."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid hyperparameter")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        params = list(params)
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        self.state = {}

    def zero_grad(self):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            beta1, beta2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = p.grad + g["weight_decay"] * p
                s = self.state.setdefault(p, {"step": 0, "m": torch.zeros_like(p),
                                              "v": torch.zeros_like(p)})
                s["step"] += 1
                s["m"] = beta1 * s["m"] + (1 - beta1) * grad
                s["v"] = beta2 * s["v"] + (1 - beta2) * grad * grad
                m_hat = s["m"] / (1 - beta1 ** s["step"])
                v_hat = s["v"] / (1 - beta2 ** s["step"])
                p -= g["lr"] * m_hat / (v_hat.sqrt() + g["eps"])
