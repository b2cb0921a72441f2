"""``autograde grade DIR``: a folder of submissions graded as the one-off gradings would be,
bad entries reported in the summary, never fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assignments import Assignment
from devkit.notebooks import notebook
from devkit.paths import CORPUS, REPO
from grader.pipeline import GradingPipeline
from service.cli.batch import Entry, Outcome, collect, document_names

SEED = 3


def _judged(document: dict[str, Any]) -> dict[str, Any]:
    """What a grading decided, without its timings."""
    return {"score": document["score"], "tests": document["tests"],
            "codes": [d["code"] for d in document["diagnoses"]]}


def test_each_python_file_and_each_subfolder_is_one_submission(tmp_path: Path) -> None:
    (tmp_path / "alice.py").write_bytes(b"a = 1\n")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "attention.py").write_bytes(b"b = 1\n")
    (tmp_path / "bob" / "helper.py").write_bytes(b"c = 1\n")
    (tmp_path / "bob" / "README.md").write_text("notes")
    (tmp_path / "bob" / "__pycache__").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "carl.ipynb").write_bytes(b"{}")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".DS_Store").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    entries = collect(tmp_path)
    assert entries == [
        Entry("alice.py", {"alice.py": b"a = 1\n"}),
        Entry("bob", {"attention.py": b"b = 1\n", "helper.py": b"c = 1\n"}),
        Entry("carl.ipynb", {"carl.ipynb": b"{}"}),
        Entry("empty", problem="the folder holds no .py file or notebook"),
        Entry("notes.txt", problem="neither a .py file, a notebook nor a folder"),
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_an_entry_with_its_problem(tmp_path: Path) -> None:
    secret = tmp_path / "locked.py"
    secret.write_bytes(b"x")
    secret.chmod(0)
    assert collect(tmp_path)[0].problem == "cannot read locked.py: Permission denied"


def test_two_entries_of_one_stem_keep_their_documents_apart() -> None:
    document = {"score": 1}
    outcomes = [Outcome(Entry("alice"), document), Outcome(Entry("alice.py"), document),
                Outcome(Entry("bob.py"), document), Outcome(Entry("carl.py"), error="bad")]
    assert [name for _, name in document_names(outcomes)] == ["alice.json", "alice.py.json",
                                                              "bob.json"]


@pytest.mark.slow
def test_a_folder_is_graded_as_one_off_gradings_are(tmp_path: Path, attention: Assignment,
                                                    local_pipeline: GradingPipeline) -> None:
    folder, out = tmp_path / "submissions", tmp_path / "results"
    folder.mkdir()
    (folder / "alice.py").write_bytes((CORPUS / "attention" / "correct_matmul.py").read_bytes())
    (folder / "bob").mkdir()
    wrong_axis = (CORPUS / "attention" / "softmax_dim_minus2.py").read_bytes()
    (folder / "bob" / "attention.py").write_bytes(wrong_axis)
    correct = (CORPUS / "attention" / "correct_matmul.py").read_text()
    (folder / "dana.ipynb").write_bytes(notebook(("markdown", "# My lab"), ("code", correct),
                                                 ("code", "attention")))
    (folder / "notes.txt").write_text("not a submission")

    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention", str(folder),
         "--backend", "local", "--seed", str(SEED), "--jobs", "2", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr  # one entry was not a submission
    rows = json.loads(done.stdout)
    assert [(r["submission"], r["graded"]) for r in rows] == [
        ("alice.py", True), ("bob", True), ("dana.ipynb", True), ("notes.txt", False)]
    assert rows[0]["score"] == attention.max_score and rows[0]["codes"] == []
    assert rows[1]["codes"] == ["softmax-wrong-axis"]
    # a notebook, graded by its code cells
    assert rows[2]["score"] == attention.max_score and rows[2]["codes"] == []
    assert rows[3]["error"] == "neither a .py file, a notebook nor a folder"

    assert sorted(p.name for p in out.iterdir()) == ["alice.json", "bob.json", "dana.json",
                                                     "summary.json"]
    assert json.loads((out / "summary.json").read_text()) == rows
    batch = json.loads((out / "bob.json").read_text())
    alone = local_pipeline.grade(attention, {"attention.py": wrong_axis}, seed=SEED)
    assert _judged(batch) == _judged(alone)
    assert batch["autograde"]["seed"] == SEED


def test_the_summary_table_names_every_entry(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_bytes(b"def attention(:\n")
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention",
         str(tmp_path), "--backend", "local"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 1, done.stderr
    assert "broken.py" in done.stdout and "syntax-error" in done.stdout
    assert "not graded: the folder holds no .py file or notebook" in done.stdout
    assert "Graded 1 of 2 in" in done.stdout and "1 not graded" in done.stdout


@pytest.mark.parametrize(("args", "error"), [
    (["{dir}", "{dir}/x.py"], "a folder is graded alone"),
    (["{dir}/x.py", "--out", "{dir}"], "--jobs, --out and --fork-server are for grading a folder"),
    (["{dir}/x.py", "--fork-server"], "--fork-server are for grading a folder"),
    (["{dir}", "--fork-server", "--backend", "local"], "--fork-server is a mode of the docker"),
    (["{dir}", "--jobs", "0"], "--jobs is at least 1"),
    (["{dir}/empty"], "nothing to grade in"),
])
def test_folder_mistakes_are_refused_plainly(tmp_path: Path, args: list[str],
                                             error: str) -> None:
    (tmp_path / "x.py").write_text("x = 1\n")
    (tmp_path / "empty").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention",
         *[arg.format(dir=tmp_path) for arg in args]],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2 and error in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
