"""`python -m jupyter_gpuplat.nbrun NOTEBOOK`: the path every notebook run's command carries.

Stored runs, Kubernetes images with another version and scripts sent by remote mode name this
path (`core.request.NBRUN`), so it stays runnable; the code is `run/nbrun.py`, and imported,
this name is that module.
"""

import sys

from .run import nbrun as _moved

if __name__ == "__main__":
    sys.exit(_moved.main(sys.argv[1:]))
sys.modules[__name__] = _moved
