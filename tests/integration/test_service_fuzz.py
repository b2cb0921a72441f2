"""Property-based fuzzing of the API from its own OpenAPI document: no input gives a 5xx."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
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
