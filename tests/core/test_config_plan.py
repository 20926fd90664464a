"""`make_plan`: what applying a config changes, and the runs it affects (core/config_plan.py, pure)."""

from __future__ import annotations

from typing import Any

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.config_plan import QueueUse, make_plan, plan_text
from jupyter_gpuplat.core.resources import Resources

CURRENT: dict[str, Any] = {
    "queues": [{"name": "a", "concurrency": 3, "quota": {"gpu": 4}}, {"name": "b"}],
    "presets": [{"name": "one", "resources": {"gpu": 1}}, {"name": "two", "resources": {"gpu": 2}}],
    "projects": [{"name": "x", "members": {"ann": "member", "bo": "viewer"}, "allowed_queues": ["a", "b"]}],
}


def test_changes_field_by_field_members_apart_and_the_runs_each_affects() -> None:
    new = {
        "queues": [{"name": "a", "concurrency": 1, "quota": {"gpu": 1}, "max_per_user": 1, "paused": True}],
        "presets": [{"name": "one", "resources": {"gpu": 1}, "description": "d"}, {"name": "three"}],
        "projects": [{"name": "x", "members": {"ann": "admin", "cy": "member"}, "allowed_queues": ["a"]}],
        "restrict_by_default": True,
    }
    use = {
        "a": QueueUse(running=["r1", "r2"], queued=["r3"], used=Resources(gpu=2), per_user={"ann": 2}),
        "b": QueueUse(queued=["r4"]),
    }
    plan = make_plan(parse_config(CURRENT), parse_config(new), use)
    assert plan["changes"] == [
        {"section": "platform", "name": "", "change": "changed",
         "fields": {"restrict_by_default": {"old": None, "new": True}}},
        {"section": "queues", "name": "a", "change": "changed", "fields": {
            "concurrency": {"old": 3, "new": 1}, "max_per_user": {"old": None, "new": 1},
            "paused": {"old": None, "new": True}, "quota.gpu": {"old": 4, "new": 1}}},
        {"section": "queues", "name": "b", "change": "removed", "fields": {}},
        {"section": "presets", "name": "one", "change": "changed",
         "fields": {"description": {"old": None, "new": "d"}}},
        {"section": "presets", "name": "two", "change": "removed", "fields": {}},
        {"section": "presets", "name": "three", "change": "added", "fields": {"name": {"old": None, "new": "three"}}},
        {"section": "projects", "name": "x", "change": "changed",
         "fields": {"allowed_queues": {"old": ["a", "b"], "new": ["a"]}}},
    ]  # fmt: skip
    assert plan["members"] == [
        {"project": "x", "user": "ann", "change": "changed", "old": "member", "new": "admin"},
        {"project": "x", "user": "bo", "change": "removed", "old": "viewer", "new": None},
        {"project": "x", "user": "cy", "change": "added", "old": None, "new": "member"},
    ]
    assert [(a["queue"], a["runs"], a["refused"]) for a in plan["affects"]] == [
        ("a", ["r1", "r2"], False),  # concurrency
        ("a", ["r1", "r2"], False),  # quota
        ("a", ["r1", "r2"], False),  # max_per_user
        ("a", ["r3"], False),  # paused
        ("b", ["r4"], True),  # removed while it holds a run
    ]
    assert plan["affects"][1]["message"] == (
        "queue a: quota.gpu lowered to 1 with 2 in use: the running runs go on, "
        "nothing more dispatches until use falls under it"
    )
    text = plan_text(plan)
    assert "~ queue a: changed" in text and "    concurrency: 3 -> 1" in text and "- preset two: removed" in text
    assert "~ project x: user ann changed (member -> admin)" in text
    assert text[-1] == (
        "! queue b is removed but holds 0 running and 1 queued run(s): the apply is refused (409) until they end [r4]"
    )


def test_the_same_config_plans_no_change() -> None:
    cfg = parse_config(CURRENT)
    plan = make_plan(cfg, parse_config(CURRENT), {"a": QueueUse(running=["r1"], used=Resources(gpu=1))})
    assert plan == {"changes": [], "members": [], "affects": [], "unchanged": True}
    assert plan_text(plan) == ["no changes"]
