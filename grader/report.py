"""The readable report of a results document, for terminals. Pure."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from grader.pictures import SHADES, differing, text_grid
from grader.training_curves import read_section


def render_report(document: dict[str, Any], *, plots: bool = True) -> str:
    """Score, the per-check table, a line per training run (where its loss started and ended,
    the reference's end, held-out accuracy) and each diagnosis with its hint (and, with
    ``plots``, the attention map the diagnosis cites, in shaded characters)."""
    lines = [f"Score: {document['score']:g} / {document['max_score']:g}", ""]
    width = max((len(test["name"]) for test in document["tests"]), default=10)
    for test in document["tests"]:
        mark = "PASS" if test["status"] == "passed" else "FAIL"
        score = f"{test['score']:g}/{test['max_score']:g}"
        tags = f"  [{', '.join(test['tags'])}]" if test["tags"] else ""
        lines.append(f"  {mark}  {test['number']:>5}  {test['name']:<{width}}  {score:>7}{tags}")
    trainings = read_section(document.get("training"))
    if trainings:
        lines += ["", *(curves.summary_line() for curves in trainings)]
    if document["diagnoses"]:
        lines += ["", "What went wrong:"]
        for diagnosis in document["diagnoses"]:
            lines.append(f"  [{diagnosis['code']}] (checks {', '.join(diagnosis['tests']) or '-'})")
            lines += _wrapped(diagnosis["message"], "    ")
            lines += _wrapped("Hint: " + diagnosis["hint"], "    ")
            if plots:
                lines += attention_map_lines(diagnosis.get("attention_map"), "    ")
    meta = document.get("autograde", {})
    notebook = meta.get("notebook")
    if isinstance(notebook, Mapping) and notebook.get("notes"):
        lines += ["", "Left out of your notebook (never run by the grader):",
                  *(line for note in notebook["notes"] for line in _wrapped(str(note), "  "))]
    if meta.get("stdout"):
        lines += ["", "Your program printed:", *_wrapped(meta["stdout"][:2000], "    | ")]
    if meta:
        lines += ["", f"(seed {meta.get('seed')}, {meta.get('backend')} sandbox, "
                      f"{document['execution_time']:.2f} s)"]
    return "\n".join(lines)


def _wrapped(text: str, indent: str) -> list[str]:
    out: list[str] = []
    for paragraph in text.splitlines() or [""]:
        out += textwrap.wrap(paragraph, 96, initial_indent=indent, subsequent_indent=indent,
                             replace_whitespace=False) or [indent.rstrip()]
    return out


def attention_map_lines(picture: Any, indent: str) -> list[str]:
    """A diagnosis's attention map as text: each panel's two grids side by side, a query per
    line; nothing for a map this code cannot read."""
    if not isinstance(picture, Mapping) or picture.get("version") != 1:
        return []
    panels = [p for p in picture.get("panels") or [] if _readable(p)]
    if not panels:
        return []
    yours = "reproduced" if picture.get("source") == "reproduced" else "yours"
    lines = _wrapped(f"Attention weights on {picture.get('input', 'the probe')} (a query per "
                     f"line, a key per column; shades {SHADES[1]}{SHADES[2]}{SHADES[3]}"
                     f"{SHADES[4]} from 0 to 1, · blocked key, ? not a number)"
                     + (": your module returns only its output, so the left grids are those of "
                        "the known mistake that gives exactly your outputs" if yours ==
                        "reproduced" else "") + ":", indent)
    for panel in panels:
        student, expected = panel["student"], panel["expected"]
        left = text_grid(student, blocked=panel["blocked"])
        right = text_grid(expected, blocked=panel["blocked"])
        width = max(len(yours), max((len(row) for row in left), default=0))
        head = panel.get("head")
        title = f"head {head}: " if isinstance(head, int) else ""
        lines.append(f"{indent}  {title + yours:<{width + len(title)}}   expected")
        marks = differing(student, expected)
        for row, (a, b) in enumerate(zip(left, right, strict=False)):
            count = sum(marks[row]) if row < len(marks) else 0
            note = f"   <- {count} differ" if count else ""
            lines.append(f"{indent}  {' ' * len(title)}|{a:<{width}}|  |{b}|{note}")
    return lines


def _readable(panel: Any) -> bool:
    if not isinstance(panel, Mapping):
        return False
    grids = [panel.get(key) for key in ("student", "expected", "blocked")]
    return all(isinstance(g, list) and len(g) <= 32 and all(
        isinstance(row, list) and len(row) <= 32 for row in g) for g in grids) and all(
        isinstance(v, int | float) or v is None for key in ("student", "expected")
        for row in panel[key] for v in row)
