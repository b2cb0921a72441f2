"""``autograde admin`` finds the service it administers, or says plainly that it found none:
never a traceback, never a database made by accident."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.paths import REPO
from service.cli.database import ServiceNotFound, find_service, read_settings_file

NOT_FOUND = "no service configuration found"


def _admin(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith("AUTOGRADE_")}
    environ.update(env, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "service.cli", "admin", *args], cwd=cwd,
                          env=environ, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("args", [("create-course", "ml101"), ("db", "upgrade"),
                                  ("db", "current"), ("lti", "list")])
def test_outside_any_installation_nothing_is_done_and_nothing_made(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    done = _admin(tmp_path, *args)
    assert done.returncode == 2
    assert NOT_FOUND in done.stderr and "--data-dir" in done.stderr
    assert _files(tmp_path) == []


def test_a_data_dir_without_a_database_is_named_not_created(tmp_path: Path) -> None:
    done = _admin(tmp_path, "--data-dir", "data", "create-course", "ml101")
    assert done.returncode == 2
    assert f"no database at {tmp_path / 'data' / 'autograde.db'}" in done.stderr
    assert "db upgrade" in done.stderr
    assert _files(tmp_path) == []


@pytest.mark.slow
def test_a_data_dir_is_made_by_upgrade_then_administered(tmp_path: Path) -> None:
    assert _admin(tmp_path, "--data-dir", "data", "db", "upgrade").returncode == 0
    done = _admin(tmp_path, "--data-dir", "data", "create-course", "ml101")
    assert done.returncode == 0 and "Created course ml101." in done.stdout
    again = _admin(tmp_path, "--data-dir", "data", "create-course", "ml101")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_the_embedded_folder_here_is_found_by_itself(tmp_path: Path) -> None:
    assert _admin(tmp_path, "--data-dir", ".autograde", "db", "upgrade").returncode == 0
    done = _admin(tmp_path, "create-course", "ml101")
    assert done.returncode == 0, done.stderr


def test_a_settings_file_names_the_database(tmp_path: Path, sqlite_url: str) -> None:
    settings = tmp_path / "autograde.env"
    settings.write_text(f"# production\nexport AUTOGRADE_DATABASE_URL='{sqlite_url}'\n"
                        "POSTGRES_PASSWORD=not-ours\n")
    done = _admin(tmp_path, "--config", str(settings), "create-course", "ml101")
    assert done.returncode == 0, done.stderr


def test_an_unmigrated_database_is_reported_not_used(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    done = _admin(tmp_path, "create-course", "ml101", AUTOGRADE_DATABASE_URL=f"sqlite:///{empty}")
    assert done.returncode == 2 and "has no autograde tables yet" in done.stderr


def test_an_unreachable_database_is_reported_without_its_password(tmp_path: Path) -> None:
    url = "postgresql+psycopg://admin:s3cret@127.0.0.1:9/autograde"
    done = _admin(tmp_path, "create-course", "ml101", AUTOGRADE_DATABASE_URL=url)
    assert done.returncode == 2 and "cannot open the database" in done.stderr
    assert "s3cret" not in done.stderr


def test_the_sources_are_taken_in_order(tmp_path: Path) -> None:
    settings = tmp_path / "s.env"
    settings.write_text("AUTOGRADE_DATABASE_URL=sqlite:///x.db\n")
    environ = {"AUTOGRADE_DATABASE_URL": "postgresql://elsewhere/db"}
    assert find_service(settings_file=settings, data_dir=None, environ=environ,
                        cwd=tmp_path).settings == {"AUTOGRADE_DATABASE_URL": "sqlite:///x.db"}
    embedded = find_service(settings_file=None, data_dir=tmp_path / "d", environ=environ,
                            cwd=tmp_path)
    assert embedded.settings["AUTOGRADE_DATABASE_URL"] == f"sqlite:///{tmp_path / 'd'}/autograde.db"
    assert find_service(settings_file=None, data_dir=None, environ=environ,
                        cwd=tmp_path).settings == {}
    with pytest.raises(ServiceNotFound, match=NOT_FOUND):
        find_service(settings_file=None, data_dir=None, environ={}, cwd=tmp_path)
    with pytest.raises(ServiceNotFound, match="not both"):
        find_service(settings_file=settings, data_dir=tmp_path, environ={}, cwd=tmp_path)


@pytest.mark.parametrize(("text", "error"), [
    ("AUTOGRADE_DATABSE_URL=sqlite:///x.db\n", "line 1: unknown setting AUTOGRADE_DATABSE_URL"),
    ("# a comment\njust words\n", "line 2: expected NAME=value"),
    ("AUTOGRADE_QUEUE=grading\n", "does not set AUTOGRADE_DATABASE_URL"),
])
def test_a_bad_settings_file_is_an_error_with_its_line(tmp_path: Path, text: str,
                                                        error: str) -> None:
    settings = tmp_path / "s.env"
    settings.write_text(text)
    with pytest.raises(ServiceNotFound, match=error):
        find_service(settings_file=settings, data_dir=None, environ={}, cwd=tmp_path)


def test_settings_file_values_may_be_quoted(tmp_path: Path) -> None:
    settings = tmp_path / "s.env"
    settings.write_text('AUTOGRADE_QUEUE="a b"\nAUTOGRADE_SECRET_KEY=\'k=1\'\n')
    assert read_settings_file(settings) == {"AUTOGRADE_QUEUE": "a b",
                                            "AUTOGRADE_SECRET_KEY": "k=1"}
