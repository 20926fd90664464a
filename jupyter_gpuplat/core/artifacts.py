"""Where things live in a run's artifact directory: the one layout every module uses.

A run's artifact directory is `<artifacts_root>/<run_id>` (`GPUPLAT_ARTIFACTS_DIR` inside the
run). Paths here are relative to it, with "/" separators; pure functions, no I/O.

    output.log              combined stdout/stderr
    outputs/                files kept with tracking.log_output, executed notebooks
    code/                   what ran: the submitted script, notebook or cell; git.diff
    .gpuplat/               the platform's bookkeeping, never listed as an output:
        exit.json, stop.json    the local launcher's exit record, a stop request
        launch.json, launch.lock   the local launcher's identity and the lock it holds while it lives
                                (a second submit of the run adopts it instead of starting it twice)
        metrics.bin, params.jsonl, outputs.jsonl   written by jupyter_gpuplat.tracking
        metrics.csv             metrics as text: runs recorded before metrics.bin, other writers
        k8s-logs.json           how far a pod's log has been copied
"""

from __future__ import annotations

import posixpath

STATE_DIR = ".gpuplat"
LOG = "output.log"
OUTPUTS_DIR = "outputs"
CODE_DIR = "code"

# Inside STATE_DIR (tracking opens them by name there).
METRICS_FILE = "metrics.csv"
METRICS_LOG_FILE = "metrics.bin"  # format: core.metric_format
PARAMS_FILE = "params.jsonl"
OUTPUTS_FILE = "outputs.jsonl"
EXIT_FILE = "exit.json"
STOP_FILE = "stop.json"
K8S_LOGS_FILE = "k8s-logs.json"

KERNEL_FILE = "kernel.json"  # a session's connection file (mode 0600; never served)
CELL_FILE = "cell.py"  # a notebook cell's code, run as a file so tracebacks show its lines
GIT_DIFF_FILE = "git.diff"

METRICS = f"{STATE_DIR}/{METRICS_FILE}"
METRICS_LOG = f"{STATE_DIR}/{METRICS_LOG_FILE}"
PARAMS = f"{STATE_DIR}/{PARAMS_FILE}"
OUTPUTS_INDEX = f"{STATE_DIR}/{OUTPUTS_FILE}"
EXIT = f"{STATE_DIR}/{EXIT_FILE}"
STOP = f"{STATE_DIR}/{STOP_FILE}"
K8S_LOGS = f"{STATE_DIR}/{K8S_LOGS_FILE}"
CELL = f"{CODE_DIR}/{CELL_FILE}"
KERNEL = f"{STATE_DIR}/{KERNEL_FILE}"
GIT_DIFF = f"{CODE_DIR}/{GIT_DIFF_FILE}"


def run_dir(artifacts_root: str, run_id: str) -> str:
    """The run's artifact directory (`GPUPLAT_ARTIFACTS_DIR`)."""
    return posixpath.join(artifacts_root, run_id)


def in_run(run_directory: str, rel: str) -> str:
    """An absolute path inside the run's directory from a layout path."""
    return posixpath.join(run_directory, rel)


def snapshot_path(filename: str) -> str:
    """Where the snapshot of a submitted file goes: `code/<its base name>`."""
    return f"{CODE_DIR}/{posixpath.basename(filename) or 'code'}"


def is_internal(rel: str) -> bool:
    """True for the platform's bookkeeping (under `.gpuplat/`): not an output of the run."""
    first = rel.replace("\\", "/").lstrip("/").split("/", 1)[0]
    return first == STATE_DIR
