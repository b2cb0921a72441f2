"""The readable report of a results document, for terminals. Pure."""

from __future__ import annotations

import textwrap
from typing import Any


def render_report(document: dict[str, Any]) -> str:
    """Score, the per-check table and each diagnosis with its hint."""
    lines = [f"Score: {document['score']:g} / {document['max_score']:g}", ""]
    width = max((len(test["name"]) for test in document["tests"]), default=10)
    for test in document["tests"]:
        mark = "PASS" if test["status"] == "passed" else "FAIL"
        score = f"{test['score']:g}/{test['max_score']:g}"
        tags = f"  [{', '.join(test['tags'])}]" if test["tags"] else ""
        lines.append(f"  {mark}  {test['number']:>5}  {test['name']:<{width}}  {score:>7}{tags}")
    if document["diagnoses"]:
        lines += ["", "What went wrong:"]
        for diagnosis in document["diagnoses"]:
            lines.append(f"  [{diagnosis['code']}] (checks {', '.join(diagnosis['tests']) or '-'})")
            lines += _wrapped(diagnosis["message"], "    ")
            lines += _wrapped("Hint: " + diagnosis["hint"], "    ")
    meta = document.get("autograde", {})
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
