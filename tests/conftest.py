"""Shared fixtures: the shipped assignments, a grading pipeline on the local sandbox, and the
grading service's: a database per test (SQLite or PostgreSQL), apps, factories, running server
and worker processes, a real webhook receiver."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask
from flask.testing import FlaskClient

from assignments import Assignment
from devkit.courses import Factory
from devkit.stack import PG_ADMIN, REDIS_URL, Stack, free_port, unavailable
from devkit.webhooks import Receiver, serve
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox.local import LocalBackend
from service.app import create_app
from service.core import db

STACKS_GROUP = "stacks"
"""The xdist group of the tests that start a Docker engine's containers, service stacks, the
fault harness's private services or a browser, and of the hostile suite, whose submissions
all write to one folder of the host: one worker runs them one after another, as they load the
machine (and its one engine) far more than their own process shows."""

CORPUS_GROUP = "corpus"
"""The xdist group of the corpus modules: each grades all of its selected files ahead, one
sandbox per core, on the worker that sets it up (``devkit.corpora.graded_ahead``); one worker
runs both, so no file is graded twice and the multi-seed module reuses the one-seed module's
verdicts."""
CORPUS_MODULES = ("/tests/integration/test_corpus.py",
                  "/tests/integration/test_realworld_corpus.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the groups before xdist's own hook reads them into the test ids it schedules by."""
    for item in items:
        path = item.path.as_posix()
        if (item.get_closest_marker("docker") or item.get_closest_marker("browser")
                or "/tests/e2e/" in path or "/tests/faults/" in path
                or path.endswith("/tests/sandbox/test_hostile.py")):
            item.add_marker(pytest.mark.xdist_group(STACKS_GROUP))
        elif path.endswith(CORPUS_MODULES):
            item.add_marker(pytest.mark.xdist_group(CORPUS_GROUP))


@pytest.fixture(scope="session")
def attention() -> Assignment:
    return load_assignment("attention")


@pytest.fixture(scope="session")
def mha() -> Assignment:
    return load_assignment("multi-head-attention")


@pytest.fixture(scope="session")
def local_pipeline() -> Iterator[GradingPipeline]:
    """The local sandbox's warm runner (a process forked per grading), as a worker has it."""
    backend = LocalBackend(warm=True)
    yield GradingPipeline(backend=backend)
    backend.close()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once for the session, which each test's database copies."""
    path = tmp_path_factory.mktemp("template") / "autograde.db"
    db.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    """A fresh SQLite database of this test's own, migrated (a copy of the session's)."""
    path = tmp_path / "autograde.db"
    shutil.copyfile(migrated_sqlite, path)
    return f"sqlite:///{path}"


def _pg_admin() -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL is not reachable: {exc}")


@pytest.fixture(scope="session")
def migrated_pg() -> Iterator[str]:
    """A PostgreSQL database migrated once for the session: the template of each test's."""
    name = f"autograde_template_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        db.upgrade(f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
        yield name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(migrated_pg: str) -> Iterator[str]:
    """A fresh PostgreSQL database, migrated (made from the session's template), dropped
    afterwards."""
    name = f"autograde_test_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{migrated_pg}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def queue_name() -> str:
    """A queue of this test's own, so tests sharing one Redis never take each other's tasks."""
    return f"grading-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., Flask]:
    def build(database_url: str, **overrides: Any) -> Flask:
        config = {"DATABASE_URL": database_url, "BROKER_URL": "memory://",
                  "SANDBOX_BACKEND": "local", **overrides}
        return create_app(config)

    return build


@pytest.fixture
def app(make_app: Callable[..., Flask], sqlite_url: str) -> Iterator[Flask]:
    """The app on its own SQLite database (quick tests); the broker is in memory."""
    application = make_app(sqlite_url)
    with application.app_context():
        yield application


@pytest.fixture
def pg_app(make_app: Callable[..., Flask], pg_url: str) -> Iterator[Flask]:
    application = make_app(pg_url)
    with application.app_context():
        yield application
    application.extensions["autograde.db"].engine.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def factory(app: Flask) -> Factory:
    return Factory(app)


@pytest.fixture
def pg_factory(pg_app: Flask) -> Factory:
    return Factory(pg_app)


@pytest.fixture
def make_stack(tmp_path: Path, queue_name: str) -> Iterator[Callable[..., Stack]]:
    stacks: list[Stack] = []

    def build(database_url: str, broker_url: str = REDIS_URL, **config: Any) -> Stack:
        env = dict(os.environ)
        env.update({f"AUTOGRADE_{key}": str(value) for key, value in config.items()})
        env.update({
            "AUTOGRADE_DATABASE_URL": database_url,
            "AUTOGRADE_BROKER_URL": broker_url,
            "AUTOGRADE_QUEUE": queue_name,
            "AUTOGRADE_SANDBOX_BACKEND": "local",
            "AUTOGRADE_CONFIG_DIR": str(tmp_path / "client"),
            "PYTHONUNBUFFERED": "1",
        })
        port = free_port()
        env["AUTOGRADE_URL"] = f"http://127.0.0.1:{port}"
        stack = Stack(env=env, url=f"http://127.0.0.1:{port}", logs=tmp_path)
        stacks.append(stack)
        return stack

    yield build
    for stack in stacks:
        stack.stop_all()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    server = serve(found)
    yield found
    server.shutdown()
    server.server_close()
