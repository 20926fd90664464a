"""What this release does not do is refused (422, naming it), never accepted and ignored."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.errors import ConfigErrors


@pytest.mark.parametrize(
    ("preset", "named"),
    [
        ({"name": "w", "kind": "sweep"}, "presets[0].kind: kind 'sweep' is made by a run request with a `matrix`"),
    ],
)
def test_config_refuses_unimplemented_with_422(preset: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigErrors) as err:
        parse_config({"presets": [preset]})
    assert err.value.status == 422 and err.value.code == "NotImplemented"
    assert named in err.value.message


def test_a_shape_error_beside_it_stays_a_400() -> None:
    with pytest.raises(ConfigErrors) as err:
        parse_config({"presets": [{"name": "s", "kind": "sweep", "resources": {"gpu": -1}}]})
    assert err.value.status == 400
    assert "kind 'sweep' is made by a run request" in err.value.message and "resources.gpu" in err.value.message


@pytest.mark.parametrize(
    ("field", "named"),
    [
        ({"kind": "sweep"}, "kind 'sweep' is made by a run request with a `matrix` (docs/sweeps.md)"),
    ],
)
async def test_runs_and_previews_refuse_unimplemented(api: Any, field: dict[str, Any], named: str) -> None:
    before = await api.ok("GET", "runs")
    for path in ("runs", "runs/preview"):
        code, err = await api("POST", path, body={"project": "team-a", "command": "true", **field})
        assert code == 422, err
        assert err["error"]["code"] == "NotImplemented" and named in err["error"]["message"]
    assert (await api.ok("GET", "runs"))["runs"] == before["runs"]  # nothing created


async def test_admin_preset_write_refuses_unimplemented_and_changes_nothing(api: Any) -> None:
    before = await api.ok("GET", "config", "ops")
    code, err = await api("PUT", "presets/sw", "ops", {"name": "sw", "kind": "sweep"})
    assert code == 422 and "kind 'sweep' is made by a run request" in err["error"]["message"]
    config = dict(before["config"])
    config["presets"] = [*config["presets"], {"name": "sw2", "kind": "sweep"}]
    code, err = await api("PUT", "config", "ops", {"config": config})
    assert code == 422 and "presets[" in err["error"]["message"] and "sweep" in err["error"]["message"]
    assert await api.ok("GET", "config", "ops") == before
