"""The app's shared objects, in one home: each is installed on the Flask app once and read
back through a typed accessor, never through ``current_app.extensions["..."]`` at the call site.

``create_app`` installs the database, Celery, the LTI runtime, the login throttle and the
status watch; the worker
(``service.tasks``) builds the announcer and the submission grading on first use. This module
imports nothing of ours at run time, so anything may import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from flask import Flask, current_app

if TYPE_CHECKING:
    from celery import Celery

    from service.db import Database
    from service.grading.events import Announcer
    from service.grading.exactly_once import SubmissionGrading
    from service.grading.status_watch import StatusWatch
    from service.lti.runtime import LtiRuntime
    from service.web.security import LoginThrottle

T = TypeVar("T")


class Shared(Generic[T]):
    """One shared object of an app, under its key in ``app.extensions``."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self) -> T:
        """The current app's (it must have been installed)."""
        return self.of(current_app)

    def of(self, app: Flask) -> T:
        return cast(T, app.extensions[self.key])

    def install(self, app: Flask, value: T) -> T:
        app.extensions[self.key] = value
        return value

    def built(self, build: Callable[[], T]) -> T:
        """The current app's, built by ``build`` on first use."""
        found = current_app.extensions.get(self.key)
        if found is None:
            found = self.install(current_app, build())
        return cast(T, found)

    def remove(self, app: Flask) -> T | None:
        return cast("T | None", app.extensions.pop(self.key, None))


database: Shared[Database] = Shared("autograde.db")
"""The engine and the scoped sessions (``service.db``)."""
celery: Shared[Celery] = Shared("celery")
"""The Celery app, to send tasks by name (``service.queue``)."""
announcer: Shared[Announcer] = Shared("autograde.announcer")
"""The channels finished submissions are delivered on (``service.grading.events``); the worker's."""
grading: Shared[SubmissionGrading] = Shared("autograde.grading")
"""Claims, grades and stores one submission (``service.grading.exactly_once``); the worker's."""
lti_runtime: Shared[LtiRuntime] = Shared("autograde.lti")
"""The platforms' keys and the access tokens they issued us (``service.lti.runtime``)."""
login_throttle: Shared[LoginThrottle] = Shared("autograde.login_throttle")
"""Failed logins counted per address and account (``service.web.security``)."""
status_watch: Shared[StatusWatch] = Shared("autograde.status_watch")
"""Wakes the requests that wait for a submission's status to change
(``service.grading.status_watch``)."""
