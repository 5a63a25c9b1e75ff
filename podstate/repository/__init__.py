"""A repository of the user's own: what ``podstate init`` writes, and its starter files' age."""
