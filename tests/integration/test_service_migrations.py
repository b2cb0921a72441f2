"""Alembic: one head, and upgrade -> downgrade -> upgrade on a real PostgreSQL database."""

from __future__ import annotations

from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from service.core import db
from service.models import Base


def test_single_head() -> None:
    heads = ScriptDirectory.from_config(db.alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1, f"several Alembic heads: {heads}; merge them"


def test_upgrade_downgrade_upgrade_on_postgresql(pg_url: str) -> None:
    engine = create_engine(pg_url)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    db.downgrade(pg_url, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(pg_url)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrations_match_the_models(sqlite_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = create_engine(sqlite_url)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == [], f"models changed without a migration: {diff}"
