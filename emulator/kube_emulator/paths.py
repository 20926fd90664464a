"""What the API's paths name: the discovery documents (version, groups, resource lists) and, for a
resource path, its type, namespace, name and subresource."""

from __future__ import annotations

from typing import Any

from .store import RESOURCES, ApiError, ResourceType

VERSION = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.1-gpuplat-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def discovery(path: str) -> dict[str, Any] | None:
    """The discovery document at `path` (/version, /api, /apis, a group version), or None: not one."""
    if path == "/version":
        return VERSION
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups = sorted({rt.group for rt in RESOURCES.values() if rt.group} | {"authorization.k8s.io"})
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"},
                }
                for g in groups
            ],
        }
    if path in ("/api/v1",) or (path.startswith("/apis/") and path.count("/") == 3):
        group = "" if path == "/api/v1" else path.split("/")[2]
        rts = [rt for rt in RESOURCES.values() if rt.group == group]
        if not rts and group != "authorization.k8s.io":
            return None
        resources = []
        for rt in rts:
            resources.append(
                {
                    "name": rt.plural,
                    "singularName": rt.kind.lower(),
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                }
            )
            resources.extend(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get"],
                }
                for sub in rt.subresources
            )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/v1" if group else "v1",
            "resources": resources,
        }
    return None


def route(path: str) -> tuple[ResourceType, str | None, str | None, str | None]:
    """A resource path's (type, namespace, name, subresource); 404 for what the emulator does not serve."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    ns: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        ns, rest = rest[1], rest[2:]
    rt = RESOURCES.get((group, rest[0]))
    if rt is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in rt.subresources:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if rt.namespaced and name is not None and ns is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return rt, ns, name, sub
