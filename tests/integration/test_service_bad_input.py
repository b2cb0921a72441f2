"""Bad input on PostgreSQL: every case gets a 4xx with a message that says what was wrong (never
a 500), multi-file uploads keep every file, pages render any stored text."""

from __future__ import annotations

import io
import re
import struct
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from devkit.courses import PASSWORD, Factory, signed_in
from service.core import db
from service.models import (
    CourseAssignment,
    CourseRole,
    Result,
    Role,
    Submission,
    SubmissionFile,
    SubmissionStatus,
    User,
    utcnow,
)

GOOD = b"def attention(q, k, v, allowed):\n    return q, q\n"


@pytest.fixture
def site(pg_app: Flask) -> Iterator[tuple[FlaskClient, dict[str, str], dict[str, str]]]:
    factory = Factory(pg_app)
    course = factory.course()
    student = factory.user("stu", course=course)
    teacher = factory.user("prof", role=Role.INSTRUCTOR, course=course,
                           course_role=CourseRole.INSTRUCTOR)
    yield pg_app.test_client(), factory.headers(student), factory.headers(teacher)


def _post(client: FlaskClient, headers: dict[str, str], files: list[tuple[str, bytes]]) -> Any:
    data = {"files": [(io.BytesIO(content), name) for name, content in files]}
    return client.post("/api/v1/assignments/attention/submissions", headers=headers, data=data,
                       content_type="multipart/form-data")


def _problem(response: Any, status: int, words: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)[:500]
    assert response.mimetype == "application/problem+json"
    assert words in response.get_json()["detail"], response.get_json()["detail"]


def _zip(name: str = "attention.py", data: bytes = GOOD,
         compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        archive.writestr(name, data)
    return buffer.getvalue()


def _bad_crc() -> bytes:
    raw = bytearray(_zip(compression=zipfile.ZIP_STORED))
    raw[raw.index(GOOD[:10])] ^= 0x20  # the stored bytes no longer match their CRC
    return bytes(raw)


def _patched(offset_in_header: int, value: int) -> bytes:
    """A zip whose local and central headers have a 16-bit field changed."""
    raw = bytearray(_zip())
    for signature, base in ((b"PK\x03\x04", 4), (b"PK\x01\x02", 6)):
        at = raw.index(signature) + base + offset_in_header
        struct.pack_into("<H", raw, at, value)
    return bytes(raw)


@pytest.mark.parametrize(("archive", "words"), [
    (_bad_crc(), "damaged"),
    (_patched(4, 99), "compression method"),  # 99: AES, which nothing here reads
    (_zip(compression=zipfile.ZIP_BZIP2), "compression method"),
    (_patched(2, 0x1), "encrypted"),  # the general-purpose flag's encryption bit
])
def test_unreadable_zips_are_415(site: Any, archive: bytes, words: str) -> None:
    client, student, _ = site
    _problem(_post(client, student, [("work.zip", archive)]), 415, words)


@pytest.mark.parametrize(("name", "words", "in_zip"), [
    ("a" * 300 + ".py", "at most 255", (400, "at most 255")),
    # zipfile itself ends a name at a NUL: the entry is then not a .py file.
    ("atten\x00tion.py", "control character", (415, "only .py")),
    ("\x1b[2Jattention.py", "control character", (400, "control character")),
    ("atten\u202etion.py", "invisible character", (400, "invisible character")),
    ("CON.py", "device name", (400, "device name")),
    ("=HYPERLINK(1).py", "formula", (400, "formula")),
])
def test_bad_file_names_are_4xx(site: Any, name: str, words: str,
                                in_zip: tuple[int, str]) -> None:
    client, student, _ = site
    _problem(_post(client, student, [(name, GOOD)]), 400, words)
    _problem(_post(client, student, [("work.zip", _zip(name=name))]), *in_zip)


def test_case_twins_of_each_other_or_of_the_entry_file_are_refused(site: Any) -> None:
    client, student, _ = site
    _problem(_post(client, student, [("attention.py", GOOD), ("Attention.py", GOOD)]), 400,
             "only in case")
    _problem(_post(client, student, [("ATTENTION.py", GOOD)]), 400, "only in case")
    _problem(_post(client, student, [("work.zip", _zip(name="dir\\Attention.py"))]), 400,
             "only in case")
    assert db.session().scalar(select(func.count()).select_from(Submission)) == 0


def test_invisible_characters_in_code_show_as_marks_on_the_pages(pg_app: Flask) -> None:
    factory = Factory(pg_app)
    course = factory.course()
    student = factory.user("stu", course=course)
    code = GOOD + '# is admin?\u202e \u2066 yes\u2069\n'.encode()
    response = _post(pg_app.test_client(), factory.headers(student), [("attention.py", code)])
    assert response.status_code == 202, response.get_json()
    page = signed_in(pg_app, student.id).get(f"/submissions/{response.get_json()['id']}")
    text = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "is admin?\\u202e \\u2066 yes\\u2069" in text
    assert not any(char in text for char in "\u202e\u2066\u2069")


def test_a_multi_file_upload_keeps_every_file(site: Any) -> None:
    client, student, _ = site
    helper = b"def helper():\n    return 1\n"
    response = _post(client, student, [("attention.py", GOOD), ("helper.py", helper)])
    assert response.status_code == 202, response.get_json()
    assert [f["name"] for f in response.get_json()["files"]] == ["attention.py", "helper.py"]
    stored = db.session().get(Submission, response.get_json()["id"])
    assert stored is not None and {f.name: f.content for f in stored.files} == {
        "attention.py": GOOD, "helper.py": helper}


def test_duplicate_and_too_many_files_are_400_naming_the_limit(site: Any) -> None:
    client, student, _ = site
    _problem(_post(client, student, [("attention.py", GOOD), ("attention.py", GOOD)]), 400,
             "Two files are called attention.py")
    many = [(f"f{i}.py", b"x = 1\n") for i in range(200)]
    _problem(_post(client, student, many), 400, "200 files submitted; at most 20")


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("body", "words"), [
    (DEEP, "nests 100000 levels deep"),
    ('{"username": "a\\u0000b", "password": "x"}', "NUL"),
    ('{"username": "\\ud800", "password": "x"}', "lone surrogate"),
    ('{"username": "stu", "password": "x", "n": 1e999}', "out of range"),
    ('{"username": "stu", "password": NaN}', "not a JSON number"),
])
def test_bad_json_bodies_are_400(site: Any, body: str, words: str) -> None:
    client, _, _ = site
    response = client.post("/auth/login", data=body, content_type="application/json")
    _problem(response, 400, words)


@pytest.mark.parametrize(("changes", "words"), [
    ('{"rate_limit_count": 1e999}', "out of range"),
    ('{"rate_limit_count": 2.5}', "whole number"),
    ('{"late_penalty_per_day": ' + "9" * 400 + "}", "400 digits"),
    ('{"late_penalty_per_day": 1e300}', "between 0.0 and 1.0"),
    ('{"due_at": "0001-01-01T00:00:00+05:00"}', "between 2000 and 2200"),
    ('{"due_at": "9999-12-31T23:59:59-05:00"}', "between 2000 and 2200"),
    ('{"due_at": 12}', "ISO 8601"),
])
def test_bad_settings_are_400(site: Any, changes: str, words: str) -> None:
    client, _, teacher = site
    response = client.patch("/api/v1/instructor/assignments/attention", data=changes,
                            headers=teacher, content_type="application/json")
    _problem(response, 400, words)


@pytest.mark.parametrize("number", [2**31, 2**31 - 1, 2**63, 10**40])
def test_ids_past_the_database_integer_are_not_found(site: Any, number: int) -> None:
    client, student, teacher = site
    _problem(client.get(f"/api/v1/submissions/{number}", headers=student), 404, "")
    response = client.post(f"/api/v1/instructor/submissions/{number}/regrade", headers=teacher)
    assert response.status_code == 404


def test_nul_in_the_path_names_nothing_and_in_a_form_is_400(site: Any) -> None:
    client, student, _ = site
    _problem(client.get("/api/v1/assignments/atten%00tion", headers=student), 404, "NUL")
    response = client.post("/login", data={"username": "a\x00", "password": PASSWORD})
    assert response.status_code == 400


def test_pages_render_stored_text_with_a_lone_surrogate(
        site: Any, make_app: Callable[..., Flask], pg_url: str) -> None:
    # Pages are browsed on an app with no app context held open (as in production: Flask-WTF
    # keeps the CSRF token on `g`).
    pages_app = make_app(pg_url)
    message = "boom \udcff\ud800 here"
    document = {"score": 0.0, "max_score": 1.0, "execution_time": 1.0, "output": message,
                "tests": [{"number": "1.1", "name": "n", "score": 0.0, "max_score": 1.0,
                           "status": "failed", "output": message, "visibility": "visible"}],
                "diagnoses": [{"code": "runtime-error", "message": message, "tests": ["1.1"]}],
                "autograde": {"stdout": message, "stderr": message, "seed": 1}}
    session = db.session()
    user = session.query(User).filter_by(username="stu").one()
    submission = Submission(user=user, assignment=session.query(CourseAssignment).first(),
                            assignment_version="v", seed=1, status=SubmissionStatus.GRADED,
                            graded_at=utcnow())
    submission.files = [SubmissionFile(name="attention.py", sha256="0" * 64, size=5,
                                       content=b"x = 1")]
    submission.results = [Result(round=1, score=0.0, final_score=0.0, max_score=1.0,
                                 codes=["runtime-error"], document=document, attempt_token="t")]
    session.add(submission)
    session.commit()
    for username in ("stu", "prof"):
        browser = pages_app.test_client()
        html = browser.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html)
        assert token is not None
        assert browser.post("/login", data={"username": username, "password": PASSWORD,
                                            "csrf_token": token.group(1)}).status_code == 302
        pages = [f"/submissions/{submission.id}", f"/submissions/{submission.id}/result",
                 f"/submissions/{submission.id}/status.json"]
        if username == "prof":
            pages.append(f"/dashboard/submissions/{submission.id}")
        for page in pages:
            response = browser.get(page)
            assert response.status_code == 200, (page, response.get_data(as_text=True)[:300])
            assert "\ufffd" in response.get_data(as_text=True) or page.endswith(".json")
