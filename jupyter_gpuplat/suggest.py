"""Near-miss suggestions for mistyped flags, subcommands and magic options ("did you mean …")."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]

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
