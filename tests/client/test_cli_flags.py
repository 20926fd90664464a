"""The CLI's parser and printing, without a server: help for every flag, "did you mean", tables that
fit 80 columns, global flags before or after a command that has a parser of its own."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.cli.base import cli_words
from jupyter_gpuplat.cli.main import HANDED_OVER, build_parser
from jupyter_gpuplat.cli.sweeps import sweep_lines
from jupyter_gpuplat.cli.tables import resources_text, table
from jupyter_gpuplat.client.runedits import parse_params, resubmit_body
from jupyter_gpuplat.client.sweeping import params_text as sweep_params_text

from ..server import cells_of

ROOT = Path(__file__).resolve().parents[2]
# Nothing listens here: each case below must be decided before any request.
NOWHERE = "http://127.0.0.1:9/"


def cli(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GPUPLAT_URL", "GPUPLAT_TOKEN")}
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "jupyter_gpuplat.cli", *args], capture_output=True, text=True, env=env, timeout=60
    )


def parsers(p: argparse.ArgumentParser, path: str = "gpuplat") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


def test_every_flag_and_argument_of_every_subcommand_has_help() -> None:
    seen, missing = 0, []
    for path, p in parsers(build_parser()):
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            seen += 1
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 80 and missing == []


def test_submit_flags_are_explained_in_its_help() -> None:
    out = cli("submit", "--help").stdout
    for words in ("--param KEY=VALUE", "tracking.params()", "--project PROJECT", "GPUPLAT_PROJECT", "--json"):
        assert words in out, words


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["submit", "--parm", "lr=1", "--", "true"], "unrecognized argument --parm; did you mean --param?"),
        (["submit", "--prest", "single-gpu", "--", "true"], "unrecognized argument --prest; did you mean --preset?"),
        (["--jsno", "queues"], "unrecognized argument --jsno; did you mean --json?"),
        (["runs", "list", "--limt", "3"], "unrecognized argument --limt; did you mean --limit?"),
        (["subimt", "--", "true"], "invalid choice: 'subimt'; did you mean 'submit'?"),
        (["runs", "lsit"], "invalid choice: 'lsit'; did you mean 'list'?"),
        (["sweep", "list"], "invalid choice: 'sweep'; did you mean 'sweeps'?"),
        # The commands with their own parsers (report, whatif, rollout-check, import) suggest too.
        (["report", "--sinse", "7d"], "unrecognized argument --sinse; did you mean --since?"),
        (["whatif", "--sinse", "3d"], "unrecognized argument --sinse; did you mean --since?"),
        (["rollout-check", "--all", "--projct", "a"], "unrecognized argument --projct; did you mean --project?"),
        (["import", "polyaxon", "--outt", "x.yaml", "f.yaml"], "unrecognized argument --outt; did you mean --out?"),
    ],
)
def test_did_you_mean_for_unknown_flags_and_subcommands(argv: list[str], message: str) -> None:
    out = cli("--url", NOWHERE, *argv)
    assert out.returncode == 2, out
    assert message in out.stderr
    assert "cannot reach" not in out.stderr  # refused by the parser, before any request


def test_an_unknown_flag_with_nothing_near_gets_no_guess() -> None:
    out = cli("--url", NOWHERE, "queues", "--xyzzy")
    assert out.returncode == 2
    assert out.stderr.strip().endswith("error: unrecognized argument --xyzzy")


def test_resubmit_options_are_refused_with_other_run_actions() -> None:
    out = cli("--url", NOWHERE, "runs", "list", "--param", "lr=1")
    assert out.returncode == 1
    assert "--param goes with gpuplat runs resubmit ID, not runs list" in out.stderr


def test_a_malformed_param_is_refused_before_any_request() -> None:
    out = cli("--url", NOWHERE, "submit", "-p", "team-a", "--param", "lr", "--", "true")
    assert out.returncode == 1
    assert "--param expects key=value, got 'lr'" in out.stderr


def test_params_are_read_as_the_magics_read_them() -> None:
    assert parse_params(["lr=0.1", "epochs=3", "amp=true", "tag=v1", "note=a=b"]) == {
        "lr": 0.1,
        "epochs": 3,
        "amp": True,
        "tag": "v1",
        "note": "a=b",
    }
    with pytest.raises(ValueError, match="key=value"):
        parse_params(["=1"])


def test_handed_over_commands_take_the_global_flags_before_or_after() -> None:
    preset = str(ROOT / "tests" / "fixtures" / "polyaxon" / "preset-two-gpus-shared-queue.yaml")
    before = cli("--json", "import", "polyaxon", preset)
    after = cli("import", "polyaxon", preset, "--json")
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert json.loads(after.stdout)["presets"][0]["queue"] == "shared-gpus"
    plain = cli("import", "polyaxon", preset)
    assert plain.stdout.startswith("presets:")  # YAML without --json
    # The ones that talk to no Jupyter server say so instead of failing inside their own parser.
    db = cli("--json", "db", "upgrade")
    assert db.returncode == 2 and "gpuplat db does not talk to a Jupyter server" in db.stderr
    assert set(HANDED_OVER) == {"server", "db", "report", "whatif", "rollout-check", "import"}


def test_every_command_lives_in_the_cli_room_with_one_entry_point() -> None:
    """One protocol: a command with its own parser is a module of jupyter_gpuplat.cli with main(argv)."""
    for name, (module_name, _, _) in HANDED_OVER.items():
        assert module_name.startswith("jupyter_gpuplat.cli."), (name, module_name)
        assert callable(importlib.import_module(module_name).main), name
    server = cli("server", "--help")
    assert server.returncode == 0 and "--GpuPlatServer.db_url" in server.stdout


# ---- tables at 80 columns --------------------------------------------------------------------


QUEUE_HEADERS = ("QUEUE", "PRIORITY", "RUNS", "GPUS", "PENDING", "PAUSED", "HEAD WAITS FOR")
QUEUE_ROWS = [
    (
        "team-b-train",
        10,
        "0/2",
        "0/2",
        2,
        "yes",
        "queue team-b-train is paused by a platform admin: nothing is dispatched until it is resumed",
    ),
    ("interactive", 100, "1/4", "1/2", 1, "", "max_per_user 1: erin already has 1 run in interactive"),
    ("team-a-train", 10, "0/2", "0/2", 0, "", ""),
]


def test_a_table_wider_than_80_columns_wraps_its_cells_and_keeps_every_word() -> None:
    text = table(QUEUE_ROWS, QUEUE_HEADERS, width=80, tail=True)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert len(text.splitlines()) > len(QUEUE_ROWS) + 1  # it did wrap
    got = cells_of(text, len(QUEUE_HEADERS))
    assert got[0] == list(QUEUE_HEADERS) and "    HEAD" not in text  # room enough: a column, not a tail
    assert got[1:] == [[str(c) for c in row] for row in QUEUE_ROWS]  # nothing cut, nothing lost


def test_a_table_that_fits_is_one_line_per_row() -> None:
    text = table(QUEUE_ROWS, QUEUE_HEADERS, width=200, tail=True)
    assert len(text.splitlines()) == len(QUEUE_ROWS) + 1
    assert cells_of(text, len(QUEUE_HEADERS))[1:] == [[str(c) for c in row] for row in QUEUE_ROWS]


def test_too_many_columns_for_80_put_the_message_under_its_row() -> None:
    headers = ("ID", "NAME", "PROJECT", "USER", "QUEUE", "STATUS", "GPUS", "AGE", "MESSAGE")
    message = "waiting for dispatch in queue interactive: held up by r-714b8414e8 (2 GPUs of 2 in use)"
    rows = [
        ("r-000000000a", "train.ipynb · cell 3 lr=0.03", "team-a", "alice", "interactive", "queued", "1", "9s", message)
    ]
    text = table(rows, headers, width=80, tail=True)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[1] == "    MESSAGE"
    under = " ".join(line.strip() for line in lines if line.startswith("    ") and not line.startswith("     "))
    assert under == f"MESSAGE {message}"
    assert cells_of(text, len(headers)) == [list(headers), list(rows[0])]
    assert "r-714b8414e8" in text and "r-000000000a" in text  # ids are never broken


def test_presets_resources_read_as_words() -> None:
    assert resources_text({"gpu": 2, "cpu": "8", "memory": "32Gi"}) == "2 gpu, 8 cpu, 32Gi memory"
    assert resources_text({"memory": "8Gi", "gpu": 1}) == "1 gpu, 8Gi memory"
    assert resources_text({}) == "-"


# ---- resubmit: the request as it was sent, then the edits -----------------------------------
RUN: dict[str, Any] = {
    "id": "r-1",
    "request": {
        "project": "team-a",
        "name": "first",
        "presets": ["single-gpu"],
        "command": ["python", "train.py"],
        "params": {"lr": 0.1, "epochs": 3},
        "env": [{"name": "A", "value": "1"}],
        "working_dir": "/root/work",
    },
}


def test_resubmit_body_keeps_the_request_and_applies_edits() -> None:
    body = resubmit_body(RUN, {"params": {"lr": 0.03}, "name": "second", "gpus": 2, "env": {"B": "2"}})
    assert body == {
        "project": "team-a",
        "name": "second",
        "presets": ["single-gpu"],
        "command": ["python", "train.py"],
        "params": {"lr": 0.03, "epochs": 3},
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "working_dir": "/root/work",
        "resources": {"gpu": 2},
    }
    assert RUN["request"]["params"] == {"lr": 0.1, "epochs": 3}  # the record is not changed


def test_resubmit_body_replaces_what_to_run_and_drops_fields_given_as_none() -> None:
    body = resubmit_body(RUN, {"code": "print(1)", "presets": ["multi-gpu"], "params": {"epochs": None}})
    assert "command" not in body and body["code"] == "print(1)" and body["presets"] == ["multi-gpu"]
    assert body["params"] == {"lr": 0.1}
    assert "working_dir" not in resubmit_body(RUN, {"working_dir": None})


def test_resubmit_body_of_a_record_without_its_request_says_so() -> None:
    from jupyter_gpuplat.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="does not carry the request"):
        resubmit_body({"id": "r-2"}, {})


def test_resubmit_of_a_magic_run_names_its_new_params() -> None:
    name = "t.ipynb · cell 3 · lr=0.1, k=2"
    request = {"project": "team-a", "code": "1", "name": name, "params": {"lr": 0.1, "k": 2}}
    run: dict[str, Any] = {"id": "r-3", "request": request}
    assert resubmit_body(run, {"params": {"lr": 0.03}})["name"] == "t.ipynb · cell 3 · lr=0.03, k=2"
    assert resubmit_body(run, {"params": {"lr": 0.03}, "name": "mine"})["name"] == "mine"
    other = {"id": "r-4", "request": {**run["request"], "name": "base"}}  # a name of one's own stays
    assert resubmit_body(other, {"params": {"lr": 0.03}})["name"] == "base"


def test_config_validate_answers_json_with_the_flag_before_or_after() -> None:
    example = str(ROOT / "jupyter_gpuplat" / "platform.example.yaml")
    plain = cli("config", "validate", example)
    assert plain.stdout.strip() == f"{example}: valid (3 queues, 3 presets, 2 projects)"
    for argv in (["--json", "config", "validate", example], ["config", "validate", example, "--json"]):
        out = cli(*argv)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"file": example, "valid": True, "queues": 3, "presets": 3, "projects": 2}


def test_api_calls_in_hints_read_as_cli_commands() -> None:
    assert cli_words("list your runs with GET /gpuplat/api/runs") == "list your runs with gpuplat runs list"
    assert cli_words("see GET runs/{id}/explain; GET queues") == "see gpuplat runs explain ID; gpuplat queues"
    assert cli_words("list outputs with GET runs/{id}/outputs") == "list outputs with GET runs/{id}/outputs"


def test_sweeps_show_says_children_once_and_reads_numbers_as_people_do() -> None:
    sweep = {
        "id": "r-1",
        "status": "running",
        "children": {"total": 6, "by_status": {"succeeded": 4, "running": 2}},
        "matrix": {"kind": "grid", "params": {"lr": {}}, "objective": {"metric": "val_loss"}},
        "concurrency": 2,
        "best": {"id": "r-2", "params": {"lr": 0.30000000000000004}, "value": 0.12345678912},
    }
    lines = sweep_lines(sweep)
    assert "6 children: 2 running, 4 succeeded" in lines and not any("children: 6" in x for x in lines)
    assert "best r-2 val_loss=0.123457 (lr=0.3)" in lines
    assert sweep_params_text({"lr": 0.1 + 0.2, "k": 2, "tag": "v1"}) == "lr=0.3, k=2, tag=v1"
