"""pyinfra settings for podstate; pyinfra reads config.py from the working directory.

It is the first podstate code a run loads, so it also replaces pyinfra's Ctrl-C handler
(which exits 0, as if the run had succeeded) with podstate's.
"""

from pyinfra import config

from podstate import signals
from podstate.settings import CONNECT_TIMEOUT, PARALLEL

signals.install()
config.CONNECT_TIMEOUT = CONNECT_TIMEOUT
config.PARALLEL = PARALLEL
