"""Execution-side explanations: pure functions over (Job, Pods, Events[, Nodes]).

Kubernetes' wording changes between versions (notes/kubernetes.md §3), so messages
are parsed leniently, the raw text is always kept, and a message nobody recognises
degrades to itself, never to an error. Each answer has a reason code (from the one
registry, `core/reasons.py`), a sentence with the numbers, the layer ("executor"),
who can act, and counts.

By noun: `fit` (the scheduler's fit-error message), `placement` (why a pod cannot be
placed), `pod` (one pod's state), `job` (how the Job ended), `run` (one answer for the
run, summarizing its workers); `model` holds the answer type and small readers.
"""

from __future__ import annotations

from ....core.reasons import CLUSTER_ADMINS, OWNER, PLATFORM_ADMINS, Reason
from .fit import Cause, FitFailure, categorize, parse_fit_error
from .job import explain_job_end
from .model import LAYER, Explanation, NodeView, Obj, condition, placement_source
from .placement import explain_unschedulable
from .pod import DISRUPTIONS, explain_pod, terminated_text
from .run import episode, explain_run, summarize_workers

# The codes under their historical names here (they are registry members).
INSUFFICIENT_GPU = Reason.INSUFFICIENT_GPU
GPU_FRAGMENTED = Reason.GPU_FRAGMENTED
NO_NODE_BIG_ENOUGH = Reason.NO_NODE_BIG_ENOUGH
INSUFFICIENT_RESOURCES = Reason.INSUFFICIENT_RESOURCES
UNTOLERATED_TAINT = Reason.UNTOLERATED_TAINT
SELECTOR_MISMATCH = Reason.SELECTOR_MISMATCH
NODES_CORDONED = Reason.NODES_CORDONED
VOLUME_NOT_BOUND = Reason.VOLUME_NOT_BOUND
VOLUME_NODE_CONFLICT = Reason.VOLUME_NODE_CONFLICT
UNSCHEDULABLE = Reason.UNSCHEDULABLE
SCHEDULING_GATED = Reason.SCHEDULING_GATED
PENDING = Reason.PENDING
CREATE_FAILED = Reason.CREATE_FAILED
EXCEEDED_QUOTA = Reason.EXCEEDED_QUOTA
IMAGE_PULL = Reason.IMAGE_PULL
CONFIG_ERROR = Reason.CONFIG_ERROR
CONTAINER_ERROR = Reason.CONTAINER_ERROR
VOLUME_MOUNT = Reason.VOLUME_MOUNT
CONTAINER_CREATING = Reason.CONTAINER_CREATING
CRASH_LOOP = Reason.CRASH_LOOP
OOM_KILLED = Reason.OOM_KILLED
GPU_ALLOCATION = Reason.GPU_ALLOCATION
PREEMPTED = Reason.PREEMPTED
EVICTED = Reason.EVICTED
RUNNING = Reason.RUNNING
COMPLETED = Reason.COMPLETED
ERROR = Reason.ERROR
TIMED_OUT = Reason.TIMED_OUT
SUSPENDED = Reason.SUSPENDED
FINISHING = Reason.FINISHING  # the Job ended; its pods' final state has not arrived yet (not a timeline event)

__all__ = [
    "CLUSTER_ADMINS",
    "DISRUPTIONS",
    "LAYER",
    "OWNER",
    "PLATFORM_ADMINS",
    "Cause",
    "Explanation",
    "FitFailure",
    "NodeView",
    "Obj",
    "categorize",
    "condition",
    "episode",
    "explain_job_end",
    "explain_pod",
    "explain_run",
    "explain_unschedulable",
    "parse_fit_error",
    "placement_source",
    "summarize_workers",
    "terminated_text",
]
