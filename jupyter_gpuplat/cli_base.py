"""What every `gpuplat` command shares: the parser (global flags anywhere, "did you mean"), errors, output."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .client import Client
from .suggest import SuggestingParser


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
