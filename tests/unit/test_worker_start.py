"""What a grading worker prepares before it forks its processes (``celeryd_init``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from assignments.spec import ASSIGNMENTS_DIR_VARIABLE, list_assignments
from grader.learning import ReferenceTrainings
from grader.loader import load_assignment
from service.tasks import prepare_reference_trainings


@pytest.mark.slow
def test_the_worker_trains_every_assignment_and_starts_despite_a_broken_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    broken = tmp_path / "broken-course-lab"
    broken.mkdir()
    (broken / "assignment.toml").write_text("this is [not toml\n", encoding="utf-8")
    monkeypatch.setenv(ASSIGNMENTS_DIR_VARIABLE, str(tmp_path))
    # A cache of its own: the process's may hold trainings earlier tests left there.
    trainings = ReferenceTrainings()
    monkeypatch.setattr("service.tasks.REFERENCE_TRAININGS", trainings)
    assert "broken-course-lab" in list_assignments()

    with caplog.at_level(logging.INFO, logger="service.tasks"):
        prepare_reference_trainings()  # does not raise

    assert any("broken-course-lab" in record.getMessage() for record in caplog.records
               if record.levelno >= logging.WARNING)
    assert any("reference trainings:" in record.getMessage() for record in caplog.records)
    # The grading processes forked from here find every shipped training seed trained.
    for slug in ("attention", "multi-head-attention"):
        assert trainings.prepare(load_assignment(slug)) == 0
