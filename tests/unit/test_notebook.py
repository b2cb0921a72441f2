"""Notebook assembly: which lines of which cells make the entry module, and the map back."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.notebook import (
    Assembly,
    CodeCell,
    NotebookError,
    NotebookSubmission,
    assemble,
    assemble_files,
    cite_cells,
    magic_lines,
    read_notebook,
    with_notebook,
    without_outputs,
)


def notebook(*cells: tuple[str, str], version: int = 4, **extra: Any) -> bytes:
    """An nbformat 4 notebook of (kind, source) cells."""
    body = []
    for index, (kind, source) in enumerate(cells):
        cell: dict[str, Any] = {"cell_type": kind, "id": f"c{index}", "metadata": {},
                                "source": source}
        if kind == "code":
            cell.update(outputs=[], execution_count=None)
        body.append(cell)
    return json.dumps({"nbformat": version, "nbformat_minor": 5, "metadata": {},
                       "cells": body, **extra}).encode()


def lines_of(assembly: Assembly) -> list[str]:
    """The module's lines as Python numbers them."""
    return re.split(r"\r\n|\r|\n", assembly.source)[:-1]


def test_cells_are_numbered_as_the_notebook_shows_them() -> None:
    cells = read_notebook(notebook(("markdown", "# Lab"), ("code", "import torch"),
                                   ("markdown", "text"), ("code", "x = 1")))
    assert [(c.number, c.source) for c in cells] == [(2, "import torch"), (4, "x = 1")]


def test_the_rule_keeps_imports_definitions_and_constants_only() -> None:
    source = ("import torch\n"
              "from torch import nn\n"
              "SCALE = 2 ** 0.5\n"
              "NAMES = ('a', -1, [1.5])\n"
              "model = nn.Linear(2, 2)\n"
              "@torch.no_grad()\n"
              "def f(x):\n"
              "    print(x)\n"
              "    return x\n"
              "for i in range(3):\n"
              "    f(i)\n"
              "f(2)\n"
              "class M(nn.Module):\n"
              "    pass\n"
              "'''a note'''\n")
    assembly = assemble([CodeCell(3, source)])
    assert lines_of(assembly) == [
        "import torch", "from torch import nn", "SCALE = 2 ** 0.5", "NAMES = ('a', -1, [1.5])",
        "@torch.no_grad()", "def f(x):", "    print(x)", "    return x",
        "class M(nn.Module):", "    pass", "'''a note'''"]
    assert [(o.cell, o.line, o.end_line) for o in assembly.left_out] == [
        (3, 5, 5), (3, 10, 11), (3, 12, 12)]
    assert "computed value" in assembly.left_out[0].reason
    assert assembly.left_out[1].describe().startswith("cell 3, lines 10-11: a top-level loop")


def test_magics_and_shell_escapes_are_dropped_with_a_note() -> None:
    assembly = assemble([CodeCell(1, "!pip install torch\nimport torch\n  %time x = 1\n"),
                         CodeCell(2, "%%bash\necho hi\n"),
                         CodeCell(5, "def f():\n    return 1\n")])
    assert lines_of(assembly) == ["import torch", "def f():", "    return 1"]
    assert assembly.lines == ((1, 2), (5, 1), (5, 2))
    reasons = [(o.cell, o.line, o.end_line, o.reason) for o in assembly.left_out]
    assert reasons[0][:3] == (1, 1, 1) and "magic" in reasons[0][3]
    assert reasons[1][:3] == (1, 3, 3)
    assert reasons[2][:3] == (2, 1, 2) and "%%bash" in reasons[2][3]


def test_a_bang_or_percent_inside_an_open_bracket_string_or_continuation_is_python() -> None:
    cell = ("def ok(xs):\n    return all(\n        x\n        != 0\n        for x in xs)\n"
            "REST = 10 \\\n    % 3\n"
            'DOC = """\n!not a shell escape\n"""\n'
            "!echo but this is\n")
    assembly = assemble([CodeCell(1, cell)])
    namespace: dict[str, Any] = {}
    exec(assembly.source, namespace)
    assert namespace["ok"]((1, 2)) is True and namespace["REST"] == 1
    assert namespace["DOC"] == "\n!not a shell escape\n"
    assert [(o.line, o.reason) for o in assembly.left_out] == [
        (11, "a shell escape or IPython magic")]


FRAGMENTS = [
    "x = 1",
    "y = (1,\n     2)",
    "s = '''a\n!not magic (\n%neither'''",
    "t = 'a # b'  # a comment (",
    "u = [\n    1\n    != 2,\n]",
    "v = 1 + \\\n    2",
    'w = "\\"("',
    "if x:\n    z = {'a': (1,\n  2)}",
    'def f():\n    return """\n)"""',
    "q = r'\\'('",
    "# a comment with ( a bracket",
    "",
    "e = '''a \\\nb'''",
    "g = ('a'\n     'b')  # ]",
    "h = 'a \\\nb'",
]


def continuation_rows(source: str) -> set[int]:
    """The rows (from 1) that continue a logical line, by Python's own tokenizer."""
    rows: set[int] = set()
    start = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if start is None:
            if token.type in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
                continue
            start = token.start[0]
        if token.type == tokenize.NEWLINE:
            rows.update(range(start + 1, token.end[0] + 1))
            start = None
    return rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_a_magic_is_seen_only_where_pythons_tokenizer_starts_a_logical_line(
        fragments: list[str]) -> None:
    source = "\n".join(fragments) + "\n"
    lines = source.split("\n")[:-1]
    continuing = continuation_rows(source)
    # Each line in turn written as a shell escape, the lines before it as they are.
    for row in range(1, len(lines) + 1):
        escaped = [*lines[:row - 1], "!" + lines[row - 1]]
        assert magic_lines(escaped)[-1] is (row not in continuing), (row, source)


def test_a_cell_that_does_not_parse_is_kept_and_its_error_cited_at_its_cell() -> None:
    assembly = assemble([CodeCell(1, "import torch\n"), CodeCell(2, "def f(:\n    pass\n")])
    assert lines_of(assembly)[1] == "def f(:"
    with pytest.raises(SyntaxError) as error:
        ast.parse(assembly.source)
    message = f"`attention.py` line {error.value.lineno}, column {error.value.offset}: x."
    assert cite_cells(message, assembly, "attention.py") == "cell 2, line 1, column 7: x."


def test_frames_of_the_entry_are_cited_by_cell_and_others_left_alone() -> None:
    assembly = assemble([CodeCell(2, "import torch\n"), CodeCell(4, "x = 1\n\ndef f():\n"
                                                                   "    return 1 / 0\n")])
    text = ("ZeroDivisionError (in attention.py, line 5, in f: `return 1 / 0`) and "
            "(in helpers.py, line 5, in g: `x`)")
    assert cite_cells(text, assembly, "attention.py") == (
        "ZeroDivisionError (in cell 4, line 4, in f: `return 1 / 0`) and "
        "(in helpers.py, line 5, in g: `x`)")


def test_the_notebook_client_is_left_out() -> None:
    assembly = assemble([CodeCell(1, "import autograde\nfrom autograde import check\n"
                                     "import math\nautograde.check('attention')")])
    assert lines_of(assembly) == ["import math"]
    assert [o.reason for o in assembly.left_out][:2] == [
        "the autograde client is for the notebook, not for grading"] * 2


def test_a_shared_line_keeps_the_statement_it_holds() -> None:
    assembly = assemble([CodeCell(1, "import torch; print(1)\nprint(2)\n")])
    assert lines_of(assembly) == ["import torch; print(1)"]
    assert [(o.line, o.end_line) for o in assembly.left_out] == [(2, 2)]


# Lines of cell code: statements the rule keeps, leaves out, comments, blanks and magics.
LINE = st.sampled_from([
    "import math", "X = 3", "Y = (1, 2.5, 'z')", "print(X)", "math.sqrt(2)", "# a comment",
    "", "!ls", "%time X", "def f(a):\n    return a + 1", "class K:\n    '''doc'''\n    z = 1",
    "for i in range(2):\n    X", "if X:\n    X = 2\nelse:\n    pass", "total = X + 1",
    "with open('f') as h:\n    pass", "@staticmethod\ndef g():\n    # inside\n    return 0",
    "def broken(:", "x = '''a\nmultiline\nstring'''",
])
ODD = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
"""Any text at all, form feeds and Unicode line separators included."""


def notebooks(cell: st.SearchStrategy[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    return st.lists(st.tuples(st.sampled_from(["code", "code", "markdown"]), cell),
                    min_size=1, max_size=6)


NOTEBOOKS = notebooks(st.lists(st.one_of(LINE, LINE, LINE, ODD), max_size=6).map("\n".join))
PYTHON_NOTEBOOKS = notebooks(st.lists(LINE, max_size=6).map("\n".join))


@settings(max_examples=200, deadline=None)
@given(NOTEBOOKS)
def test_every_assembled_line_maps_back_to_exactly_its_cell_and_line(
        cells: list[tuple[str, str]]) -> None:
    numbered = [CodeCell(number, source) for number, (kind, source) in enumerate(cells, 1)
                if kind == "code"]
    assembly = assemble(numbered)
    by_number = {cell.number: re.split(r"\r\n|\r|\n", cell.source) for cell in numbered}
    module = lines_of(assembly)
    assert len(module) == len(assembly.lines)
    assert len(set(assembly.lines)) == len(assembly.lines)  # no cell line is used twice
    assert list(assembly.lines) == sorted(assembly.lines)  # cells and lines keep their order
    for text, (cell, line) in zip(module, assembly.lines, strict=True):
        assert by_number[cell][line - 1] == text
    # Nothing reported as left out is in the module.
    for item in assembly.left_out:
        for line in range(item.line, item.end_line + 1):
            assert (item.cell, line) not in assembly.lines


@settings(max_examples=200, deadline=None)
@given(PYTHON_NOTEBOOKS)
def test_the_module_parses_unless_a_cell_does_not(cells: list[tuple[str, str]]) -> None:
    numbered = [CodeCell(n, s) for n, (kind, s) in enumerate(cells, 1) if kind == "code"]
    assembly = assemble(numbered)
    if not any("def broken(:" in cell.source for cell in numbered):
        tree = ast.parse(assembly.source)
        for statement in tree.body:
            assert isinstance(statement, ast.Import | ast.ImportFrom | ast.FunctionDef
                              | ast.ClassDef | ast.Assign | ast.Expr), ast.dump(statement)
            if isinstance(statement, ast.Expr):
                assert isinstance(statement.value, ast.Constant)


@pytest.mark.parametrize(("data", "says"), [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[1, 2]", "not a Jupyter notebook"),
    (json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                 "worksheets": [{"cells": []}]}).encode(), "nbformat 3"),
    (notebook(("markdown", "# only prose"), ("code", "  \n")), "no code cells"),
    (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                 "cells": [{"cell_type": "code", "source": 7}]}).encode(), "schema"),
    (notebook(("code", "x = 1")).replace(b'"metadata": {}', b'"metadata": {"deep": %s}'
                                         % (b"[" * 3000 + b"]" * 3000), 1), "levels deep"),
    (notebook(("code", "x = 1"), metadata={"deep": json.loads("[" * 70 + "]" * 70)}),
     "levels deep"),
])
def test_bad_notebooks_are_refused_with_a_reason(data: bytes, says: str) -> None:
    with pytest.raises(NotebookError, match=says):
        read_notebook(data)


def test_outputs_are_stripped_and_the_cells_kept() -> None:
    raw = json.loads(notebook(("code", "import torch"), ("markdown", "hi")))
    raw["cells"][0].update(execution_count=3, outputs=[{
        "output_type": "stream", "name": "stdout", "text": "x" * 100_000}])
    stored = without_outputs(json.dumps(raw).encode())
    assert len(stored) < 1000
    kept = json.loads(stored)
    assert kept["cells"][0]["outputs"] == [] and kept["cells"][0]["execution_count"] is None
    assert [c.source for c in read_notebook(stored)] == ["import torch"]


def test_assemble_files_puts_the_module_under_the_entry_name_beside_other_files() -> None:
    files, found = assemble_files({"lab.ipynb": notebook(("code", "X = 1\nprint(X)")),
                                   "helpers.py": b"Y = 2\n"}, "attention.py")
    assert files == {"attention.py": b"X = 1\n", "helpers.py": b"Y = 2\n"}
    assert found is not None and found.name == "lab.ipynb"
    assert assemble_files({"a.py": b"x"}, "attention.py") == ({"a.py": b"x"}, None)
    with pytest.raises(NotebookError, match=r"both a notebook and `attention\.py`"):
        assemble_files({"lab.ipynb": notebook(("code", "X = 1")), "attention.py": b"X = 2"},
                       "attention.py")
    with pytest.raises(NotebookError, match="2 notebooks"):
        assemble_files({"a.ipynb": b"{}", "b.ipynb": b"{}"}, "attention.py")


def test_the_document_cites_cells_and_points_behaviour_at_the_defining_cell() -> None:
    assembly = assemble([CodeCell(1, "import torch"), CodeCell(3, "print(1)\n\ndef attention"
                                                                  "(q, k, v, allowed):\n"
                                                                  "    return q / 0")])
    document: dict[str, Any] = {"score": 0, "max_score": 1, "output": "", "tests": [
        {"number": "1.1", "output": "boom (in attention.py, line 4, in attention: `x`)"}],
        "diagnoses": [
            {"code": "causal-leak", "message": "later positions changed.", "tests": ["1.1"],
             "views": {"visible": {"message": "changed.", "tests": []}, "hidden": None}},
            {"code": "runtime-error", "message": "E (in attention.py, line 4, in f: `x`)",
             "tests": []}],
        "autograde": {"seed": 1}}
    told = with_notebook(document, NotebookSubmission("lab.ipynb", assembly),
                         entry="attention.py", graded_names=["attention"])
    assert told["tests"][0]["output"] == "boom (in cell 3, line 4, in attention: `x`)"
    leak = told["diagnoses"][0]
    assert leak["message"] == ("later positions changed. (`attention` is defined in cell 3, "
                               "line 3.)")
    assert leak["views"]["visible"]["message"].endswith("in cell 3, line 3.)")
    assert leak["views"]["hidden"] is None
    assert told["diagnoses"][1]["message"] == "E (in cell 3, line 4, in f: `x`)"
    record = told["autograde"]["notebook"]
    assert record["file"] == "lab.ipynb" and record["lines"][0] == [1, 1]
    assert record["notes"] == ["cell 3, line 1: top-level code that runs (a call or a "
                               "displayed value)"]
    assert told["autograde"]["seed"] == 1 and "notebook" not in document["autograde"]


def test_a_missing_name_is_told_as_missing_from_the_notebook() -> None:
    assembly = assemble([CodeCell(1, "def attend(q, k, v, allowed):\n    return q, q")])
    document: dict[str, Any] = {"output": "", "tests": [], "autograde": {}, "diagnoses": [
        {"code": "interface-error", "tests": [],
         "message": "the assignment calls `attention`, but `attention.py` defines no function "
                    "`attention`. It defines `attend`"}]}
    told = with_notebook(document, NotebookSubmission("lab.ipynb", assembly),
                         entry="attention.py", graded_names=["attention"])
    assert told["diagnoses"][0]["message"] == (
        "the assignment calls `attention`, but the notebook `lab.ipynb` defines no function "
        "`attention`. It defines `attend`")
