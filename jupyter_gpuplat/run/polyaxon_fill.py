"""The step a Polyaxon sweep child's command starts with: `{{ param }}` filled from its params.

`python -m jupyter_gpuplat.polyaxon fill -- ARGV...` (`core.polyaxon_op.FILL`) runs here, inside
the run: it reads GPUPLAT_PARAMS, fills each `{{ name }}` the way Polyaxon templates them, and
execs the result. The file side of Polyaxon (`gpuplat import polyaxon`, `submit -f`) is
`cli/polyaxon.py`.
"""

from __future__ import annotations

import json
import os
import sys

from ..core.polyaxon import TEMPLATE


def fill(argv: list[str]) -> int:
    """Run argv with `{{ name }}` filled in from this run's params, the way Polyaxon templates them."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    params = json.loads(os.environ.get("GPUPLAT_PARAMS") or "{}")
    missing = sorted({m for a in argv for m in TEMPLATE.findall(a) if m not in params})
    if not argv or missing:
        print(f"gpuplat polyaxon fill: no param {', '.join(missing)} in GPUPLAT_PARAMS", file=sys.stderr)
        return 2
    words = [TEMPLATE.sub(lambda m: str(params[m.group(1)]), a) for a in argv]
    os.execvp(words[0], words)
    return 127  # pragma: no cover (execvp does not return)
