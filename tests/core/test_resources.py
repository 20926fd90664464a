"""Resource quantities (Kubernetes notation) and resource vectors: exact integer arithmetic."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.resources import (
    Quota,
    Resources,
    fmt_amount,
    format_cpu,
    format_memory,
    parse_cpu,
    parse_memory,
)

GI = 2**30
MI = 2**20
KI = 2**10


# ---- parse_cpu --------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "milli"),
    [
        (2, 2000),
        (0, 0),
        (0.5, 500),
        (1.5, 1500),
        (0.25, 250),
        ("2", 2000),
        ("1.5", 1500),
        ("0.1", 100),
        ("500m", 500),
        ("1m", 1),
        ("0m", 0),
        ("2500m", 2500),
        (" 4 ", 4000),
        ("250 m", 250),
        ("100000", 100_000_000),
    ],
)
def test_parse_cpu(value: Any, milli: int) -> None:
    assert parse_cpu(value) == milli
    assert isinstance(parse_cpu(value), int)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "invalid cpu quantity 'abc': use cores (2, 0.5) or millicores ('500m')"),
        ("", "invalid cpu quantity '': use cores (2, 0.5) or millicores ('500m')"),
        ("-1", "invalid cpu quantity '-1': use cores (2, 0.5) or millicores ('500m')"),
        ("2Gi", "invalid cpu quantity '2Gi': use cores (2, 0.5) or millicores ('500m')"),
        ("1.5x", "invalid cpu quantity '1.5x': use cores (2, 0.5) or millicores ('500m')"),
        ("1e3", "invalid cpu quantity '1e3': use cores (2, 0.5) or millicores ('500m')"),
        (".5", "invalid cpu quantity '.5': use cores (2, 0.5) or millicores ('500m')"),
        (None, "invalid cpu quantity None: use cores (2, 0.5) or millicores ('500m')"),
        ([1], "invalid cpu quantity [1]: use cores (2, 0.5) or millicores ('500m')"),
        (-1, "must be >= 0"),
        (-0.5, "must be >= 0"),
        (True, "must be a number of cores or a quantity like '500m'"),
        (False, "must be a number of cores or a quantity like '500m'"),
        (float("inf"), "invalid cpu quantity inf: must be a finite number of cores"),
        (float("nan"), "invalid cpu quantity nan: must be a finite number of cores"),
    ],
)
def test_parse_cpu_rejects(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_cpu(value)
    assert str(exc.value) == message


# ---- parse_memory -----------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "nbytes"),
    [
        (0, 0),
        (1024, 1024),
        (123_456_789, 123_456_789),
        ("1024", 1024),
        ("16Gi", 16 * GI),
        ("512Mi", 512 * MI),
        ("1.5Gi", 1536 * MI),
        ("4Ki", 4 * KI),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1G", 10**9),
        ("1M", 10**6),
        ("2k", 2000),
        ("2K", 2000),
        ("3T", 3 * 10**12),
        ("1P", 10**15),
        (" 8Gi ", 8 * GI),
    ],
)
def test_parse_memory(value: Any, nbytes: int) -> None:
    assert parse_memory(value) == nbytes
    assert isinstance(parse_memory(value), int)


MEM_HINT = "use bytes or a suffix Ki, Mi, Gi, Ti (binary) or k, M, G, T"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", f"invalid memory quantity 'abc': {MEM_HINT}"),
        ("16GB", f"invalid memory quantity '16GB': {MEM_HINT}"),
        ("16gi", f"invalid memory quantity '16gi': {MEM_HINT}"),
        ("1Zi", f"invalid memory quantity '1Zi': {MEM_HINT}"),
        ("500m", f"invalid memory quantity '500m': {MEM_HINT}"),
        ("-1Gi", f"invalid memory quantity '-1Gi': {MEM_HINT}"),
        ("", f"invalid memory quantity '': {MEM_HINT}"),
        (None, f"invalid memory quantity None: {MEM_HINT}"),
        (-1, "must be >= 0"),
        (-0.5, "must be >= 0"),
        (True, "must be a quantity like '16Gi'"),
        (float("inf"), "invalid memory quantity inf: must be a finite number of bytes"),
        (float("-inf"), "invalid memory quantity -inf: must be a finite number of bytes"),
    ],
)
def test_parse_memory_rejects(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_memory(value)
    assert str(exc.value) == message


# ---- format and round trips -------------------------------------------------
@pytest.mark.parametrize(
    ("milli", "text"),
    [(0, "0"), (1000, "1"), (16000, "16"), (500, "500m"), (1500, "1500m"), (1, "1m")],
)
def test_format_cpu(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert parse_cpu(text) == milli


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0"),
        (1, "1"),
        (1000, "1000"),
        (KI, "1Ki"),
        (512 * MI, "512Mi"),
        (1536 * MI, "1536Mi"),
        (16 * GI, "16Gi"),
        (2**40, "1Ti"),
        (3 * 2**40, "3Ti"),
        (10**9, "1000000000"),  # decimal units come back as bytes: not a multiple of a binary unit
        (GI + 1, str(GI + 1)),
    ],
)
def test_format_memory(nbytes: int, text: str) -> None:
    assert format_memory(nbytes) == text
    assert parse_memory(text) == nbytes


@pytest.mark.parametrize("text", ["1", "2", "500m", "1500m", "64", "1m"])
def test_cpu_text_round_trip(text: str) -> None:
    assert format_cpu(parse_cpu(text)) == text


@pytest.mark.parametrize("text", ["16Gi", "512Mi", "4Ki", "1Ti", "1536Mi", "12345"])
def test_memory_text_round_trip(text: str) -> None:
    assert format_memory(parse_memory(text)) == text


def test_decimal_memory_normalises_to_binary_when_exact() -> None:
    assert format_memory(parse_memory("1.5Gi")) == "1536Mi"
    assert format_memory(parse_memory("1024Mi")) == "1Gi"
    assert format_memory(parse_memory("1G")) == "1000000000"


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [("gpu", 3, "3"), ("cpu", 1500, "1500m"), ("cpu", 4000, "4"), ("memory", 8 * GI, "8Gi"), ("memory", 7, "7")],
)
def test_fmt_amount(name: str, value: int, text: str) -> None:
    assert fmt_amount(name, value) == text


# ---- Resources ----------------------------------------------------------------
def test_resources_parse() -> None:
    assert Resources.parse({"gpu": 2, "cpu": "500m", "memory": "16Gi"}) == Resources(2, 500, 16 * GI)
    assert Resources.parse({"cpu": 4}) == Resources(0, 4000, 0)
    assert Resources.parse({}) == Resources()
    assert Resources.parse(None) == Resources()
    # explicit None (a deleted field after merging) reads as 0
    assert Resources.parse({"gpu": None, "cpu": None, "memory": None}) == Resources()


@pytest.mark.parametrize("gpu", [1.5, "2", True])
def test_resources_parse_gpu_must_be_whole(gpu: Any) -> None:
    with pytest.raises(ValueError, match=r"^gpu must be a whole number$"):
        Resources.parse({"gpu": gpu})


def test_resources_parse_propagates_quantity_errors() -> None:
    with pytest.raises(ValueError, match="invalid cpu quantity 'lots'"):
        Resources.parse({"cpu": "lots"})
    with pytest.raises(ValueError, match="invalid memory quantity '2GB'"):
        Resources.parse({"memory": "2GB"})


def test_resources_add_sub() -> None:
    a = Resources(1, 4000, 16 * GI)
    b = Resources(2, 500, 512 * MI)
    assert a + b == Resources(3, 4500, 16 * GI + 512 * MI)
    assert (a + b) - b == a
    assert a - a == Resources()
    assert a + Resources() == a
    # sums are exact integers, never floats
    total = Resources()
    for _ in range(1000):
        total = total + Resources(0, parse_cpu("0.1"), parse_memory("1.1Gi"))
    assert total.cpu_milli == 100_000
    assert total.memory_bytes == 1000 * int(1.1 * GI)
    assert all(isinstance(x, int) for x in (total.gpu, total.cpu_milli, total.memory_bytes))


def test_resources_are_hashable_values() -> None:
    assert Resources(1, 2, 3) == Resources(1, 2, 3)
    assert len({Resources(1, 2, 3), Resources(1, 2, 3), Resources(1, 2, 4)}) == 2


def test_resources_to_dict() -> None:
    assert Resources(2, 1500, 16 * GI).to_dict() == {"gpu": 2, "cpu": "1500m", "memory": "16Gi"}
    assert Resources().to_dict() == {"gpu": 0, "cpu": "0", "memory": "0"}
    r = Resources(1, 4000, 8 * GI)
    assert Resources.parse(r.to_dict()) == r


# ---- Quota --------------------------------------------------------------------
def test_quota_parse() -> None:
    assert Quota.parse({"gpu": 2, "cpu": "16", "memory": "128Gi"}) == Quota(2, 16000, 128 * GI)
    assert Quota.parse({"gpu": 2}) == Quota(gpu=2)
    assert Quota.parse(None) == Quota()
    assert Quota.parse({"gpu": None, "cpu": None, "memory": None}) == Quota()
    assert Quota.parse({"gpu": 0}) == Quota(gpu=0)  # 0 is a limit, not "unlimited"


def test_quota_to_dict() -> None:
    assert Quota(2, 16000, 128 * GI).to_dict() == {"gpu": 2, "cpu": "16", "memory": "128Gi"}
    assert Quota().to_dict() == {"gpu": None, "cpu": None, "memory": None}


SHORTFALL_CASES = [
    pytest.param(Quota(gpu=2), Resources(2), Resources(1), [("gpu", 2, 1, 2)], id="gpu-full"),
    pytest.param(Quota(gpu=2), Resources(1), Resources(1), [], id="gpu-exact-fit"),
    pytest.param(Quota(gpu=2), Resources(0), Resources(3), [("gpu", 0, 3, 2)], id="gpu-never-fits"),
    pytest.param(Quota(gpu=0), Resources(0), Resources(0, 1000), [], id="gpu-0-limit-cpu-only-run"),
    pytest.param(Quota(gpu=0), Resources(0), Resources(1), [("gpu", 0, 1, 0)], id="gpu-0-limit"),
    pytest.param(
        Quota(cpu_milli=16000), Resources(0, 14000), Resources(0, 4000), [("cpu", 14000, 4000, 16000)], id="cpu"
    ),
    pytest.param(
        Quota(memory_bytes=128 * GI),
        Resources(0, 0, 120 * GI),
        Resources(0, 0, 16 * GI),
        [("memory", 120 * GI, 16 * GI, 128 * GI)],
        id="memory",
    ),
    pytest.param(
        Quota(2, 16000, 128 * GI),
        Resources(2, 16000, 128 * GI),
        Resources(1, 500, MI),
        [("gpu", 2, 1, 2), ("cpu", 16000, 500, 16000), ("memory", 128 * GI, MI, 128 * GI)],
        id="all-three-in-order",
    ),
    pytest.param(
        Quota(2, 16000, 128 * GI),
        Resources(1, 15000, 100 * GI),
        Resources(1, 2000, 28 * GI),
        [("cpu", 15000, 2000, 16000)],
        id="only-cpu-over",
    ),
    pytest.param(Quota(), Resources(100, 10**6, 10**15), Resources(100, 10**6, 10**15), [], id="unlimited"),
]


@pytest.mark.parametrize(("quota", "used", "req", "expected"), SHORTFALL_CASES)
def test_quota_shortfalls(
    quota: Quota, used: Resources, req: Resources, expected: list[tuple[str, int, int, int]]
) -> None:
    assert quota.shortfalls(used, req) == expected
