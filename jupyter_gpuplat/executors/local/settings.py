"""The local executor's settings (`c.LocalExecutor.*`): GPUs, stops, environment, accounts, cgroups, warm launchers.

A plain `HasTraits`, as `service/settings.py`'s: the executor keeps its one config section and adds none.
"""

from __future__ import annotations

import sys
from typing import Any

from traitlets import Bool, Dict, Enum, Float, HasTraits, Integer, List, TraitType, Unicode, default

from .env import DEFAULT_ENV_KEEP


class LocalSettings(HasTraits):
    """How runs start and stop on this machine, and what they see: the local executor's traits."""

    @classmethod
    def class_own_traits(cls, **metadata: Any) -> dict[str, TraitType[Any, Any]]:
        """The executor's own: traitlets lists a class in `--help-all` and generated config files
        only for the settings it owns, and these are its config section (`c.<Executor>.*`)."""
        own = super().class_own_traits(**metadata)
        return {**LocalSettings.class_traits(**metadata), **own} if LocalSettings in cls.__bases__ else own

    gpus = Integer(
        None,
        allow_none=True,
        min=0,
        help="Declare this many GPUs (devices 0..N-1) instead of asking nvidia-smi. None: detect with nvidia-smi.",
    ).tag(config=True)
    stop_grace_seconds = Float(
        10.0,
        min=0.0,
        help="Seconds between SIGTERM and SIGKILL when a run is stopped or times out.",
    ).tag(config=True)
    inherit_env = Bool(
        True,
        help=(
            "Pass the server's values of the names in env_keep to runs. When False a run sees only PATH, "
            "its account's HOME/USER/LOGNAME/SHELL, its spec's env and the platform variables."
        ),
    ).tag(config=True)
    env_keep = List(
        Unicode(),
        list(DEFAULT_ENV_KEEP),
        help=(
            "Names of the server's environment variables a run gets (an allow-list, as JupyterHub's "
            "Spawner.env_keep): nothing else of the server's environment reaches a run, so no token, database "
            "URL or cloud key does unless named here. Reserved names (CUDA_VISIBLE_DEVICES, GPUPLAT_*, ...) "
            "are always the platform's."
        ),
    ).tag(config=True)
    run_as = Enum(
        ["server", "user"],
        "server",
        help=(
            "server: every run runs as the server's own account (one person's machine; the default for "
            "`gpuplat lab`). user: each run, session kernel and sweep child runs as the Unix account of its "
            "platform user (unix_users), with a 0700 directory of its own; the server must run as root, and "
            "refuses to start saying why when it cannot switch users."
        ),
    ).tag(config=True)
    unix_users = Dict(
        value_trait=Unicode(),
        help="run_as = 'user': platform user → Unix account; a user not listed runs as the account of the same name.",
    ).tag(config=True)
    python = Unicode(
        help=(
            "The interpreter of runs' scripts, notebooks, cells and session kernels (default: the server's own). "
            "With run_as = 'user' every run account must be able to execute it."
        ),
    ).tag(config=True)
    cgroups = Enum(
        ["auto", "off"],
        "auto",
        help=(
            "auto: give each run a cgroup limiting its memory and CPU to its resources, its processes to "
            "pids_max and its GPU device nodes to its own, where this machine lets the server (root, or a "
            "delegated cgroup); capacity.isolation says what holds. off: none."
        ),
    ).tag(config=True)
    pids_max = Integer(
        8192, min=0, help="Processes and threads one run may have at once, with a pids cgroup (0: no limit)."
    ).tag(config=True)
    gpu_sample_seconds = Float(
        10.0,
        allow_none=True,
        min=0.1,
        help="Seconds between samples (NVML) of the GPUs runs and sessions hold, kept as their system metrics "
        "system/gpu<N>/util and memory_bytes and summarised as gpu_usage. None: not sampled.",
    ).tag(config=True)
    poll_interval_seconds = Float(
        0.5,
        min=0.01,
        help="Seconds between checks of runs re-attached after a restart (they are not children of this server).",
    ).tag(config=True)
    warm_launcher = Bool(
        True,
        help=(
            "Fork each run's launcher from one long-lived warm launcher process (started with the first run, "
            "again if it dies) instead of starting a fresh Python interpreter per run: a start costs the "
            "server's machine well under a millisecond of CPU instead of ~10-20 ms. False: spawn "
            "launcher.py for every run (also the fallback when the warm launcher cannot take one)."
        ),
    ).tag(config=True)
    warm_notebooks = Bool(
        True,
        help=(
            "With warm_launcher: run notebooks from a second warm launcher that has nbclient and ipykernel "
            "imported already, forking nbrun and its kernel per run (each after the run's env is set), "
            "instead of a fresh interpreter for each. Not for a run whose PYTHON* variables differ from "
            "the server's (a fresh interpreter runs it)."
        ),
    ).tag(config=True)
    nvidia_smi_path = Unicode("nvidia-smi", help="The nvidia-smi used to find GPUs when `gpus` is None.").tag(
        config=True
    )

    @default("python")
    def _python_default(self) -> str:
        return sys.executable
