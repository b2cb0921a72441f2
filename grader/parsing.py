"""Parsing Python text from several threads at once (torch-free: the web parses too)."""

from __future__ import annotations

import ast
import threading

# CPython 3.11 keeps the counter that bounds the depth of AST construction in one place per
# interpreter, not per thread: two threads parsing at once can leave it wrong and the next parse
# fails with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).
# The grader parses from several threads (concurrent gradings), so every parse goes through here.
_PARSING = threading.Lock()


def parse_python(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, one thread at a time."""
    with _PARSING:
        return ast.parse(text, filename=filename)
