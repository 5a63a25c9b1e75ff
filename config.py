"""pyinfra settings for podstate; pyinfra reads config.py from the working directory."""

from pyinfra import config

from podstate.settings import CONNECT_TIMEOUT, PARALLEL

config.CONNECT_TIMEOUT = CONNECT_TIMEOUT
config.PARALLEL = PARALLEL
