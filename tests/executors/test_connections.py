"""Named connections: config validation, policy, and the Job a run with connections becomes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.errors import ConfigErrors
from jupyter_gpuplat.core.policy import resolve
from jupyter_gpuplat.core.request import Entrypoint, RunRequest
from jupyter_gpuplat.executors.base import ExecutorError, LaunchRequest
from jupyter_gpuplat.executors.kubernetes.connections import volume_name
from jupyter_gpuplat.executors.kubernetes.manifests import JobSettings, make_job
from jupyter_gpuplat.executors.local.connections import check_local, connection_env, remove_run_secrets

CONNECTIONS = [
    {"name": "datasets", "kind": "volume", "claim": "datasets", "host_path": "/srv/datasets", "mount_path": "/data",
     "read_only": True, "projects": ["team-a"]},
    {"name": "hf-token", "kind": "secret", "secret": "hf-token", "env": {"HF_TOKEN": "token"},
     "local_file": "/etc/gpuplat/hf.env", "projects": ["team-a"]},
    {"name": "s3", "kind": "bucket", "endpoint": "https://s3.example.com", "bucket": "team-a-data",
     "region": "eu-west-1", "secret": "s3-creds", "projects": ["team-a"]},
    {"name": "repo", "kind": "git", "url": "https://git.example.com/team/repo.git", "ref": "main"},
    {"name": "certs", "kind": "secret", "secret": "certs", "expose": "files", "mount_path": "/var/run/certs",
     "projects": []},
]  # fmt: skip


def config(**extra: Any) -> dict[str, Any]:
    return {
        "admins": ["ops"],
        "queues": [{"name": "q"}],
        "presets": [{"name": "data", "connections": ["datasets", "hf-token"]}],
        "projects": [
            {"name": "team-a", "members": {"alice": "member"}, "default_queue": "q"},
            {"name": "team-b", "members": {"bob": "member"}, "default_queue": "q"},
        ],
        "connections": CONNECTIONS,
        **extra,
    }


def errors_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigErrors) as exc:
        parse_config(data)
    return exc.value.errors


def test_config_errors_are_named_by_path() -> None:
    bad = [
        {"name": "v", "kind": "volume", "mount_path": "/d"},
        {"name": "s", "kind": "secret", "secret": "x"},
        {"name": "b", "kind": "bucket"},
        {"name": "g", "kind": "git", "url": "u", "projects": ["nope"]},
        {"name": "f", "kind": "nfs"},
        {"name": "v2", "kind": "volume", "claim": "c", "mount_path": "data"},
        {"name": "e", "kind": "secret", "secret": "x", "env": {"1BAD": "k"}},
        {"name": "g", "kind": "git", "url": "u", "token": "inline-value"},
    ]
    data = config(connections=bad, presets=[{"name": "p", "connections": ["missing"]}])
    errs = errors_of(data)
    assert "connections[0]: a volume connection needs claim (Kubernetes) and/or host_path (local)" in errs
    assert "connections[1]: a secret exposed as env needs env (VAR: key in the Secret)" in errs
    assert "connections[2]: a bucket connection needs endpoint" in errs
    assert any(e.startswith("connections[4].kind: must be one of") for e in errs)
    assert "connections[5]: 'data' must be an absolute path" in errs
    assert "connections[6]: env: '1BAD' is not an environment variable name" in errs
    # a secret value inline is not a field: the config holds references only
    assert "connections[7].token: unknown field" in errs
    errs = errors_of(config(connections=[bad[3], bad[3]], presets=[{"name": "p", "connections": ["missing"]}]))
    assert errs == [
        "connections[1].name: duplicate name 'g'",
        "connections[0].projects[0]: unknown project 'nope' (known: team-a, team-b)",
        "connections[1].projects[0]: unknown project 'nope' (known: team-a, team-b)",
        "presets[0].connections[0]: unknown connection 'missing' (known: g)",
    ]


def test_policy_allows_refuses_and_keeps_references_only() -> None:
    cfg = parse_config(config())
    ok = resolve(cfg, "alice", RunRequest(project="team-a", command=["true"], presets=["data"]))
    assert ok.violations == ()
    assert ok.resolved["connections"] == ["datasets", "hf-token"]
    assert ok.provenance["connections"] == "preset:data"
    assert ok.resolved["connection_refs"] == [
        {"name": "datasets", "kind": "volume", "claim": "datasets", "host_path": "/srv/datasets",
         "mount_path": "/data", "read_only": True},
        {"name": "hf-token", "kind": "secret", "secret": "hf-token", "env": {"HF_TOKEN": "token"},
         "local_file": "/etc/gpuplat/hf.env"},
    ]  # fmt: skip
    # the run's own list replaces the preset's (a plain list, like every list field without keys)
    run = resolve(cfg, "alice", RunRequest(project="team-a", command=["true"], presets=["data"], connections=["repo"]))
    assert run.resolved["connections"] == ["repo"] and run.provenance["connections"] == "run"
    # team-b may use the preset but not its connections; 'repo' (no projects list) is everyone's
    refused = resolve(cfg, "bob", RunRequest(project="team-b", command=["true"], presets=["data"]))
    assert [v.to_dict() for v in refused.violations] == [
        {"code": "ConnectionNotAllowed", "message": "connection 'datasets' is not allowed in project team-b",
         "hint": "allowed connections: repo"},
        {"code": "ConnectionNotAllowed", "message": "connection 'hf-token' is not allowed in project team-b",
         "hint": "allowed connections: repo"},
    ]  # fmt: skip
    assert refused.violations[0].status == 403
    unknown = resolve(cfg, "bob", RunRequest(project="team-b", command=["true"], connections=["nope"]))
    [v] = unknown.violations
    assert (v.status, v.code, v.message, v.hint) == (
        422,
        "UnknownConnection",
        "unknown connection 'nope'",
        "connections project team-b may use: repo",
    )
    # projects: [] is nobody's; restrict_by_default makes an omitted list nobody's too
    certs = resolve(cfg, "alice", RunRequest(project="team-a", command=["true"], connections=["certs"]))
    assert certs.violations[0].code == "ConnectionNotAllowed"
    data = config(restrict_by_default=True, presets=[])
    for pr in data["projects"]:
        pr["allowed_queues"] = ["q"]
    strict = parse_config(data)
    repo = resolve(strict, "bob", RunRequest(project="team-b", command=["true"], connections=["repo"]))
    assert repo.violations[0].hint == "allowed connections: none"


def test_a_job_mounts_and_injects_by_reference_only() -> None:
    cfg = parse_config(config())
    res = resolve(cfg, "alice", RunRequest(
        project="team-a", command=["python", "train.py"], connections=["datasets", "hf-token", "s3", "repo"]
    ))  # fmt: skip
    certs = next(c for c in cfg.connections if c.name == "certs").reference()
    spec = {**res.resolved, "connection_refs": [*res.resolved["connection_refs"], certs]}
    req = LaunchRequest(
        run_id="r-conn", entrypoint=Entrypoint("command", argv=("python", "train.py")), env={"HF_TOKEN": "spec's"},
        devices=(), workdir="/srv/a/r-conn", spec=spec, project="team-a", user="alice",
    )  # fmt: skip
    job = make_job(req, JobSettings(artifacts_claim="gpuplat-artifacts", artifacts_mount_path="/srv/a"))
    for v in ("1.27.0", "1.34.0"):
        kubernetes_validate.validate(job, v, strict=True)
    pod = job["spec"]["template"]["spec"]
    [c] = pod["containers"]
    assert pod["volumes"][1:] == [
        {"name": volume_name("datasets"), "persistentVolumeClaim": {"claimName": "datasets"}},
        {"name": volume_name("certs"), "secret": {"secretName": "certs", "defaultMode": 0o400}},
    ]
    assert c["volumeMounts"][2:] == [  # after the run's own directory and its read-only code/ (issue 21)
        {"name": volume_name("datasets"), "mountPath": "/data", "readOnly": True},
        {"name": volume_name("certs"), "mountPath": "/var/run/certs", "readOnly": True},
    ]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}  # the connection's wins
    assert [e["name"] for e in c["env"]].count("HF_TOKEN") == 1
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "s3-creds", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3-creds", "key": "AWS_SECRET_ACCESS_KEY"}}
    assert env["AWS_ENDPOINT_URL"] == "https://s3.example.com"
    assert env["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert env["GPUPLAT_CONNECTION_DATASETS"] == "/data"
    assert env["GPUPLAT_CONNECTION_S3"] == "s3://team-a-data"
    assert env["GPUPLAT_CONNECTION_REPO"] == "https://git.example.com/team/repo.git"
    assert env["GPUPLAT_CONNECTION_REPO_REF"] == "main"
    assert env["GPUPLAT_CONNECTION_CERTS"] == "/var/run/certs"
    assert len({v["name"] for v in pod["volumes"]}) == len(pod["volumes"])


def local_request(tmp_path: Path, *refs: dict[str, Any]) -> LaunchRequest:
    return LaunchRequest(
        run_id="r-local-conn", entrypoint=Entrypoint("command", argv=("true",)), env={}, devices=(),
        workdir=str(tmp_path / "r-local-conn"), spec={"connection_refs": list(refs)},
    )  # fmt: skip


def test_local_secret_files_are_private_and_removed_and_errors_name_no_value(tmp_path: Path) -> None:
    (tmp_path / "certs.env").write_text("ca.pem=VALUE-1\n# a comment\n\nclient.key = VALUE-2\n")
    files = {"name": "certs", "kind": "secret", "secret": "certs", "expose": "files", "mount_path": "/c",
             "local_file": str(tmp_path / "certs.env")}  # fmt: skip
    env, secret_dir = connection_env(local_request(tmp_path, files))
    assert secret_dir is not None and not secret_dir.startswith(str(tmp_path))
    d = Path(env["GPUPLAT_CONNECTION_CERTS"])
    assert {p.name: p.read_text() for p in d.iterdir()} == {"ca.pem": "VALUE-1", "client.key": "VALUE-2"}
    assert {oct(p.stat().st_mode & 0o777) for p in d.iterdir()} == {"0o600"}
    assert oct(d.stat().st_mode & 0o777) == "0o700"
    remove_run_secrets("r-local-conn")
    assert not Path(secret_dir).exists()

    (tmp_path / "bad.env").write_text("token=SHOWN-NOWHERE\nSHOWN-NOWHERE-EITHER\n")
    bad = {"name": "hf", "kind": "secret", "secret": "hf", "env": {"HF_TOKEN": "token"},
           "local_file": str(tmp_path / "bad.env")}  # fmt: skip
    with pytest.raises(ExecutorError) as exc:
        connection_env(local_request(tmp_path, bad))
    assert str(exc.value) == (
        f"run r-local-conn: connection hf: cannot read {tmp_path}/bad.env: line 2: not a KEY=VALUE line"
    )
    (tmp_path / "bad.env").write_text("other=SHOWN-NOWHERE\n")
    with pytest.raises(ExecutorError, match=r"connection hf: key 'token' is not in .*bad\.env$") as exc:
        connection_env(local_request(tmp_path, bad))
    assert "SHOWN-NOWHERE" not in str(exc.value)
    with pytest.raises(ExecutorError, match="connection hf needs Secret 'hf' and has no local_file"):
        connection_env(local_request(tmp_path, {**bad, "local_file": None}))
    # a failure after the files were written removes them
    with pytest.raises(ExecutorError):
        connection_env(local_request(tmp_path, files, bad))
    assert not list(Path(tempfile.gettempdir()).glob("gpuplat-secrets-r-local-conn-*"))


def test_local_check_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "s3.env").write_text("AWS_ACCESS_KEY_ID=x\n")
    conns = [
        {"name": "data", "kind": "volume", "host_path": str(tmp_path), "mount_path": "/d"},
        {"name": "gone", "kind": "volume", "host_path": str(tmp_path / "gone"), "mount_path": "/d"},
        {"name": "s3", "kind": "bucket", "endpoint": "e", "secret": "s", "local_file": str(tmp_path / "s3.env")},
        {"name": "hf", "kind": "secret", "secret": "hf", "env": {"HF_TOKEN": "token"}},
    ]
    assert check_local(conns) == [
        ("data", True, f"connection data: {tmp_path} is a directory"),
        ("gone", False, f"connection gone: {tmp_path}/gone is not a directory"),
        ("s3", False, f"connection s3: {tmp_path}/s3.env has no key(s) AWS_SECRET_ACCESS_KEY"),
        ("hf", False, "connection hf: no local_file to read Secret 'hf' from"),
    ]
