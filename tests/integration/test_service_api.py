"""The API's rules on a quick SQLite database: access, uploads, limits, errors as problems."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from collections.abc import Callable

import pytest
from flask import Flask, request
from flask.testing import FlaskClient

from devkit.corpora import corpus
from devkit.courses import Factory
from service.models import CourseRole, Role, Submission, SubmissionStatus

GOOD = b"def attention(q, k, v, allowed):\n    return q, q\n"


def _zip(entries: list[tuple[str, bytes]], *, link: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def _post(client: FlaskClient, headers: dict[str, str], files: list[tuple[str, bytes]],
          slug: str = "attention") -> object:
    data = {"files": [(io.BytesIO(content), name) for name, content in files]}
    return client.post(f"/api/v1/assignments/{slug}/submissions", headers=headers, data=data,
                       content_type="multipart/form-data")


@pytest.fixture
def student(factory: Factory) -> dict[str, str]:
    course = factory.course()
    return factory.headers(factory.user("stu", course=course))


def test_submit_is_queued_with_files_hashed(client: FlaskClient, student: dict[str, str]
                                            ) -> None:
    response = _post(client, student, [corpus("attention", "softmax_dim_minus2.py")])
    assert response.status_code == 202, response.json
    body = response.json
    assert body["status"] == "queued" and body["results"] is None
    assert response.headers["Location"].endswith(f"/api/v1/submissions/{body['id']}")
    assert len(body["files"][0]["sha256"]) == 64
    mine = client.get("/api/v1/submissions", headers=student).json["submissions"]
    assert [s["id"] for s in mine] == [body["id"]]


def test_zip_of_py_files_is_accepted(client: FlaskClient, student: dict[str, str]) -> None:
    response = _post(client, student, [("work.zip", _zip([("attention.py", GOOD),
                                                          ("__MACOSX/._x", b"")]))])
    assert response.status_code == 202
    assert [f["name"] for f in response.json["files"]] == ["attention.py"]


@pytest.mark.parametrize(("entries", "link", "status", "words"), [
    ([("../../etc/cron.d/x.py", GOOD)], None, 400, "outside the archive"),
    ([("/abs/attention.py", GOOD)], None, 400, "absolute path"),
    ([("attention.py", GOOD)], "evil.py", 400, "link"),
    ([(f"f{i}.py", b"x = 1\n") for i in range(60)], None, 413, "entries"),
    ([("attention.py", b"#" * (3 << 20))], None, 413, "unpacks to"),
    ([("data.bin", b"\0")], None, 415, "only .py"),
])
def test_dangerous_or_oversized_zips_are_refused(
        client: FlaskClient, student: dict[str, str], entries: list[tuple[str, bytes]],
        link: str | None, status: int, words: str) -> None:
    response = _post(client, student, [("work.zip", _zip(entries, link=link))])
    assert response.status_code == status
    assert response.mimetype == "application/problem+json"
    assert words in response.json["detail"]


def test_oversized_upload_is_413(client: FlaskClient, student: dict[str, str]) -> None:
    response = _post(client, student, [("attention.py", b"#" * (2 << 20))])
    assert response.status_code == 413
    assert response.mimetype == "application/problem+json"
    assert "upload limit" in response.json["detail"]


def test_wrong_content_type_is_415(client: FlaskClient, student: dict[str, str]) -> None:
    response = client.post("/api/v1/assignments/attention/submissions", headers=student,
                           json={"files": "x"})
    assert response.status_code == 415
    assert "multipart/form-data" in response.json["detail"]
    response = _post(client, student, [("notes.txt", b"hello")])
    assert response.status_code == 415
    assert "neither a .py file" in response.json["detail"]


def test_unknown_assignment_is_404(client: FlaskClient, student: dict[str, str]) -> None:
    response = _post(client, student, [("attention.py", GOOD)], slug="no-such-thing")
    assert response.status_code == 404
    assert "no-such-thing" in response.json["detail"]


def test_others_submissions_are_404_and_instructor_endpoints_403(
        client: FlaskClient, factory: Factory) -> None:
    course = factory.course()
    alice = factory.headers(factory.user("alice", course=course))
    bob = factory.headers(factory.user("bob", course=course))
    teacher = factory.headers(factory.user("teach", role=Role.INSTRUCTOR, course=course,
                                           course_role=CourseRole.INSTRUCTOR))
    submission_id = _post(client, alice, [("attention.py", GOOD)]).json["id"]
    assert client.get(f"/api/v1/submissions/{submission_id}", headers=bob).status_code == 404
    assert client.get("/api/v1/submissions/999999", headers=bob).status_code == 404
    assert client.get(f"/api/v1/submissions/{submission_id}", headers=teacher).status_code == 200
    for method, path in [
        ("get", "/api/v1/instructor/assignments/attention/submissions"),
        ("get", "/api/v1/instructor/assignments/attention/scores.csv"),
        ("get", "/api/v1/instructor/assignments/attention/gradescope.json"),
        ("post", "/api/v1/instructor/assignments/attention/regrade"),
        ("post", f"/api/v1/instructor/submissions/{submission_id}/regrade"),
    ]:
        response = getattr(client, method)(path, headers=bob)
        expected = 404 if "submissions/" in path and "regrade" in path else 403
        assert response.status_code == expected, path
        assert response.mimetype == "application/problem+json"
    listing = client.get("/api/v1/instructor/assignments/attention/submissions", headers=teacher)
    assert [s["user"] for s in listing.json["submissions"]] == ["alice"]


def test_outsiders_do_not_see_the_course(client: FlaskClient, factory: Factory) -> None:
    factory.course()
    outsider = factory.headers(factory.user("out"))
    assert client.get("/api/v1/assignments", headers=outsider).json["assignments"] == []
    assert client.get("/api/v1/assignments/attention", headers=outsider).status_code == 404


def test_rate_limit_per_student_and_assignment(app: Flask, client: FlaskClient,
                                               factory: Factory) -> None:
    course = factory.course()
    assignment = factory.assignment(course)
    assignment.rate_limit_count, assignment.rate_limit_window_seconds = 2, 3600
    from service.core import db

    db.session().commit()
    ada = factory.headers(factory.user("ada", course=course))
    bob = factory.headers(factory.user("bob", course=course))
    assert [_post(client, ada, [("attention.py", GOOD)]).status_code for _ in range(2)] == \
        [202, 202]
    refused = _post(client, ada, [("attention.py", GOOD)])
    assert refused.status_code == 429
    assert "limit is 2" in refused.json["detail"]
    assert int(refused.headers["Retry-After"]) > 3500
    assert _post(client, bob, [("attention.py", GOOD)]).status_code == 202
    assert db.session().query(Submission).count() == 3


def test_late_submissions_refused_under_reject_policy(client: FlaskClient,
                                                      factory: Factory) -> None:
    course = factory.course()
    teacher = factory.headers(factory.user("t", role=Role.INSTRUCTOR, course=course,
                                           course_role=CourseRole.INSTRUCTOR))
    patch = client.patch("/api/v1/instructor/assignments/attention", headers=teacher,
                         json={"due_at": "2020-01-01T00:00:00+00:00", "late_policy": "reject"})
    assert patch.status_code == 200, patch.json
    student = factory.headers(factory.user("s", course=course))
    response = _post(client, student, [("attention.py", GOOD)])
    assert response.status_code == 403
    assert "does not accept late" in response.json["detail"]


def test_assignment_detail_and_public_files_only(client: FlaskClient,
                                                 student: dict[str, str]) -> None:
    detail = client.get("/api/v1/assignments/attention", headers=student).json
    assert detail["slug"] == "attention"
    assert all(c["visibility"] == "visible" for c in detail["checks"])
    hidden = client.get("/api/v1/assignments/attention/files/hidden/reference.py",
                        headers=student)
    assert hidden.status_code == 404
    for name in detail["files"]:
        assert client.get(f"/api/v1/assignments/attention/files/{name}",
                          headers=student).status_code == 200


def test_the_cache_assignment_is_served_with_its_statement_and_starter(
        client: FlaskClient, factory: Factory) -> None:
    course = factory.course("ml102", slugs=("attention", "multi-head-attention",
                                            "attention-kv-cache"))
    headers = factory.headers(factory.user("kv", course=course))
    listed = client.get("/api/v1/assignments", headers=headers).json["assignments"]
    assert {a["slug"] for a in listed} == {"attention", "multi-head-attention",
                                           "attention-kv-cache"}
    detail = client.get("/api/v1/assignments/attention-kv-cache", headers=headers).json
    assert "KVCache(key, value, key_padding_mask)" in detail["statement"]
    assert detail["max_score"] == 10
    assert "starter/attention_kv_cache.py" in detail["files"]
    assert not any(name.startswith("hidden/") for name in detail["files"])
    starter = client.get("/api/v1/assignments/attention-kv-cache/files/"
                         "starter/attention_kv_cache.py", headers=headers)
    assert starter.status_code == 200 and b"class KVCache(NamedTuple)" in starter.data
    response = _post(client, headers, [corpus("attention-kv-cache", "correct_standard.py")],
                     slug="attention-kv-cache")
    assert response.status_code == 202, response.json


def test_the_optimiser_assignment_is_served_with_its_statement_starter_and_notebook(
        client: FlaskClient, factory: Factory) -> None:
    course = factory.course("opt101", slugs=("adamw",))
    headers = factory.headers(factory.user("opt", course=course))
    detail = client.get("/api/v1/assignments/adamw", headers=headers).json
    assert "torch.optim.AdamW" in detail["statement"] and detail["max_score"] == 10
    assert {"starter/adamw.py", "starter/adamw.ipynb", "public_tests/test_adamw.py"} <= set(
        detail["files"])
    assert not any(name.startswith("hidden/") for name in detail["files"])
    notebook = client.get("/api/v1/assignments/adamw/files/starter/adamw.ipynb",
                          headers=headers)
    assert notebook.status_code == 200 and b'autograde.check(\\"adamw\\")' in notebook.data
    response = _post(client, headers, [corpus("adamw", "correct_plain_class.py")], slug="adamw")
    assert response.status_code == 202, response.json


def test_the_loss_assignment_is_served_with_its_statement_and_starters(
        client: FlaskClient, factory: Factory) -> None:
    course = factory.course("ml103", slugs=("attention", "cross-entropy"))
    headers = factory.headers(factory.user("ce", course=course))
    listed = client.get("/api/v1/assignments", headers=headers).json["assignments"]
    assert {a["slug"] for a in listed} == {"attention", "cross-entropy"}
    detail = client.get("/api/v1/assignments/cross-entropy", headers=headers).json
    assert "label_smoothing" in detail["statement"] and detail["max_score"] == 10
    assert {"starter/cross_entropy.py", "starter/cross_entropy.ipynb"} <= set(detail["files"])
    assert not any(name.startswith("hidden/") for name in detail["files"])
    notebook = client.get("/api/v1/assignments/cross-entropy/files/"
                          "starter/cross_entropy.ipynb", headers=headers)
    assert notebook.status_code == 200
    assert json.loads(notebook.data)["cells"] and b"autograde.check" in notebook.data
    response = _post(client, headers, [corpus("cross-entropy", "correct_standard.py")],
                     slug="cross-entropy")
    assert response.status_code == 202, response.json


def test_openapi_document_is_served(client: FlaskClient) -> None:
    document = client.get("/api/v1/openapi.json").json
    assert document["openapi"].startswith("3.")
    assert "/api/v1/assignments/{slug}/submissions" in document["paths"]


def test_errors_never_leak_tracebacks(app: Flask, client: FlaskClient,
                                      student: dict[str, str]) -> None:
    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("secret internals")

    response = client.get("/boom")
    assert response.status_code == 500
    assert "secret" not in response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert SubmissionStatus.QUEUED.value == "queued"


@pytest.mark.parametrize(("hops", "expected"), [(0, "http://localhost/"),
                                                (1, "https://grading.example.edu/")])
def test_forwarded_headers_are_trusted_only_when_configured(
        make_app: Callable[..., Flask], sqlite_url: str, hops: int, expected: str) -> None:
    application = make_app(sqlite_url, PROXY_HOPS=hops)
    application.add_url_rule("/_root", "root", lambda: request.url_root)
    answer = application.test_client().get("/_root", headers={
        "X-Forwarded-Proto": "https", "X-Forwarded-Host": "grading.example.edu"})
    assert answer.get_data(as_text=True) == expected
