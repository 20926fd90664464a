"""`python -m jupyter_gpuplat.cli ...`: the same as the `gpuplat` console script."""

import sys

from .main import main

sys.exit(main())
