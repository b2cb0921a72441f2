"""Correct: a plain class, groups normalised by hand, state in a dict keyed by id(p), lerp_."""

import torch


class AdamW:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        params = list(params)
        if len(params) > 0 and isinstance(params[0], dict):
            groups = params
        else:
            groups = [{"params": params}]
        self.param_groups = []
        for g in groups:
            full = dict(defaults)
            full.update(g)
            full["params"] = list(g["params"])
            self.param_groups.append(full)
        self.state = {}

    def zero_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def step(self):
        with torch.no_grad():
            for group in self.param_groups:
                lr = group["lr"]
                b1, b2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    s = self.state.setdefault(id(p), {"t": 0, "m": torch.zeros_like(p),
                                                      "v": torch.zeros_like(p)})
                    s["t"] += 1
                    g = p.grad
                    s["m"].lerp_(g, 1 - b1)
                    s["v"].mul_(b2).add_((1 - b2) * g * g)
                    m_hat = s["m"] / (1 - b1 ** s["t"])
                    v_hat = s["v"] / (1 - b2 ** s["t"])
                    p.mul_(1 - lr * group["weight_decay"])
                    p.sub_(lr * m_hat / (v_hat.sqrt() + group["eps"]))
