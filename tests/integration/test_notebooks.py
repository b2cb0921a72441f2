"""Notebook submissions through the real API on PostgreSQL: the notebook is kept without its
outputs, graded as the module of its code cells, and its results cite cells; bad notebooks get
a 4xx that says why and leave nothing behind."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from devkit.courses import Factory
from devkit.notebooks import LEAK_CLASS_CELL, causal_leak_notebook, notebook
from devkit.pages import log_in
from grader.report import render_report
from service.core import db
from service.grading.exactly_once import Outcome
from service.models import CourseRole, Role, Submission, SubmissionFile
from service.tasks import current_grading


@pytest.fixture
def site(pg_app: Flask) -> Iterator[tuple[FlaskClient, dict[str, str], dict[str, str]]]:
    factory = Factory(pg_app)
    course = factory.course(slugs=("attention", "multi-head-attention"))
    student = factory.user("stu", course=course)
    teacher = factory.user("prof", role=Role.INSTRUCTOR, course=course,
                           course_role=CourseRole.INSTRUCTOR)
    yield pg_app.test_client(), factory.headers(student), factory.headers(teacher)


def _post(client: FlaskClient, headers: dict[str, str], name: str, data: bytes,
          slug: str = "attention") -> Any:
    return client.post(f"/api/v1/assignments/{slug}/submissions", headers=headers,
                       data={"files": [(io.BytesIO(data), name)]},
                       content_type="multipart/form-data")


def _graded(client: FlaskClient, headers: dict[str, str], submission_id: int) -> Any:
    assert current_grading().grade_and_store(db.session(), submission_id) is Outcome.GRADED
    db.session().expire_all()
    response = client.get(f"/api/v1/submissions/{submission_id}", headers=headers)
    assert response.status_code == 200
    return response.get_json()


def test_a_causal_leak_in_a_notebook_is_diagnosed_at_its_cell(site: Any) -> None:
    client, student, teacher = site
    response = _post(client, student, "lab.ipynb", causal_leak_notebook(),
                     "multi-head-attention")
    assert response.status_code == 202, response.get_data(as_text=True)
    submission_id = response.get_json()["id"]
    stored = db.session().scalars(select(SubmissionFile).join(Submission).where(
        Submission.id == submission_id)).all()
    assert [f.name for f in stored] == ["lab.ipynb"]
    kept = json.loads(stored[0].content)
    assert all(c.get("outputs", []) == [] for c in kept["cells"])  # outputs stripped
    assert "triu()" in "".join(kept["cells"][LEAK_CLASS_CELL - 1]["source"])

    body = _graded(client, student, submission_id)
    results = body["results"]
    leak = next(d for d in results["diagnoses"] if d["code"] == "causal-leak")
    assert f"`ManualMultiHeadAttention` is defined in cell {LEAK_CLASS_CELL}, line 1" \
        in leak["message"]
    notes = results["autograde"]["notebook"]["notes"]  # the student reads what was left out
    assert notes == ["cell 2, line 1: a shell escape or IPython magic",
                     "cell 5, line 1: a shell escape or IPython magic",
                     "cell 5, line 2: an assignment of a computed value (only constants are "
                     "kept at top level)",
                     "cell 5, lines 3-4: a top-level loop or `with` block",
                     "cell 5, line 5: top-level code that runs (a call or a displayed value)"]
    # The training loop was never run: the module imports in well under its time limit and
    # scores the points of every check but the causal ones.
    assert body["status"] == "graded" and 0 < results["score"] < results["max_score"]
    report = render_report(results, plots=False)  # what `autograde submit` prints
    assert "Left out of your notebook (never run by the grader):\n  cell 2, line 1: a shell" \
        in report
    # The instructor's document keeps the line map: the module's line 1 is cell 2's line 2.
    full = client.get(f"/api/v1/submissions/{submission_id}", headers=teacher).get_json()
    assert full["results"]["autograde"]["notebook"]["lines"][0] == [2, 2]

    log_in(client, "stu")
    page = client.get(f"/submissions/{submission_id}").get_data(as_text=True)
    assert f"lab.ipynb, cell {LEAK_CLASS_CELL}" in page
    assert f"Show lab.ipynb, cell {LEAK_CLASS_CELL}, line 1" in page
    assert "Left out: cell 5, lines 3-4: a top-level loop" in page
    assert "!pip install torch" in page  # the cells as written, not the assembled module


def test_a_runtime_error_is_cited_by_cell_and_line(site: Any) -> None:
    client, student, _ = site
    data = notebook(("code", "import torch"), ("markdown", "text"),
                    ("code", "print('demo')\n\ndef attention(q, k, v, allowed):\n"
                             "    scores = q @ k.transpose(-2, -1)\n"
                             "    return scores.nope(), scores"))
    response = _post(client, student, "attention.ipynb", data)
    assert response.status_code == 202
    results = _graded(client, student, response.get_json()["id"])["results"]
    text = json.dumps(results["diagnoses"]) + json.dumps(results["tests"])
    assert "in cell 3, line 5, in attention" in text
    assert "attention.py" not in text


def test_a_syntax_error_is_cited_by_cell_and_line(site: Any) -> None:
    client, student, _ = site
    data = notebook(("code", "import torch"), ("code", "def attention(q, k, v, allowed)\n"
                                                       "    return q, q"))
    response = _post(client, student, "attention.ipynb", data)
    results = _graded(client, student, response.get_json()["id"])["results"]
    syntax = results["diagnoses"][0]
    assert syntax["code"] == "syntax-error"
    assert syntax["message"].startswith("cell 2, line 1, column"), syntax["message"]


def _nbformat3() -> bytes:
    return json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                       "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1",
                                                  "outputs": [], "language": "python"}]}]
                       }).encode()


def _big_outputs(size: int) -> bytes:
    raw = json.loads(notebook(("code", "import torch")))
    raw["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                   "text": "x" * size}]
    return json.dumps(raw).encode()


@pytest.mark.parametrize(("data", "status", "words"), [
    (b'{"cells": [', 415, "not valid JSON"),
    (_nbformat3(), 415, "nbformat 3"),
    (notebook(("markdown", "# no code")), 415, "no code cells"),
    (_big_outputs(50 << 20), 413, "upload limit"),
    (notebook(("code", "x = 1")).replace(b'"metadata": {}', b'"metadata": {"deep": %s}'
                                         % (b"[" * 3000 + b"]" * 3000), 1), 415, "levels deep"),
])
def test_bad_notebooks_are_refused_with_a_reason_and_nothing_is_stored(
        site: Any, data: bytes, status: int, words: str) -> None:
    client, student, _ = site
    response = _post(client, student, "lab.ipynb", data)
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    assert response.mimetype == "application/problem+json"
    assert words in response.get_json()["detail"]
    assert db.session().scalar(select(func.count()).select_from(Submission)) == 0


def test_a_notebook_with_large_outputs_under_the_upload_limit_is_kept_without_them(
        site: Any) -> None:
    client, student, _ = site
    response = _post(client, student, "lab.ipynb", _big_outputs(400 << 10))
    assert response.status_code == 202, response.get_data(as_text=True)[:300]
    assert response.get_json()["files"][0]["size"] < 2000


def test_a_notebook_over_what_is_read_of_a_part_is_told_to_clear_its_outputs(
        make_app: Callable[..., Flask], pg_url: str) -> None:
    app = make_app(pg_url, MAX_UPLOAD_BYTES=8 << 20)  # the request limit is not what stops it
    with app.app_context():
        factory = Factory(app)
        student = factory.user("stu", course=factory.course())
        response = _post(app.test_client(), factory.headers(student), "lab.ipynb",
                         _big_outputs(2 << 20))
        assert response.status_code == 413
        assert "Clear outputs" in response.get_json()["detail"]
        assert db.session().scalar(select(func.count()).select_from(Submission)) == 0
    app.extensions["autograde.db"].engine.dispose()


def test_two_notebooks_in_one_submission_are_refused(site: Any) -> None:
    client, student, _ = site
    data = {"files": [(io.BytesIO(notebook(("code", "x = 1"))), "a.ipynb"),
                      (io.BytesIO(notebook(("code", "x = 1"))), "b.ipynb")]}
    response = client.post("/api/v1/assignments/attention/submissions", headers=student,
                           data=data, content_type="multipart/form-data")
    assert response.status_code == 400
    assert "Several notebooks" in response.get_json()["detail"]


def test_the_starter_notebook_is_served_with_the_starter_code(site: Any) -> None:
    client, student, _ = site
    detail = client.get("/api/v1/assignments/attention", headers=student).get_json()
    assert {"starter/attention.py", "starter/attention.ipynb"} <= set(detail["files"])
    served = client.get("/api/v1/assignments/attention/files/starter/attention.ipynb",
                        headers=student)
    assert served.status_code == 200
    cells = [c for c in json.loads(served.data)["cells"] if c["cell_type"] == "code"]
    assert "def attention(" in "".join(cells[0]["source"])
    assert 'autograde.check("attention")' in "".join(cells[1]["source"])
