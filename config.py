"""pyinfra settings for podstate; pyinfra reads config.py from the working directory.

It is the first podstate code a run loads, so it also replaces pyinfra's Ctrl-C handler
(which exits 0, as if the run had succeeded) with podstate's, before anything else, and
raises the open-files limit, which caps how many pods pyinfra works on at once.
"""

from podstate import signals

signals.install()

from pyinfra import config  # noqa: E402

from podstate.pyinfra_api import open_files  # noqa: E402

open_files.raise_limit()  # before the settings read pyinfra's parallelism from it

from podstate.settings import CONNECT_TIMEOUT, PARALLEL  # noqa: E402

config.CONNECT_TIMEOUT = CONNECT_TIMEOUT
config.PARALLEL = PARALLEL
