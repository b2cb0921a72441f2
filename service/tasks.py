"""The worker: its Celery tasks (thin, named, taking ids) and the objects they run on.

This is the one place the worker is wired, and only the worker imports it (``service.worker``):
the web side sends these tasks by name through ``service.queue``. The grader (pipeline, sandbox
backend, policy) and the announcer (the channels finished submissions are delivered on) are
built here, once per worker process on first use, from the app's config. Grading itself lives
in ``service.grading``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from celery import Task, shared_task
from flask import current_app

from grader.pipeline import GradingPipeline
from sandbox import create_backend
from sandbox.selection import choose_backend
from service.db import session
from service.events import Announcer
from service.grading import Grader, GradingPolicy, reap
from service.lti.passback import GradePassback, PassbackSettings, publish
from service.lti.services import (
    ServiceSettings,
    contexts_to_sync,
    sync_context,
)
from service.lti.views import runtime as lti_runtime
from service.queue import (
    DELIVER_TASK,
    GRADE_TASK,
    PUBLISH_TASK,
    REAP_TASK,
    SEND_DUE_TASK,
    SYNC_ALL_TASK,
    SYNC_COURSE_TASK,
    enqueue,
)
from service.webhooks.delivery import WebhookChannel, WebhookPolicy, deliver


def current_announcer() -> Announcer:
    """The channels finished submissions are announced on: webhooks, then LMS scores."""
    announcer: Announcer | None = current_app.extensions.get("autograde.announcer")
    if announcer is None:
        announcer = Announcer((WebhookChannel.from_config(current_app.config), GradePassback()))
        current_app.extensions["autograde.announcer"] = announcer
    return announcer


def current_grader() -> Grader:
    """This worker process's grader, built on first use (its sandbox backend with it)."""
    grader: Grader | None = current_app.extensions.get("autograde.grader")
    if grader is None:
        grader = Grader(pipeline=_pipeline_factory(current_app.config["SANDBOX_BACKEND"]),
                        policy=GradingPolicy.from_config(current_app.config),
                        announcer=current_announcer())
        current_app.extensions["autograde.grader"] = grader
    return grader


def _pipeline_factory(name: str) -> Callable[[], GradingPipeline]:
    def build() -> GradingPipeline:
        backend = choose_backend(warn=sys.stderr) if name == "auto" else name
        return GradingPipeline(backend=create_backend(backend))

    return build


@shared_task(name=GRADE_TASK, bind=True, acks_late=True,  # type: ignore[untyped-decorator]
             reject_on_worker_lost=True)
def grade_submission(self: Task, submission_id: int) -> str:
    """Grade one submission (idempotent: a second delivery finds it claimed or done)."""
    outcome = current_grader().grade(session(), submission_id)
    if outcome == "released":
        raise self.retry(countdown=current_app.config["SANDBOX_RETRY_SECONDS"], max_retries=None)
    return outcome


@shared_task(name=REAP_TASK)  # type: ignore[untyped-decorator]
def reap_stuck_submissions() -> dict[str, int]:
    """Periodic (beat): re-queue stuck submissions, fail those out of attempts."""
    return reap(session(), policy=GradingPolicy.from_config(current_app.config),
                queued_stale_seconds=int(current_app.config["QUEUED_STALE_SECONDS"]),
                enqueue=enqueue, announcer=current_announcer())


@shared_task(name=SEND_DUE_TASK)  # type: ignore[untyped-decorator]
def send_due_deliveries() -> dict[str, int]:
    """Periodic (beat): send every webhook and LMS delivery that is due and was not sent."""
    return current_announcer().send_all_due(session())


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True)  # type: ignore[untyped-decorator]
def deliver_webhook(self: Task, delivery_id: int) -> str:
    """One attempt at a webhook delivery; a failed one schedules its retry with a countdown
    (long backoffs are left to the periodic sweep). Duplicates find the attempt taken."""
    outcome = deliver(session(), delivery_id, WebhookPolicy.from_config(current_app.config))
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in, max_retries=None)
    return outcome.status


@shared_task(name=PUBLISH_TASK, bind=True, acks_late=True)  # type: ignore[untyped-decorator]
def publish_score(self: Task, delivery_id: int) -> str:
    """One attempt at sending a score to an LMS line item; a failed one retries with backoff.
    Duplicates find the delivery claimed or done."""
    outcome = publish(session(), delivery_id,
                      settings=PassbackSettings.from_config(current_app.config),
                      tokens=lti_runtime().tokens)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in, max_retries=None)
    return outcome.status


@shared_task(name=SYNC_COURSE_TASK, soft_time_limit=240,  # type: ignore[untyped-decorator]
             time_limit=300)
def sync_lms_course(context_id: int) -> str:
    """An LMS course's roster (Names and Roles) and line items brought in step."""
    done = sync_context(session(), context_id, tokens=lti_runtime().tokens,
                        settings=ServiceSettings.from_config(current_app.config))
    return "gone" if done is None else f"{done.roster} / {done.lineitems} line item(s)"


@shared_task(name=SYNC_ALL_TASK)  # type: ignore[untyped-decorator]
def sync_lms_rosters() -> int:
    """Periodic (beat): a sync task for every LMS course; how many were sent."""
    contexts = contexts_to_sync(session())
    for context_id in contexts:
        sync_lms_course.apply_async(args=[context_id], queue=current_app.config["QUEUE"])
    return len(contexts)
