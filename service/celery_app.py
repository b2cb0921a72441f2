"""Celery bound to the Flask app: one ``celery_init_app``, tasks run inside the app context.

The web process needs Celery only to send tasks by name (``service.core.queue``); the worker adds
the tasks themselves by importing ``service.tasks`` (``service.worker`` does), so nothing here
loads the grading pipeline.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, Task
from celery.signals import after_task_publish, worker_process_init
from flask import Flask

from service.config import celery_settings
from service.core.db import database
from service.core.queue import celery as shared_celery
from service.queue_wake import wake_address, waker


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
    shared_celery.install(app, celery)

    def after_fork(**_: Any) -> None:
        database.of(app).dispose_after_fork()

    address = wake_address(str(app.config["BROKER_URL"]))
    if address is not None:  # an embedded queue: its worker learns of each task at once
        after_task_publish.connect(waker(address), weak=False, dispatch_uid=address)
    worker_process_init.connect(after_fork, weak=False)
    return celery
