"""The worker: its Celery tasks (thin, named, taking ids) and the objects they run on.

This is the one place the worker is wired, and only the worker imports it (``service.worker``):
the web side sends these tasks by name through ``service.core.queue``. The submission grading
(pipeline, sandbox backend, policy) and the announcer (the channels finished submissions are
delivered on) are built here, once per worker process on first use, from the app's config.
Grading itself lives in ``service.grading.exactly_once``.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import docker
import docker.errors
from celery import Task, bootsteps, shared_task
from flask import Flask, current_app
from sqlalchemy import func, select, text

from assignments.spec import AssignmentError, list_assignments, load_spec
from grader.learning import REFERENCE_TRAININGS
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline, use_one_thread
from sandbox import create_backend
from sandbox.docker_pool import containers_of_host
from sandbox.selection import choose_backend
from service.core.db import database, session
from service.core.queue import (
    DELIVER_TASK,
    GRADE_TASK,
    REAP_TASK,
    SEND_DUE_TASK,
    SIMILARITY_TASK,
    SYNC_ALL_TASK,
    SYNC_COURSE_TASK,
    enqueue,
)
from service.core.queue import celery as shared_celery
from service.grading import outbox
from service.grading.events import Announcer, announcer
from service.grading.exactly_once import (
    CONNECTION_ERRORS,
    GradingInterrupted,
    GradingPolicy,
    Interrupted,
    Outcome,
    SubmissionGrading,
    reap,
    submission_grading,
    worker_identity,
)
from service.grading.host_health import HostProbe, serve_health
from service.grading.outbox import Courier
from service.grading.status_watch import status_publisher
from service.lti.passback import GradePassback, PassbackSettings, ScoreCourier
from service.lti.runtime import lti_runtime
from service.lti.services import (
    ServiceSettings,
    contexts_to_sync,
    sync_context,
)
from service.models import Submission, SubmissionStatus
from service.submissions.similarity import run_report
from service.webhooks.delivery import WebhookChannel, WebhookCourier, WebhookPolicy

log = logging.getLogger(__name__)


def current_announcer() -> Announcer:
    """The channels finished submissions are announced on: webhooks, then LMS scores."""
    return announcer.built(
        lambda: Announcer((WebhookChannel.from_config(current_app.config), GradePassback())))


def current_grading() -> SubmissionGrading:
    """This worker process's submission grading, built on first use (its sandbox backend with
    it)."""
    return submission_grading.built(lambda: SubmissionGrading(
        pipeline=_pipeline_factory(current_app.config["SANDBOX_BACKEND"]),
        policy=GradingPolicy.from_config(current_app.config), announcer=current_announcer(),
        status_changed=status_publisher(current_app.config)))


def close_grading(app: Flask) -> Callable[..., None]:
    """At a grading process's exit (``worker_process_shutdown``, connected by ``service.worker``):
    its submission grading closed, its sandbox backend with it."""

    def close(**_: Any) -> None:
        grading = submission_grading.remove(app)
        if grading is not None:
            grading.close()

    return close


def _pipeline_factory(name: str) -> Callable[[], GradingPipeline]:
    def build() -> GradingPipeline:
        backend = choose_backend(warn=sys.stderr) if name == "auto" else name
        return GradingPipeline(backend=create_backend(backend))

    return build


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
        outcome = current_grading().grade_and_store(session(), submission_id, resume=resume)
    except GradingInterrupted as interrupted:
        raise self.retry(args=[submission_id], kwargs={"resume": interrupted.token},
                         countdown=retry_delay(self.request.retries + 1, config)
                         ) from interrupted
    match outcome:
        case Outcome.RELEASED:
            raise self.retry(args=[submission_id], kwargs={},
                             countdown=config["SANDBOX_RETRY_SECONDS"])
        case Interrupted(count=count):
            raise self.retry(args=[submission_id], kwargs={},
                             countdown=retry_delay(count, config))
    return str(outcome)


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
                enqueue=enqueue, announcer=current_announcer(),
                status_changed=current_grading().status_changed)


@shared_task(name=SEND_DUE_TASK)  # type: ignore[untyped-decorator]
def send_due_deliveries() -> dict[str, int]:
    """Periodic (beat): send every webhook and LMS delivery that is due and was not sent."""
    return current_announcer().send_all_due(session())


# Deliveries whose database or broker connection drops are retried with backoff (the sweep
# would find them too, minutes later).
_RETRY_ON_CONNECTION_LOSS: dict[str, object] = {
    "autoretry_for": CONNECTION_ERRORS, "retry_backoff": 2, "retry_backoff_max": 60,
    "retry_jitter": True, "max_retries": None}


def courier(channel: str) -> Courier:
    """What sends one delivery of the channel named ``channel``, as this app is configured."""
    if channel == WebhookChannel.name:
        return WebhookCourier(WebhookPolicy.from_config(current_app.config))
    if channel == GradePassback.name:
        return ScoreCourier(PassbackSettings.from_config(current_app.config),
                            lti_runtime().tokens)
    raise ValueError(f"no delivery channel {channel!r}")


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True,  # type: ignore[untyped-decorator]
             **_RETRY_ON_CONNECTION_LOSS)
def deliver(self: Task, channel: str, delivery_id: int) -> str:
    """One attempt at a delivery of the outbox (a webhook event, a score to the LMS); a failed
    one schedules its retry with a countdown (long backoffs are left to the periodic sweep).
    Duplicates find the delivery claimed or done."""
    outcome = outbox.attempt(session(), courier(channel), delivery_id)
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


@shared_task(name=SIMILARITY_TASK, soft_time_limit=1800,  # type: ignore[untyped-decorator]
             time_limit=1860)
def similarity_report(run_id: int) -> str:
    """One similarity report computed, its progress recorded as it goes."""
    return run_report(session(), run_id)


@shared_task(name=SYNC_ALL_TASK)  # type: ignore[untyped-decorator]
def sync_lms_rosters() -> int:
    """Periodic (beat): a sync task for every LMS course; how many were sent."""
    contexts = contexts_to_sync(session())
    for context_id in contexts:
        sync_lms_course.apply_async(args=[context_id], queue=current_app.config["QUEUE"])
    return len(contexts)


def share_warm_pool(*, options: Mapping[str, Any], **_: Any) -> None:
    """At worker start (``celeryd_init``, before the grading processes fork): each grading
    process keeps ``cores / processes`` warm containers ready, but at least two, and starts
    ``cores / processes`` at a time (at least one), so the worker as a whole never has more
    containers importing torch than cores beside the gradings.

    Celery hands a task to any idle process: with one container each (a share of the cores),
    the next submission often goes to a process whose container is still starting, and waits
    for it; with two each, one is ready while the other starts. Ready containers cost memory
    only; starting ones cost the cores, hence the bound on starts.
    ``AUTOGRADE_DOCKER_POOL_SIZE`` and ``AUTOGRADE_DOCKER_STARTERS`` override either; the
    fork-server mode's servers (``AUTOGRADE_DOCKER_FORK_SERVERS``) are shared out by the cores
    (each is a long-lived container per core)."""
    cores = os.cpu_count() or 1
    processes = int(options.get("concurrency") or cores)
    share = max(1, cores // max(processes, 1))
    os.environ.setdefault("AUTOGRADE_DOCKER_POOL_SIZE", str(max(2, share)))
    os.environ.setdefault("AUTOGRADE_DOCKER_STARTERS", str(share))
    os.environ.setdefault("AUTOGRADE_DOCKER_FORK_SERVERS", str(share))
    log.info("warm pool: %s container(s) per grading process, %s started at a time, "
             "%s process(es)", os.environ["AUTOGRADE_DOCKER_POOL_SIZE"],
             os.environ["AUTOGRADE_DOCKER_STARTERS"], processes)


def prepare_reference_trainings(**_: Any) -> None:
    """At worker start (``celeryd_init``, before the grading processes fork): the reference's
    training on each training seed of every installed assignment, computed once here and
    inherited by every grading process. Otherwise each process would train each seed again on
    the first submissions that picked it, in a deploy's first rush. The worker starts whatever
    happens here: an assignment that cannot be loaded or trained is left to its submissions,
    whose gradings report it."""
    use_one_thread()  # before any torch work in the process the grading processes fork from
    started, trained = time.perf_counter(), 0
    for slug in list_assignments():
        try:
            trained += REFERENCE_TRAININGS.prepare(load_assignment(slug))
        except AssignmentError as exc:
            log.warning("reference trainings of %s not prepared: %s", slug, exc)
        except Exception:  # a broken reference: its gradings will say so; the worker must start
            log.exception("reference trainings of %s not prepared", slug)
    log.info("reference trainings: %d prepared in %.1f s", trained, time.perf_counter() - started)


QUEUE_POLL_SECONDS = 0.1


class PollQueueOften(bootsteps.StartStopStep):  # type: ignore[misc]
    """A worker consumer step: a broker that is polled (the embedded default's queue table) is
    polled every ``QUEUE_POLL_SECONDS`` instead of kombu's 1 s, which would be most of a
    submission's queue wait on an idle machine. The embedded queue's worker is woken by each
    task sent instead and reads at this interval only where it cannot be
    (``service.queue_wake``). Brokers that push (Redis) are left alone."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, consumer: Any) -> None:
        transport = consumer.connection.transport
        if getattr(transport, "polling_interval", None) is not None:
            transport.polling_interval = min(transport.polling_interval, QUEUE_POLL_SECONDS)


def resend_on_connect(app: Flask) -> type[bootsteps.StartStopStep]:
    """A worker consumer step run each time the worker (re)connects to the broker: it sends
    again every submission still queued in the database, and re-queues claims whose worker is
    gone (registered by ``service.worker``).

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


def host_health(app: Flask) -> Callable[..., None]:
    """At worker start (``worker_ready``, in the main process once the pool runs): the host's
    health and metrics server, when ``WORKER_HEALTH_PORT`` is set."""

    def start(sender: Any = None, **_: Any) -> None:
        port = int(app.config["WORKER_HEALTH_PORT"])
        if not port:
            return
        host = worker_identity().rpartition(":")[0]
        processes = int(getattr(getattr(sender, "pool", None), "limit", 0) or 0)
        serve_health(HostProbe(host=host, processes=processes, packages=_held_packages(),
                               database_up=lambda: _database_up(app),
                               broker_up=lambda: _broker_up(app),
                               running_here=lambda: _running_here(app, host),
                               sandbox_containers=_sandbox_containers(app, host)),
                     address=str(app.config["WORKER_HEALTH_ADDRESS"]), port=port)

    return start


def _held_packages() -> dict[str, str]:
    held = {}
    for slug in list_assignments():
        try:
            held[slug] = load_spec(slug).version
        except AssignmentError as exc:
            log.warning("package %s cannot be read: %s", slug, exc)
    return held


def _database_up(app: Flask) -> bool:
    with app.app_context():
        try:
            session().execute(text("SELECT 1"))
            return True
        except Exception:
            return False
        finally:
            database().sessions.remove()


def _broker_up(app: Flask) -> bool:
    try:
        with shared_celery.of(app).connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)
        return True
    except Exception:
        return False


def _sandbox_containers(app: Flask, host: str) -> Callable[[], int | None]:
    """The count of this host's sandbox containers, when it grades in Docker."""
    name = str(app.config["SANDBOX_BACKEND"])
    if (choose_backend() if name == "auto" else name) != "docker":
        return lambda: None

    def count() -> int | None:
        try:
            client = docker.from_env(timeout=3)
            try:
                return containers_of_host(client, host)
            finally:
                client.close()
        except (docker.errors.DockerException, OSError):
            return None

    return count


def _running_here(app: Flask, host: str) -> int:
    with app.app_context():
        try:
            return int(session().scalar(select(func.count()).where(
                Submission.status == SubmissionStatus.RUNNING,
                Submission.claimed_by.like(f"{host}:%"))) or 0)
        except Exception:
            return 0
        finally:
            database().sessions.remove()
