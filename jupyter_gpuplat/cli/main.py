"""`gpuplat`: the command line for people (tables) and scripts (`--json`).

It talks to a running Jupyter server with the extension: `--url/--token`, else
GPUPLAT_URL/GPUPLAT_TOKEN, else the servers listed in Jupyter's runtime files.
The global flags (`--url`, `--token`, `--json`) go before or after the subcommand;
the commands live in runs.py (submit, runs), sweeps.py (sweeps, sessions) and
admin.py (queues, presets, config, cluster, lab). docs/cli.md
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from pydantic import ValidationError

from ..core.config import validation_messages
from ..core.errors import GpuPlatError
from .admin import add_lab, add_platform, cmd_cluster, cmd_config, cmd_lab, cmd_presets, cmd_queues
from .base import GLOBAL_FLAGS, CLIError, Parser, add_global_flags, global_flags_parent, refusal_text
from .runs import add_runs, add_submit, cmd_runs, cmd_submit
from .sweeps import add_sessions, add_sweeps, cmd_sessions, cmd_sweeps

__all__ = ["HANDED_OVER", "build_parser", "main"]

# Commands with parsers of their own, each a module of this room with `main(argv) -> int`:
# `gpuplat <cmd> --help` is theirs. Imported when named, so `gpuplat runs` never loads the server.
# The third field: whether its parser takes the global flags (--url, --token, --json) itself.
HANDED_OVER = {
    "server": (
        "jupyter_gpuplat.cli.server",
        "run the team-mode control plane (PostgreSQL; --help-all)",
        False,
    ),
    "db": ("jupyter_gpuplat.cli.db", "the database: upgrade (under a lock), copy (SQLite to PostgreSQL)", False),
    "report": (
        "jupyter_gpuplat.cli.report",
        "observed queue waits, utilisation, goodput, refusals (table, csv, html)",
        True,
    ),
    "whatif": ("jupyter_gpuplat.cli.whatif", "replay a period's arrivals under changed queue limits", True),
    "rollout-check": (
        "jupyter_gpuplat.cli.rollout",
        "submit representative workloads and check limits, access, outputs",
        True,
    ),
    "import": ("jupyter_gpuplat.cli.polyaxon", "import Polyaxon presets (gpuplat import polyaxon FILE...)", True),
}

HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "submit": cmd_submit,
    "runs": cmd_runs,
    "sessions": cmd_sessions,
    "sweeps": cmd_sweeps,
    "queues": cmd_queues,
    "presets": cmd_presets,
    "config": cmd_config,
    "cluster": cmd_cluster,
}


def build_parser() -> Parser:
    p = Parser(prog="gpuplat", description="Shared GPU queues from the command line.")
    add_global_flags(p, in_subcommand=False)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", help="what to do (gpuplat COMMAND --help)")
    for name, (_, about, _globals) in HANDED_OVER.items():
        sub.add_parser(name, help=about)
    parents = [global_flags_parent()]
    add_lab(sub, parents)
    add_submit(sub, parents)
    add_runs(sub, parents)
    add_sessions(sub, parents)
    add_sweeps(sub, parents)
    add_platform(sub, parents)
    return p


def subparser(parser: argparse.ArgumentParser, name: str) -> Parser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found = action.choices[name]
            assert isinstance(found, Parser)
            return found
    raise KeyError(name)


def leading_globals(argv: Sequence[str]) -> int:
    """How many words of argv are global flags before the subcommand (`--url U --json`, `--url=U`)."""
    at = 0
    while at < len(argv):
        flag, eq, _ = argv[at].partition("=")
        if flag not in GLOBAL_FLAGS:
            break
        at += 2 if GLOBAL_FLAGS[flag] and not eq else 1
    return at


def hand_over(parser: Parser, argv: list[str], at: int) -> int:
    """`gpuplat [globals] CMD ...` for a command with its own parser: the globals go along, after CMD."""
    name = argv[at]
    module_name, _, takes_globals = HANDED_OVER[name]
    if at and not takes_globals:
        subparser(parser, name).error(
            f"{' '.join(argv[:at])}: gpuplat {name} does not talk to a Jupyter server, "
            "so it takes none of --url, --token, --json"
        )
    module = importlib.import_module(module_name)
    return int(module.main(argv[:at] + argv[at + 1 :]) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    at = leading_globals(argv)
    if at < len(argv) and argv[at] in HANDED_OVER:
        return hand_over(parser, argv, at)
    args, extra = parser.parse_known_args(argv)
    try:
        if args.cmd == "lab":
            return cmd_lab(args, extra)
        if args.cmd in HANDED_OVER:  # reached only past an unknown flag before it (`gpuplat --jsno db`)
            parser.unrecognized(extra)
        if extra:
            subparser(parser, args.cmd).unrecognized(extra)
        if args.cmd == "config":
            args.file = args.file_opt or args.file
            if not args.file:
                parser.error("config needs a file: gpuplat config validate|plan|apply -f FILE")
        rc = HANDLERS[args.cmd](args)
        sys.stdout.flush()  # here, not at exit: a closed pipe (gpuplat runs list | head) is answered below
        return rc
    except BrokenPipeError:
        # The reader stopped (head, less): stop quietly as Unix tools do. Python's own flush at exit would
        # fail again on the closed pipe, so stdout goes to /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except CLIError as exc:
        print(f"gpuplat: {exc}", file=sys.stderr)
        return 1
    except GpuPlatError as exc:  # the service's refusals (GpuPlatAPIError) and the options' own
        print(f"gpuplat: {refusal_text(exc, args)}", file=sys.stderr)
        return 1
    except ValidationError as exc:  # a request checked against the service's schema before it is sent
        print("gpuplat: invalid request: " + "; ".join(validation_messages(exc)), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
