"""A run's `gpu_usage` from its GPU samples (issue 27's core), each figure counted by hand."""

from __future__ import annotations

import pytest

from jupyter_gpuplat.core.gpu_usage import (
    NotMeasured,
    Sample,
    gpu_hours,
    idle_notice,
    percent_text,
    seconds_in,
    summary,
    with_text,
)

GiB = 1 << 30


def test_one_device_every_figure_by_hand() -> None:
    got = summary(
        [Sample(0, 0, 0.0, GiB), Sample(10, 0, 50.0, 3 * GiB), Sample(20, 0, 100.0, 2 * GiB)], interval_seconds=10
    )
    # Each sample stands for 10 s: 30 s sampled, 20 s at or over 5%.
    assert got == {
        "measured": True,
        "reason": None,
        "devices": [0],
        "samples": 3,
        "mean_util": 50.0,
        "p50_util": 50.0,
        "memory_peak_bytes": 3 * GiB,
        "busy_fraction": pytest.approx(2 / 3, abs=1e-6),
        "seconds_sampled": 30.0,
        "seconds_busy": 20.0,
        "busy_percent": 5.0,
        "interval_seconds": 10,
        "text": "GPU busy 67% of 30 s · mean util 50% · memory peak 3.0 GiB",
        "busy_text": "67%",
        "memory_peak_text": "3.0 GiB",
    }
    assert gpu_hours(got) == pytest.approx((30 / 3600, 20 / 3600))


def test_a_stalled_sampler_counts_at_most_twice_the_interval() -> None:
    got = summary([Sample(0, 0, 100.0, 0), Sample(100, 0, 0.0, 0)], interval_seconds=10)
    assert got["seconds_sampled"] == 30.0 and got["seconds_busy"] == 20.0  # 20 (capped gap) + 10


def test_devices_counted_apart_and_unordered_samples_sorted() -> None:
    got = summary(
        [Sample(10, 1, 4.0, GiB), Sample(0, 1, 80.0, 5 * GiB), Sample(0, 0, 10.0, 2 * GiB)], interval_seconds=10
    )
    assert got["devices"] == [0, 1] and got["memory_peak_bytes"] == 5 * GiB
    # device 0: 10 s at 10% (busy); device 1: 10 s at 80% (busy), 10 s at 4% (idle)
    assert got["seconds_sampled"] == 30.0 and got["seconds_busy"] == 20.0
    assert got["mean_util"] == pytest.approx((10 + 80 + 4) * 10 / 30, abs=1e-3)
    assert got["p50_util"] == 10.0


def test_not_measured_says_why_and_counts_no_hours() -> None:
    got = summary([], interval_seconds=10, not_measured=NotMeasured("no NVML on this machine"))
    assert got == {
        "measured": False,
        "reason": "no NVML on this machine",
        "busy_percent": 5.0,
        "text": "GPU use not measured: no NVML on this machine",
        "busy_text": None,
        "memory_peak_text": None,
    }
    assert gpu_hours(got) is None
    assert summary([], interval_seconds=10)["reason"] == "no GPU samples were taken"


@pytest.mark.parametrize(
    ("usage", "text"),
    [
        # one device, hours: the numbers as a researcher reads them
        (
            {
                "devices": [0],
                "busy_fraction": 0.7312,
                "seconds_sampled": 7560.0,
                "mean_util": 64.4,
                "memory_peak_bytes": int(31.2 * GiB),
            },
            "GPU busy 73% of 2.1 h · mean util 64% · memory peak 31.2 GiB",
        ),
        # several devices: the time is device-time summed over them
        (
            {
                "devices": [0, 1],
                "busy_fraction": 0.5,
                "seconds_sampled": 1200.0,
                "mean_util": 40.0,
                "memory_peak_bytes": 512 << 20,
            },
            "2 GPUs busy 50% of 20 min GPU time · mean util 40% · memory peak 512 MiB",
        ),
    ],
)
def test_the_text_says_busy_share_time_mean_and_peak(usage: dict[str, object], text: str) -> None:
    got = with_text({"measured": True, "reason": None, **usage})
    assert got["text"] == text
    assert got["busy_text"] == text.split(" busy ")[1].split(" ")[0]
    assert got["memory_peak_text"] == text.rsplit("memory peak ", 1)[1]


def test_a_share_is_never_rounded_to_none_or_all() -> None:
    assert [percent_text(f) for f in (0.0, 0.004, 0.5, 0.996, 1.0)] == ["0%", "<1%", "50%", ">99%", "100%"]


def test_samples_in_a_range_count_where_they_were_taken_with_their_whole_span() -> None:
    samples = [Sample(0, 0, 50.0, 0), Sample(10, 0, 1.0, 0), Sample(20, 0, 90.0, 0), Sample(10, 1, 0.0, 0)]
    whole = summary(samples, interval_seconds=10)
    assert seconds_in(samples, interval_seconds=10, since=0, until=1e9) == (
        whole["seconds_sampled"],
        whole["seconds_busy"],
    )
    # [10, 20): the samples at 10 (device 0 idle, device 1 idle), 10 s each
    assert seconds_in(samples, interval_seconds=10, since=10, until=20) == (20.0, 0.0)
    assert seconds_in(samples, interval_seconds=10, since=15, until=30) == (10.0, 10.0)


def test_a_run_mostly_idle_over_ten_minutes_is_worded_with_its_numbers() -> None:
    one = [Sample(t, 0, 90.0 if t % 100 == 0 else 0.0, 0) for t in range(0, 7560, 10)]  # 2.1 h, busy 10%
    assert (
        idle_notice("r-1", summary(one, interval_seconds=10)) == "r-1 held GPU 0 for 2.1 h; busy 10% of it (util ≥ 5%)"
    )
    two = [Sample(t, d, 0.0, 0) for t in range(0, 600, 10) for d in (2, 3)]
    assert idle_notice("r-2", summary(two, interval_seconds=10)) == (
        "r-2 held GPUs 2, 3 for 10 min (0.3 GPU-hours); busy 0% of it (util ≥ 5%)"
    )
    short = [Sample(t, 0, 0.0, 0) for t in range(0, 590, 10)]  # 590 s: under IDLE_NOTICE_MIN_SECONDS
    assert idle_notice("r-3", summary(short, interval_seconds=10)) is None
    half = [Sample(t, 0, 90.0 if t % 20 == 0 else 0.0, 0) for t in range(0, 1200, 10)]  # busy exactly half
    assert idle_notice("r-4", summary(half, interval_seconds=10)) is None
    assert idle_notice("r-5", summary([], interval_seconds=10)) is None  # not measured: nothing said
