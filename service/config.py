"""Service configuration: defaults, overridden by ``AUTOGRADE_*`` environment variables."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.core.queue import REAP_TASK, SEND_DUE_TASK, SYNC_ALL_TASK
from service.queue_wake import wakeable_broker_url

ENV_PREFIX = "AUTOGRADE"
log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    # Where data lives. The embedded default is one SQLite file and a kombu SQLAlchemy queue on
    # another; production sets PostgreSQL and Redis URLs.
    "DATABASE_URL": "sqlite:///" + str(Path(".autograde") / "autograde.db"),
    "BROKER_URL": "sqla+sqlite:///" + str(Path(".autograde") / "broker.db"),
    "QUEUE": "grading",
    "SECRET_KEY": None,
    # Prometheus: GET /metrics answers only ``Authorization: Bearer <METRICS_TOKEN>``; unset,
    # the endpoint does not exist (404). A worker host answers GET /healthz and /metrics on
    # WORKER_HEALTH_ADDRESS:WORKER_HEALTH_PORT (0: off), loopback unless told otherwise.
    "METRICS_TOKEN": None,
    "WORKER_HEALTH_PORT": 0,
    "WORKER_HEALTH_ADDRESS": "127.0.0.1",
    # Behind a TLS-terminating reverse proxy: how many proxies' X-Forwarded-* headers to trust
    # (links and LTI URLs then say https and the public host). 0 trusts none.
    "PROXY_HOPS": 0,
    # Sandbox: auto = docker when an engine answers, else local with a warning.
    "SANDBOX_BACKEND": "auto",
    # Uploads.
    "MAX_UPLOAD_BYTES": 1 << 20,
    "MAX_FILES": 20,
    "MAX_FILE_BYTES": 256 << 10,
    "ZIP_MAX_ENTRIES": 50,
    "ZIP_MAX_UNCOMPRESSED_BYTES": 2 << 20,
    # Per student and assignment, unless the assignment sets its own.
    "RATE_LIMIT_COUNT": 10,
    "RATE_LIMIT_WINDOW_SECONDS": 3600,
    # Grading runs. The task's limits sit well above the sandbox's wall-clock deadline (three
    # times the run's 20 CPU-s: 60 s) and a cold start on a loaded machine, so a submission
    # that sleeps to its deadline gets its time-limit grade, never a failed task; the broker's
    # visibility timeout above the task's hard limit, so a running task is never redelivered.
    # The claim's lease is renewed every third of it while its grading runs: a running task
    # keeps its claim, and a dead or cut-off host's claim is taken over one lease (and at most
    # one reaper interval) after it stopped.
    "TASK_SOFT_TIME_LIMIT": 150,
    "TASK_TIME_LIMIT": 180,
    "VISIBILITY_TIMEOUT": 600,
    # RabbitMQ only: seconds between heartbeats (a silent link is given up after about two).
    "BROKER_HEARTBEAT_SECONDS": 10,
    "LEASE_SECONDS": 30,
    "QUEUED_STALE_SECONDS": 900,
    # Gradings that failed on the submission itself before it is `failed` with a message.
    # Infrastructure interruptions (no sandbox, lost connections) never count; lost workers
    # are bounded apart (a submission that kills its grading process each time); 0: no bound.
    "MAX_ATTEMPTS": 3,
    "MAX_WORKER_LOSSES": 10,
    "REAPER_INTERVAL_SECONDS": 15,
    # Webhook and LMS deliveries: how often the periodic task sends what is due.
    "DELIVERY_SWEEP_SECONDS": 30,
    # A delivery whose task was sent this long ago and has not run is taken as lost: sent again.
    "DELIVERY_REDISPATCH_SECONDS": 300,
    # Webhooks: a failed attempt is retried after BACKOFF seconds, doubling up to BACKOFF_MAX,
    # until MAX_ATTEMPTS.
    # Targets in private, loopback, link-local and other non-public ranges are refused unless
    # their network is listed in ALLOWED_NETWORKS (comma-separated, e.g. "10.1.0.0/16").
    "WEBHOOK_TIMEOUT_SECONDS": 10,
    "WEBHOOK_MAX_ATTEMPTS": 10,
    "WEBHOOK_BACKOFF_SECONDS": 60,
    "WEBHOOK_BACKOFF_MAX_SECONDS": 6 * 3600,
    "WEBHOOK_ALLOWED_NETWORKS": "",
    # A grading interrupted by our side (no sandbox engine, a lost database or broker
    # connection) is retried after SANDBOX_RETRY_SECONDS, doubling up to the maximum, for as
    # long as it takes. The maximum bounds the wait after the fault ends.
    "SANDBOX_RETRY_SECONDS": 3,
    "SANDBOX_RETRY_MAX_SECONDS": 20,
    "TOKEN_DAYS": 90,
    # A long poll (``GET /api/v1/submissions/<id>?wait=N``) waits at most this many seconds,
    # and at most STATUS_WAIT_SLOTS requests of one web process wait at once (the server runs
    # 4 threads per process: the others stay free); past that a wait is answered at once.
    "STATUS_WAIT_MAX_SECONDS": 30,
    "STATUS_WAIT_SLOTS": 2,
    # LTI 1.3. The tool's public base URL as the LMS reaches it (None: the request's host).
    "LTI_TOOL_URL": None,
    # The launch's state cookie crosses sites (the LMS posts the launch): SameSite=None, which
    # browsers accept only with Secure; 0 only for plain-HTTP development and tests.
    "LTI_COOKIE_SECURE": 1,
    # 0 accepts a launch whose browser did not send the state cookie back (third-party cookies
    # blocked in the LMS's iframe); the one-time server-side state and nonce are still checked.
    "LTI_STATE_COOKIE_REQUIRED": 1,
    "LTI_STATE_SECONDS": 600,
    "LTI_CLOCK_SKEW_SECONDS": 60,
    "LTI_JWKS_CACHE_SECONDS": 300,
    # A launch signed with an unknown key fetches the platform's JWKS again at once, at most
    # this often per platform.
    "LTI_JWKS_REFETCH_SECONDS": 10,
    "LTI_HTTP_TIMEOUT_SECONDS": 10,
    # Who may frame the LTI pages (the deep-linking picker opens in the LMS's iframe).
    "LTI_FRAME_ANCESTORS": "https:",
    # Grade passback: retries with exponential backoff, base * 2^(attempt-1) capped.
    "LTI_RETRY_BASE_SECONDS": 30,
    "LTI_RETRY_CAP_SECONDS": 3600,
    "LTI_MAX_ATTEMPTS": 8,
    # A score whose checks are not all released to the student yet waits (the LMS gradebook is
    # the student's to read); it is looked at again this often, or at the due date.
    "LTI_HOLD_RECHECK_SECONDS": 300,
    # Retired tool keys stay in the JWKS this long after a rotation.
    "LTI_RETIRED_KEY_DAYS": 7,
    # Names and Roles: every LMS course's roster is synced this often (Celery beat), and on a
    # launch when the last sync is older than LTI_ROSTER_LAUNCH_SECONDS.
    "LTI_ROSTER_SYNC_SECONDS": 3600,
    "LTI_ROSTER_LAUNCH_SECONDS": 300,
    # A web session ends this long after its login at the latest, and after this long without
    # a request (the cookie itself ends with the browser's session).
    "SESSION_HOURS": 12,
    "SESSION_IDLE_MINUTES": 120,
    # Pages of a roster or of line items read in one sync, at most (a runaway "next" link).
    "LTI_MAX_PAGES": 200,
    # A roster sync only makes safe changes: it never drops a member who launched (or whom an
    # instructor kept) within LTI_ROSTER_KEEP_SECONDS, and it holds for an instructor's
    # decision any sync that would drop everyone, or more than LTI_ROSTER_HOLD_SHARE of the
    # course's members and more than LTI_ROSTER_HOLD_FREE of them.
    "LTI_ROSTER_KEEP_SECONDS": 14 * 24 * 3600,
    "LTI_ROSTER_HOLD_SHARE": 0.1,
    "LTI_ROSTER_HOLD_FREE": 2,
}

_INTS = {name for name, value in DEFAULTS.items() if isinstance(value, int)}


def data_dir_settings(data_dir: Path) -> dict[str, str]:
    """The database and queue of an embedded installation kept in ``data_dir``."""
    return {"DATABASE_URL": f"sqlite:///{data_dir / 'autograde.db'}",
            "BROKER_URL": f"sqla+sqlite:///{data_dir / 'broker.db'}"}


def load_config(overrides: Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Defaults, then ``AUTOGRADE_<NAME>`` variables, then explicit overrides (tests)."""
    environ = os.environ if environ is None else environ
    config = dict(DEFAULTS)
    for name in DEFAULTS:
        raw = environ.get(f"{ENV_PREFIX}_{name}")
        if raw is not None:
            config[name] = int(raw) if name in _INTS else raw
    config.update(overrides or {})
    return config


def celery_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """Celery settings derived from the service config (one visibility timeout everywhere)."""
    if int(config["SANDBOX_RETRY_MAX_SECONDS"]) * 2 >= int(config["VISIBILITY_TIMEOUT"]) or \
            int(config["TASK_TIME_LIMIT"]) >= int(config["VISIBILITY_TIMEOUT"]):
        # A retry waiting for its countdown, or a running task, past the visibility timeout is
        # delivered a second time (harmless, the claim holds, but wasted work).
        log.warning("VISIBILITY_TIMEOUT (%s s) should exceed TASK_TIME_LIMIT and twice "
                    "SANDBOX_RETRY_MAX_SECONDS: tasks will be delivered twice",
                    config["VISIBILITY_TIMEOUT"])
    transport: dict[str, Any] = {
        "visibility_timeout": config["VISIBILITY_TIMEOUT"],
        # A Redis restart: connections are found dead quickly and commands retried, instead of
        # a worker waiting on a socket that will never answer.
        "socket_connect_timeout": 5,
        "socket_timeout": 30,
        "socket_keepalive": True,
        "retry_on_timeout": True,
        "health_check_interval": 10,
    }
    amqp = str(config["BROKER_URL"]).startswith(("amqp", "pyamqp"))
    if amqp:
        # RabbitMQ redelivers a message when the connection of the worker holding it closes:
        # no visibility timeout. Publisher confirms: a task is sent only once the broker holds
        # it (on a quorum queue, once a majority of its nodes do).
        transport = {"confirm_publish": True}
    if str(config["BROKER_URL"]).startswith("sqla+"):
        # kombu hands these to create_engine. The SQL transport has no visibility timeout: a
        # message taken by a worker that dies is not redelivered, the reaper re-queues it.
        # (The worker's polling interval of the queue table is set by
        # ``service.tasks.PollQueueOften``: kombu would hand it to create_engine too. Celery
        # gets the queue through ``service.queue_wake``'s transport, which wakes the worker.)
        transport = {"connect_args": {"timeout": 30}}
    # RabbitMQ: the queues are quorum queues (replicated, durable; Celery then sends countdown
    # retries through its native delayed delivery), and a worker cut off from the broker is
    # found by missed heartbeats within about two intervals, its messages then redelivered.
    rabbitmq: dict[str, Any] = {"task_default_queue_type": "quorum",
                                "broker_heartbeat": int(config["BROKER_HEARTBEAT_SECONDS"])
                                } if amqp else {}
    return {
        **rabbitmq,
        "broker_url": wakeable_broker_url(str(config["BROKER_URL"])),
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,
        # Publishing (enqueue, a retry) while the broker restarts: retried, not lost.
        "task_publish_retry": True,
        "task_publish_retry_policy": {"max_retries": 10, "interval_start": 0.5,
                                      "interval_step": 1.0, "interval_max": 5.0},
        "task_default_queue": config["QUEUE"],
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_soft_time_limit": config["TASK_SOFT_TIME_LIMIT"],
        "task_time_limit": config["TASK_TIME_LIMIT"],
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "worker_hijack_root_logger": False,
        "beat_schedule": {
            "reap-stuck-submissions": {
                "task": REAP_TASK,
                "schedule": float(config["REAPER_INTERVAL_SECONDS"]),
                "options": {"queue": config["QUEUE"]},
            },
            "send-due-deliveries": {
                "task": SEND_DUE_TASK,
                "schedule": float(config["DELIVERY_SWEEP_SECONDS"]),
                "options": {"queue": config["QUEUE"]},
            },
            "sync-lms-rosters": {
                "task": SYNC_ALL_TASK,
                "schedule": float(config["LTI_ROSTER_SYNC_SECONDS"]),
                "options": {"queue": config["QUEUE"]},
            },
        },
    }
