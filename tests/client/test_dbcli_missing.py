"""`gpuplat db` when what it is pointed at is not there: one line saying what and how to make it, exit 2,
nothing created or migrated (no retry helps, so no "retry in a few seconds")."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from jupyter_gpuplat.cli.db import main
from jupyter_gpuplat.store.store import make_engine


def tables(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "retry" not in err, err
    return err


def test_copy_from_a_missing_sqlite_file_leaves_the_target_untouched(
    tmp_path: Path, pg_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "nowhere.db"
    err = refusal(capsys, ["copy", "--from", f"sqlite:///{src}", "--to", pg_db_url])
    assert f"the source sqlite:///{src} does not exist: there is no file {src}" in err
    assert not src.exists()
    assert tables(pg_db_url) == []  # not migrated: no tables, no alembic_version


def test_copy_from_a_file_that_is_no_store_leaves_the_target_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "other.db"
    with sqlite3.connect(src) as conn:
        conn.execute("CREATE TABLE notes (x)")
    target = tmp_path / "target.db"
    err = refusal(capsys, ["copy", "--from", f"sqlite:///{src}", "--to", f"sqlite:///{target}"])
    assert "is not a gpuplat store: it has no alembic_version or gpuplat_meta table" in err
    assert not target.exists()


def test_upgrade_of_a_postgresql_database_that_does_not_exist_says_how_to_create_it(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"gpuplat_missing_{uuid.uuid4().hex[:8]}"
    u = make_url(pg_url).set(drivername="postgresql+psycopg", database=name)
    err = refusal(capsys, ["upgrade", "--db-url", u.render_as_string(hide_password=False)])
    assert f"the database '{name}' does not exist on {u.host}:{u.port}" in err
    assert f"createdb -h {u.host} -p {u.port}" in err and f" {name}, or CREATE DATABASE" in err


def test_upgrade_of_a_sqlite_file_whose_directory_cannot_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").write_text("a file where the directory should be")
    path = tmp_path / "data" / "gpuplat" / "gpuplat.db"
    err = refusal(capsys, ["upgrade", "--db-url", f"sqlite:///{path}"])
    assert (
        f"the directory {path.parent} of the SQLite file does not exist, and cannot: {tmp_path / 'data'} is a file"
        in err
    )
