"""``python -m gnnperf.measure --worker``: the measurement worker process (internal)."""

import sys

from gnnperf.measure.worker import worker_main

if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker_main()
    else:
        sys.exit("usage: python -m gnnperf.measure --worker  (internal)")
