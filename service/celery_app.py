"""Celery bound to the Flask app: one ``celery_init_app``, tasks run inside the app context."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from celery import Celery, Task, bootsteps
from celery.signals import worker_process_init, worker_process_shutdown
from flask import Flask, current_app

from service.config import celery_settings
from service.db import database, session
from service.events import Announcer
from service.grading import Grader, GradingPolicy, reap

log = logging.getLogger(__name__)

GRADE_TASK = "autograde.grade_submission"
REAP_TASK = "autograde.reap_stuck_submissions"
SEND_DUE_TASK = "autograde.send_due_deliveries"


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):  # type: ignore[misc]
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with app.app_context():
                try:
                    return self.run(*args, **kwargs)
                finally:
                    database().sessions.remove()

    celery = Celery(app.name, task_cls=FlaskTask)
    celery.config_from_object(celery_settings(app.config))
    celery.set_default()
    app.extensions["celery"] = celery

    import service.tasks  # noqa: F401 - registers the shared tasks with this app

    def after_fork(**_: Any) -> None:
        app.extensions["autograde.db"].dispose_after_fork()

    def at_exit(**_: Any) -> None:
        grader = app.extensions.pop("autograde.grader", None)
        if grader is not None:
            grader.close()

    worker_process_init.connect(after_fork, weak=False)
    worker_process_shutdown.connect(at_exit, weak=False)
    celery.steps["consumer"].add(_resend_on_connect(app))
    return celery


def _resend_on_connect(app: Flask) -> type[bootsteps.StartStopStep]:
    """A consumer step run each time the worker (re)connects to the broker: it sends again every
    submission still queued in the database, and re-queues claims whose worker is gone.

    A broker restarted without persistence has lost its queue, and a worker killed with -9
    leaves its messages unacknowledged until the visibility timeout: this makes both come back
    within seconds of the broker or the worker returning, not at the reaper's stale period.
    Duplicates are harmless (a second delivery finds the submission claimed or done)."""

    class ResendQueued(bootsteps.StartStopStep):  # type: ignore[misc]
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def start(self, consumer: Any) -> None:
            threading.Thread(target=self._resend, name="autograde-resend", daemon=True).start()

        @staticmethod
        def _resend() -> None:
            with app.app_context():
                try:
                    counts = reap(session(), policy=GradingPolicy.from_config(app.config),
                                  queued_stale_seconds=0, enqueue=enqueue,
                                  announcer=current_announcer())
                    if counts["requeued"]:
                        log.info("connected to the broker: sent %s queued submissions again",
                                 counts["requeued"])
                except Exception:  # the reaper's next run sends them
                    log.exception("could not send queued submissions again after connecting")
                finally:
                    database().sessions.remove()

    return ResendQueued


def enqueue(submission_id: int) -> None:
    """Send the grading task; call only after the submission is committed. A failure to publish
    loses nothing: the submission stays ``queued`` and the reaper sends it again."""
    celery: Celery = current_app.extensions["celery"]
    try:
        celery.send_task(GRADE_TASK, args=[submission_id], queue=current_app.config["QUEUE"],
                         retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2,
                                                   "interval_step": 0.5, "interval_max": 1.0})
    except Exception as exc:
        log.warning("could not enqueue submission %s (%s); the reaper will", submission_id,
                    type(exc).__name__)


def current_grader() -> Grader:
    """This worker process's grader, built on first use (its sandbox backend with it)."""
    grader: Grader | None = current_app.extensions.get("autograde.grader")
    if grader is None:
        grader = Grader(pipeline=_pipeline_factory(current_app.config["SANDBOX_BACKEND"]),
                        policy=GradingPolicy.from_config(current_app.config),
                        announcer=current_announcer())
        current_app.extensions["autograde.grader"] = grader
    return grader


def current_announcer() -> Announcer:
    """The channels finished submissions are announced on (built by ``create_app``)."""
    announcer: Announcer = current_app.extensions["autograde.announcer"]
    return announcer


def _pipeline_factory(name: str) -> Any:
    def build() -> Any:
        from grader.pipeline import GradingPipeline
        from sandbox import create_backend
        from sandbox.selection import choose_backend

        backend = choose_backend(warn=sys.stderr) if name == "auto" else name
        return GradingPipeline(backend=create_backend(backend))

    return build


__all__ = ["GRADE_TASK", "REAP_TASK", "SEND_DUE_TASK", "celery_init_app", "current_announcer",
           "current_grader", "enqueue", "session"]
