"""What every `gpuplat` command shares: the parser (global flags anywhere, "did you mean"), errors, output."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from .client import Client
from .suggest import did_you_mean


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


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


class Parser(argparse.ArgumentParser):
    """argparse with "did you mean" for an unknown subcommand, action or flag (Python 3.11 has no suggest_on_error)."""

    def error(self, message: str) -> NoReturn:
        m = _INVALID_CHOICE.search(message)
        if m:
            choices = [c.strip().strip("'") for c in m["choices"].split(",")]
            near = did_you_mean(m["word"], choices)
            if near:
                message = f"{message[: m.start()]}invalid choice: '{m['word']}'; did you mean '{near}'? " + (
                    f"(choose from {m['choices']})"
                )
        super().error(message)

    def flags(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]

    def unrecognized(self, extra: Iterable[str]) -> NoReturn:
        """Refuse arguments no option took: name the first unknown flag and its nearest known one."""
        extra = list(extra)
        flag = next((w for w in extra if w.startswith("-") and w != "-"), None)
        if flag is None:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        known = self.flags()
        if flag.startswith("--"):
            known = [k for k in known if k.startswith("--")]
        near = did_you_mean(flag.split("=", 1)[0], known)
        self.error(f"unrecognized argument {flag}" + (f"; did you mean {near}?" if near else ""))


def connect(args: argparse.Namespace) -> Client:
    return Client(args.url, args.token)


def emit(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)
