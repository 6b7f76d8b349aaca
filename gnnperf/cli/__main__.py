"""``python -m gnnperf.cli``: the same as ``gnnperf``."""

import sys

from gnnperf.cli import main

sys.exit(main())
