"""What the Launcher shows and remembers: the preview's verdict, locked fields, the last choices.

- The preview says "✓ allowed" only once there is something to run; before, it shows what
  the settings resolve to and asks for a command. A refusal shows every violation; the
  Launcher disables Submit and says why beside it (`refusal_reason`).
- A run that asks for 0 GPUs says so plainly.
- An allowed run says when it would start, and the ways to start sooner the service found, each
  with its estimate (the service's words: `start_text`); a refused run's alternatives (the
  buttons) say theirs in their tooltips.
- A field the preview says is locked (its `locks`: path → the layer that locked it, resolved by the
  service) shows as `interactive — locked, set by preset notebook` (`lock_label`).
- The last project and, per project, the last presets submitted are remembered in the user's
  Jupyter data dir (`gpuplat/launcher.json`); a Launcher opened later starts from them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...client.explaining import start_text
from . import _html as h

__all__ = ["default_label", "load_last", "lock_label", "preview_html", "refusal_reason", "save_last"]


# ---- remembered choices ---------------------------------------------------------------------------
def state_path() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "gpuplat" / "launcher.json"


def load_last() -> dict[str, Any]:
    """`{"project": name, "presets": {project: [names]}}` as last saved; {} when none or unreadable."""
    try:
        data = json.loads(state_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_last(project: str, presets: list[str]) -> None:
    """Remember a submitted run's project and presets (best effort: a read-only home is no error)."""
    data = load_last()
    saved = data.get("presets")
    by_project: dict[str, Any] = saved if isinstance(saved, dict) else {}
    data = {"project": project, "presets": {**by_project, project: list(presets)}}
    path = state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass


# ---- locks ----------------------------------------------------------------------------------------
def lock_label(value: Any, layer: str) -> str:
    """`interactive — locked, set by preset pinned`: a preview's lock (`locks`: path → layer) in words."""
    return f"{h.value(value)} — locked, set by {layer_text(layer)}"  # words: an emoji lock needs a font


def layer_text(layer: str) -> str:
    """`project:team-a/preset:single-gpu` → `project default preset single-gpu`, `preset:x` → `preset x`."""
    if "/preset:" in layer:
        return f"project default preset {layer.rsplit('/preset:', 1)[1]}"
    kind, _, name = layer.partition(":")
    return {"org": "org default", "run": "this form"}.get(kind, f"{kind} {name}".strip())


def default_label(value: Any, layer: str) -> str:
    """The "leave it to the project and presets" choice, saying what that is: `default: interactive (preset x)`."""
    return f"default: {h.value(value)} ({layer_text(layer)})"


# ---- preview --------------------------------------------------------------------------------------
def validation_message(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'request'}: {e['msg']}" for e in errors())
        except (TypeError, KeyError):
            pass
    return str(exc)


def leaf_value(resolved: dict[str, Any], path: str) -> Any:
    """The value at a provenance path: dotted keys, keyed list items as `list[key]`."""
    from ...core.merge import KEYED_LISTS

    node: Any = resolved
    head, _, rest = path.partition("[")
    for part in head.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    if not rest:
        return node
    key = rest[:-1]
    fields = KEYED_LISTS.get(head, ())
    for item in node or []:
        if isinstance(item, dict) and ":".join("" if item.get(f) is None else str(item[f]) for f in fields) == key:
            others = {k: v for k, v in item.items() if k not in fields}
            return next(iter(others.values())) if len(others) == 1 else others
    return None


def refusal_reason(p: Mapping[str, Any] | None) -> str:
    """Why Submit is off (empty when the preview allows the run)."""
    verdict = (p or {}).get("verdict") or {}
    if not p or verdict.get("allowed"):
        return ""
    violations = verdict.get("violations") or []
    first = violations[0]["message"] if violations else "policy would refuse this run"
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    return f"Policy would refuse: {first}{more}"


def start_html(p: Mapping[str, Any]) -> str:
    """When the run would start if submitted now, and the ways to start sooner (soonest first)."""
    start = start_text(p)
    out = f'<div class="gpuplat-eta">{h.dim("start: " + h.esc(start))}</div>' if start else ""
    sooner = p.get("alternatives") or []
    if sooner:
        items = "".join(f"<li>{h.esc(a['hint'])}: {h.esc(start_text(a))}</li>" for a in sooner)
        out += f'<div class="gpuplat-sooner">{h.dim("to start sooner:")}<ul style="margin:2px 0">{items}</ul></div>'
    return out


def alternative_tooltip(alt: Mapping[str, Any]) -> str:
    """A refused run's alternative as its button's tooltip: the hint, and when the run would start so."""
    hint = str(alt.get("hint") or "")
    start = start_text(alt)
    return f"{hint} (start: {start})" if start else hint


def preview_html(p: dict[str, Any], placeholder: bool) -> str:
    verdict = p.get("verdict") or {}
    resolved = p.get("resolved") or {}
    res = resolved.get("resources") or {}
    if not verdict.get("allowed"):
        head = f'<div class="gpuplat-verdict" style="color:{h.BAD};font-weight:600">✗ refused by policy</div>'
        head += "".join(
            h.error_block(f"{v['message']} [{v.get('code', '')}]", v.get("hint", ""))
            for v in verdict.get("violations", [])
        )
        rules = verdict.get("rules") or []
        if rules:  # every refusing rule once, each with its own limit
            items = "".join(
                f"<li>{h.esc(r.get('message', ''))}"
                + (f" {h.dim('(limit ' + h.esc(r['limit']) + ')')}" if r.get("limit") else "")
                + "</li>"
                for r in rules
            )
            head += f'<ul class="gpuplat-rules" style="margin:2px 0">{items}</ul>'
        if verdict.get("alternatives"):
            head += f"<div>{h.dim('the policy would accept (buttons below):')}</div>"
    elif placeholder:
        head = (
            f'<div class="gpuplat-verdict gpuplat-verdict-pending" style="color:{h.FG_DIM}">Enter what to run: '
            "the policy's verdict comes with it (below: what your settings resolve to)</div>"
        )
    else:
        head = (
            f'<div class="gpuplat-verdict" style="color:{h.GOOD};font-weight:600">✓ allowed — queue '
            f"{h.esc(resolved.get('queue'))}, {h.esc(res.get('gpu', 0))} GPU, kind {h.esc(resolved.get('kind'))}</div>"
        )
    if p.get("flavor"):  # the flavor admission would choose now (the service's answer)
        head += f'<div class="gpuplat-flavor">{h.dim("starts now on flavor " + h.esc(p["flavor"]))}</div>'
    if verdict.get("allowed") and not placeholder:
        head += start_html(p)
    # The service's cautions on an allowed run (the CPU-only note), as the dialog and %%gpu_submit show them.
    for note in p.get("notes") or []:
        head += f'<div class="gpuplat-zero-gpu" style="color:{h.WARN};font-weight:600">{h.esc(note)}</div>'
    layers = " < ".join(h.esc(x) for x in p.get("layers") or [])
    rows = ["<tr>" + h.td("field", header=True) + h.td("value", header=True) + h.td("set by", header=True) + "</tr>"]
    for path, layer in (p.get("provenance") or {}).items():
        rows.append(
            '<tr class="gpuplat-provenance">'
            + h.td(h.esc(path), extra=f"font-family:{h.MONO}")
            + h.td(h.esc(h.value(leaf_value(resolved, path))), extra=f"font-family:{h.MONO}")
            + h.td(h.esc(layer))
            + "</tr>"
        )
    command = h.dim("(enter what to run)") if placeholder else h.esc(h.value(resolved.get("command")))
    rows.append("<tr>" + h.td("command", extra=f"font-family:{h.MONO}") + h.td(command) + h.td("run") + "</tr>")
    return h.box(f'{head}<div>{h.dim("layers: " + layers)}</div><div class="gpuplat-preview">{h.table(rows)}</div>')
