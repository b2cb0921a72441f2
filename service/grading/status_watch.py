"""Waiting for a submission's status to change: the long poll of the API and the result page.

The worker says a status changed right after committing it (``status_publisher``); each web
process has one ``StatusWatch`` whose single background thread wakes the requests waiting on
that submission. How the word travels depends on the installation:

- the broker is Redis: a pub/sub message on the queue's channel (one subscription per web
  process, however many requests wait);
- the database is SQLite (the embedded default): the database's own change counter
  (``PRAGMA data_version``, a cheap read), read every 20 ms while someone waits, which moves on
  any commit from another process; the waiters then read their submission's status again;
- otherwise: the waiters read again every half second.

Waits are bounded in number per web process (``STATUS_WAIT_SLOTS``) so long polls never hold
every thread of a threaded server: a request that finds no free slot is answered at once with
the current state, and the client waits at its own pace before asking again. A waiting request
holds no database connection.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

import redis
from flask import current_app
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from service.core.errors import ServiceError
from service.core.extensions import Shared
from service.models import Submission, SubmissionStatus, User
from service.submissions.submitting import readable_submission

log = logging.getLogger(__name__)

STATUSES = tuple(status.value for status in SubmissionStatus)
FINAL = (SubmissionStatus.GRADED, SubmissionStatus.FAILED)
SQLITE_TICK_SECONDS = 0.02
FALLBACK_TICK_SECONDS = 0.5


def status_channel(config: Mapping[str, Any]) -> str:
    """The pub/sub channel of one installation (its queue name keeps installations sharing a
    Redis apart)."""
    return f"autograde:status:{config['QUEUE']}"


def _is_redis(url: str) -> bool:
    return url.startswith(("redis://", "rediss://", "unix://"))


def status_publisher(config: Mapping[str, Any]) -> Callable[[int], None]:
    """What the worker calls after committing a status change; a no-op unless the broker is
    Redis (SQLite waiters see the commit itself). A failure to publish only delays the waiters
    to the end of their wait: it is logged, never raised."""
    url = str(config["BROKER_URL"])
    if not _is_redis(url):
        return lambda _submission_id: None
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    channel = status_channel(config)

    def publish(submission_id: int) -> None:
        try:
            client.publish(channel, str(submission_id))
        except redis.RedisError as exc:
            log.warning("could not announce the status of submission %s (%s)", submission_id,
                        type(exc).__name__)

    return publish


class Source(Protocol):
    """How a watch learns of changes; ``run`` loops for ever in the watch's thread."""

    def run(self, watch: StatusWatch) -> None: ...


class StatusWatch:
    """The waiting requests of one web process, woken by one background thread (started on
    the first wait, so building the app connects to nothing)."""

    def __init__(self, source: Source, *, slots: int) -> None:
        self.source = source
        self._slots = threading.BoundedSemaphore(max(slots, 1))
        self._lock = threading.Condition()
        self._waiters: dict[int, set[threading.Event]] = {}
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StatusWatch:
        broker, database = str(config["BROKER_URL"]), str(config["DATABASE_URL"])
        source: Source
        if _is_redis(broker):
            source = RedisSource(broker, status_channel(config))
        elif make_url(database).get_backend_name() == "sqlite" and make_url(database).database:
            source = SqliteSource(str(make_url(database).database))
        else:
            source = TickSource(FALLBACK_TICK_SECONDS)
        return cls(source, slots=int(config["STATUS_WAIT_SLOTS"]))

    @contextmanager
    def watching(self, submission_id: int) -> Iterator[threading.Event | None]:
        """An event set whenever this submission may have changed; None when every slot is
        taken (the caller answers at once)."""
        if not self._slots.acquire(blocking=False):
            yield None
            return
        event = threading.Event()
        try:
            with self._lock:
                self._waiters.setdefault(submission_id, set()).add(event)
                self._start()
                self._lock.notify_all()
            yield event
        finally:
            with self._lock:
                waiting = self._waiters.get(submission_id, set())
                waiting.discard(event)
                if not waiting:
                    self._waiters.pop(submission_id, None)
            self._slots.release()

    def wake(self, submission_id: int | None = None) -> None:
        """Wake the waiters of one submission, or all (``None``: something changed, or a
        message may have been missed)."""
        with self._lock:
            if submission_id is None:
                events = [e for waiting in self._waiters.values() for e in waiting]
            else:
                events = list(self._waiters.get(submission_id, ()))
        for event in events:
            event.set()

    def until_someone_waits(self) -> None:
        """For polling sources: block while nobody waits (no ticking on an idle server)."""
        with self._lock:
            self._lock.wait_for(lambda: bool(self._waiters))

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="status-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.source.run(self)
            except Exception:
                log.exception("the status watch stopped; starting it again")
                self.wake()
                time.sleep(1.0)


class RedisSource:
    """One subscription to the installation's channel; a lost connection wakes every waiter
    (a message may have been missed) and is made again."""

    def __init__(self, url: str, channel: str) -> None:
        self.url, self.channel = url, channel

    def run(self, watch: StatusWatch) -> None:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=5,
                                      health_check_interval=10)
        # redis-py types pubsub() in its newer releases only (8.2 does, 5.x does not).
        pubsub = client.pubsub(  # type: ignore[no-untyped-call, unused-ignore]
            ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.channel)
            watch.wake()  # anything committed before the subscription was missed
            while True:
                message = pubsub.get_message(timeout=5.0)
                if message and message.get("type") == "message":
                    try:
                        watch.wake(int(message["data"]))
                    except ValueError:
                        continue
        except redis.RedisError as exc:
            log.warning("status watch: Redis subscription lost (%s); reconnecting",
                        type(exc).__name__)
            watch.wake()
            time.sleep(1.0)
        finally:
            pubsub.close()
            client.close()


class SqliteSource:
    """The database file's change counter: it moves when another connection commits."""

    def __init__(self, path: str) -> None:
        self.path = path

    def run(self, watch: StatusWatch) -> None:
        connection = sqlite3.connect(self.path, timeout=5, check_same_thread=False)
        try:
            last = _data_version(connection)
            while True:
                watch.until_someone_waits()
                time.sleep(SQLITE_TICK_SECONDS)
                version = _data_version(connection)
                if version != last:
                    last = version
                    watch.wake()
        finally:
            connection.close()


def _data_version(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA data_version").fetchone()[0])


class TickSource:
    """No way to be told: the waiters read their status again at a short interval."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def run(self, watch: StatusWatch) -> None:
        while True:
            watch.until_someone_waits()
            time.sleep(self.interval)
            watch.wake()


status_watch: Shared[StatusWatch] = Shared("autograde.status_watch")
"""The current web process's watch (installed by ``create_app``)."""


def wait_for_change(session: Session, watch: StatusWatch, submission_id: int, *, since: str,
                    seconds: float) -> bool:
    """Block until the submission's status is no longer ``since`` or ``seconds`` pass; False
    (at once) when no wait slot is free. The caller has checked the reader may see it, and
    reads it again afterwards (``session.expire_all()``)."""
    with watch.watching(submission_id) as event:
        if event is None:
            return False
        deadline = time.monotonic() + seconds
        while True:
            # Read after subscribing, so a change between the caller's read and now is seen.
            status = session.scalar(select(Submission.status)
                                    .where(Submission.id == submission_id))
            session.commit()  # the connection goes back to the pool while this request waits
            remaining = deadline - time.monotonic()
            if status is None or status.value != since or remaining <= 0:
                return True
            event.wait(remaining)
            event.clear()


def submission_after_wait(session: Session, viewer: User, submission_id: int, *, wait: int,
                          since: str | None) -> Submission:
    """The submission as ``viewer`` may read it (NotFound as without a wait), once its status
    is no longer ``since`` (default: its status now), or graded or failed, or after ``wait``
    seconds, capped at STATUS_WAIT_MAX_SECONDS."""
    found = readable_submission(session, viewer, submission_id)
    if since is not None and since not in STATUSES:
        raise ServiceError(f"Query parameter `since` must be one of {', '.join(STATUSES)}.")
    seconds = min(wait, int(current_app.config["STATUS_WAIT_MAX_SECONDS"]))
    since = since or found.status.value
    if seconds <= 0 or found.status in FINAL or found.status.value != since:
        return found
    watch = status_watch()
    if wait_for_change(session, watch, found.id, since=since, seconds=seconds):
        session.expire_all()
    return found
