"""Behaviour fingerprints: the words of a departure, the distance and the grouping (pure), and
what a graded document stores (``tests/integration/test_fingerprints_graded.py`` grades)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.behaviour import departure
from grader.fingerprints import (
    Fingerprint,
    NearMistake,
    behaviour_section,
    distance,
    fingerprint_of,
    group,
)
from service.cli.parser import main

tokens = st.frozensets(st.sampled_from([f"t{i}" for i in range(12)]), max_size=12)


@given(tokens, tokens, tokens)
def test_distance_is_a_bounded_symmetric_measure(a: frozenset[str], b: frozenset[str],
                                                 c: frozenset[str]) -> None:
    assert 0.0 <= distance(a, b) <= 1.0
    assert distance(a, b) == distance(b, a)
    assert (distance(a, b) == 0.0) == (a == b)
    # Jaccard distance is a metric: the triangle inequality holds.
    assert distance(a, c) <= distance(a, b) + distance(b, c) + 1e-12


@given(st.lists(tokens, max_size=25), st.floats(0.0, 1.0))
def test_groups_partition_the_submissions_largest_first(sets: list[frozenset[str]],
                                                        near: float) -> None:
    found = group([(index, Fingerprint(s)) for index, s in enumerate(sets)], near=near)
    members = [m for g in found for m in g.members]
    assert sorted(members) == list(range(len(sets)))
    assert [g.size for g in found] == sorted((g.size for g in found), reverse=True)
    where = {m: index for index, g in enumerate(found) for m in g.members}
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            if a == b:
                assert where[i] == where[j]
    for g in found:
        assert g.representative == g.members[0]
        assert all(sets[m] == g.fingerprint.tokens or
                   distance(sets[m], g.fingerprint.tokens) <= near for m in g.members)


def test_without_nearness_groups_are_exactly_the_equal_fingerprints() -> None:
    sets = [frozenset({"a"}), frozenset({"a", "b"}), frozenset({"a"}), frozenset({"a", "b"}),
            frozenset({"a"})]
    found = group([(i, Fingerprint(s)) for i, s in enumerate(sets)], near=0.0)
    assert [g.members for g in found] == [(0, 2, 4), (1, 3)]
    assert [g.exact for g in found] == [3, 2]
    # At 0.5, {a} and {a, b} are one group.
    assert [g.members for g in group([(i, Fingerprint(s)) for i, s in enumerate(sets)],
                                     near=0.5)] == [(0, 2, 4, 1, 3)]


finite = st.floats(-10, 10, allow_nan=False).filter(lambda x: abs(x) > 0.05)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.25, 0.5, 2.0, 4.0, 8.0]))
def test_a_scaled_output_is_named_by_its_factor_whatever_the_values(seed: int,
                                                                   factor: float) -> None:
    want = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(seed))
    words = departure(want * factor, want)
    assert f"relation=scaled+{math.log2(factor):g}" in words
    assert departure(-want, want)[:2] == ["differs", "relation=negated"]
    assert departure(want.clone(), want) == ["same"]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_sharper_and_flatter_weights_are_told_apart_on_any_input(seed: int) -> None:
    scores = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(seed))
    weights = torch.softmax(scores, dim=-1)
    sharper = departure(torch.softmax(2 * scores, dim=-1), weights)
    flatter = departure(torch.softmax(scores / 2, dim=-1), weights)
    assert {"axis-1.sum=kept", "axis-1.argmax=kept", "axis-1.spread=up"} <= set(sharper)
    assert {"axis-1.sum=kept", "axis-1.argmax=kept", "axis-1.spread=down"} <= set(flatter)
    assert "axis-1.sum=moved" in departure(weights * 0.9, weights)


def test_a_transposed_square_output_is_named() -> None:
    want = torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(3))
    assert "relation=transposed" in departure(want.transpose(-1, -2).contiguous(), want)
    assert departure(want[..., :3], want) == ["shape"]
    assert departure(torch.full_like(want, float("nan")), want) == ["nonfinite"]


def test_the_document_section_reads_back_and_bad_sections_read_as_none() -> None:
    section = behaviour_section(
        {"plain": {"0.0": ["differs", "relation=other"], "0.1": ["same"]},
         "heads": {"0.0": ["differs", "relation=other"], "0.1": ["same"]}},
        failed_checks=["1.1", "1.1"], codes=["wrong-output"],
        nearest=[NearMistake("missing-scale", "missing-scale", 0.41234)])
    found = fingerprint_of({"behaviour": section})
    assert found is not None
    assert found.tokens == {"call:plain", "call:heads", "0.0:differs", "0.0:relation=other",
                            "0.1:same", "check:1.1", "code:wrong-output"}
    assert found.nearest == (NearMistake("missing-scale", "missing-scale", 0.412),)
    assert len(found.key) == 12
    for broken in ({}, {"behaviour": []}, {"behaviour": {"version": 99, "calls": {}}},
                   {"behaviour": {"version": 1, "calls": []}},
                   {"behaviour": {"version": 1, "calls": {"x": {"0": ["a"]}},
                                  "nearest": [{"mistake": "m"}]}}):
        assert fingerprint_of(broken) is None


def test_the_groups_command_groups_a_folder_graded_offline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def document(relation: str) -> dict[str, object]:
        return {"score": 1.0, "behaviour": behaviour_section(
            {"plain": {"0.0": ["differs", f"relation={relation}"]}}, failed_checks=["1.1"],
            codes=["wrong-output"], nearest=[NearMistake("missing-scale", "missing-scale", 0.3)])}

    for name, relation in (("ann", "negated"), ("bob", "other"), ("cid", "negated")):
        (tmp_path / f"{name}.json").write_text(json.dumps(document(relation)))
    (tmp_path / "dan.json").write_text(json.dumps({"score": 11.0, "diagnoses": []}))
    (tmp_path / "summary.json").write_text("[]")
    assert main(["assignments", "groups", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("group 1 (") and "2 submission(s)" in lines[0]
    assert "missing-scale 0.30" in lines[0] and lines[1].strip() == "ann, cid"
    assert lines[3].strip() == "bob"
    (tmp_path / "eve.json").write_text("{not json")
    assert main(["assignments", "groups", str(tmp_path)]) != 0
    assert "cannot read" in capsys.readouterr().err
    assert main(["assignments", "groups", str(tmp_path / "nowhere")]) != 0
