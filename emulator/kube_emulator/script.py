"""The tiny script a container's command is read as (not run): statements of words, `$VAR` expanded.

`sh -c "echo epoch 1; sleep 0.2; gate g1; echo done; exit 3"`: the kubelet steps through
`echo`, `sleep`, `gate`, `exit`, `oom`, `true`, `false`, `:`; anything else is "not found".
"""

from __future__ import annotations

import re
import shlex

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def parse_script(argv: list[str], env: dict[str, str]) -> list[list[str]]:
    """The statements of a container's command, each as words."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash") and argv[1] == "-c":
        text = argv[2]
    else:
        text = shlex.join(argv)
    text = _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)
    try:
        return _statements(text)
    except ValueError:  # not a tiny script (e.g. `python -c <source>`): the "image" lacks the program
        return [argv[:1]] if argv else []


def _statements(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&")
        lexer.whitespace_split = True
        words: list[str] = []
        for tok in lexer:
            if tok in (";", "&&", "&"):
                if words:
                    out.append(words)
                words = []
            else:
                words.append(tok)
        if words:
            out.append(words)
    return out
