"""Celery entry point: ``celery -A service.worker worker`` (config from AUTOGRADE_* variables).

The only module that imports the tasks, so only the worker loads the grading pipeline."""

import service.tasks  # noqa: F401 - the tasks this worker runs, and what they run on
from service.app import create_app

celery = create_app().extensions["celery"]
