"""``python -m bench``: run the fleet benchmark (see bench/run.py)."""

import sys

from bench.fleet.run import main

sys.exit(main())
