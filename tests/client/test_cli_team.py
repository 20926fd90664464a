"""`gpuplat server` and `gpuplat db` hand over to their own parsers (traitlets, argparse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from jupyter_gpuplat.cli.main import main


def test_gpuplat_db_upgrade_migrates_the_named_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert main(["db", "upgrade", "--db-url", url]) == 0
    with create_engine(url).connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM gpuplat_leader")).scalar_one() == 1
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()


def test_gpuplat_server_lists_its_traits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["server", "--help-all"])
    assert e.value.code in (0, None)
    out = capsys.readouterr().out
    for trait in ("--GpuPlatServer.db_url", "--GpuPlatServer.config_file", "--GpuPlatServer.port"):
        assert trait in out
