"""A typed accessor to one of the app's shared objects, under its key in ``app.extensions``.

Each owner declares the accessor of what it shares beside it (``service.core.db.database``,
``service.core.queue.celery``, ``service.grading.status_watch.status_watch``, ...): it is installed
on the Flask app once and read back through the accessor, never through
``current_app.extensions["..."]`` at the call site. This module imports nothing of ours, so any
owner may import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar, cast

from flask import Flask, current_app

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
