# podstate starter file, version 1 (podstate init --update rewrites it)
"""pyinfra's settings for podstate: pyinfra reads config.py from the working directory.

It is the first code of podstate's a run loads: Ctrl-C handling, the open-files limit, the
connect timeout and the parallelism (podstate.inventory.entry.configure).
"""

from podstate.inventory.entry import configure

configure()
