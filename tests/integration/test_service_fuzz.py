"""Property-based fuzzing of the API from its own OpenAPI document: no input gives a 5xx."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings

from service.models import CourseRole, Role
from tests.servicekit import Factory


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
