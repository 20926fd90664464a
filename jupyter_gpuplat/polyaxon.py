"""`python -m jupyter_gpuplat.polyaxon fill -- ...`: the step a Polyaxon sweep child's command starts with.

Stored sweep children carry this path (`core.polyaxon_op.FILL`), so it stays runnable; the
code is `cli/polyaxon.py` (`gpuplat import polyaxon`), and imported, this name is that module.
"""

import sys

from .cli import polyaxon as _moved

if __name__ == "__main__":
    sys.exit(_moved.main())
sys.modules[__name__] = _moved
