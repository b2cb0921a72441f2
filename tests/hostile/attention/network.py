"""Correct attention that tries to reach Redis, PostgreSQL, the Docker bridge gateway and service names; a connection leaves a marker."""
import math
import os
import socket

import torch

_MARKERS = "/tmp/autograde-hostile-markers"
_TARGETS = [("127.0.0.1", 6379), ("127.0.0.1", 5432), ("172.17.0.1", 6379),
            ("172.17.0.1", 5432), ("172.17.0.1", 2375), ("redis", 6379), ("postgres", 5432),
            ("db", 5432), ("host.docker.internal", 6379)]

for _host, _port in _TARGETS:
    try:
        with socket.create_connection((_host, _port), timeout=0.3):
            os.makedirs(_MARKERS, exist_ok=True)
            with open(os.path.join(_MARKERS, f"network-{_host}-{_port}"), "w") as _handle:
                _handle.write("connected\n")
            print(f"connected to {_host}:{_port}")
    except OSError:
        pass


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
