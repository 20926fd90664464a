"""The process a GPU session's lease runs: it keeps one kernel alive inside the lease.

    kernel_agent.py --connection-file PATH [--ip IP] [--ports S,I,STDIN,C,HB] [--transport ipc] -- KERNEL_ARGV...

It writes PATH (a Jupyter connection file, mode 0600) once, then runs KERNEL_ARGV with
`{connection_file}` replaced by PATH, and starts it again whenever it exits: a kernel
restart is a `shutdown_request` that makes ipykernel exit, and restarting must not give the
GPUs back (the lease is this process, not the kernel). After EXIT_LIMIT exits within
EXIT_WINDOW_SECONDS it gives up with KERNEL_DIED (the run fails with KernelDied).
With `--transport ipc` (local runs as their users) the kernel listens on Unix sockets beside
PATH, in the run's 0700 directory, instead of TCP ports on 127.0.0.1: another account's process
can neither connect to them nor subscribe to the kernel's output (ZMQ PUB over TCP would let
any local process read it without the key).

SIGTERM ends the kernel and the agent: the lease ends. SIGINT is the kernel's (an interrupt
sent to the whole group must not end the lease); the agent only survives it.

Stdlib only and self-contained: it runs as a file here and as `python -c <this source>` in a
pod, whose image needs only Python and ipykernel. Each (re)start writes PATH + ".state"
(`generation`, the kernel's `pid`, `started_at`) so the server can tell restarts apart.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from types import FrameType

KERNEL_DIED = 75
EXIT_LIMIT = 5
EXIT_WINDOW_SECONDS = 60.0
PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def free_ports(ip: str, n: int) -> list[int]:
    # Held open together so the n are distinct; the kernel binds them right after.
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind((ip, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_private(path: str, data: Mapping[str, object]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def connection_info(ip: str, ports: list[int], key: str, transport: str = "tcp") -> dict[str, object]:
    info: dict[str, object] = dict(zip(PORT_NAMES, ports, strict=True))
    info.update(ip=ip, key=key, transport=transport, signature_scheme="hmac-sha256", kernel_name="")
    return info


def parse(argv: list[str]) -> tuple[str, str, list[int], list[str], str]:
    path, ip, ports, transport = "", "127.0.0.1", [0] * 5, "tcp"
    if "--" not in argv:
        raise SystemExit("usage: kernel_agent.py --connection-file PATH [--ip IP] [--ports a,b,c,d,e] -- KERNEL_ARGV")
    split = argv.index("--")
    opts, kernel = argv[:split], argv[split + 1 :]
    for i in range(0, len(opts) - 1, 2):
        if opts[i] == "--connection-file":
            path = opts[i + 1]
        elif opts[i] == "--ip":
            ip = opts[i + 1]
        elif opts[i] == "--ports":
            ports = [int(p) for p in opts[i + 1].split(",")]
        elif opts[i] == "--transport":
            transport = opts[i + 1]
    if not path or not kernel or len(ports) != 5 or transport not in ("tcp", "ipc"):
        raise SystemExit("kernel_agent.py: need --connection-file, five --ports and a kernel command")
    return path, os.environ.get("GPUPLAT_KERNEL_IP") or ip, ports, kernel, transport


class Agent:
    def __init__(self, path: str, kernel: list[str]) -> None:
        self.path = path
        self.argv = [a.replace("{connection_file}", path) for a in kernel]
        self.child: subprocess.Popen[bytes] | None = None
        self.ending = False
        self.generation = 0

    def end(self, signum: int, frame: FrameType | None) -> None:
        self.ending = True
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "GPUPLAT_KERNEL_KEY"}
        # No JPY_PARENT_PID: the kernel lives as long as the lease, not as long as a server.
        env.pop("JPY_PARENT_PID", None)
        self.child = subprocess.Popen(self.argv, env=env)
        self.generation += 1
        state = {"generation": self.generation, "pid": self.child.pid, "started_at": time.time()}
        write_private(self.path + ".state", state)
        print(f"gpuplat: kernel {self.generation} started (pid {self.child.pid})", flush=True)

    def run(self) -> int:
        exits: list[float] = []
        while not self.ending:
            self.start()
            assert self.child is not None
            code = self.child.wait()
            if self.ending:
                break
            now = time.monotonic()
            exits = [t for t in exits if now - t < EXIT_WINDOW_SECONDS] + [now]
            print(f"gpuplat: kernel {self.generation} exited with code {code}", flush=True)
            if len(exits) >= EXIT_LIMIT:
                print(f"gpuplat: the kernel exited {len(exits)} times within {EXIT_WINDOW_SECONDS:.0f} s", flush=True)
                return KERNEL_DIED
        if self.child is not None:
            try:
                self.child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
        return 0


def main(argv: list[str]) -> int:
    path, ip, ports, kernel, transport = parse(argv)
    if transport == "ipc":  # sockets <dir>/kernel-1..5 beside the connection file
        ip, ports = os.path.join(os.path.dirname(path), "kernel"), [1, 2, 3, 4, 5]
    elif any(p == 0 for p in ports):
        ports = free_ports(ip if ip != "0.0.0.0" else "127.0.0.1", 5)
    key = os.environ.get("GPUPLAT_KERNEL_KEY") or secrets.token_hex(32)
    write_private(path, connection_info(ip, ports, key, transport))
    agent = Agent(path, kernel)
    signal.signal(signal.SIGTERM, agent.end)
    # A handler, not SIG_IGN: an ignored signal would stay ignored in the kernel after exec.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
