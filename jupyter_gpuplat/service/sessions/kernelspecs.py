"""Kernelspecs for GPU sessions: one per session preset the server's owner may use.

They are written to a directory private to this server and put first on the kernel spec
manager's `kernel_dirs`, which it reads on every listing: rewriting the directory when the
platform config changes is all a refresh takes (JupyterLab sees it on its next spec poll).
Nothing is left in the user's Jupyter data directory. In remote mode the same specs come from
the control plane's answers (`remote_session_specs`, service/sessions/remote_kernels.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from ...core.config import ROLE_RANK, PlatformConfig
from ...core.policy import allowed_presets, has_role

PROVISIONER = "gpuplat-session"
PREFIX = "gpuplat-"


@dataclass(frozen=True)
class SessionSpec:
    name: str
    project: str
    preset: str
    display_name: str

    def kernel_json(self) -> dict[str, Any]:
        return {
            # The agent runs this (the provisioner launches nothing itself); kept for tools that read argv.
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": self.display_name,
            "language": "python",
            # An interrupt is a message on the control channel: the kernel may not be a process of ours (a pod).
            "interrupt_mode": "message",
            "metadata": {
                "kernel_provisioner": {
                    "provisioner_name": PROVISIONER,
                    "config": {"project": self.project, "preset": self.preset},
                },
                "gpuplat": {"project": self.project, "preset": self.preset},
                "debugger": False,
            },
        }


def session_specs(cfg: PlatformConfig, user: str) -> list[SessionSpec]:
    """The session presets `user` may start, one spec each (named by project too when in several)."""
    sessions = {p.name for p in cfg.presets if p.kind == "session"}
    pairs = [
        (pr.name, preset)
        for pr in cfg.projects
        if has_role(cfg, user, pr.name, "member")
        for preset in allowed_presets(cfg, pr)
        if preset in sessions
    ]
    return specs_for(pairs)


def remote_session_specs(projects: dict[str, Any], presets: dict[str, Any]) -> list[SessionSpec]:
    """The same specs from a control plane's answers: GET projects (roles, usable presets) and GET presets.

    GET presets without a project lists the presets of every project the caller sees, so two
    reads give what `session_specs` reads from the config.
    """
    sessions = {p["name"] for p in presets.get("presets", []) if p.get("kind") == "session"}
    member = ROLE_RANK["member"]
    pairs = [
        (pr["name"], preset)
        for pr in projects.get("projects", [])
        if ROLE_RANK.get(pr.get("role") or "", 0) >= member
        for preset in pr.get("usable_presets") or []
        if preset in sessions
    ]
    return specs_for(pairs)


def specs_for(pairs: list[tuple[str, str]]) -> list[SessionSpec]:
    """One spec per (project, preset), in that order; named by project too when there are several projects."""
    several = len({project for project, _ in pairs}) > 1
    out = []
    for project, preset in pairs:
        if several:
            out.append(
                SessionSpec(f"{PREFIX}{project}--{preset}", project, preset, f"Python 3 (GPU · {preset} · {project})")
            )
        else:
            out.append(SessionSpec(f"{PREFIX}{preset}", project, preset, f"Python 3 (GPU · {preset})"))
    return out


class KernelSpecDir:
    """The server's own kernelspec directory, rewritten whole on every config change."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="gpuplat-kernels-")
        self.names: list[str] = []

    def write(self, specs: list[SessionSpec]) -> None:
        wanted = {s.name for s in specs}
        for name in os.listdir(self.path):
            if name not in wanted:
                shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)
        for spec in specs:
            d = os.path.join(self.path, spec.name)
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, "kernel.json.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(spec.kernel_json(), f, indent=1)
            os.replace(tmp, os.path.join(d, "kernel.json"))
        self.names = sorted(wanted)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
