"""What keeps one local run from the others: its account, its directory's owner and mode, its cgroups.

The executor (local.py) asks this module, per run, which account it runs as and which
`cgroup.procs` files its command joins, and has it prepare the run's directory:

- `run_as = "user"`: the artifacts root is the server's, mode 0711 (runs may enter their own
  directory, never list or enter another's); each run's directory and its `.gpuplat/` are the
  run account's, mode 0700. Everything the platform later opens there goes through safefs.
- cgroups (cgroups.py), in either mode where this machine offers them: the run's memory,
  CPU and pids limits and its GPU device nodes; stop and the end of a run kill all of it.

`isolation()` states, control by control, what this machine enforces: `capacity.isolation`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.resources import Resources
from .. import safefs
from ..base import Device, ExecutorError, LaunchRequest
from .cgroups import Cgroups
from .users import Account, run_account, server_account

ARTIFACTS_ROOT_MODE = 0o711
RUN_DIR_MODE = 0o700
# after a run ends, how often and how long its emptied cgroups are retried for removal
CGROUP_REMOVE_RETRY_SECONDS = 0.2
CGROUP_REMOVE_TRIES = 50


class Confinement:
    def __init__(
        self,
        run_as: str,
        unix_users: Mapping[str, str],
        pids_max: int | None,
        use_cgroups: bool,
        env_keep: Sequence[str],
        log: Any,
    ) -> None:
        self.run_as = run_as
        self.unix_users = dict(unix_users)
        self.pids_max = pids_max
        self.env_keep = list(env_keep)
        self.log = log
        self.cgroups = Cgroups.probe() if use_cgroups else Cgroups(problems=dict.fromkeys(_CONTROLS, _OFF))
        self.cgroups.remove_empty()  # of runs that ended while no server watched (a live run's holds processes)

    @property
    def by_user(self) -> bool:
        return self.run_as == "user"

    def account(self, req: LaunchRequest) -> Account | None:
        """The account the run runs as: its platform user's in `user` mode, else None (the server's)."""
        return run_account(req.user, self.unix_users, req.run_id) if self.by_user else None

    # -- the run's directory ---------------------------------------------------------------

    def prepare(self, req: LaunchRequest, account: Account | None, state_dir: str) -> None:
        """Create the run's directory and `.gpuplat/`; in `user` mode owned by the run's account, 0700."""
        if account is None:
            os.makedirs(state_dir, exist_ok=True)
            return
        root, name = os.path.split(req.workdir)
        self._own_root(root)
        rootfd = safefs.open_dir(root)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, RUN_DIR_MODE, dir_fd=rootfd)
            runfd = safefs.walk(rootfd, [name])
        finally:
            os.close(rootfd)
        try:
            self._own(runfd, account, req.workdir)
            statefd = safefs.walk(runfd, [os.path.basename(state_dir)], create=True, mode=RUN_DIR_MODE)
            try:
                self._own(statefd, account, state_dir)
            finally:
                os.close(statefd)
        finally:
            os.close(runfd)

    @staticmethod
    def _own_root(root: str) -> None:
        os.makedirs(root, exist_ok=True)
        st = os.stat(root)
        if st.st_uid != os.geteuid():
            raise ExecutorError(
                f"the artifacts root {root} belongs to uid {st.st_uid}, not the server: runs of one account could "
                "replace other runs' directories; make it the server's (chown) or choose another GpuPlat.artifacts_root"
            )
        if stat.S_IMODE(st.st_mode) != ARTIFACTS_ROOT_MODE:
            os.chmod(root, ARTIFACTS_ROOT_MODE)  # enter your own run's directory; list or enter no other

    @staticmethod
    def _own(fd: int, account: Account, path: str) -> None:
        st = os.fstat(fd)
        if st.st_uid not in (os.geteuid(), account.uid):
            raise ExecutorError(f"{path} belongs to uid {st.st_uid}, not to {account.name}: not starting the run")
        os.fchown(fd, account.uid, account.gid)
        os.fchmod(fd, RUN_DIR_MODE)

    # -- cgroups ---------------------------------------------------------------------------

    def cgroup(self, req: LaunchRequest, devices: Sequence[Device]) -> list[str]:
        """The run's cgroups, made with its limits; the `cgroup.procs` files its command joins ([] without)."""
        if not self.cgroups.any:
            return []
        try:
            res = Resources.parse(req.spec.get("resources") or {})
        except ValueError:
            res = Resources()
        mine = set(req.devices)
        try:
            return self.cgroups.create(
                req.run_id,
                memory_bytes=res.memory_bytes or None,
                cpu_milli=res.cpu_milli or None,
                pids_max=self.pids_max,
                deny_gpu_minors=[d.minor for d in devices if d.index not in mine and d.minor is not None],
            )
        except OSError as exc:
            raise ExecutorError(f"run {req.run_id}: cannot make its cgroup: {exc.strerror or exc}") from exc

    def kill(self, run_id: str) -> None:
        if self.cgroups.tracks_processes:
            self.cgroups.kill(run_id)

    def release(self, run_id: str, later: Callable[[float, Callable[[], None]], object] | None) -> None:
        """After the run: kill what is left in its cgroups (setsid'ed strays too), then remove them.

        Killed processes leave asynchronously: removal is tried again with `later` (a loop's call_later).
        """
        if not self.cgroups.any:
            return
        self.kill(run_id)
        tries = [CGROUP_REMOVE_TRIES]

        def remove() -> None:
            try:
                if self.cgroups.remove(run_id):
                    return
            except OSError as exc:
                self.log.warning("gpuplat: cannot remove the cgroups of run %s: %s", run_id, exc)
                return
            tries[0] -= 1
            if tries[0] > 0 and later is not None:
                self.cgroups.kill(run_id)
                later(CGROUP_REMOVE_RETRY_SECONDS, remove)
            else:
                self.log.warning("gpuplat: run %s still has processes in its cgroups; left in place", run_id)

        remove()

    # -- what holds here -------------------------------------------------------------------

    def isolation(self, devices: Sequence[Device]) -> dict[str, Any]:
        by_user = self.by_user
        server = server_account()
        server_name = server.name if server else f"uid {os.geteuid()}"
        controls: list[dict[str, Any]] = []

        def add(name: str, enforced: bool, detail: str) -> None:
            controls.append({"name": name, "enforced": enforced, "detail": detail})

        if by_user:
            mapped = ", ".join(f"{k} → {v}" for k, v in sorted(self.unix_users.items()))
            add(
                "users",
                True,
                "each run, session kernel and sweep child runs as its platform user's Unix account (same name"
                f"{'; mapped: ' + mapped if mapped else ''}); never root, never the server's account",
            )
            add("files", True, "run directories are 0700 and the run account's, under a 0711 artifacts root")
            add("signals", True, "runs of one account cannot signal another account's processes or the launcher")
        else:
            why = f"every run runs as the server's account ({server_name}): LocalExecutor.run_as = 'server'"
            add("users", False, why + "; set run_as = 'user' to run each as its user's account")
            add("files", False, why + ": a run can read and change other runs' files and the store")
            add("signals", False, why + ": a run can signal other runs")
        add("environment", True, "built from LocalExecutor.env_keep: " + (", ".join(self.env_keep) or "nothing"))
        add("links", True, "the platform opens files in run directories without following links (openat2/O_NOFOLLOW)")
        cg = self.cgroups
        for control, what in (("memory", "resources.memory"), ("cpu", "resources.cpu"), ("pids", "pids_max")):
            if cg.enforces(control):
                add(control, True, f"a cgroup per run limits it to its {what}")
            else:
                add(control, False, cg.problems.get(control, "not enforced"))
        declared = [d for d in devices if d.declared]
        if cg.enforces("devices"):
            note = " (declared GPUs: /dev/nvidiaN of their index)" if declared else ""
            add("gpu_devices", True, f"a run may open only its own GPUs' device nodes{note}; others give EPERM")
        else:
            add(
                "gpu_devices",
                False,
                f"{cg.problems.get('devices', 'no devices cgroup')}; CUDA_VISIBLE_DEVICES only asks CUDA, a run can "
                "open every GPU of the machine",
            )
        if cg.enforces("membership"):
            add("processes", True, "stopping a run kills every process in its cgroup, setsid'ed ones too")
        else:
            add("processes", False, cg.problems.get("membership", "") + "; a process that calls setsid outlives a stop")
        add("network", False, "local runs share this machine's network: a run can reach what the machine reaches")
        return {"mode": self.run_as, "controls": controls}


_CONTROLS = ("memory", "cpu", "pids", "devices", "membership")
_OFF = "LocalExecutor.cgroups is 'off'"
