"""Imports go one way: no module of ours imports one that imports it back, and no folder of ours
imports one that imports it back, directly or round a longer loop, at the top, inside a function
or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from collections import deque
from itertools import pairwise
from pathlib import Path

from devkit.paths import REPO

PACKAGES = ("service", "grader", "assignments", "sandbox", "autograde", "devkit")


def _modules() -> dict[str, Path]:
    found = {}
    for path in (path for package in PACKAGES for path in (REPO / package).rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            submodules = {f"{base}.{alias.name}" for alias in node.names}
            named.update(submodules)
            if not submodules <= modules.keys():  # `from package import module` needs only it
                named.add(base)
    return {module for module in named if module in modules and module != name}


def _loops(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                loops.append(group)

    for module in graph:
        if module not in index:
            visit(module)
    return loops


def test_no_module_imports_one_that_imports_it_back() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    loops = [sorted(group) for group in _loops(graph)]
    assert loops == [], f"import loops: {loops}"


def _folder(path: Path) -> str:
    """The folder a module belongs to (a package's ``__init__`` belongs to the package)."""
    return path.parent.relative_to(REPO).as_posix()


def _round_trip(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest way from the group's first member back to itself, within the group."""
    start = min(group)
    paths = {start: [start]}
    waiting = deque([start])
    while waiting:
        here = waiting.popleft()
        for there in sorted(graph[here] & group):
            if there == start:
                return [*paths[here], start]
            if there not in paths:
                paths[there] = [*paths[here], there]
                waiting.append(there)
    raise ValueError(f"no way back to {start} within {sorted(group)}")


def _folder_loops(modules: dict[str, Path]) -> list[str]:
    """Each loop among folders, named as a round trip with one import that makes each step."""
    why: dict[tuple[str, str], str] = {}
    graph: dict[str, set[str]] = {_folder(path): set() for path in modules.values()}
    for name in sorted(modules):
        for imported in sorted(_imports(name, modules[name], modules)):
            step = (_folder(modules[name]), _folder(modules[imported]))
            if step[0] != step[1]:
                graph[step[0]].add(step[1])
                why.setdefault(step, f"{name} imports {imported}")
    named = []
    for group in sorted(_loops(graph), key=min):
        trip = _round_trip(graph, group)
        steps = "".join(f"\n  -> {there}  ({why[(here, there)]})"
                        for here, there in pairwise(trip))
        named.append(f"{trip[0]}{steps}\n  (the loop's folders: {', '.join(sorted(group))})")
    return named


def test_a_folder_loop_is_named_as_a_round_trip() -> None:
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a", "b"}, "d": set()}
    assert [sorted(group) for group in _loops(graph)] == [["a", "b", "c"]]
    assert _round_trip(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]
    assert _round_trip(graph, {"b", "c"}) == ["b", "c", "b"]


def test_no_folder_imports_one_that_imports_it_back() -> None:
    """Each folder is one node, apart from its subfolders: ``service/`` holds the wiring, so
    nothing below it may import from it."""
    loops = _folder_loops(_modules())
    assert loops == [], "import loops between folders:\n" + "\n".join(loops)


# What each package may not import, at the top or in a function: the layers below the service
# nothing above them, the kits of tests and benchmarks neither of the two.
FORBIDDEN_BELOW = {
    "grader": ("service", "flask", "sqlalchemy", "celery"),
    "assignments": ("service", "grader", "flask", "sqlalchemy", "celery"),
    "sandbox": ("service", "grader", "assignments", "flask", "sqlalchemy", "celery"),
    "devkit": ("tests", "benchmarks"),
}


def _top_level_imports(path: Path) -> set[str]:
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            named.add(node.module.partition(".")[0])
    return named


def test_the_layers_below_the_service_import_nothing_above_them() -> None:
    found = {}
    for package, forbidden in FORBIDDEN_BELOW.items():
        for path in sorted((REPO / package).rglob("*.py")):
            if (wrong := _top_level_imports(path) & set(forbidden)):
                found[str(path.relative_to(REPO))] = sorted(wrong)
    assert found == {}
