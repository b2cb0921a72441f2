"""Celery entry point: ``celery -A service.worker worker`` (config from AUTOGRADE_* variables).

The only module that imports the tasks, so only the worker loads the grading pipeline."""

from service.app import create_app
from service.tasks import resend_on_connect

app = create_app()
celery = app.extensions["celery"]
celery.steps["consumer"].add(resend_on_connect(app))
