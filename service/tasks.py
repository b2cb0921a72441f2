"""The Celery tasks: thin, named, taking ids. Grading itself lives in ``service.grading``."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from celery import Task, shared_task
from flask import current_app

from service.celery_app import (
    GRADE_TASK,
    REAP_TASK,
    SEND_DUE_TASK,
    current_announcer,
    current_grader,
    enqueue,
)
from service.db import session
from service.grading import CONNECTION_ERRORS, GradingInterrupted, GradingPolicy, reap
from service.lti.passback import PUBLISH_TASK, PassbackSettings, publish
from service.lti.views import runtime as lti_runtime
from service.webhooks.delivery import DELIVER_TASK, WebhookPolicy, deliver


# max_retries=None on the task itself: in ``retry()``, None means "the task's default" (3).
@shared_task(name=GRADE_TASK, bind=True, acks_late=True,  # type: ignore[untyped-decorator]
             reject_on_worker_lost=True, max_retries=None)
def grade_submission(self: Task, submission_id: int, resume: str | None = None) -> str:
    """Grade one submission (idempotent: a second delivery finds it claimed or done).

    Nothing is acknowledged away: no sandbox, or a lost database or broker connection, sends
    the task again with backoff for as long as the fault lasts (the retry takes over the claim
    it held); a grading that failed on the submission is retried within the attempt bound."""
    config = current_app.config
    try:
        outcome = current_grader().grade(session(), submission_id, resume=resume)
    except GradingInterrupted as interrupted:
        raise self.retry(args=[submission_id], kwargs={"resume": interrupted.token},
                         countdown=retry_delay(self.request.retries + 1, config)
                         ) from interrupted
    if outcome == "released":
        raise self.retry(args=[submission_id], kwargs={},
                         countdown=config["SANDBOX_RETRY_SECONDS"])
    if outcome.startswith("interrupted:"):
        raise self.retry(args=[submission_id], kwargs={},
                         countdown=retry_delay(int(outcome.partition(":")[2]), config))
    return outcome


def retry_delay(interruption: int, config: Mapping[str, Any]) -> float:
    """Backoff for the n-th interruption: base * 2^(n-1), capped (well under the broker's
    visibility timeout, so a waiting retry is never delivered twice), with 20% jitter so a
    burst of waiting submissions does not come back in one wave."""
    base = float(config["SANDBOX_RETRY_SECONDS"])
    cap = float(config["SANDBOX_RETRY_MAX_SECONDS"])
    delay = min(cap, base * 2 ** min(max(interruption - 1, 0), 16))
    return float(round(delay * random.uniform(0.8, 1.0), 2))


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


# Deliveries whose database or broker connection drops are retried with backoff (the sweep
# would find them too, minutes later).
_RETRY_ON_CONNECTION_LOSS: dict[str, object] = {
    "autoretry_for": CONNECTION_ERRORS, "retry_backoff": 2, "retry_backoff_max": 60,
    "retry_jitter": True, "max_retries": None}


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True,  # type: ignore[untyped-decorator]
             **_RETRY_ON_CONNECTION_LOSS)
def deliver_webhook(self: Task, delivery_id: int) -> str:
    """One attempt at a webhook delivery; a failed one schedules its retry with a countdown
    (long backoffs are left to the periodic sweep). Duplicates find the attempt taken."""
    outcome = deliver(session(), delivery_id, WebhookPolicy.from_config(current_app.config))
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in, max_retries=None)
    return outcome.status


@shared_task(name=PUBLISH_TASK, bind=True, acks_late=True,  # type: ignore[untyped-decorator]
             **_RETRY_ON_CONNECTION_LOSS)
def publish_score(self: Task, delivery_id: int) -> str:
    """One attempt at sending a score to an LMS line item; a failed one retries with backoff.
    Duplicates find the delivery claimed or done."""
    outcome = publish(session(), delivery_id,
                      settings=PassbackSettings.from_config(current_app.config),
                      tokens=lti_runtime().tokens)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in, max_retries=None)
    return outcome.status
