"""Near-miss suggestions for mistyped flags, subcommands and magic options ("did you mean …")."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from typing import NoReturn

__all__ = ["SuggestingParser", "did_you_mean"]

# difflib's default cutoff (0.6) keeps "--parm" -> "--param" and "subimt" -> "submit" but not
# unrelated words; one answer only, so a message never offers a list to choose from.
_CUTOFF = 0.6


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word``, or None when none is close or ``word`` is itself a choice."""
    options = [c for c in dict.fromkeys(choices) if c]
    if not word or word in options:
        return None
    close = difflib.get_close_matches(word, options, n=1, cutoff=_CUTOFF)
    if close:
        return close[0]
    # "--parm=lr=1" or "-P" style: compare the flag part alone, case-insensitively.
    head = word.split("=", 1)[0]
    lowered = {c.lower(): c for c in options}
    if head.lower() in lowered and head != word:
        return lowered[head.lower()]
    close = difflib.get_close_matches(head.lower(), list(lowered), n=1, cutoff=_CUTOFF)
    return lowered[close[0]] if close else None


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")
_UNRECOGNIZED = "unrecognized arguments: "


class SuggestingParser(argparse.ArgumentParser):
    """argparse with "did you mean" for an unknown subcommand, action or flag (Python 3.11 has no suggest_on_error)."""

    def error(self, message: str) -> NoReturn:
        m = _INVALID_CHOICE.search(message)
        if m:
            choices = [c.strip().strip("'") for c in m["choices"].split(",")]
            near = did_you_mean(m["word"], choices)
            if near:
                message = f"{message[: m.start()]}invalid choice: '{m['word']}'; did you mean '{near}'? " + (
                    f"(choose from {m['choices']})"
                )
        elif message.startswith(_UNRECOGNIZED):
            self.unrecognized(message[len(_UNRECOGNIZED) :].split())
        super().error(message)

    def flags(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]

    def unrecognized(self, extra: Iterable[str]) -> NoReturn:
        """Refuse arguments no option took: name the first unknown flag and its nearest known one."""
        extra = list(extra)
        flag = next((w for w in extra if w.startswith("-") and w != "-"), None)
        if flag is None:
            super().error(f"{_UNRECOGNIZED}{' '.join(extra)}")
        known = self.flags()
        if flag.startswith("--"):
            known = [k for k in known if k.startswith("--")]
        near = did_you_mean(flag.split("=", 1)[0], known)
        super().error(f"unrecognized argument {flag}" + (f"; did you mean {near}?" if near else ""))
