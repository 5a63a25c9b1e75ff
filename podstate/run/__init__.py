"""The machinery of a run: the role wrapper, findings, the fold and the bookkeeping operations."""
