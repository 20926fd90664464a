"""The sidebar's view-model unit tests (TypeScript, node's built-in test runner) run here,
so the one pytest command covers them: clock formatting, grouping, explain rendering,
the resolved-config table, the runs model, the SSE parser, the submit form."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

LABEXT = Path(__file__).resolve().parents[2] / "labextension"


def test_view_model_unit_tests_pass() -> None:
    node = shutil.which("node")
    assert node, "node is needed for the sidebar's unit tests (the lab extension build needs it too)"
    tsc = LABEXT / "node_modules" / "typescript" / "bin" / "tsc"
    assert tsc.exists(), "run `jlpm install` in labextension/ (pip install -e . does it)"
    shutil.rmtree(LABEXT / "lib" / "unit", ignore_errors=True)  # no stale compiled tests
    build = subprocess.run(
        [node, str(tsc), "-p", "tsconfig.test.json"], cwd=LABEXT, capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, build.stdout + build.stderr
    tests = sorted(str(p.relative_to(LABEXT)) for p in (LABEXT / "lib" / "unit" / "test").glob("*.test.js"))
    assert len(tests) >= 3, tests
    run = subprocess.run(
        [node, "--test", "--test-reporter=tap", *tests], cwd=LABEXT, capture_output=True, text=True, timeout=300
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    passed = int(re.search(r"^# pass (\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    failed = int(re.search(r"^# fail (\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert failed == 0 and passed >= 20, out
