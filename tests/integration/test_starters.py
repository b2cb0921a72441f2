"""A starter handed in as shipped is graded as what it is: code that raises "not implemented",
with the one code that says so, and none of the mistakes its rejections would otherwise mimic
(it does not reject a bad ``num_heads`` or an all-masked row with ValueError either)."""

from __future__ import annotations

import pytest

from assignments.spec import list_assignments
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("slug", list_assignments())
def test_the_starter_as_shipped_gets_runtime_error_and_nothing_else(
        slug: str, local_pipeline: GradingPipeline) -> None:
    assignment = load_assignment(slug)
    starter = assignment.root / "starter" / assignment.entry
    document = local_pipeline.grade(assignment, {assignment.entry: starter.read_bytes()},
                                    seed=3)
    assert document["score"] == 0
    assert [d["code"] for d in document["diagnoses"]] == ["runtime-error"]
    assert "NotImplementedError" in document["diagnoses"][0]["message"]
