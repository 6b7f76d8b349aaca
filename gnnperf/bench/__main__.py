"""``python -m gnnperf.bench``: the same as ``gnnperf bench``.

The command line (options, one-line errors, ``--debug``) lives in :mod:`gnnperf.cli`, which
drives the benchmark library; this entry only forwards to it, so the library never imports
the command line.
"""

import sys

from gnnperf.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
