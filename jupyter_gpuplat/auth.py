"""`jupyter_gpuplat.auth.TokenMapIdentityProvider`: the name config files give; the code is `service/auth.py`."""

import sys

from .service import auth as _moved
from .service.auth import TokenMapIdentityProvider as TokenMapIdentityProvider

sys.modules[__name__] = _moved
