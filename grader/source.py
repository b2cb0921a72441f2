"""Checks on the submitted files before anything runs: size, encoding, syntax, forbidden names.

Parsing is not executing: ``ast.parse`` reads the text and runs none of it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from grader.parsing import parse_python
from sandbox.runner.guards import underlying_kernels

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
        parse_python(text, name)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        pointer = f"\n    {line}\n    {' ' * max((exc.offset or 1) - 1, 0)}^" if line else ""
        return SourceProblem(
            "syntax-error",
            f"`{name}` line {exc.lineno}, column {exc.offset}: {exc.msg}.{pointer}")
    except ValueError as exc:  # e.g. null bytes
        return SourceProblem("syntax-error", f"`{name}` cannot be parsed: {exc}.")
    return None


def forbidden_references(files: Mapping[str, bytes],
                         forbidden_apis: tuple[str, ...]) -> tuple[str, ...]:
    """The forbidden torch APIs the code refers to, by what its names resolve to.

    Names are followed through imports and aliases (``import torch.nn.functional as F``,
    ``from torch.nn import MultiheadAttention as MHA``, ``attend = F.scaled_dot_product_attention``,
    ``getattr(F, "...")``), so a submission's own ``def scaled_dot_product_attention`` or
    ``class MultiheadAttention`` is not a reference, and neither is prose. A reference is not a
    call: the run-time trap says which calls reached the API; this list is for the instructor.
    """
    wanted = {api.removesuffix(".forward"): api for api in forbidden_apis}
    kernels: dict[str, str] = {}
    for api in forbidden_apis:  # a kernel is reported as the first API listed over it
        for family in underlying_kernels(api):
            for kernel in family:
                kernels.setdefault(kernel, api)
    found: set[str] = set()
    for content in files.values():
        tree = parse_python(content.decode("utf-8"))
        resolver = _Resolver(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute | ast.Name | ast.Call):
                path = resolver.resolve(node)
                if path is None:
                    continue
                path = path.replace("torch.nn.modules.activation.", "torch.nn.")
                if path.rsplit(".", 1)[-1] in kernels:
                    found.add(kernels[path.rsplit(".", 1)[-1]])
                    continue
                for prefix, api in wanted.items():
                    if path == prefix or path.startswith(prefix + "."):
                        found.add(api)
        for module, names in resolver.imported_names():
            for prefix, api in wanted.items():
                if any(f"{module}.{name}" == prefix for name in names):
                    found.add(api)
    return tuple(sorted(found))


class _Resolver:
    """What the names of one module refer to in torch, as far as the text tells (flow-insensitive:
    a name bound both by a torch import and by the submission itself is the submission's)."""

    def __init__(self, tree: ast.Module) -> None:
        self.bindings: dict[str, str] = {}
        self._from: list[tuple[str, list[str]]] = []
        own: set[str] = set()
        aliases: list[tuple[str, ast.expr]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.bindings[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".", 1)[0]
                        self.bindings[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self._from.append((node.module, [a.name for a in node.names]))
                for alias in node.names:
                    if alias.name != "*":
                        self.bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                aliases.append((node.targets[0].id, node.value))
            elif isinstance(node, ast.arg):
                own.add(node.arg)
        for name in own:
            self.bindings.pop(name, None)
        self._star = [module for module, names in self._from if "*" in names]
        self._own = own
        for _ in range(3):  # aliases of aliases, a few levels deep
            for name, value in aliases:
                path = self.resolve(value)
                if path is not None and name not in own:
                    self.bindings[name] = path

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted torch path an expression refers to, or None."""
        if isinstance(node, ast.Name):
            path = self.bindings.get(node.id)
            if path is None and self._star and node.id not in self._own:
                path = f"{self._star[0]}.{node.id}"
            return path if path is not None and path.split(".", 1)[0] == "torch" else None
        if isinstance(node, ast.Attribute):
            owner = self.resolve(node.value)
            return f"{owner}.{node.attr}" if owner is not None else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "getattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            owner = self.resolve(node.args[0])
            return f"{owner}.{node.args[1].value}" if owner is not None else None
        return None

    def imported_names(self) -> list[tuple[str, list[str]]]:
        return self._from
