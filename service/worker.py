"""Celery entry point: ``celery -A service.worker worker`` (config from AUTOGRADE_* variables)."""

from service.app import create_app

celery = create_app().extensions["celery"]
