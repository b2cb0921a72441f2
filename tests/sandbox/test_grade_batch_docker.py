"""A folder graded through the Docker backend's one warm pool, several submissions at once,
judged as the corpus manifest says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from assignments import Assignment
from devkit.paths import CORPUS, REPO
from grader.pipeline import GradingPipeline
from sandbox.docker_backend import DockerBackend
from service.cli.batch import Entry, grade_all

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAMES = ("correct_einsum.py", "softmax_dim_minus2.py", "mask_inverted_where.py")


def test_submissions_graded_at_once_share_the_warm_pool(docker_backend: DockerBackend,
                                                        attention: Assignment) -> None:
    manifest = tomllib.loads((CORPUS / "attention" / "manifest.toml").read_text())["files"]
    entries = [Entry(name, {name: (CORPUS / "attention" / name).read_bytes()}) for name in NAMES]
    entries.append(Entry("notes.txt", problem="neither a .py file nor a folder"))
    seen = []
    outcomes = grade_all(GradingPipeline(backend=docker_backend), attention, entries, jobs=2,
                         seed=5, done=lambda outcome: seen.append(outcome.entry.name))
    assert sorted(seen) == sorted(e.name for e in entries)
    assert [o.entry.name for o in outcomes] == [e.name for e in entries]
    for outcome in outcomes[:3]:
        assert outcome.document is not None, outcome.error
        assert outcome.document["autograde"]["backend"] == "docker"
        assert outcome.document["autograde"]["isolation"] == "container mode, default runtime"
        expected = manifest[outcome.entry.name]
        assert [d["code"] for d in outcome.document["diagnoses"]] == expected["codes"]
        assert outcome.document["score"] == expected["score"]
    assert outcomes[3].error == "neither a .py file nor a folder"


def test_a_folder_graded_in_the_fork_server_mode_is_judged_as_the_manifest_says(
        tmp_path: Path) -> None:
    manifest = tomllib.loads((CORPUS / "attention" / "manifest.toml").read_text())["files"]
    folder, out = tmp_path / "submissions", tmp_path / "out"
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_bytes((CORPUS / "attention" / name).read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "grade", "--assignment", "attention",
         str(folder), "--backend", "docker", "--fork-server", "--seed", "5", "--jobs", "2",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "at once on the docker sandbox's fork-server mode;" in done.stdout
    for name in NAMES:
        line = next(line for line in done.stdout.splitlines() if name in line)
        expected = manifest[name]
        assert f"{expected['score']:g} / 11" in line, line
        assert (expected["codes"][0] if expected["codes"] else "none") in line, line
        document = json.loads((out / name.removesuffix(".py")).with_suffix(".json").read_text())
        assert document["autograde"]["isolation"] == "fork-server mode, default runtime"
