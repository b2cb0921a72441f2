"""The reference mutator: specialising drops every mistake switch; every mutant is a valid,
different program with one change, described by its line and text."""

from __future__ import annotations

import ast
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.loader import load_assignment
from grader.mutants import MutantResult, MutationReport, reference_submission, refusal, spread
from grader.mutation import Mutant, mutants, specialise
from service.cli import main

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_shipped_references_specialise_to_their_required_names() -> None:
    for slug in ("attention", "multi-head-attention", "attention-kv-cache", "adamw",
                 "cross-entropy"):
        assignment = load_assignment(slug)
        source = reference_submission(assignment)
        assert "mistakes" not in source, slug
        tree = ast.parse(source)
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef |
                                                                ast.ClassDef)}
        assert set(assignment.required_names) <= names
        assert len(mutants(source)) > 30


def test_a_helper_shared_by_entry_points_is_specialised_at_every_call() -> None:
    source = '''
import math

def _scale(d, mistakes):
    if "missing-scale" in mistakes:
        return 1.0
    return 1.0 / math.sqrt(d)

def _shift(x, *, mistakes=frozenset()):
    return x if "no-shift" in mistakes else x + 1

def scores(d, *, mistakes=frozenset()):
    return _shift(_scale(d, mistakes), mistakes=mistakes)

class Scores:
    def __init__(self, mistakes=frozenset()):
        self.mistakes = mistakes

    def pow(self, x, mistakes):
        return x * x if "square" in mistakes else x

    def forward(self, d):
        m = self.mistakes
        return self.pow(_scale(d=d, mistakes=m), m) + math.pow(d, 0)

def build(d, *, mistakes=frozenset()):
    return Scores(mistakes).forward(d) + scores(d, mistakes=mistakes)
'''
    result = specialise(source, ("scores", "Scores", "build"), {})
    assert "mistakes" not in result
    assert "math.pow(d, 0)" in result  # a module's function is not the reference's method
    namespace: dict[str, Any] = {}
    exec(compile(result, "specialised", "exec"), namespace)  # our own test source
    assert namespace["scores"](4) == 1.5
    assert namespace["Scores"]().forward(4) == 1.5
    assert namespace["build"](4) == 3.0


def test_a_refusal_shows_the_exception_and_the_stripped_line() -> None:
    baseline = "import torch\n\ndef scores(q, k):\n    return _scale(q)\n"
    message = ("On q (2, 5, 8), your code raised TypeError: _scale() takes 1 positional "
               "argument but 2 were given (in week_one.py, line 4, in scores: `...`).")
    document = {"score": 0.0, "max_score": 5.0, "tests": [],
                "diagnoses": [{"code": "runtime-error", "message": message}]}
    text = refusal(document, baseline, "week_one.py")
    assert "scores 0.0/5.0 (runtime-error)" in text
    assert "TypeError: _scale() takes 1 positional argument but 2 were given" in text
    assert "the stripped reference, line 4: return _scale(q)" in text
    quiet = {"score": 1.0, "max_score": 2.0, "diagnoses": [],
             "tests": [{"number": "1.1", "score": 0.0, "max_score": 1.0,
                        "output": "max |difference| 0.5 at [0, 1]"}]}
    assert "check 1.1: max |difference| 0.5" in refusal(quiet, baseline, "week_one.py")


def _result(number: int, operator: str, score: float, codes: tuple[str, ...]) -> MutantResult:
    mutant = Mutant(id=f"m{number:03d}-{operator}", operator=operator, line=number,
                    before=f"before{number}", after=f"after{number}", source="")
    return MutantResult(mutant=mutant, score=score, max_score=2.0, codes=codes,
                        failed_checks=() if score == 2.0 else ("1.1 scores",))


def test_a_report_lists_only_the_verdicts_asked_for_and_keeps_its_counts() -> None:
    results = (_result(1, "constant", 2.0, ()), _result(2, "sign", 1.0, ("wrong-output",)),
               _result(3, "swap-args", 0.0, ("missing-scale",)),
               _result(4, "swap-args", 0.0, ("runtime-error",)))
    report = MutationReport("week-one", 0, "local", 9, results, 1.0)
    default = report.render()
    assert "before1" in default and "before2" in default
    assert "before3" not in default and "before4" not in default
    named = report.render(frozenset({"named"}))
    assert "Diagnosed with a specific code:" in named and "before3" in named
    assert "0/2, missing-scale" in named
    assert "before1" not in named and "before2" not in named and "before4" not in named
    assert "full marks (the checks miss them)         1" in named  # the counts stay whole
    document = report.to_json(frozenset({"crashed", "full-marks"}))
    assert [m["id"] for m in document["mutants"]] == ["m001-constant", "m004-swap-args"]
    assert document["counts"] == {"full-marks": 1, "wrong-output": 1, "named": 1, "crashed": 1}
    assert len(report.to_json()["mutants"]) == 4


def test_mutants_refuses_unknown_operators_and_verdicts(
        capsys: pytest.CaptureFixture[str]) -> None:
    for option, value in (("--operators", "constant,flip"), ("--only", "noise")):
        with pytest.raises(SystemExit) as exited:
            main(["assignments", "mutants", "attention", option, value])
        assert exited.value.code == 2
        error = capsys.readouterr().err
        assert "unknown: " in error and "of: " in error
