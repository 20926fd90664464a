"""One settings class read by both server apps, each with its own config section and defaults."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from jupyter_gpuplat.service.extension import GpuPlat
from jupyter_gpuplat.service.settings import PlatformSettings
from jupyter_gpuplat.service.team.server import GpuPlatServer

SHARED = {
    "config_file",
    "db_url",
    "artifacts_root",
    "default_user",
    "executor_class",
    "safety_tick_seconds",
    "min_free_artifacts_bytes",
    "db_busy_timeout_seconds",
}


def test_the_eight_settings_are_declared_once() -> None:
    """The same trait objects in both apps (GpuPlat's config_file is ours, not JupyterApp's of that name)."""
    assert set(PlatformSettings.class_traits(config=True)) == SHARED
    for app in (GpuPlat, GpuPlatServer):
        traits = app.class_traits(config=True)
        assert all(traits[name] is PlatformSettings.class_traits()[name] for name in SHARED)
        assert "PlatformSettings" not in app.section_names()  # no new config section


@pytest.mark.parametrize("app", [GpuPlat, GpuPlatServer])
def test_each_app_reads_its_own_section(app: type[GpuPlat] | type[GpuPlatServer]) -> None:
    config = Config()
    config[app.__name__] = Config(db_url="postgresql+psycopg://u@db/g", safety_tick_seconds=3.0, config_file="p.yaml")
    config["GpuPlatServer" if app is GpuPlat else "GpuPlat"] = Config(safety_tick_seconds=9.0)
    settings = app(config=config)
    assert (settings.db_url, settings.safety_tick_seconds, settings.config_file) == (
        "postgresql+psycopg://u@db/g",
        3.0,
        "p.yaml",
    )


def test_defaults_that_differ_stay_each_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAT_DB_URL", "postgresql+psycopg://env@db/g")
    assert GpuPlatServer().db_url == "postgresql+psycopg://env@db/g" and GpuPlatServer().default_user == "gpuplat"
    assert GpuPlat().db_url.startswith("sqlite:///") and GpuPlat().default_user != "gpuplat"
