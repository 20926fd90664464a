"""Nightly-style schemathesis run: tests/service/test_schemathesis.py with many more examples.

    python benchmarks/fuzz_api.py                      # 200 examples per operation and user
    python benchmarks/fuzz_api.py --examples 1000 --only runs --users bob

Starts the same seeded server (a finished run with a log, a metric and an output; every queue
paused), generates requests from the document it serves, valid and invalid, as each user, and
checks each answer: no 5xx, a documented status, content type and schema. Random examples
(not derandomized as in CI), so each night tries new ones. Prints the requests sent and every
failure with its request and answer (hypothesis' smallest example); exits 1 if any.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.service.test_schemathesis import USERS, fuzz, load, operations, seed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=200, help="examples per operation and user (default 200)")
    ap.add_argument("--users", nargs="+", default=list(USERS), help="callers (default: ops bob)")
    ap.add_argument("--only", default="", help="only operations whose path contains this")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpuplat-fuzz-") as tmp:
        srv, known = seed(Path(tmp))
        try:
            t = load(srv, known)
            failures: list[tuple[str, str]] = []
            started = time.monotonic()
            for path, method in operations():
                if args.only not in path:
                    continue
                for user in args.users:
                    before, t0 = t.sent, time.monotonic()
                    label = f"{method} {path} as {user}"
                    try:
                        fuzz(t, path, method, user, args.examples, derandomize=False)()
                        verdict = "ok"
                    except KeyboardInterrupt:
                        raise
                    except BaseException as exc:  # a failed check (schemathesis raises an exception group): go on
                        failures.append((label, str(exc)))
                        verdict = "FAILED"
                    took_op = time.monotonic() - t0
                    print(f"{t.sent - before:6d} requests  {took_op:6.1f} s  {verdict:6s}  {label}", flush=True)
            took = time.monotonic() - started
        finally:
            srv.stop()
    print(f"\n{t.sent} requests sent in {took:.0f} s; {len(failures)} failing operation(s)")
    for label, text in failures:
        print(f"\n==== {label}\n{text[:4000]}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
