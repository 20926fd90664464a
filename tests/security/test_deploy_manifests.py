"""deploy/ keeps runs apart from the control plane: every manifest, read as the cluster would get it.

The runs' namespace (the control plane's KubernetesExecutor.namespace) enforces, audits and
warns with Pod Security `restricted`; it holds no Secret, no control plane and no database;
a default-deny NetworkPolicy selects every pod in it, runs may reach DNS and the internet but
no cluster-private or link-local address (cloud metadata); nothing there admits ingress but
each session's own policy, which admits only its owner's Jupyter server; the control plane's
Role is namespaced to the runs' namespace. Every manifest matches the Kubernetes schemas
(offline, strict), and the control plane's and PostgreSQL's pods pass Pod Security
`restricted` as the emulator's admission judges it (their namespace enforces it too).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kube_emulator.admission import pod_security

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import LaunchRequest
from jupyter_gpuplat.executors.kubernetes.check import REQUIRED, STORAGE_PERMISSION
from jupyter_gpuplat.executors.kubernetes.manifests import JobSettings, make_job, make_kernel_policy

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
VALUES = DEPLOY / "jupyterhub" / "values.yaml"
PSA = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
}
# Kubernetes releases each manifest is checked against: ValidatingAdmissionPolicy v1 is GA in 1.30.
VERSIONS = {"optional": ("1.34.0", "1.37.0")}
DEFAULT_VERSIONS = ("1.27.0", "1.34.0")


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """(file relative to deploy/, object) for every Kubernetes object in deploy/ (the Hub values are not objects)."""
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path == VALUES:
            continue
        out.extend((str(path.relative_to(DEPLOY)), d) for d in yaml.safe_load_all(path.read_text()) if d)
    return out


ALL = manifests()
DOCS = [d for _, d in ALL]


def of(kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    return [d for d in DOCS if d["kind"] == kind and (namespace is None or d["metadata"].get("namespace") == namespace)]


def control_plane_config() -> dict[str, Any]:
    [cm] = [d for d in of("ConfigMap") if d["metadata"]["name"] == "gpuplat-config"]
    return dict(json.loads(cm["data"]["gpuplat_server_config.json"]))


RUNS = control_plane_config()["KubernetesExecutor"]["namespace"]
[CONTROL_PLANE] = [d for d in of("Deployment") if d["metadata"]["name"] == "gpuplat"]
SYSTEM = CONTROL_PLANE["metadata"]["namespace"]


@pytest.mark.parametrize(("name", "doc"), ALL, ids=[f"{n}:{d['kind']}/{d['metadata']['name']}" for n, d in ALL])
def test_every_manifest_matches_the_schemas(name: str, doc: dict[str, Any]) -> None:
    for v in VERSIONS.get(name.split("/")[1], DEFAULT_VERSIONS):
        kubernetes_validate.validate(doc, v, strict=True)


def test_the_runs_namespace_enforces_pod_security_restricted() -> None:
    assert RUNS != SYSTEM, "runs apart from the control plane"
    namespaces = {d["metadata"]["name"]: d["metadata"].get("labels") or {} for d in of("Namespace")}
    assert PSA.items() <= namespaces[RUNS].items(), namespaces[RUNS]
    assert PSA.items() <= namespaces[SYSTEM].items(), "the control plane's pods are restricted too"


def test_nothing_of_the_control_plane_is_in_the_runs_namespace() -> None:
    in_runs = {(d["kind"], d["metadata"]["name"]) for d in DOCS if d["metadata"].get("namespace") == RUNS}
    assert not [k for k, _ in in_runs if k in ("Secret", "Deployment", "StatefulSet", "Service", "ConfigMap")], in_runs
    assert in_runs <= {
        ("ServiceAccount", "gpuplat-run"),
        ("Role", "gpuplat-executor"),
        ("RoleBinding", "gpuplat-executor"),
        ("PersistentVolumeClaim", "gpuplat-artifacts"),
        *{("NetworkPolicy", d["metadata"]["name"]) for d in of("NetworkPolicy", RUNS)},
    }, in_runs
    for kind in ("Secret", "Deployment", "StatefulSet", "Service", "ConfigMap"):
        assert {d["metadata"]["namespace"] for d in of(kind)} <= {SYSTEM}, kind
    [pg] = of("StatefulSet")
    assert pg["metadata"]["namespace"] == SYSTEM
    secrets = {d["metadata"]["name"] for d in of("Secret", SYSTEM)}
    assert secrets == {"gpuplat-control-plane", "gpuplat-postgres"}
    url = of("Secret", SYSTEM)[[d["metadata"]["name"] for d in of("Secret", SYSTEM)].index("gpuplat-control-plane")]
    assert f"gpuplat-postgres.{SYSTEM}.svc" in url["stringData"]["db-url"]


def test_the_control_plane_and_postgres_pods_pass_pod_security_restricted() -> None:
    for d in (CONTROL_PLANE, *of("StatefulSet")):
        assert pod_security(d["spec"]["template"]["spec"], "restricted") == [], d["metadata"]["name"]


def _selects_every_pod(policy: dict[str, Any]) -> bool:
    return policy["spec"]["podSelector"] == {}


def test_a_default_deny_network_policy_selects_every_run_pod() -> None:
    policies = of("NetworkPolicy", RUNS)
    deny = [
        p
        for p in policies
        if _selects_every_pod(p)
        and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert deny, "a policy with podSelector {} and both types, no rule"
    # Nothing here opens ingress: each session's kernel gets its own policy from the executor.
    assert not [p["metadata"]["name"] for p in policies if p["spec"].get("ingress")]


def _egress_allows(policies: list[dict[str, Any]], ip: str, port: int) -> list[str]:
    """The policies of the runs' namespace whose egress rules let a run reach `ip:port` (ipBlock rules)."""
    addr = ipaddress.ip_address(ip)
    out = []
    for p in policies:
        for rule in p["spec"].get("egress") or ():
            ports = [x["port"] for x in rule.get("ports") or ()]
            if ports and port not in ports:
                continue
            for peer in rule.get("to") or ():
                block = peer.get("ipBlock")
                if block is None:
                    continue
                net = ipaddress.ip_network(block["cidr"])
                if (
                    addr.version == net.version
                    and addr in net
                    and not any(addr in ipaddress.ip_network(x) for x in block.get("except") or ())
                ):
                    out.append(p["metadata"]["name"])
    return out


@pytest.mark.parametrize(
    ("ip", "what"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "AWS metadata (IPv6)"),
        ("10.96.0.1", "the API server's Service"),
        ("10.244.3.17", "another pod (the control plane, PostgreSQL, a kernel)"),
        ("172.20.0.5", "a private network"),
        ("192.168.1.10", "a private network"),
        ("100.64.0.9", "a CGNAT pod range"),
        ("127.0.0.1", "loopback"),
    ],
)
def test_runs_never_reach_a_cluster_private_or_link_local_address(ip: str, what: str) -> None:
    policies = of("NetworkPolicy", RUNS)
    # Without a policy denying egress to every pod, everything is reachable: the rules below would mean nothing.
    assert [p for p in policies if _selects_every_pod(p) and "Egress" in p["spec"]["policyTypes"]
            and not p["spec"].get("egress")], "a default-deny egress policy"  # fmt: skip
    assert _egress_allows(of("NetworkPolicy", RUNS), ip, 5432) == [], what
    assert _egress_allows(of("NetworkPolicy", RUNS), ip, 443) == [], what


def test_runs_reach_dns_and_the_internet_only() -> None:
    policies = of("NetworkPolicy", RUNS)
    assert _egress_allows(policies, "151.101.0.223", 443)  # a package index
    assert _egress_allows(policies, "2a04:4e42::223", 443)
    peers = [
        (peer, rule.get("ports"))
        for p in policies
        for rule in p["spec"].get("egress") or ()
        for peer in rule.get("to") or ()
        if "ipBlock" not in peer
    ]
    assert peers == [
        (
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            },
            [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        )
    ]


def test_kernel_ports_admit_only_the_owners_singleuser_server() -> None:
    values = yaml.safe_load(VALUES.read_text())
    hub_namespace = control_plane_config()["KubernetesExecutor"]["hub_namespace"]
    settings = JobSettings(namespace=RUNS, hub_namespace=hub_namespace)
    req = LaunchRequest(
        "s-0a1b2c3d4e", Entrypoint("kernel"), {}, (), "/srv/a/s-0a1b2c3d4e",
        spec={"kind": "session", "queue": "interactive"}, project="team-a", user="alice",
    )  # fmt: skip
    policy = make_kernel_policy(req, settings, "uid-1")
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": hub_namespace}},
            "podSelector": {"matchLabels": {"component": "singleuser-server", "hub.jupyter.org/username": "alice"}},
        }
    ]
    pod = make_job(req, settings)["spec"]["template"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert {p["port"] for p in rule["ports"]} == {c["containerPort"] for c in pod["spec"]["containers"][0]["ports"]}
    for v in DEFAULT_VERSIONS:
        kubernetes_validate.validate(policy, v, strict=True)
    # The users' servers may go out to the kernels in the runs' namespace, and to the control plane in its own.
    egress = values["singleuser"]["networkPolicy"]["egress"]
    targets = {
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for r in egress for peer in r["to"]
    }
    assert targets == {RUNS, SYSTEM}
    # The control plane's own namespace admits its port from the Hub's namespace only.
    system = of("NetworkPolicy", SYSTEM)
    assert any(_selects_every_pod(p) and p["spec"]["policyTypes"] == ["Ingress"] and not p["spec"].get("ingress")
               for p in system)  # fmt: skip
    froms = [peer for p in system for r in p["spec"].get("ingress") or () for peer in r["from"]]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": hub_namespace}}} in froms
    assert not [f for f in froms if f.get("namespaceSelector", {}).get("matchLabels", {}).get(
        "kubernetes.io/metadata.name") == RUNS], "no path from the runs into the control plane"  # fmt: skip


def test_the_control_planes_role_is_namespaced_to_the_runs_namespace() -> None:
    [role] = of("Role", RUNS)
    [binding] = of("RoleBinding", RUNS)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpuplat-executor"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": CONTROL_PLANE["spec"]["template"]["spec"]["serviceAccountName"],
         "namespace": SYSTEM}
    ]  # fmt: skip
    [cluster_role] = of("ClusterRole")
    assert [(r["resources"], r["verbs"]) for r in cluster_role["rules"]] == [(["nodes"], ["list", "watch"])]
    granted = {
        (v, g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    needed = {
        (p.verb, p.group, f"{p.resource}/{p.subresource}" if p.subresource else p.resource)
        for p in (*REQUIRED, STORAGE_PERMISSION)
        if p.namespaced
    }
    assert granted == needed
    # Beyond the runs' namespace, only the optional DCGM role: list pods in the exporter's namespace, no more.
    others = [d for d in (*of("Role"), *of("RoleBinding")) if d["metadata"]["namespace"] != RUNS]
    assert {(d["kind"], d["metadata"]["namespace"]) for d in others} == {
        ("Role", "gpu-operator"),
        ("RoleBinding", "gpu-operator"),
    }
    [dcgm] = of("Role", "gpu-operator")
    assert dcgm["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    [dcgm_binding] = of("RoleBinding", "gpu-operator")
    assert dcgm_binding["subjects"] == binding["subjects"]
    [ns_rule] = [r for r in role["rules"] if r["resources"] == ["namespaces"]]
    assert ns_rule["resourceNames"] == [RUNS] and ns_rule["verbs"] == ["get"]
    # The runs' service account is bound to nothing and mounts no token.
    [run_sa] = [d for d in of("ServiceAccount") if d["metadata"]["name"] == "gpuplat-run"]
    assert run_sa["metadata"]["namespace"] == RUNS and run_sa["automountServiceAccountToken"] is False
    bound = [s for b in (*of("RoleBinding"), *of("ClusterRoleBinding")) for s in b["subjects"]]
    assert not [s for s in bound if s["name"] == "gpuplat-run"]
    assert control_plane_config()["KubernetesExecutor"]["service_account"] == "gpuplat-run"


def test_the_artifact_share_is_claimed_in_each_namespace_and_runs_mount_only_their_own_directory() -> None:
    claims = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in of("PersistentVolumeClaim")}
    executor = control_plane_config()["KubernetesExecutor"]
    assert claims == {(RUNS, executor["artifacts_claim"]), (SYSTEM, "gpuplat-artifacts")}
    volumes = {d["spec"]["claimRef"]["namespace"]: d for d in of("PersistentVolume")}
    assert volumes[RUNS]["spec"]["nfs"] == volumes[SYSTEM]["spec"]["nfs"], "one share"
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in CONTROL_PLANE["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert mounted == {"gpuplat-artifacts"}
    req = LaunchRequest(
        "r-0a1b2c3d4e", Entrypoint("shell", shell="true"), {}, (), "/x/r-0a1b2c3d4e", spec={"queue": "q"}
    )
    settings = JobSettings(
        namespace=RUNS,
        artifacts_claim=executor["artifacts_claim"],
        artifacts_mount_path=executor["artifacts_mount_path"],
    )
    pod = make_job(req, settings)["spec"]["template"]["spec"]
    assert pod_security(pod, "restricted") == [], "the executor's pods pass the namespace's level"
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "gpuplat-artifacts"]
    assert [(m["subPath"], m.get("readOnly", False)) for m in mounts] == [
        ("r-0a1b2c3d4e", False),
        ("r-0a1b2c3d4e/code", True),
    ]


def test_the_optional_admission_policy_binds_the_runs_namespace() -> None:
    [policy] = of("ValidatingAdmissionPolicy")
    [binding] = of("ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": RUNS}
    }
    text = json.dumps(policy["spec"]["validations"])
    for rule in ("gpuplat-run", "gpuplat-artifacts", "subPath", "NVIDIA_", "CUDA_VISIBLE_DEVICES"):
        assert rule in text
