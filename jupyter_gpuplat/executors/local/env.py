"""A local run's environment: built up from an allow-list, never the server's minus a few names.

As JupyterHub's `Spawner.env_keep`: a fresh dict gets the server's values of the names in
`LocalExecutor.env_keep` only (locale, PATH, the Python/conda environment), then the account's
identity (HOME, USER, LOGNAME, SHELL), then the spec's env (the policy has refused reserved
names there already; checked again here), then the platform's own variables, last, so nothing
a run asks for can widen its GPUs or rename its run. A token, a database URL or a cloud key in
the server's environment reaches no run unless an admin names it in env_keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..base import ExecutorError, LaunchRequest
from .users import Account

DEFAULT_ENV_KEEP = (
    "PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_ROOT",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "LD_LIBRARY_PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
)
# What selects devices or the platform's identity of a run: only the platform sets these.
PLATFORM_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "GPUPLAT_RUN_ID",
        "GPUPLAT_ARTIFACTS_DIR",
        "GPUPLAT_FLAVOR",
        "PYTHONUNBUFFERED",
    }
)
ACCOUNT_ENV = ("HOME", "USER", "LOGNAME", "SHELL")


def check_spec_env(req: LaunchRequest) -> None:
    for name, value in req.env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ExecutorError(f"run {req.run_id}: invalid environment variable name {name!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ExecutorError(
                f"run {req.run_id}: environment variable {name} must be a string without NUL, "
                f"got {type(value).__name__}"
            )


def kept(server_env: Mapping[str, str], env_keep: Sequence[str]) -> dict[str, str]:
    """The server's values of the allow-listed names (the launchers' own environment, too)."""
    env = {k: server_env[k] for k in env_keep if k in server_env}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def make_env(
    server_env: Mapping[str, str],
    env_keep: Sequence[str],
    account: Account | None,
    req: LaunchRequest,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The run's environment (see the module doc); `extra` is what its connections add."""
    check_spec_env(req)
    env = kept(server_env, env_keep)
    if account is not None:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name, SHELL=account.shell)
    else:  # the server's own account, as the server sees it
        env.update({k: server_env[k] for k in ACCOUNT_ENV if k in server_env})
    for source in (req.env, extra or {}):
        env.update({k: v for k, v in source.items() if k not in PLATFORM_ENV})
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in req.devices)  # "" hides every GPU from CUDA
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's indices as nvidia-smi numbers them
    env["GPUPLAT_RUN_ID"] = req.run_id
    env["GPUPLAT_ARTIFACTS_DIR"] = req.workdir
    if req.flavor is not None:  # the kind of GPU it was given (a session's kernel sees it too)
        env["GPUPLAT_FLAVOR"] = str(req.flavor["name"])
    return env
