"""Celery entry point: ``celery -A service.worker worker`` (config from AUTOGRADE_* variables).

The only module that imports the tasks, so only the worker loads the grading pipeline."""

from celery.signals import celeryd_init, worker_process_shutdown, worker_ready

from service.app import create_app
from service.core.queue import celery as shared_celery
from service.tasks import (
    PollQueueOften,
    close_grading,
    host_health,
    prepare_reference_trainings,
    resend_on_connect,
    share_warm_pool,
)

# Not named ``app``: Celery's ``-A module`` looks for ``app`` before ``celery``.
_flask = create_app()
celery = shared_celery.of(_flask)
celery.steps["consumer"].add(resend_on_connect(_flask))
celery.steps["consumer"].add(PollQueueOften)
celeryd_init.connect(share_warm_pool, weak=False)
celeryd_init.connect(prepare_reference_trainings, weak=False)
worker_process_shutdown.connect(close_grading(_flask), weak=False)
worker_ready.connect(host_health(_flask), weak=False)
