"""The admin commands' work on a service's database: which service, whether its database is
there, a session on it, and the changes they make.

An admin command first finds the service it administers (``find_service``): a settings file,
an embedded installation's folder, the ``AUTOGRADE_*`` environment, or the ``.autograde`` folder
here; then checks that its database exists and is migrated (``check_database``). Neither ever
creates a database by accident: only ``autograde admin db upgrade`` makes one, and only where
it was told to.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask, current_app
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session

from service.config import DEFAULTS, ENV_PREFIX, data_dir_settings, load_config
from service.core import db
from service.core.errors import NotFound, ServiceError
from service.courses import accounts, enrolment
from service.lti.release import apply_settings
from service.models import (
    CourseAssignment,
    CourseRole,
    Role,
    User,
    WebhookDelivery,
    WebhookEndpoint,
)
from service.webhooks.egress import EgressPolicy
from service.webhooks.endpoints import course_endpoints, create_endpoint

EMBEDDED_DIR = Path(".autograde")
"""Where ``autograde run-embedded`` (``make run``) keeps its data by default."""


class ServiceNotFound(Exception):
    """No configuration of a service to administer, or its database is missing or unmigrated."""


@dataclass(frozen=True)
class ServiceLocation:
    settings: dict[str, str]
    """``AUTOGRADE_*`` variables to run the command with (empty: the environment's own)."""
    source: str
    """Where they came from, for messages."""


def find_service(*, settings_file: Path | None, data_dir: Path | None,
                 environ: Mapping[str, str], cwd: Path) -> ServiceLocation:
    """The service an admin command works on, in this order: ``settings_file`` (lines of
    ``AUTOGRADE_NAME=value``, as docker compose's ``env_file``), ``data_dir`` (an embedded
    installation), ``AUTOGRADE_DATABASE_URL``, ``./.autograde`` if it holds a database.
    ServiceNotFound when none applies."""
    if settings_file is not None and data_dir is not None:
        raise ServiceNotFound("give --config or --data-dir, not both")
    if settings_file is not None:
        settings = read_settings_file(settings_file)
        if f"{ENV_PREFIX}_DATABASE_URL" not in settings:
            raise ServiceNotFound(f"{settings_file} does not set {ENV_PREFIX}_DATABASE_URL")
        return ServiceLocation(settings, str(settings_file))
    if data_dir is not None:
        return _embedded(data_dir.resolve(), f"the embedded installation in {data_dir}")
    if environ.get(f"{ENV_PREFIX}_DATABASE_URL"):
        return ServiceLocation({}, f"{ENV_PREFIX}_DATABASE_URL")
    if (cwd / EMBEDDED_DIR / "autograde.db").is_file():
        return _embedded(cwd / EMBEDDED_DIR, f"the embedded installation in ./{EMBEDDED_DIR}")
    raise ServiceNotFound(
        f"no service configuration found (no {ENV_PREFIX}_DATABASE_URL, no ./{EMBEDDED_DIR} "
        "here): say which service, e.g. `autograde admin --data-dir DIR ACTION` (the folder "
        "of an embedded installation) or `autograde admin --config FILE ACTION` (a file of "
        f"{ENV_PREFIX}_* settings), or set {ENV_PREFIX}_DATABASE_URL")


def _embedded(folder: Path, source: str) -> ServiceLocation:
    settings = {f"{ENV_PREFIX}_{name}": value for name, value in data_dir_settings(folder).items()}
    return ServiceLocation(settings, source)


def read_settings_file(path: Path) -> dict[str, str]:
    """``AUTOGRADE_*`` settings from an environment file: ``NAME=value`` lines, ``#`` comments,
    an optional ``export`` and quotes. Other names are left alone (the file may be shared with
    docker compose); a line that is not a setting is an error, never skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceNotFound(f"cannot read the settings file {path}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from exc
    settings: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, equals, value = line.removeprefix("export ").partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name.isidentifier():
            raise ServiceNotFound(f"{path}, line {number}: expected NAME=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if name.startswith(f"{ENV_PREFIX}_"):
            if name.removeprefix(f"{ENV_PREFIX}_") not in DEFAULTS:
                raise ServiceNotFound(f"{path}, line {number}: unknown setting {name}")
            settings[name] = value
    return settings


def check_database(url: str, *, migrated: bool = True) -> None:
    """ServiceNotFound unless the database at ``url`` exists (and, if ``migrated``, is at the
    code's migration heads). Opens nothing that is not already there."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ServiceNotFound(f"{ENV_PREFIX}_DATABASE_URL is not a database URL ({exc})") from exc
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database or ""
        if path in ("", ":memory:") or not Path(path).is_file():
            raise ServiceNotFound(f"there is no database at {path or shown} "
                                  "(`db upgrade`, with the same options, creates it)")
    if not migrated:
        return
    heads = set(ScriptDirectory.from_config(db.alembic_config(url)).get_heads())
    engine = db.make_engine(url, pooled=False)
    try:
        with engine.connect() as connection:
            current = set(MigrationContext.configure(connection).get_current_heads())
    except SQLAlchemyError as exc:
        raise ServiceNotFound(f"cannot open the database {shown}: {error_summary(exc)}") from exc
    finally:
        engine.dispose()
    if not current:
        raise ServiceNotFound(f"the database {shown} has no autograde tables yet "
                              "(`db upgrade`, with the same options, makes them)")
    if current != heads:
        raise ServiceNotFound(f"the database {shown} is at migration {', '.join(sorted(current))}"
                              f", this code needs {', '.join(sorted(heads))} "
                              "(`db upgrade`, with the same options, brings it there)")


def error_summary(exc: SQLAlchemyError) -> str:
    """What a database error says, without the statement and parameters SQLAlchemy appends."""
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]


def database_url(overrides: dict[str, Any] | None = None) -> str:
    return str(load_config(overrides)["DATABASE_URL"])


@contextmanager
def app_session(app: Flask) -> Iterator[Session]:
    """A session in the app's context, committed on success."""
    with app.app_context():
        session = db.session()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def with_session(function: Callable[[Session], None]) -> int:
    """Run ``function(session)`` in the service's app, committed; a refusal as one line."""
    from service.app import create_app
    from service.cli.common import fail

    try:
        with app_session(create_app()) as session:
            function(session)
    except ServiceError as exc:
        return fail(exc.detail)
    except SQLAlchemyError as exc:
        return fail(f"the database refused this ({type(exc).__name__}): {error_summary(exc)}")
    return 0


@dataclass(frozen=True)
class NewUser:
    username: str
    password: str
    generated: bool


def create_user(session: Session, *, username: str, role: str, password: str | None,
                display_name: str = "") -> NewUser:
    generated = password is None
    password = password or secrets.token_urlsafe(12)
    accounts.create_user(session, username=username, password=password, role=Role(role),
                         display_name=display_name)
    return NewUser(username, password, generated)


def user_named(session: Session, username: str) -> User:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise NotFound(f"There is no user {username!r}.")
    return user


def enrol(session: Session, *, course: str, username: str, role: str) -> None:
    user = user_named(session, username)
    enrolment.enrol(session, course=enrolment.course_by_code(session, course), user=user,
                  role=CourseRole(role))


def assignment(session: Session, course: str, slug: str) -> CourseAssignment:
    found = session.scalar(select(CourseAssignment).where(
        CourseAssignment.course_id == enrolment.course_by_code(session, course).id,
        CourseAssignment.slug == slug))
    if found is None:
        raise NotFound(f"Course {course} has no assignment {slug!r} (run "
                               "`autograde admin sync-assignments`).")
    return found


def set_assignment(session: Session, course: str, slug: str, changes: dict[str, Any]) -> None:
    # Through the one settings function, so scores that waited for a release leave now.
    apply_settings(session, assignment(session, course, slug), changes, by=None)


def add_webhook(session: Session, *, course: str, url: str,
                events: list[str] | None) -> WebhookEndpoint:
    """Register an endpoint as an administrator (the egress policy applies all the same)."""
    return create_endpoint(session, course=enrolment.course_by_code(session, course), url=url,
                           events=events, created_by=None,
                           policy=EgressPolicy.from_config(current_app.config))


def list_webhooks(session: Session, course: str) -> list[str]:
    """One line per endpoint: id, state, events, URL, deliveries by status."""
    lines = []
    for endpoint in course_endpoints(session, enrolment.course_by_code(session, course)):
        counts = dict(session.execute(select(WebhookDelivery.status, func.count()).where(
            WebhookDelivery.endpoint_id == endpoint.id).group_by(WebhookDelivery.status)).all())
        tally = ", ".join(f"{n} {status.value}" for status, n in counts.items()) or "none"
        lines.append(f"{endpoint.id:>4}  {'active' if endpoint.active else 'disabled':<8}  "
                     f"{','.join(endpoint.events)}  {endpoint.url}  (deliveries: {tally})")
    return lines


def remove_webhook(session: Session, endpoint_id: int) -> None:
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None:
        raise NotFound(f"There is no webhook {endpoint_id}.")
    session.delete(endpoint)
