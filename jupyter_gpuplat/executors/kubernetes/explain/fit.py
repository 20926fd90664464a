"""The scheduler's `0/N nodes are available: …` message, parsed leniently (any version's wording)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIT = re.compile(r"^\s*0/(\d+) nodes are available:?\s*(.*)$", re.S)
_OLD_FIT = re.compile(r"^\s*No nodes are available that match all of the (?:following )?predicates:+\s*(.*)$", re.S)
_OLD_ENTRY = re.compile(r"^(.*?)\s*\((\d+)\)$")
_ENTRY = re.compile(r"^(\d+)\s+(.+)$", re.S)
_TAINT_NAMED = re.compile(r"taint \{([^}]*)\}")


@dataclass(frozen=True)
class Cause:
    """One entry of the scheduler's histogram: `count` nodes rejected for `text`."""

    count: int
    text: str
    category: str  # insufficient | taint | selector | cordoned | volume | pods | pod_affinity | topology | node | other
    resource: str | None = None
    taint: str | None = None


@dataclass(frozen=True)
class FitFailure:
    """A parsed `0/N nodes are available: …` message."""

    nodes: int | None
    causes: tuple[Cause, ...]
    prefilter: str
    preemption: str
    raw: str


def categorize(text: str) -> Cause:
    t = text.strip()
    low = t.lower()
    m = re.match(r"insufficient (\S+)", low)
    if m:
        return Cause(0, t, "insufficient", resource=t.split()[1])
    if "volume node affinity" in low or "persistentvolumeclaim" in low or ("volume" in low and "bound" in low):
        return Cause(0, t, "volume")
    if "taint" in low:
        named = _TAINT_NAMED.search(t)
        return Cause(0, t, "taint", taint=named.group(1) if named else None)
    if "anti-affinity" in low or "pod affinity" in low:
        return Cause(0, t, "pod_affinity")
    if "node affinity" in low or "node selector" in low or "nodeselector" in low:
        return Cause(0, t, "selector")
    if "unschedulable" in low or "cordon" in low:
        return Cause(0, t, "cordoned")
    if "too many pods" in low:
        return Cause(0, t, "pods")
    if "topology spread" in low:
        return Cause(0, t, "topology")
    if "pressure" in low or "not ready" in low or "had condition" in low or "free ports" in low:
        return Cause(0, t, "node")
    return Cause(0, t, "other")


def parse_fit_error(message: str) -> FitFailure | None:
    """Parse `0/N nodes are available: …` (any version's wording); None if it is not one."""
    raw = message or ""
    m = _FIT.match(raw)
    if m is None:
        old = _OLD_FIT.match(raw)
        if old is None:
            return None
        legacy: list[Cause] = []
        for part in old.group(1).rstrip(". ").split(", "):
            e = _OLD_ENTRY.match(part.strip())
            if e:
                c = categorize(e.group(1))
                legacy.append(Cause(int(e.group(2)), c.text, c.category, c.resource, c.taint))
        return FitFailure(None, tuple(legacy), "", "", raw)
    total = int(m.group(1))
    rest = m.group(2)
    preemption = ""
    cut = re.search(r"(?:no new claims to deallocate,\s*)?preemption:", rest)
    if cut:
        preemption = rest[cut.start() :].strip().rstrip(".").strip()
        rest = rest[: cut.start()]
    rest = rest.strip().rstrip(".").strip()
    causes: list[Cause] = []
    prefilter = []
    for part in re.split(r",\s+(?=\d+\s)|\.\s+(?=\d+\s)", rest) if rest else []:
        e = _ENTRY.match(part.strip())
        if e:
            c = categorize(e.group(2).rstrip(". "))
            causes.append(Cause(int(e.group(1)), c.text, c.category, c.resource, c.taint))
        elif part.strip():
            prefilter.append(part.strip().rstrip("."))
    return FitFailure(total, tuple(causes), "; ".join(prefilter), preemption, raw)
