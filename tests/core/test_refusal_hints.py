"""One consistent refusal (core/refusal.py): a table of requests × platforms.

For every refused request: each refusing rule appears once with its own limit (the limits
restated here from the config, not taken from the policy), and every hint, read as text
and applied to the request, is accepted by the policy: no hint suggests what it refuses.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.core.config import PlatformConfig, parse_config
from jupyter_gpuplat.core.errors import GpuPlatError
from jupyter_gpuplat.core.limits import LimitExceeded, amount_text
from jupyter_gpuplat.core.refusal import Judgement, apply, check, judge
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.resources import Quota, parse_cpu, parse_memory

EXAMPLE = Path(__file__).resolve().parents[2] / "jupyter_gpuplat" / "platform.example.yaml"

# Crafted platforms: a queue too small and one too big for the machine; a preset that locks
# its GPUs above every quota; a project allowed nothing at all.
CRAFTED = {
    "queues": [
        {"name": "small", "quota": {"gpu": 2, "memory": "32Gi"}},
        {"name": "big", "quota": {"gpu": 8}},
        {"name": "cpu-only", "quota": {"gpu": 0, "cpu": "8"}},
        {"name": "closed"},
    ],
    "presets": [
        {"name": "huge", "resources": {"gpu": 6}, "locked": ["resources.gpu"]},
        {"name": "pinned", "queue": "small", "locked": ["queue"], "resources": {"gpu": 1}},
        {"name": "plain", "resources": {"cpu": "2"}},
    ],
    "projects": [
        {
            "name": "x",
            "members": {"u": "member"},
            "default_queue": "small",
            "allowed_queues": ["small", "big", "cpu-only"],
            "allowed_presets": ["huge", "pinned", "plain"],
            "max_run_resources": {"gpu": 6, "memory": "64Gi"},
        },
        {"name": "y", "members": {"u": "member"}, "allowed_queues": [], "allowed_presets": []},
        {
            "name": "z",
            "members": {"u": "member"},
            "default_queue": "big",
            "default_presets": ["plain"],
            "allowed_queues": ["big", "small"],
            "allowed_presets": ["plain", "pinned"],
        },
    ],
}


def example() -> PlatformConfig:
    return parse_config(yaml.safe_load(EXAMPLE.read_text()))


PLATFORMS = {"example": (example, "bob"), "crafted": (lambda: parse_config(CRAFTED), "u")}
PROJECTS = {"example": ("team-a", "team-b"), "crafted": ("x", "y", "z")}
USERS = {"team-a": "bob", "team-b": "erin"}

PRESETS = {
    "example": ([], ["single-gpu"], ["multi-gpu"], ["notebook"], ["nope"], ["single-gpu", "multi-gpu"]),
    "crafted": ([], ["huge"], ["pinned"], ["plain", "huge"], ["nope"]),
}
QUEUES = {
    "example": (None, "team-a-train", "team-b-train", "interactive", "nope"),
    "crafted": (None, "small", "big", "cpu-only", "closed", "nope"),
}
RESOURCES = (
    {},
    {"gpu": 0},
    {"gpu": 1},
    {"gpu": 2},
    {"gpu": 3},
    {"gpu": 5},
    {"gpu": 64},
    {"cpu": "32"},
    {"memory": "200Gi"},
)
GPUS = (4, 1, None)  # the platform's GPUs; None: the executor places work itself (no number)


def requests(platform: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for project, presets, queue, res in itertools.product(
        PROJECTS[platform], PRESETS[platform], QUEUES[platform], RESOURCES
    ):
        body: dict[str, Any] = {"project": project, "command": "true"}
        if presets:
            body["presets"] = presets
        if queue is not None:
            body["queue"] = queue
        if res:
            body["resources"] = res
        out.append((USERS.get(project, "u"), body))
    return out


# ---- reading a hint as a person would -----------------------------------------------------------
def _amounts(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.split(", "):
        value, name = part.rsplit(" ", 1)
        out[name] = int(value) if name == "gpu" else value
    return out


def _one(text: str, picked: list[str], kept: list[str]) -> dict[str, Any]:
    """`ask for at most 2 gpu and use queue q and use preset p instead of r` → request changes."""
    changes: dict[str, Any] = {}
    for part in text.split(" and "):
        if m := re.fullmatch(r"ask for at most (.+)", part):
            changes["resources"] = _amounts(m.group(1))
        elif m := re.fullmatch(r"use queue (\S+)", part):
            changes["queue"] = m.group(1)
        elif m := re.fullmatch(r"use preset (.+?)(?: instead of (.+))?", part):
            dropped = (m.group(2) or "").split(", ")
            changes["presets"] = [p for p in picked if p not in dropped] + m.group(1).split(", ")
        elif m := re.fullmatch(r"drop preset (.+)", part):
            changes["presets"] = [p for p in picked if p not in m.group(1).split(", ")]
        else:
            raise AssertionError(f"a hint part nobody can apply: {part!r} (of {text!r})")
    return changes


def suggestions(hint: str, picked: list[str], kept: list[str]) -> list[dict[str, Any]] | None:
    """Every alternative a hint suggests, as request changes; None for a hint that suggests no value."""
    if hint.startswith("no ") and "ask a platform admin" in hint:
        return []
    if m := re.fullmatch(r"(?:allowed queues|set queue to one of): (.+)", hint):
        return [{"queue": q} for q in m.group(1).split(", ")]
    if m := re.fullmatch(r"allowed presets: (.+?)(?: \(or (.+)\))?", hint):
        subs = [{"presets": [*kept, p]} for p in m.group(1).split(", ")]
        return subs + ([_one(m.group(2), picked, kept)] if m.group(2) else [])
    if hint.startswith(("ask for", "use ", "drop ")):
        return [_one(part, picked, kept) for part in hint.split("; or ")]
    return None


# ---- the limits, restated from the config -----------------------------------------------------
def own_limit(cfg: PlatformConfig, v: LimitExceeded, queue: str | None, project: str, gpus: int | None) -> int | None:
    attr = {"gpu": "gpu", "cpu": "cpu_milli", "memory": "memory_bytes"}[v.resource]
    if v.code == "ExceedsQueueQuota":
        q = cfg.queue(queue or "")
        return None if q is None else getattr(q.quota.quota(), attr)
    if v.code == "MaxRunResources":
        pr = cfg.project(project)
        assert pr is not None and pr.max_run_resources is not None
        return getattr(Quota.parse(pr.max_run_resources.model_dump()), attr)
    assert v.code == "NoCapacity"
    return gpus


def expected_limit_rules(cfg: PlatformConfig, j: Judgement, project: str, gpus: int | None) -> set[tuple[str, str]]:
    """(rule, limit) of every numeric limit the resolved request is above."""
    res, queue = j.resolution.resources, j.resolution.queue
    want = {"gpu": res.gpu, "cpu": res.cpu_milli, "memory": res.memory_bytes}
    out = set()
    q = cfg.queue(queue) if queue else None
    pr = cfg.project(project)
    assert pr is not None
    scopes = [("ExceedsQueueQuota", q.quota.model_dump() if q else {})]
    scopes.append(("MaxRunResources", pr.max_run_resources.model_dump() if pr.max_run_resources else {}))
    for rule, limits in scopes:
        for name, raw in limits.items():
            if raw is None:
                continue
            lim = raw if name == "gpu" else parse_cpu(raw) if name == "cpu" else parse_memory(raw)
            if want[name] > lim:
                out.add((rule, amount_text(name, lim)))
    if gpus is not None and res.gpu > gpus:
        out.add(("NoCapacity", amount_text("gpu", gpus)))
    return out


def accepted(cfg: PlatformConfig, user: str, req: RunRequest, changes: dict[str, Any], gpus: int | None) -> bool:
    try:
        return not check(cfg, user, apply(req, changes), gpus)[1]
    except GpuPlatError:
        return False


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@pytest.mark.parametrize("gpus", GPUS)
def test_every_hint_is_accepted_and_every_rule_named_once_with_its_limit(platform: str, gpus: int | None) -> None:
    make, _ = PLATFORMS[platform]
    cfg = make()
    refused = hints_checked = 0
    seen_codes: set[str] = set()
    for user, body in requests(platform):
        req = RunRequest.model_validate(body)
        try:
            j = judge(cfg, user, req, gpus)
        except GpuPlatError:
            continue  # access (an invisible project): not a policy refusal
        if not j.violations:
            continue
        refused += 1
        label = f"{body} on {gpus} GPUs"
        seen_codes |= {v.code for v in j.violations}
        # every refusing rule once, each with its own limit
        rules = [(r["rule"], r["limit"], r["message"]) for r in j.rules]
        assert len(rules) == len(set(rules)), (label, rules)
        named = {(v.code, v.limit_text if isinstance(v, LimitExceeded) else None, v.message) for v in j.violations}
        assert named == set(rules), (label, rules)
        numeric = {(r, lim) for r, lim, _ in rules if lim is not None}
        assert len(numeric) == len([r for r in rules if r[1] is not None]), (label, rules)  # each limit once
        assert numeric == expected_limit_rules(cfg, j, body["project"], gpus), (label, numeric)
        for v in j.violations:
            if isinstance(v, LimitExceeded):
                limit = own_limit(cfg, v, j.resolution.queue, body["project"], gpus)
                assert v.limit == limit and amount_text(v.resource, v.limit) in v.message, (label, v.message)
        # every alternative, and every hint read as text, is accepted by the policy
        for alt in j.alternatives:
            assert accepted(cfg, user, req, alt.changes, gpus), (label, alt)
        pr = cfg.project(body["project"])
        assert pr is not None
        ok = pr.allowed_presets if pr.allowed_presets is not None else [p.name for p in cfg.presets]
        picked = list(req.presets)
        kept = [p for p in picked if p in ok]
        for v in j.violations:
            got = suggestions(v.hint, picked, kept)
            if got is None:
                assert v.code not in ("ExceedsQueueQuota", "MaxRunResources", "NoCapacity"), (label, v.hint)
                continue
            for changes in got:
                hints_checked += 1
                assert accepted(cfg, user, req, changes, gpus), f"{label}: {v.code} hint {v.hint!r} -> {changes}"
            assert "another queue" not in v.hint
    assert refused > 100 and hints_checked > 100, (refused, hints_checked)
    wanted = {"ExceedsQueueQuota", "MaxRunResources", "QueueNotAllowed", "PresetNotAllowed", "UnknownPreset"}
    assert wanted <= seen_codes, seen_codes


# ---- the issue's own example, and crafted cases by name -----------------------------------------
def verdict(cfg: PlatformConfig, user: str, gpus: int | None, **body: Any) -> dict[str, Any]:
    return judge(cfg, user, RunRequest.model_validate({"command": "true", **body}), gpus).verdict()


def test_64_gpus_on_the_example_says_one_limit_and_no_other_queue() -> None:
    v = verdict(example(), "bob", 4, project="team-a", resources={"gpu": 64})
    assert [(r["rule"], r["limit"]) for r in v["rules"]] == [
        ("ExceedsQueueQuota", "2 gpu"),
        ("MaxRunResources", "2 gpu"),
        ("NoCapacity", "4 gpu"),
    ]
    # interactive's quota is also 2 and the project's maximum is 2: no queue to suggest, one amount
    assert {x["hint"] for x in v["violations"]} == {"ask for at most 2 gpu"}
    assert v["alternatives"] == [{"changes": {"resources": {"gpu": 2}}, "hint": "ask for at most 2 gpu"}]


def test_a_bigger_queue_is_suggested_only_where_it_fits_the_machine() -> None:
    cfg = parse_config(CRAFTED)
    v = verdict(cfg, "u", 4, project="x", resources={"gpu": 5})
    assert [(r["rule"], r["limit"]) for r in v["rules"]] == [("ExceedsQueueQuota", "2 gpu"), ("NoCapacity", "4 gpu")]
    hints = [a["hint"] for a in v["alternatives"]]
    assert hints == ["ask for at most 2 gpu", "ask for at most 4 gpu and use queue big"]
    # with no GPU count of ours (a cluster), queue big takes 5 as it is
    v = verdict(cfg, "u", None, project="x", resources={"gpu": 5})
    assert [a["hint"] for a in v["alternatives"]] == ["ask for at most 2 gpu", "use queue big"]


def test_a_preset_that_locks_too_many_gpus_is_suggested_away_not_lowered() -> None:
    cfg = parse_config(CRAFTED)
    v = verdict(cfg, "u", 4, project="x", presets=["huge"])
    assert ("ExceedsQueueQuota", "2 gpu") in [(r["rule"], r["limit"]) for r in v["rules"]]
    # huge locks 6 GPUs: above small's quota and the machine's 4, so every alternative drops it
    assert v["alternatives"] and all("huge" not in a["changes"]["presets"] for a in v["alternatives"])


def test_a_project_allowed_nothing_gets_no_suggestion() -> None:
    v = verdict(parse_config(CRAFTED), "u", 4, project="y", queue="small")
    assert v["alternatives"] == []
    (q,) = v["violations"]
    assert q["code"] == "QueueNotAllowed" and q["hint"].startswith("no queue allowed in project y")


def test_a_locked_queue_is_not_suggested_away() -> None:
    # pinned locks queue small: another queue would be refused (FieldLocked), so none is suggested
    cfg = parse_config(CRAFTED)
    v = verdict(cfg, "u", 4, project="z", presets=["pinned"], resources={"gpu": 3})
    assert all("queue" not in a["changes"] for a in v["alternatives"]), v["alternatives"]
    assert v["alternatives"][0]["hint"] == "ask for at most 2 gpu"


# ---- through the API: the submit error and the preview say the same ---------------------------
async def test_submit_and_preview_refuse_64_gpus_alike_and_the_alternative_is_accepted(api: Any) -> None:
    body = {"project": "team-a", "command": "true", "resources": {"gpu": 64}}
    code, err = await api("POST", "runs", "bob", body)
    assert code == 422 and err["error"]["code"] == "ExceedsQueueQuota"
    e = err["error"]
    assert [(r["rule"], r["limit"]) for r in e["rules"]] == [
        ("ExceedsQueueQuota", "2 gpu"),
        ("MaxRunResources", "2 gpu"),
        ("NoCapacity", "4 gpu"),  # the test server's LocalExecutor has 4 GPUs
    ]
    for r in e["rules"]:
        assert r["message"] in e["message"]  # the message names every refusing rule
    assert e["hint"] == "ask for at most 2 gpu"
    assert "another queue" not in json.dumps(err) and "4 GPU(s)" not in json.dumps(err)
    preview = await api.ok("POST", "runs/preview", "bob", body)
    v = preview["verdict"]
    assert v["allowed"] is False and v["rules"] == e["rules"] and v["alternatives"] == e["alternatives"]
    assert {x["hint"] for x in v["violations"]} == {"ask for at most 2 gpu"}
    (alt,) = e["alternatives"]
    fixed = {**body, "resources": {**body["resources"], **alt["changes"]["resources"]}}
    ok = await api.ok("POST", "runs/preview", "bob", fixed)
    assert ok["verdict"] == {"allowed": True, "violations": [], "rules": [], "alternatives": []}
    run = await api.submit("bob", **fixed)
    assert run["resources"]["gpu"] == 2


async def test_an_unknown_project_is_still_a_plain_404(api: Any) -> None:
    code, err = await api("POST", "runs", "bob", {"project": "nope", "command": "true", "resources": {"gpu": 64}})
    assert code == 404 and err["error"]["code"] == "UnknownProject" and "rules" not in err["error"]
