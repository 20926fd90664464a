"""Layered preset merge with provenance and locked fields.

Layers apply in order, first = lowest precedence:
org defaults < project defaults < user presets (in order) < explicit run fields.
Each layer is a partial spec dict (`PartialSpec.layer_dict()`), where an explicit
`None` means "delete". The result is a new dict; inputs are never mutated.

Spec values are treated generically: mappings recurse; a list is *keyed* when its
dotted path is in `KEYED_LISTS` (and all its items are mappings), otherwise *plain*.
A keyed item's key is its key fields joined with ':' (a missing field is '').

Semantics, per layer `strategy`, applied to every top-level field the layer sets:

1. `post_merge` (default) -- the new layer wins.
   Scalars: new value wins. Mappings: recursive merge, new wins on conflicts, old keys
   kept. Keyed lists: merged by key; an item whose key matches an existing item replaces
   that whole item in place, new keys are appended in the layer's order. Plain lists:
   the new list replaces. `None` (a field or a mapping key, at any depth) deletes it.
   An `env` item `{"name": X, "value": None}` deletes variable X.
2. `pre_merge` -- existing values win. Scalars and plain lists: kept if present, else
   new. Mappings: recursive, old wins on conflicts, new keys added. Keyed lists: new
   items whose key is not present come first (in the layer's order), then the existing
   items. `None` never deletes (and an env delete marker is ignored).
3. `isnull` -- a top-level field is set only if absent in the current result; no
   recursion, so an existing mapping gets no new keys. `None` is a no-op.
4. `replace` -- each top-level field replaces the current value wholesale (mappings and
   lists included); `None` deletes the field.
5. Whatever a layer puts where nothing merges with it is normalised as under
   `post_merge` onto nothing: `None` mapping keys are dropped, keyed lists are
   de-duplicated by key (a later duplicate replaces an earlier one in place), env delete
   markers vanish, and `None` fields inside keyed items are dropped.
6. Provenance: every leaf path of the result maps to the label of the layer that last
   set it. Leaves are scalars and plain lists by dotted path (`resources.gpu`,
   `command`) and keyed items at item level (`env[HF_HOME]`,
   `placement.tolerations[nvidia.com/gpu:NoSchedule]`); empty mappings and empty keyed
   lists have no leaf. A wholesale replace or delete drops the removed leaves; all
   leaves of the new value get the new label. Under `pre_merge` only leaves the layer
   actually added get its label. Setting an equal value still counts as setting it.
7. Locks: a layer's `locked` dotted paths (mapping keys only, split on '.') bind every
   later layer. If a later layer would change the value at P or below it -- directly, or
   by replacing/deleting a parent of P -- a `LockViolation` is recorded and P keeps its
   value *and* its provenance, while the rest of that layer still applies. Equal values
   are not a violation (they also leave P's provenance alone: a locked part is frozen).
   A lock on an absent path keeps it absent. Locks accumulate; a path locked twice is
   attributed to the first layer. Locks are checked in the order they were taken, so
   overlapping locks report the violation of the earliest one that still differs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

STRATEGIES: Final = ("post_merge", "pre_merge", "isnull", "replace")

# Dotted path of a list -> the item fields that identify an item in it.
KEYED_LISTS: dict[str, tuple[str, ...]] = {
    "env": ("name",),
    "placement.tolerations": ("key", "effect"),
    "volumes": ("name",),
}


class _Absent:
    """Marks a missing value; distinct from None, which in a layer means 'delete'."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent()
Provenance = dict[str, str]


@dataclass(frozen=True)
class Layer:
    label: str
    values: Mapping[str, Any]
    strategy: str = "post_merge"
    locked: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockViolation:
    path: str
    locked_by: str
    attempted_by: str
    locked_value: Any
    attempted_value: Any

    def message(self) -> str:
        attempt = "remove it" if self.attempted_value is None else f"set {_show(self.attempted_value)}"
        lock = f"{self.path} is locked by {self.locked_by} ({_show(self.locked_value)})"
        return f"{lock}; {self.attempted_by} tried to {attempt}"


@dataclass(frozen=True)
class Resolved:
    spec: dict[str, Any]
    provenance: dict[str, str]
    violations: tuple[LockViolation, ...]
    # Each locked path and the layer that locked it first (rule 7), in the order they were locked.
    locks: dict[str, str] = dataclasses.field(default_factory=dict)


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _is_keyed(path: str, value: Any) -> bool:
    # A malformed keyed list (non-mapping items) degrades to plain-list semantics.
    return path in KEYED_LISTS and isinstance(value, list) and all(isinstance(i, Mapping) for i in value)


def _item_key(path: str, item: Mapping[str, Any]) -> str:
    return ":".join("" if item.get(f) is None else str(item.get(f)) for f in KEYED_LISTS[path])


def _item_path(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _is_delete_marker(path: str, item: Mapping[str, Any]) -> bool:
    # Only an explicit `"value": None` deletes; `{"name": X}` alone is an ordinary item.
    return path == "env" and "value" in item and item["value"] is None


def _clean_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in item.items() if v is not None}


def _leaves(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, _join(path, k))
    elif _is_keyed(path, value):
        for item in value:
            yield _item_path(path, _item_key(path, item))
    elif path:
        yield path


def leaf_paths(spec: Mapping[str, Any]) -> list[str]:
    """The provenance paths of a spec, in spec order."""
    return list(_leaves(spec, ""))


def _drop(prov: Provenance, value: Any, path: str) -> None:
    # Drop exactly the leaves of `value` (not a prefix match: label keys may contain dots).
    if value is not ABSENT:
        for lp in _leaves(value, path):
            prov.pop(lp, None)


def _post(old: Any, new: Any, path: str, label: str, prov: Provenance) -> Any:
    """post_merge of `new` onto `old`; returns the merged value or ABSENT. Never mutates."""
    if new is None:
        _drop(prov, old, path)
        return ABSENT
    if isinstance(new, Mapping):
        if isinstance(old, Mapping):
            out = dict(old)
        else:
            _drop(prov, old, path)
            out = {}
        for k, v in new.items():
            merged = _post(out.get(k, ABSENT), v, _join(path, k), label, prov)
            if merged is ABSENT:
                out.pop(k, None)
            else:
                out[k] = merged
        return out
    if _is_keyed(path, new):
        if _is_keyed(path, old):
            items = {_item_key(path, i): i for i in old}
        else:
            _drop(prov, old, path)
            items = {}
        for item in new:
            key = _item_key(path, item)
            if _is_delete_marker(path, item):
                if items.pop(key, None) is not None:
                    prov.pop(_item_path(path, key), None)
                continue
            items[key] = _clean_item(item)  # dict assignment keeps an existing key's position
            prov[_item_path(path, key)] = label
        return list(items.values())
    _drop(prov, old, path)
    prov[path] = label
    return copy.deepcopy(new)


def _pre(old: Any, new: Any, path: str, label: str, prov: Provenance) -> Any:
    """pre_merge of `new` onto `old`: old wins, only the gaps are filled."""
    if new is None:
        return old
    if old is ABSENT:
        return _post(ABSENT, new, path, label, prov)
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = dict(old)
        for k, v in new.items():
            merged = _pre(out.get(k, ABSENT), v, _join(path, k), label, prov)
            if merged is not ABSENT:
                out[k] = merged
        return out
    if _is_keyed(path, old) and _is_keyed(path, new):
        present = {_item_key(path, i) for i in old}
        # Normalise the layer's own list first (dedupe, markers out), then keep only new keys.
        added = [i for i in _post(ABSENT, new, path, label, {}) if _item_key(path, i) not in present]
        for item in added:
            prov[_item_path(path, _item_key(path, item))] = label
        return added + list(old)
    return old


def _apply(spec: dict[str, Any], prov: Provenance, layer: Layer) -> dict[str, Any]:
    """Apply one layer to `spec` (not mutated); updates `prov` in place."""
    if layer.strategy not in STRATEGIES:
        raise ValueError(
            f"layer {layer.label}: unknown merge strategy {layer.strategy!r} (one of {', '.join(STRATEGIES)})"
        )
    out = dict(spec)
    for field, new in layer.values.items():
        old = out.get(field, ABSENT)
        if layer.strategy == "post_merge":
            merged = _post(old, new, field, layer.label, prov)
        elif layer.strategy == "pre_merge":
            merged = _pre(old, new, field, layer.label, prov)
        elif layer.strategy == "isnull":
            merged = old if old is not ABSENT or new is None else _post(ABSENT, new, field, layer.label, prov)
        else:  # replace
            _drop(prov, old, field)
            merged = _post(ABSENT, new, field, layer.label, prov)
        if merged is ABSENT:
            out.pop(field, None)
        else:
            out[field] = merged
    return out


def _get(spec: Any, parts: Sequence[str]) -> Any:
    node = spec
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return ABSENT
        node = node[part]
    return node


def _set_in(spec: Mapping[str, Any], parts: Sequence[str], value: Any, before: Any) -> dict[str, Any]:
    """A copy of `spec` with `value` (ABSENT deletes) at `parts`, copying only along the path.

    `before` is the same subtree in the pre-layer spec: a parent that the deletion
    leaves empty is removed again if it did not exist before.
    """
    head, rest = parts[0], parts[1:]
    out = dict(spec)
    if not rest:
        if value is ABSENT:
            out.pop(head, None)
        else:
            out[head] = copy.deepcopy(value)
        return out
    child = out.get(head, ABSENT)
    if not isinstance(child, Mapping):
        if value is ABSENT:
            return out  # nothing to delete below a non-mapping
        child = {}
    before_child = before.get(head, ABSENT) if isinstance(before, Mapping) else ABSENT
    new_child = _set_in(child, rest, value, before_child)
    if not new_child and value is ABSENT and before_child is ABSENT:
        out.pop(head, None)
    else:
        out[head] = new_child
    return out


def _restore(
    cand: dict[str, Any], cand_prov: Provenance, parts: Sequence[str], old: dict[str, Any], old_prov: Provenance
) -> dict[str, Any]:
    """Put the pre-layer value and provenance of a locked path back into the candidate."""
    path = ".".join(parts)
    old_v, new_v = _get(old, parts), _get(cand, parts)
    _drop(cand_prov, new_v, path)
    if old_v is not ABSENT:
        for lp in _leaves(old_v, path):
            cand_prov[lp] = old_prov[lp]
    if old_v == new_v:
        return cand
    if old_v is not ABSENT:
        # A scalar/list now standing where P's parent mapping was gets displaced: drop its leaves.
        node: Any = cand
        for i, part in enumerate(parts[:-1]):
            node = node.get(part, ABSENT)
            if not isinstance(node, Mapping):
                _drop(cand_prov, node, ".".join(parts[: i + 1]))
                break
    return _set_in(cand, parts, old_v, old)


def merge_layers(layers: Sequence[Layer]) -> Resolved:
    """Merge `layers` (lowest precedence first) into a resolved spec with provenance."""
    spec: dict[str, Any] = {}
    prov: Provenance = {}
    locks: dict[str, str] = {}  # path -> label of the first layer that locked it (insertion-ordered)
    violations: list[LockViolation] = []
    for layer in layers:
        cand_prov = dict(prov)
        cand = _apply(spec, cand_prov, layer)
        for path, locked_by in locks.items():
            parts = path.split(".")
            before, after = _get(spec, parts), _get(cand, parts)
            if before != after:
                violations.append(
                    LockViolation(
                        path=path,
                        locked_by=locked_by,
                        attempted_by=layer.label,
                        locked_value=None if before is ABSENT else copy.deepcopy(before),
                        attempted_value=None if after is ABSENT else copy.deepcopy(after),
                    )
                )
            cand = _restore(cand, cand_prov, parts, spec, prov)
        spec, prov = cand, cand_prov
        for path in layer.locked:
            if path:
                locks.setdefault(path, layer.label)
    # No final copy needed: every value entered the working spec as a copy, and subtrees shared
    # with earlier working specs are only shared with values now discarded.
    return Resolved(
        spec=spec, provenance={lp: prov[lp] for lp in leaf_paths(spec)}, violations=tuple(violations), locks=locks
    )


__all__ = ["KEYED_LISTS", "STRATEGIES", "Layer", "LockViolation", "Resolved", "leaf_paths", "merge_layers"]
