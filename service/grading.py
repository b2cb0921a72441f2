"""Grading one submission exactly once: claim with a token, grade, store by compare-and-set.

A task may be delivered twice (a worker killed mid-run, a broker redelivery, the reaper): every
copy tries to claim the submission, only one claim is in force at a time, and only the holder of
that claim may store the result. A claim whose holder died is taken over when its lease expires,
or at once when the holder was a process of this host that no longer exists.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from assignments import Assignment, load_assignment
from grader.pipeline import GradingPipeline
from sandbox import SandboxUnavailable
from service.db import rows_changed
from service.events import SILENT, Announcer, Event
from service.gradebook import deadline_of, rule_of
from service.lateness import final_score, late_days
from service.models import Result, Submission, SubmissionStatus, utcnow

log = logging.getLogger(__name__)

GAVE_UP_MESSAGE = (
    "We could not grade this submission: grading was interrupted {attempts} times (not because "
    "of your code). Your files are kept; your instructor can regrade it, or you may submit again "
    "(this one does not count against your submission limit).")


@dataclass(frozen=True)
class Claim:
    submission_id: int
    token: str
    round: int


@dataclass(frozen=True)
class GradingPolicy:
    lease_seconds: int
    max_attempts: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> GradingPolicy:
        return cls(int(config["LEASE_SECONDS"]), int(config["MAX_ATTEMPTS"]))


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(session: Session, submission_id: int, policy: GradingPolicy,
          announcer: Announcer = SILENT) -> Claim | None:
    """Take the submission for grading, or None when it is not this delivery's to grade."""
    submission = session.get(Submission, submission_id, populate_existing=True)
    if submission is None:
        log.warning("submission %s does not exist; dropping its task", submission_id)
        return None
    if submission.status is SubmissionStatus.RUNNING and not _claim_abandoned(submission):
        return None
    if submission.status not in (SubmissionStatus.QUEUED, SubmissionStatus.RUNNING):
        return None
    if submission.attempts >= policy.max_attempts:
        give_up(session, submission, announcer)
        return None
    token = secrets.token_hex(16)
    now = utcnow()
    taken = rows_changed(session, update(Submission)
        .where(Submission.id == submission_id, Submission.status == submission.status,
               _same_token(submission.attempt_token))
        .values(status=SubmissionStatus.RUNNING, attempt_token=token,
                attempts=Submission.attempts + 1, claimed_by=worker_identity(), started_at=now,
                lease_expires_at=now + timedelta(seconds=policy.lease_seconds)))
    session.commit()
    return Claim(submission_id, token, submission.round) if taken == 1 else None


def _same_token(token: str | None) -> Any:
    return Submission.attempt_token.is_(None) if token is None \
        else Submission.attempt_token == token


def _claim_abandoned(submission: Submission) -> bool:
    if submission.lease_expires_at is not None and submission.lease_expires_at < utcnow():
        return True
    host, _, pid = (submission.claimed_by or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not _process_alive(int(pid))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def store_result(session: Session, claim_: Claim, document: dict[str, Any],
                 announcer: Announcer = SILENT) -> bool:
    """Write the result if the claim is still in force; False (nothing written) otherwise.
    The announcer's deliveries are committed with the result and sent after it."""
    submission = session.get(Submission, claim_.submission_id, populate_existing=True)
    assert submission is not None
    now = utcnow()
    done = rows_changed(session, update(Submission)
        .where(Submission.id == claim_.submission_id, Submission.attempt_token == claim_.token,
               Submission.status == SubmissionStatus.RUNNING)
        .values(status=SubmissionStatus.GRADED, graded_at=now, lease_expires_at=None,
                message=None))
    if done != 1:
        session.rollback()
        log.info("submission %s: claim %s no longer in force; result dropped",
                 claim_.submission_id, claim_.token)
        return False
    score = float(document["score"])
    session.add(Result(submission_id=claim_.submission_id, round=claim_.round, score=score,
                       final_score=_after_late_policy(session, submission, score,
                                                      float(document["max_score"])),
                       max_score=float(document["max_score"]),
                       codes=[d["code"] for d in document["diagnoses"]], document=document,
                       attempt_token=claim_.token))
    announcer.record(session, submission, Event.GRADED)
    session.commit()
    announcer.send(session, claim_.submission_id)
    return True


def _after_late_policy(session: Session, submission: Submission, score: float,
                       max_score: float) -> float:
    """The final score as it stands when the result is stored (a record: pages and exports
    derive it again when read, by ``service.gradebook``)."""
    assignment = submission.assignment
    deadline = deadline_of(session, assignment, submission.user_id).at
    return final_score(score, max_score, days_late=late_days(submission.requested_at, deadline),
                       rule=rule_of(assignment))


def release(session: Session, claim_: Claim) -> None:
    """Hand the submission back to the queue (the sandbox failed; it will be retried)."""
    session.execute(
        update(Submission)
        .where(Submission.id == claim_.submission_id, Submission.attempt_token == claim_.token)
        .values(status=SubmissionStatus.QUEUED, attempt_token=None, claimed_by=None,
                lease_expires_at=None, enqueued_at=utcnow())
        .execution_options(synchronize_session=False))
    session.commit()


def give_up(session: Session, submission: Submission, announcer: Announcer = SILENT) -> None:
    failed = rows_changed(session,
        update(Submission)
        .where(Submission.id == submission.id, Submission.status == submission.status,
               _same_token(submission.attempt_token))
        .values(status=SubmissionStatus.FAILED, attempt_token=None, lease_expires_at=None,
                message=GAVE_UP_MESSAGE.format(attempts=submission.attempts)))
    if failed != 1:
        session.rollback()
        return
    announcer.record(session, submission, Event.FAILED)
    session.commit()
    announcer.send(session, submission.id)
    log.error("submission %s failed after %s attempts", submission.id, submission.attempts)


class Grader:
    """What the task calls: claim, run the pipeline, store. One per worker process."""

    def __init__(self, *, pipeline: Callable[[], GradingPipeline], policy: GradingPolicy,
                 announcer: Announcer = SILENT) -> None:
        self._pipeline_factory = pipeline
        self.announcer = announcer
        self._pipeline: GradingPipeline | None = None
        self.policy = policy
        self._packages: dict[str, Assignment] = {}

    def grade(self, session: Session, submission_id: int) -> str:
        """Grade one submission; returns what happened (``graded``, ``skipped``, ``released``)."""
        claim_ = claim(session, submission_id, self.policy, self.announcer)
        if claim_ is None:
            return "skipped"
        submission = session.get(Submission, submission_id, populate_existing=True)
        assert submission is not None
        files = {f.name: f.content for f in submission.files}
        package = self._package(submission.assignment.slug, submission.assignment_version)
        try:
            document = self.pipeline.grade(package, files, seed=submission.seed,
                                           label=f"submission-{submission_id}")
        except SandboxUnavailable as exc:
            log.warning("submission %s: sandbox unavailable (%s); retrying later",
                        submission_id, exc)
            release(session, claim_)
            return "released"
        except Exception:
            # Our failure, not the student's (a bug, the soft time limit): try again later; the
            # attempt bound turns a persistent failure into a `failed` with a message.
            log.exception("submission %s: grading raised; retrying later", submission_id)
            session.rollback()
            release(session, claim_)
            return "released"
        stored = store_result(session, claim_, document, self.announcer)
        return "graded" if stored else "skipped"

    @property
    def pipeline(self) -> GradingPipeline:
        if self._pipeline is None:
            self._pipeline = self._pipeline_factory()
        return self._pipeline

    def _package(self, slug: str, version: str) -> Assignment:
        """The package, loaded again only when the submission was made against another version
        (loading hashes the package and draws a plan: too slow for every task)."""
        cached = self._packages.get(slug)
        if cached is not None and cached.version == version:
            return cached
        package = load_assignment(slug)
        self._packages[slug] = package
        return package

    def close(self) -> None:
        if self._pipeline is not None:
            self._pipeline.backend.close()


def reap(session: Session, *, policy: GradingPolicy, queued_stale_seconds: int,
         enqueue: Callable[[int], None], announcer: Announcer = SILENT) -> dict[str, int]:
    """Re-queue submissions stuck in ``queued`` or ``running``; fail those out of attempts."""
    now = utcnow()
    counts = {"requeued": 0, "failed": 0}
    stale_queued = select(Submission).where(
        Submission.status == SubmissionStatus.QUEUED,
        Submission.enqueued_at < now - timedelta(seconds=queued_stale_seconds))
    running = select(Submission).where(Submission.status == SubmissionStatus.RUNNING)
    fresh = {"populate_existing": True}
    for submission in list(session.scalars(stale_queued, execution_options=fresh)):
        submission.enqueued_at = now
        session.commit()
        enqueue(submission.id)
        counts["requeued"] += 1
    for submission in list(session.scalars(running, execution_options=fresh)):
        if not _claim_abandoned(submission):
            continue
        if submission.attempts >= policy.max_attempts:
            give_up(session, submission, announcer)
            counts["failed"] += 1
            continue
        reset = rows_changed(session, update(Submission)
            .where(Submission.id == submission.id,
                   Submission.attempt_token == submission.attempt_token)
            .values(status=SubmissionStatus.QUEUED, attempt_token=None, claimed_by=None,
                    lease_expires_at=None, enqueued_at=now))
        session.commit()
        if reset == 1:
            enqueue(submission.id)
            counts["requeued"] += 1
    return counts
