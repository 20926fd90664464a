"""Config administration: the platform config, applied whole and declaratively.

Every write edits a copy of the config document and re-validates it whole; a queue
that still holds runs cannot be removed. The `*_as` methods are the API's writes: each
checks who may make it (core.policy) first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..core.config import (
    PlatformConfig,
    PresetConfig,
    ProjectConfig,
    QueueConfig,
    check_flavors,
    dump_config,
    parse_config,
)
from ..core.config_plan import QueueUse, make_plan
from ..core.errors import ConfigErrors, Conflict, InvalidInput, NotFound
from ..core.policy import require_platform_admin, require_project_write
from .dispatcher import Dispatcher
from .state import EngineState

SECTIONS = ("queues", "presets", "projects")
_Item = TypeVar("_Item", QueueConfig, PresetConfig, ProjectConfig)


class ConfigAdmin:
    def __init__(self, state: EngineState, dispatcher: Dispatcher) -> None:
        self.s = state
        self.d = dispatcher

    def load(self, cfg: PlatformConfig, version: int) -> None:
        """Take a stored config as current (start-up): no write, no check."""
        self.d.dirty |= self.s.set_config(cfg, version)

    def apply_config(self, cfg: PlatformConfig, *, source: str, by: str) -> int:
        """Make `cfg` the platform config (declarative: what is not in it is removed)."""
        machine = self.s.machine_flavors(cfg)
        if machine is not None:  # a flavor's quota is bounded by this machine's devices of it
            errors = check_flavors(cfg, machine)
            if errors:
                raise ConfigErrors(errors)
        keep = {q.name for q in cfg.queues}
        busy = sorted(n for n, q in self.s.queues.items() if n not in keep and (q.held or q.pending_count))
        if busy:
            raise Conflict(
                f"cannot remove queue(s) {', '.join(busy)}: runs are still waiting or running in them",
                "stop those runs or let them finish, then apply again",
            )
        version = self.s.store.put_config(dump_config(cfg), source=source, by=by, at=self.s.clock())
        self.load(cfg, version)
        self.d.schedule()
        return version

    def put_config_item(self, user: str, section: str, item: dict[str, Any]) -> int:
        """Create or replace one named queue, preset or project; the whole config is re-validated."""

        def change(body: dict[str, Any]) -> None:
            kept = [x for x in body.get(section, []) if x["name"] != item["name"]]
            body[section] = [*kept, item]

        return self.update_config(user, change, source=f"api:PUT {section}/{item['name']}")

    def delete_config_item(self, user: str, section: str, name: str) -> int:
        known = [x.name for x in getattr(self.s.cfg, section)]
        if name not in known:
            raise NotFound(f"{section[:-1]} {name!r} not found", f"{section}: {', '.join(known) or 'none'}")

        def change(body: dict[str, Any]) -> None:
            body[section] = [x for x in body.get(section, []) if x["name"] != name]

        return self.update_config(user, change, source=f"api:DELETE {section}/{name}")

    def update_config(self, user: str, change: Callable[[dict[str, Any]], None], *, source: str) -> int:
        """Apply an admin write: edit a copy of the config document, re-validate it whole."""
        body = dump_config(self.s.cfg)
        change(body)
        return self.apply_config(parse_config(body), source=source, by=user)

    # ---- the API's writes, each checked by policy --------------------------------------
    # `body` is read only after the check: who may write is answered before what was written.
    def put_config_as(self, user: str, body: Callable[[], PlatformConfig], *, dry_run: bool = False) -> dict[str, Any]:
        """Apply a whole config (platform admins), with its plan; a dry run only validates and plans it."""
        require_platform_admin(self.s.cfg, user)
        cfg = body()
        plan = self.plan(cfg)
        version = self.s.config_version if dry_run else self.apply_config(cfg, source="api", by=user)
        return {"config": dump_config(cfg), "version": version, "applied": not dry_run, "plan": plan}

    def plan(self, cfg: PlatformConfig) -> dict[str, Any]:
        """What applying `cfg` would change, and the runs it affects now (core/config_plan.py)."""
        use = {
            name: QueueUse(list(q.held), [r.id for r in q.ordered_pending()], q.used, dict(q.per_user))
            for name, q in self.s.queues.items()
        }
        return make_plan(self.s.cfg, cfg, use)

    def put_queue_as(self, user: str, name: str, body: Callable[[], QueueConfig]) -> int:
        require_platform_admin(self.s.cfg, user)
        q = _named(body(), name)
        return self.put_config_item(user, "queues", q.model_dump(mode="json", exclude_defaults=True))

    def put_preset_as(self, user: str, name: str, body: Callable[[], PresetConfig]) -> tuple[PresetConfig, int]:
        require_platform_admin(self.s.cfg, user)
        p = _named(body(), name)
        return p, self.put_config_item(user, "presets", p.model_dump(mode="json", exclude_unset=True))

    def put_project_as(self, user: str, name: str, body: Callable[[], ProjectConfig]) -> tuple[ProjectConfig, int]:
        """Platform admins write any project; its project admins its members, description and defaults."""
        pr = _named(body(), name)
        require_project_write(self.s.cfg, user, pr)
        return pr, self.put_config_item(user, "projects", pr.model_dump(mode="json", exclude_defaults=True))

    def delete_as(self, user: str, section: str, name: str) -> int:
        """Delete a queue, preset or project (platform admins)."""
        assert section in SECTIONS
        require_platform_admin(self.s.cfg, user)
        return self.delete_config_item(user, section, name)

    def set_paused_as(self, user: str, name: str, paused: bool) -> int:
        """Pause or resume a queue (platform admins)."""
        require_platform_admin(self.s.cfg, user)
        known = [q.name for q in self.s.cfg.queues]
        if name not in known:
            raise NotFound(f"queue {name!r} not found", f"queues: {', '.join(known) or 'none'}")

        def change(body: dict[str, Any]) -> None:
            for x in body["queues"]:
                if x["name"] == name:
                    x["paused"] = paused

        return self.update_config(user, change, source=f"api:{'pause' if paused else 'resume'} {name}")


def _named(item: _Item, name: str) -> _Item:
    if item.name != name:
        raise InvalidInput(f"body name {item.name!r} does not match the URL's {name!r}")
    return item
