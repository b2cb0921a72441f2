"""Checks on the submitted files before anything runs: size, encoding, syntax, forbidden names.

Parsing is not executing: ``ast.parse`` reads the text and runs none of it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

MAX_FILE_BYTES = 1 << 20
MAX_FILES = 16


@dataclass(frozen=True)
class SourceProblem:
    """Why a submission cannot be run at all."""

    code: str
    message: str


def normalise_files(files: Mapping[str, bytes], entry: str) -> dict[str, bytes]:
    """A lone file is the entry file whatever it was called; names are reduced to base names."""
    if len(files) == 1:
        return {entry: next(iter(files.values()))}
    return {name.rsplit("/", 1)[-1]: content for name, content in files.items()}


def check_sources(files: Mapping[str, bytes], entry: str) -> SourceProblem | None:
    """The first problem that keeps the submission from running, or None."""
    if len(files) > MAX_FILES:
        return SourceProblem("interface-error", f"Submit at most {MAX_FILES} files.")
    if entry not in files:
        return SourceProblem("interface-error",
                             f"The submission has no `{entry}`; submit your work in that file.")
    for name, content in sorted(files.items()):
        if not name.endswith(".py"):
            return SourceProblem("interface-error", f"`{name}` is not a Python file (.py).")
        if len(content) > MAX_FILE_BYTES:
            return SourceProblem(
                "interface-error",
                f"`{name}` is {len(content):,} bytes; files may be at most {MAX_FILE_BYTES:,}.")
        if not content.strip():
            return SourceProblem("interface-error", f"`{name}` is empty.")
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            return SourceProblem(
                "syntax-error",
                f"`{name}` is not UTF-8 text (byte 0x{content[exc.start]:02x} at offset "
                f"{exc.start}); save it as a plain-text Python file.")
        problem = _syntax_problem(name, text)
        if problem:
            return problem
    return None


def _syntax_problem(name: str, text: str) -> SourceProblem | None:
    try:
        ast.parse(text, filename=name)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        pointer = f"\n    {line}\n    {' ' * max((exc.offset or 1) - 1, 0)}^" if line else ""
        return SourceProblem(
            "syntax-error",
            f"`{name}` line {exc.lineno}, column {exc.offset}: {exc.msg}.{pointer}")
    except ValueError as exc:  # e.g. null bytes
        return SourceProblem("syntax-error", f"`{name}` cannot be parsed: {exc}.")
    return None


def forbidden_names(files: Mapping[str, bytes], forbidden_apis: tuple[str, ...]) -> tuple[str, ...]:
    """Forbidden APIs named anywhere in the code: attributes, names, imports or strings."""
    wanted = {api.removesuffix(".forward").rsplit(".", 1)[-1]: api for api in forbidden_apis}
    found: set[str] = set()
    for content in files.values():
        tree = ast.parse(content.decode("utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue  # prose about an API is not a use of it
            for word in _words(node):
                for short, api in wanted.items():
                    if short in word:
                        found.add(api)
    return tuple(sorted(found))


def _docstrings(tree: ast.Module) -> set[int]:
    """Ids of the string nodes that are docstrings (of the module, classes, functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _words(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []
