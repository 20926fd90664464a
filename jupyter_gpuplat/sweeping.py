"""`jupyter_gpuplat.sweeping.make_matrix`: the documented name (docs/kernel.md); the code is `client/sweeping.py`."""

import sys

from .client import sweeping as _moved
from .client.sweeping import make_matrix as make_matrix

sys.modules[__name__] = _moved
