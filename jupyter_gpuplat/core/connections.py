"""Named connections: volumes, Secrets, buckets and git repositories a run may use.

Platform admins define them once (`connections:` in the platform config); presets and
runs name them. A connection holds *references* only (a claim name, a Secret name and
its keys, a file path on the control-plane host): secret values are never in the config,
never in the resolved spec, and are read only by the executor at launch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .spec import NAME_PATTERN, Text

ConnectionKind = Literal["volume", "secret", "bucket", "git"]
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# The bucket's credentials: env var -> the Secret's key, unless `env` says otherwise.
BUCKET_KEYS = {"AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY"}


class ConnectionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    kind: ConnectionKind
    description: str = ""
    # Projects that may use it; omitted: every project (none with restrict_by_default).
    projects: list[str] | None = None
    # volume: a PersistentVolumeClaim on Kubernetes, a host directory locally.
    claim: Text | None = Field(default=None, max_length=253)
    host_path: Text | None = Field(default=None, max_length=4096)
    # volume (where it is mounted), secret with expose=files (the directory of its keys).
    mount_path: Text | None = Field(default=None, max_length=4096)
    read_only: bool = False
    # secret, bucket, git: the Kubernetes Secret holding the values, and the env vars taken from it.
    secret: Text | None = Field(default=None, max_length=253)
    env: dict[str, str] = Field(default_factory=dict)
    expose: Literal["env", "files"] = "env"
    # Locally: a file of KEY=VALUE lines (the Secret's keys) on the control-plane host.
    local_file: Text | None = Field(default=None, max_length=4096)
    # bucket
    endpoint: Text | None = Field(default=None, max_length=2048)
    bucket: Text | None = Field(default=None, max_length=255)
    region: Text | None = Field(default=None, max_length=64)
    # git
    url: Text | None = Field(default=None, max_length=2048)
    ref: Text | None = Field(default=None, max_length=255)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ConnectionConfig:
        need = {"volume": ("mount_path",), "secret": ("secret",), "bucket": ("endpoint",), "git": ("url",)}
        for f in need[self.kind]:
            if getattr(self, f) is None:
                raise ValueError(f"a {self.kind} connection needs {f}")
        if self.kind == "volume" and not (self.claim or self.host_path):
            raise ValueError("a volume connection needs claim (Kubernetes) and/or host_path (local)")
        if self.kind == "volume" and (self.secret or self.env):
            raise ValueError("a volume connection takes no secret or env")
        if self.env and not self.secret:
            raise ValueError("env names keys of a Secret: set secret too")
        if self.expose == "files" and (self.kind != "secret" or not self.mount_path):
            raise ValueError("expose: files is for secret connections, with mount_path")
        if self.kind == "secret" and self.expose == "env" and not self.env:
            raise ValueError("a secret exposed as env needs env (VAR: key in the Secret)")
        for var in self.env:
            if not re.match(ENV_NAME, var):
                raise ValueError(f"env: {var!r} is not an environment variable name")
        for p in (self.mount_path, self.host_path, self.local_file):
            if p is not None and not p.startswith("/"):
                raise ValueError(f"{p!r} must be an absolute path")
        return self

    def secret_env(self) -> dict[str, str]:
        """Env var -> key in the Secret (values come from the cluster or the local file)."""
        if not self.secret:
            return {}
        if self.kind == "bucket" and not self.env:
            return dict(BUCKET_KEYS)
        return dict(self.env) if self.expose == "env" else {}

    def reference(self) -> dict[str, Any]:
        """What a run's resolved spec keeps: references, never values, no project list."""
        return self.model_dump(mode="json", exclude_defaults=True, exclude={"projects", "description"})


def env_var(name: str) -> str:
    """GPUPLAT_CONNECTION_<NAME>: where a run finds the connection (path, URL)."""
    return "GPUPLAT_CONNECTION_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def allowed_connections(conns: Sequence[ConnectionConfig], project: str, restrict_by_default: bool) -> list[str]:
    return [c.name for c in conns if (project in c.projects if c.projects is not None else not restrict_by_default)]


def plain_env(c: Mapping[str, Any], local: bool) -> dict[str, str]:
    """The env a connection ref sets that holds no secret: where it is, which bucket, which repo."""
    kind, var = c["kind"], env_var(c["name"])
    out: dict[str, str] = {}
    if kind == "volume":
        out[var] = (c.get("host_path") or c["mount_path"]) if local else c["mount_path"]
    elif kind == "secret" and c.get("expose") == "files":
        out[var] = c["mount_path"]
    elif kind == "bucket":
        out["AWS_ENDPOINT_URL"] = c["endpoint"]
        out[var] = f"s3://{c['bucket']}" if c.get("bucket") else c["endpoint"]
        if c.get("region"):
            out["AWS_DEFAULT_REGION"] = c["region"]
    elif kind == "git":
        out[var] = c["url"]
        if c.get("ref"):
            out[var + "_REF"] = c["ref"]
    return out


def read_local_file(path: str) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and # comments skipped); raises OSError/ValueError."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                # the line may be a value: say where, never what
                raise ValueError(f"line {n}: not a KEY=VALUE line")
            values[key.strip()] = value.strip()
    return values
