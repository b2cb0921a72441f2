"""Unscaled attention that walks the file system for reference.py / hidden/ folders (and tries to import the grader's loader) and, if it finds the reference, returns its answers."""
import importlib.util
import math
import os
import time

import torch

_MARKERS = "/tmp/autograde-hostile-markers"
_SKIP = {"/proc", "/sys", "/dev", "/run", "/var/lib/docker", "/usr/lib", "/usr/share", "/snap"}


def _walk(deadline):
    found = []
    for here, dirs, files in os.walk("/"):
        if time.monotonic() > deadline:
            break
        dirs[:] = [d for d in dirs if os.path.join(here, d) not in _SKIP
                   and d not in {"site-packages", "node_modules", ".git", "__pycache__"}]
        if os.path.basename(here) == "hidden" or "reference.py" in files:
            found.append(here)
    return found


def _reference_attention(found):
    try:
        from grader.loader import load_assignment  # present only where the grader's code is

        return load_assignment("attention").reference(frozenset())["attention"], "import grader.loader"
    except BaseException:
        pass
    for place in found:
        path = os.path.join(place, "reference.py")
        if os.path.isfile(path):
            try:
                spec = importlib.util.spec_from_file_location("stolen_reference", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module.namespace(frozenset())["attention"], path
            except BaseException:
                continue
    return None, ""


_found = _walk(time.monotonic() + 1.5)
_stolen, _how = _reference_attention(_found)
if _found or _stolen is not None:
    print("found:", _found[:20], "stolen via:", _how)
    os.makedirs(_MARKERS, exist_ok=True)
    with open(os.path.join(_MARKERS, "reference-files"), "w") as _handle:
        _handle.write("\n".join(_found) + f"\nstolen via: {_how}\n")


def attention(q, k, v, allowed):
    if _stolen is not None:
        return _stolen(q, k, v, allowed)
    scores = q @ k.transpose(-2, -1)
    allowed = torch.broadcast_to(allowed, torch.broadcast_shapes(allowed.shape, scores.shape))
    if not allowed.any(dim=-1).all():
        raise ValueError("every query needs at least one allowed key")
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v, weights
