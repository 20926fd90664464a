"""Whose Unix account a local run runs as (`LocalExecutor.run_as`), and whether this machine can do it.

`server`: every run is the server's own process tree (one person's machine). `user`: each run,
session kernel and sweep child runs as the Unix account of its platform user, as JupyterHub's
LocalProcessSpawner and Slurm do: the account is resolved here, in the server (never after a
fork), and the launcher drops to it between fork and exec. Nothing here switches users.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base import ExecutorError


@dataclass(frozen=True)
class Account:
    """A Unix account a run runs as; `groups` from getgrouplist, as LocalProcessSpawner resolves them."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str

    def credentials(self) -> dict[str, Any]:
        """What the launcher needs to drop to this account (plain JSON for the warm launcher)."""
        return {"uid": self.uid, "gid": self.gid, "groups": list(self.groups)}

    @classmethod
    def of(cls, pw: pwd.struct_passwd) -> Account:
        groups = tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
        return cls(pw.pw_name, pw.pw_uid, pw.pw_gid, groups, pw.pw_dir, pw.pw_shell or "/bin/sh")


def server_account() -> Account | None:
    """The account the server runs as (None where it has no passwd entry, as in some containers)."""
    try:
        return Account.of(pwd.getpwuid(os.geteuid()))
    except KeyError:
        return None


def run_account(platform_user: str, unix_users: Mapping[str, str], run_id: str) -> Account:
    """The account `platform_user`'s run runs as in `user` mode; ExecutorError saying why there is none."""
    name = unix_users.get(platform_user, platform_user)
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        mapped = f" (LocalExecutor.unix_users maps {platform_user} to it)" if platform_user in unix_users else ""
        raise ExecutorError(
            f"run {run_id}: platform user {platform_user!r} has no Unix account {name!r} on this machine{mapped}; "
            "add the account, or map the user to one in LocalExecutor.unix_users"
        ) from None
    if pw.pw_uid == 0:
        raise ExecutorError(f"run {run_id}: platform user {platform_user!r} maps to root; runs never run as root")
    if pw.pw_uid == os.geteuid():
        raise ExecutorError(
            f"run {run_id}: platform user {platform_user!r} maps to {name!r}, the server's own account, which can "
            "read the store and the server's secrets; map it to an account of its own"
        )
    return Account.of(pw)


def unreachable_by_others(path: str, *, execute: bool) -> str | None:
    """Why an account other than the owner cannot reach `path` (read it, or execute it), or None.

    Mode bits only ('other'), since runs are many accounts: a group or ACL that lets some in is
    not counted. Every directory on the way counts, those of the path as given (a link's own
    directory must be entered too) and those of where its links lead.
    """
    real = os.path.realpath(path)
    for way in dict.fromkeys((os.path.abspath(path), real)):
        parent = "/"
        for part in [p for p in way.split("/") if p][:-1]:
            parent = os.path.join(parent, part)
            try:
                mode = os.stat(parent).st_mode
            except OSError as exc:
                return f"{parent}: {exc.strerror}"
            if not mode & stat.S_IXOTH:
                return f"{parent} is mode {stat.S_IMODE(mode):04o}: other accounts cannot enter it"
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        return f"{real}: {exc.strerror}"
    need = stat.S_IXOTH if execute else stat.S_IROTH
    if not mode & need:
        what = "execute" if execute else "read"
        return f"{real} is mode {stat.S_IMODE(mode):04o}: other accounts cannot {what} it"
    return None


def user_mode_problems(python: str, readable: Iterable[str]) -> list[str]:
    """Why this server cannot run runs as their users: not root, or its run files out of the runs' reach."""
    problems: list[str] = []
    if os.geteuid() != 0:
        who = server_account()
        problems.append(
            f"the server runs as {who.name if who else 'uid ' + str(os.geteuid())}, not root, so it cannot switch "
            "to the runs' accounts: start it as root, or set LocalExecutor.run_as = 'server' (every run then runs "
            "as the server's account, for one person's machine)"
        )
    why = unreachable_by_others(python, execute=True)
    if why:
        problems.append(
            f"runs' interpreter LocalExecutor.python ({python}) cannot be run by the runs' accounts: {why}; "
            "install Python where every account can execute it (e.g. /usr/local or /opt) and point "
            "LocalExecutor.python at it"
        )
    for path in readable:
        why = unreachable_by_others(path, execute=False)
        if why:
            problems.append(f"runs' accounts cannot read {path}, which every run needs: {why}")
    return problems
