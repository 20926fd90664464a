"""Every reason code a run can carry, with its layer, its meaning and who can act.

One registry for the dispatch side (our queue), the execution side (the local and the
Kubernetes executors), the lifecycle and the final outcome. The code strings are a
contract: they appear on the timeline, in `explain`, in the API and in clients.

Layers (where the run is held while the reason is current):
  queue     our queue (dispatch) holds it
  executor  dispatched; the executor (or the cluster) has not started it, or lost its process
  running   its process runs
  done      it ended
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Layer(StrEnum):
    QUEUE = "queue"
    EXECUTOR = "executor"
    RUNNING = "running"
    DONE = "done"


# What each layer means to a reader (the monitor's "where" line).
LAYER_TEXT: dict[str, str] = {
    Layer.QUEUE: "held by our queue (dispatch)",
    Layer.EXECUTOR: "dispatched; the executor has not started it yet (execution)",
    Layer.RUNNING: "running",
    Layer.DONE: "finished",
}

# Who can act: role words, as shown to users.
OWNER = "the run's owner"
PROJECT_ADMINS = "project admins"
PLATFORM_ADMINS = "platform admins"
CLUSTER_ADMINS = "cluster admins"
ROLES = frozenset({OWNER, PROJECT_ADMINS, PLATFORM_ADMINS, CLUSTER_ADMINS})


class Reason(StrEnum):
    # dispatch side (our queue holds the run)
    QUEUE_CONCURRENCY = "QueueConcurrency"
    QUEUE_QUOTA = "QueueQuota"
    USER_LIMIT = "UserLimit"
    SWEEP_CONCURRENCY = "SweepConcurrency"
    SWEEP_PAUSED = "SweepPaused"
    QUEUE_PAUSED = "QueuePaused"
    NO_CAPACITY = "NoCapacity"
    BEHIND_HEAD = "BehindQueueHead"
    PRIORITY = "WaitingForHigherPriority"
    ADMISSIBLE = "Admissible"
    # lifecycle
    SUBMITTED = "Submitted"
    ADMITTED = "Admitted"
    STARTED = "Started"
    REATTACHED = "Reattached"
    RUNNING = "Running"
    STOP_REQUESTED = "StopRequested"
    # sweeps: the parent's own timeline
    SWEEP_STARTED = "SweepStarted"
    CONCURRENCY_CHANGED = "ConcurrencyChanged"
    SWEEP_RESUMED = "SweepResumed"
    EARLY_STOPPED = "EarlyStopped"
    MAX_FAILURES = "MaxFailures"
    # GPU sessions: the kernel inside the lease
    KERNEL_STARTING = "KernelStarting"
    KERNEL_READY = "KernelReady"
    KERNEL_RESTARTED = "KernelRestarted"
    IDLE_WARNING = "IdleWarning"
    KEEP_ALIVE = "KeepAlive"
    # after the end: the run held GPUs mostly idle (issue 27), told to its owner and project admins
    GPU_MOSTLY_IDLE = "GpuMostlyIdle"
    # final
    COMPLETED = "Completed"
    ERROR = "Error"
    SIGNALED = "Signaled"
    STOPPED = "Stopped"
    TIMED_OUT = "TimedOut"
    LOST = "Lost"
    START_FAILED = "StartFailed"
    DISK_FULL = "DiskFull"
    IDLE_TIMEOUT = "IdleTimeout"
    KERNEL_SHUTDOWN = "KernelShutdown"
    KERNEL_DIED = "KernelDied"
    # execution side: placement (the Kubernetes scheduler)
    INSUFFICIENT_GPU = "InsufficientGPU"
    GPU_FRAGMENTED = "GPUsFragmented"
    NO_NODE_BIG_ENOUGH = "NoNodeLargeEnough"
    INSUFFICIENT_RESOURCES = "InsufficientResources"
    UNTOLERATED_TAINT = "UntoleratedTaint"
    SELECTOR_MISMATCH = "NodeSelectorMismatch"
    NODES_CORDONED = "NodesCordoned"
    VOLUME_NOT_BOUND = "VolumeNotBound"
    VOLUME_NODE_CONFLICT = "VolumeNodeConflict"
    UNSCHEDULABLE = "Unschedulable"
    SCHEDULING_GATED = "SchedulingGated"
    PENDING = "Pending"
    SUSPENDED = "Suspended"
    CREATE_FAILED = "PodCreateFailed"
    EXCEEDED_QUOTA = "ExceededQuota"
    # execution side: the pod on its node
    IMAGE_PULL = "ImagePullError"
    CONFIG_ERROR = "ConfigError"
    CONTAINER_ERROR = "ContainerError"
    VOLUME_MOUNT = "VolumeMountFailed"
    CONTAINER_CREATING = "ContainerCreating"
    CRASH_LOOP = "CrashLoop"
    OOM_KILLED = "OOMKilled"
    GPU_ALLOCATION = "GPUAllocationFailed"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    FINISHING = "Finishing"  # the Job ended; its pods' final state has not arrived yet (never on the timeline)


@dataclass(frozen=True)
class ReasonInfo:
    layer: Layer
    meaning: str
    who: tuple[str, ...]  # role words (ROLES); empty: nobody needs to act


_Q, _X, _R, _D = Layer.QUEUE, Layer.EXECUTOR, Layer.RUNNING, Layer.DONE
_O, _PJ, _PL, _CL = OWNER, PROJECT_ADMINS, PLATFORM_ADMINS, CLUSTER_ADMINS

REGISTRY: dict[Reason, ReasonInfo] = {
    Reason.QUEUE_CONCURRENCY: ReasonInfo(_Q, "the queue runs as many runs as its concurrency allows", (_O, _PL, _PJ)),
    Reason.QUEUE_QUOTA: ReasonInfo(_Q, "the queue's GPU/CPU/memory quota is used up", (_O, _PL, _PJ)),
    Reason.USER_LIMIT: ReasonInfo(_Q, "the owner has as many runs dispatched as the queue allows per user", (_O, _PL)),
    Reason.SWEEP_CONCURRENCY: ReasonInfo(_Q, "the sweep runs as many trials as it allows at once", (_O,)),
    Reason.SWEEP_PAUSED: ReasonInfo(_Q, "the sweep is paused: it dispatches no more children", (_O,)),
    Reason.QUEUE_PAUSED: ReasonInfo(_Q, "the queue is paused: it dispatches nothing", (_PL,)),
    Reason.NO_CAPACITY: ReasonInfo(_Q, "the machine has too few free GPUs for the run", (_O, _PL)),
    Reason.BEHIND_HEAD: ReasonInfo(_Q, "a strict FIFO queue: the run waits for the one at its head", (_O,)),
    Reason.PRIORITY: ReasonInfo(_Q, "a higher-priority queue is served first", (_O, _PL)),
    Reason.ADMISSIBLE: ReasonInfo(_Q, "fits every limit; the dispatcher starts it on its next cycle", ()),
    Reason.SUBMITTED: ReasonInfo(_Q, "the run was submitted and enters its queue", ()),
    Reason.ADMITTED: ReasonInfo(_X, "the queue dispatched the run to the executor", ()),
    Reason.STARTED: ReasonInfo(_R, "the run's process started", (_O,)),
    Reason.REATTACHED: ReasonInfo(_R, "the server restarted and watches the run again", (_O,)),
    Reason.RUNNING: ReasonInfo(_R, "the run's process runs", (_O,)),
    Reason.STOP_REQUESTED: ReasonInfo(_R, "someone asked to stop the run; the executor is stopping it", ()),
    Reason.SWEEP_STARTED: ReasonInfo(_R, "the sweep's first child was dispatched", ()),
    Reason.CONCURRENCY_CHANGED: ReasonInfo(_R, "the sweep's concurrency was changed while it runs", ()),
    Reason.SWEEP_RESUMED: ReasonInfo(_R, "the sweep dispatches its children again", ()),
    Reason.EARLY_STOPPED: ReasonInfo(_D, "a child reached the sweep's early-stopping target: the rest stopped", ()),
    Reason.MAX_FAILURES: ReasonInfo(_D, "more children failed than the sweep's max_failures: the rest stopped", (_O,)),
    Reason.KERNEL_STARTING: ReasonInfo(_R, "the session holds its GPUs and its kernel is starting", ()),
    Reason.KERNEL_READY: ReasonInfo(_R, "the session's kernel answers; the notebook is connected", ()),
    Reason.KERNEL_RESTARTED: ReasonInfo(_R, "the kernel restarted inside the session; it kept its GPUs", ()),
    Reason.IDLE_WARNING: ReasonInfo(
        _R, "idle for a while (kernel activity or GPU use, as idle_by says): the session ends soon unless kept", (_O,)
    ),
    Reason.KEEP_ALIVE: ReasonInfo(_R, "the owner kept the session: its idle clock starts again", ()),
    Reason.IDLE_TIMEOUT: ReasonInfo(
        _D,
        "idle (kernel activity or GPU use, as idle_by says) for the idle limit: the session ended, GPUs returned",
        (),
    ),
    Reason.KERNEL_SHUTDOWN: ReasonInfo(_D, "the session's kernel was shut down: the session ended, GPUs returned", ()),
    Reason.KERNEL_DIED: ReasonInfo(_D, "the kernel kept dying: the session ended, GPUs returned", (_O,)),
    Reason.GPU_MOSTLY_IDLE: ReasonInfo(
        _D, "it held GPUs mostly idle: busy under half of their sampled time (its status is unchanged)", (_O,)
    ),
    Reason.COMPLETED: ReasonInfo(_D, "the process exited with code 0", ()),
    Reason.ERROR: ReasonInfo(_D, "the process exited with a non-zero code", (_O,)),
    Reason.SIGNALED: ReasonInfo(_D, "the process was killed by a signal", (_O,)),
    Reason.STOPPED: ReasonInfo(_D, "stopped by request", ()),
    Reason.TIMED_OUT: ReasonInfo(_D, "stopped for exceeding its time limit", (_O,)),
    Reason.LOST: ReasonInfo(_D, "the run's process or Job disappeared; its outcome is unknown", (_PL,)),
    Reason.START_FAILED: ReasonInfo(_D, "the executor could not start the run", (_O, _PL)),
    Reason.DISK_FULL: ReasonInfo(_D, "the disk of the run's artifacts is full: it could not start", (_PL, _O)),
    Reason.INSUFFICIENT_GPU: ReasonInfo(_X, "no node has enough free GPUs for the run's pod right now", (_O, _CL, _PL)),
    Reason.GPU_FRAGMENTED: ReasonInfo(_X, "enough GPUs are free in all, but no single node has enough", (_O, _PL)),
    Reason.NO_NODE_BIG_ENOUGH: ReasonInfo(_X, "no node has that many GPUs at all: it can never be placed", (_O, _CL)),
    Reason.INSUFFICIENT_RESOURCES: ReasonInfo(_X, "no node has enough free cpu or memory right now", (_O, _CL)),
    Reason.UNTOLERATED_TAINT: ReasonInfo(_X, "the fitting nodes carry taints the run does not tolerate", (_PL, _O)),
    Reason.SELECTOR_MISMATCH: ReasonInfo(_X, "no node matches the run's node selector or affinity", (_O, _PL)),
    Reason.NODES_CORDONED: ReasonInfo(_X, "the fitting nodes are cordoned (maintenance)", (_CL, _O)),
    Reason.VOLUME_NOT_BOUND: ReasonInfo(_X, "a volume claim of the run is not bound", (_CL, _PL)),
    Reason.VOLUME_NODE_CONFLICT: ReasonInfo(_X, "the run's volumes can only be used on other nodes", (_CL, _O)),
    Reason.UNSCHEDULABLE: ReasonInfo(_X, "the scheduler cannot place the pod (its raw message says why)", (_CL, _O)),
    Reason.SCHEDULING_GATED: ReasonInfo(_X, "an admission gate holds the pod before scheduling", (_PL,)),
    Reason.PENDING: ReasonInfo(_X, "waiting for Kubernetes to create or schedule the pod", (_O,)),
    Reason.SUSPENDED: ReasonInfo(_X, "the Job is suspended (e.g. by Kueue)", (_PL,)),
    Reason.CREATE_FAILED: ReasonInfo(_X, "Kubernetes refuses to create the run's pod", (_CL, _PL)),
    Reason.EXCEEDED_QUOTA: ReasonInfo(_X, "the namespace's ResourceQuota refuses the run's pod", (_CL, _PL)),
    Reason.IMAGE_PULL: ReasonInfo(_X, "the node cannot pull the run's image", (_O, _PL)),
    Reason.CONFIG_ERROR: ReasonInfo(_X, "a Secret or ConfigMap the pod needs is missing", (_O, _PL)),
    Reason.CONTAINER_ERROR: ReasonInfo(_X, "the container runtime cannot start the container", (_O,)),
    Reason.VOLUME_MOUNT: ReasonInfo(_X, "the pod is placed but mounting its volumes fails", (_O, _CL)),
    Reason.CONTAINER_CREATING: ReasonInfo(_X, "the pod is placed; its container is being created", (_O,)),
    Reason.CRASH_LOOP: ReasonInfo(_R, "the process keeps crashing and Kubernetes restarts it", (_O,)),
    Reason.OOM_KILLED: ReasonInfo(_D, "the process ran out of memory", (_O,)),
    Reason.GPU_ALLOCATION: ReasonInfo(_X, "the node could not give the pod its GPU", (_CL,)),
    Reason.PREEMPTED: ReasonInfo(_X, "a higher-priority pod took the run's place; a replacement starts", (_O,)),
    Reason.EVICTED: ReasonInfo(_X, "the run's pod was evicted; a replacement starts", (_O, _CL)),
    Reason.FINISHING: ReasonInfo(_R, "the Job ended; its pod's final state has not arrived yet", ()),
}

# Our queue's reasons for holding a run (what the dispatcher writes while it waits).
DISPATCH_REASONS = frozenset(
    {
        Reason.QUEUE_CONCURRENCY,
        Reason.QUEUE_QUOTA,
        Reason.USER_LIMIT,
        Reason.SWEEP_CONCURRENCY,
        Reason.SWEEP_PAUSED,
        Reason.QUEUE_PAUSED,
        Reason.NO_CAPACITY,
        Reason.BEHIND_HEAD,
    }
)


def info(code: str) -> ReasonInfo | None:
    """The registry entry of `code`, or None for a code this version does not know."""
    try:
        return REGISTRY[Reason(code)]
    except ValueError:
        return None


def layer_of(code: str) -> Layer | None:
    entry = info(code)
    return None if entry is None else entry.layer


def holds_before_start(code: str) -> bool:
    """Whether a current reason `code` means the run's process does not run (its wait is no run time)."""
    return layer_of(code) in (Layer.QUEUE, Layer.EXECUTOR)
