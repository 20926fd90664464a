"""With runs as their users, what of the server no run may read: the store, the token map, runtime files.

`LocalExecutor.run_as = "user"` keeps runs out of each other's way; this keeps them out of the
server's. At start-up the server makes its own SQLite store 0600 (it made it: it may), and
refuses to start while a file that holds its secrets stays readable by other accounts: a
Jupyter config file holding the token map, its runtime directory (the server's token and cookie
secret), a platform config naming Secrets' local files that others may read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..executors.local.users import unreachable_by_others
from ..store.urls import sqlite_path

SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")
SECRET_MARKERS = ("TokenMapIdentityProvider", "IdentityProvider.token", "ServerApp.token", "db_url", "password")


def make_store_private(db_url: str) -> None:
    """The SQLite file and its journals: the server's alone (0600)."""
    path = sqlite_path(db_url)
    if not path:
        return
    path = os.path.abspath(path)
    for suffix in SQLITE_SIDE_FILES:
        try:
            os.chmod(path + suffix, 0o600, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except NotImplementedError:  # no lchmod here: the store is ours, not a run's, so follow it
            os.chmod(path + suffix, 0o600)


def _holds_secrets(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    return any(marker in text for marker in SECRET_MARKERS)


def exposed(config_files: Iterable[str], private_dirs: Iterable[str]) -> list[str]:
    """Why a run account could read a secret of the server's: config files with secrets, private dirs."""
    problems = []
    for path in config_files:
        if _holds_secrets(path) and unreachable_by_others(path, execute=False) is None:
            problems.append(f"{path} holds the server's secrets and other accounts can read it: chmod 600 {path}")
    for path in private_dirs:
        if os.path.isdir(path) and unreachable_by_others(os.path.join(path, "."), execute=False) is None:
            problems.append(f"{path} (the server's runtime files) is readable by other accounts: chmod 700 {path}")
    return problems
