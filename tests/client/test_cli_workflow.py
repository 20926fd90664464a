"""The CLI as the magics behave, against a real server: the default project, --json before or after
the subcommand, --param, tables at 80 columns, and a run submitted again (CLI and client)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from jupyter_gpuplat.client import Client, GpuPlatAPIError

from ..server import ServerProcess, cells_of

PRINT_PARAMS = "import os; print('params', os.environ.get('GPUPLAT_PARAMS'), flush=True)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("cli-workflow"))
    srv.start()
    yield srv
    srv.stop()


def gp(
    server: ServerProcess, *args: str, user: str | None = None, check: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """`gpuplat` as `user` (default: the server's owner, found through Jupyter's runtime files)."""
    who = ["--url", server.url, "--token", f"tok-{user}"] if user else []
    environ = {k: v for k, v in server.env.items() if k not in ("COLUMNS", "GPUPLAT_PROJECT")} | env
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter_gpuplat.cli", *who, *args],
        env=environ,
        cwd=server.root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def client(server: ServerProcess, user: str) -> Client:
    return Client(server.url, f"tok-{user}")


def test_submit_without_a_project_uses_the_magics_default(server: ServerProcess) -> None:
    # The magics call Client.default_project(): the CLI must land where they do, for every user.
    for user, expected in (("alice", "team-a"), ("erin", "team-b")):
        assert client(server, user).default_project() == expected
        run = json.loads(gp(server, "submit", "--json", "--", "true", user=user).stdout)
        assert run["project"] == expected
    assert json.loads(gp(server, "--json", "submit", "--", "true").stdout)["project"] == "team-a"  # alice
    # GPUPLAT_PROJECT wins, as in the magics (bob is no member of team-b: the service refuses it by name).
    bob = gp(server, "submit", "--", "true", user="bob", GPUPLAT_PROJECT="team-b", check=False)
    assert bob.returncode == 1 and "team-b" in bob.stderr
    # A viewer-only user has no default: the message says why and what to do.
    frank = gp(server, "submit", "--", "true", user="frank", check=False)
    assert frank.returncode == 1 and "frank may submit to no project" in frank.stderr


def test_json_goes_before_or_after_the_subcommand(server: ServerProcess) -> None:
    after = json.loads(gp(server, "submit", "-n", "where", "--json", "--", "true").stdout)
    before = json.loads(gp(server, "--json", "submit", "-n", "where", "--", "true").stdout)
    assert after["name"] == before["name"] == "where" and after["id"] != before["id"]
    for argv in (["runs", "list", "--limit", "5"], ["queues"], ["presets"], ["runs", "show", after["id"]]):
        a = json.loads(gp(server, *argv, "--json").stdout)
        b = json.loads(gp(server, "--json", *argv).stdout)
        assert a.keys() == b.keys(), argv
    # --url and --token after the subcommand too (erin sees team-b only).
    client(server, "erin").submit("team-b", "true")
    runs = json.loads(gp(server, "runs", "list", "--url", server.url, "--token", "tok-erin", "--json").stdout)["runs"]
    assert runs and {r["project"] for r in runs} == {"team-b"}
    # After the command's first word the words are the command's: --json there is an argument of it.
    echoed = gp(server, "submit", "-f", "--", "echo", "--json")
    assert echoed.stdout.splitlines()[1:] == ["--json"]


def test_param_reaches_the_run_as_the_magics_send_it(server: ServerProcess) -> None:
    out = gp(
        server, "submit", "--param", "lr=0.1", "--param", "epochs=3", "--param", "tag=v1", "-f",
        "--", sys.executable, "-c", PRINT_PARAMS,
    )  # fmt: skip
    first, printed = out.stdout.splitlines()
    run = client(server, "alice").get(first.split()[0])
    assert run["request"]["params"] == {"lr": 0.1, "epochs": 3, "tag": "v1"}
    assert json.loads(printed.removeprefix("params ")) == {"lr": 0.1, "epochs": 3, "tag": "v1"}


def test_queues_and_presets_fit_80_columns_and_keep_every_word(server: ServerProcess) -> None:
    server.ok("POST", "queues/team-b-train/pause", "ops")
    erin = client(server, "erin")
    holding = erin.submit("team-b", "sleep 60", queue="interactive", gpus=1)
    try:
        paused = json.loads(gp(server, "submit", "-p", "team-b", "--json", "--", "true", user="erin").stdout)
        erin.wait(holding["id"], timeout=30, statuses=("running",))
        erin.submit("team-b", "true", queue="interactive", gpus=1)  # over max_per_user 1
        data = json.loads(gp(server, "queues", "--json", user="erin").stdout)
        text = gp(server, "queues", user="erin", COLUMNS="80").stdout
        assert max(len(line) for line in text.splitlines()) <= 80
        queues, _, pending = text.partition("\n\n")
        rows = {r[0]: r for r in cells_of(queues, 7)}
        assert rows["QUEUE"][6] == "HEAD WAITS FOR"
        for q in data["queues"]:
            wait = (q["head_wait"] or {}).get("message", "")
            assert rows[q["name"]][6] == wait  # whole, across its wrapped lines
        waits = [(q["head_wait"] or {}).get("message", "") for q in data["queues"]]
        assert "queue team-b-train is paused" in waits and max(len(w) for w in waits) > 40
        assert len(queues.splitlines()) > len(data["queues"]) + 1  # the long ones wrapped
        # Under the table: your pending runs, in order, with the queue's ordering and per-user limit.
        assert "pending in team-b-train (strict_fifo, max_per_user 1):" in pending
        table = pending[pending.index("pending in team-b-train") :].split("\n\n")[0].partition("\n")[2]
        (_, row) = cells_of(table, 6)
        assert row[:5] == ["1", paused["id"], "true", "team-b", "erin"], pending  # named as it runs
        assert row[5] == "unknown: queue team-b-train is paused", pending  # its start estimate (none: paused)
        # Without a terminal and without $COLUMNS (a pipe): one line per row, for grep.
        piped = gp(server, "queues", user="erin").stdout.partition("\n\n")[0]
        assert len(piped.splitlines()) == len(data["queues"]) + 1
    finally:
        server.ok("POST", "queues/team-b-train/resume", "ops")
        erin.stop(holding["id"])
    presets = gp(server, "presets", "--project", "team-a", COLUMNS="80").stdout
    assert max(len(line) for line in presets.splitlines()) <= 80
    by_name = {r[0]: r for r in cells_of(presets, 5)}
    assert by_name["multi-gpu"][3] == "2 gpu, 8 cpu, 64Gi memory"
    assert by_name["single-gpu"][3] == "1 gpu, 4 cpu, 16Gi memory"
    assert "{" not in presets


def test_runs_list_fits_80_columns_with_messages_under_the_rows(server: ServerProcess) -> None:
    gp(server, "submit", "-n", "a name long enough to wrap in a narrow column", "-f", "--", "true")
    data = json.loads(gp(server, "runs", "list", "--limit", "5", "--json").stdout)["runs"]
    text = gp(server, "runs", "list", "--limit", "5", COLUMNS="80").stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split()[:3] == ["ID", "NAME", "PROJECT"] and lines[1] == "    MESSAGE"
    rows = cells_of(text, 10)
    assert [r[0] for r in rows[1:]] == [r["id"] for r in data]  # ids whole, in order
    assert rows[1][1] == data[0]["name"]
    assert [r[9] for r in rows[1:]] == [r["message"] for r in data]


# ---- resubmit ------------------------------------------------------------------------------------
def first_run(server: ServerProcess) -> dict[str, Any]:
    out = gp(
        server, "submit", "--preset", "single-gpu", "-n", "base", "--param", "lr=0.1", "--param", "epochs=2",
        "-f", "--", sys.executable, "-c", PRINT_PARAMS,
    )  # fmt: skip
    return client(server, "alice").get(out.stdout.split()[0])


def test_runs_resubmit_submits_the_same_request_with_the_edited_param(server: ServerProcess) -> None:
    base = first_run(server)
    out = gp(server, "runs", "resubmit", base["id"], "--param", "lr=0.03", "-f")
    head, printed = out.stdout.splitlines()
    new = client(server, "alice").get(head.split()[0])
    assert new["id"] != base["id"] and new["status"] == "succeeded"
    assert new["request"]["presets"] == base["request"]["presets"] == ["single-gpu"]
    assert new["request"]["command"] == base["request"]["command"]
    assert new["request"]["params"] == {"lr": 0.03, "epochs": 2}
    assert json.loads(printed.removeprefix("params ")) == {"lr": 0.03, "epochs": 2}
    assert new["name"] == "base" and new["project"] == base["project"] and new["queue"] == base["queue"]
    assert new["resolved"]["resources"] == base["resolved"]["resources"]  # the preset applied again
    # Edits: a new name, other presets; --preview shows the verdict and submits nothing.
    renamed = json.loads(gp(server, "runs", "resubmit", base["id"], "-n", "again", "--json").stdout)
    assert renamed["name"] == "again"
    before = len(client(server, "alice").list(limit=200))
    preview = gp(server, "runs", "resubmit", base["id"], "--preset", "multi-gpu", "--preview").stdout
    assert ["resources.gpu", "2", "preset:multi-gpu"] in [line.split() for line in preview.splitlines()]
    assert "verdict: allowed" in preview
    assert len(client(server, "alice").list(limit=200)) == before
    # The policy applies again: a queue the project may not use is refused, with what is allowed.
    refused = gp(server, "runs", "resubmit", base["id"], "--queue", "team-b-train", check=False)
    assert refused.returncode == 1 and "allowed queues: team-a-train, interactive" in refused.stderr


def test_client_resubmit_edits_params_and_keeps_the_rest(server: ServerProcess) -> None:
    base = first_run(server)
    c = client(server, "alice")
    new = c.resubmit(base["id"], params={"lr": 0.5}, name="from the client")
    done = c.wait(new["id"], timeout=60)
    assert done["status"] == "succeeded" and done["name"] == "from the client"
    assert done["request"]["params"] == {"lr": 0.5, "epochs": 2}
    assert done["request"]["presets"] == ["single-gpu"] and done["request"]["command"] == base["request"]["command"]
    assert c.resubmit_body(base["id"], gpus=2)["resources"] == {"gpu": 2}


def test_resubmit_of_a_run_the_caller_may_not_see_is_a_clear_404(server: ServerProcess) -> None:
    base = first_run(server)  # alice's, in team-a
    with pytest.raises(GpuPlatAPIError) as err:
        client(server, "erin").resubmit(base["id"], params={"lr": 1})
    assert err.value.status == 404 and base["id"] in err.value.message
    out = gp(server, "runs", "resubmit", base["id"], user="erin", check=False)
    assert out.returncode == 1 and base["id"] in out.stderr and "Traceback" not in out.stderr
    missing = gp(server, "runs", "resubmit", "r-doesnotexist", check=False)
    assert missing.returncode == 1 and "r-doesnotexist" in missing.stderr
    # And nothing was submitted for erin.
    assert all(r["name"] != "base" for r in client(server, "erin").list(limit=200))
