"""``python -m gnnperf.cli``: the same as ``gnnperf``."""

import sys

from . import main

sys.exit(main())
