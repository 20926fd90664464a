"""Named connections in real runs: a local run reads them, a Job on the emulator gets them, no value leaks.

The local run is a real process started by the real server; it prints hashes of what it
reads (proof without the value). Afterwards every API answer it had, the store's bytes
and the server's own log lines are searched for the secret values.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import EXAMPLE

HF = "hf-s3cr3t-value-5b1e"
AWS = "aws-s3cr3t-value-77c2"
CERT = "-----cert-s3cr3t-value-0d9a-----"
SECRETS = (HF, AWS, CERT)
PROBE = r"""
import hashlib, os, pathlib
h = lambda s: hashlib.sha256(s.encode()).hexdigest()[:16]
d = pathlib.Path(os.environ["GPUPLAT_CONNECTION_DATASETS"])
print("data:", (d / "hello.txt").read_text().strip())
print("hf:", h(os.environ["HF_TOKEN"]))
print("aws:", h(os.environ["AWS_SECRET_ACCESS_KEY"]), os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_ENDPOINT_URL"])
c = pathlib.Path(os.environ["GPUPLAT_CONNECTION_CERTS"])
print("cert:", h((c / "ca.pem").read_text()), oct(os.stat(c / "ca.pem").st_mode & 0o777), "dir:", c)
print("repo:", os.environ["GPUPLAT_CONNECTION_REPO"])
"""


def h(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()[:16]


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "hello.txt").write_text("hello from the volume\n")
    (tmp_path / "hf.env").write_text(f"# the HF Secret\ntoken={HF}\n")
    (tmp_path / "s3.env").write_text(f"AWS_ACCESS_KEY_ID=AKIAPUBLICID\nAWS_SECRET_ACCESS_KEY={AWS}\n")
    (tmp_path / "certs.env").write_text(f"ca.pem={CERT}\n")
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["connections"] = [
        {"name": "datasets", "kind": "volume", "claim": "datasets", "host_path": str(tmp_path / "datasets"),
         "mount_path": "/data", "projects": ["team-a"]},
        {"name": "hf-token", "kind": "secret", "secret": "hf-token", "env": {"HF_TOKEN": "token"},
         "local_file": str(tmp_path / "hf.env"), "projects": ["team-a"]},
        {"name": "s3", "kind": "bucket", "endpoint": "https://s3.example.com", "bucket": "a-data",
         "secret": "s3-creds", "local_file": str(tmp_path / "s3.env"), "projects": ["team-a"]},
        {"name": "certs", "kind": "secret", "secret": "certs", "expose": "files", "mount_path": "/var/run/certs",
         "local_file": str(tmp_path / "certs.env"), "projects": ["team-a"]},
        {"name": "repo", "kind": "git", "url": "https://git.example.com/team/repo.git"},
    ]  # fmt: skip
    cfg["presets"].append({"name": "with-data", "connections": ["datasets", "hf-token", "s3", "certs", "repo"]})
    for pr in cfg["projects"]:
        pr["allowed_presets"].append("with-data")
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def test_a_local_run_reads_its_connections_and_no_value_leaks(
    api: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers: list[Any] = []

    async def ok(method: str, path: str, user: str = "alice", body: Any = None, **params: Any) -> Any:
        got = await api.ok(method, path, user, body, **params)
        answers.append(got)
        return got

    body = {"project": "team-a", "presets": ["with-data"], "command": [sys.executable, "-c", PROBE], "name": "probe"}
    preview = await ok("POST", "runs/preview", body=body)
    assert preview["verdict"]["allowed"] is True, preview
    run = await ok("POST", "runs", body=body)
    done = await api.wait_status(run["id"], "succeeded", "failed")
    answers.append(done)
    log = await ok("GET", f"runs/{run['id']}/logs", format="text")
    text = log.decode()
    assert done["status"] == "succeeded", text
    assert "data: hello from the volume" in text
    assert f"hf: {h(HF)}" in text
    assert f"aws: {h(AWS)} AKIAPUBLICID https://s3.example.com" in text
    assert f"cert: {h(CERT)} 0o600" in text
    assert "repo: https://git.example.com/team/repo.git" in text
    # the secret files' directory is outside the run's artifacts and gone once the run ended
    secret_dir = Path(text.split("dir: ", 1)[1].split()[0])
    assert not secret_dir.exists() and not secret_dir.parent.exists()
    assert not str(secret_dir).startswith(str(tmp_path / "artifacts"))
    detail = await ok("GET", f"runs/{run['id']}")
    assert detail["resolved"]["connections"] == ["datasets", "hf-token", "s3", "certs", "repo"]
    assert {c["name"] for c in detail["resolved"]["connection_refs"]} == set(detail["resolved"]["connections"])
    await ok("GET", "runs")
    await ok("GET", f"runs/{run['id']}/explain")
    await ok("GET", f"runs/{run['id']}/outputs")
    await ok("GET", "presets", project="team-a")
    await ok("GET", "config", user="ops")
    await ok("GET", "runs", user="ops")
    await ok("GET", f"runs/{run['id']}", user="ops")

    # team-b may use the preset, not its connections: refused, naming them and what it may use
    code, refused = await api("POST", "runs", "dave", {**body, "project": "team-b"})
    answers.append(refused)
    assert code == 403, refused
    err = refused["error"]
    assert (err["code"], err["hint"]) == ("ConnectionNotAllowed", "allowed connections: repo")
    # every refusing rule named (one per connection), the first first
    assert err["message"].startswith("connection 'datasets' is not allowed in project team-b")
    assert [r["message"] for r in err["rules"]] == [
        f"connection {c!r} is not allowed in project team-b" for c in ("datasets", "hf-token", "s3", "certs")
    ]
    code, unknown = await api("POST", "runs/preview", "dave", {**body, "project": "team-b", "presets": [],
                                                                 "connections": ["nope"]})  # fmt: skip
    answers.append(unknown)
    assert code == 200 and unknown["verdict"]["allowed"] is False
    assert unknown["verdict"]["violations"][0]["code"] == "UnknownConnection"

    dumped = json.dumps(answers, default=lambda b: b.decode(errors="replace"))
    store = Path(str(tmp_path / "gpuplat.db")).read_bytes()
    wal = tmp_path / "gpuplat.db-wal"
    store += wal.read_bytes() if wal.exists() else b""
    artifacts = b"".join(p.read_bytes() for p in (tmp_path / "artifacts").rglob("*") if p.is_file())
    # what is searched holds the run (its record, its log): a search of nothing would pass too
    assert b"connection_refs" in store and b"hello from the volume" in artifacts and "probe" in caplog.text + dumped
    for secret in SECRETS:
        assert secret not in dumped
        assert secret.encode() not in store
        assert secret.encode() not in artifacts
        assert secret not in caplog.text
