"""The HTTP client of the student's commands: credentials, API calls, and the report printed.

Every failure becomes a ClientError that says in one line what happened and what to do: not
logged in, a token the server no longer takes, a server that does not answer or is not an
autograde service, or the server's own problem detail.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import requests

from grader.report import render_report
from service.cli.terminal import terminal_safe

DEFAULT_URL = "http://127.0.0.1:8000"
LONG_POLL_SECONDS = 20  # below the request timeout (30 s) and the server's cap


class ClientError(Exception):
    """A failure to show the user as one line (the server's problem detail, when it sent one)."""


def credentials_path() -> Path:
    base = os.environ.get("AUTOGRADE_CONFIG_DIR") or Path.home() / ".config" / "autograde"
    return Path(base) / "credentials.json"


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str | None
    from_environment: bool = False
    """The token is ``AUTOGRADE_TOKEN``'s, not the stored one."""

    @classmethod
    def load(cls, url: str | None = None) -> Credentials:
        stored: dict[str, Any] = {}
        path = credentials_path()
        if path.is_file():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ClientError(f"cannot read the stored login {path} ({exc}); remove it "
                                  "and log in again") from None
        url = (url or os.environ.get("AUTOGRADE_URL") or stored.get("url") or DEFAULT_URL)
        url = url.rstrip("/")
        if os.environ.get("AUTOGRADE_TOKEN"):
            return cls(url, os.environ["AUTOGRADE_TOKEN"], from_environment=True)
        # A token stored for another service is not sent to this one.
        token = stored.get("token") if stored.get("url", "").rstrip("/") == url else None
        return cls(url, token)

    def save(self, username: str) -> Path:
        path = credentials_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump({"url": self.url, "token": self.token, "username": username}, handle)
        return path

    @staticmethod
    def forget() -> bool:
        """Remove the stored login; False when there was none."""
        try:
            credentials_path().unlink()
        except FileNotFoundError:
            return False
        return True


class Client:
    """A thin HTTP client of the API; every error becomes a ClientError with a clear message."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0) -> None:
        self.credentials = credentials
        self.http = requests.Session()
        self.timeout = timeout
        if credentials.token:
            self.http.headers["Authorization"] = f"Bearer {credentials.token}"

    def call(self, method: str, path: str, *, login: bool = True, **kwargs: Any) -> Any:
        """The JSON body of an API call; ``login``: the call needs a logged-in user."""
        service = self.credentials.url
        if login and not self.credentials.token:
            raise ClientError(f"not logged in to {service}: run `autograde login` first"
                              + ("" if service == DEFAULT_URL else f" (with --url {service})"))
        try:
            response = self.http.request(method, service + path, timeout=self.timeout,
                                         **kwargs)
        except requests.ConnectionError:
            raise ClientError(f"cannot reach the grading service at {service} (is it "
                              "running, and is that its address? `autograde login --url URL` "
                              "changes it)") from None
        except requests.Timeout:
            raise ClientError(f"the grading service at {service} did not answer within "
                              f"{self.timeout:g} s; try again later") from None
        except requests.RequestException as exc:
            raise ClientError(f"the request to {service} failed ({type(exc).__name__})") from None
        try:
            body = response.json() if response.content else None
        except ValueError:
            raise ClientError(f"{service} did not answer as an autograde service (HTTP "
                              f"{response.status_code}, not JSON): is that its address?") from None
        if response.status_code == 401 and login:
            source = ("AUTOGRADE_TOKEN" if self.credentials.from_environment
                      else "your stored login")
            raise ClientError(f"{service} no longer accepts {source} (expired or revoked): "
                              "log in again with `autograde login`")
        if response.status_code >= 400:
            detail = body.get("detail") if isinstance(body, dict) else None
            raise ClientError(detail or f"{service} answered {response.status_code} "
                                        f"{response.reason}")
        return body

    def login(self, username: str, password: str) -> Credentials:
        body = self.call("POST", "/auth/login", login=False,
                         json={"username": username, "password": password})
        return Credentials(self.credentials.url, body["token"])

    def logout(self) -> None:
        """Revoke this token on the server."""
        self.call("POST", "/auth/logout")

    def me(self) -> Any:
        return self.call("GET", "/auth/me")

    def assignments(self) -> Any:
        return self.call("GET", "/api/v1/assignments")["assignments"]

    def submissions(self, *, assignment: str | None, limit: int, offset: int) -> Any:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if assignment:
            params["assignment"] = assignment
        return self.call("GET", "/api/v1/submissions", params=params)

    def submit(self, assignment: str, files: list[Path], course: str | None) -> Any:
        parts = []
        for path in files:
            try:
                parts.append(("files", (path.name, path.read_bytes())))
            except OSError as exc:
                raise ClientError(f"cannot read {path}: {exc.strerror}") from None
        params = {"course": course} if course else None
        return self.call("POST", f"/api/v1/assignments/{assignment}/submissions", files=parts,
                         params=params)

    def submission(self, submission_id: int, *, wait: float = 0,
                   since: str | None = None) -> Any:
        """One submission; ``wait`` > 0 long-polls: the server answers when its status is no
        longer ``since`` (or after ``wait`` seconds, or at once when it is busy)."""
        params = {"wait": int(wait), **({"since": since} if since else {})} if wait >= 1 \
            else None
        return self.call("GET", f"/api/v1/submissions/{submission_id}", params=params)

    def wait(self, submission_id: int, *, progress: TextIO | None, timeout: float,
             interval: float = 0.5, last: str | None = None) -> Any:
        """Follow a submission until graded or failed, printing each status change to
        ``progress``. Each request is a long poll, so a result shows the moment it is stored;
        an answer that comes back at once unchanged (a busy or older server) is followed by a
        pause of ``interval``, as plain polling would."""
        deadline = time.monotonic() + timeout
        seen = last
        while True:
            asked = time.monotonic()
            wait = min(LONG_POLL_SECONDS, max(deadline - asked, 0)) if seen else 0
            body = self.submission(submission_id, since=seen, wait=wait)
            status = body["status"]
            shown = status
            if status == "queued" and body.get("waiting_for_sandbox"):
                shown = "queued (waiting for a grading machine; it will be graded by itself)"
            if shown != last and progress is not None:
                attempt = f" (attempt {body['attempts']})" if status == "running" and \
                    body["attempts"] > 1 else ""
                print(f"  {shown}{attempt}", file=progress, flush=True)
                last = shown
            if status in ("graded", "failed"):
                return body
            if time.monotonic() > deadline:
                raise ClientError(f"submission {submission_id} is still {status} after "
                                  f"{timeout:g} s; check later with `autograde status "
                                  f"{submission_id}`")
            if status == seen and time.monotonic() - asked < interval:
                time.sleep(interval)
            seen = status


def final_line(body: dict[str, Any]) -> str:
    """The score that counts for this submission, as the page says it."""
    results = body.get("results") or {}
    if body.get("score") is None:
        held = results.get("withheld_checks", 0)
        points = results.get("max_score", 0) - results.get("shown_max_score",
                                                           results.get("max_score", 0))
        return (f"{held} more check(s) ({points:g} points) graded but shown only after "
                "release.\nFinal score: shown once every check is released." if held
                else "Final score: shown once every check is released.")
    text = f"Final score: {body['score']:g} / {body['max_score']:g}"
    if body.get("adjusted"):
        return text + " (set by your instructor)."
    if body.get("late_days"):
        return text + f" ({body['late_days']} day(s) late)."
    return text + "."


def print_outcome(body: dict[str, Any], *, as_json: bool, out: TextIO = sys.stdout,
                  plots: bool = True) -> int:
    """The same report as ``autograde grade``; exit status 0 when graded. Text from the server
    is stripped of terminal control sequences (JSON output escapes them)."""

    def say(text: str) -> None:
        print(terminal_safe(text), file=out)

    if as_json:
        json.dump(body["results"] if body.get("results") is not None else body, out, indent=2)
        out.write("\n")
    elif body["status"] == "graded" and body.get("results") is not None:
        names = ", ".join(f["name"] for f in body["files"])
        say(f"{body['assignment']} — {names} (submission {body['id']})\n")
        say(render_report(body["results"], plots=plots))
        say("\n" + final_line(body))
        for comment in body.get("comments") or []:
            say(f"\nFrom {comment.get('author') or 'your instructor'}: {comment['body']}")
    elif body["status"] == "failed":
        say(f"Submission {body['id']} could not be graded: {body.get('message')}")
    else:
        say(f"Submission {body['id']}: {body['status']}")
    return 0 if body["status"] == "graded" else (1 if body["status"] == "failed" else 0)
