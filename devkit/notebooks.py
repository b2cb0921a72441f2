"""Notebooks for the tests: built from cells, and the causal-leak module split the way a
student's notebook is (markdown, a shell escape, imports, the class, a demo that trains)."""

from __future__ import annotations

import json
from typing import Any

from devkit.paths import REPO


def notebook(*cells: tuple[str, str], version: int = 4) -> bytes:
    """An nbformat 4 notebook of (kind, source) cells, with an output on each code cell."""
    body = []
    for index, (kind, source) in enumerate(cells):
        cell: dict[str, Any] = {"cell_type": kind, "id": f"cell-{index}", "metadata": {},
                                "source": source}
        if kind == "code":
            cell.update(execution_count=index, outputs=[
                {"output_type": "stream", "name": "stdout", "text": "printed\n"}])
        body.append(cell)
    return json.dumps({"nbformat": version, "nbformat_minor": 5, "metadata": {},
                       "cells": body}, indent=1).encode()


def _causal_leak_class() -> str:
    source = (REPO / "examples" / "mha_causal_leak.py").read_text()
    return source[source.index("class ManualMultiHeadAttention"):]


LEAK_CLASS_CELL = 4
"""The causal-leak notebook's cell that defines ``ManualMultiHeadAttention`` (its first line)."""


def causal_leak_notebook() -> bytes:
    return notebook(
        ("markdown", "# Multi-head attention\nMy lab."),
        ("code", "!pip install torch\nimport math\n\nimport torch\nfrom torch import nn"),
        ("markdown", "## The module"),
        ("code", _causal_leak_class()),
        ("code", "%matplotlib inline\nmodel = ManualMultiHeadAttention(8, 2)\n"
                 "for step in range(1000):\n    model(torch.randn(2, 3, 8))\nmodel"),
    )
