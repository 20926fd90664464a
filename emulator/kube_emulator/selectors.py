"""Label and field selectors, as the Kubernetes API parses them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]

_SET = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*$")

# Fields each resource may be selected on (the API answers 400 for others).
FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "jobs": frozenset({"status.successful"}),
    "nodes": frozenset({"spec.unschedulable"}),
    "persistentvolumeclaims": frozenset(),
}
_ALWAYS = frozenset({"metadata.name", "metadata.namespace"})


class SelectorError(ValueError):
    """A selector the API would refuse with 400 BadRequest."""


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_check(key: str, op: str, values: frozenset[str]) -> Matcher:
    def check(labels: Mapping[str, Any]) -> bool:
        if op == "in":
            return labels.get(key) in values
        if op == "notin":
            return labels.get(key) not in values
        if op == "=":
            return labels.get(key) in values
        if op == "!=":
            return labels.get(key) not in values
        if op == "exists":
            return key in labels
        return key not in labels  # "!": does not exist

    return check


def parse_label_selector(text: str | None) -> Matcher:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` → a predicate over an object's labels."""
    if not text:
        return lambda labels: True
    checks: list[Matcher] = []
    for term in _split_terms(text):
        m = _SET.match(term)
        if m:
            if m.group(1):
                raise SelectorError(f"unable to parse requirement: {term!r}")
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            checks.append(_label_check(m.group(2), m.group(3), values))
            continue
        m = _EQ.match(term)
        if m:
            key, op, value = m.groups()
            checks.append(_label_check(key, "!=" if op == "!=" else "=", frozenset({value})))
            continue
        m = _EXISTS.match(term)
        if m:
            neg, key = m.groups()
            checks.append(_label_check(key, "!" if neg else "exists", frozenset()))
            continue
        raise SelectorError(f"unable to parse requirement: {term!r}")
    return lambda labels: all(c(labels) for c in checks)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, Mapping) and path == "source":
        return str(cur.get("component", ""))
    return str(cur)


def parse_field_selector(text: str | None, resource: str) -> Callable[[Mapping[str, Any]], bool]:
    """`metadata.name=x,status.phase!=Running` → a predicate over the whole object."""
    if not text:
        return lambda obj: True
    allowed = _ALWAYS | FIELDS.get(resource, frozenset())
    checks: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split_terms(text):
        if "!=" in term:
            key, value = term.split("!=", 1)
            neg = True
        elif "==" in term:
            key, value = term.split("==", 1)
            neg = False
        elif "=" in term:
            key, value = term.split("=", 1)
            neg = False
        else:
            raise SelectorError(f"invalid selector: {text!r}; can't understand {term!r}")
        key, value = key.strip(), value.strip()
        if key not in allowed:
            raise SelectorError(f"field label not supported: {key}")
        checks.append(_field_check(key, value, neg))
    return lambda obj: all(c(obj) for c in checks)


def _field_check(key: str, value: str, neg: bool) -> Callable[[Mapping[str, Any]], bool]:
    def check(obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, key) == value) != neg

    return check
