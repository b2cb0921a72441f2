"""Correct attention that tries to create a socket of every family that could leave the sandbox:
IP, AF_VSOCK (a virtual machine's host), netlink, packet; any it gets leaves a marker."""
import math
import os
import socket

import torch

_MARKERS = "/tmp/autograde-hostile-markers"
_FAMILIES = [("inet", socket.AF_INET, socket.SOCK_STREAM),
             ("inet6", socket.AF_INET6, socket.SOCK_DGRAM),
             ("vsock", 40, socket.SOCK_STREAM),
             ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
             ("packet", socket.AF_PACKET, socket.SOCK_RAW)]

for _name, _family, _kind in _FAMILIES:
    try:
        socket.socket(_family, _kind).close()
    except OSError:
        continue
    os.makedirs(_MARKERS, exist_ok=True)
    with open(os.path.join(_MARKERS, f"socket-{_name}"), "w") as _handle:
        _handle.write("created\n")


def attention(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
