"""Layered preset merge: strategies, keyed lists, provenance, locks, purity."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from jupyter_gpuplat.core.merge import KEYED_LISTS, Layer, LockViolation, Resolved, leaf_paths, merge_layers


def resolve(*layers: Layer) -> Resolved:
    result = merge_layers(layers)
    # Invariants every result must hold: provenance covers exactly the leaves, in spec order,
    # and the spec survives a JSON round trip unchanged.
    assert list(result.provenance) == leaf_paths(result.spec)
    assert json.loads(json.dumps(result.spec)) == result.spec
    return result


def env(**kv: str | None) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in kv.items()]


GPU_NS = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_NE = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
SPOT = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
SPOT_FALSE = {"key": "spot", "operator": "Equal", "value": "false", "effect": "NoSchedule"}
TOL = "placement.tolerations"

# --- one base layer ("org", post_merge) then one layer ("run") with a strategy --------------
# (base, run values, strategy, expected spec, expected provenance)
STRATEGY_CASES = [
    # post_merge
    pytest.param(
        {"queue": "a", "image": "img:1"},
        {"queue": "b"},
        "post_merge",
        {"queue": "b", "image": "img:1"},
        {"queue": "run", "image": "org"},
        id="post-scalar-new-wins",
    ),
    pytest.param(
        {
            "resources": {"gpu": 1, "cpu": "4"},
            "placement": {"node_selector": {"pool": "a", "zone": "z1"}, "gpu_type": "a100"},
        },
        {"resources": {"gpu": 2, "memory": "16Gi"}, "placement": {"node_selector": {"pool": "b"}}},
        "post_merge",
        {
            "resources": {"gpu": 2, "cpu": "4", "memory": "16Gi"},
            "placement": {"node_selector": {"pool": "b", "zone": "z1"}, "gpu_type": "a100"},
        },
        {
            "resources.gpu": "run",
            "resources.cpu": "org",
            "resources.memory": "run",
            "placement.node_selector.pool": "run",
            "placement.node_selector.zone": "org",
            "placement.gpu_type": "org",
        },
        id="post-nested-mapping-recursive",
    ),
    pytest.param(
        {"placement": {"affinity": {"nodeAffinity": {"required": {"terms": [{"k": "a"}]}, "weight": 1}}}},
        {"placement": {"affinity": {"nodeAffinity": {"required": {"terms": [{"k": "b"}, {"k": "c"}]}}}}},
        "post_merge",
        {"placement": {"affinity": {"nodeAffinity": {"required": {"terms": [{"k": "b"}, {"k": "c"}]}, "weight": 1}}}},
        {"placement.affinity.nodeAffinity.required.terms": "run", "placement.affinity.nodeAffinity.weight": "org"},
        id="post-deep-mapping-plain-list-inside-replaced",
    ),
    pytest.param(
        {"env": env(A="1", B="2")},
        {"env": env(B="20", C="3")},
        "post_merge",
        {"env": env(A="1", B="20", C="3")},
        {"env[A]": "org", "env[B]": "run", "env[C]": "run"},
        id="post-env-by-name-in-place-then-append",
    ),
    pytest.param(
        {"env": env(A="1")},
        {"env": env(B="1") + env(B="2")},
        "post_merge",
        {"env": env(A="1", B="2")},
        {"env[A]": "org", "env[B]": "run"},
        id="post-env-duplicate-key-in-layer-last-wins",
    ),
    pytest.param(
        {"env": env(A="1")},
        {"env": []},
        "post_merge",
        {"env": env(A="1")},
        {"env[A]": "org"},
        id="post-empty-keyed-list-changes-nothing",
    ),
    pytest.param(
        {"placement": {"tolerations": [GPU_NS, SPOT]}},
        {"placement": {"tolerations": [GPU_NE, SPOT_FALSE]}},
        "post_merge",
        {"placement": {"tolerations": [GPU_NS, SPOT_FALSE, GPU_NE]}},
        {
            f"{TOL}[nvidia.com/gpu:NoSchedule]": "org",
            f"{TOL}[spot:NoSchedule]": "run",
            f"{TOL}[nvidia.com/gpu:NoExecute]": "run",
        },
        id="post-tolerations-by-key-and-effect",
    ),
    pytest.param(
        {"placement": {"gpu_type": "a100"}},
        {"placement": {"tolerations": [{"operator": "Exists"}, {"key": "x", "operator": "Exists", "value": None}]}},
        "post_merge",
        {
            "placement": {
                "gpu_type": "a100",
                "tolerations": [{"operator": "Exists"}, {"key": "x", "operator": "Exists"}],
            }
        },
        {"placement.gpu_type": "org", f"{TOL}[:]": "run", f"{TOL}[x:]": "run"},
        id="post-tolerations-missing-key-parts-and-none-fields-dropped",
    ),
    pytest.param(
        {
            "volumes": [
                {"name": "data", "claim": "pvc-a", "mount_path": "/data", "read_only": True},
                {"name": "cache", "host_path": "/c", "mount_path": "/cache"},
            ]
        },
        {
            "volumes": [
                {"name": "data", "claim": "pvc-b", "mount_path": "/d"},
                {"name": "out", "claim": "o", "mount_path": "/out"},
            ]
        },
        "post_merge",
        {
            "volumes": [
                {"name": "data", "claim": "pvc-b", "mount_path": "/d"},
                {"name": "cache", "host_path": "/c", "mount_path": "/cache"},
                {"name": "out", "claim": "o", "mount_path": "/out"},
            ]
        },
        {"volumes[data]": "run", "volumes[cache]": "org", "volumes[out]": "run"},
        id="post-volumes-by-name-whole-item-replaced",
    ),
    pytest.param(
        {"command": ["python", "a.py"]},
        {"command": ["python", "b.py", "--x"]},
        "post_merge",
        {"command": ["python", "b.py", "--x"]},
        {"command": "run"},
        id="post-plain-list-replaced",
    ),
    pytest.param(
        {"queue": "a", "image": "i"},
        {"image": None},
        "post_merge",
        {"queue": "a"},
        {"queue": "org"},
        id="post-none-deletes-field",
    ),
    pytest.param(
        {"resources": {"gpu": 1, "cpu": "4"}, "placement": {"node_selector": {"pool": "a", "zone": "z"}}},
        {"resources": {"cpu": None}, "placement": {"node_selector": {"zone": None}}},
        "post_merge",
        {"resources": {"gpu": 1}, "placement": {"node_selector": {"pool": "a"}}},
        {"resources.gpu": "org", "placement.node_selector.pool": "org"},
        id="post-none-deletes-mapping-key",
    ),
    pytest.param(
        {"resources": {"gpu": 1}},
        {"resources": {"gpu": None}},
        "post_merge",
        {"resources": {}},
        {},
        id="post-none-deletes-last-key-empty-mapping-has-no-leaf",
    ),
    pytest.param(
        {"queue": "a"},
        {"resources": {"gpu": 1, "cpu": None}},
        "post_merge",
        {"queue": "a", "resources": {"gpu": 1}},
        {"queue": "org", "resources.gpu": "run"},
        id="post-none-key-in-new-mapping-dropped",
    ),
    pytest.param(
        {"env": env(A="1", B="2")},
        {"env": env(A=None)},
        "post_merge",
        {"env": env(B="2")},
        {"env[B]": "org"},
        id="post-none-value-deletes-env-var",
    ),
    pytest.param(
        {"env": env(A="1")},
        {"env": env(Z=None)},
        "post_merge",
        {"env": env(A="1")},
        {"env[A]": "org"},
        id="post-deleting-absent-env-var-is-noop",
    ),
    pytest.param(
        {"env": env(A="1")},
        {"env": [{"name": "B"}]},
        "post_merge",
        {"env": [{"name": "A", "value": "1"}, {"name": "B"}]},
        {"env[A]": "org", "env[B]": "run"},
        id="post-env-item-without-value-is-not-a-delete",
    ),
    pytest.param(
        {"placement": {"gpu_type": "a100"}},
        {"placement": "none"},
        "post_merge",
        {"placement": "none"},
        {"placement": "run"},
        id="post-scalar-over-mapping-drops-its-leaves",
    ),
    # pre_merge
    pytest.param(
        {"queue": "a"},
        {"queue": "b", "image": "i"},
        "pre_merge",
        {"queue": "a", "image": "i"},
        {"queue": "org", "image": "run"},
        id="pre-scalar-existing-wins-absent-filled",
    ),
    pytest.param(
        {"resources": {"gpu": 1}, "placement": {"node_selector": {"pool": "a"}}},
        {
            "resources": {"gpu": 4, "cpu": "8"},
            "placement": {"node_selector": {"pool": "b", "zone": "z"}, "gpu_type": "h100"},
        },
        "pre_merge",
        {
            "resources": {"gpu": 1, "cpu": "8"},
            "placement": {"node_selector": {"pool": "a", "zone": "z"}, "gpu_type": "h100"},
        },
        {
            "resources.gpu": "org",
            "resources.cpu": "run",
            "placement.node_selector.pool": "org",
            "placement.node_selector.zone": "run",
            "placement.gpu_type": "run",
        },
        id="pre-nested-mapping-old-wins-new-keys-added",
    ),
    pytest.param(
        {"env": env(A="1", B="2")},
        {"env": env(C="3", B="20", D="4")},
        "pre_merge",
        {"env": env(C="3", D="4", A="1", B="2")},
        {"env[C]": "run", "env[D]": "run", "env[A]": "org", "env[B]": "org"},
        id="pre-env-new-keys-first-existing-win",
    ),
    pytest.param(
        {"placement": {"tolerations": [GPU_NS]}},
        {"placement": {"tolerations": [{**GPU_NS, "operator": "Equal", "value": "x"}, GPU_NE]}},
        "pre_merge",
        {"placement": {"tolerations": [GPU_NE, GPU_NS]}},
        {f"{TOL}[nvidia.com/gpu:NoExecute]": "run", f"{TOL}[nvidia.com/gpu:NoSchedule]": "org"},
        id="pre-tolerations-by-key-and-effect",
    ),
    pytest.param(
        {"volumes": [{"name": "data", "claim": "a"}]},
        {"volumes": [{"name": "data", "claim": "b"}, {"name": "scratch", "host_path": "/tmp"}]},
        "pre_merge",
        {"volumes": [{"name": "scratch", "host_path": "/tmp"}, {"name": "data", "claim": "a"}]},
        {"volumes[scratch]": "run", "volumes[data]": "org"},
        id="pre-volumes-by-name",
    ),
    pytest.param(
        {"queue": "q"},
        {"env": env(A="1", B="2")},
        "pre_merge",
        {"queue": "q", "env": env(A="1", B="2")},
        {"queue": "org", "env[A]": "run", "env[B]": "run"},
        id="pre-keyed-list-absent-set",
    ),
    pytest.param(
        {"command": ["a"]},
        {"command": ["b"]},
        "pre_merge",
        {"command": ["a"]},
        {"command": "org"},
        id="pre-plain-list-kept",
    ),
    pytest.param(
        {"queue": "q"},
        {"command": ["b"]},
        "pre_merge",
        {"queue": "q", "command": ["b"]},
        {"queue": "org", "command": "run"},
        id="pre-plain-list-absent-set",
    ),
    pytest.param(
        {"queue": "a", "image": "i"},
        {"queue": None, "image": None, "kind": None},
        "pre_merge",
        {"queue": "a", "image": "i"},
        {"queue": "org", "image": "org"},
        id="pre-none-field-ignored",
    ),
    pytest.param(
        {"resources": {"gpu": 1, "cpu": "4"}},
        {"resources": {"cpu": None, "memory": None}},
        "pre_merge",
        {"resources": {"gpu": 1, "cpu": "4"}},
        {"resources.gpu": "org", "resources.cpu": "org"},
        id="pre-none-mapping-key-ignored",
    ),
    pytest.param(
        {"env": env(A="1")},
        {"env": env(A=None, Z=None)},
        "pre_merge",
        {"env": env(A="1")},
        {"env[A]": "org"},
        id="pre-env-delete-marker-ignored",
    ),
    # isnull
    pytest.param(
        {"queue": "a"},
        {"queue": "b", "image": "i"},
        "isnull",
        {"queue": "a", "image": "i"},
        {"queue": "org", "image": "run"},
        id="isnull-scalar-only-if-absent",
    ),
    pytest.param(
        {"resources": {"gpu": 1}, "placement": {"gpu_type": "a100"}},
        {"resources": {"gpu": 2, "cpu": "8"}, "placement": {"tolerations": [GPU_NS]}},
        "isnull",
        {"resources": {"gpu": 1}, "placement": {"gpu_type": "a100"}},
        {"resources.gpu": "org", "placement.gpu_type": "org"},
        id="isnull-adds-no-keys-to-existing-mapping",
    ),
    pytest.param(
        {"queue": "a"},
        {"resources": {"gpu": 2, "cpu": None}, "env": env(A="1", B=None)},
        "isnull",
        {"queue": "a", "resources": {"gpu": 2}, "env": env(A="1")},
        {"queue": "org", "resources.gpu": "run", "env[A]": "run"},
        id="isnull-absent-fields-set-normalised",
    ),
    pytest.param(
        {"env": env(A="1"), "command": ["a"]},
        {"env": env(B="2"), "command": ["b"]},
        "isnull",
        {"env": env(A="1"), "command": ["a"]},
        {"env[A]": "org", "command": "org"},
        id="isnull-lists-kept-when-present",
    ),
    pytest.param(
        {"queue": "a"},
        {"queue": None, "image": None},
        "isnull",
        {"queue": "a"},
        {"queue": "org"},
        id="isnull-none-is-noop",
    ),
    # replace
    pytest.param(
        {"queue": "a", "image": "i"},
        {"queue": "b"},
        "replace",
        {"queue": "b", "image": "i"},
        {"queue": "run", "image": "org"},
        id="replace-scalar",
    ),
    pytest.param(
        {
            "resources": {"gpu": 1, "cpu": "4", "memory": "8Gi"},
            "placement": {"node_selector": {"pool": "a"}, "gpu_type": "a100"},
        },
        {"resources": {"gpu": 2}, "placement": {"node_selector": {"zone": "z"}}},
        "replace",
        {"resources": {"gpu": 2}, "placement": {"node_selector": {"zone": "z"}}},
        {"resources.gpu": "run", "placement.node_selector.zone": "run"},
        id="replace-mapping-drops-old-keys",
    ),
    pytest.param(
        {"env": env(A="1", B="2")},
        {"env": env(C="3", B="20")},
        "replace",
        {"env": env(C="3", B="20")},
        {"env[C]": "run", "env[B]": "run"},
        id="replace-keyed-list-wholesale",
    ),
    pytest.param(
        {"command": ["a", "b"]},
        {"command": ["c"]},
        "replace",
        {"command": ["c"]},
        {"command": "run"},
        id="replace-plain-list",
    ),
    pytest.param(
        {"queue": "a", "resources": {"gpu": 1, "cpu": "2"}},
        {"resources": None},
        "replace",
        {"queue": "a"},
        {"queue": "org"},
        id="replace-none-deletes-field",
    ),
]


@pytest.mark.parametrize(("base", "values", "strategy", "spec", "provenance"), STRATEGY_CASES)
def test_strategy(base: dict, values: dict, strategy: str, spec: dict, provenance: dict) -> None:
    result = resolve(Layer("org", base), Layer("run", values, strategy))
    assert result.spec == spec
    assert result.provenance == provenance
    assert result.violations == ()


# --- ordering of keyed items across several layers ----------------------------------------
ORDER_CASES = [
    pytest.param(
        [
            Layer("org", {"env": env(A="1", B="2")}),
            Layer("project", {"env": env(C="3", A="10")}),
            Layer("run", {"env": env(D="4", B="20")}),
        ],
        env(A="10", B="20", C="3", D="4"),
        {"env[A]": "project", "env[B]": "run", "env[C]": "project", "env[D]": "run"},
        id="post-existing-keep-position-new-appended-in-order",
    ),
    pytest.param(
        [
            Layer("org", {"env": env(A="1", B="2")}),
            Layer("p1", {"env": env(C="3", A="10")}, "pre_merge"),
            Layer("p2", {"env": env(D="4", E="5", C="30")}, "pre_merge"),
        ],
        env(D="4", E="5", C="3", A="1", B="2"),
        {"env[D]": "p2", "env[E]": "p2", "env[C]": "p1", "env[A]": "org", "env[B]": "org"},
        id="pre-new-first-in-layer-order-then-existing",
    ),
    pytest.param(
        [
            Layer("org", {"env": env(A="1", B="2", C="3")}),
            Layer("project", {"env": env(B=None, D="4")}),
            Layer("run", {"env": env(B="new", A=None)}),
        ],
        env(C="3", D="4", B="new"),
        {"env[C]": "org", "env[D]": "project", "env[B]": "run"},
        id="post-deleted-key-re-added-goes-last",
    ),
]


@pytest.mark.parametrize(("layers", "env_list", "provenance"), ORDER_CASES)
def test_keyed_ordering(layers: list[Layer], env_list: list, provenance: dict) -> None:
    result = resolve(*layers)
    assert result.spec == {"env": env_list}
    assert result.provenance == provenance


# --- provenance through the full layer stack ----------------------------------------------
FULL_STACK = [
    Layer(
        "org",
        {
            "kind": "job",
            "queue": "batch",
            "resources": {"gpu": 0, "cpu": "2", "memory": "8Gi"},
            "image": "base:1",
            "env": env(TZ="UTC"),
            "termination": {"timeout_seconds": 86400},
        },
    ),
    Layer(
        "project:team-a",
        {
            "queue": "team-a",
            "env": env(HF_HOME="/data/hf"),
            "volumes": [{"name": "data", "claim": "team-a-data", "mount_path": "/data"}],
        },
    ),
    Layer(
        "preset:single-gpu",
        {
            "resources": {"gpu": 1, "cpu": "8", "memory": "32Gi"},
            "placement": {"gpu_type": "a100", "tolerations": [GPU_NS], "node_selector": {"pool": "gpu"}},
        },
    ),
    Layer(
        "preset:pytorch",
        {
            "image": "pytorch:2.3",
            "env": env(HF_HOME="/cache/hf", OMP_NUM_THREADS="8"),
            "volumes": [{"name": "cache", "host_path": "/cache", "mount_path": "/cache"}],
        },
    ),
    Layer(
        "run",
        {
            "kind": "session",
            "resources": {"memory": "64Gi"},
            "env": env(TZ=None, DEBUG="1"),
            "termination": {"idle_seconds": 3600},
            "command": ["python", "train.py"],
        },
    ),
]

REMOVAL_STACK = [
    Layer(
        "org",
        {
            "resources": {"gpu": 1, "cpu": "2"},
            "placement": {"node_selector": {"pool": "a", "zone": "z"}, "gpu_type": "a100"},
            "env": env(A="1"),
            "image": "base:1",
        },
    ),
    Layer("project:p", {"placement": {"node_selector": {"pool": "b"}}}, "replace"),
    Layer(
        "preset:pre",
        {
            "resources": {"gpu": 4, "memory": "8Gi"},
            "placement": {"gpu_type": "h100", "node_selector": {"pool": "c"}},
            "env": env(B="2", A="2"),
        },
        "pre_merge",
    ),
    Layer("preset:post", {"image": "pytorch:2.3", "env": env(C="3")}),
    Layer("run", {"resources": None, "env": env(A=None), "image": "pytorch:2.3"}),
]

PROVENANCE_CASES = [
    pytest.param(
        FULL_STACK,
        {
            "kind": "session",
            "queue": "team-a",
            "resources": {"gpu": 1, "cpu": "8", "memory": "64Gi"},
            "image": "pytorch:2.3",
            "env": env(HF_HOME="/cache/hf", OMP_NUM_THREADS="8", DEBUG="1"),
            "termination": {"timeout_seconds": 86400, "idle_seconds": 3600},
            "volumes": [
                {"name": "data", "claim": "team-a-data", "mount_path": "/data"},
                {"name": "cache", "host_path": "/cache", "mount_path": "/cache"},
            ],
            "placement": {"gpu_type": "a100", "tolerations": [GPU_NS], "node_selector": {"pool": "gpu"}},
            "command": ["python", "train.py"],
        },
        {
            "kind": "run",
            "queue": "project:team-a",
            "resources.gpu": "preset:single-gpu",
            "resources.cpu": "preset:single-gpu",
            "resources.memory": "run",
            "image": "preset:pytorch",
            "env[HF_HOME]": "preset:pytorch",
            "env[OMP_NUM_THREADS]": "preset:pytorch",
            "env[DEBUG]": "run",
            "termination.timeout_seconds": "org",
            "termination.idle_seconds": "run",
            "volumes[data]": "project:team-a",
            "volumes[cache]": "preset:pytorch",
            "placement.gpu_type": "preset:single-gpu",
            "placement.tolerations[nvidia.com/gpu:NoSchedule]": "preset:single-gpu",
            "placement.node_selector.pool": "preset:single-gpu",
            "command": "run",
        },
        id="org-project-preset-preset-run",
    ),
    pytest.param(
        REMOVAL_STACK,
        {
            "placement": {"node_selector": {"pool": "b"}, "gpu_type": "h100"},
            "env": env(B="2", C="3"),
            "image": "pytorch:2.3",
        },
        {
            # zone/gpu_type of org went with the replace; resources.* went with the delete
            "placement.node_selector.pool": "project:p",
            "placement.gpu_type": "preset:pre",
            "env[B]": "preset:pre",
            "env[C]": "preset:post",
            # an equal value set again still moves provenance to the later layer
            "image": "run",
        },
        id="removal-by-replace-delete-and-pre-merge-adds-only",
    ),
]


@pytest.mark.parametrize(("layers", "spec", "provenance"), PROVENANCE_CASES)
def test_provenance(layers: list[Layer], spec: dict, provenance: dict) -> None:
    result = resolve(*layers)
    assert result.spec == spec
    assert result.provenance == provenance
    assert result.violations == ()


# --- locks ---------------------------------------------------------------------------------
# (layers, expected spec, expected provenance, expected violations as tuples)
LOCK_CASES = [
    pytest.param(
        [
            Layer("org", {"queue": "batch", "resources": {"gpu": 0}}),
            Layer("preset:single-gpu", {"resources": {"gpu": 1}}, locked=("resources.gpu",)),
            Layer("run", {"resources": {"gpu": 4, "cpu": "8"}, "queue": "fast"}),
        ],
        {"queue": "fast", "resources": {"gpu": 1, "cpu": "8"}},
        {"queue": "run", "resources.gpu": "preset:single-gpu", "resources.cpu": "run"},
        [("resources.gpu", "preset:single-gpu", "run", 1, 4)],
        id="locked-scalar-kept-rest-of-layer-applies",
    ),
    pytest.param(
        [
            Layer(
                "preset:a100",
                {"placement": {"gpu_type": "a100", "node_selector": {"pool": "gpu"}}},
                locked=("placement",),
            ),
            Layer("run", {"placement": {"node_selector": {"pool": "cpu"}}, "image": "x"}),
        ],
        {"placement": {"gpu_type": "a100", "node_selector": {"pool": "gpu"}}, "image": "x"},
        {"placement.gpu_type": "preset:a100", "placement.node_selector.pool": "preset:a100", "image": "run"},
        [
            (
                "placement",
                "preset:a100",
                "run",
                {"gpu_type": "a100", "node_selector": {"pool": "gpu"}},
                {"gpu_type": "a100", "node_selector": {"pool": "cpu"}},
            )
        ],
        id="locked-mapping-child-change",
    ),
    pytest.param(
        [
            Layer("preset:p", {"resources": {"gpu": 1, "cpu": "4"}}, locked=("resources.gpu",)),
            Layer("run", {"resources": {"cpu": "16"}}, "replace"),
        ],
        {"resources": {"cpu": "16", "gpu": 1}},
        {"resources.cpu": "run", "resources.gpu": "preset:p"},
        [("resources.gpu", "preset:p", "run", 1, None)],
        id="lock-bypass-by-replacing-parent",
    ),
    pytest.param(
        [
            Layer("preset:p", {"resources": {"gpu": 1, "cpu": "4"}, "queue": "q"}, locked=("resources.gpu",)),
            Layer("run", {"resources": None, "queue": None}),
        ],
        {"resources": {"gpu": 1}},
        {"resources.gpu": "preset:p"},
        [("resources.gpu", "preset:p", "run", 1, None)],
        id="lock-bypass-by-deleting-parent",
    ),
    pytest.param(
        [
            Layer("preset:p", {"resources": {"gpu": 1}}, locked=("resources.gpu",)),
            Layer("run", {"resources": {"gpu": 1, "cpu": "8"}}),
        ],
        {"resources": {"gpu": 1, "cpu": "8"}},
        {"resources.gpu": "preset:p", "resources.cpu": "run"},
        [],
        id="same-value-not-a-violation-provenance-frozen",
    ),
    pytest.param(
        [
            Layer("org", {"queue": "batch"}, locked=("queue",)),
            Layer("preset:p", {"queue": "batch"}, locked=("queue",)),
            Layer("run", {"queue": "fast"}),
        ],
        {"queue": "batch"},
        {"queue": "org"},
        [("queue", "org", "run", "batch", "fast")],
        id="lock-attributed-to-first-layer",
    ),
    pytest.param(
        [
            Layer("org", {"queue": "batch"}),
            Layer("preset:p", {"queue": "gpu"}, locked=("queue",)),
        ],
        {"queue": "gpu"},
        {"queue": "preset:p"},
        [],
        id="lock-binds-only-later-layers",
    ),
    pytest.param(
        [
            Layer("org", {"queue": "batch"}, locked=("placement.gpu_type",)),
            Layer("run", {"placement": {"gpu_type": "h100", "node_selector": {"pool": "p"}}}),
        ],
        {"queue": "batch", "placement": {"node_selector": {"pool": "p"}}},
        {"queue": "org", "placement.node_selector.pool": "run"},
        [("placement.gpu_type", "org", "run", None, "h100")],
        id="lock-on-absent-path-keeps-it-absent",
    ),
    pytest.param(
        [
            Layer("org", {"queue": "batch"}, locked=("placement.gpu_type",)),
            Layer("run", {"placement": {"gpu_type": "h100"}}),
        ],
        {"queue": "batch"},
        {"queue": "org"},
        [("placement.gpu_type", "org", "run", None, "h100")],
        id="lock-on-absent-path-prunes-parent-it-created",
    ),
    pytest.param(
        [
            Layer("project:p", {"env": env(A="1")}, locked=("env",)),
            Layer("run", {"env": env(B="2"), "queue": "q"}),
        ],
        {"env": env(A="1"), "queue": "q"},
        {"env[A]": "project:p", "queue": "run"},
        [("env", "project:p", "run", env(A="1"), env(A="1", B="2"))],
        id="locked-keyed-list-no-additions",
    ),
    pytest.param(
        [
            Layer("preset:p", {"resources": {"gpu": 1}}, locked=("resources",)),
            Layer("preset:q", {"resources": {"gpu": 2}}, "pre_merge"),
            Layer("run", {"resources": {"cpu": "8"}}, "pre_merge"),
        ],
        {"resources": {"gpu": 1}},
        {"resources.gpu": "preset:p"},
        [("resources", "preset:p", "run", {"gpu": 1}, {"gpu": 1, "cpu": "8"})],
        id="pre-merge-conflict-no-violation-new-key-is-one",
    ),
    pytest.param(
        [
            Layer(
                "org",
                {"placement": {"gpu_type": "a100", "node_selector": {"pool": "a"}}},
                locked=("placement.gpu_type",),
            ),
            Layer("preset:p", {}, locked=("placement",)),
            Layer("run", {"placement": {"gpu_type": "h100", "node_selector": {"pool": "b"}}}),
        ],
        {"placement": {"gpu_type": "a100", "node_selector": {"pool": "a"}}},
        {"placement.gpu_type": "org", "placement.node_selector.pool": "org"},
        [
            ("placement.gpu_type", "org", "run", "a100", "h100"),
            (
                "placement",
                "preset:p",
                "run",
                {"gpu_type": "a100", "node_selector": {"pool": "a"}},
                {"gpu_type": "a100", "node_selector": {"pool": "b"}},
            ),
        ],
        id="overlapping-locks-checked-in-lock-order",
    ),
    pytest.param(
        [
            Layer(
                "org",
                {"image": "base:1", "termination": {"timeout_seconds": 3600}},
                locked=("image", "termination.timeout_seconds"),
            ),
            Layer("preset:p", {"image": "other:2", "termination": {"idle_seconds": 600}}),
            Layer("run", {"termination": {"timeout_seconds": 7200}}, "replace"),
        ],
        {"image": "base:1", "termination": {"timeout_seconds": 3600}},
        {"image": "org", "termination.timeout_seconds": "org"},
        [
            ("image", "org", "preset:p", "base:1", "other:2"),
            ("termination.timeout_seconds", "org", "run", 3600, 7200),
        ],
        id="violations-from-several-layers-in-order",
    ),
]


@pytest.mark.parametrize(("layers", "spec", "provenance", "violations"), LOCK_CASES)
def test_locks(layers: list[Layer], spec: dict, provenance: dict, violations: list[tuple]) -> None:
    result = resolve(*layers)
    assert result.spec == spec
    assert result.provenance == provenance
    assert [
        (v.path, v.locked_by, v.attempted_by, v.locked_value, v.attempted_value) for v in result.violations
    ] == violations


@pytest.mark.parametrize(
    ("violation", "message"),
    [
        pytest.param(
            LockViolation("resources.gpu", "preset:single-gpu", "run", 1, 4),
            "resources.gpu is locked by preset:single-gpu (1); run tried to set 4",
            id="scalar",
        ),
        pytest.param(
            LockViolation("resources.gpu", "preset:single-gpu", "run", 1, None),
            "resources.gpu is locked by preset:single-gpu (1); run tried to remove it",
            id="removed",
        ),
        pytest.param(
            LockViolation("placement.gpu_type", "org", "run", None, "h100"),
            "placement.gpu_type is locked by org (unset); run tried to set h100",
            id="locked-while-unset",
        ),
        pytest.param(
            LockViolation("placement", "preset:a100", "run", {"gpu_type": "a100"}, {"gpu_type": "h100"}),
            'placement is locked by preset:a100 ({"gpu_type": "a100"}); run tried to set {"gpu_type": "h100"}',
            id="mapping-as-json",
        ),
    ],
)
def test_violation_message(violation: LockViolation, message: str) -> None:
    assert violation.message() == message


# --- purity ----------------------------------------------------------------------------------
ALL_STACKS = [
    pytest.param([Layer("org", p.values[0]), Layer("run", p.values[1], p.values[2])], id=p.id) for p in STRATEGY_CASES
] + [pytest.param(p.values[0], id=p.id) for p in ORDER_CASES + PROVENANCE_CASES + LOCK_CASES]


@pytest.mark.parametrize("layers", ALL_STACKS)
def test_inputs_not_mutated_and_result_not_aliased(layers: list[Layer]) -> None:
    before = copy.deepcopy(layers)
    result = merge_layers(layers)
    assert layers == before
    # Scribbling over every container of the result must not reach the inputs.
    _scribble(result.spec)
    assert layers == before
    # Nor does a second merge see any state left by the first.
    assert merge_layers(before) == merge_layers(layers)


def _scribble(value: Any) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _scribble(v)
        value["__x"] = 1
    elif isinstance(value, list):
        for v in value:
            _scribble(v)
        value.append("__x")


# --- misc ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "paths"),
    [
        pytest.param({}, [], id="empty"),
        pytest.param({"resources": {}, "env": [], "queue": "q"}, ["queue"], id="empty-mapping-and-keyed-list-no-leaf"),
        pytest.param(
            {
                "queue": "q",
                "resources": {"gpu": 1},
                "placement": {"node_selector": {"pool": "a"}, "tolerations": [GPU_NS, {"key": "x"}]},
                "env": env(A="1"),
                "volumes": [{"name": "data"}],
                "command": ["a", "b"],
            },
            [
                "queue",
                "resources.gpu",
                "placement.node_selector.pool",
                "placement.tolerations[nvidia.com/gpu:NoSchedule]",
                "placement.tolerations[x:]",
                "env[A]",
                "volumes[data]",
                "command",
            ],
            id="every-leaf-kind",
        ),
    ],
)
def test_leaf_paths(spec: dict, paths: list[str]) -> None:
    assert leaf_paths(spec) == paths


def test_keyed_lists_table() -> None:
    assert KEYED_LISTS == {"env": ("name",), "placement.tolerations": ("key", "effect"), "volumes": ("name",)}


def test_no_layers_resolves_to_empty() -> None:
    assert merge_layers([]) == Resolved(spec={}, provenance={}, violations=())


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="layer run: unknown merge strategy 'merge'"):
        merge_layers([Layer("run", {"queue": "q"}, "merge")])
