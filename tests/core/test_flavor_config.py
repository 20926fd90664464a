"""Flavors in the platform config: named kinds of GPU, a queue's quota split by them, every error at once."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.config import check_flavors, named_paths, parse_config
from jupyter_gpuplat.core.errors import ConfigErrors
from jupyter_gpuplat.core.flavors import device_flavors, flavor_counts

FLAVORS = [
    {"name": "h100", "devices": [0, 1], "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
    {"name": "a100", "gpu_type": "A100", "tolerations": [{"key": "pool", "value": "a100", "effect": "NoSchedule"}]},
]


def errors_of(data: Any) -> list[str]:
    with pytest.raises(ConfigErrors) as exc:
        parse_config(data)
    return exc.value.errors


def test_a_queue_splits_its_quota_by_flavor_in_order() -> None:
    cfg = parse_config(
        {
            "flavors": FLAVORS,
            "queues": [
                {
                    "name": "train",
                    "flavors": [{"name": "h100", "quota": {"gpu": 2}}, {"name": "a100", "quota": {"gpu": 4, "cpu": 8}}],
                },
                {"name": "plain", "quota": {"gpu": 3}},
            ],
        }
    )
    train = cfg.queue("train")
    assert train is not None and [f.name for f in train.flavors] == ["h100", "a100"]
    assert train.flavors[1].quota.quota().cpu_milli == 8000
    plain = cfg.queue("plain")
    assert plain is not None and plain.flavors == [] and plain.quota.quota().gpu == 3
    h100 = cfg.flavor("h100")
    assert h100 is not None and h100.devices == [0, 1] and h100.node_labels == {"nvidia.com/gpu.product": "NVIDIA-H100"}


def test_a_config_without_flavors_is_unchanged() -> None:
    cfg = parse_config({"queues": [{"name": "q", "quota": {"gpu": 2}}]})
    assert cfg.flavors == [] and cfg.queues[0].flavors == []


def test_every_flavor_error_at_once_naming_what_is_allowed() -> None:
    data = {
        "flavors": [*FLAVORS, {"name": "h100"}, {"name": "l4", "devices": [1]}],
        "queues": [
            {
                "name": "train",
                "flavors": [
                    {"name": "h200", "quota": {"gpu": 1}},
                    {"name": "h100", "quota": {"gpu": 3}},
                    {"name": "h100", "quota": {"gpu": 1}},
                ],
            },
            {"name": "bad", "flavors": [{"name": "a100", "quota": {}}]},
        ],
    }
    errors = errors_of(data)
    assert errors == [
        "queues[1].flavors[0].quota.gpu: is required",
        "flavors[2].name: duplicate name 'h100'",
        "flavors[3].devices: device 1 is already flavor 'h100''s",
        "queues[0].flavors[0].name: unknown flavor 'h200' (known: h100, a100, h100, l4)",
        "queues[0].flavors[1].quota.gpu: 3 is more than the 2 device(s) of flavor 'h100' (at most 2)",
        "queues[0].flavors[2].name: flavor 'h100' is listed twice",
    ]
    assert named_paths(errors, data)[0] == "queues[1] (bad).flavors[0].quota.gpu: is required"


def test_a_queue_naming_a_flavor_with_none_declared() -> None:
    errors = errors_of({"queues": [{"name": "q", "flavors": [{"name": "h100", "quota": {"gpu": 1}}]}]})
    assert errors == [
        "queues[0].flavors[0].name: unknown flavor 'h100' (known: none: the platform config declares no flavors)"
    ]


def test_the_machine_bounds_a_flavor_quota_where_its_devices_are_known() -> None:
    cfg = parse_config(
        {
            "flavors": [{"name": "a100", "gpu_type": "A100"}],
            "queues": [{"name": "q", "flavors": [{"name": "a100", "quota": {"gpu": 4}}]}],
        }
    )
    assert check_flavors(cfg) == []  # not known here: any quota
    assert check_flavors(cfg, {"a100": 4}) == []
    assert check_flavors(cfg, {"a100": 2}) == [
        "queues[0].flavors[0].quota.gpu: 4 is more than the 2 device(s) of flavor 'a100' (at most 2)"
    ]


def test_devices_are_typed_by_declaration_or_by_the_name_nvidia_smi_reports() -> None:
    cfg = parse_config(
        {
            "flavors": [
                {"name": "h100", "gpu_type": "h100"},
                {"name": "a100", "gpu_type": "A100"},
                {"name": "spare", "devices": [3]},
            ]
        }
    )
    smi = [(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA A100-SXM4-80GB"), (2, "Tesla T4"), (3, "NVIDIA H100 PCIe")]
    typed = device_flavors(cfg, smi)
    assert typed == {0: "h100", 1: "a100", 3: "spare"}  # a declaration wins; a T4 is of no flavor
    assert flavor_counts(typed) == {"h100": 1, "a100": 1, "spare": 1}
