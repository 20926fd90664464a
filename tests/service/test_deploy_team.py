"""Team-mode deployment (deploy/kubernetes/control-plane.yaml, postgres.yaml, deploy/jupyterhub/values.yaml):
the manifests against the Kubernetes schemas (offline, strict;
tests/executors/kubernetes/test_kubernetes_manifests.py), the control plane's flags and config
against the real traits, and the Hub values against the manifests and JupyterHub's own scope
checks, so the pieces name the same service, Secret keys, ports, paths and scopes.

The Zero to JupyterHub chart's schema is not vendored: the values are checked for what team mode needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import yaml
from jupyterhub.scopes import _check_scopes_exist
from jupyterhub.services.service import Service
from jupyterhub.spawner import Spawner

from jupyter_gpuplat.core.config import load_config_text
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor
from jupyter_gpuplat.executors.kubernetes.manifests import KERNEL_PORTS
from jupyter_gpuplat.service.extension import GpuPlat
from jupyter_gpuplat.service.team.server import GpuPlatServer

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
VALUES = ROOT / "deploy" / "jupyterhub" / "values.yaml"
VERSIONS = ("1.27.0", "1.34.0")
SCOPE = "access:services!service=gpuplat"


def docs(*names: str) -> list[dict[str, Any]]:
    return [d for n in names for d in yaml.safe_load_all((KUBE / n).read_text()) if d]


def one(items: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in items if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


@pytest.fixture(scope="module")
def plane() -> list[dict[str, Any]]:
    return docs(
        "control-plane.yaml", "postgres.yaml", "rbac.yaml", "storage.yaml", "priorityclasses.yaml",
        "network-policies.yaml",
    )  # fmt: skip


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text()))


def container(plane: list[dict[str, Any]], name: str = "server") -> dict[str, Any]:
    pod = one(plane, "Deployment", "gpuplat")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] + pod.get("initContainers", []) if c["name"] == name)


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


@pytest.mark.parametrize("name", ["control-plane.yaml", "postgres.yaml"])
def test_team_manifests_match_the_schemas(name: str) -> None:
    for doc in docs(name):
        for v in VERSIONS:
            kubernetes_validate.validate(doc, v, strict=True)


def test_single_leader_does_not_rely_on_one_replica(plane: list[dict[str, Any]]) -> None:
    dep = one(plane, "Deployment", "gpuplat")["spec"]
    assert dep["replicas"] > 1, "standbys: the leader lock and the fencing epoch keep one dispatcher"
    assert dep["strategy"]["type"] != "Recreate"
    # A standby is never Ready while the old leader holds the lock: a rollout that waited for it would hang.
    assert dep["strategy"]["rollingUpdate"]["maxUnavailable"] == "100%"
    assert not any(d["kind"] == "PodDisruptionBudget" for d in plane), "one Ready pod: a PDB would block drains"
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in dep["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"gpuplat-artifacts"}, "no SQLite state volume: the state is in PostgreSQL"
    # The artifact share is claimed in each namespace (the control plane's and the runs'), both ReadWriteMany.
    pvcs = [d for d in plane if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "gpuplat-artifacts"]
    assert {d["metadata"]["namespace"] for d in pvcs} == {"gpuplat-system", "gpuplat-runs"}
    assert all(d["spec"]["accessModes"] == ["ReadWriteMany"] for d in pvcs), "every replica and every run mount it"


def test_probes_name_the_health_endpoints_under_the_service_prefix(plane: list[dict[str, Any]]) -> None:
    c = container(plane)
    prefix = env_of(c)["JUPYTERHUB_SERVICE_PREFIX"]
    assert c["readinessProbe"]["httpGet"]["path"] == f"{prefix}health/ready"  # 503 on a standby
    assert c["livenessProbe"]["httpGet"]["path"] == f"{prefix}health/live"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["readinessProbe"]["httpGet"]["port"] in ports and c["livenessProbe"]["httpGet"]["port"] in ports
    annotations = one(plane, "Deployment", "gpuplat")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == f"{prefix}metrics"
    assert int(annotations["prometheus.io/port"]) == ports["http"]


def server_app(plane: list[dict[str, Any]], tmp_path: Path) -> GpuPlatServer:
    """The control plane as the Deployment starts it: its command line, with the ConfigMap's file at --config."""
    c = container(plane)
    assert c["command"][:2] == ["gpuplat", "server"]
    cm = one(plane, "ConfigMap", "gpuplat-config")
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts["/etc/gpuplat"] == "config"
    argv = []
    for arg in c["command"][2:]:
        if arg.startswith("--config="):
            path = Path(arg.split("=", 1)[1])
            assert path.parent == Path("/etc/gpuplat") and path.name in cm["data"]
            (tmp_path / path.name).write_text(cm["data"][path.name])  # the mounted ConfigMap, here
            arg = f"--config={tmp_path / path.name}"
        argv.append(arg)
    app = GpuPlatServer()
    app.initialize(argv)
    return app


def test_the_control_plane_flags_and_config_are_real_traits(plane: list[dict[str, Any]], tmp_path: Path) -> None:
    cm = one(plane, "ConfigMap", "gpuplat-config")
    conf = json.loads(cm["data"]["gpuplat_server_config.json"])
    assert set(conf["GpuPlatServer"]) <= set(GpuPlatServer.class_traits(config=True))
    assert set(conf["KubernetesExecutor"]) <= set(KubernetesExecutor.class_traits(config=True))
    app = server_app(plane, tmp_path)
    assert (app.ip, app.port) == ("0.0.0.0", 8888)
    assert app.executor_class is KubernetesExecutor
    assert conf["KubernetesExecutor"]["artifacts_mount_path"] == app.artifacts_root
    assert app.config_file == "/etc/gpuplat/platform.yaml"
    platform = load_config_text(cm["data"]["platform.yaml"])  # the sample platform config is valid
    assert {p.name: p.groups for p in platform.projects} == {
        "team-a": {"team-a": "member"},
        "team-b": {"team-b": "member"},
    }
    pcs = {d["metadata"]["name"] for d in plane if d["kind"] == "PriorityClass"}
    assert set(conf["KubernetesExecutor"]["priority_classes"].values()) <= pcs


def test_secrets_are_in_env_from_keys_that_exist(plane: list[dict[str, Any]]) -> None:
    secrets = {d["metadata"]["name"]: set(d["stringData"]) for d in plane if d["kind"] == "Secret"}
    for name in ("server", "migrate"):
        c = container(plane, name)
        assert not any("postgresql" in a for a in c["command"]), "no database password in argv"
        for var in c["env"]:
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in secrets[ref["name"]], (name, var["name"])
    env = env_of(container(plane))
    assert env["GPUPLAT_DB_URL"]["secretKeyRef"]["key"] == "db-url"  # the default of GpuPlatServer.db_url
    assert env["JUPYTERHUB_API_TOKEN"]["secretKeyRef"]["key"] == "hub-api-token"
    assert container(plane, "migrate")["command"] == ["gpuplat", "db", "upgrade"]
    # The sample database URL names the sample PostgreSQL's Service, user and database.
    url = urlparse(secrets_value(plane, "gpuplat-control-plane", "db-url"))
    pg = one(plane, "Service", "gpuplat-postgres")
    assert url.scheme == "postgresql+psycopg" and url.hostname == "gpuplat-postgres.gpuplat-system.svc.cluster.local"
    assert url.port == pg["spec"]["ports"][0]["port"]
    pg_env = env_of(one(plane, "StatefulSet", "gpuplat-postgres")["spec"]["template"]["spec"]["containers"][0])
    assert (url.username, url.path.lstrip("/")) == (pg_env["POSTGRES_USER"], pg_env["POSTGRES_DB"])


def secrets_value(plane: list[dict[str, Any]], name: str, key: str) -> str:
    return str(one(plane, "Secret", name)["stringData"][key])


def test_the_service_selects_the_control_plane(plane: list[dict[str, Any]]) -> None:
    svc = one(plane, "Service", "gpuplat")["spec"]
    labels = one(plane, "Deployment", "gpuplat")["spec"]["template"]["metadata"]["labels"]
    assert svc["selector"].items() <= labels.items()
    assert svc["ports"][0]["targetPort"] in {p["name"] for p in container(plane)["ports"]}


def test_hub_values_name_the_deployed_service(values: dict[str, Any], plane: list[dict[str, Any]]) -> None:
    hub, single = values["hub"], values["singleuser"]
    env = env_of(container(plane))
    name = env["JUPYTERHUB_SERVICE_NAME"]
    assert set(hub["services"]) == {name} and "api_token" not in hub["services"][name]  # generated, in a Secret
    svc = one(plane, "Service", "gpuplat")
    url = urlparse(hub["services"][name]["url"])
    assert url.hostname == f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local"
    assert url.port == svc["spec"]["ports"][0]["port"]
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == f"/services/{name}/"  # where the Hub's proxy routes it
    # Every user's server: the extension in remote mode, pointed at the control plane with its prefix.
    (remote,) = single["extraFiles"].values()
    assert remote["mountPath"].startswith("/etc/jupyter/jupyter_server_config.d/") and remote["mountPath"].endswith(
        ".json"
    )
    conf = remote["data"]
    assert conf["ServerApp"]["jpserver_extensions"] == {"jupyter_gpuplat": True}
    assert set(conf["GpuPlat"]) <= set(GpuPlat.class_traits(config=True))
    assert conf["GpuPlat"]["mode"] == "remote"
    assert conf["GpuPlat"]["control_plane_url"] == f"{url.scheme}://{url.netloc}{env['JUPYTERHUB_SERVICE_PREFIX']}"
    assert not {"db_url", "executor_class", "config_file"} & set(conf["GpuPlat"]), "no store or executor in user pods"


def test_hub_values_grant_and_carry_the_service_scope(values: dict[str, Any], plane: list[dict[str, Any]]) -> None:
    hub = values["hub"]
    (role,) = hub["loadRoles"].values()
    spawner = hub["config"]["Spawner"]
    assert SCOPE in role["scopes"] and SCOPE in spawner["server_token_scopes"]
    assert spawner["oauth_client_allowed_scopes"] == [SCOPE]
    # The default server token's scopes stay (activity, access to its own server).
    assert {"users:activity!user", "access:servers!server"} <= set(spawner["server_token_scopes"])
    # The keys are real: Spawner traits (hub.config passes them through), Service fields, role fields.
    assert set(hub["config"]) == {"Spawner"} and set(spawner) <= set(Spawner.class_traits(config=True))
    assert set(hub["services"]["gpuplat"]) <= set(Service.class_traits())
    assert set(role) <= {"description", "scopes", "users", "groups", "services"}
    for scopes in (role["scopes"], spawner["server_token_scopes"], spawner["oauth_client_allowed_scopes"]):
        _check_scopes_exist(set(scopes))  # JupyterHub's own check (raises on an unknown scope)
    # Groups with a project, or platform admins, may use the service.
    platform = load_config_text(one(plane, "ConfigMap", "gpuplat-config")["data"]["platform.yaml"])
    granted = {g for p in platform.projects for g in p.groups} | set(platform.admin_groups)
    assert set(role["groups"]) == granted


def test_network_policies_open_exactly_the_paths_team_mode_uses(
    values: dict[str, Any], plane: list[dict[str, Any]]
) -> None:
    labels = one(plane, "Deployment", "gpuplat")["spec"]["template"]["metadata"]["labels"]
    namespace = one(plane, "Deployment", "gpuplat")["metadata"]["namespace"]

    def selects_control_plane(rule_peer: dict[str, Any]) -> bool:
        ns = rule_peer["namespaceSelector"]["matchLabels"]
        return (
            ns == {"kubernetes.io/metadata.name": namespace}
            and rule_peer["podSelector"]["matchLabels"].items() <= labels.items()
        )

    (hub_in,) = values["hub"]["networkPolicy"]["ingress"]  # control plane -> Hub API
    assert selects_control_plane(hub_in["from"][0]) and hub_in["ports"] == [{"port": 8081}]
    user_out, kernels = values["singleuser"]["networkPolicy"]["egress"]  # user servers -> control plane
    assert selects_control_plane(user_out["to"][0])
    assert user_out["ports"] == [{"port": container(plane)["ports"][0]["containerPort"]}]
    # user servers -> their GPU session kernels' pods (ZMQ, the executor's fixed ports), in the runs' namespace
    (peer,) = kernels["to"]
    runs = json.loads(one(plane, "ConfigMap", "gpuplat-config")["data"]["gpuplat_server_config.json"])
    assert peer["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": runs["KubernetesExecutor"]["namespace"]
    }
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/managed-by": "jupyter-gpuplat"}
    (ports,) = kernels["ports"]
    assert tuple(range(ports["port"], ports["endPort"] + 1)) == KERNEL_PORTS
    # The fragments are valid NetworkPolicy rules (the chart pastes them into its policies).
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "fragments", "namespace": "jhub"},
        "spec": {"podSelector": {}, "ingress": [hub_in], "egress": [user_out, kernels]},
    }
    for v in VERSIONS:
        kubernetes_validate.validate(policy, v, strict=True)
    api = urlparse(env_of(container(plane))["JUPYTERHUB_API_URL"])
    assert (api.port, api.path) == (8081, "/hub/api")
