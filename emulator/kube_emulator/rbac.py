"""RBAC: which verbs the emulated service account may use, from real Role manifests.

Built from the project's own deployment manifests, the emulator refuses every call
the Role does not grant, so end-to-end tests show the Role is enough (and the
executor needs nothing more). SelfSubjectAccessReviews are answered from it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str] = frozenset()  # resourceNames: empty means every name

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Rule:
        return cls(
            frozenset(raw.get("apiGroups") or ()),
            frozenset(raw.get("resources") or ()),
            frozenset(raw.get("verbs") or ()),
            frozenset(raw.get("resourceNames") or ()),
        )

    def allows(self, verb: str, group: str, resource: str, name: str = "") -> bool:
        return (
            ("*" in self.api_groups or group in self.api_groups)
            and ("*" in self.resources or resource in self.resources)
            and ("*" in self.verbs or verb in self.verbs)
            and (not self.names or name in self.names)
        )


@dataclass
class Permissions:
    """None for `namespaced`/`cluster` means unrestricted (the default: a cluster admin).

    `namespaced` maps a namespace to the rules its RoleBindings grant the service account
    there, which may be another namespace than the account's own (the control plane in
    `gpuplat-system`, bound to a Role in `gpuplat-runs`). A request for a Namespace object
    is judged in that namespace, as the real apiserver's RequestInfo does, so a Role may
    grant `get` on its own namespace.
    """

    user: str = "system:serviceaccount:gpuplat:gpuplat"
    namespaced: dict[str, list[Rule]] | None = None
    cluster: list[Rule] | None = None
    denied: set[tuple[str, str, str]] = field(default_factory=set)  # (verb, group, resource) refused on top

    @classmethod
    def from_manifests(cls, docs: Iterable[Mapping[str, Any]], service_account: str, namespace: str) -> Permissions:
        """The rules bound to `service_account` of `namespace` by the Roles and ClusterRoles in `docs`."""
        docs = [d for d in docs if d]
        roles = {
            (d["kind"], d["metadata"].get("namespace", "") if d["kind"] == "Role" else "", d["metadata"]["name"]): d
            for d in docs
            if d.get("kind") in ("Role", "ClusterRole")
        }
        namespaced: dict[str, list[Rule]] = {}
        cluster: list[Rule] = []
        for b in docs:
            if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            where = b["metadata"].get("namespace", "")
            if not any(
                s.get("kind") == "ServiceAccount"
                and s.get("name") == service_account
                and s.get("namespace", where) == namespace
                for s in b.get("subjects") or ()
            ):
                continue
            ref = b["roleRef"]
            role = roles.get((ref["kind"], where if ref["kind"] == "Role" else "", ref["name"]))
            if role is None:
                continue
            rules = [Rule.parse(r) for r in role.get("rules") or ()]
            if b["kind"] == "ClusterRoleBinding":
                cluster.extend(rules)
            else:  # a RoleBinding grants its role's rules in the binding's namespace only
                namespaced.setdefault(where, []).extend(rules)
        return cls(f"system:serviceaccount:{namespace}:{service_account}", namespaced, cluster)

    def deny(self, verb: str, group: str, resource: str) -> None:
        self.denied.add((verb, group, resource))

    def allows(self, verb: str, group: str, resource: str, namespace: str | None, name: str = "") -> bool:
        if (verb, group, resource) in self.denied:
            return False
        if self.namespaced is None and self.cluster is None:
            return True
        if any(r.allows(verb, group, resource, name) for r in self.cluster or ()):
            return True
        if namespace is not None:
            return any(r.allows(verb, group, resource, name) for r in (self.namespaced or {}).get(namespace, ()))
        return False

    def forbidden_message(self, verb: str, group: str, resource: str, namespace: str | None, name: str = "") -> str:
        plural = resource.split("/")[0]
        subject = f"{plural}.{group}" if group else plural
        subject = f'{subject} "{name}"' if name else subject
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        return (
            f'{subject} is forbidden: User "{self.user}" cannot {verb} resource "{resource}" '
            f'in API group "{group}" {scope}'
        )
