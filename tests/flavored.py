"""The flavored platform the flavor tests share: typed devices declared on a machine without GPUs
(h100 on 0-1, a100 on 2-5) and a queue `typed` offering them in order (h100: 2 then a100: 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

FLAVORS: list[dict[str, Any]] = [{"name": "h100", "devices": [0, 1]}, {"name": "a100", "devices": [2, 3, 4, 5]}]
H100, A100 = {0, 1}, {2, 3, 4, 5}


def add_flavors(
    cfg: dict[str, Any], quotas: dict[str, int] | None = None, projects: list[str] | None = None
) -> dict[str, Any]:
    """`cfg` (a platform config document) with FLAVORS and the queue `typed` offering `quotas` in
    order, usable by `projects` (every project when None)."""
    quotas = {"h100": 2, "a100": 4} if quotas is None else quotas
    cfg["flavors"] = [dict(f) for f in FLAVORS]
    cfg["queues"].append({"name": "typed", "flavors": [{"name": n, "quota": {"gpu": g}} for n, g in quotas.items()]})
    for p in cfg["projects"]:
        if projects is None or p["name"] in projects:
            p["allowed_queues"].append("typed")
    return cfg


def flavored_config(example: Path, path: Path, **changes: Any) -> Path:
    """The example platform with flavors (`add_flavors`), written to `path`."""
    path.write_text(yaml.safe_dump(add_flavors(yaml.safe_load(example.read_text()), **changes)))
    return path
