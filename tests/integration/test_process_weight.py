"""The web process and the command line start light: no torch, no grading pipeline.

Each check runs in a fresh interpreter, since this test session has long imported everything.
Only the worker (``service.tasks``) and the commands that grade load the pipeline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from devkit.paths import REPO

HEAVY = ("torch", "safetensors.torch", "grader.pipeline", "grader.checks", "assignments.model",
         "grader.loader", "sandbox.runner.executor", "service.tasks",
         "service.grading.exactly_once")

REPORT = """
import json, sys
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def _loaded(code: str, tmp_path: Path) -> list[str]:
    """The heavy modules still loaded after ``code`` ran in a new interpreter."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AUTOGRADE_")}
    env.update(AUTOGRADE_DATABASE_URL=f"sqlite:///{tmp_path / 'autograde.db'}",
               AUTOGRADE_BROKER_URL="memory://", AUTOGRADE_SECRET_KEY="test",
               AUTOGRADE_CONFIG_DIR=str(tmp_path / "client"))
    done = subprocess.run([sys.executable, "-c", code + REPORT.format(heavy=HEAVY)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_web_process_serves_without_torch(tmp_path: Path) -> None:
    code = """
from service.core import db
from service.app import create_app
db.upgrade(create_app().config["DATABASE_URL"])
app = create_app()
client = app.test_client()
assert client.get("/healthz").status_code == 200
assert client.get("/login").status_code == 200
assert client.get("/api/v1/openapi.json").status_code == 200
"""
    assert _loaded(code, tmp_path) == []


def test_the_web_side_reads_assignments_without_their_hidden_parts(tmp_path: Path) -> None:
    code = """
from assignments import list_assignments, load_spec
for slug in list_assignments():
    spec = load_spec(slug)
    assert spec.max_score == (11 if slug in ("attention", "multi-head-attention") else 10)
    assert "README.md" in spec.public_files and spec.version
"""
    assert _loaded(code, tmp_path) == []


def test_cli_help_and_service_commands_start_without_torch(tmp_path: Path) -> None:
    code = """
from service.cli import main
for argv in (["--help"], ["submit", "--help"], ["admin", "--help"], ["status", "1"]):
    try:
        main(argv)
    except SystemExit:
        pass
"""
    assert _loaded(code, tmp_path) == []


def test_the_autograde_command_answers_help() -> None:
    done = subprocess.run([sys.executable, "-m", "service.cli", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "submit" in done.stdout


def test_the_worker_side_does_load_the_pipeline(tmp_path: Path) -> None:
    """The counterpart, so the checks above cannot pass by looking at the wrong names."""
    loaded = _loaded("import service.tasks", tmp_path)
    assert {"torch", "grader.pipeline", "service.tasks",
            "service.grading.exactly_once"} <= set(loaded)
