from gnnperf.cli import main

raise SystemExit(main())
