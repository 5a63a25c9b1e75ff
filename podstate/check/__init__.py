"""``podstate check`` and ``podstate wait``: planning to verdicts, shards and reports."""
