"""The lint gates are not tests: ruff, import-linter (the layers, no circles, the Kubernetes
emulator's one-way imports) and mypy run in `.ci/lint`. What stays here is that both ways in keep
them: the README's test command and CI (`.ci/run`) call `.ci/lint` before pytest, so a newcomer's
one command still checks everything it checked when the gates ran inside pytest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"\*\*Run the whole test suite\*\*.*?```bash\n(.+?)\n```", readme, re.S)
    assert found, "README.md: the 'Run the whole test suite' command block is missing"
    return found.group(1)


def test_the_readme_test_command_runs_the_lint_gates_then_pytest() -> None:
    command = _readme_test_command()
    assert re.search(r"&& \.ci/lint && python -m pytest\b", command), command


def test_ci_runs_the_lint_gates_then_pytest() -> None:
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    lint = steps.index(".ci/lint")
    assert steps[lint + 1].startswith("python -m pytest"), steps[lint:]


def test_the_lint_script_runs_every_gate() -> None:
    script = ROOT / ".ci" / "lint"
    assert os.access(script, os.X_OK), f"{script} is not executable"
    text = script.read_text()
    for gate in ('ruff" check', 'ruff" format --check', 'lint-imports" --no-cache', "cd emulator", 'mypy"'):
        assert gate in text, gate
