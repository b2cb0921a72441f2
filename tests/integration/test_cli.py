"""The ``autograde`` command line: its help, and a student's commands on a real server (gunicorn
on the test's database), including what it says when it cannot do what was asked."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devkit.courses import PASSWORD, Factory
from devkit.paths import CORPUS, REPO
from devkit.stack import Stack
from service.cli.parser import build_parser

SUBMISSION = str(CORPUS / "attention" / "syntax_missing_colon.py")


def _parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _parsers(child)


def test_every_option_of_every_command_says_what_it_is_for() -> None:
    missing = [f"{prog}: {action.dest}" for prog, parser in _parsers(build_parser())
               for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction)
               and not action.help]
    assert missing == []


def test_defaults_are_shown_and_commands_are_grouped_by_audience() -> None:
    parsers = dict(_parsers(build_parser()))
    submit = parsers["autograde submit"].format_help()
    assert "(default: 600.0)" in submit
    assert "(default: None)" not in submit and "(default: False)" not in submit
    for name in ("autograde submit", "autograde status", "autograde grade"):
        # a flag's default is its opposite: "--no-plots ... (default: True)" read as a lie
        text = " ".join(parsers[name].format_help().split())
        assert "(default: True)" not in text, name
        assert "--no-plots leave out the text pictures" in text, name
    overview = parsers["autograde"].format_help()
    student, local, admin = (overview.index(title) for title in (
        "On a grading service", "On this machine", "Running and administering"))
    assert student < overview.index("  submissions") < local < overview.index("  grade") < admin
    assert admin < overview.index("  run-embedded")


def _cli(*args: str, env: dict[str, str], stdin: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "service.cli", *args], env=env, cwd=REPO,
                          input=stdin, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith("AUTOGRADE_")}
    env.update(AUTOGRADE_CONFIG_DIR=str(tmp_path / "client"), PYTHONPATH=str(REPO), **extra)
    return env


def test_version() -> None:
    done = _cli("--version", env=_env(Path("/nonexistent")))
    assert done.returncode == 0 and done.stdout.startswith("autograde ")


@pytest.mark.parametrize("args", [("whoami",), ("submissions",), ("assignments",),
                                  ("status", "1"), ("submit", SUBMISSION, "--assignment", "x")])
def test_without_a_login_the_command_says_so(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = _cli(*args, env=_env(tmp_path, AUTOGRADE_URL="http://127.0.0.1:9"))
    assert done.returncode == 2
    assert done.stderr.startswith("autograde: not logged in to http://127.0.0.1:9: "
                                  "run `autograde login` first"), done.stderr


def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    done = _cli("whoami", "--url", "http://127.0.0.1:9",
                env=_env(tmp_path, AUTOGRADE_TOKEN="whatever"))
    assert done.returncode == 2
    assert "cannot reach the grading service at http://127.0.0.1:9" in done.stderr
    login = _cli("login", "--url", "http://127.0.0.1:9", "--username", "a", "--password-stdin",
                 env=_env(tmp_path), stdin="pw\n")
    assert login.returncode == 2 and "cannot reach" in login.stderr


def test_logout_when_not_logged_in_does_nothing(tmp_path: Path) -> None:
    done = _cli("logout", env=_env(tmp_path))
    assert done.returncode == 0 and "Not logged in" in done.stdout


@pytest.fixture
def server(make_stack: Callable[..., Stack], sqlite_url: str, factory: Factory) -> Stack:
    course = factory.course("ml101")
    factory.user("ada", course=course)
    stack = make_stack(sqlite_url, broker_url="memory://", RATE_LIMIT_COUNT=100)
    stack.start_server()
    return stack


@pytest.mark.slow
def test_a_students_session_on_a_real_server(server: Stack) -> None:
    login = server.autograde("login", "--username", "ada", "--password-stdin",
                             stdin=PASSWORD + "\n")
    assert login.returncode == 0, login.stderr

    whoami = server.autograde("whoami")
    assert whoami.returncode == 0, whoami.stderr
    assert whoami.stdout.splitlines() == [f"Logged in to {server.url} as ada, student.",
                                          "  ml101            student"]
    assert json.loads(server.autograde("whoami", "--json").stdout)["username"] == "ada"

    listing = server.autograde("assignments")
    assert listing.returncode == 0, listing.stderr
    assert "ml101" in listing.stdout and "attention" in listing.stdout
    local = server.autograde("assignments", "list")
    assert "multi-head-attention" in local.stdout  # this installation's, whatever the course

    assert "You have no submissions yet." in server.autograde("submissions").stdout
    ids = []
    for _ in range(3):
        done = server.autograde("submit", SUBMISSION, "--assignment", "attention", "--no-wait",
                                "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])

    first = server.autograde("submissions", "--per-page", "2")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert [int(line.split()[0]) for line in lines[1:3]] == sorted(ids, reverse=True)[:2]
    assert "queued" in lines[1]
    assert lines[-1] == "Submissions 1 to 2 of 3 (page 1 of 2); next: --page 2."
    second = server.autograde("submissions", "--per-page", "2", "--page", "2")
    assert second.stdout.splitlines()[-1] == "Submissions 3 to 3 of 3 (page 2 of 2)."
    page = json.loads(server.autograde("submissions", "--json", "--assignment",
                                       "attention").stdout)
    assert page["total"] == 3 and len(page["submissions"]) == 3
    past = server.autograde("submissions", "--page", "9")
    assert "past the end: you have 3 submission(s)" in past.stdout
    unknown = server.autograde("submissions", "--assignment", "nope")
    assert unknown.returncode == 2 and unknown.stderr.startswith("autograde: ")

    logout = server.autograde("logout")
    assert logout.returncode == 0 and f"Logged out of {server.url}." in logout.stdout
    after = server.autograde("whoami")
    assert after.returncode == 2 and "not logged in" in after.stderr


@pytest.mark.slow
def test_a_connection_kept_alive_serves_a_request_after_a_pause(server: Stack) -> None:
    """A script that pauses between two requests reuses its connection (gunicorn's own
    keep-alive, 2 s, closed it under the second request: "connection reset")."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        answers = connection.makefile("rb")
        for pause in (0.0, 3.0):
            time.sleep(pause)
            connection.sendall(request)
            status = answers.readline()
            assert status.startswith(b"HTTP/1.1 200"), (pause, status)
            length = 0
            while (line := answers.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            answers.read(length)


def test_a_revoked_token_is_told_apart_from_no_login(server: Stack) -> None:
    headers = server.login("ada")
    token = headers["Authorization"].removeprefix("Bearer ")
    env = dict(server.env, AUTOGRADE_TOKEN=token)
    done = _cli("logout", env=env)
    assert done.returncode == 0 and "Revoked AUTOGRADE_TOKEN" in done.stdout
    again = _cli("submissions", env=env)
    assert again.returncode == 2
    assert "no longer accepts AUTOGRADE_TOKEN (expired or revoked)" in again.stderr


def test_a_server_that_is_not_autograde_is_named(tmp_path: Path) -> None:
    """Any HTTP server that answers HTML: the CLI does not print its page."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"<html>not here</html>")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}"
        done = _cli("whoami", "--url", url, env=_env(tmp_path, AUTOGRADE_TOKEN="t"))
    finally:
        httpd.shutdown()
    assert done.returncode == 2
    assert "did not answer as an autograde service (HTTP 404" in done.stderr
    assert "<html>" not in done.stderr
