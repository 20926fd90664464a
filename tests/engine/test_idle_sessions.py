"""Sessions judged idle by kernel activity, by GPU use or both (`termination.idle_by`, issue 27 item 3).

With the scripted executor and a fake clock whose timers are the engine's. NVML is hardware: the
FakeExecutor's `gpu_reading` stands in for it at that boundary (the utilisation NVML would read per
device and time); the kernel's busy/idle facts are reported as the provisioner reports them
(`session_report`). Each sampling tick is driven by hand (`engine.gpu.tick()`), every 10 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.config import ConfigErrors, parse_config
from jupyter_gpuplat.core.gpu_usage import NotMeasured
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.executors.fake import FakeClock, FakeExecutor, FakeWorkloads, Script

from ..fake_engine import Harness, config

TICK = 10.0  # seconds between GPU samples
IDLE = 600  # the idle limit: warned 60 s before (10%)


class Gpu:
    """The scripted NVML reading: one utilisation for every device, set by the test."""

    def __init__(self) -> None:
        self.util = 0.0

    def __call__(self, device: int, at: float) -> tuple[float, int]:
        return self.util, 1 << 30


@pytest.fixture
def harnesses(jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def engine(tmp: Path, made: list[Harness], gpu: Gpu | None, *, sampled: bool = True, **ex_kw: Any) -> Harness:
    ex = FakeExecutor(gpus=2, default=Script.never_ends(), gpu_sample_seconds=TICK if sampled else None, **ex_kw)
    ex.gpu_reading = gpu
    tmp.mkdir(exist_ok=True)
    h = Harness(tmp, ex)
    made.append(h)
    return await h.start(config([{"name": "q"}]))


def lease(h: Harness, **termination: Any) -> str:
    body = {"project": "p", "queue": "q", "kind": "session", "resources": {"gpu": 1}}
    body["termination"] = {"idle_seconds": IDLE, **termination}
    return str(h.engine.submit("bob", RunRequest.model_validate(body))["id"])


async def started(h: Harness, **termination: Any) -> str:
    rid = lease(h, **termination)
    await h.settle()
    h.engine.session_report("bob", rid, "ready", "k-1")
    await sample(h)
    return rid


async def sample(h: Harness) -> None:
    """One sampling tick, where the executor samples at all (the engine's loop would not run otherwise)."""
    if h.engine.gpu.interval_seconds:
        await h.engine.gpu.tick()


async def run_for(h: Harness, seconds: float, rid: str | None = None) -> None:
    """Time passes, sampled every TICK; stops early once `rid` is no longer running."""
    for _ in range(int(seconds // TICK)):
        await h.advance(TICK)
        await sample(h)
        if rid is not None and h.status(rid) != "running":
            return


def reasons(h: Harness, rid: str) -> list[str]:
    return [e["reason"] for e in h.timeline(rid)]


def event(h: Harness, rid: str, reason: str) -> dict[str, Any]:
    return next(e for e in h.timeline(rid) if e["reason"] == reason)


def session(h: Harness, rid: str) -> dict[str, Any]:
    view = h.engine.reads.session_view(rid)
    assert view is not None
    return view


async def test_an_idle_gpu_is_warned_in_words_then_the_session_ends(tmp_path: Path, harnesses: list[Harness]) -> None:
    gpu = Gpu()
    h = await engine(tmp_path, harnesses, gpu)
    rid = await started(h, idle_by="gpu")
    start = h.clock()
    gpu.util = 80.0
    await run_for(h, 120)  # the GPU works for 2 min while the kernel is idle: not idle by GPU
    assert session(h, rid)["idle_reason"] == "GPU 0 in use (util ≥ 5%)"
    gpu.util = 3.0
    busy_until = h.clock()
    await run_for(h, IDLE - 60 - TICK)
    assert "IdleWarning" not in reasons(h, rid)
    view = session(h, rid)
    assert (view["idle_by"], view["idle_judged_by"], view["idle_since"]) == ("gpu", "gpu", busy_until)
    assert view["idle_deadline"] == busy_until + IDLE and view["gpu_not_measured"] is None
    assert view["idle_reason"] == "GPU 0 idle for 9 min (util < 5%)"
    await run_for(h, 2 * TICK)
    warned = event(h, rid, "IdleWarning")
    assert warned["message"] == "GPU 0 idle for 9 min (util < 5%); the session ends in 60 s unless kept"
    assert warned["details"]["idle_by"] == "gpu" and warned["details"]["deadline"] == busy_until + IDLE
    await run_for(h, 120, rid)
    ended = h.store.get_run(rid)
    assert ended is not None and (ended["status"], ended["reason"]) == ("stopped", "IdleTimeout")
    assert ended["message"] == "GPU 0 idle for 10 min (util < 5%); GPU 0 returned"
    assert ended["finished_at"] == busy_until + IDLE and busy_until == start + 120
    assert h.assert_timeline_valid(rid)


async def test_a_busy_kernel_whose_gpu_idles_is_warned_and_ended_only_when_its_cell_ends(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    gpu = Gpu()  # a cell waiting on a data loader: kernel busy, GPU at 0%
    h = await engine(tmp_path, harnesses, gpu)
    rid = await started(h, idle_by="gpu")
    start = h.clock()
    h.engine.session_report("bob", rid, "busy")
    await run_for(h, IDLE + 300)
    assert h.status(rid) == "running"  # never mid-cell
    warned = event(h, rid, "IdleWarning")["message"]
    assert warned == (
        "GPU 0 idle for 9 min (util < 5%); the session ends in 60 s unless kept "
        "(a running cell is not interrupted: then when it ends)"
    )
    assert session(h, rid)["idle_reason"] == (
        "GPU 0 idle for 15 min (util < 5%); the session ends when the running cell ends"
    )
    h.engine.session_report("bob", rid, "idle")  # the cell ends, the GPU still idle past its deadline
    await h.advance(0)
    ended = h.store.get_run(rid)
    assert ended is not None and (ended["status"], ended["reason"]) == ("stopped", "IdleTimeout")
    assert ended["message"] == "GPU 0 idle for 15 min (util < 5%); GPU 0 returned"
    assert ended["finished_at"] == start + IDLE + 300


async def test_cull_busy_kernel_ends_it_mid_cell(tmp_path: Path, harnesses: list[Harness]) -> None:
    h = await engine(tmp_path, harnesses, Gpu())
    rid = await started(h, idle_by="gpu", cull_busy_kernel=True)
    start = h.clock()
    h.engine.session_report("bob", rid, "busy")
    await run_for(h, IDLE + 60, rid)
    ended = h.store.get_run(rid)
    assert ended is not None and (ended["status"], ended["reason"]) == ("stopped", "IdleTimeout")
    assert ended["finished_at"] == start + IDLE and session_view_gone(h, rid)
    assert "a running cell is not interrupted" not in event(h, rid, "IdleWarning")["message"]


def session_view_gone(h: Harness, rid: str) -> bool:
    return h.engine.reads.session_view(rid) is None


async def test_both_ends_it_only_once_kernel_and_gpu_are_idle_the_later_clock(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    gpu = Gpu()
    h = await engine(tmp_path, harnesses, gpu)
    rid = await started(h, idle_by="both", gpu_idle_threshold=20)
    h.engine.session_report("bob", rid, "busy")
    await run_for(h, 2 * IDLE)  # kernel busy, GPU idle: not idle
    assert h.status(rid) == "running" and "IdleWarning" not in reasons(h, rid)
    assert session(h, rid)["idle_reason"] == "the kernel is busy" and session(h, rid)["idle_deadline"] is None
    h.engine.session_report("bob", rid, "idle")
    kernel_idle = h.clock()
    gpu.util = 50.0  # kernel idle, a background thread keeps the GPU over 20%
    await run_for(h, 2 * IDLE)
    assert h.status(rid) == "running" and "IdleWarning" not in reasons(h, rid)
    assert session(h, rid)["idle_reason"] == "GPU 0 in use (util ≥ 20%)"
    gpu.util = 10.0  # under this preset's threshold
    gpu_idle = h.clock()
    await run_for(h, IDLE + 60, rid)
    ended = h.store.get_run(rid)
    assert ended is not None and ended["reason"] == "IdleTimeout"
    assert ended["finished_at"] == gpu_idle + IDLE > kernel_idle + IDLE  # the later of the two clocks
    assert ended["message"] == "GPU 0 idle for 10 min (util < 20%) and no kernel activity for 30 min; GPU 0 returned"


@pytest.mark.parametrize(("idle_by", "ends"), [("gpu", False), ("kernel", True)])
async def test_a_gpu_kept_busy_by_a_background_thread_after_the_cell(
    tmp_path: Path, harnesses: list[Harness], idle_by: str, ends: bool
) -> None:
    gpu = Gpu()
    h = await engine(tmp_path, harnesses, gpu)
    rid = await started(h, idle_by=idle_by)
    h.engine.session_report("bob", rid, "busy")
    gpu.util = 95.0
    await run_for(h, 60)
    h.engine.session_report("bob", rid, "idle")  # the cell returned; its thread trains on
    await run_for(h, IDLE + 120, rid)
    assert (h.status(rid) != "running") is ends
    if ends:
        assert event(h, rid, "IdleTimeout")["message"] == "no kernel activity for 10 min; GPU 0 returned"


@pytest.mark.parametrize(
    ("sampled", "why"),
    [(False, "GPU sampling is off on this server"), (True, "the fake executor does not sample GPUs")],
)
async def test_gpu_use_not_measured_is_judged_by_the_kernel_and_says_so(
    tmp_path: Path, harnesses: list[Harness], sampled: bool, why: str
) -> None:
    h = await engine(tmp_path, harnesses, None, sampled=sampled)  # no NVML reading scripted
    rid = await started(h, idle_by="gpu")
    start = h.clock()
    plain = f"GPU use is not measured here ({why}); idleness judged by kernel activity"
    view = session(h, rid)
    assert (view["idle_by"], view["idle_judged_by"], view["gpu_not_measured"]) == ("gpu", "kernel", why)
    assert view["idle_reason"] == f"{plain}: no kernel activity for 0 s"
    h.engine.session_report("bob", rid, "busy")
    await run_for(h, 2 * IDLE)
    assert h.status(rid) == "running" and session(h, rid)["idle_reason"] == f"{plain}: the kernel is busy"
    h.engine.session_report("bob", rid, "idle")
    await run_for(h, IDLE, rid)
    assert event(h, rid, "IdleWarning")["message"] == (
        f"no kernel activity for 9 min; the session ends in 60 s unless kept — {plain}"
    )
    ended = h.store.get_run(rid)
    assert ended is not None and ended["reason"] == "IdleTimeout" and ended["finished_at"] == start + 3 * IDLE
    assert ended["message"] == f"no kernel activity for 10 min; GPU 0 returned — {plain}"


async def test_a_session_its_source_cannot_see_for_a_while_is_judged_by_its_kernel_then_by_its_gpu_again(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    """A tick may say one run is not measured (a MIG device, a pod the DCGM exporter did not report):
    meanwhile the kernel judges, GPU use seen last counting as activity; when samples come back the GPU
    clock counts from then, never from before the blind spell."""
    gpu = Gpu()
    h = await engine(tmp_path, harnesses, gpu)
    rid = await started(h, idle_by="gpu")
    gpu.util = 90.0
    await run_for(h, 300)
    last_busy = h.clock()
    mig = NotMeasured("MIG device: no per-device utilisation")
    for tell in h.engine.gpu.listeners:  # what a tick tells them where only this run was not seen
        tell({rid: mig})
    view = session(h, rid)
    assert (view["idle_judged_by"], view["gpu_not_measured"], view["idle_since"]) == ("kernel", mig.reason, last_busy)
    assert view["idle_reason"] == (
        f"GPU use is not measured here ({mig.reason}); idleness judged by kernel activity: "
        "no kernel activity nor GPU use seen for 0 s"
    )
    await h.advance(IDLE - 100)  # no ticks: blind all along, not past the kernel deadline
    assert h.status(rid) == "running"
    gpu.util = 0.0
    back = h.clock()
    await sample(h)
    view = session(h, rid)
    assert (view["idle_judged_by"], view["gpu_not_measured"], view["idle_since"]) == ("gpu", None, back)
    assert view["idle_deadline"] == back + IDLE


async def test_keep_session_restarts_both_clocks(tmp_path: Path, harnesses: list[Harness]) -> None:
    h = await engine(tmp_path, harnesses, Gpu())
    rid = await started(h, idle_by="both")
    await run_for(h, IDLE - 30)
    assert "IdleWarning" in reasons(h, rid)
    kept_at = h.clock()
    h.engine.keepalive("bob", rid)
    kept = event(h, rid, "KeepAlive")
    assert kept["message"] == "kept by bob; ends after 10 min without kernel activity and GPU use (util < 5%)"
    assert kept["details"]["deadline"] == kept_at + IDLE == session(h, rid)["idle_deadline"]
    await run_for(h, IDLE - 90)
    assert reasons(h, rid).count("IdleWarning") == 1  # the next warning is due at the new deadline less 60 s
    await run_for(h, 200, rid)
    ended = h.store.get_run(rid)
    assert ended is not None and ended["reason"] == "IdleTimeout" and ended["finished_at"] == kept_at + IDLE
    assert reasons(h, rid).count("IdleWarning") == 2


async def test_a_restart_never_ends_a_gpu_idle_session_early(tmp_path: Path, harnesses: list[Harness]) -> None:
    clock, workloads = FakeClock(), FakeWorkloads()
    h1 = await engine(tmp_path / "db", harnesses, Gpu(), clock=clock, workloads=workloads)
    rid = await started(h1, idle_by="gpu")
    await run_for(h1, IDLE - 20)  # 20 s short of the cull, warned
    assert "IdleWarning" in reasons(h1, rid)
    await h1.engine.close()
    h2 = await engine(tmp_path / "db", harnesses, Gpu(), clock=clock, workloads=workloads)
    restarted = h2.clock()
    assert h2.status(rid) == "running"
    view = session(h2, rid)
    assert view["idle_since"] == restarted and view["idle_deadline"] == restarted + IDLE
    await run_for(h2, IDLE - 70)
    assert h2.status(rid) == "running"
    await run_for(h2, 100, rid)
    ended = h2.store.get_run(rid)
    assert ended is not None and ended["reason"] == "IdleTimeout" and ended["finished_at"] == restarted + IDLE


@pytest.mark.parametrize(
    ("termination", "error"),
    [
        ({"idle_by": "cpu"}, "presets[0].termination.idle_by: must be one of 'kernel', 'gpu' or 'both'"),
        ({"gpu_idle_threshold": 0}, "presets[0].termination.gpu_idle_threshold: must be > 0.0"),
        ({"gpu_idle_threshold": 100.5}, "presets[0].termination.gpu_idle_threshold: must be <= 100.0"),
        ({"cull_busy_kernel": "yes"}, "presets[0].termination.cull_busy_kernel: must be true or false"),
    ],
)
def test_bad_idle_settings_are_config_errors(termination: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigErrors) as exc:
        parse_config({"presets": [{"name": "nb", "kind": "session", "termination": termination}]})
    assert exc.value.errors == [error]


async def test_a_locked_idle_signal_is_not_the_members_to_change(tmp_path: Path, harnesses: list[Harness]) -> None:
    """The platform reclaims by GPU use: a preset locks `idle_by`, and a member's laxer signal is refused."""
    ex = FakeExecutor(gpus=2, default=Script.never_ends(), gpu_sample_seconds=TICK)
    h = Harness(tmp_path, ex)
    harnesses.append(h)
    preset = {"name": "nb", "kind": "session", "resources": {"gpu": 1}, "termination": {"idle_seconds": IDLE}}
    preset["termination"]["idle_by"] = "gpu"
    preset["locked"] = ["termination.idle_by"]
    await h.start(config([{"name": "q"}], presets=[preset]))
    body = {"project": "p", "queue": "q", "presets": ["nb"], "termination": {"idle_by": "kernel"}}
    with pytest.raises(Exception, match=r"termination\.idle_by is locked"):
        h.engine.submit("bob", RunRequest.model_validate(body))
    ok = h.engine.submit("bob", RunRequest.model_validate({**body, "termination": {"idle_by": "gpu"}}))
    assert ok["resolved"]["termination"]["idle_by"] == "gpu"
