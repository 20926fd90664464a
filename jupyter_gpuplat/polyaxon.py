"""`python -m jupyter_gpuplat.polyaxon fill -- ...`: the step a Polyaxon sweep child's command starts with.

Stored sweep children and images with another version carry this path (`core.polyaxon_op.FILL`),
so it stays runnable: `fill` runs `run/polyaxon_fill.py` without loading the CLI; anything else
is `gpuplat import` (`cli/polyaxon.py`), and imported, this name is that module.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["fill"]:
        from .run.polyaxon_fill import fill

        sys.exit(fill(sys.argv[2:]))
    from .cli.polyaxon import main

    sys.exit(main())
else:
    from .cli import polyaxon as _moved

    sys.modules[__name__] = _moved
