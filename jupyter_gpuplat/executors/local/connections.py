"""A run's named connections on this machine: env vars, and a Secret's files in a private directory.

Values of Secrets come from each connection's `local_file` (KEY=VALUE lines on the
control-plane host) and go only into the run's process environment or into files (0600,
in a 0700 directory outside the run's artifacts, so no outputs listing serves them),
removed when the run ends. Errors name the connection and the key, never a value.
`check_local` verifies the backing paths and keys without starting a run.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.connections import BUCKET_KEYS, env_var, plain_env, read_local_file
from ..base import ExecutorError, LaunchRequest
from .users import Account


def _values(run_id: str, c: Mapping[str, Any]) -> dict[str, str]:
    path = c.get("local_file")
    if not path:
        raise ExecutorError(
            f"run {run_id}: connection {c['name']} needs Secret {c.get('secret')!r} and has no local_file "
            "to read it from on this machine"
        )
    try:
        return read_local_file(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExecutorError(f"run {run_id}: connection {c['name']}: cannot read {path}: {why}") from None


def _key(run_id: str, c: Mapping[str, Any], values: Mapping[str, str], key: str) -> str:
    if key not in values:
        raise ExecutorError(f"run {run_id}: connection {c['name']}: key {key!r} is not in {c.get('local_file')}")
    return values[key]


def connection_env(req: LaunchRequest, account: Account | None = None) -> tuple[dict[str, str], str | None]:
    """(env to add, a directory of secret files to remove when the run ends, or None).

    With an `account` (run_as = user) the run's secret files are that account's alone.
    """
    env: dict[str, str] = {}
    secret_dir: str | None = None
    try:
        for c in req.spec.get("connection_refs") or ():
            env.update(plain_env(c, local=True))
            if not c.get("secret"):
                continue
            values = _values(req.run_id, c)
            if c.get("expose") == "files":
                if secret_dir is None:
                    secret_dir = tempfile.mkdtemp(prefix=_prefix(req.run_id))
                    _own(secret_dir, account)
                d = os.path.join(secret_dir, c["name"])
                os.mkdir(d, 0o700)
                _own(d, account)
                for key, value in values.items():
                    if not key or "/" in key or key.startswith("."):
                        continue
                    fd = os.open(os.path.join(d, key), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                    if account is not None:
                        os.fchown(fd, account.uid, account.gid)
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(value)
                env[env_var(c["name"])] = d
                continue
            mapping = c.get("env") or (BUCKET_KEYS if c["kind"] == "bucket" else {})
            for var, key in mapping.items():
                env[var] = _key(req.run_id, c, values, key)
    except BaseException:
        remove_secret_dir(secret_dir)
        raise
    return env, secret_dir


def _own(path: str, account: Account | None) -> None:
    if account is not None:  # we made it a moment ago in our own 0700 directory: nobody else could swap it
        os.chown(path, account.uid, account.gid, follow_symlinks=False)


def _prefix(run_id: str) -> str:
    return f"gpuplat-secrets-{run_id}-"


def remove_secret_dir(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def remove_run_secrets(run_id: str) -> None:
    """Every secret directory of the run: also one made before a server restart (its path was not kept)."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(_prefix(run_id)) + "*")):
        remove_secret_dir(path)


def check_local(conns: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool, str]]:
    """(connection, ok, line) per connection: its host_path is a directory, its local_file holds its keys."""
    out: list[tuple[str, bool, str]] = []
    for c in conns:
        name = c["name"]
        if c.get("kind") == "volume" and c.get("host_path"):
            ok = os.path.isdir(c["host_path"])
            out.append((name, ok, f"connection {name}: {c['host_path']} {'is' if ok else 'is not'} a directory"))
        if not c.get("secret"):
            continue
        if not c.get("local_file"):
            out.append((name, False, f"connection {name}: no local_file to read Secret {c['secret']!r} from"))
            continue
        try:
            values = read_local_file(c["local_file"])
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            out.append((name, False, f"connection {name}: cannot read {c['local_file']}: {why}"))
            continue
        keys = list((c.get("env") or (BUCKET_KEYS if c.get("kind") == "bucket" else {})).values())
        missing = [k for k in keys if k not in values]
        if missing:
            out.append((name, False, f"connection {name}: {c['local_file']} has no key(s) {', '.join(missing)}"))
        else:
            out.append((name, True, f"connection {name}: {c['local_file']} holds its keys"))
    return out
