"""The reference mutator: specialising drops every mistake switch; every mutant is a valid,
different program with one change, described by its line and text."""

from __future__ import annotations

import ast
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.loader import load_assignment
from grader.mutants import reference_submission, spread
from grader.mutation import mutants, specialise

_LEAVES = st.sampled_from(["q", "k", "scale", "1", "-1", "2.0", "0.5", "float('-inf')"])


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "@", "**"]), inner).map(
            lambda parts: f"({parts[0]} {parts[1]} {parts[2]})")
        method = st.tuples(inner, st.sampled_from(["transpose(-2, -1)", "masked_fill(m, 0.0)",
                                                   "sum(dim=-1)", "tril()"])).map(
            lambda parts: f"({parts[0]}).{parts[1]}")
        call = st.tuples(st.sampled_from(["torch.softmax", "torch.where", "max"]), inner,
                         inner).map(lambda parts: f"{parts[0]}({parts[1]}, {parts[2]})")
        unary = st.tuples(st.sampled_from(["-", "~", "not "]), inner).map(
            lambda parts: f"({parts[0]}{parts[1]})")
        compare = st.tuples(inner, st.sampled_from(["<", "==", "in", "is not"]), inner).map(
            lambda parts: f"({parts[0]} {parts[1]} {parts[2]})")
        return binary | method | call | unary | compare
    return st.recursive(_LEAVES, extend, max_leaves=8)


@st.composite
def _programs(draw: st.DrawFn) -> str:
    lines = ["import torch", "", "def f(q, k, m, scale):", '    """Doc."""']
    for index in range(draw(st.integers(1, 3))):
        lines.append(f"    x{index} = {draw(_expressions())}")
        if draw(st.booleans()):
            lines.append(f"    x{index} = x{index} * {draw(_LEAVES)}")
    if draw(st.booleans()):
        lines += ["    if x0 is None:", "        raise ValueError('none')"]
    lines.append(f"    return {draw(_expressions())}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(_programs())
def test_every_mutant_parses_and_differs(program: str) -> None:
    original = ast.unparse(ast.parse(program))
    found = mutants(original)
    sources = [mutant.source for mutant in found]
    assert len(set(sources)) == len(sources), "duplicate mutants"
    for mutant in found:
        tree = ast.parse(mutant.source)  # parses
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            compile(tree, mutant.id, "exec")
        assert ast.unparse(tree) != original
        assert mutant.before and mutant.after and mutant.line >= 1
        assert mutant.id.endswith(mutant.operator)
    for mutant in found:  # docstrings are text, never mutated
        assert '"""Doc."""' in mutant.source or "'Doc.'" in mutant.source


@settings(max_examples=60, deadline=None)
@given(_programs(), st.integers(0, 40))
def test_a_limit_spreads_over_operators_and_keeps_order(program: str, limit: int) -> None:
    found = mutants(program)
    chosen = spread(found, limit)
    assert len(chosen) == min(limit, len(found))
    assert [m.id for m in chosen] == sorted(m.id for m in chosen)
    if limit >= len({m.operator for m in found}):
        assert {m.operator for m in chosen} == {m.operator for m in found}


def test_specialising_keeps_only_the_correct_code() -> None:
    source = '''
import math
from assignments.model import KnownMistake
FILL = "fill-finite"
MISTAKES = [KnownMistake("a", "a", "a")]

def helper(x):
    return x

def unused(x):
    return x

def f(x, *, mistakes=frozenset()):
    """Doc."""
    s = 1.0 / math.sqrt(x.shape[-1])
    if "missing-scale" in mistakes:
        s = 1.0
    elif "other" in mistakes:
        s = 2.0
    if "check" not in mistakes and x.sum() > 0:
        raise ValueError("positive")
    y = x.masked_fill(x > 0, -1e9 if FILL in mistakes else float("-inf"))
    if not mistakes & {"a", "b"}:
        y = helper(y)
    return y * s

def namespace(mistakes):
    return {"f": lambda x: f(x, mistakes=mistakes)}
'''
    result = specialise(source, ("f",), {"FILL": "fill-finite"})
    assert "mistakes" not in result and "KnownMistake" not in result
    assert "def unused" not in result and "def namespace" not in result
    assert "def helper" in result and "import math" in result
    assert "if x.sum() > 0:" in result
    assert "float('-inf')" in result and "1e9" not in result.replace("1000000000.0", "1e9")
    assert "s = 2.0" not in result and "y = helper(y)" in result
    namespace: dict[str, object] = {}
    exec(compile(result, "specialised", "exec"), namespace)  # our own test source


def test_shipped_references_specialise_to_their_required_names() -> None:
    for slug in ("attention", "multi-head-attention", "attention-kv-cache"):
        assignment = load_assignment(slug)
        source = reference_submission(assignment)
        assert "mistakes" not in source, slug
        tree = ast.parse(source)
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef |
                                                                ast.ClassDef)}
        assert set(assignment.required_names) <= names
        assert len(mutants(source)) > 30
