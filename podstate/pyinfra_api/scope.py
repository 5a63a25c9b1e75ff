"""Which hosts podstate's replacements of pyinfra's functions answer for: its own.

podstate replaces some of pyinfra's functions for the whole process (``plan.plan_faster``,
``connect.quiet``), because pyinfra's CLI loads podstate's inventory and then runs every
deploy file in that process. A replacement that treats a host otherwise than pyinfra does
answers so only for a host of podstate's, and hands any other (another inventory's in
pyinfra's own run, one made with pyinfra's API, a test's) to pyinfra's own function.
"""

from __future__ import annotations

import weakref

from pyinfra.api import Host, State

KEY = "podstate"  # the host data key of a pod's desired state (podstate.inventory.fleet)

_CLAIMED: weakref.WeakSet[State] = weakref.WeakSet()  # the runs podstate drives itself


def claim(state: State) -> None:
    """Make every host of ``state`` (a run podstate drives: the check, the watch's lock)
    one of podstate's, whatever inventory it comes from."""
    _CLAIMED.add(state)


def ours(host: Host) -> bool:
    """Return whether ``host`` is podstate's: a pod of its inventory (the host data carries
    the desired state it gives every pod), or any host of a run podstate drives."""
    return getattr(host, "state", None) in _CLAIMED or host.data.get(KEY) is not None
