"""Property-based fuzzing of the API from its own OpenAPI document, its tokens and headers: no
input gives a 5xx, and every answer that is not a success is a problem document."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from devkit.courses import Factory
from devkit.stack import Stack, redis_or_skip
from service.models import CourseRole, Role


@pytest.fixture
def fuzzed(app: Flask, factory: Factory) -> tuple[Any, dict[str, str]]:
    course = factory.course()
    factory.user("student", course=course)
    teacher = factory.user("teacher", role=Role.INSTRUCTOR, course=course,
                           course_role=CourseRole.INSTRUCTOR)
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    return schema, factory.headers(teacher)


@pytest.mark.slow
def test_no_input_gives_a_server_error(fuzzed: tuple[Any, dict[str, str]]) -> None:
    schema, headers = fuzzed
    failures = []
    for operation in schema.get_all_operations():
        op = operation.ok()

        @settings(max_examples=10, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy())
        def check(case: Any) -> None:
            case.headers = {**(case.headers or {}), **headers}
            response = case.call()
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        check()
    assert failures == []


# Operations that would end the fuzzing's own login, not probe anything.
_OWN_LOGIN = {("POST", "/auth/logout"), ("DELETE", "/auth/tokens/{token_id}")}


@pytest.mark.slow  # a real gunicorn on PostgreSQL, ~1,000 calls
def test_live_fuzzing_on_postgresql_gives_no_server_error(
        pg_factory: Factory, pg_url: str, make_stack: Callable[..., Stack]) -> None:
    """Schemathesis against gunicorn on PostgreSQL, as a student and as an instructor, with
    valid and invalid inputs: no call may give a 5xx."""
    redis_or_skip()
    course = pg_factory.course()
    student = pg_factory.user("student", course=course)
    teacher = pg_factory.user("teacher", role=Role.INSTRUCTOR, course=course,
                              course_role=CourseRole.INSTRUCTOR)
    roles = {"student": pg_factory.headers(student), "instructor": pg_factory.headers(teacher)}
    stack = make_stack(pg_url, WEBHOOK_TIMEOUT_SECONDS=1)
    stack.start_server()
    schema = schemathesis.openapi.from_url(stack.url + "/api/v1/openapi.json")
    failures: list[str] = []
    calls: list[int] = []

    def fuzz(op: Any, mode: GenerationMode, role: str, headers: dict[str, str]) -> None:
        @settings(max_examples=8, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=op.as_strategy(generation_mode=mode))
        def check(case: Any) -> None:
            case.headers = {**(case.headers or {}), **headers}
            response = case.call(base_url=stack.url, timeout=30)
            calls.append(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{role}: {case.method} {case.formatted_path}: "
                                f"{response.status_code}")

        check()

    for operation in schema.get_all_operations():
        op = operation.ok()
        if (op.method.upper(), op.path) in _OWN_LOGIN:
            continue
        for role, headers in roles.items():
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz(op, mode, role, headers)
    assert len(calls) > 300
    assert failures == [], "\n".join(failures[:20]) + "\n" + stack.log("web")


def _is_problem(status: int, content_type: str, body: bytes) -> bool:
    """Whether an answer is the API's problem document with the status it was sent with."""
    if content_type.split(";")[0].strip() != "application/problem+json":
        return False
    document = json.loads(body)
    return bool(document["status"] == status and document["title"] and document["detail"])


# Any text a header may carry on the wire (latin-1), control characters and all but the line
# breaks that would end it.
_HEADER_TEXT = st.text(st.characters(max_codepoint=255, exclude_characters="\r\n"), max_size=80)


def test_any_token_or_header_gets_a_problem_document(app: Flask, factory: Factory) -> None:
    """Tokens and headers of any characters, in the app: a bad token is a 401 problem, no
    header gives anything but a success or a problem document."""
    course = factory.course()
    headers = factory.headers(factory.user("student", course=course))
    client = app.test_client()

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(token=_HEADER_TEXT, name=st.sampled_from(["Accept", "Content-Type", "Cookie",
                                                     "X-Forwarded-For", "If-None-Match"]),
           value=_HEADER_TEXT)
    def check(token: str, name: str, value: str) -> None:
        answer = client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401
        assert _is_problem(401, answer.content_type, answer.data), answer.data[:200]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        answer = client.get("/api/v1/assignments", headers={**headers, name: value})
        assert answer.status_code == 200 or _is_problem(answer.status_code, answer.content_type,
                                                        answer.data), answer.data[:200]

    check()


def _raw(url: str, request: bytes) -> tuple[int, str, bytes, dict[str, str]]:
    """Send bytes as they are (no client library would send these) and read the answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), fields.get("content-type", ""), body, fields


def _get(path: bytes, *headers: bytes) -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n" + b"".join(
        h + b"\r\n" for h in headers) + b"Connection: close\r\n\r\n"


_SIGNED_IN = b"Authorization: Bearer <token>"
"""Replaced by a valid token when sent."""

# What the web server refuses before the app sees it, and what the app refuses: each on the
# API, with the status it must get (as a problem document).
_MALFORMED = [
    ("a NUL in the token", _get(b"/auth/me", b"Authorization: Bearer ag_x\x00y"), 401),
    ("a control character in the token", _get(b"/auth/me", b"Authorization: Bearer a\x01"), 401),
    ("a latin-1 token", _get(b"/auth/me", b"Authorization: Bearer \xff\xfe"), 401),
    ("no bearer scheme", _get(b"/auth/me", b"Authorization: Basic YTpi"), 401),
    ("a NUL in another header", _get(b"/api/v1/assignments", b"X-Note: a\x00b"), 400),
    ("a NUL in the cookie", _get(b"/api/v1/assignments", b"Cookie: s=\x00"), 400),
    ("a header name with a space", _get(b"/api/v1/assignments", b"X Note: 1"), 400),
    ("a bad Content-Length", _get(b"/api/v1/assignments", b"Content-Length: x"), 400),
    ("a raw byte in the path", _get(b"/api/v1/assignments/a\xffb"), 400),
    ("%00 in a slug", _get(b"/api/v1/assignments/atten%00tion", _SIGNED_IN), 404),
    ("%ff in a slug", _get(b"/api/v1/assignments/atten%fftion", _SIGNED_IN), 404),
    ("an overlong surrogate in a slug", _get(b"/api/v1/assignments/a%ed%a0%80", _SIGNED_IN), 404),
    ("%00 in a query", _get(b"/api/v1/assignments?limit=%00"), 400),
    ("a header of 9 KB", _get(b"/api/v1/assignments", b"X-Big: " + b"a" * 9000), 431),
    ("120 headers", _get(b"/api/v1/assignments", *(b"X-H%d: 1" % i for i in range(120))), 431),
    ("a path of 9 KB", _get(b"/api/v1/assignments?" + b"a" * 9000), 414),
    ("a body that is no UTF-8", b"POST /auth/login HTTP/1.1\r\nHost: t\r\nContent-Type: "
     b"application/json\r\nContent-Length: 3\r\nConnection: close\r\n\r\n\xff\xfe{", 400),
]


@pytest.mark.slow  # a real gunicorn
def test_live_malformed_requests_get_problem_documents(
        pg_factory: Factory, pg_url: str, make_stack: Callable[..., Stack]) -> None:
    """Bytes no client library sends, on a real gunicorn: the server's own refusals (control
    characters in headers, limits) and the app's are the same problem document, and a token
    that cannot be a token is a 401. Then tokens of arbitrary bytes, fuzzed."""
    redis_or_skip()
    token = pg_factory.headers(pg_factory.user("student", course=pg_factory.course()))
    signed_in = token["Authorization"].encode()
    stack = make_stack(pg_url)
    stack.start_server()
    wrong = []
    for what, request, status in _MALFORMED:
        got, content_type, body, _ = _raw(
            stack.url, request.replace(_SIGNED_IN, b"Authorization: " + signed_in))
        if got != status or not _is_problem(got, content_type, body):
            wrong.append(f"{what}: {got} {content_type} {body[:120]!r}")
    assert wrong == [], "\n".join(wrong)

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(token=st.binary(max_size=60).filter(lambda b: b"\r" not in b and b"\n" not in b))
    def check(token: bytes) -> None:
        got, content_type, body, fields = _raw(
            stack.url, _get(b"/auth/me", b"Authorization: Bearer " + token))
        assert got == 401 and _is_problem(got, content_type, body), (token, got, body[:200])
        assert fields["www-authenticate"].startswith("Bearer")

    check()
