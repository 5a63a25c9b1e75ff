"""The handlers of the ``podstate`` subcommands, one module for each kind of work, each
imported only when one of its subcommands runs (``podstate.arguments`` names them)."""
