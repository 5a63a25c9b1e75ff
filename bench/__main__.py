"""``python -m bench``: run the fleet benchmark (see bench/fleet/run.py)."""

import sys

from bench.fleet.run import main

sys.exit(main())
