"""The database handle: one engine and one scoped session factory per app, and Alembic."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, Engine, Executable, create_engine, event
from sqlalchemy.orm import Session, scoped_session, sessionmaker
from sqlalchemy.pool import NullPool

from service.core.extensions import Shared

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


class Database:
    """An engine and its sessions; SQLite is tuned for a web and a worker process sharing it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = scoped_session(sessionmaker(self.engine, expire_on_commit=False))

    def dispose_after_fork(self) -> None:
        """Drop connections inherited from the parent process (never share a socket)."""
        self.sessions.remove()
        self.engine.dispose(close=False)


def make_engine(url: str, *, pooled: bool = True) -> Engine:
    """An engine for ``url``; ``pooled=False`` for one-off commands such as migrations."""
    if url.startswith("sqlite"):
        _ensure_parent(url)
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if not pooled:
        return create_engine(url, poolclass=NullPool)
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _ensure_parent(url: str) -> None:
    path = url.split("///", 1)[-1]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)


database: Shared[Database] = Shared("autograde.db")
"""The current app's database: the engine and the scoped sessions (installed by ``create_app``)."""


def session() -> Session:
    """The session of the current app context (removed when the context ends)."""
    return database().sessions()


# Alembic is imported by the functions that migrate: serving requests never needs it.
def alembic_config(url: str) -> AlembicConfig:
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def rows_changed(session: Session, statement: Executable) -> int:
    """Rows an UPDATE or DELETE changed: a compare-and-set succeeded when it is 1."""
    result = session.execute(statement.execution_options(synchronize_session=False))
    return int(cast(CursorResult[Any], result).rowcount)
