"""Notebook submissions: a ``.ipynb`` read as text and its code cells assembled into the entry
module, with the map from the module's lines back to the cells. Pure; nothing here executes.

The rule a notebook is assembled by (docs/students/submitting.md states it for students):

- cells are numbered as the notebook shows them, from 1, markdown cells included; code cells
  are taken in order;
- lines that are shell escapes or IPython magics (``!pip ...``, ``%time ...``) are dropped, and
  a cell that starts with a cell magic (``%%bash``, ``%%time``) is dropped whole; as in IPython,
  a ``!`` or ``%`` is one only where a logical line starts (a line that goes on an open bracket,
  a string or a backslash, such as ``!= 0`` inside brackets, is Python);
- of a cell's top-level statements only imports, function and class definitions (with their
  decorators), assignments of constants (literals, and arithmetic on them) and bare string
  literals are kept; anything else (a call, a loop, a training run, a display) is left out,
  and so is importing the notebook client (``import autograde``: the grader has no use for it);
- a cell that does not parse is kept as it is, so the grader reports its syntax error at its
  cell and line.

Every line of the assembled module comes from exactly one (cell, line) of the notebook.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grader.parsing import parse_python

NOTEBOOK_SUFFIX = ".ipynb"
CLIENT = "autograde"
"""The notebook client's module (``autograde/``): imported by notebooks, left out of grading."""


class NotebookError(ValueError):
    """Why a file is not a notebook we can grade; the message is for the student."""


@dataclass(frozen=True)
class CodeCell:
    number: int
    """Position in the notebook, from 1, counting every cell (as the student scrolls it)."""
    source: str


@dataclass(frozen=True)
class LeftOut:
    """Lines of a cell that are not in the assembled module, and why."""

    cell: int
    line: int
    end_line: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "line": self.line, "end_line": self.end_line,
                "reason": self.reason}

    def describe(self) -> str:
        lines = f"line {self.line}" if self.line == self.end_line \
            else f"lines {self.line}-{self.end_line}"
        return f"cell {self.cell}, {lines}: {self.reason}"


@dataclass(frozen=True)
class Assembly:
    """The entry module built from a notebook, and where each of its lines came from."""

    source: str
    lines: tuple[tuple[int, int], ...]
    """``lines[i]`` is the (cell, line) of the module's line ``i + 1``."""
    left_out: tuple[LeftOut, ...]

    def cell_line(self, line: int) -> tuple[int, int] | None:
        """The (cell, line) of a line of the module (from 1), or None when it has none."""
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else None

    def to_json(self) -> dict[str, Any]:
        return {"lines": [list(pair) for pair in self.lines],
                "left_out": [item.to_json() for item in self.left_out]}


def read_notebook(data: bytes) -> list[CodeCell]:
    """The code cells of an nbformat 4 notebook; NotebookError says why a file is not one."""
    notebook = _parse(data)
    cells = [CodeCell(number, _source(cell))
             for number, cell in enumerate(notebook["cells"], start=1)
             if cell.get("cell_type") == "code"]
    if not any(cell.source.strip() for cell in cells):
        raise NotebookError("The notebook has no code cells with code in them: write your "
                            "solution in code cells.")
    return cells


def without_outputs(data: bytes) -> bytes:
    """The notebook as it is kept: outputs, execution counts and attachments removed (they can
    be large and are not graded), everything else as the student wrote it."""
    notebook = _parse(data)
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.pop("attachments", None)
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()


def _parse(data: bytes) -> dict[str, Any]:
    import nbformat  # the schema is read from disk: only when a notebook is

    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise NotebookError(f"The notebook is not UTF-8 text (byte offset {exc.start}).") from None
    except ValueError as exc:
        raise NotebookError(f"The notebook is not valid JSON ({exc}); save it again from "
                            "Jupyter.") from None
    except RecursionError:
        raise _too_deep() from None
    if _depth(raw) > MAX_JSON_DEPTH:
        raise _too_deep()
    if not isinstance(raw, dict) or ("cells" not in raw and "worksheets" not in raw):
        raise NotebookError("The file is not a Jupyter notebook (no `cells`).")
    version = raw.get("nbformat")
    if version != 4:
        raise NotebookError(f"The notebook is in nbformat {version}; only nbformat 4 (Jupyter "
                            "4 and later) is accepted: open it in a current Jupyter and save it "
                            "again.")
    try:
        with warnings.catch_warnings():  # a missing cell id is a warning, not a refusal
            warnings.simplefilter("ignore")
            nbformat.validate(raw)
    except nbformat.ValidationError as exc:
        raise NotebookError("The notebook does not follow the nbformat 4 schema "
                            f"({exc.message[:200]}); save it again from Jupyter.") from None
    return raw


MAX_JSON_DEPTH = 64
"""Nesting deeper than this is refused: Jupyter writes a handful of levels, and every reader of
the notebook after this one (the schema check, the copy that is kept) recurses once a level."""


def _too_deep() -> NotebookError:
    return NotebookError(f"The notebook nests lists or objects more than {MAX_JSON_DEPTH} "
                         "levels deep, which no notebook Jupyter saves does; save it again "
                         "from Jupyter.")


def _depth(value: Any) -> int:
    """How deeply JSON ``value`` nests lists and objects (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else None)
        if children is None:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _source(cell: Mapping[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


_MAGIC = re.compile(r"^\s*[%!]")


class _LogicalLines:
    """Where Python's logical lines start, fed one physical line at a time: a line starts one
    unless the line before left a bracket, a string or a backslash continuation open."""

    def __init__(self) -> None:
        self._depth = 0
        self._quote: str | None = None
        self._backslash = False

    def at_start(self) -> bool:
        """Whether the next line fed starts a logical line."""
        return self._depth == 0 and self._quote is None and not self._backslash

    def feed(self, line: str) -> None:
        self._backslash = False
        index, end = 0, len(line)
        while index < end:
            char = line[index]
            if self._quote is not None:
                if char == "\\":
                    self._backslash = index == end - 1
                    index += 2
                elif line.startswith(self._quote, index):
                    index += len(self._quote)
                    self._quote = None
                else:
                    index += 1
                continue
            if char == "#":
                break
            if char in "\"'":
                self._quote = line[index:index + 3] if line[index:index + 3] in ('"""', "'''") \
                    else char
                index += len(self._quote)
                continue
            if char in "([{":
                self._depth += 1
            elif char in ")]}":
                self._depth = max(0, self._depth - 1)
            elif char == "\\" and index == end - 1:
                self._backslash = True
            index += 1
        if self._quote in ('"', "'") and not self._backslash:
            self._quote = None  # a one-line string left open: a syntax error, reported later


def magic_lines(lines: Sequence[str]) -> list[bool]:
    """Which of a cell's lines are shell escapes or line magics: a ``!`` or ``%`` that opens a
    logical line. The others are Python, however they begin."""
    logical = _LogicalLines()
    magic = []
    for line in lines:
        is_magic = logical.at_start() and _MAGIC.match(line) is not None
        magic.append(is_magic)
        if not is_magic:
            logical.feed(line)
    return magic


def source_lines(source: str) -> list[str]:
    """A cell's lines as Python counts them: only ``\n``, ``\r\n`` and ``\r`` end a line
    (``str.splitlines`` also splits at form feeds and Unicode separators, which Python does
    not, and the line numbers would drift)."""
    lines = re.split(r"\r\n|\r|\n", source)
    return lines[:-1] if lines and lines[-1] == "" else lines


def assemble(cells: Sequence[CodeCell]) -> Assembly:
    """The entry module of these code cells, by the rule in this module's docstring."""
    text: list[str] = []
    origin: list[tuple[int, int]] = []
    left_out: list[LeftOut] = []
    for cell in cells:
        lines = source_lines(cell.source)
        if not lines:
            continue
        if lines[0].lstrip().startswith("%%"):
            left_out.append(LeftOut(cell.number, 1, len(lines),
                                    f"a cell magic (`{lines[0].strip()[:40]}`) runs outside "
                                    "Python"))
            continue
        keep = [True] * len(lines)
        for index, is_magic in enumerate(magic_lines(lines)):
            if is_magic:
                keep[index] = False
                left_out.append(LeftOut(cell.number, index + 1, index + 1,
                                        "a shell escape or IPython magic"))
        code = "\n".join(line if keep[i] else "" for i, line in enumerate(lines))
        for first, last, reason in _top_level_left_out(code):
            left_out.append(LeftOut(cell.number, first, last, reason))
            for index in range(first - 1, last):
                keep[index] = False
        for index, line in enumerate(lines):
            if keep[index]:
                text.append(line)
                origin.append((cell.number, index + 1))
    left_out.sort(key=lambda item: (item.cell, item.line))
    return Assembly("".join(line + "\n" for line in text), tuple(origin), tuple(left_out))


def _top_level_left_out(code: str) -> list[tuple[int, int, str]]:
    """The line ranges of the top-level statements the rule leaves out, with why; none when the
    cell does not parse (it is kept whole, and its syntax error is reported)."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return []
    kept: set[int] = set()
    dropped: list[tuple[int, int, str]] = []
    for statement in tree.body:
        first = min([statement.lineno, *(d.lineno for d in _decorators(statement))])
        last = statement.end_lineno or statement.lineno
        reason = _why_left_out(statement)
        if reason is None:
            kept.update(range(first, last + 1))
        else:
            dropped.append((first, last, reason))
    # A line shared with a kept statement (``import torch; train()``) stays: the module must
    # still parse. Such a statement is kept with it, so it is not reported.
    return [item for item in dropped if not kept.intersection(range(item[0], item[1] + 1))]


def _decorators(statement: ast.stmt) -> list[ast.expr]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return statement.decorator_list
    return []


def _why_left_out(statement: ast.stmt) -> str | None:
    if _imports_the_client(statement):
        return "the autograde client is for the notebook, not for grading"
    if isinstance(statement, ast.Import | ast.ImportFrom | ast.FunctionDef
                  | ast.AsyncFunctionDef | ast.ClassDef):
        return None
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        value = statement.value
        if value is None or _constant(value):
            return None
        return "an assignment of a computed value (only constants are kept at top level)"
    if isinstance(statement, ast.Expr):
        if isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str):
            return None
        return "top-level code that runs (a call or a displayed value)"
    if isinstance(statement, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
        return "a top-level loop or `with` block"
    return f"top-level code that runs (`{type(statement).__name__.lower()}`)"


def _imports_the_client(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Import):
        return any(alias.name.split(".")[0] == CLIENT for alias in statement.names)
    return isinstance(statement, ast.ImportFrom) and (statement.module or "").split(".")[0] \
        == CLIENT


_CONSTANT_NODES = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp,
                   ast.BinOp, ast.operator, ast.unaryop, ast.Load)


def _constant(node: ast.expr) -> bool:
    """Literals and arithmetic on them: nothing that names or calls anything."""
    return all(isinstance(child, _CONSTANT_NODES) for child in ast.walk(node))


# The line references the grader writes into its messages: ``grader/outcomes.py`` (a frame of
# the student's code) and ``grader/source.py`` (a syntax error).
_FRAME_REF = re.compile(r"\(in (?P<file>[^,()]+), line (?P<line>\d+)")
_SYNTAX_REF = re.compile(r"`(?P<file>[^`]+)` line (?P<line>\d+), column")


def cite_cells(text: str, assembly: Assembly, entry: str) -> str:
    """The text with references to lines of the assembled ``entry`` told as cells:
    ``(in attention.py, line 12`` becomes ``(in cell 4, line 7``."""
    def frame(match: re.Match[str]) -> str:
        place = _place(match, assembly, entry)
        return f"(in {place}" if place else match[0]

    def syntax(match: re.Match[str]) -> str:
        place = _place(match, assembly, entry)
        return f"{place}, column" if place else match[0]

    return _SYNTAX_REF.sub(syntax, _FRAME_REF.sub(frame, text))


def _place(match: re.Match[str], assembly: Assembly, entry: str) -> str | None:
    if match["file"].strip() != entry:
        return None
    found = assembly.cell_line(int(match["line"]))
    return f"cell {found[0]}, line {found[1]}" if found else None


CELL_REF = re.compile(r"\bcell (?P<cell>\d+), line (?P<line>\d+)")
"""How a message cites a notebook's line (what ``cite_cells`` writes)."""


def definitions(assembly: Assembly, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Where each of ``names`` is defined at top level, as (cell, line) (its last definition:
    the one the module ends up with)."""
    try:
        tree = parse_python(assembly.source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, tuple[int, int]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and statement.name in names:
            place = assembly.cell_line(statement.lineno)
            if place is not None:
                found[statement.name] = place
    return found


@dataclass(frozen=True)
class NotebookSubmission:
    """A submission's notebook, assembled: the file it came from and its module."""

    name: str
    assembly: Assembly


def assemble_files(files: Mapping[str, bytes], entry: str
                   ) -> tuple[dict[str, bytes], NotebookSubmission | None]:
    """The files to grade: a notebook among them is replaced by the entry module assembled from
    it (its other ``.py`` files stay). NotebookError when there are several notebooks or the
    one there is not gradable."""
    notebooks = [name for name in files if name.endswith(NOTEBOOK_SUFFIX)]
    if not notebooks:
        return dict(files), None
    if len(notebooks) > 1:
        raise NotebookError(f"The submission holds {len(notebooks)} notebooks; submit one.")
    if entry in files:
        raise NotebookError(f"The submission holds both a notebook and `{entry}`; the notebook "
                            f"is graded as `{entry}`: submit one or the other.")
    name = notebooks[0]
    assembly = assemble(read_notebook(files[name]))
    rest = {key: value for key, value in files.items() if key != name}
    return {entry: assembly.source.encode(), **rest}, NotebookSubmission(name, assembly)


def with_notebook(document: Mapping[str, Any], notebook: NotebookSubmission, *, entry: str,
                  graded_names: Sequence[str]) -> dict[str, Any]:
    """The document of a notebook's grading told in cells: line references name the cell and
    its line, the entry module is called the notebook, a diagnosis with no line of its own
    points at the cell that defines the graded name, and ``autograde.notebook`` keeps the line
    map and what was left out."""
    assembly = notebook.assembly
    defined = definitions(assembly, graded_names)
    pointer = "; ".join(f"`{name}` is defined in cell {cell}, line {line}"
                        for name, (cell, line) in defined.items())

    def told(text: str, *, point: bool = False) -> str:
        text = cite_cells(text, assembly, entry).replace(f"`{entry}`",
                                                         f"the notebook `{notebook.name}`")
        if point and pointer and not CELL_REF.search(text):
            text = f"{text.rstrip()} ({pointer}.)"
        return text

    diagnoses = []
    for diagnosis in document["diagnoses"]:
        changed = {**diagnosis, "message": told(diagnosis.get("message", ""), point=True)}
        views = diagnosis.get("views")
        if isinstance(views, Mapping):
            changed["views"] = {tier: {**view, "message": told(view.get("message", ""),
                                                               point=True)}
                                if isinstance(view, Mapping) else view
                                for tier, view in views.items()}
        diagnoses.append(changed)
    meta = dict(document.get("autograde", {}))
    meta["notebook"] = {"file": notebook.name, **assembly.to_json(),
                        "defined": {name: list(place) for name, place in defined.items()},
                        "notes": [item.describe() for item in assembly.left_out]}
    return {**document,
            "output": told(document.get("output", "")),
            "tests": [{**test, "output": told(test.get("output", ""))}
                      for test in document["tests"]],
            "diagnoses": diagnoses,
            "autograde": meta}
