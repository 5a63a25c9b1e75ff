"""The open-files limit, raised at start as servers raise it, and what pyinfra makes of it.

pyinfra runs at most a third of the process's soft open-files limit of connections at once
(``MAX_PARALLEL``, read when it is imported: about 338 pods at the common soft limit of
1024), and podstate's ``PODSTATE_PARALLEL`` is capped by it: a larger fleet would be worked
on in waves, silently. The hard limit is what the system allows the process; the soft one
is only where it starts.
"""

from __future__ import annotations

import resource

from pyinfra.api import state as api_state


def raise_limit() -> int:
    """Raise the process's soft open-files limit to its hard one (where the system lets it;
    otherwise leave it), tell pyinfra, and return the most connections pyinfra now runs at
    once without a warning (pyinfra's ``MAX_PARALLEL``, from the new limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # an unlimited hard limit some systems refuse as soft
            pass
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    api_state.nofile_limit = soft
    api_state.MAX_PARALLEL = round((soft - 10) / 3)  # pyinfra's own formula
    return api_state.MAX_PARALLEL
