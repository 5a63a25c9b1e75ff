"""``podstate watch``: the loop that puts pods back, and what it decides at each pass."""
