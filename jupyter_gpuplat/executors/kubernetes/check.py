"""`gpuplat cluster check`: is this cluster fit to run the platform's GPU Jobs?

Checks, each a finding (ok / warn / fail): the API answers; the service account may
do everything the executor needs (SelfSubjectAccessReview per verb); nodes expose
allocatable GPUs (the device plugin works), with their GPU types from node labels,
taints and cordons; the artifact volume claim is bound; each named connection's PVC
and Secret (with its keys) exists; the runs' namespace keeps runs apart: Pod Security
`restricted` enforced by its labels, a default-deny NetworkPolicy, and no Secret of the
platform and no control-plane or database pod in it (whoever may create a pod in a
namespace may mount its Secrets). Each failing finding says how to fix it. The cluster is
fit when no finding fails. `assess_*` are pure functions over API objects; `check_cluster` asks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .connections import backing_objects
from .isolation import default_deny, label_command, pod_security_levels
from .manifests import MANAGED_BY, MANAGER

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespaced: bool = True
    why: str = ""
    on_namespace: bool = False  # the Namespace object itself (authorized in that namespace, by its name)

    @property
    def text(self) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {res}{'.' + self.group if self.group else ''}"


# Everything the executor does, and so everything deploy/kubernetes/rbac.yaml grants.
REQUIRED: tuple[Permission, ...] = (
    Permission("create", "batch", "jobs", why="create a run's Job"),
    Permission("get", "batch", "jobs", why="adopt a Job created before a crash"),
    Permission("list", "batch", "jobs", why="list the platform's Jobs"),
    Permission("watch", "batch", "jobs", why="watch the platform's Jobs"),
    Permission("delete", "batch", "jobs", why="stop a run, clean up a finished one"),
    Permission("list", "", "pods", why="list the runs' pods"),
    Permission("watch", "", "pods", why="watch the runs' pods"),
    Permission("get", "", "pods", "log", why="follow and archive logs"),
    Permission("list", "", "events", why="read why a pod waits"),
    Permission("watch", "", "events", why="read why a pod waits"),
    Permission("list", "", "nodes", namespaced=False, why="name taints, tell fragmented GPUs from missing ones"),
    Permission("watch", "", "nodes", namespaced=False, why="keep the node view current"),
    Permission("create", "", "secrets", why="give a GPU session's kernel its key"),
    Permission("get", "", "secrets", why="read a session's kernel key back after a restart"),
    Permission("patch", "", "secrets", why="make a session's Job own its key"),
    Permission("delete", "", "secrets", why="remove the key of a session that could not start"),
    Permission("get", "", "namespaces", why="read the runs' namespace's Pod Security labels", on_namespace=True),
    Permission("list", "networking.k8s.io", "networkpolicies", why="see the namespace's default-deny policy"),
    Permission("create", "networking.k8s.io", "networkpolicies", why="let only a session's owner reach its kernel"),
)
# Secrets of the platform that must never be in the runs' namespace (deploy/kubernetes/: gpuplat-system).
PLATFORM_SECRETS = ("gpuplat-control-plane", "gpuplat-postgres")
# Pods that must not run beside the runs: the control plane and its database (deploy/kubernetes/ labels).
PLATFORM_PODS = ("gpuplat", "gpuplat-postgres")
NETWORK_FIX = "kubectl apply -f deploy/kubernetes/network-policies.yaml"
STORAGE_PERMISSION = Permission("get", "", "persistentvolumeclaims", why="check the artifact volume")
GPU_TYPE_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name")


@dataclass(frozen=True)
class Finding:
    level: str
    topic: str
    message: str


@dataclass
class CheckReport:
    target: str
    namespace: str
    findings: list[Finding] = field(default_factory=list)
    gpu_types: dict[str, int] = field(default_factory=dict)

    @property
    def fit(self) -> bool:
        return not any(f.level == FAIL for f in self.findings)

    def add(self, level: str, topic: str, message: str) -> None:
        self.findings.append(Finding(level, topic, message))

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "namespace": self.namespace,
            "fit": self.fit,
            "gpu_types": self.gpu_types,
            "findings": [{"level": f.level, "topic": f.topic, "message": f.message} for f in self.findings],
        }

    def to_text(self) -> str:
        lines = [f"Kubernetes cluster check: {self.target}, namespace {self.namespace}"]
        width = max((len(f.topic) for f in self.findings), default=0)
        for f in self.findings:
            lines.append(f"  {f.level.upper():<5} {f.topic:<{width}}  {f.message}")
        problems = sum(1 for f in self.findings if f.level == FAIL)
        warnings = sum(1 for f in self.findings if f.level == WARN)
        verdict = "fit" if self.fit else f"NOT fit: {problems} problem(s)"
        lines.append(f"{verdict}{f', {warnings} warning(s)' if warnings else ''}")
        return "\n".join(lines)


def _taint_text(t: Mapping[str, Any]) -> str:
    value = f"={t.get('value')}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


def assess_nodes(
    report: CheckReport, nodes: Sequence[Mapping[str, Any]], gpu_resource: str, gpu_type_label: str
) -> None:
    """GPUs the device plugin exposes, their types, and what keeps runs off the GPU nodes."""
    gpu_nodes = []
    unhealthy = []
    for n in nodes:
        status = n.get("status") or {}
        alloc = int((status.get("allocatable") or {}).get(gpu_resource) or 0)
        cap = int((status.get("capacity") or {}).get(gpu_resource) or 0)
        if alloc > 0:
            gpu_nodes.append((n, alloc))
        elif cap > 0:
            unhealthy.append(n["metadata"]["name"])
    if unhealthy:
        report.add(
            WARN,
            "gpus",
            f"{len(unhealthy)} node(s) have {gpu_resource} capacity but none allocatable "
            f"(device plugin unhealthy?): {', '.join(sorted(unhealthy))}",
        )
    if not gpu_nodes:
        report.add(
            FAIL,
            "gpus",
            f"no node exposes allocatable {gpu_resource} ({len(nodes)} node(s)): is the GPU device plugin "
            "(e.g. the NVIDIA device plugin or GPU operator) running?",
        )
        return
    total = sum(a for _, a in gpu_nodes)
    report.add(OK, "gpus", f"{len(gpu_nodes)} of {len(nodes)} node(s) expose {total} allocatable {gpu_resource}")
    labels = (gpu_type_label, *[lb for lb in GPU_TYPE_LABELS if lb != gpu_type_label])
    types: Counter[str] = Counter()
    unlabelled = 0
    for n, alloc in gpu_nodes:
        node_labels = (n.get("metadata") or {}).get("labels") or {}
        found = next((node_labels[lb] for lb in labels if node_labels.get(lb)), None)
        if found is None:
            unlabelled += 1
        else:
            types[found] += alloc
    report.gpu_types = dict(types)
    if types:
        text = ", ".join(f"{t} ({n} GPUs)" for t, n in sorted(types.items()))
        report.add(OK, "gpu types", f"from node labels: {text}")
    if unlabelled:
        report.add(
            WARN,
            "gpu types",
            f"{unlabelled} GPU node(s) have no {gpu_type_label} label: placement.gpu_type cannot "
            "select them (install GPU feature discovery, or label them)",
        )
    taints: Counter[str] = Counter()
    cordoned = []
    for n, _ in gpu_nodes:
        spec = n.get("spec") or {}
        if spec.get("unschedulable"):
            cordoned.append(n["metadata"]["name"])
        for t in spec.get("taints") or ():
            if t.get("effect") in ("NoSchedule", "NoExecute"):
                taints[_taint_text(t)] += 1
    for taint, count in sorted(taints.items()):
        report.add(WARN, "taints", f"{count} GPU node(s) carry {taint}: GPU presets need a matching toleration")
    if cordoned:
        level = FAIL if len(cordoned) == len(gpu_nodes) else WARN
        report.add(
            level, "cordoned", f"{len(cordoned)} of {len(gpu_nodes)} GPU node(s) are cordoned: {', '.join(cordoned)}"
        )


def assess_claim(report: CheckReport, claim_name: str, pvc: Mapping[str, Any] | None) -> None:
    if not claim_name:
        report.add(
            WARN,
            "storage",
            "no artifact volume configured (KubernetesExecutor.artifacts_claim): logs are kept, but "
            "files a run writes end with its pod",
        )
        return
    if pvc is None:
        report.add(
            FAIL, "storage", f'PersistentVolumeClaim "{claim_name}" does not exist in namespace {report.namespace}'
        )
        return
    phase = (pvc.get("status") or {}).get("phase") or "Unknown"
    if phase == "Bound":
        size = ((pvc.get("status") or {}).get("capacity") or {}).get("storage", "?")
        modes = ",".join((pvc.get("spec") or {}).get("accessModes") or ())
        level = OK if "ReadWriteMany" in modes else WARN
        extra = "" if level == OK else " (not ReadWriteMany: runs on several nodes cannot share it)"
        report.add(level, "storage", f'PersistentVolumeClaim "{claim_name}" is Bound ({size}, {modes}){extra}')
    else:
        report.add(
            FAIL,
            "storage",
            f'PersistentVolumeClaim "{claim_name}" is {phase}: runs that mount it cannot be '
            "scheduled (check its storage class and provisioner)",
        )


def assess_permissions(report: CheckReport, answers: Sequence[tuple[Permission, bool]], user: str = "") -> None:
    denied = [p for p, ok in answers if not ok]
    if not denied:
        report.add(OK, "permissions", f"the service account may do all {len(answers)} things the executor needs")
        return
    for p in denied:
        scope = f"in namespace {report.namespace}" if p.namespaced else "cluster-wide"
        report.add(
            FAIL, "permissions", f"may not {p.text} {scope} (needed to {p.why}): apply deploy/kubernetes/rbac.yaml"
        )


def assess_pod_security(report: CheckReport, namespace: Mapping[str, Any] | None) -> None:
    """The runs' namespace enforces Pod Security `restricted` (and audits and warns with it)."""
    ns = report.namespace
    if namespace is None:
        report.add(
            FAIL,
            "pod security",
            f"namespace {ns} does not exist (fix: kubectl apply -f deploy/kubernetes/namespace.yaml)",
        )
        return
    levels = pod_security_levels(((namespace.get("metadata") or {}).get("labels")) or {})
    enforce = levels.get("enforce")
    if enforce != "restricted":
        have = f"enforces only {enforce}" if enforce else "has no pod-security.kubernetes.io/enforce label"
        report.add(
            FAIL,
            "pod security",
            f"namespace {ns} {have}: the cluster would admit a run's pod with hostPath, root or privilege escalation "
            f"there (fix: {label_command(ns)})",
        )
        return
    lax = [m for m in ("audit", "warn") if levels.get(m) != "restricted"]
    if lax:
        report.add(
            WARN,
            "pod security",
            f"namespace {ns} enforces Pod Security restricted but does not {' or '.join(lax)} with it "
            f"(fix: {label_command(ns)})",
        )
        return
    report.add(OK, "pod security", f"namespace {ns} enforces, audits and warns with Pod Security restricted")


def assess_network_policies(report: CheckReport, policies: Sequence[Mapping[str, Any]]) -> None:
    """A NetworkPolicy denies every pod of the runs' namespace all ingress and egress by default."""
    ns = report.namespace
    ingress, egress = default_deny(policies)
    missing = [d for d, found in (("ingress", ingress), ("egress", egress)) if not found]
    if missing:
        report.add(
            FAIL,
            "network policy",
            f"no NetworkPolicy in namespace {ns} denies all {' and '.join(missing)} by default ({len(policies)} "
            "policies): runs may reach the control plane, the database, cloud metadata (169.254.169.254) and other "
            f"tenants' kernels (fix: {NETWORK_FIX})",
        )
        return
    names = ingress if ingress == egress else f"{ingress} and {egress}"
    report.add(
        OK,
        "network policy",
        f"NetworkPolicy {names} denies all ingress and egress in namespace {ns} by default (it holds only where the "
        "cluster's network plugin enforces NetworkPolicies)",
    )


def assess_runs_namespace(report: CheckReport, secrets: Sequence[str], pods: Sequence[Mapping[str, Any]]) -> None:
    """No Secret of the platform and no control-plane or database pod in the runs' namespace."""
    ns = report.namespace
    for name in secrets:
        report.add(
            FAIL,
            "runs namespace",
            f"Secret {name} of the platform is in namespace {ns}, where every run's pod could mount it (fix: keep it "
            f"in the control plane's namespace, gpuplat-system in deploy/kubernetes/, and kubectl -n {ns} delete "
            f"secret {name})",
        )
    for pod in pods:
        meta = pod.get("metadata") or {}
        app = (meta.get("labels") or {}).get("app.kubernetes.io/name", "")
        report.add(
            FAIL,
            "runs namespace",
            f"pod {meta.get('name')} ({app or 'the control plane or its database'}) runs in namespace {ns}, beside "
            "the runs: its Secrets are theirs to mount and no namespace boundary stands between them (fix: deploy it "
            "to gpuplat-system: deploy/kubernetes/control-plane.yaml, postgres.yaml)",
        )
    if not secrets and not pods:
        report.add(OK, "runs namespace", f"no Secret of the platform and no control-plane or database pod in {ns}")


def platform_pod(pod: Mapping[str, Any]) -> bool:
    """The control plane or PostgreSQL, by deploy/'s labels or by what it runs."""
    meta = pod.get("metadata") or {}
    if (meta.get("labels") or {}).get("app.kubernetes.io/name") in PLATFORM_PODS:
        return True
    for c in (pod.get("spec") or {}).get("containers") or ():
        image = str(c.get("image") or "").rsplit("/", 1)[-1]
        if image.startswith("postgres") or list(c.get("command") or ())[:2] == ["gpuplat", "server"]:
            return True
    return False


def check_cluster(
    api: Any,
    namespace: str,
    artifacts_claim: str = "",
    gpu_resource: str = "nvidia.com/gpu",
    gpu_type_label: str = "nvidia.com/gpu.product",
    timeout_seconds: float = 15.0,
    connections: Sequence[Mapping[str, Any]] = (),
) -> CheckReport:
    """Ask the cluster behind `api` (a kubernetes ApiClient) and return the report.

    `connections`: the platform config's (dicts): each one's PVC and Secret must exist.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    target = str(getattr(api.configuration, "host", "?"))
    report = CheckReport(target, namespace)
    kw: dict[str, Any] = {"_preload_content": False, "_request_timeout": timeout_seconds}

    def ask(call: Callable[..., Any], *args: Any) -> Any:
        return json.loads(call(*args, **kw).data)

    try:
        version = ask(client.VersionApi(api).get_code)
    except ApiException as exc:
        report.add(FAIL, "api", f"the API at {target} answers {exc.status} {exc.reason}")
        return report
    except Exception as exc:
        report.add(FAIL, "api", f"cannot reach the Kubernetes API at {target}: {exc}")
        return report
    report.add(OK, "api", f"Kubernetes {version.get('gitVersion', '?')} answers at {target}")

    needed = list(REQUIRED) + ([STORAGE_PERMISSION] if artifacts_claim else [])
    authz = client.AuthorizationV1Api(api)
    answers = []
    for p in needed:
        attrs = {"verb": p.verb, "group": p.group, "resource": p.resource}
        if p.subresource:
            attrs["subresource"] = p.subresource
        if p.namespaced:
            attrs["namespace"] = namespace
        if p.on_namespace:
            attrs["name"] = namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        try:
            answer = ask(authz.create_self_subject_access_review, body)
            answers.append((p, bool((answer.get("status") or {}).get("allowed"))))
        except ApiException as exc:
            report.add(FAIL, "permissions", f"cannot ask whether it may {p.text}: {exc.status} {exc.reason}")
            answers.append((p, False))
    assess_permissions(report, answers)
    allowed = {p for p, ok in answers if ok}

    core = client.CoreV1Api(api)
    if any(p.resource == "nodes" and p.verb == "list" for p in allowed):
        try:
            nodes = ask(core.list_node).get("items") or []
            assess_nodes(report, nodes, gpu_resource, gpu_type_label)
        except ApiException as exc:
            report.add(FAIL, "gpus", f"cannot list nodes: {exc.status} {exc.reason}")
    else:
        report.add(FAIL, "gpus", "cannot see nodes (no list permission), so GPUs cannot be checked")

    if artifacts_claim and STORAGE_PERMISSION not in allowed:
        report.add(FAIL, "storage", f'cannot read PersistentVolumeClaim "{artifacts_claim}" (no get permission)')
    elif artifacts_claim:
        try:
            pvc = ask(core.read_namespaced_persistent_volume_claim, artifacts_claim, namespace)
        except ApiException as exc:
            if exc.status != 404:
                report.add(FAIL, "storage", f"cannot read the artifact volume claim: {exc.status} {exc.reason}")
                return report
            pvc = None
        assess_claim(report, artifacts_claim, pvc)
    else:
        assess_claim(report, "", None)
    check_connections(report, core, namespace, connections, timeout_seconds)
    check_runs_namespace(report, api, allowed, timeout_seconds)
    return report


def check_runs_namespace(report: CheckReport, api: Any, allowed: set[Permission], timeout: float) -> None:
    """Pod Security labels, the default-deny NetworkPolicy, and nothing of the platform's beside the runs."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ns = report.namespace
    core = client.CoreV1Api(api)
    granted = {(p.verb, p.resource) for p in allowed}

    def ask(call: Callable[..., Any], *args: Any, **more: Any) -> Any:
        return json.loads(call(*args, _preload_content=False, _request_timeout=timeout, **more).data)

    if ("get", "namespaces") in granted:
        try:
            assess_pod_security(report, ask(core.read_namespace, ns))
        except ApiException as exc:
            if exc.status == 404:
                assess_pod_security(report, None)
            else:
                report.add(FAIL, "pod security", f"cannot read namespace {ns}: {exc.status} {exc.reason}")
    else:
        report.add(FAIL, "pod security", f"cannot read namespace {ns} (no get permission), so its labels are unknown")

    if ("list", "networkpolicies") in granted:
        try:
            got = ask(client.NetworkingV1Api(api).list_namespaced_network_policy, ns)
            assess_network_policies(report, got.get("items") or [])
        except ApiException as exc:
            report.add(FAIL, "network policy", f"cannot list NetworkPolicies in {ns}: {exc.status} {exc.reason}")
    else:
        report.add(FAIL, "network policy", f"cannot list NetworkPolicies in {ns} (no list permission)")

    found: list[str] = []
    for name in PLATFORM_SECRETS:
        try:
            ask(core.read_namespaced_secret, name, ns)
            found.append(name)
        except ApiException as exc:
            if exc.status != 404:
                report.add(
                    WARN, "runs namespace", f"cannot tell whether Secret {name} is in {ns}: {exc.status} {exc.reason}"
                )
    pods: list[dict[str, Any]] = []
    try:
        listed = ask(core.list_namespaced_pod, ns, label_selector=f"{MANAGED_BY}!={MANAGER}")
        pods = [p for p in listed.get("items") or [] if platform_pod(p)]
    except ApiException as exc:
        report.add(WARN, "runs namespace", f"cannot list the pods of {ns}: {exc.status} {exc.reason}")
    assess_runs_namespace(report, found, pods)


def check_connections(
    report: CheckReport, core: Any, namespace: str, connections: Sequence[Mapping[str, Any]], timeout: float
) -> None:
    """Each connection's backing PVC and Secret (with the keys it takes) exists; values are never read out."""
    from kubernetes.client.exceptions import ApiException

    reads = {
        "PersistentVolumeClaim": core.read_namespaced_persistent_volume_claim,
        "Secret": core.read_namespaced_secret,
    }
    for conn, kind, name, keys in backing_objects(connections):
        where = f'connection {conn}: {kind} "{name}"'
        try:
            got = json.loads(reads[kind](name, namespace, _preload_content=False, _request_timeout=timeout).data)
        except ApiException as exc:
            if exc.status == 404:
                report.add(FAIL, "connections", f"{where} does not exist in namespace {namespace}")
            else:
                report.add(FAIL, "connections", f"{where}: cannot read it: {exc.status} {exc.reason}")
            continue
        if kind == "Secret":
            have = set((got.get("data") or {}).keys()) | set((got.get("stringData") or {}).keys())
            missing = [k for k in keys if k not in have]
            if missing:
                report.add(FAIL, "connections", f"{where} has no key(s) {', '.join(missing)}")
                continue
        elif ((got.get("status") or {}).get("phase") or "Unknown") != "Bound":
            phase = (got.get("status") or {}).get("phase") or "Unknown"
            report.add(FAIL, "connections", f"{where} is {phase}: runs that mount it cannot be scheduled")
            continue
        report.add(OK, "connections", f"{where} exists")
