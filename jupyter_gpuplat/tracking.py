"""`from jupyter_gpuplat import tracking`: the public name of `run/tracking.py`.

Runs' code imports this path, so it stays; it is the same module object as
`jupyter_gpuplat.run.tracking` (its state, private names and monkeypatching included).
"""

import sys

from .run import tracking as _moved
from .run.tracking import *  # noqa: F403  (the public names, for readers and type checkers)
from .run.tracking import __all__ as __all__

sys.modules[__name__] = _moved
