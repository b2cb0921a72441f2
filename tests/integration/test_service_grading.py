"""Grading on PostgreSQL: exactly-once by claim token and compare-and-set, the reaper, rounds,
what students may read, exports."""

from __future__ import annotations

import csv
import io
import os
import shutil
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy.exc
from flask import Flask
from sqlalchemy import func, select

from assignments.spec import ASSIGNMENTS_DIR_VARIABLE, ASSIGNMENTS_ROOT
from devkit.corpora import corpus
from devkit.courses import Factory
from grader.pipeline import GradingPipeline
from sandbox import SandboxUnavailable, create_backend
from service.core import db
from service.courses.accounts import create_user
from service.courses.enrolment import sync_assignments
from service.grading.exactly_once import (
    GradingInterrupted,
    GradingPolicy,
    Interrupted,
    LeaseKeeper,
    Outcome,
    SubmissionGrading,
    claim,
    reap,
    store_result,
)
from service.models import CourseAssignment, Result, Submission, SubmissionStatus, User, utcnow
from service.submissions.instructor import export_scores_csv, gradescope_results, regrade
from service.submissions.submitting import RateLimit, submission_json, submit
from service.submissions.visibility import student_view
from service.tasks import current_grading

POLICY = GradingPolicy(lease_seconds=60, max_attempts=3)
SYNTAX = corpus("attention", "syntax_missing_colon.py")


def _submit(factory: Factory, files: dict[str, bytes] | None = None) -> Submission:
    course = factory.courses.get("ml101") or factory.course()
    user = factory.user(course=course)
    submission = submit(db.session(), user=user, assignment=factory.assignment(course),
                        files=files or dict([SYNTAX]), limit=RateLimit(100, 60))
    db.session().commit()
    return submission


def _results(submission_id: int) -> int:
    return db.session().scalar(select(func.count()).select_from(Result).where(
        Result.submission_id == submission_id)) or 0


def test_graded_once_even_when_delivered_twice(pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    grader = current_grading()
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.SKIPPED
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None and graded.status is SubmissionStatus.GRADED
    assert graded.attempts == 1 and _results(submission.id) == 1
    assert graded.result is not None and graded.result.codes == ["syntax-error"]
    assert graded.started_at and graded.graded_at and graded.requested_at


def test_a_stale_claim_cannot_store(pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    first = claim(db.session(), submission.id, POLICY)
    assert first is not None
    assert claim(db.session(), submission.id, POLICY) is None  # held and alive: not taken
    db.session().execute(Submission.__table__.update().values(
        lease_expires_at=utcnow() - timedelta(seconds=1)))
    db.session().commit()
    second = claim(db.session(), submission.id, POLICY)  # lease expired: taken over
    assert second is not None and second.token != first.token
    document = {"score": 1.0, "max_score": 10.0, "diagnoses": [], "tests": []}
    assert store_result(db.session(), first, document) is False
    assert store_result(db.session(), second, document) is True
    assert _results(submission.id) == 1
    assert db.session().get(Submission, submission.id).attempts == 2  # type: ignore[union-attr]


def test_a_claim_of_a_dead_local_process_is_taken_at_once(pg_app: Flask,
                                                          pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    assert claim(db.session(), submission.id, POLICY) is not None
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    db.session().execute(Submission.__table__.update().values(
        claimed_by=f"{os.uname().nodename}:{dead}"))
    db.session().commit()
    assert claim(db.session(), submission.id, POLICY) is not None


def test_a_renewed_lease_keeps_its_claim_until_it_is_taken_over(pg_app: Flask,
                                                                  pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    first = claim(db.session(), submission.id, POLICY)
    assert first is not None
    db.session().execute(Submission.__table__.update().values(
        lease_expires_at=utcnow() - timedelta(seconds=1)))
    db.session().commit()
    keeper = LeaseKeeper(db.session().get_bind(), first, lease_seconds=60)
    assert keeper.renew() is True
    db.session().expire_all()
    renewed = db.session().get(Submission, submission.id)
    assert renewed is not None and renewed.lease_expires_at is not None
    assert renewed.lease_expires_at > utcnow() + timedelta(seconds=50)
    assert claim(db.session(), submission.id, POLICY) is None  # renewed: not taken over
    db.session().execute(Submission.__table__.update().values(
        lease_expires_at=utcnow() - timedelta(seconds=1)))
    db.session().commit()
    assert claim(db.session(), submission.id, POLICY) is not None  # lapsed: taken over
    assert keeper.renew() is False  # the first holder's renewals end there


SLEEPS_AT_IMPORT = (b"import time\ntime.sleep(8)\n"
                    + corpus("attention", "correct_matmul.py")[1])


@pytest.mark.slow
def test_a_grading_longer_than_its_lease_keeps_its_claim(pg_app: Flask,
                                                         pg_factory: Factory) -> None:
    """The worker renews its claim's lease while it grades: another delivery of the same
    submission, well after the first lease would have run out, finds the claim alive."""
    policy = GradingPolicy(lease_seconds=3, max_attempts=3)
    submission = _submit(pg_factory, {"attention.py": SLEEPS_AT_IMPORT})
    grading = SubmissionGrading(
        pipeline=lambda: GradingPipeline(backend=create_backend("local", warm=False)),
        policy=policy)
    app = pg_app
    outcomes: list[object] = []

    def grade() -> None:
        with app.app_context():
            outcomes.append(grading.grade_and_store(db.session(), submission.id))

    worker = threading.Thread(target=grade)
    worker.start()
    deadline = time.monotonic() + 60
    while db.session().scalar(select(Submission.status).where(
            Submission.id == submission.id).execution_options(populate_existing=True)) \
            is not SubmissionStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(6)  # two leases: without renewals the claim would be abandoned by now
    db.session().rollback()
    assert claim(db.session(), submission.id, policy) is None
    worker.join(120)
    assert outcomes == [Outcome.GRADED]
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None and (graded.attempts, graded.interruptions) == (1, 0)


def test_lost_workers_are_interruptions_bounded_apart(pg_app: Flask,
                                                      pg_factory: Factory) -> None:
    """A claim whose worker died (its lease expired) costs the submission no attempt; only a
    submission that loses its worker every time is failed, after MAX_WORKER_LOSSES."""
    policy = GradingPolicy(lease_seconds=60, max_attempts=3, max_workers_lost=4)
    submission = _submit(pg_factory)
    sent: list[int] = []
    woken: list[int] = []
    for lost in range(1, 5):
        assert claim(db.session(), submission.id, policy) is not None
        db.session().execute(Submission.__table__.update().values(
            lease_expires_at=utcnow() - timedelta(seconds=1)))
        db.session().commit()
        counts = reap(db.session(), policy=policy, queued_stale_seconds=600, enqueue=sent.append,
                      status_changed=woken.append)
        if lost < 4:
            assert counts == {"requeued": 1, "failed": 0}
        else:
            assert counts == {"requeued": 0, "failed": 1}
    assert sent == [submission.id] * 3
    assert woken == [submission.id] * 4  # its long-poll waiters hear of each move, the fail too
    db.session().expire_all()
    failed = db.session().get(Submission, submission.id)
    assert failed is not None and failed.status is SubmissionStatus.FAILED
    assert (failed.attempts, failed.interruptions, failed.workers_lost) == (4, 3, 3)
    assert "grading process stopped 4 times" in (failed.message or "")
    body = submission_json(db.session(), failed, failed.user)
    assert body["status"] == "failed" and "does not count" in body["message"]


def test_failures_on_the_submission_use_attempts(pg_app: Flask, pg_factory: Factory) -> None:
    """A grading that raises on the submission (not a connection) is retried within
    MAX_ATTEMPTS, then failed with a message; a failed one does not count against the
    student's submission limit."""
    submission = _submit(pg_factory)

    class Broken:
        def grade(self, *args: object, **kwargs: object) -> dict[str, object]:
            raise ZeroDivisionError("a grader bug on these outputs")

    grader = SubmissionGrading(pipeline=lambda: Broken(), policy=POLICY)  # type: ignore[arg-type,return-value]
    assert [grader.grade_and_store(db.session(), submission.id) for _ in range(4)] == [
        Outcome.RELEASED, Outcome.RELEASED, Outcome.RELEASED, Outcome.SKIPPED]
    db.session().expire_all()
    failed = db.session().get(Submission, submission.id)
    assert failed is not None and failed.status is SubmissionStatus.FAILED
    assert (failed.attempts, failed.interruptions) == (3, 0)
    assert "failed 3 times on our side" in (failed.message or "")
    # The student may submit again although the limit (1) was reached by the failed one.
    again = submit(db.session(), user=failed.user, assignment=failed.assignment,
                   files=dict([SYNTAX]), limit=RateLimit(1, 3600))
    assert again.id != failed.id


def test_no_sandbox_waits_without_using_attempts(pg_app: Flask, pg_factory: Factory) -> None:
    """Sandbox unavailable: released as an interruption (any number of times), the student
    reads that it waits for a grading machine, and it grades once the sandbox is back."""
    submission = _submit(pg_factory)
    engine_up = False
    real = GradingPipeline(backend=create_backend("local"))

    class Flaky:
        backend = real.backend

        def grade(self, *args: object, **kwargs: object) -> dict[str, object]:
            if not engine_up:
                raise SandboxUnavailable("no Docker engine answers")
            return real.grade(*args, **kwargs)  # type: ignore[arg-type]

    woken: list[int] = []
    grader = SubmissionGrading(pipeline=lambda: Flaky(), policy=POLICY,  # type: ignore[arg-type,return-value]
                               status_changed=woken.append)
    outcomes = [grader.grade_and_store(db.session(), submission.id) for _ in range(6)]
    assert outcomes == [Interrupted(n) for n in range(1, 7)]
    assert woken == [submission.id] * 12  # its waiters hear of each claim and each release
    db.session().expire_all()
    waiting = db.session().get(Submission, submission.id)
    assert waiting is not None and waiting.status is SubmissionStatus.QUEUED
    body = submission_json(db.session(), waiting, waiting.user)
    assert body["waiting_for_sandbox"] is True and "grading machine" in body["message"]
    assert (body["attempts"], body["interruptions"]) == (6, 6)
    engine_up = True
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    assert woken == [submission.id] * 14  # the claim, then the result: once each
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None and graded.status is SubmissionStatus.GRADED
    assert graded.message is None and _results(submission.id) == 1


def test_a_host_grades_only_the_version_submitted_against_or_the_current_one(
        pg_app: Flask, pg_factory: Factory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose package is another version than the submission's (a host not yet deployed,
    or one ahead of the course) hands it back, as an interruption that uses no attempt, with a
    message that says why; the host holding the submission's version grades it with that
    version. Once the course syncs a new version, the old version's queued submissions may be
    graded with the new one, as a regrade would."""
    slug = "attention-hosts"
    package = tmp_path / slug
    shutil.copytree(ASSIGNMENTS_ROOT / "attention", package)
    shutil.copytree(ASSIGNMENTS_ROOT / "catalogues", tmp_path / "catalogues")
    monkeypatch.setenv(ASSIGNMENTS_DIR_VARIABLE, str(tmp_path))
    spec = package / "assignment.toml"
    first_spec = spec.read_text()
    course = pg_factory.course(slugs=(slug,))
    user = pg_factory.user(course=course)
    submission = submit(db.session(), user=user, assignment=pg_factory.assignment(course, slug),
                        files=dict([SYNTAX]), limit=RateLimit(100, 60))
    db.session().commit()
    submitted_version = submission.assignment_version
    spec.write_text(first_spec + "\n# the next term's edit: another version\n")
    ahead = SubmissionGrading(pipeline=lambda: GradingPipeline(backend=create_backend("local")),
                              policy=POLICY)
    assert ahead.grade_and_store(db.session(), submission.id) == Interrupted(1, "version")
    db.session().expire_all()
    waiting = db.session().get(Submission, submission.id)
    assert waiting is not None and waiting.status is SubmissionStatus.QUEUED
    body = submission_json(db.session(), waiting, waiting.user)
    assert "holds the version" in body["message"] and body["waiting_for_sandbox"] is True
    assert attempts_left(waiting) == POLICY.max_attempts and _results(submission.id) == 0

    spec.write_text(first_spec)  # the host that holds the submitted version
    assert ahead.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None and graded.result is not None
    assert graded.result.document["autograde"]["assignment_version"] == submitted_version

    later = submit(db.session(), user=user, assignment=pg_factory.assignment(course, slug),
                   files=dict([SYNTAX]), limit=RateLimit(100, 60))
    db.session().commit()
    spec.write_text(first_spec + "\n# the next term's edit: another version\n")
    sync_assignments(db.session(), course, [slug])  # the course moves on: the new one is current
    db.session().commit()
    deployed = SubmissionGrading(  # a host started after the deploy: it holds the new one only
        pipeline=lambda: GradingPipeline(backend=create_backend("local")), policy=POLICY)
    assert deployed.grade_and_store(db.session(), later.id) is Outcome.GRADED
    db.session().expire_all()
    regraded = db.session().get(Submission, later.id)
    assert regraded is not None and regraded.result is not None
    assert regraded.result.document["autograde"]["assignment_version"] == \
        pg_factory.assignment(course, slug).version != submitted_version


def attempts_left(submission: Submission) -> int:
    return POLICY.max_attempts - (submission.attempts - submission.interruptions)


def test_a_backend_that_fails_to_start_is_the_sandbox_unavailable(
        pg_app: Flask, pg_factory: Factory) -> None:
    """An engine error while the backend starts (e.g. a 409 "removal already in progress"
    while sweeping a dead worker's containers) is an interruption, not an attempt."""
    submission = _submit(pg_factory)

    def failing_start() -> GradingPipeline:
        raise RuntimeError("409 Client Error: removal of container is already in progress")

    grader = SubmissionGrading(pipeline=failing_start, policy=POLICY)
    assert grader.grade_and_store(db.session(), submission.id) == Interrupted(1)


def test_a_lost_database_connection_is_retried_with_the_claim(
        pg_app: Flask, pg_factory: Factory) -> None:
    """The database dropping under a grading raises GradingInterrupted with the claim's token;
    the retry takes the claim over at once (no waiting for the lease) and stores once."""
    submission = _submit(pg_factory)
    real = GradingPipeline(backend=create_backend("local"))
    drop = True

    class Dropping:
        backend = real.backend

        def grade(self, *args: object, **kwargs: object) -> dict[str, object]:
            if drop:
                raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed "
                                                      "the connection unexpectedly"))
            return real.grade(*args, **kwargs)  # type: ignore[arg-type]

    grader = SubmissionGrading(pipeline=lambda: Dropping(), policy=POLICY)  # type: ignore[arg-type,return-value]
    with pytest.raises(GradingInterrupted) as interrupted:
        grader.grade_and_store(db.session(), submission.id)
    assert interrupted.value.token is not None
    drop = False
    # held by a live process:
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.SKIPPED
    assert grader.grade_and_store(db.session(), submission.id,
                                  resume=interrupted.value.token) is Outcome.GRADED
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None and (graded.attempts, graded.interruptions) == (2, 1)
    assert _results(submission.id) == 1


def test_reaper_resends_queued_submissions_whose_message_was_lost(
        pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    sent: list[int] = []
    assert reap(db.session(), policy=POLICY, queued_stale_seconds=600,
                enqueue=sent.append)["requeued"] == 0
    db.session().execute(Submission.__table__.update().values(
        enqueued_at=utcnow() - timedelta(hours=1)))
    db.session().commit()
    assert reap(db.session(), policy=POLICY, queued_stale_seconds=600,
                enqueue=sent.append)["requeued"] == 1
    assert sent == [submission.id]


def test_regrade_is_a_new_round_with_its_own_result(pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    grader = current_grading()
    grader.grade_and_store(db.session(), submission.id)
    db.session().refresh(submission)
    sent: list[int] = []
    assert regrade(db.session(), [submission], sent.append) == [submission.id]
    assert regrade(db.session(), [submission], sent.append) == []  # already queued
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    assert _results(submission.id) == 2
    db.session().expire_all()
    again = db.session().get(Submission, submission.id)
    assert again is not None and again.round == 2 and again.result is not None


def test_exports(pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    current_grading().grade_and_store(db.session(), submission.id)
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None
    table = export_scores_csv(db.session(), graded.assignment, every_submission=False)
    rows = list(csv.DictReader(io.StringIO(table)))
    assert rows[0]["codes"] == "syntax-error" and rows[0]["final_score"] == "0"
    assert rows[0]["status"] == "graded" and rows[0]["username"] == graded.user.username
    assert graded.result is not None
    gradescope = gradescope_results(graded.result.document, 0.0)
    assert gradescope is not None
    assert set(gradescope) == {"score", "execution_time", "output", "tests"}
    assert {"name", "score", "max_score", "visibility"} <= set(gradescope["tests"][0])


def _document(hidden_status: str) -> dict[str, object]:
    def test(number: str, status: str, visibility: str) -> dict[str, object]:
        return {"name": f"check {number}", "number": number, "score": 1.0 if status == "passed"
                else 0.0, "max_score": 1.0, "status": status, "output": "observed",
                "visibility": visibility, "tags": [] if status == "passed" else ["mask-ignored"]}

    return {"score": 1.0, "max_score": 2.0, "execution_time": 0.1, "output": "...",
            "tests": [test("1.1", "passed", "visible"), test("1.2", hidden_status,
                                                             "after_due_date")],
            "diagnoses": [{"code": "mask-ignored", "message": "secret evidence", "hint": "h",
                           "tests": ["1.2"]}] if hidden_status == "failed" else [],
            "autograde": {"seed": 1, "phases": {}}}


@pytest.mark.parametrize("hidden_status", ["passed", "failed"])
def test_unreleased_checks_reveal_nothing(hidden_status: str) -> None:
    now = utcnow()
    view = student_view(_document(hidden_status), now=now, due_at=now + timedelta(days=1),
                        results_published=False)
    assert [t["number"] for t in view["tests"]] == ["1.1"]
    assert view["diagnoses"] == [] and view["withheld_checks"] == 1
    assert "All checks passed" not in view["output"]
    # The maximum stays the assignment's (the CLI and the page agree with the statement).
    assert (view["score"], view["max_score"], view["shown_max_score"]) == (1.0, 2.0, 1.0)
    assert "(1 point) graded but shown only after release" in view["output"]
    text = repr(view)
    assert "secret evidence" not in text and "mask-ignored" not in text
    after = student_view(_document(hidden_status), now=now + timedelta(days=2),
                         due_at=now + timedelta(days=1), results_published=False)
    assert len(after["tests"]) == 2 and after["withheld_checks"] == 0
    assert ("All checks passed" in after["output"]) == (hidden_status == "passed")


def test_students_get_the_filtered_view_instructors_the_whole(pg_app: Flask,
                                                             pg_factory: Factory) -> None:
    submission = _submit(pg_factory)
    current_grading().grade_and_store(db.session(), submission.id)
    db.session().expire_all()
    graded = db.session().get(Submission, submission.id)
    assert graded is not None
    assignment = db.session().get(CourseAssignment, graded.assignment_id)
    assert assignment is not None and assignment.due_at is None
    student = submission_json(db.session(), graded, graded.user)
    hidden = [t for t in graded.result.document["tests"]  # type: ignore[union-attr]
              if t["visibility"] != "visible"]
    assert hidden, "the shipped assignment has checks released after the due date"
    assert student["results"]["withheld_checks"] == len(hidden)
    assert student["score"] is None
    admin = create_user(db.session(), username="root", password="admin-password",
                        role=User.role.type.enum_class.ADMIN)  # type: ignore[attr-defined]
    full = submission_json(db.session(), graded, admin)
    assert len(full["results"]["tests"]) == len(graded.result.document["tests"])  # type: ignore


@pytest.mark.slow
def test_a_cache_submission_is_graded_through_the_service(pg_app: Flask,
                                                          pg_factory: Factory) -> None:
    course = pg_factory.course("kv101", slugs=("attention-kv-cache",))
    submission = submit(db.session(), user=pg_factory.user(course=course),
                        assignment=pg_factory.assignment(course, "attention-kv-cache"),
                        files=dict([corpus("attention-kv-cache", "cache_returns_old.py")]),
                        limit=RateLimit(100, 60))
    db.session().commit()
    grader = current_grading()
    grader._pipeline = GradingPipeline(backend=create_backend("local"))
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    db.session().expire_all()
    result = db.session().get(Submission, submission.id).result  # type: ignore[union-attr]
    assert result is not None and result.codes == ["cache-missing-new-keys"]
    assert result.document["score"] == 5.75 and result.document["max_score"] == 10


@pytest.mark.slow
def test_a_real_submission_gets_its_code(pg_app: Flask, pg_factory: Factory) -> None:
    submission = _submit(pg_factory, dict([corpus("attention", "softmax_dim_minus2.py")]))
    grader = current_grading()
    grader._pipeline = GradingPipeline(backend=create_backend("local"))
    assert grader.grade_and_store(db.session(), submission.id) is Outcome.GRADED
    db.session().expire_all()
    result = db.session().get(Submission, submission.id).result  # type: ignore[union-attr]
    assert result is not None and "softmax-wrong-axis" in result.codes
