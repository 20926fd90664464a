"""Default run names (core/naming.py): a run is named after what it runs, a sweep child after what differs."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.naming import MAX_NAME, child_name, command_name


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["python", "crash.py"], "crash.py"),
        (["python", "-m", "pkg.train"], "pkg.train"),
        (["/usr/bin/python3.11", "-u", "jobs/train.py", "--lr", "1"], "train.py"),
        ("python train.py --lr 0.1", "train.py"),  # a shell string
        (["FOO=1", "bash", "run.sh"], "run.sh"),
        (["env", "-i", "A=1", "python", "-mfoo"], "foo"),
        (["python", "-c", "print(1)"], "python -c"),
        (["sleep", "60"], "sleep"),
        ("true", "true"),
        ([], None),
        ("", None),
    ],
)
def test_a_run_is_named_after_what_it_runs(command: list[str] | str, name: str | None) -> None:
    assert command_name(command) == name


def test_a_sweep_child_is_named_by_the_params_that_differ() -> None:
    point: dict[str, Any] = {"lr": 0.30000000000000004, "k": 2}
    assert child_name("train.py", point) == "train.py · lr=0.3, k=2"
    assert len(child_name("x" * 200, point)) == MAX_NAME
