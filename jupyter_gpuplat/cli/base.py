"""What every `gpuplat` command shares: the parser (global flags anywhere, "did you mean"), errors, output."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ..client.rest import Client
from ..client.suggest import SuggestingParser, did_you_mean
from ..core.errors import GpuPlatError
from ..core.refusal import PRESET_CODES, QUEUE_CODES


class CLIError(Exception):
    pass


# The flags of `gpuplat` itself, accepted before or after the subcommand (docs/cli.md).
GLOBAL_FLAGS = {"--url": True, "--token": True, "--json": False}  # flag -> takes a value


def add_global_flags(p: argparse.ArgumentParser, *, in_subcommand: bool) -> None:
    # In a subcommand the default is SUPPRESS: absent there, the value given before the subcommand stays.
    d: dict[str, Any] = {"default": argparse.SUPPRESS} if in_subcommand else {}
    p.add_argument("--url", help="Jupyter server URL (default: GPUPLAT_URL or the running server)", **d)
    p.add_argument("--token", help="API token (default: GPUPLAT_TOKEN or the server's own)", **d)
    p.add_argument("--json", action="store_true", help="print JSON for scripts", **d)


def global_flags_parent() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    add_global_flags(p, in_subcommand=True)
    return p


# The CLI's parser: "did you mean" for an unknown subcommand, action or flag.
Parser = SuggestingParser


def connect(args: argparse.Namespace) -> Client:
    return Client(args.url, args.token)


def emit(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


# The service's hints name its API ("list your runs with GET /gpuplat/api/runs"); a CLI user is told
# the command instead. One mapping, applied where the CLI prints a hint; an endpoint not here stays as is.
CLI_WORDS = {
    ("GET", "runs"): "gpuplat runs list",
    ("GET", "runs/{id}"): "gpuplat runs show ID",
    ("GET", "runs/{id}/explain"): "gpuplat runs explain ID",
    ("GET", "runs/{id}/logs"): "gpuplat runs logs ID",
    ("POST", "runs"): "gpuplat submit",
    ("POST", "runs/preview"): "gpuplat submit --preview",
    ("POST", "runs/{id}/stop"): "gpuplat runs stop ID",
    ("GET", "queues"): "gpuplat queues",
    ("GET", "presets"): "gpuplat presets",
    ("GET", "sessions"): "gpuplat sessions list",
    ("GET", "cluster"): "gpuplat cluster",
}
_API_CALL = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE) (?:/gpuplat/api/)?([A-Za-z][\w{}/-]*)")


def cli_words(text: str) -> str:
    """A service hint with each API call it names (`GET /gpuplat/api/runs`) as the gpuplat command."""
    return _API_CALL.sub(lambda m: CLI_WORDS.get((m[1], m[2]), m[0]), text)


_QUOTED = re.compile(r"'([^']*)'")


def offered_names(exc: GpuPlatError, args: argparse.Namespace) -> list[str]:
    """The names the service offers instead of an unknown preset, queue or project."""
    error = getattr(exc, "error", None) or {}
    changes = [a.get("changes") or {} for a in error.get("alternatives") or []]
    if exc.code in PRESET_CODES:
        return [p for ch in changes for p in ch.get("presets") or []]
    if exc.code in QUEUE_CODES:
        return [ch["queue"] for ch in changes if ch.get("queue")]
    if exc.code == "UnknownProject":
        try:
            return [p["name"] for p in connect(args).whoami()["projects"]]
        except GpuPlatError:
            return []
    return []


def refusal_text(exc: GpuPlatError, args: argparse.Namespace) -> str:
    """A refusal as the CLI prints it: the message, the offered name nearest a mistyped one, the hint in CLI words."""
    text = exc.message
    word = _QUOTED.search(exc.message)
    near = did_you_mean(word[1], offered_names(exc, args)) if word else None
    if near:
        text += f"; did you mean {near}?"
    return text + (f"\n  hint: {cli_words(exc.hint)}" if exc.hint else "")
