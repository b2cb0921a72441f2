"""The task queue as its senders see it: every task's name, and sending one by name.

Views, the reaper and the delivery channels send tasks through here and import nothing of the
worker: the tasks themselves (``service.tasks``) and the grading pipeline they run load only in
the worker process. Celery is the only dependency (the app's instance, built by
``service.celery_app``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from flask import current_app

from service.core.extensions import Shared

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)

celery: Shared[Celery] = Shared("celery")
"""The app's Celery instance, to send tasks by name (installed by ``service.celery_app``)."""

GRADE_TASK = "autograde.grade_submission"
REAP_TASK = "autograde.reap_stuck_submissions"
SEND_DUE_TASK = "autograde.send_due_deliveries"
DELIVER_TASK = "autograde.deliver"
"""One attempt at one outbox delivery: arguments, the channel's name and the delivery's id."""
SYNC_COURSE_TASK = "autograde.sync_lms_course"
SYNC_ALL_TASK = "autograde.sync_lms_rosters"
SIMILARITY_TASK = "autograde.similarity_report"
"""Compute one similarity run (``service.submissions.similarity.run_report``): its id."""


def send(task: str, *args: str | int, countdown: float | None = None) -> None:
    """Send ``task`` with ``args`` on the service's queue; raises when the broker cannot take it
    (callers that record their work first, the outbox channels, send it again later)."""
    celery().send_task(task, args=list(args), queue=current_app.config["QUEUE"],
                       countdown=countdown)


def enqueue(submission_id: int) -> None:
    """Send the grading task; call only after the submission is committed. A failure to publish
    loses nothing: the submission stays ``queued`` and the reaper sends it again."""
    try:
        celery().send_task(
            GRADE_TASK, args=[submission_id], queue=current_app.config["QUEUE"], retry=True,
            retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5,
                          "interval_max": 1.0})
    except Exception as exc:
        log.warning("could not enqueue submission %s (%s); the reaper will", submission_id,
                    type(exc).__name__)


def queue_depth(timeout: float = 3.0) -> int | None:
    """Messages ready in the service's queue, as the broker counts them; 0 when the queue does
    not exist yet, None when the broker does not answer within ``timeout`` seconds."""
    from kombu.exceptions import ChannelError

    name = current_app.config["QUEUE"]
    try:
        with celery().connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
            channel = connection.channel()
            try:
                return int(channel.queue_declare(queue=name, passive=True).message_count)
            except ChannelError:  # never declared (no worker consumed it yet), or gone
                return 0
            finally:
                try:
                    channel.close()
                except Exception:  # a channel closed by the broker's refusal
                    log.debug("closing the depth channel failed", exc_info=True)
    except Exception as exc:
        log.warning("the broker did not tell the queue's depth (%s: %s)",
                    type(exc).__name__, exc)
        return None
