"""Notes on a run that the policy allows but its user should read: made once here, rendered by every client."""

from __future__ import annotations

CPU_ONLY = "This run gets no GPU (0 GPUs): it runs on CPU only. Add a GPU preset or set GPUs to use one."


def run_notes(gpu: int) -> list[str]:
    """The cautions for a resolved request of `gpu` GPUs (the submit dialog, `%%gpu_submit` and the CLI show them)."""
    return [] if gpu > 0 else [CPU_ONLY]
