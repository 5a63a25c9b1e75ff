"""The ``podstate`` command's entry: pyinfra verified before anything that uses its
internals is imported, so that a release without one of them is one line, not a traceback."""

import sys

from podstate.pyinfra_api import deferred, entry_points


def main() -> int:
    """Return the command's exit status: 1, with one line, on a pyinfra that lacks or changed
    an internal podstate relies on (a whole module included); else the subcommand's.

    The installed packages' entry points are read once for the whole command (pyinfra asks
    for them at each inventory it makes, gevent for each of its plugin groups), and what
    pyinfra's imports bring in that a command rarely uses loads when it is used."""
    deferred.defer(*deferred.DEFERRED)
    with entry_points.read_once():  # opened first: importing pyinfra asks for them too
        from podstate.pyinfra_api.verify import Unsupported, verify

        try:
            verify()
        except Unsupported as e:
            print(f"podstate: {e}", file=sys.stderr)
            return 1
        from podstate.pyinfra_api import open_files

        open_files.raise_limit()  # before podstate's settings read pyinfra's parallelism
        from podstate.cli import main as run

        return run()


if __name__ == "__main__":
    raise SystemExit(main())
