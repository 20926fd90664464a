"""The local executor against real processes: no mocks, no fixed sleeps.

Tests are sync and drive their scenario with asyncio.run, so they need no async
pytest plugin. Waits are on conditions with deadlines; every process group a test
started is killed and reaped in the `harness` finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from jupyter_gpuplat.core.gpu_usage import NotMeasured
from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import Device, ExecutorError, LaunchRequest, Observation
from jupyter_gpuplat.executors.local.env import make_env
from jupyter_gpuplat.executors.local.executor import LocalExecutor, make_final_observation
from jupyter_gpuplat.executors.local.gpus import detect_gpus, parse_nvidia_smi
from jupyter_gpuplat.executors.local.warm.slots import WARM_LAUNCHER

from ..waiting import until, wait_for

PY = sys.executable
DEADLINE = 10.0

SLEEPER = "import os, time; print('ready', os.getpid(), flush=True); time.sleep(60)"
STUBBORN = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', os.getpid(), flush=True); time.sleep(60)"
)
# prints a line, waits for a file the test creates, prints again, exits with argv[2]
WAIT_FOR_FILE = (
    "import os, sys, time\n"
    "print('first line', flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n"
    "print('second line', flush=True)\n"
    "sys.exit(int(sys.argv[2]))\n"
)
# a graceful process that also starts one grandchild; each counts the SIGTERMs it gets
GRACEFUL = """
import os, signal, subprocess, sys, time
hits = []
signal.signal(signal.SIGTERM, lambda signum, frame: hits.append(signum))
kid = subprocess.Popen([sys.executable, __file__]) if sys.argv[1:] == ["spawn"] else None
print("ready", os.getpid(), flush=True)
while not hits:
    time.sleep(0.01)
time.sleep(0.3)  # a second SIGTERM would arrive in this window
print(f"{os.getpid()} got SIGTERM x{len(hits)}", flush=True)
if kid is not None:
    kid.wait()
"""


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


class Collector:
    """The observer: keeps every Observation, lets a test await a run's final one."""

    def __init__(self) -> None:
        self.seen: list[Observation] = []
        self._events: dict[str, asyncio.Event] = {}

    def __call__(self, observation: Observation) -> None:
        self.seen.append(observation)
        self._event(observation.run_id).set()

    def _event(self, run_id: str) -> asyncio.Event:
        return self._events.setdefault(run_id, asyncio.Event())

    async def final(self, run_id: str) -> Observation:
        await asyncio.wait_for(self._event(run_id).wait(), DEADLINE)
        [observation] = [o for o in self.seen if o.run_id == run_id]
        return observation


class Harness:
    def __init__(self, root: Path, warm_launcher: bool) -> None:
        self.root = root
        self.warm_launcher = warm_launcher
        self.handles: list[dict[str, Any]] = []

    def executor(self, **config: Any) -> tuple[LocalExecutor, Collector]:
        config.setdefault("warm_launcher", self.warm_launcher)
        executor = LocalExecutor(**config)
        collector = Collector()
        executor.set_observer(collector)
        return executor, collector

    def request(self, run_id: str, command: list[str] | Entrypoint, **fields: Any) -> LaunchRequest:
        fields.setdefault("env", {})
        fields.setdefault("devices", ())
        entrypoint = command if isinstance(command, Entrypoint) else Entrypoint("command", argv=tuple(command))
        return LaunchRequest(run_id=run_id, entrypoint=entrypoint, workdir=str(self.root / "runs" / run_id), **fields)

    async def submit(self, executor: LocalExecutor, req: LaunchRequest) -> dict[str, Any]:
        handle = await executor.submit(req)
        self.handles.append(handle)
        return handle

    def cleanup(self) -> None:
        groups = {h["pid"] for h in self.handles}
        for pgid in groups:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        for pid in groups:  # reap launchers a closed executor left to us
            with contextlib.suppress(AssertionError):  # not reaped in time: the check below names what is left
                until(lambda pid=pid: _reaped(pid), f"launcher {pid} reaped", DEADLINE)

        def leftovers() -> list[psutil.Process]:
            return [p for p in psutil.process_iter() if _pgid(p.pid) in groups and not _ended(p.pid)]

        # a SIGKILLed process can take a moment to be torn down
        with contextlib.suppress(AssertionError):
            until(lambda: not leftovers(), "no process left behind", DEADLINE)
        assert not leftovers(), f"processes left behind: {leftovers()}"


def _reaped(pid: int) -> bool:
    try:
        return bool(os.waitpid(pid, os.WNOHANG)[0])
    except ChildProcessError:
        return True


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(params=[True, False], ids=["warm", "direct"])
def harness(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Harness]:
    """Every scenario twice: launchers forked by the warm launcher, and launcher.py spawned per run."""
    h = Harness(tmp_path, warm_launcher=request.param)
    try:
        yield h
    finally:
        h.cleanup()


async def wait_for_log(path: str, text: str, count: int = 1) -> str:
    def found() -> str | None:
        content = Path(path).read_text() if os.path.exists(path) else ""
        return content if content.count(text) >= count else None

    return str(await wait_for(found, DEADLINE, f"{text!r} {count} times in {path}"))


async def wait_until_ended(pid: int) -> None:
    await wait_for(lambda: _ended(pid), DEADLINE, f"process {pid} to end")


def ready_pid(log: str) -> int:
    return int(next(line for line in log.splitlines() if line.startswith("ready")).split()[1])


# -- outcomes -------------------------------------------------------------------------------


def test_success_reports_completed_and_keeps_stdout_and_stderr(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        req = harness.request("ok", [PY, "-c", "import sys; print('hello out'); print('hello err', file=sys.stderr)"])
        handle = await harness.submit(executor, req)
        assert json.loads(json.dumps(handle)) == handle
        assert handle["executor"] == "local" and handle["pid"] > 0
        assert executor.log_path(handle) == handle["log_path"] == os.path.join(req.workdir, "output.log")
        assert await seen.final("ok") == Observation("ok", "succeeded", "Completed", "exited with code 0", 0)
        log = Path(handle["log_path"]).read_text()
        assert "hello out" in log and "hello err" in log
        await executor.close()

    run_async(scenario())


def test_entrypoints_run_with_this_machines_python_in_the_working_dir(harness: Harness) -> None:
    """A script, a cell and a notebook-less command: this interpreter, started where the user asked."""
    user_dir = harness.root / "project"
    user_dir.mkdir()
    (user_dir / "data.txt").write_text("the data\n")
    (user_dir / "train.py").write_text(
        "import os, sys\nprint(open('data.txt').read().strip(), sys.executable, os.getcwd(), sys.argv[1:])\n"
    )

    async def scenario() -> None:
        executor, seen = harness.executor()
        script = Entrypoint("script", path="train.py", args=("--lr", "0.1"))
        h1 = await harness.submit(executor, harness.request("script", script, working_dir=str(user_dir)))
        cell = Entrypoint(
            "cell", code="import os, sys\nprint('cell', __file__, os.getcwd(), sys.argv[1:])", args=("x",)
        )
        h2 = await harness.submit(executor, harness.request("cell", cell))
        assert (await seen.final("script")).status == "succeeded"
        assert (await seen.final("cell")).status == "succeeded"
        log1 = Path(h1["log_path"]).read_text()
        assert f"the data {PY} {user_dir} ['--lr', '0.1']" in log1
        # the artifact directory stays where outputs go: the log is there, not in the user's directory
        assert h1["log_path"] == str(harness.root / "runs" / "script" / "output.log")
        assert not (user_dir / "output.log").exists() and not (user_dir / ".gpuplat").exists()
        cell_file = harness.root / "runs" / "cell" / "code" / "cell.py"
        assert cell_file.read_text().startswith("import os, sys")
        assert f"cell {cell_file} {harness.root / 'runs' / 'cell'} ['x']" in Path(h2["log_path"]).read_text()
        await executor.close()

    run_async(scenario())


def test_a_missing_working_dir_fails_to_start_with_its_name(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        gone = harness.root / "gone"
        await harness.submit(executor, harness.request("nowhere", [PY, "-c", "pass"], working_dir=str(gone)))
        final = await seen.final("nowhere")
        assert final.status == "failed" and final.reason == "StartFailed" and str(gone) in final.message
        await executor.close()

    run_async(scenario())


def test_nonzero_exit_fails_with_the_code(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        await harness.submit(executor, harness.request("bad", [PY, "-c", "import sys; sys.exit(3)"]))
        assert await seen.final("bad") == Observation("bad", "failed", "Error", "exited with code 3", 3)
        await executor.close()

    run_async(scenario())


def test_death_by_signal_is_reported_with_the_signal_name(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        await harness.submit(executor, harness.request("sig", [PY, "-c", "import os; os.kill(os.getpid(), 9)"]))
        observation = await seen.final("sig")
        assert observation == Observation("sig", "failed", "Signaled", "killed by signal SIGKILL (9)", -9)
        await executor.close()

    run_async(scenario())


def test_missing_command_fails_127_with_the_error_in_the_log(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("nope", ["gpuplat-no-such-command"]))
        observation = await seen.final("nope")
        assert (observation.status, observation.reason, observation.exit_code) == ("failed", "StartFailed", 127)
        assert "gpuplat-no-such-command" in observation.message
        log = Path(handle["log_path"]).read_text()
        assert "cannot run 'gpuplat-no-such-command'" in log and "No such file or directory" in log
        await executor.close()

    run_async(scenario())


def test_a_killed_process_group_without_exit_record_is_reported_as_signaled(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("oom", [PY, "-c", SLEEPER]))
        await wait_for_log(handle["log_path"], "ready")
        os.killpg(handle["pid"], signal.SIGKILL)  # as the kernel's OOM killer or an admin might
        assert await seen.final("oom") == Observation(
            "oom",
            "failed",
            "Signaled",
            f"its launcher (pid {handle['pid']}) was killed by signal SIGKILL (9) and left no exit record",
            -9,
        )
        await executor.close()

    run_async(scenario())


def test_final_observation_from_what_a_run_left_behind() -> None:
    stop = {"reason": "Stopped", "requested_at": 100.0, "grace_seconds": 10, "killed": False}
    record = {"returncode": 0, "signal": None, "finished_at": 99.0}
    # it finished before the stop request: its own outcome stands
    assert make_final_observation("r", 7, record, 0, stop, "lost") == Observation(
        "r", "succeeded", "Completed", "exited with code 0", 0
    )
    # killed by us after the grace: the launcher left no record
    killed = {**stop, "killed": True, "reason": "TimedOut", "timeout_seconds": 30}
    assert make_final_observation("r", 7, None, -9, killed, "lost") == Observation(
        "r",
        "failed",
        "TimedOut",
        "exceeded its timeout of 30 s; still running 10 s after SIGTERM, "
        "so its process group was killed with SIGKILL (9)",
        -9,
    )
    assert make_final_observation("r", 7, None, 2, None, "lost") == Observation(
        "r", "failed", "Error", "its launcher (pid 7) exited with code 2 and left no exit record", 2
    )
    assert make_final_observation("r", 7, None, None, None, "gone") == Observation("r", "failed", "Lost", "gone")
    # records the run could have scribbled on are read defensively
    garbage = {"reason": "Stopped", "requested_at": "soon", "grace_seconds": None, "killed": True}
    assert make_final_observation("r", 7, {"returncode": "x"}, None, garbage, "gone").message == (
        "stopped by request; still running ? after SIGTERM, so its process group was killed with SIGKILL (9)"
    )


# -- environment ----------------------------------------------------------------------------


@pytest.mark.parametrize(("devices", "expected"), [((1, 3), "1,3"), ((0,), "0"), ((), "")])
def test_child_sees_exactly_its_devices(harness: Harness, devices: tuple[int, ...], expected: str) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        script = "import os; print('CVD=' + repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
        handle = await harness.submit(executor, harness.request("gpu", [PY, "-c", script], devices=devices))
        assert (await seen.final("gpu")).status == "succeeded"
        assert f"CVD={expected!r}" in Path(handle["log_path"]).read_text()
        await executor.close()

    run_async(scenario())


def test_runs_one_after_another_each_see_only_their_own_devices_env_and_cwd(harness: Harness) -> None:
    """Launchers forked from one warm launcher (spares included) share nothing of each other's runs."""
    script = (
        "import json, os; print(json.dumps([os.getcwd(), os.environ.get('CUDA_VISIBLE_DEVICES'), "
        "os.environ.get('GPUPLAT_RUN_ID'), os.environ.get('ONLY_MINE'), os.environ.get('GPUPLAT_PARAMS')]))"
    )

    async def scenario() -> None:
        executor, seen = harness.executor()
        for i in range(5):
            cwd = harness.root / f"cwd{i}"
            cwd.mkdir()
            env = {"ONLY_MINE": f"value {i}", **({"GPUPLAT_PARAMS": '{"lr": 0.1}'} if i == 2 else {})}
            req = harness.request(f"r{i}", [PY, "-c", script], env=env, devices=(i,), working_dir=str(cwd))
            handle = await harness.submit(executor, req)
            assert (await seen.final(f"r{i}")).status == "succeeded"
            params = '{"lr": 0.1}' if i == 2 else None
            assert json.loads(Path(handle["log_path"]).read_text()) == [str(cwd), str(i), f"r{i}", f"value {i}", params]
        await executor.close()

    run_async(scenario())


def test_notebooks_run_with_their_own_devices_params_env_and_cwd(harness: Harness) -> None:
    """Warm: nbrun and its kernel are forked from the notebook warm launcher; what the cell sees is the same."""
    import nbformat

    cell = (
        "import json, os, sys\n"
        "print('SEEN', json.dumps([os.getcwd(), os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPLAT_RUN_ID'], "
        "os.environ.get('ONLY_MINE'), lr, os.getppid() != 1, sys.executable]))"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    (harness.root / "project").mkdir()
    nbformat.write(nb, harness.root / "project" / "nb.ipynb")

    async def scenario() -> None:
        executor, seen = harness.executor()
        for i in range(2):  # the second one from a spare
            entry = Entrypoint("notebook", path=str(harness.root / "project" / "nb.ipynb"))
            env = {"ONLY_MINE": f"v{i}", "GPUPLAT_PARAMS": json.dumps({"lr": i / 10})}
            req = harness.request(
                f"nb{i}", entry, env=env, devices=(i, i + 1), working_dir=str(harness.root / "project")
            )
            handle = await harness.submit(executor, req)
            assert (await seen.final(f"nb{i}")).status == "succeeded"
            log = Path(handle["log_path"]).read_text()
            [line] = [x for x in log.splitlines() if x.startswith("SEEN ")]
            expected = [str(harness.root / "project"), f"{i},{i + 1}", f"nb{i}", f"v{i}", i / 10, True, PY]
            assert json.loads(line.removeprefix("SEEN ")) == expected
            executed = nbformat.read(Path(req.workdir) / "outputs" / "nb.ipynb", 4)
            assert executed.cells[0].metadata["tags"] == ["injected-parameters"]
        await executor.close()

    run_async(scenario())


SERVER_SECRETS = {
    "JUPYTER_TOKEN": "secret-1",
    "JPY_API_TOKEN": "secret-2",
    "GPUPLAT_TOKEN_ADMIN": "secret-3",
    "GPUPLAT_DB_URL": "postgresql+psycopg://gpuplat:secret-4@db/gpuplat",
    "JUPYTERHUB_API_TOKEN": "secret-5",
    "AWS_SECRET_ACCESS_KEY": "secret-6",
    "TEST_SERVER_ONLY": "not-named-in-env_keep",
}


@pytest.mark.parametrize("keep", [None, ["PATH", "TEST_KEPT"]])
def test_a_run_env_is_an_allow_list_not_the_server_env_minus_names(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, keep: list[str] | None
) -> None:
    for name, value in {**SERVER_SECRETS, "TEST_KEPT": "kept"}.items():
        monkeypatch.setenv(name, value)
    script = "import json, os; print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ)}))"

    async def scenario() -> None:
        executor, seen = harness.executor(**({"env_keep": keep} if keep else {}))
        env = {"FOO": "bar baz", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}  # the spec cannot widen its devices
        req = harness.request("env", [PY, "-c", script], env=env, devices=(2,))
        handle = await harness.submit(executor, req)
        assert (await seen.final("env")).status == "succeeded"
        seen = json.loads(Path(handle["log_path"]).read_text().splitlines()[-1])
        run_env = seen["env"]
        assert seen["cwd"] == req.workdir
        assert {k: run_env.get(k) for k in SERVER_SECRETS} == dict.fromkeys(SERVER_SECRETS)
        platform = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUPLAT_RUN_ID", "GPUPLAT_ARTIFACTS_DIR"}
        allowed = set(keep or executor.env_keep) | {"HOME", "USER", "LOGNAME", "SHELL", "PYTHONUNBUFFERED", "FOO"}
        allowed.add("LC_CTYPE")  # Python's own locale coercion (PEP 538) in the child, not the server's
        assert set(run_env) - platform <= allowed, "only allow-listed names of the server's environment"
        assert run_env.get("TEST_KEPT") == ("kept" if keep else None)
        assert run_env["PATH"] == os.environ["PATH"]
        assert (run_env["FOO"], run_env["CUDA_VISIBLE_DEVICES"], run_env["CUDA_DEVICE_ORDER"]) == (
            "bar baz",
            "2",
            "PCI_BUS_ID",
        )
        assert (run_env["GPUPLAT_RUN_ID"], run_env["GPUPLAT_ARTIFACTS_DIR"]) == ("env", req.workdir)
        await executor.close()

    run_async(scenario())


def test_bad_requests_are_refused_with_a_clear_message(harness: Harness) -> None:
    async def scenario() -> None:
        executor, _ = harness.executor()
        with pytest.raises(ExecutorError, match="absolute"):
            await executor.submit(
                LaunchRequest("rel", Entrypoint("command", (PY, "-c", "pass")), {}, (), "relative/dir")
            )
        with pytest.raises(ExecutorError, match="non-empty list"):
            await executor.submit(harness.request("empty", []))
        with pytest.raises(ExecutorError, match="FOO must be a string"):
            await executor.submit(harness.request("badenv", [PY, "-c", "pass"], env={"FOO": 1}))
        await harness.submit(executor, harness.request("twice", [PY, "-c", SLEEPER]))
        with pytest.raises(ExecutorError, match="already running"):
            await executor.submit(harness.request("twice", [PY, "-c", SLEEPER]))
        await executor.close()

    run_async(scenario())


# -- logs -----------------------------------------------------------------------------------


def test_log_grows_while_the_process_runs(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        go = harness.root / "go"
        handle = await harness.submit(executor, harness.request("live", [PY, "-c", WAIT_FOR_FILE, str(go), "0"]))
        log = await wait_for_log(handle["log_path"], "first line")
        assert "second line" not in log
        assert seen.seen == []  # still running while its first line is readable
        go.touch()
        assert (await seen.final("live")).status == "succeeded"
        assert Path(handle["log_path"]).read_text().splitlines() == ["first line", "second line"]
        await executor.close()

    run_async(scenario())


# -- stop and timeout -----------------------------------------------------------------------


def test_stop_terminates_a_sleeping_process(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("nap", [PY, "-c", SLEEPER]))
        child = ready_pid(await wait_for_log(handle["log_path"], "ready"))
        await executor.stop("nap", handle, grace_seconds=DEADLINE)
        # stop returns once the run has ended and its final Observation was sent
        assert seen.seen == [
            Observation("nap", "stopped", "Stopped", "stopped by request; killed by signal SIGTERM (15)", -15)
        ]
        await wait_until_ended(child)
        await executor.stop("nap", handle)  # stopping a finished run is harmless
        await executor.close()

    run_async(scenario())


def test_stop_reaches_the_whole_group_once_and_allows_a_graceful_exit(harness: Harness) -> None:
    script = harness.root / "graceful.py"
    script.write_text(GRACEFUL)

    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("grace", [PY, str(script), "spawn"]))
        log = await wait_for_log(handle["log_path"], "ready", count=2)  # the child and its grandchild
        await executor.stop("grace", handle, grace_seconds=DEADLINE)
        observation = await seen.final("grace")
        assert observation == Observation("grace", "stopped", "Stopped", "stopped by request; exited with code 0", 0)
        log = Path(handle["log_path"]).read_text()
        # Two processes write to one log: their lines may interleave, so match records, not lines.
        got = sorted(re.findall(r"(\d+) got SIGTERM x(\d+)", log))
        assert got == sorted((pid, "1") for pid in re.findall(r"ready (\d+)", log))
        await executor.close()

    run_async(scenario())


def test_stop_kills_a_process_that_ignores_sigterm_after_the_grace(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("stubborn", [PY, "-c", STUBBORN]))
        child = ready_pid(await wait_for_log(handle["log_path"], "ready"))
        await executor.stop("stubborn", handle, grace_seconds=0.5)
        observation = await seen.final("stubborn")
        assert (observation.status, observation.reason, observation.exit_code) == ("stopped", "Stopped", -9)
        assert observation.message == (
            "stopped by request; still running 0.5 s after SIGTERM, so its process group was killed with SIGKILL (9)"
        )
        await wait_until_ended(child)
        await executor.close()

    run_async(scenario())


def test_timeout_stops_the_run_as_timed_out(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        await harness.submit(executor, harness.request("slow", [PY, "-c", SLEEPER], timeout_seconds=1))
        observation = await seen.final("slow")
        assert observation == Observation(
            "slow", "failed", "TimedOut", "exceeded its timeout of 1 s; killed by signal SIGTERM (15)", -15
        )
        await executor.close()

    run_async(scenario())


def test_the_run_group_is_cleaned_up_when_the_command_ends(harness: Harness) -> None:
    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("bg", ["/bin/sh", "-c", "sleep 60 & echo ready $!"]))
        assert (await seen.final("bg")).status == "succeeded"
        await wait_until_ended(ready_pid(Path(handle["log_path"]).read_text()))
        await executor.close()

    run_async(scenario())


# -- restart --------------------------------------------------------------------------------


def test_attach_after_restart_follows_the_run_to_its_end(harness: Harness) -> None:
    go = harness.root / "go"

    async def first_server() -> dict[str, Any]:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("long", [PY, "-c", WAIT_FOR_FILE, str(go), "5"]))
        await wait_for_log(handle["log_path"], "first line")
        await executor.close()
        assert seen.seen == []
        return handle

    async def second_server(handle: dict[str, Any]) -> None:
        executor, seen = harness.executor(poll_interval_seconds=0.05)
        observation = executor.attach("long", handle)
        assert (observation.status, observation.reason) == ("running", "Reattached")
        assert str(handle["pid"]) in observation.message
        go.touch()
        assert await seen.final("long") == Observation("long", "failed", "Error", "exited with code 5", 5)
        await executor.close()

    handle = run_async(first_server())
    assert not _ended(handle["pid"])  # closing the executor (and its loop) left the run running
    run_async(second_server(handle))


def test_a_reattached_run_can_be_stopped(harness: Harness) -> None:
    async def first_server() -> dict[str, Any]:
        executor, _ = harness.executor()
        handle = await harness.submit(executor, harness.request("adopted", [PY, "-c", SLEEPER]))
        await wait_for_log(handle["log_path"], "ready")
        await executor.close()
        return handle

    async def second_server(handle: dict[str, Any]) -> None:
        executor, seen = harness.executor(poll_interval_seconds=0.05)
        assert executor.attach("adopted", handle).reason == "Reattached"
        await executor.stop("adopted", handle, grace_seconds=DEADLINE)
        assert await seen.final("adopted") == Observation(
            "adopted", "stopped", "Stopped", "stopped by request; killed by signal SIGTERM (15)", -15
        )
        await executor.close()

    run_async(second_server(run_async(first_server())))


def test_the_timeout_still_applies_after_a_restart(harness: Harness) -> None:
    async def first_server() -> dict[str, Any]:
        executor, _ = harness.executor()
        handle = await harness.submit(executor, harness.request("deadline", [PY, "-c", SLEEPER], timeout_seconds=1))
        await executor.close()
        return handle

    async def second_server(handle: dict[str, Any]) -> None:
        executor, seen = harness.executor(poll_interval_seconds=0.05)
        assert executor.attach("deadline", handle).status == "running"
        observation = await seen.final("deadline")
        assert (observation.status, observation.reason) == ("failed", "TimedOut")
        await executor.close()

    run_async(second_server(run_async(first_server())))


def test_attach_identity_survives_a_clock_step_but_not_a_reboot(harness: Harness) -> None:
    async def first_server() -> dict[str, Any]:
        executor, _ = harness.executor()
        handle = await harness.submit(executor, harness.request("steady", [PY, "-c", SLEEPER]))
        await executor.close()
        return handle

    async def second_server(handle: dict[str, Any]) -> None:
        executor, _ = harness.executor()
        # the wall clock moved an hour since submit: epoch times and boot time moved together
        stepped = {**handle, "create_time": handle["create_time"] + 3600, "boot_time": handle["boot_time"] + 3600}
        assert executor.attach("steady", stepped).reason == "Reattached"
        await executor.close()
        rebooted = {**handle, "boot_id": "another-boot"}
        assert harness.executor()[0].attach("steady", rebooted) == Observation(
            "steady",
            "failed",
            "Lost",
            f"process {handle['pid']} is gone and left no exit record (the machine has restarted since)",
        )

    handle = run_async(first_server())
    assert handle["boot_id"] and handle["boot_time"] > 0
    run_async(second_server(handle))


def test_runs_outlive_a_dead_warm_launcher_and_the_next_run_still_starts(tmp_path: Path) -> None:
    harness = Harness(tmp_path, warm_launcher=True)
    go = harness.root / "go"

    async def scenario() -> None:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("orphan", [PY, "-c", WAIT_FOR_FILE, str(go), "5"]))
        await wait_for_log(handle["log_path"], "first line")
        warm = psutil.Process(handle["pid"]).parent()
        assert warm is not None and warm.pid != os.getpid()  # forked by the warm launcher
        warm.kill()
        await wait_until_ended(warm.pid)
        go.touch()  # the run goes on without it and its end is still seen, from its exit record
        assert await seen.final("orphan") == Observation("orphan", "failed", "Error", "exited with code 5", 5)
        later = await harness.submit(executor, harness.request("later", [PY, "-c", SLEEPER]))
        assert psutil.Process(later["pid"]).ppid() != warm.pid  # started directly until a new one is due
        await executor.stop("later", later, grace_seconds=DEADLINE)
        assert (await seen.final("later")).reason == "Stopped"
        await executor.close()

    try:
        run_async(scenario())
    finally:
        harness.cleanup()


def test_what_the_warm_launcher_hands_the_server_is_never_inherited(tmp_path: Path) -> None:
    """Pidfds and spare sockets are close-on-exec: a process the server spawns cannot keep a spare alive."""
    import fcntl

    harness = Harness(tmp_path, warm_launcher=True)

    async def scenario() -> None:
        executor, seen = harness.executor()
        for run_id in ("a", "b"):  # the second from a spare, once the warm launcher has sent them
            await harness.submit(executor, harness.request(run_id, [PY, "-c", "pass"]))
            assert (await seen.final(run_id)).status == "succeeded"
        leaked = []
        for name in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
                flags = fcntl.fcntl(int(name), fcntl.F_GETFD)
            except OSError:
                continue
            if ("socket:" in target or "pidfd" in target) and not flags & fcntl.FD_CLOEXEC:
                leaked.append((name, target))
        assert leaked == []
        await executor.close()

    try:
        run_async(scenario())
    finally:
        harness.cleanup()


# -- idempotent launch: a crash between "dispatched" and the saved handle -----------------

# appends one line per start to argv[1], then waits for the file argv[2] and exits with its content
COUNTED = (
    "import os, sys, time\n"
    "with open(sys.argv[1], 'a') as f: f.write(f'{os.getpid()}\\n')\n"
    "print('ready', os.getpid(), flush=True)\n"
    "while not os.path.exists(sys.argv[2]): time.sleep(0.01)\n"
    "sys.exit(int(open(sys.argv[2]).read() or 0))\n"
)


async def crashed_after_submit(harness: Harness, req: LaunchRequest) -> dict[str, Any]:
    """Start the run, then drop the executor as a dying server would: the handle is never saved."""
    executor, seen = harness.executor()
    handle = await harness.submit(executor, req)
    await wait_for_log(handle["log_path"], "ready")
    await executor.close()  # watching stops, the run keeps running
    assert seen.seen == []
    return handle


def test_submit_after_a_crash_adopts_the_running_launcher_instead_of_starting_again(harness: Harness) -> None:
    starts, gate = harness.root / "starts.txt", harness.root / "gate"
    req = harness.request("once", [PY, "-c", COUNTED, str(starts), str(gate)])

    async def scenario() -> None:
        first = await crashed_after_submit(harness, req)
        executor, seen = harness.executor()
        second = await harness.submit(executor, req)  # the restarted engine launches it again
        assert second == {**first, "create_time": second["create_time"], "started_at": second["started_at"]}
        assert second["create_time"] == pytest.approx(first["create_time"], abs=0.05)
        # Adopted: the launcher's own start, which a spare launcher had before its run's.
        assert second["started_at"] <= first["started_at"] + 0.05
        gate.write_text("0")
        assert await seen.final("once") == Observation("once", "succeeded", "Completed", "exited with code 0", 0)
        await executor.close()

    run_async(scenario())
    assert len(starts.read_text().splitlines()) == 1, "the command ran twice"


def test_submit_after_a_crash_reports_a_run_that_ended_while_the_server_was_down(harness: Harness) -> None:
    starts, gate = harness.root / "starts.txt", harness.root / "gate"
    req = harness.request("ended", [PY, "-c", COUNTED, str(starts), str(gate)])

    async def scenario() -> None:
        first = await crashed_after_submit(harness, req)
        gate.write_text("3")
        await wait_until_ended(first["pid"])
        executor, seen = harness.executor()
        second = await harness.submit(executor, req)
        assert second["pid"] == first["pid"]
        assert await seen.final("ended") == Observation("ended", "failed", "Error", "exited with code 3", 3)
        await executor.close()

    run_async(scenario())
    assert len(starts.read_text().splitlines()) == 1, "the command ran twice"


def test_submit_after_a_crash_never_restarts_a_run_whose_launcher_was_killed(harness: Harness) -> None:
    starts, gate = harness.root / "starts.txt", harness.root / "gate"
    req = harness.request("killed", [PY, "-c", COUNTED, str(starts), str(gate)])

    async def scenario() -> None:
        first = await crashed_after_submit(harness, req)
        os.killpg(first["pid"], signal.SIGKILL)  # no exit record left
        await wait_until_ended(first["pid"])
        executor, seen = harness.executor()
        await harness.submit(executor, req)
        final = await seen.final("killed")
        assert (final.status, final.reason) == ("failed", "Lost")
        assert f"process {first['pid']} was started before and is gone" in final.message
        await executor.close()

    run_async(scenario())
    assert len(starts.read_text().splitlines()) == 1, "the command ran twice"


def test_attach_reads_the_exit_record_of_a_finished_run(harness: Harness) -> None:
    async def first_server() -> dict[str, Any]:
        executor, seen = harness.executor()
        handle = await harness.submit(executor, harness.request("done", [PY, "-c", "import sys; sys.exit(4)"]))
        await seen.final("done")
        await executor.close()
        return handle

    handle = run_async(first_server())
    executor, seen = harness.executor()
    # a finished run needs no event loop: the answer is the return value, not an observer call
    assert executor.attach("done", handle) == Observation("done", "failed", "Error", "exited with code 4", 4)
    assert seen.seen == []


def test_attach_to_a_reused_pid_reports_lost(harness: Harness) -> None:
    me = psutil.Process()
    executor, seen = harness.executor()
    handle = {
        "pid": me.pid,  # alive, but started at another time: not our run
        "create_time": me.create_time() - 100.0,
        "exit_file": str(harness.root / "runs" / "old" / ".gpuplat" / "exit.json"),
    }
    assert executor.attach("old", handle) == Observation(
        "old", "failed", "Lost", f"process {me.pid} is gone and left no exit record (the machine may have restarted)"
    )
    with_boot_time = {**handle, "boot_time": psutil.boot_time()}
    assert executor.attach("old", with_boot_time).reason == "Lost"
    broken = executor.attach("broken", {"exit_file": "/nonexistent"})
    assert (broken.status, broken.reason) == ("failed", "Lost")
    assert seen.seen == []


# -- devices --------------------------------------------------------------------------------

NVIDIA_SMI_TEXT = """\
0, NVIDIA H100 80GB HBM3, 81559, GPU-4a3b2c1d-0000-1111-2222-333344445555
1, NVIDIA A100-SXM4-40GB, 40960, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee

2, Tesla T4, [N/A], [N/A]
No devices were found
"""


def test_parse_nvidia_smi_reads_index_name_memory_and_uuid() -> None:
    assert parse_nvidia_smi(NVIDIA_SMI_TEXT) == [
        Device(0, "NVIDIA H100 80GB HBM3", 81559, "GPU-4a3b2c1d-0000-1111-2222-333344445555", declared=False),
        Device(1, "NVIDIA A100-SXM4-40GB", 40960, "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", declared=False),
        Device(2, "Tesla T4", None, None, declared=False),
    ]
    assert parse_nvidia_smi("") == []
    assert parse_nvidia_smi("No devices were found\n") == []


def test_detect_gpus_runs_nvidia_smi_and_survives_its_absence(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI_TEXT}EOF\n")
    fake.chmod(0o755)
    broken = tmp_path / "broken-smi"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n")
    broken.chmod(0o755)
    assert [d.index for d in detect_gpus(str(fake))] == [0, 1, 2]
    assert detect_gpus(str(broken)) == []
    assert detect_gpus(str(tmp_path / "missing")) == []
    assert [d.name for d in LocalExecutor(nvidia_smi_path=str(fake)).devices()][:1] == ["NVIDIA H100 80GB HBM3"]


def test_declared_gpus_are_labelled_declared() -> None:
    assert LocalExecutor(gpus=2).devices() == [
        Device(0, "declared GPU 0", None, None, declared=True, minor=0),
        Device(1, "declared GPU 1", None, None, declared=True, minor=1),
    ]
    assert LocalExecutor(gpus=0).devices() == []


def test_gpu_samples_say_why_where_they_cannot_be_read(tmp_path: Path) -> None:
    """Declared GPUs are not real ones to read; found ones without NVML (this machine) are not measured either."""
    declared = LocalExecutor(gpus=2)
    assert declared.gpu_interval() == 10.0
    got = declared.gpu_samples({"r": (0,)}, 0.0)
    assert got == NotMeasured("the GPUs are declared (LocalExecutor.gpus), not found: none is sampled")
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVIDIA_SMI_TEXT}EOF\n")
    fake.chmod(0o755)
    found = LocalExecutor(nvidia_smi_path=str(fake), gpu_sample_seconds=None)
    assert found.gpu_interval() is None
    blind = found.gpu_samples({"r": (0,)}, 0.0)
    assert isinstance(blind, NotMeasured) and blind.reason.startswith("no NVML on this machine"), blind


def test_a_run_from_a_spare_launcher_counts_its_time_from_its_own_launch(tmp_path: Path) -> None:
    """A spare launcher is forked ahead of its run: its age is not the run's (timeout, re-attach's "running for")."""
    harness = Harness(tmp_path, warm_launcher=True)

    def aged_spare() -> bool:
        warm = [p for p in psutil.Process().children() if WARM_LAUNCHER in p.cmdline()]
        return any(time.time() - s.create_time() >= 2.5 for w in warm for s in w.children())

    async def scenario() -> None:
        executor, seen = harness.executor()
        await harness.submit(executor, harness.request("a", [PY, "-c", "pass"]))  # the warm launcher forks spares
        assert (await seen.final("a")).status == "succeeded"
        await wait_for(aged_spare, DEADLINE, "a spare launcher waiting")  # the case itself: a spare that waited
        before = time.time()
        b = await harness.submit(
            executor, harness.request("b", [PY, "-c", "import time; time.sleep(1)"], timeout_seconds=2)
        )
        assert (await seen.final("b")).status == "succeeded"  # its 2 s count from its launch, not the spare's fork
        assert b["started_at"] >= before > b["create_time"] + 2
        await wait_for(aged_spare, DEADLINE, "a spare launcher waiting again")
        c = await harness.submit(executor, harness.request("c", [PY, "-c", SLEEPER]))
        await executor.close()
        again, _ = harness.executor()
        seen_again = again.attach("c", c)
        assert seen_again.reason == "Reattached"
        assert int(seen_again.message.split("running for ")[1].split(" s")[0]) < 2, seen_again.message
        await again.close()

    try:
        run_async(scenario())
    finally:
        harness.cleanup()


def test_a_run_and_a_session_kernel_see_their_flavor_and_cannot_claim_another() -> None:
    """GPUPLAT_FLAVOR is the platform's: the flavor admission chose, whatever the spec's env says;
    a kernel (a session) is given the same environment as any run."""
    for entrypoint in (Entrypoint("command", argv=("true",)), Entrypoint("kernel")):
        req = LaunchRequest(
            run_id="r-1",
            entrypoint=entrypoint,
            env={"GPUPLAT_FLAVOR": "h100"},
            devices=(3,),
            workdir="/tmp/r-1",
            flavor={"name": "a100", "node_labels": {}, "tolerations": []},
        )
        env = make_env({"PATH": "/bin"}, ["PATH"], None, req)
        assert (env["GPUPLAT_FLAVOR"], env["CUDA_VISIBLE_DEVICES"]) == ("a100", "3")
    plain = LaunchRequest(
        run_id="r-2", entrypoint=Entrypoint("kernel"), env={"GPUPLAT_FLAVOR": "h100"}, devices=(), workdir="/tmp/r-2"
    )
    assert "GPUPLAT_FLAVOR" not in make_env({}, [], None, plain)
