"""When would a run not yet submitted start, and what would start it sooner (issue 26's preview side).

The preview's estimate is the run's own, as if submitted now: added after every run waiting in
its queue, run forward with them (`Estimates.probe`). Ways to start sooner are variants of the
request the policy itself accepts (`core.refusal.check`, the same judge as `POST runs`) — another
queue the project may use, fewer GPUs, another flavor of its queue — each estimated the same
way; only those expected to start sooner are offered, soonest first. A refused run's
alternatives (the verdict's) are the preview's `alternatives`, each with its estimate; the verdict
itself stays what submit would answer.
"""

from __future__ import annotations

from typing import Any

from ..core.admission import PendingRun
from ..core.errors import GpuPlatError
from ..core.eta import Eta, EtaUnknown, view
from ..core.policy import Resolution, allowed_queues, require_project
from ..core.refusal import apply, check
from ..core.request import RunRequest
from .estimates import Estimates, Known, traits_of
from .state import EngineState

# Fewer scenarios than the kept estimates: a preview is answered while the user waits.
PREVIEW_SCENARIOS = 30
MAX_SOONER = 4
THIS_RUN = "this run"


def probe(s: EngineState, est: Estimates, user: str, res: Resolution) -> Known | None:
    """The estimate of a resolved request, as if submitted now (None: it names no queue)."""
    queue = res.queue
    if queue is None or queue not in s.queues:
        return None
    run = PendingRun(THIS_RUN, 2**62, queue, user, res.resources, None, s.asked_flavor(res.resolved))
    return est.probe(run, traits_of(THIS_RUN, user, res.resolved, None), PREVIEW_SCENARIOS)


def eta_fields(k: Known | None, now: float) -> dict[str, Any]:
    eta, unknown = view(k.estimate, k.computed_at, now) if k is not None else (None, None)
    return {"eta": eta, "eta_unknown": unknown}


def sooner(
    s: EngineState,
    est: Estimates,
    user: str,
    req: RunRequest,
    res: Resolution,
    base: Known | None,
    platform_gpus: int | None,
) -> list[dict[str, Any]]:
    """Accepted variants of `req` (resolved as `res`) expected to start sooner than `base`, soonest first."""
    if base is None or (isinstance(base.estimate, Eta) and base.estimate.p90_seconds < 1):
        return []  # it starts now: nothing is sooner
    now = s.clock()
    found: list[tuple[float, dict[str, Any]]] = []
    for changes, hint in _variants(s, user, req, res):
        if any(all(changes.get(k) == v for k, v in alt["changes"].items()) for _, alt in found):
            continue  # fewer changes already start it sooner
        try:
            got, problems = check(s.cfg, user, apply(req, changes), platform_gpus)
        except (GpuPlatError, ValueError):  # ValueError: pydantic's, a variant that is no request
            continue
        if problems or got.violations:
            continue
        k = probe(s, est, user, got)
        if k is None or not isinstance(k.estimate, Eta) or not _before(k, base):
            continue
        found.append((k.estimate.p50_seconds, {"changes": changes, "hint": hint, **eta_fields(k, now)}))
    found.sort(key=lambda x: x[0])
    return [alt for _, alt in found[:MAX_SOONER]]


def with_estimates(
    s: EngineState,
    est: Estimates,
    user: str,
    req: RunRequest,
    alternatives: list[dict[str, Any]],
    platform_gpus: int | None,
) -> list[dict[str, Any]]:
    """A refused run's alternatives (the verdict's), each with the estimate it would have if submitted so."""
    now = s.clock()
    out = []
    for alt in alternatives:
        k = None
        try:
            got, problems = check(s.cfg, user, apply(req, alt["changes"]), platform_gpus)
            if not problems and not got.violations:
                k = probe(s, est, user, got)
        except (GpuPlatError, ValueError):
            pass
        out.append({**alt, **eta_fields(k, now)})
    return out


def _before(k: Known, base: Known) -> bool:
    """`k` is expected to start sooner than `base` (anything known beats unknown), by at least a minute or 10%."""
    if isinstance(base.estimate, EtaUnknown):
        return True
    assert isinstance(k.estimate, Eta) and isinstance(base.estimate, Eta)
    gain = base.estimate.p50_seconds - k.estimate.p50_seconds
    return gain >= max(60.0, 0.1 * base.estimate.p50_seconds)


def _variants(s: EngineState, user: str, req: RunRequest, res: Resolution) -> list[tuple[dict[str, Any], str]]:
    """Changes worth estimating, fewest first: each other queue the project may use, fewer GPUs (here, and in
    another queue), each other flavor of its queue."""
    gpu = res.resources.gpu
    fewer = [n for n in sorted({1, gpu // 2}, reverse=True) if 0 < n < gpu]
    gpus = {n: f"ask for {n} GPU{'s' if n > 1 else ''} instead of {gpu}" for n in fewer}
    pr = require_project(s.cfg, user, req.project, "member")
    queues = [q for q in allowed_queues(s.cfg, pr) if q != res.queue and q in s.queues]
    out: list[tuple[dict[str, Any], str]] = [({"queue": q}, f"use queue {q}") for q in queues]
    out += [({"resources": {"gpu": n}}, text) for n, text in gpus.items()]
    out += [({"queue": q, "resources": {"gpu": n}}, f"use queue {q} and {t}") for q in queues for n, t in gpus.items()]
    asked = s.asked_flavor(res.resolved)
    qc = s.cfg.queue(res.queue) if res.queue else None
    if asked is not None and qc is not None:
        placement = req.model_dump(mode="json", exclude_unset=True).get("placement") or {}
        for f in qc.flavors:
            if f.name != asked:
                out.append(
                    ({"placement": {**placement, "gpu_type": f.name}}, f"use flavor {f.name} instead of {asked}")
                )
    return out


def add_to_preview(
    s: EngineState, est: Estimates, user: str, req: RunRequest, preview: dict[str, Any], platform_gpus: int | None
) -> dict[str, Any]:
    """The preview's `eta`/`eta_unknown` and `alternatives`: ways to start sooner, or (refused) the verdict's
    accepted variants, each with its estimate."""
    verdict = preview["verdict"]
    preview.update(eta=None, eta_unknown=None, alternatives=[])
    if req.matrix is not None:  # a sweep's children wait each on their own
        return preview
    if not verdict["allowed"]:  # the verdict stays submit's own; its accepted variants, estimated, come beside it
        preview["alternatives"] = with_estimates(s, est, user, req, verdict["alternatives"], platform_gpus)
        return preview
    res, _ = check(s.cfg, user, req, platform_gpus)
    k = probe(s, est, user, res)
    preview.update(eta_fields(k, s.clock()))
    preview["alternatives"] = sooner(s, est, user, req, res, k, platform_gpus)
    return preview
