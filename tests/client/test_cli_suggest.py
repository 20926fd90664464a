"""suggest.did_you_mean: the one near-miss finder the CLI and the magics share."""

from __future__ import annotations

import pytest

from jupyter_gpuplat.client.suggest import did_you_mean

FLAGS = ["--param", "--preset", "--project", "--name", "--json", "--queue", "--gpus"]


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("--parm", FLAGS, "--param"),
        ("--prest", FLAGS, "--preset"),
        ("--projcet", FLAGS, "--project"),
        ("--jsno", FLAGS, "--json"),
        ("--parm=lr=1", FLAGS, "--param"),
        ("--PARAM", FLAGS, "--param"),
        ("subimt", ["submit", "runs", "queues", "presets"], "submit"),
        ("quees", ["submit", "runs", "queues", "presets"], "queues"),
        ("--xyzzy", FLAGS, None),
        ("", FLAGS, None),
        ("--param", FLAGS, None),  # already valid: nothing to suggest
        ("--parm", [], None),
    ],
)
def test_did_you_mean(word: str, choices: list[str], expected: str | None) -> None:
    assert did_you_mean(word, choices) == expected


def test_accepts_any_iterable_once() -> None:
    assert did_you_mean("--nmae", (f for f in FLAGS)) == "--name"
