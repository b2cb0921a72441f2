"""End to end on gunicorn, a Celery worker on Redis and PostgreSQL, through the CLI: a
multi-file submission keeps and uses every file; student text reaches the terminal without
control sequences."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devkit.courses import PASSWORD
from devkit.paths import CORPUS
from devkit.stack import Stack, redis_or_skip

pytestmark = pytest.mark.slow

HELPERS = (CORPUS / "attention" / "correct_helpers.py").read_text()


@pytest.fixture
def stack(make_stack: Callable[..., Stack], pg_url: str) -> Iterator[Stack]:
    redis_or_skip()
    built = make_stack(pg_url)
    for args in (["admin", "create-course", "ml101"], ["admin", "sync-assignments", "ml101"],
                 ["admin", "assignment", "ml101", "attention", "--rate-limit", "100/60",
                  "--release-results"]):
        done = built.autograde(*args)
        assert done.returncode == 0, done.stderr
    done = built.autograde("admin", "create-user", "student", "--password-stdin",
                           stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert built.autograde("admin", "enrol", "ml101", "student").returncode == 0
    built.start_server()
    built.start_worker()
    login = built.autograde("login", "--username", "student", "--password-stdin",
                            stdin=PASSWORD + "\n")
    assert login.returncode == 0, login.stderr
    yield built


def test_a_two_file_submission_is_stored_whole_and_scores_full(stack: Stack,
                                                                tmp_path: Path) -> None:
    helpers, _, entry = HELPERS.partition("def attention(")
    (tmp_path / "helper.py").write_text(helpers)
    (tmp_path / "attention.py").write_text(
        "from helper import _additive_bias, _check_rows, _softmax, math\n\n\n"
        "def attention(" + entry)
    done = stack.autograde("submit", str(tmp_path / "attention.py"), str(tmp_path / "helper.py"),
                           "--assignment", "attention", "--json", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["score"] == document["max_score"] > 0, document["diagnoses"]
    status = stack.autograde("status", "1", "--json")
    assert status.returncode == 0
    duplicate = stack.autograde("submit", str(tmp_path / "attention.py"),
                                str(tmp_path / "attention.py"), "--assignment", "attention",
                                "--no-wait")
    assert duplicate.returncode != 0 and "Two files are called attention.py" in duplicate.stderr


def test_control_sequences_from_student_code_never_reach_the_terminal(stack: Stack,
                                                                      tmp_path: Path) -> None:
    hostile = tmp_path / "attention.py"
    hostile.write_text(
        "import sys\n"
        "print('\\x1b[2J\\x1b[H\\x1b]52;c;cm0gLXJmIH4=\\x07', file=sys.stderr)\n"
        "def attention(q, k, v, allowed):\n"
        "    raise RuntimeError('\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;cm0gLXJmIH4=\\x07 nope')\n")
    done = stack.autograde("submit", str(hostile), "--assignment", "attention", timeout=600)
    assert "nope" in done.stdout, done.stdout + done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "\x07" not in done.stdout + done.stderr
    again = stack.autograde("status", "1")
    assert "nope" in again.stdout and "\x1b" not in again.stdout
