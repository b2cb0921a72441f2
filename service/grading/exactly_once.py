"""Grading one submission exactly once: claim with a token, grade, store by compare-and-set.

A task may be delivered twice (a worker killed mid-run, a broker redelivery, the reaper): every
copy tries to claim the submission, only one claim is in force at a time, and only the holder of
that claim may store the result. The holder renews its claim's lease while it grades
(``LeaseKeeper``); a claim whose holder died, or lost its link to the database, is taken over
when its lease expires, or at once when the holder was a process of this host that no longer
exists.

Attempts count only what the submission did: a grading that failed on it (an error while grading
its outputs, the task's soft time limit) uses one of ``MAX_ATTEMPTS``. Our infrastructure
failing (no sandbox engine, a lost database or broker connection, a lost worker) is an
*interruption*: counted for the instructor to see, retried with backoff for as long as it lasts,
and the student reads that the submission waits for a grading machine. Only lost workers are
bounded (``MAX_WORKER_LOSSES``): a submission that kills its grading process every time would
otherwise hold a worker for ever.
"""

from __future__ import annotations

import enum
import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc
from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from assignments import Assignment
from assignments.spec import AssignmentError
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox import SandboxUnavailable
from service.core.db import rows_changed
from service.core.edge import replace_unstorable
from service.core.extensions import Shared
from service.grading.events import SILENT, Announcer, Event
from service.grading.waiting import VERSION_WAITING_MESSAGE, WAITING_MESSAGE
from service.models import Result, Submission, SubmissionStatus, utcnow
from service.submissions.gradebook import deadline_of, rule_of
from service.submissions.lateness import final_score, late_days

log = logging.getLogger(__name__)

GAVE_UP_MESSAGE = (
    "We could not grade this submission: grading it failed {attempts} times on our side (not "
    "because of your code, and it has been logged). Your files are kept; your instructor can "
    "regrade it, or you may submit again (this one does not count against your submission "
    "limit).")
WORKERS_LOST_MESSAGE = (
    "We could not grade this submission: its grading process stopped {lost} times before it "
    "finished. Your files are kept; your instructor can regrade it, or you may submit again "
    "(this one does not count against your submission limit).")


class VersionNotHeld(Exception):
    """This host's package of an assignment is neither the version a submission was made
    against nor the course's current version: grading it here would use the wrong version."""

    def __init__(self, slug: str, wanted: frozenset[str], held: str | None) -> None:
        super().__init__(f"{slug}: this host holds version {held or 'none'}, the submission "
                         f"needs {' or '.join(sorted(wanted))}")
        self.slug, self.wanted, self.held = slug, wanted, held


class GradingInterrupted(Exception):
    """Our infrastructure failed while this delivery held the claim (a lost database or broker
    connection): the task retries, and the retry may take over the claim by its ``token``."""

    def __init__(self, submission_id: int, token: str | None, cause: BaseException) -> None:
        super().__init__(f"submission {submission_id}: {type(cause).__name__}: {cause}")
        self.token = token


@dataclass(frozen=True)
class Claim:
    submission_id: int
    token: str
    round: int


@dataclass(frozen=True)
class GradingPolicy:
    lease_seconds: int
    max_attempts: int
    max_workers_lost: int = 10

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> GradingPolicy:
        return cls(int(config["LEASE_SECONDS"]), int(config["MAX_ATTEMPTS"]),
                   int(config["MAX_WORKER_LOSSES"]))


class LeaseKeeper:
    """Renews a claim's lease, from a thread of its own, while the claim's grading runs.

    Every third of the lease the lease is set to a whole lease from now, on a connection of its
    own, for as long as the claim is still in force: a grading longer than the lease keeps its
    claim, and a host that dies or is cut off mid-grading stops renewing, so its claim is
    taken over one lease later. A renewal that fails (the database unreachable) is tried again
    at the next turn; a claim found taken over ends the renewals (its result will be dropped).
    """

    def __init__(self, bind: Engine | Connection, claim_: Claim, lease_seconds: int) -> None:
        self._bind = bind
        self._claim = claim_
        self._lease = timedelta(seconds=lease_seconds)
        self._interval = max(0.5, lease_seconds / 3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"lease-{claim_.submission_id}")

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def renew(self) -> bool:
        """Extend the lease once; False when the claim is no longer in force."""
        with Session(self._bind) as session:
            changed = rows_changed(session, update(Submission)
                .where(Submission.id == self._claim.submission_id,
                       Submission.attempt_token == self._claim.token,
                       Submission.status == SubmissionStatus.RUNNING)
                .values(lease_expires_at=utcnow() + self._lease))
            session.commit()
        return changed == 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if not self.renew():
                    log.info("submission %s: claim %s taken over; lease no longer renewed",
                             self._claim.submission_id, self._claim.token)
                    return
            except sqlalchemy.exc.SQLAlchemyError as exc:
                log.warning("submission %s: lease not renewed (%s); trying again",
                            self._claim.submission_id, exc)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def claim(session: Session, submission_id: int, policy: GradingPolicy,
          announcer: Announcer = SILENT, *, resume: str | None = None) -> Claim | None:
    """Take the submission for grading, or None when it is not this delivery's to grade.

    ``resume`` is the token of a claim this task held when the database or broker failed
    under it: the retry takes that claim over at once instead of waiting for its lease.
    """
    submission = session.get(Submission, submission_id, populate_existing=True)
    if submission is None:
        log.warning("submission %s does not exist; dropping its task", submission_id)
        return None
    lost_worker = False
    if submission.status is SubmissionStatus.RUNNING:
        resumed = resume is not None and submission.attempt_token == resume
        if not resumed and not _claim_abandoned(submission):
            return None
        lost_worker = not resumed
    elif submission.status is not SubmissionStatus.QUEUED:
        return None
    # A claim taken over was ended by our side: it does not count against the submission.
    taken_over = submission.status is SubmissionStatus.RUNNING
    if attempts_used(submission) - int(taken_over) >= policy.max_attempts:
        give_up(session, submission, announcer)
        return None
    lost = submission.workers_lost + int(lost_worker)
    if lost >= policy.max_workers_lost > 0:
        give_up(session, submission, announcer, message=WORKERS_LOST_MESSAGE.format(lost=lost))
        return None
    token = secrets.token_hex(16)
    now = utcnow()
    taken = rows_changed(session, update(Submission)
        .where(Submission.id == submission_id, Submission.status == submission.status,
               _same_token(submission.attempt_token))
        .values(status=SubmissionStatus.RUNNING, attempt_token=token,
                attempts=Submission.attempts + 1,
                interruptions=Submission.interruptions + int(taken_over),
                workers_lost=Submission.workers_lost + int(lost_worker),
                claimed_by=worker_identity(), started_at=now,
                lease_expires_at=now + timedelta(seconds=policy.lease_seconds)))
    session.commit()
    return Claim(submission_id, token, submission.round) if taken == 1 else None


def attempts_used(submission: Submission) -> int:
    """The claims of this round that ended because of the submission, not of our machines."""
    return max(0, submission.attempts - submission.interruptions)


def _same_token(token: str | None) -> Any:
    return Submission.attempt_token.is_(None) if token is None \
        else Submission.attempt_token == token


def _claim_abandoned(submission: Submission) -> bool:
    """Whether the claim's holder stopped grading: its lease expired, or it was a process of
    this host that is gone."""
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


def nobody_waits(_submission_id: int) -> None:
    """The ``status_changed`` of a caller with no requests to wake (a script, a test)."""


def store_result(session: Session, claim_: Claim, document: dict[str, Any],
                 announcer: Announcer = SILENT, *,
                 status_changed: Callable[[int], None] = nobody_waits) -> bool:
    """Write the result if the claim is still in force; False (nothing written) otherwise.
    The announcer's deliveries are committed with the result and sent after it;
    ``status_changed`` is told before they are sent, so that the requests waiting on the
    submission answer at once, without waiting for the deliveries to be sent."""
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
    document = replace_unstorable(document)  # text from the sandbox, storable and showable
    score = float(document["score"])
    session.add(Result(submission_id=claim_.submission_id, round=claim_.round, score=score,
                       final_score=_after_late_policy(session, submission, score,
                                                      float(document["max_score"])),
                       max_score=float(document["max_score"]),
                       codes=[d["code"] for d in document["diagnoses"]], document=document,
                       attempt_token=claim_.token))
    announcer.record(session, submission, Event.GRADED)
    session.commit()
    status_changed(claim_.submission_id)
    announcer.send(session, claim_.submission_id)
    return True


def _after_late_policy(session: Session, submission: Submission, score: float,
                       max_score: float) -> float:
    """The final score as it stands when the result is stored (a record: pages and exports
    derive it again when read, by ``service.submissions.gradebook``)."""
    assignment = submission.assignment
    deadline = deadline_of(session, assignment, submission.user_id).at
    return final_score(score, max_score, days_late=late_days(submission.requested_at, deadline),
                       rule=rule_of(assignment))


def release(session: Session, claim_: Claim, *, interrupted: bool,
            message: str = WAITING_MESSAGE) -> int:
    """Hand the submission back to the queue to be retried; returns how many times it was
    interrupted so far. ``interrupted``: our infrastructure failed (the student then reads
    ``message``, that it waits for a grading machine); otherwise grading failed on it and an
    attempt is used."""
    values: dict[str, Any] = {"interruptions": Submission.interruptions + 1,
                              "message": message} if interrupted else {}
    rows_changed(session, update(Submission)
        .where(Submission.id == claim_.submission_id, Submission.attempt_token == claim_.token)
        .values(status=SubmissionStatus.QUEUED, attempt_token=None, claimed_by=None,
                lease_expires_at=None, enqueued_at=utcnow(), **values))
    session.commit()
    count = session.scalar(select(Submission.interruptions)
                           .where(Submission.id == claim_.submission_id))
    return int(count or 0)


def give_up(session: Session, submission: Submission, announcer: Announcer = SILENT, *,
            message: str | None = None) -> None:
    failed = rows_changed(session,
        update(Submission)
        .where(Submission.id == submission.id, Submission.status == submission.status,
               _same_token(submission.attempt_token))
        .values(status=SubmissionStatus.FAILED, attempt_token=None, lease_expires_at=None,
                message=message or GAVE_UP_MESSAGE.format(attempts=attempts_used(submission))))
    if failed != 1:
        session.rollback()
        return
    announcer.record(session, submission, Event.FAILED)
    session.commit()
    announcer.send(session, submission.id)
    log.error("submission %s failed after %s attempts (%s interruptions, %s workers lost)",
              submission.id, submission.attempts, submission.interruptions,
              submission.workers_lost)


class Outcome(enum.StrEnum):
    """What became of a submission its grading task took."""

    GRADED = "graded"
    """Its result is stored."""
    SKIPPED = "skipped"
    """Nothing to do: another process holds it, it is finished, or another stored first."""
    RELEASED = "released"
    """Grading failed on it: released for a retry that uses one of its attempts."""


@dataclass(frozen=True)
class Interrupted:
    """No sandbox could grade it here: released for a retry with backoff that uses no
    attempt."""

    count: int
    """How many interruptions the submission has had, this one included (the backoff's n)."""
    reason: str = "sandbox"
    """What was missing: ``sandbox`` (no engine) or ``version`` (this host does not hold the
    assignment's version)."""

    def __str__(self) -> str:
        return f"interrupted ({self.count})"


GradingOutcome = Outcome | Interrupted


class SubmissionGrading:
    """What the task calls: claim, run the pipeline, store. One per worker process."""

    def __init__(self, *, pipeline: Callable[[], GradingPipeline], policy: GradingPolicy,
                 announcer: Announcer = SILENT,
                 status_changed: Callable[[int], None] = nobody_waits) -> None:
        self._pipeline_factory = pipeline
        self.announcer = announcer
        # Called after each committed status change (claimed, stored, given up, released):
        # wakes the requests waiting on the submission (``service.grading.status_watch``).
        self.status_changed = status_changed
        self._pipeline: GradingPipeline | None = None
        self.policy = policy
        self._packages: dict[str, Assignment] = {}

    def grade_and_store(self, session: Session, submission_id: int, *,
                        resume: str | None = None) -> GradingOutcome:
        """Claim one submission, grade it and store its result; what became of it. A lost
        database or broker connection raises GradingInterrupted for the task to retry."""
        claim_: Claim | None = None
        try:
            claim_ = claim(session, submission_id, self.policy, self.announcer, resume=resume)
            self.status_changed(submission_id)
            if claim_ is None:
                return Outcome.SKIPPED
            outcome = self._grade_claimed(session, claim_)
            if outcome is not Outcome.GRADED:  # a stored result has told its waiters already
                self.status_changed(submission_id)
            return outcome
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            _quiet_rollback(session)
            raise GradingInterrupted(submission_id, claim_.token if claim_ else None,
                                     exc) from exc

    def _grade_claimed(self, session: Session, claim_: Claim) -> GradingOutcome:
        submission_id = claim_.submission_id
        submission = session.get(Submission, submission_id, populate_existing=True)
        assert submission is not None
        files = {f.name: f.content for f in submission.files}
        try:
            package = self._package(submission.assignment.slug,
                                    frozenset({submission.assignment_version,
                                               submission.assignment.version}))
            pipeline = self._ready_pipeline()
            with LeaseKeeper(session.get_bind(), claim_, self.policy.lease_seconds):
                document = pipeline.grade(package, files, seed=submission.seed,
                                          label=f"submission-{submission_id}")
        except VersionNotHeld as exc:
            # Another host may hold it (a rolling deploy): handed back, like a missing sandbox,
            # for as long as it takes. The log line is the operator's: no host holding the
            # version means a package to deploy, never a student's failure.
            log.error("submission %s not graded here: %s; released for a host that holds it",
                      submission_id, exc)
            session.rollback()
            return Interrupted(release(session, claim_, interrupted=True,
                                       message=VERSION_WAITING_MESSAGE), reason="version")
        except SandboxUnavailable as exc:
            log.warning("submission %s: sandbox unavailable (%s); retrying later",
                        submission_id, exc)
            session.rollback()
            return Interrupted(release(session, claim_, interrupted=True))
        except Exception as exc:
            if is_connection_error(exc):
                raise
            # Our failure on this submission (a bug, the soft time limit): try again later;
            # the attempt bound turns a persistent failure into a `failed` with a message.
            log.exception("submission %s: grading raised; retrying later", submission_id)
            session.rollback()
            release(session, claim_, interrupted=False)
            return Outcome.RELEASED
        stored = store_result(session, claim_, document, self.announcer,
                              status_changed=self.status_changed)
        return Outcome.GRADED if stored else Outcome.SKIPPED

    def _ready_pipeline(self) -> GradingPipeline:
        """The pipeline, built on first use; failing to build it (no engine, an engine error
        while sweeping old containers) is the sandbox being unavailable, never the student's."""
        if self._pipeline is None:
            try:
                self._pipeline = self._pipeline_factory()
            except SandboxUnavailable:
                raise
            except Exception as exc:
                log.exception("could not start the sandbox backend")
                raise SandboxUnavailable(f"the sandbox backend did not start: "
                                         f"{type(exc).__name__}: {exc}") from exc
        return self._pipeline

    @property
    def pipeline(self) -> GradingPipeline:
        return self._ready_pipeline()

    def _package(self, slug: str, versions: frozenset[str]) -> Assignment:
        """This host's package of ``slug`` if its version is one of ``versions``; VersionNotHeld
        otherwise. Loaded again only when the cached one is not (loading hashes the package and
        draws a plan: too slow for every task; the package on disk may have been replaced)."""
        cached = self._packages.get(slug)
        if cached is not None and cached.version in versions:
            return cached
        try:
            package = load_assignment(slug)
        except AssignmentError:
            raise VersionNotHeld(slug, versions, None) from None
        self._packages[slug] = package
        if package.version not in versions:
            raise VersionNotHeld(slug, versions, package.version)
        return package

    def close(self) -> None:
        if self._pipeline is not None:
            self._pipeline.backend.close()


submission_grading: Shared[SubmissionGrading] = Shared("autograde.grading")
"""Claims, grades and stores one submission; the worker process's, built on first use
(``service.tasks``)."""


CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, sqlalchemy.exc.TimeoutError,
    kombu.exceptions.OperationalError, redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError, ConnectionError)
"""A lost or refused connection to the database or the broker: the same operation may succeed
when retried (unlike an error in what was asked)."""


def is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, CONNECTION_ERRORS):
        return True
    return isinstance(exc, sqlalchemy.exc.DBAPIError) and bool(exc.connection_invalidated)


def _quiet_rollback(session: Session) -> None:
    try:
        session.rollback()
    except Exception:  # the connection is gone; the session is discarded after the task
        log.debug("rollback after a lost connection failed", exc_info=True)


def reap(session: Session, *, policy: GradingPolicy, queued_stale_seconds: int,
         enqueue: Callable[[int], None], announcer: Announcer = SILENT,
         status_changed: Callable[[int], None] = nobody_waits) -> dict[str, int]:
    """Re-queue submissions stuck in ``queued`` or ``running``; fail those out of attempts.
    ``status_changed`` is told of each one moved out of ``running`` (its waiters wake)."""
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
        lost = submission.workers_lost + 1
        if lost >= policy.max_workers_lost > 0:
            give_up(session, submission, announcer,
                    message=WORKERS_LOST_MESSAGE.format(lost=lost))
            status_changed(submission.id)
            counts["failed"] += 1
            continue
        reset = rows_changed(session, update(Submission)
            .where(Submission.id == submission.id,
                   Submission.attempt_token == submission.attempt_token)
            .values(status=SubmissionStatus.QUEUED, attempt_token=None, claimed_by=None,
                    lease_expires_at=None, enqueued_at=now,
                    interruptions=Submission.interruptions + 1,
                    workers_lost=Submission.workers_lost + 1))
        session.commit()
        if reset == 1:
            status_changed(submission.id)
            enqueue(submission.id)
            counts["requeued"] += 1
    return counts
